"""The time-to-target benchmark end to end on tiny settings: results file, resume, table, plots."""

import dataclasses
import json

import pytest

import echoing
from benchmarks import plots, time_to_target as T

TINY_TASKS = {
    "resnet": dataclasses.replace(T.TASKS["resnet"], batch_size=16, budget_steps=4, eval_every=2, eval_examples=32,
                                  target=0.0, model={"depth": 8, "width": 4}),
    "transformer": dataclasses.replace(T.TASKS["transformer"], batch_size=4, budget_steps=4, eval_every=2, eval_examples=8,
                                       target=100.0, model={"sequence_length": 16, "layers_count": 1, "width": 16, "heads": 2}),
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One tiny plan over both tasks and both modes, run once for the module."""
    directory = tmp_path_factory.mktemp("ttt")
    plan = T.BenchmarkPlan(tasks=["resnet", "transformer"], factors=[2], echo_shuffles=[0, 8], seeds=[0], ratios=[2],
                           wallclock_factors=[1, 2], num_train_examples=1000,
                           placements={"resnet": ["none", "before_augment", "after_batch"], "transformer": ["none", "example"]})
    plan_runs = [r for r in T.planned_runs(plan) if not (r.task == "transformer" and r.mode == "wallclock")]
    output = directory / "time_to_target.json"
    lines = []
    T.run_plan(dataclasses.replace(plan, modes=["sample"]), output, TINY_TASKS, log=lines.append)
    T.run_plan(dataclasses.replace(plan, tasks=["resnet"], modes=["wallclock"]), output, TINY_TASKS, log=lines.append)
    return output, plan, plan_runs, lines


def test_every_planned_configuration_is_recorded(finished):
    output, _, plan_runs, _ = finished
    document = json.loads(output.read_text())
    assert {"machine", "versions", "settings", "results"} <= set(document)
    recorded = [T.RunConfig(**r["config"]).key() for r in document["results"]["runs"]]
    assert sorted(recorded) == sorted(r.key() for r in plan_runs)
    for record in document["results"]["runs"]:
        assert record["reached"]  # The tiny targets are met at the first evaluation.
        assert record["steps"] == 2 and record["seconds"] > 0
        assert record["curve"][0]["step"] == 2


def test_fresh_examples_reflect_the_echo_factor(finished):
    output, *_ = finished
    runs = {(r["config"]["mode"], r["config"]["task"], r["config"]["placement"], r["config"]["echo_shuffle"]): r
            for r in json.loads(output.read_text())["results"]["runs"]}
    base = runs[("sample", "resnet", "none", 0)]["fresh_examples"]
    assert base == 2 * 16
    assert runs[("sample", "resnet", "before_augment", 0)]["fresh_examples"] == base / 2
    assert runs[("sample", "resnet", "after_batch", 0)]["fresh_examples"] == base / 2
    assert runs[("sample", "transformer", "example", 0)]["fresh_examples"] == 2 * 4 / 2
    assert runs[("sample", "resnet", "before_augment", 8)]["fresh_examples"] == (2 * 16 + 8) / 2
    assert runs[("sample", "resnet", "after_batch", 8)]["fresh_examples"] == (2 + 8) * 16 / 2


def test_wallclock_mode_measures_r_and_predicts_time(finished):
    output, *_ = finished
    results = json.loads(output.read_text())["results"]
    (key, rates), = results["rates"].items()
    assert key == "resnet/R=2/seed=0" and rates["read_rate"] > 0 and rates["measured_ratio"] > 0
    wall = [r for r in results["runs"] if r["config"]["mode"] == "wallclock"]
    assert sorted(r["config"]["factor"] for r in wall) == [1.0, 2.0]
    assert all(r["predicted_seconds"] > 0 for r in wall)
    assert all(r["rates"] == rates for r in wall)  # Measured once per R, kept with each record.
    (best,) = T.best_factors(json.loads(output.read_text()))
    fastest = min(wall, key=lambda r: r["seconds"])
    assert best["best_factor"] == fastest["config"]["factor"] and best["factors_run"] == [1.0, 2.0]
    base = next(r for r in wall if r["config"]["factor"] == 1.0)
    assert best["speedup"] == pytest.approx(base["seconds"] / fastest["seconds"])
    assert best["measured_ratio"] == pytest.approx(rates["measured_ratio"])
    assert f"| resnet | 2 | {rates['measured_ratio']:.2f} | 1, 2 |" in T.best_factor_table(json.loads(output.read_text()))


def test_rerun_skips_finished_configurations(finished):
    output, plan, _, _ = finished
    before = output.read_text()
    lines = []
    T.run_plan(dataclasses.replace(plan, modes=["sample"]), output, TINY_TASKS, log=lines.append)
    assert lines == []
    assert json.loads(output.read_text())["results"]["runs"] == json.loads(before)["results"]["runs"]


def test_progress_is_shown(finished):
    *_, lines = finished
    assert any(line.startswith("[1/") for line in lines)
    assert any("metric" in line and "to budget" in line for line in lines)


def test_table_and_plots_are_generated_from_the_results_file(finished):
    output, *_ = finished
    from benchmarks import results_io

    table = T.table(results_io.read_results(output))
    assert "| sample | resnet | - | before_augment | 2 | 0 | 1/1 | 16 | 0.50 |" in table
    written = plots.plot_all(output)
    names = sorted(path.name for path in written)
    assert "time_to_target_resnet_fresh_vs_factor.png" in names
    assert "time_to_target_resnet_time_vs_factor.png" in names
    assert "time_to_target_resnet_fresh_vs_shuffle.png" in names
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_fresh_examples_consumed_uses_the_realised_factor():
    stats = echoing.EchoStats()
    stats.fresh.assign(100)
    stats.emitted.assign(250)
    assert T.fresh_examples_consumed(10, 16, 16, stats) == pytest.approx(10 * 16 / 2.5)
    assert T.fresh_examples_consumed(10, 1, 16, stats) == pytest.approx(10 * 16 / 2.5)


def test_an_echo_shuffle_buffer_counts_the_fresh_examples_it_holds():
    stats = echoing.EchoStats()
    stats.fresh.assign(100)
    stats.emitted.assign(200)
    # 10 steps of 16 examples, plus a full buffer of 8 examples, each a copy of half a fresh one.
    assert T.fresh_examples_consumed(10, 16, 16, stats, echo_shuffle=8) == pytest.approx((160 + 8) / 2)
    # Batch echoing: 10 batches consumed plus 4 buffered batches.
    assert T.fresh_examples_consumed(10, 1, 16, stats, echo_shuffle=4) == pytest.approx(14 * 16 / 2)


def test_command_line_narrows_the_plan():
    _, plan = T.parse_arguments(["--tasks", "transformer", "--modes", "sample", "--seeds", "0", "--placements", "none", "example",
                                 "--factors", "2", "4", "--echo-shuffles", "0"])
    runs = T.planned_runs(plan)
    assert [(r.placement, r.factor, r.echo_shuffle) for r in runs] == [("none", 1.0, 0), ("example", 2.0, 0), ("example", 4.0, 0)]
    _, plan = T.parse_arguments(["--tasks", "resnet", "--modes", "wallclock", "--ratios", "2", "--wallclock-factors", "1", "2"])
    assert [(r.ratio, r.factor, r.placement) for r in T.planned_runs(plan) if r.seed == 0] == [(2.0, 1.0, "none"), (2.0, 2.0, "before_augment")]
    with pytest.raises(SystemExit):
        T.parse_arguments(["--placements", "nowhere"])


def test_two_processes_filling_one_results_file_keep_each_others_records(tmp_path):
    path = tmp_path / "shared.json"
    first, second = T.ResultsFile(path, {}), T.ResultsFile(path, {})  # Both opened before either writes.

    def record(placement):
        return {"config": dataclasses.asdict(T.RunConfig("sample", "resnet", placement, 2.0, 0, 0)), "reached": False}

    first.add(record("before_augment"))
    second.extra.setdefault("rates", {})["resnet/R=2/seed=0"] = {"read_rate": 1.0}
    second.add(record("after_batch"))
    first.extra.setdefault("rates", {})["resnet/R=4/seed=0"] = {"read_rate": 2.0}
    first.add(record("after_augment"))
    first.add(record("after_augment"))  # Again: replaces, does not duplicate.
    placements = [r["config"]["placement"] for r in json.loads(path.read_text())["results"]["runs"]]
    assert sorted(placements) == ["after_augment", "after_batch", "before_augment"]
    assert set(json.loads(path.read_text())["results"]["rates"]) == {"resnet/R=2/seed=0", "resnet/R=4/seed=0"}
