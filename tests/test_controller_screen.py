"""The screen of a law change (benchmarks/controller_screen.py): the sweep's figures for the law, from kept fixed factors."""

import json
import math
import statistics

import pytest

from benchmarks import controller_screen as screen
from benchmarks import controller_sweep as sweep

SEEDS = [3, 4, 5]


@pytest.fixture(scope="module")
def screened(tmp_path_factory):
    return screen.screen(SEEDS, processes=1, cache_dir=tmp_path_factory.mktemp("cache"))


def test_a_screen_gives_the_sweeps_times_for_the_law_and_the_best_fixed_factor(screened):
    law, fixed = screened
    for seed in SEEDS:
        results, _ = sweep.judge(sweep.draw_case(seed))
        for result in (r for r in results if r.contender == sweep.Contender.LAW):
            assert law[seed][result.slope] == result.seconds
            assert min(fixed[seed][result.slope].values()) == result.best_seconds
            assert fixed[seed][result.slope][1.0] == result.none_seconds


def test_the_fixed_times_are_kept_and_read_back_without_running_again(tmp_path, monkeypatch):
    first = screen.FixedCache(tmp_path).times([7], processes=1)

    def must_not_run(*args):
        raise AssertionError("a kept loop was run again")

    monkeypatch.setattr(screen, "fixed_times", must_not_run)
    assert screen.FixedCache(tmp_path).times([7], processes=1) == first


def test_a_change_to_what_a_fixed_run_depends_on_keeps_its_times_apart(tmp_path, monkeypatch):
    before = screen.FixedCache(tmp_path).path
    monkeypatch.setattr(screen, "GRID_RATIO", screen.GRID_RATIO * 1.1)
    assert screen.FixedCache(tmp_path).path != before


def test_moved_loops_are_named_each_way_and_unmoved_ones_are_not():
    fixed = {1: {0.05: {1.0: 10.0}}, 2: {0.05: {1.0: 10.0}}, 3: {0.05: {1.0: 10.0}}}
    before = {1: {0.05: 10.0}, 2: {0.05: 12.0}, 3: {0.05: 11.0}}
    after = {1: {0.05: 10.0}, 2: {0.05: 10.5}, 3: {0.05: 13.0}}
    line = screen.moved_lines(after, before, fixed, 0.05)
    assert line == "c = 0.05: 2 of 3 loops moved; faster: 2: 1.200 -> 1.050; slower: 3: 1.100 -> 1.300"


def test_the_summary_reads_the_distribution_as_the_sweep_does(screened):
    law, fixed = screened
    over = screen.over_best(law, fixed, 0.05)
    worst = max(over, key=over.get)
    assert screen.summary_line(law, fixed, 0.05).startswith(f"c = 0.05: {statistics.median(over.values()):.3f} / ")
    assert f"{over[worst]:.3f} ({worst})" in screen.summary_line(law, fixed, 0.05)


@pytest.mark.parametrize("argv, named", [(["--cases", "0"], "--cases"), (["--processes", "0"], "--processes"),
                                         (["--against", "no-such-screen.json"], "--against"),
                                         (["--family", "deep-stock", "--reading-errors"], "--reading-errors")])
def test_bad_arguments_are_refused_naming_the_argument_and_the_value(argv, named, capsys):
    with pytest.raises(SystemExit):
        screen.main(argv)
    error = capsys.readouterr().err
    assert named in error and argv[1] in error


def test_a_screen_written_is_read_back_to_compare_against(tmp_path, capsys):
    argv = ["--first-seed", "3", "--cases", "2", "--processes", "1", "--cache-dir", str(tmp_path / "cache"),
            "--output-dir", str(tmp_path / "first")]
    screen.main(argv)
    screen.main(argv[:-1] + [str(tmp_path / "second"), "--against", str(tmp_path / "first" / "controller_screen.json")])
    printed = capsys.readouterr().out
    assert "c = 0.05: 0 of 2 loops moved" in printed and "c = 0.19: 0 of 2 loops moved" in printed


def one_loop_screen(tmp_path, edit_settings=None):
    """A screen of one loop written to ``tmp_path``, its settings edited in place: (its argv, its file)."""
    argv = ["--first-seed", "3", "--cases", "1", "--processes", "1", "--cache-dir", str(tmp_path / "cache"),
            "--output-dir", str(tmp_path)]
    screen.main(argv)
    written = tmp_path / "controller_screen.json"
    if edit_settings is not None:
        document = json.loads(written.read_text())
        edit_settings(document["settings"])
        written.write_text(json.dumps(document))
    return argv, written


def test_a_screen_judged_at_other_slopes_is_refused_as_a_comparison(tmp_path, capsys):
    argv, written = one_loop_screen(tmp_path, lambda settings: settings.update(slopes=[0.1, 0.2]))
    with pytest.raises(SystemExit):
        screen.main(argv + ["--against", str(written)])
    assert "--against" in capsys.readouterr().err


def test_reading_errors_are_each_readings_step_rate_against_the_fixed_runs_at_its_factor(tmp_path):
    steady = next(seed for seed in range(50) if sweep.draw_case(seed).change == sweep.Change.NONE)
    changing = next(seed for seed in range(50) if sweep.draw_case(seed).change != sweep.Change.NONE)
    fixed = screen.FixedCache(tmp_path).times([steady, changing], processes=1)
    assert screen.reading_errors_of(changing, fixed[changing][0.19]) == []  # R changes: no steady rate to hold to
    errors = screen.reading_errors_of(steady, fixed[steady][0.19])
    case = sweep.draw_case(steady)
    law = sweep.the_law(case)
    sweep.run_controlled(case, law)
    readings = [d.reading for d in law.decisions if d.reading is not None and d.step >= screen.READING_ERRORS_FROM_STEP]
    assert len(errors) == len(readings) > 0
    for error, reading in zip(errors, readings):
        assert error == pytest.approx(math.log(reading.step_rate / screen.step_rate_at(fixed[steady][0.19], reading.factor)))


def test_a_screen_with_reading_errors_writes_them_and_reads_them_back(tmp_path, capsys):
    screen.main(["--first-seed", "0", "--cases", "12", "--processes", "1", "--cache-dir", str(tmp_path / "cache"),
                 "--output-dir", str(tmp_path), "--reading-errors"])
    assert "median |error|" in capsys.readouterr().out
    _, stored = screen.results_io.typed(screen.results_io.read_results(tmp_path / "controller_screen.json"),
                                        screen.ScreenSettings, screen.ScreenResults)
    assert stored.reading_errors and all(r.readings > 0 and r.median_abs <= r.p75_abs for r in stored.reading_errors)


def test_the_deep_stock_family_is_screened_with_its_own_loops_progress_and_kept_times(tmp_path, capsys):
    family = screen.DEEP_STOCK
    case = family.draw(1000)
    assert case == family.draw(1000) != sweep.draw_case(1000)
    assert case.change == sweep.Change.NONE and 64 <= case.upstream_batches <= 512 and case.lump_batches >= 4
    assert screen.FixedCache(tmp_path, family).path != screen.FixedCache(tmp_path).path
    screen.main(["--family", "deep-stock", "--first-seed", "1000", "--cases", "2", "--processes", "1",
                 "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "of the deep-stock family" in printed and "the reference told the true R" in printed
    settings, stored = screen.results_io.typed(screen.results_io.read_results(tmp_path / "controller_screen.json"),
                                               screen.ScreenSettings, screen.ScreenResults)
    assert settings.family == "deep-stock" and settings.progress == family.progress
    law = {loop.seed: dict(zip(settings.slopes, loop.seconds)) for loop in stored.law}
    assert law[1000] == screen.law_times(1000, family)


def test_the_told_ratio_reference_is_the_sweeps():
    family = screen.DEEP_STOCK
    case = family.draw(1000)
    run = sweep.run_controlled(case, sweep.ToldRatio(case), family.progress)
    assert screen.told_ratio_times(1000, family) == {s: run.time_to_progress(family.progress, s) for s in screen.SLOPES}
    knee = min(case.max_factor, 1.05 * case.ratio)
    assert run.factors[-1] == knee and set(run.factors) <= {1.0, knee}  # 1 until its first call sets the knee


def test_a_screen_of_another_family_is_refused_as_a_comparison(tmp_path, capsys):
    argv, written = one_loop_screen(tmp_path)
    with pytest.raises(SystemExit):
        screen.main(argv + ["--family", "deep-stock", "--against", str(written)])
    error = capsys.readouterr().err
    assert "--against" in error and "sweep" in error and "deep-stock" in error


def test_a_screen_written_before_the_families_is_read_as_the_sweeps(tmp_path, capsys):
    argv, written = one_loop_screen(tmp_path, lambda settings: settings.pop("family"))
    screen.main(argv + ["--against", str(written)])
    assert "c = 0.05: 0 of 1 loops moved" in capsys.readouterr().out
