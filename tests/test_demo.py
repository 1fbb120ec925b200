"""The main job on tiny settings: it trains, replays, reports and draws, and refuses bad options."""


import pytest

from benchmarks import demo
from echoing import Cause
from benchmarks.lib import results_io
from benchmarks.lib.run_records import RunConfig, Trained

@pytest.fixture(scope="module")
def document(tmp_path_factory):
    """``python -m benchmarks.demo --quick``, run as a user would, into a temporary folder."""
    directory = tmp_path_factory.mktemp("demo")
    lines = []
    original = demo.run
    demo.run = lambda config, **kw: original(config, log=lines.append, **kw)  # Keep its progress lines.
    try:
        demo.main(["--quick", "--output-dir", str(directory)])
    finally:
        demo.run = original
    return results_io.read_results(directory / "demo_quick.json"), directory, lines


def results_of(document):
    return demo.typed(document)[1]


def test_every_run_reaches_the_tiny_target_and_is_timed(document):
    document, *_ = document
    baseline, auto, fixed = results_of(document).runs
    assert (baseline.is_baseline, auto.is_auto_echo, auto.config.max_factor, fixed.config.factor) == (True, True, 8.0, 2.0)
    for run in (baseline, auto, fixed):
        assert run.reached and run.steps == 2  # Two evaluations in a row; the first counts.
        assert run.seconds >= 2 * 0.01
    assert fixed.fresh_examples == baseline.fresh_examples / 2
    decisions = results_of(document).auto_echo.decisions
    assert decisions and decisions[0].step == 0 and decisions[0].cause == Cause.START  # Records, not sentences.


def test_a_run_record_with_a_field_missing_or_both_factors_is_refused(document):
    document, *_ = document
    record = results_of(document).runs[2].record()
    with pytest.raises(ValueError, match="DemoRun: the record has no field 'trained'"):
        demo.DemoRun.from_record({k: v for k, v in record.items() if k != "trained"})
    with pytest.raises(ValueError, match="factor, max_factor: a fixed run needs a factor and no max_factor"):
        demo.DemoRun.from_record({**record, "config": {**record["config"], "max_factor": 8.0}})


def test_table_and_plot(document):
    document, directory, lines = document
    table = demo.table(document)
    assert table.splitlines()[2].startswith("| baseline | 1 | 2 | 32 | 1.00 |")
    assert "| e=2 | 2 | 2 | 16 | 0.50 |" in table
    assert "measured" in table and "one seed" in table
    results = results_of(document)
    assert 0 < results.data_seconds < results.job_seconds
    assert f"The job took {results.job_seconds / 60:.1f} minutes" in table
    assert (directory / "demo_quick.png").read_bytes()[:4] == b"\x89PNG"
    assert any("measured R" in line for line in lines)


def test_command_line_refuses_a_factor_below_one(capsys):
    with pytest.raises(SystemExit):
        demo.main(["--fixed-factor", "0.5"])
    assert "--fixed-factor" in capsys.readouterr().err


def test_the_fixed_factor_runs_by_default_and_can_be_left_out():
    assert demo.parse_config([])[0].fixed_factor == 4.0  # e = R, the best fixed e at R=4 in the full runs.
    assert demo.parse_config(["--quick"])[0] == demo.QUICK
    assert demo.parse_config(["--quick", "--fixed-factor", "3"])[0].fixed_factor == 3.0
    assert demo.parse_config(["--fixed-factor", "6"])[0].fixed_factor == 6.0
    assert demo.parse_config(["--no-fixed-factor"])[0].fixed_factor is None


def test_a_fixed_factor_and_none_together_are_refused(capsys):
    with pytest.raises(SystemExit):
        demo.parse_config(["--fixed-factor", "6", "--no-fixed-factor"])
    assert "--no-fixed-factor" in capsys.readouterr().err


def _run(name, placement, factor, max_factor, seconds, steps):
    config = RunConfig("replay", "resnet", placement, factor, 0, 0, 4.0, max_factor is not None, max_factor)
    return demo.DemoRun(name, config, Trained(seconds is not None, steps, 0.0, 1.0, 1.0, ()), seconds, None)


def test_the_verdict_says_what_it_can_compare():
    auto = _run("AutoEcho", "before_augment", None, 8.0, 10.0, 100)
    alone = [_run("baseline", "none", 1.0, None, None, None), auto]
    assert demo.verdict(alone) == "AutoEcho reached the target; the baseline did not within its budget."
    without_fixed = [_run("baseline", "none", 1.0, None, 40.0, 80), auto]
    assert demo.verdict(without_fixed) == "AutoEcho took 0.25x the baseline time to target."
    missed = [_run("AutoEcho", "before_augment", None, 8.0, None, None)]
    assert demo.verdict(missed) == "AutoEcho did not reach the target within its replay."
    # Steps apart by more than the seeds' own spread at the fixed factor are said to be.
    fixed = _run("e=4", "before_augment", 4.0, None, 11.0, 110)  # AutoEcho needed 0.91x its steps.
    assert demo.verdict([*without_fixed, fixed], (0.84, 1.24, 9)).endswith("cannot tell the two apart by steps.")
    assert demo.verdict([*without_fixed, fixed], (0.97, 1.03, 9)).endswith("beyond that spread.")


def test_the_seed_spread_comes_from_the_committed_runs_of_nine_seeds():
    low, high, seeds = demo.seed_spread(4.0)
    assert seeds == 9 and low < 1.0 < high
    assert demo.seed_spread(3.0) is None  # No committed runs at that factor.
