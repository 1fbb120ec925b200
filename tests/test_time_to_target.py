"""The time-to-target benchmark end to end on tiny settings: crossing rule, counting, replay, resume, tables, plots."""

import collections
import dataclasses
import json

import pytest

import echoing
from echoing import Cause, Phase

from benchmarks import time_to_target as T
from benchmarks.lib import plans, plots, reporting, results_io, upkeep
from benchmarks.lib.reporting import Measure
from benchmarks.lib.timelines import AutoEchoTimeline, Decision
from benchmarks.lib.run_records import (AutoEchoRun, CurvePoint, SavedTimeline, Trained, MeasuredPipeline, MeasuredRates, PipelineMeasure,
                                        PipelineOf, RateRound, Rates, RatesOf, RunConfig, SampleRun, TimedRun,
                                        TimeToTargetResults, read_run, time_to_target)
from benchmarks.lib.tasks import EMBEDDED, TASKS, DataOptions, RunSpec, fixed_run
from benchmarks.lib.training import crossing, fresh_examples, scheduled_fresh_examples

# A small input shuffle buffer: the tasks' 10,000 would read the 1,000 tiny training
# examples ten times over before each run's first batch (14 of the fixture's 49 s).
TINY_SHUFFLE = {"shuffle_buffer_size": 64}
TINY_TASKS = {
    "resnet": TASKS["resnet"].with_settings(batch_size=16, budget_steps=8, eval_every=2, eval_examples=32, target=0.0,
                                            model={"depth": 8, "width": 4}, jit_compile=False,
                                            pipeline={**TASKS["resnet"].settings.pipeline, **TINY_SHUFFLE}),
    "transformer": TASKS["transformer"].with_settings(batch_size=4, budget_steps=8, eval_every=2, eval_examples=8, target=100.0,
                                                      model={"sequence_length": 16, "layers_count": 1, "width": 16, "heads": 2}, jit_compile=False,
                                                      pipeline={**TASKS["transformer"].settings.pipeline, **TINY_SHUFFLE}),
}
STEP_SECONDS = 0.01


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One tiny plan: both tasks in sample mode, then the ResNet replayed at R=2 with AutoEcho."""
    directory = tmp_path_factory.mktemp("ttt")
    plan = plans.BenchmarkPlan(tasks=["resnet", "transformer"], modes=["sample"], factors=[2], echo_shuffle_batches=[2, 0],
                           seeds=[0], ratios=[2], replay_factors=[1, 2], step_seconds=STEP_SECONDS, num_train_examples=1000,
                           placements={"resnet": ["none", "before_augment", "after_batch"], "transformer": ["none", "example"]})
    output = directory / "time_to_target.json"
    lines = []
    T.run_plan(plan, output, TINY_TASKS, log=lines.append)
    # The timed part alone first (as on a shared machine), then AutoEcho's training on it.
    replays = dataclasses.replace(plan, tasks=["resnet"], modes=["replay"])
    T.run_plan(dataclasses.replace(replays, time_only=True), output, TINY_TASKS, log=lines.append)
    timed_only = json.loads(output.read_text())
    T.run_plan(replays, output, TINY_TASKS, log=lines.append)
    return output, plan, lines, timed_only


def run_spec(task, placement, factor, echo_shuffle, *, cache_dir=None, num_train_examples=None):
    return fixed_run(task, DataOptions(source=None, cache_dir=cache_dir, num_train_examples=num_train_examples),
                     placement, factor, echo_shuffle)


def test_a_run_spec_refuses_bad_settings_by_name():
    task = TINY_TASKS["resnet"]
    spec = run_spec(task, "before_augment", 2.0, 0)
    for changes, message in (({"placement": "nowhere"}, "placement: expected one of"), ({"factor": 0.5}, "factor: expected"),
                             ({"echo_shuffle": -1}, "echo_shuffle: expected an int >= 0, got -1"),
                             ({"task": "chess"}, "task: expected one of")):
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(spec.run, **changes)
    with pytest.raises(ValueError, match="read_rate: expected a positive number"):
        spec.throttled(0.0)
    with pytest.raises(ValueError, match="placement: expected one of"):  # A placement the task has not.
        RunSpec(TINY_TASKS["transformer"], dataclasses.replace(spec.run, task="transformer"), spec.data)
    with pytest.raises(ValueError, match="run: a run of task 'transformer'"):
        RunSpec(task, dataclasses.replace(spec.run, task="transformer", placement="none"), spec.data)
    baseline = run_spec(task, "none", 1.0, 0).echo_config()
    assert (baseline.placement, baseline.factor) == (task.default_point, 1.0)  # The baseline counts as e = 1.
    with pytest.raises(ValueError, match="spec: a run of"):
        TINY_TASKS["transformer"].pipeline_config(run_spec(task, "none", 1.0, 0))


def results_of(output) -> TimeToTargetResults:
    return reporting.results_of(results_io.read_results(output))


def records(output, mode):
    return [r for r in results_of(output).runs if r.config.mode == mode]


def sample(config, steps, fresh, reached=True):
    """A sample run's record with what reports read; the rest plain."""
    return SampleRun(reached, steps, fresh, 1.0, 1.0, (), config, 0.8, "python -m benchmarks.time_to_target")


def timed(config, steps, seconds=None, seconds_in_steps=None, fresh=1.0):
    return TimedRun(config, 0.8, steps, True, fresh, steps, seconds, "python -m benchmarks.time_to_target",
                    seconds_in_steps=seconds_in_steps)


def auto(config, steps, seconds=None, seconds_in_steps=None):
    return AutoEchoRun(config, 0.8, Trained(True, steps, 1.0, 1.0, 1.0, ()), seconds, "python -m benchmarks.time_to_target",
                       seconds_in_steps=seconds_in_steps)


def held_at(config, factor) -> SavedTimeline:
    """A saved AutoEcho timeline of ``config`` that held ``factor`` from step 10."""
    hold = Decision(10, factor, 1.0, Phase.HOLD, Cause.MEASURED, "the input cannot keep up")
    return SavedTimeline(config, AutoEchoTimeline((0.1,), (factor,), 0.0, (hold,), None, echoing.controller.LAW))


def test_every_planned_sample_run_is_recorded_and_confirmed_by_a_second_evaluation(finished):
    output, plan, *_ = finished
    recorded = collections.Counter(r.config for r in records(output, "sample"))
    assert recorded == collections.Counter(plans.planned_sample_runs(plan, TINY_TASKS))
    for record in records(output, "sample"):
        assert record.reached  # The tiny targets are met at every evaluation...
        assert record.steps == 2  # ...so the first of two in a row is the one at step 2,
        assert [p.step for p in record.curve] == [2, 4]  # and training stops at the second.


def test_no_buffer_fill_is_counted_as_fresh(finished):
    output, *_ = finished
    runs = {(r.config.task, r.config.placement, r.config.echo_shuffle): r.fresh_examples
            for r in records(output, "sample")}
    assert runs[("resnet", "none", 0)] == 2 * 16
    # The echo shuffle buffer (2 batches' worth: 32 examples, or 2 batches) changes nothing.
    assert runs[("resnet", "before_augment", 0)] == runs[("resnet", "before_augment", 32)] == 2 * 16 / 2
    assert runs[("resnet", "after_batch", 0)] == runs[("resnet", "after_batch", 2)] == 2 * 16 / 2
    assert runs[("transformer", "example", 0)] == 2 * 4 / 2


def test_echo_shuffle_buffers_are_given_in_batches_worth():
    task = TASKS["resnet"]
    assert plans.echo_shuffle_elements(task, "before_augment", 8) == 8 * 128
    assert plans.echo_shuffle_elements(task, "after_batch", 8) == 8
    assert plans.echo_shuffle_elements(task, "none", 8) == 0


def test_crossing_needs_two_evaluations_in_a_row():
    task = TASKS["resnet"].with_settings(target=0.8)
    curve = [CurvePoint(s, 0.0, 0.0, m) for s, m in [(25, 0.81), (50, 0.78), (75, 0.80), (100, 0.83)]]
    assert crossing(curve, task).step == 75  # The lucky 0.81 at step 25 alone does not count.
    assert crossing(curve[:3], task) is None
    lower = TASKS["transformer"].with_settings(target=2.5)
    curve = [CurvePoint(s, 0.0, 0.0, m) for s, m in [(50, 2.6), (100, 2.4), (150, 2.45)]]
    assert crossing(curve, lower).step == 100


def test_a_run_that_never_meets_the_target_is_not_reached(tmp_path):
    task = TINY_TASKS["resnet"].with_settings(target=1.01, budget_steps=4)
    from benchmarks.lib.training import train_to_target

    record = train_to_target(run_spec(task, "none", 1.0, 0, num_train_examples=1000), log=lambda line: None)
    assert not record.reached and record.steps is None and record.fresh_examples is None
    assert [p.step for p in record.curve] == [2, 4]


def test_fresh_examples_for_constant_and_scheduled_factors():
    task = TASKS["resnet"]
    assert fresh_examples(task, "before_augment", 10, 2.5) == pytest.approx(10 * 128 / 2.5)
    assert fresh_examples(task, "after_batch", 10, 2.5) == pytest.approx(10 * 128 / 2.5)
    assert scheduled_fresh_examples(task, "before_augment", [1, 1, 2, 4], 4) == pytest.approx(128 * (1 + 1 + 0.5 + 0.25))
    # Steps past the schedule's end run at its last factor.
    assert scheduled_fresh_examples(task, "before_augment", [1, 2], 4) == pytest.approx(128 * (1 + 0.5 + 0.5 + 0.5))


def test_replays_time_the_sample_runs_steps_with_their_best_echo_shuffle(finished):
    output, *_ = finished
    results = results_of(output)
    fixed = [r for r in records(output, "replay") if not r.config.auto_echo]
    assert sorted((r.config.placement, r.config.factor) for r in fixed) == [("before_augment", 2.0), ("none", 1.0)]
    for record in fixed:
        found = plans.find_sample(results.runs, record.config)
        assert record.steps == found.steps == 2
        assert record.seconds >= 2 * STEP_SECONDS and record.startup_seconds > 0
    (measured,) = results.pipelines
    assert measured.of.record() == {"task": "resnet", "ratio": 2.0, "seed": 0, "step_seconds": STEP_SECONDS}
    assert measured.value.read_rate == pytest.approx(16 / (2 * STEP_SECONDS))
    assert measured.value.measured_ratio > 0 and measured.value.cpu_seconds_per_batch > 0
    assert all(record.pipeline == measured.value for record in fixed)


def test_auto_echo_is_replayed_then_trained_on_its_choices(finished):
    output, *_ = finished
    (run,) = [r for r in records(output, "replay") if r.config.auto_echo]
    assert isinstance(run, AutoEchoRun)
    assert run.config.factor is None and run.config.max_factor == 2.0  # The largest replayed factor.
    decisions = results_of(output).timeline_of(run.config).decisions  # What it chose: its saved timeline.
    assert decisions and (decisions[0].step, decisions[0].phase, decisions[0].cause) == (0, Phase.OPEN, Cause.START)
    assert run.reached and run.steps == 2 and run.seconds > 0
    assert [p.step for p in run.curve] == [2, 4]


def test_timelines_of_another_law_are_carried_when_todays_law_decides_alike_and_dropped_when_not(finished, tmp_path):
    output, *_ = finished
    document = json.loads(output.read_text())
    (saved,) = document["results"]["auto_echo_timelines"]
    for name, factors in (("alike", saved["value"]["factors"]), ("otherwise", [1.5] * len(saved["value"]["factors"]))):
        copy = tmp_path / name / "time_to_target.json"
        copy.parent.mkdir()
        timeline = {**saved["value"], "law": "an-older-law", "factors": factors}
        copy.write_text(json.dumps({**document, "results": {**document["results"], "auto_echo_timelines": [
            {**saved, "value": timeline}]}}))
        lines = []
        carried, dropped = upkeep.carry_timelines(copy, TINY_TASKS, log=lines.append)
        results = json.loads(copy.read_text())["results"]
        autos = [r for r in results["runs"] if r["config"]["auto_echo"]]
        if name == "alike":
            assert (carried, dropped) == (1, 0) and len(autos) == 1
            assert results["auto_echo_timelines"][0]["value"]["law"] == echoing.controller.LAW
            assert results["auto_echo_timelines"][0]["value"]["factors"] == factors
        else:  # Dropped with its trained run, so that the next invocation times it again.
            assert (carried, dropped) == (0, 1) and autos == [] and results["auto_echo_timelines"] == []
        assert "carried" in lines[0] if name == "alike" else "dropped" in lines[0]


def test_replays_timed_on_another_cpu_are_dropped_with_autoechos_timeline_and_the_rest_kept(finished, tmp_path):
    output, *_ = finished
    document = json.loads(output.read_text())
    elsewhere = {**document["machine"], "cpu": "another CPU"}
    runs = [{**r, "machine": elsewhere} if r["config"]["mode"] == "replay" else r for r in document["results"]["runs"]]
    copy = tmp_path / "time_to_target.json"
    copy.write_text(json.dumps({**document, "results": {**document["results"], "runs": runs}}))
    lines = []
    dropped = upkeep.retime_other_machines(copy, log=lines.append)
    results = json.loads(copy.read_text())["results"]
    replays = sum(r["config"]["mode"] == "replay" for r in document["results"]["runs"])
    assert dropped == replays + 1 and len(lines) == replays  # The replays, and AutoEcho's timeline.
    assert all(r["config"]["mode"] != "replay" for r in results["runs"]) and results["auto_echo_timelines"] == []
    assert len(results["runs"]) == len(runs) - replays  # The sample runs stay.
    assert upkeep.retime_other_machines(copy, log=lines.append) == 0  # Nothing more of another CPU's.


def test_fixed_replays_another_cpu_timed_beside_an_autoecho_replay_timed_here_are_dropped_and_no_others(finished, tmp_path):
    output, *_ = finished
    document = json.loads(output.read_text())
    elsewhere = {**document["machine"], "cpu": "another CPU"}
    # The fixed factors' replays are another CPU's; AutoEcho's replay (R = 2, seed 0) is this one's.
    runs = [{**r, "machine": elsewhere} if r["config"]["mode"] == "replay" and not r["config"]["auto_echo"] else r
            for r in document["results"]["runs"]]
    copy = tmp_path / "time_to_target.json"
    copy.write_text(json.dumps({**document, "results": {**document["results"], "runs": runs}}))
    lines = []
    fixed = sum(r["config"]["mode"] == "replay" and not r["config"]["auto_echo"] for r in runs)
    assert fixed and upkeep.retime_beside_autoecho(copy, log=lines.append) == fixed == len(lines)
    results = json.loads(copy.read_text())["results"]
    assert [r["config"]["auto_echo"] for r in results["runs"] if r["config"]["mode"] == "replay"] == [True]
    assert results["auto_echo_timelines"] == document["results"]["auto_echo_timelines"]  # AutoEcho's stays.
    # Where AutoEcho's replay is another CPU's too, its seed's fixed factors are left alone.
    all_elsewhere = [{**r, "machine": elsewhere} if r["config"]["mode"] == "replay" else r for r in document["results"]["runs"]]
    copy.write_text(json.dumps({**document, "results": {**document["results"], "runs": all_elsewhere}}))
    assert upkeep.retime_beside_autoecho(copy, log=lines.append) == 0


def test_a_write_that_times_nothing_keeps_each_records_machine(finished, tmp_path):
    # A record without its own stamp went by the header's machine; carrying timelines on another machine
    # rewrites the header, and must not move that record (nor what retime_other_machines drops) with it.
    output, *_ = finished
    document = json.loads(output.read_text())
    elsewhere = {**document["machine"], "cpu": "another CPU"}
    copy = tmp_path / "time_to_target.json"
    copy.write_text(json.dumps({**document, "machine": elsewhere, "results": {
        **document["results"], "runs": [{k: v for k, v in r.items() if k != "machine"} for r in document["results"]["runs"]]}}))
    upkeep.carry_timelines(copy, TINY_TASKS, log=lambda line: None)
    assert json.loads(copy.read_text())["machine"]["cpu"] == "another CPU"
    # So the replays still read as another CPU's, and go when this one is asked to time its own.
    replays = sum(r["config"]["mode"] == "replay" for r in document["results"]["runs"])
    assert replays and upkeep.retime_other_machines(copy, log=lambda line: None) == replays + 1  # and the timeline


def test_best_echo_shuffle_minimises_the_modelled_time():
    def record(shuffle, seed, steps, fresh, reached=True):
        return sample(RunConfig("sample", "resnet", "before_augment", 4.0, shuffle, seed), steps, fresh, reached)

    runs = [record(0, 0, 1000, 32000), record(0, 1, 1000, 32000), record(512, 0, 500, 16000), record(512, 1, 520, 16640)]
    # At R=4, reading 125-130 batches takes 500-520 steps; with no buffer 1,000 steps bind.
    assert plans.best_echo_shuffle(runs, "resnet", "before_augment", 4.0, 4.0, 128) == 512
    runs += [record(1024, 0, 400, 12800), record(1024, 1, None, None, reached=False)]
    assert plans.best_echo_shuffle(runs, "resnet", "before_augment", 4.0, 4.0, 128) == 512  # A seed that failed counts as infinite.
    assert plans.best_echo_shuffle(runs, "resnet", "before_augment", 8.0, 4.0, 128) is None


def test_rerun_skips_finished_configurations(finished):
    output, plan, *_ = finished
    before = output.read_text()
    lines = []
    T.run_plan(plan, output, TINY_TASKS, log=lines.append)
    T.run_plan(dataclasses.replace(plan, tasks=["resnet"], modes=["replay"]), output, TINY_TASKS, log=lines.append)
    assert lines == []
    assert json.loads(output.read_text())["results"]["runs"] == json.loads(before)["results"]["runs"]


def test_progress_is_shown(finished):
    _, _, lines, _ = finished
    assert any(line.startswith("[sample 1/") for line in lines)
    assert any(line.startswith("[replay 1/") for line in lines)
    assert any("accuracy" in line and "to budget" in line for line in lines)
    assert any("measured R" in line and "of the step" in line for line in lines)


def test_tables_and_plots_are_generated_from_the_results_file(finished):
    output, *_ = finished
    results = results_of(output)
    table = reporting.sample_table(results)
    assert "| resnet | before_augment | 2 | 32 | 1/1 | 16 | 0.50x |" not in table  # Ratios of counts carry no x.
    assert "| resnet | before_augment | 2 | 32 | 1/1 | 16 | 0.50 | 2 | 1.00 |" in table
    replayed = reporting.replay_table(results)
    assert "| resnet | 2 |" in replayed and "AutoEcho" in replayed
    written = plots.plot_all(output)
    names = sorted(path.name for path in written)
    assert names == ["time_to_target_resnet_fresh_vs_factor.png", "time_to_target_resnet_fresh_vs_shuffle.png",
                     "time_to_target_resnet_time_vs_factor.png", "time_to_target_transformer_fresh_vs_factor.png",
                     "time_to_target_transformer_fresh_vs_shuffle.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_the_command_prints_its_tables_and_draws_its_figures(finished, capsys):
    output, *_ = finished
    T.print_report(output)
    printed = capsys.readouterr().out
    assert "| resnet | before_augment | 2 |" in printed and f"results: {output}" in printed and "plot: " in printed


def test_same_seed_ratios_and_their_spread():
    def record(placement, factor, seed, steps, fresh):
        return sample(RunConfig("sample", "resnet", placement, factor, 0, seed), steps, fresh)

    runs = [record("none", 1.0, 0, 500, 64000), record("none", 1.0, 1, 700, 89600),
            record("before_augment", 4.0, 0, 500, 16000), record("before_augment", 4.0, 1, 500, 16000)]
    (row,) = [r for r in reporting.sample_rows(TimeToTargetResults(tuple(runs))) if r.config.factor == 4.0]
    # Each run against its own seed's baseline: 16000/64000 and 16000/89600, not against a pooled median.
    assert row.vs_baseline(Measure.FRESH_EXAMPLES).values == (0.25, pytest.approx(0.1786, abs=1e-4))
    assert row.vs_baseline(Measure.FRESH_EXAMPLES).min == pytest.approx(16000 / 89600)


def test_command_line_narrows_the_plan():
    _, plan = T.parse_arguments(["--tasks", "transformer", "--modes", "sample", "--seeds", "0", "--placements", "none", "example",
                                 "--factors", "2", "4", "--echo-shuffle-batches", "0"])
    runs = plans.planned_sample_runs(plan, TASKS)
    assert [(r.placement, r.factor, r.echo_shuffle) for r in runs] == [("none", 1.0, 0), ("example", 2.0, 0), ("example", 4.0, 0)]
    _, plan = T.parse_arguments(["--ratios", "2", "--replay-factors", "1", "2", "--no-auto-echo", "--step-seconds", "0.05"])
    assert (plan.ratios, plan.replay_factors, plan.auto_echo, plan.step_seconds) == ([2.0], [1.0, 2.0], False, 0.05)
    assert T.parse_arguments(["--ratios", "0.7"])[1].ratios == [0.7]  # R < 1: not input-bound, allowed.


def test_a_named_plan_runs_its_parts_into_its_results_file():
    args, plan = T.parse_arguments(["--plan", "nine-seeds", "--time-only"])
    parts, results_file = T.parts_of(args, plan)
    assert results_file == "time_to_target_seeds" and len(parts) == 2 and all(part.time_only for part in parts)
    assert [part.modes for part in parts] == [["sample"], ["replay"]] and parts[1].seeds == list(range(9))
    args, plan = T.parse_arguments(["--ratios", "2"])
    assert T.parts_of(args, plan) == ([plan], "time_to_target")


@pytest.mark.parametrize("argv", [["--plan", "samples", "--seeds", "0"], ["--plan", "resnet-replay", "--no-auto-echo"],
                                  ["--plan", "nowhere"]])
def test_a_named_plan_takes_no_options_that_narrow_it(argv, capsys):
    with pytest.raises(SystemExit):
        T.parse_arguments(argv)
    assert "--plan" in capsys.readouterr().err


@pytest.mark.parametrize("results_file", ["time_to_target", "time_to_target_seeds"])
def test_every_committed_run_is_made_by_a_named_plan(results_file):
    _, results = time_to_target(results_io.read_results(results_io.RESULTS_DIR / f"{results_file}.json"))
    found, orphans = plans.coverage(plans.plans_of(results_file), list(results.runs))
    assert orphans == [] and found and all(0 < c.held <= c.planned for c in found)
    # A run no plan makes is refused by the page's table, naming it.
    stray = dataclasses.replace(results.runs[0], config=dataclasses.replace(results.runs[0].config, seed=99))
    with pytest.raises(ValueError, match="seed=99"):
        plans.plans_table(results_file, list(results.runs) + [stray])


@pytest.mark.parametrize("argv", [["--placements", "nowhere"], ["--factors", "0.5"], ["--ratios", "0"],
                                  ["--step-seconds", "-1"]])
def test_command_line_refuses_bad_values(argv, capsys):
    with pytest.raises(SystemExit):
        T.parse_arguments(argv)
    assert argv[0] in capsys.readouterr().err


def test_two_processes_filling_one_results_file_keep_each_others_records(tmp_path):
    path = tmp_path / "shared.json"
    key = lambda record: read_run(record).config  # noqa: E731
    first, second = results_io.ResultsFile(path, {}, key=key), results_io.ResultsFile(path, {}, key=key)

    def record(placement):
        return sample(RunConfig("sample", "resnet", placement, 2.0, 0, 0), None, None, reached=False).record()

    first.add(record("before_augment"))
    second.measure_once("pipelines", {"task": "resnet", "ratio": 2.0}, lambda: {"read_rate": 1.0})
    second.add(record("after_batch"))
    first.measure_once("pipelines", {"task": "resnet", "ratio": 4.0}, lambda: {"read_rate": 2.0})
    first.add(record("after_augment"))
    first.add(record("after_augment"))  # Again: replaces, does not duplicate.
    # Measured once: the other process's measurement is found, not measured again.
    assert first.measure_once("pipelines", {"task": "resnet", "ratio": 2.0}, lambda: pytest.fail("measured twice")) == \
        {"read_rate": 1.0}
    document = results_io.read_results(path)  # Refuses another schema.
    runs = [read_run(r) for r in first.runs]
    assert sorted(r.config.placement for r in runs) == ["after_augment", "after_batch", "before_augment"]
    assert sorted((m["of"]["ratio"], m["value"]["read_rate"]) for m in first.extra["pipelines"]) == [(2.0, 1.0), (4.0, 2.0)]
    # Each record keeps the machine it ran on; the header only says who wrote last.
    assert all(r.machine == results_io.machine() for r in runs) and document["machine"] == results_io.machine()


def test_best_fixed_factor_and_auto_echo_against_it_seed_by_seed():
    def record(factor, seed, steps_time, is_auto=False, steps=500):
        placement = "none" if factor == 1 else "before_augment"
        config = RunConfig("replay", "resnet", placement, None if is_auto else factor, 0 if factor == 1 else 1024, seed,
                           4.0, auto_echo=is_auto, max_factor=factor if is_auto else None)
        if is_auto:
            return auto(config, steps, steps_time * 0.03, steps_time)
        return timed(config, steps, steps_time * 0.03, steps_time)

    runs = [record(1.0, 0, 2000), record(1.0, 1, 1800), record(4.0, 0, 500), record(4.0, 1, 600),
            record(8.0, 0, 700), record(8.0, 1, 500), record(8.0, 0, 550, is_auto=True),
            record(8.0, 1, 660, is_auto=True, steps=600)]
    results = TimeToTargetResults(tuple(runs))
    (row,) = reporting.best_rows(results)
    # e=4: speedups 4.0 and 3.0 (median 3.5); e=8: 2.86 and 3.6 (median 3.23).
    assert row.best.factor == 4.0 and row.best_speedup.median == pytest.approx(3.5)
    assert row.auto_time_vs_best.values == (1.1, 1.1)  # 550/500 and 660/600, each seed against itself.
    # Seed 1 needed 600 steps against the best's 500: its 1.1 is 1.2x the steps at 0.917x the time per step.
    assert row.auto_steps_vs_best.values == pytest.approx([1.0, 1.2])
    assert row.auto_time_per_step_vs_best.values == pytest.approx([1.1, 1.1 / 1.2])
    assert "| resnet | 4 | 4 (1024) | 3.50x (3.00-4.00) | 2/2 |" in reporting.best_table(results)


def test_paired_table_sets_each_seeds_auto_echo_beside_the_same_seeds_fixed_factor_without_a_baseline():
    def record(seed, steps, seconds, is_auto=False):
        config = RunConfig("replay", "resnet", "before_augment", None if is_auto else 2.0, 1024, seed, 2.0,
                           auto_echo=is_auto, max_factor=8.0 if is_auto else None)
        return auto(config, steps, seconds) if is_auto else timed(config, steps, seconds)

    runs = [record(3, 500, 15.0), record(3, 550, 15.0, is_auto=True), record(4, 400, 12.0),
            record(4, 400, 13.2, is_auto=True), record(5, 450, 13.5)]  # Seed 5 has no AutoEcho run: no pair.
    table = reporting.paired_table(TimeToTargetResults(tuple(runs)))
    # Seed 3: the same time in 1.1x the steps; seed 4: 1.1x the time per step in the same steps.
    assert "| resnet | 2 | 3 | 2 (1024) | 550 | 500 | 1.00 | 0.91 | 1.10 |" in table
    assert "| resnet | 2 | 4 | 2 (1024) | 400 | 400 | 1.10 | 1.10 | 1.00 |" in table
    assert "| resnet | 2 | median of 2 | 2 (1024) | | | 1.05 (1.00-1.10) | 1.00 (0.91-1.10) | 1.05 (1.00-1.10) |" in table
    assert "| 5 |" not in table
    # A second fixed factor at the same R: its own pairs, unless only the factor at R is asked for.
    runs += [timed(RunConfig("replay", "resnet", "before_augment", 4.0, 1024, 3, 2.0), 600, 20.0)]
    assert "| resnet | 2 | median of 1 | 4 (1024) |" in reporting.paired_table(TimeToTargetResults(tuple(runs)))
    assert reporting.paired_table(TimeToTargetResults(tuple(runs)), factor_at_ratio=True) == table


def test_wallclock_tables_take_seconds_against_the_same_seed_and_show_r_under_load():
    def record(factor, seed, seconds, is_auto=False):
        placement = "none" if factor == 1 else "before_augment"
        config = RunConfig("wallclock", "resnet", placement, None if is_auto else factor, 0 if factor == 1 else 1024,
                           seed, 4.0, auto_echo=is_auto, max_factor=factor if is_auto else None)
        if is_auto:
            return auto(config, 500, seconds, seconds / 0.1)
        return timed(config, 500, seconds, seconds / 0.1)

    runs = [record(1.0, 0, 200.0), record(1.0, 1, 240.0), record(4.0, 0, 80.0), record(4.0, 1, 60.0),
            record(8.0, 0, 88.0, is_auto=True), record(8.0, 1, 66.0, is_auto=True)]
    rates = Rates(4.0, 1.0, 3.96, 0.1, 8.0, ())
    timelines = tuple(held_at(run.config, 4.2) for run in runs if run.config.auto_echo)
    document = TimeToTargetResults(tuple(runs), rates=(MeasuredRates(RatesOf("resnet", 4.0), rates),),
                                   auto_echo_timelines=timelines)
    table = reporting.wallclock_table(document)
    # Speedups 200/80 = 2.5 and 240/60 = 4.0, each seed against its own baseline; R over the
    # runs is the baseline's seconds per step over e=4's (the largest fixed e): 2.5 and 4.0.
    assert "| resnet | 4 | 3.96 | 3.25 (2.50-4.00) | 4 | 1024 | 2/2 | 70 (60-80) | 700 (600-800) | 3.25x (2.50-4.00) |" in table
    assert "AutoEcho (held 4.2 (4.2-4.2))" in table
    (row,) = reporting.best_rows(document, "wallclock")
    assert row.best.factor == 4.0 and row.auto_time_vs_best.values == pytest.approx([1.1, 1.1])
    assert reporting.best_rows(document) == []  # The replay's table does not mix in real training.


def test_replay_table_gives_r_as_measured_and_as_the_baselines_whole_run_gave_it():
    def record(factor, seed, steps, steps_time):
        placement = "none" if factor == 1 else "before_augment"
        config = RunConfig("replay", "resnet", placement, factor, 0 if factor == 1 else 1024, seed, 4.0)
        return timed(config, steps, steps_time * 0.03, steps_time)

    runs = [record(1.0, 0, 500, 2000), record(1.0, 1, 400, 1800), record(4.0, 0, 600, 650), record(4.0, 1, 500, 540)]
    pipelines = tuple(MeasuredPipeline(PipelineOf("resnet", 4.0, seed, 0.03),
                                       PipelineMeasure(4.0, 0.03, 1.0, 0.03 * value, value, 0.001, 0.03, 8.0))
                      for seed, value in ((0, 3.9), (1, 4.1)))
    table = reporting.replay_table(TimeToTargetResults(tuple(runs), pipelines=pipelines))
    # Measured 3.9 and 4.1 before the runs; the baselines ran at 2000/500 = 4.0 and 1800/400 = 4.5.
    assert "| resnet | 4 | 4.00 (3.90-4.10) | 4.25 (4.00-4.50) | 1 |" in table


def test_a_results_file_of_an_older_schema_is_refused(tmp_path):
    path = tmp_path / "time_to_target.json"
    path.write_text(json.dumps({"benchmark": "time_to_target", "results": {"runs": []}}))
    with pytest.raises(ValueError, match="schema version 1, this code reads 5; run the benchmark that wrote it again"):
        results_io.read_results(path)


def test_calibration_corrects_the_throttle_until_r_under_load_is_the_nominal_one(monkeypatch, tmp_path):
    from benchmarks.lib import wallclock

    # A host where the step under load is 1.25x the step alone: the first guess reads too fast.
    step_alone, step_loaded, batch = 0.08, 0.10, TINY_TASKS["resnet"].settings.batch_size

    def fake_loaded_ratio(task, model, *, read_rate, **_):
        at_one = max(batch / read_rate, step_loaded)
        return RateRound(read_rate=read_rate, step_seconds_at_e1=at_one, step_seconds_saturated=step_loaded,
                         measured_ratio=at_one / step_loaded)

    monkeypatch.setattr(wallclock, "loaded_ratio", fake_loaded_ratio)
    monkeypatch.setattr(wallclock.echoing, "measure_ratio",
                        lambda *a, **k: type("M", (), {"downstream_seconds": step_alone})())
    measured = wallclock.calibrate(TINY_TASKS["resnet"], ratio=4, seed=0, max_factor=8, echo_shuffle=0, rounds=1,
                                   data=DataOptions(None, str(tmp_path), 1000))
    first, last = measured.rounds
    assert first.measured_ratio == pytest.approx(4 * step_alone / step_loaded)  # 3.2: R set from the step alone.
    assert last.measured_ratio == pytest.approx(4.0) and measured.measured_ratio == pytest.approx(4.0)
    assert measured.read_rate == pytest.approx(batch / (4 * step_loaded))


def test_calibration_needs_a_factor_above_the_nominal_r():
    from benchmarks.lib import wallclock

    with pytest.raises(ValueError, match="max_factor: expected more than the nominal R 4, got 4"):
        wallclock.calibrate(TINY_TASKS["resnet"], ratio=4, seed=0, max_factor=4, echo_shuffle=0, data=EMBEDDED)


@pytest.mark.slow
def test_wallclock_mode_calibrates_r_under_load_and_times_fixed_factors_and_auto_echo_with_a_real_step(finished):
    output, plan, *_ = finished  # Its sample runs give the steps to time.
    wallclock_plan = dataclasses.replace(plan, tasks=["resnet"], modes=["wallclock"], ratios=[1.5], replay_factors=[1, 2])
    T.run_plan(wallclock_plan, output, TINY_TASKS, log=lambda line: None)
    results = results_of(output)
    runs = {r.config.describe(): r for r in records(output, "wallclock")}
    assert sorted(runs) == ["wallclock resnet before_augment e=2 shuffle=32 R=1.5 seed=0",
                            "wallclock resnet before_augment e=auto(<=2) shuffle=32 R=1.5 seed=0",
                            "wallclock resnet none e=1 shuffle=0 R=1.5 seed=0"]
    (rates,) = [m.value for m in results.rates if m.of == RatesOf("resnet", 1.5)]
    assert len(rates.rounds) == 2 and rates.measured_ratio >= 1
    for describe, record in runs.items():
        assert record.rates == rates
        assert record.seconds > 0 and record.seconds_in_steps > 0, describe
    fixed = runs["wallclock resnet before_augment e=2 shuffle=32 R=1.5 seed=0"]
    assert fixed.steps == fixed.sample_steps == 2  # The sample run's steps, timed with real steps.
    chosen = runs["wallclock resnet before_augment e=auto(<=2) shuffle=32 R=1.5 seed=0"]
    assert results.timeline_of(chosen.config).decisions[0].step == 0 and chosen.reached


def test_a_replay_takes_exactly_one_kind_of_step(tmp_path):
    from benchmarks.lib import replay

    config = run_spec(TINY_TASKS["resnet"], "none", 1.0, 0, num_train_examples=1000, cache_dir=str(tmp_path)).pipeline_config()
    for kinds in ({}, {"step_seconds": 0.01, "train_step": lambda batch: None}):
        with pytest.raises(ValueError, match="step_seconds and train_step: give exactly one"):
            replay.replay(TINY_TASKS["resnet"], config, steps=1, **kinds)


def test_runs_ratio_rejects_an_unknown_mode_by_name():
    with pytest.raises(ValueError, match="mode: expected 'replay' or 'wallclock', got 'sample'"):
        reporting.runs_ratio(TimeToTargetResults(()), "sample")


def test_shuffle_plot_draws_every_buffer_in_examples():
    # A batch echoing buffer of 8 batches holds as many examples as an example buffer of 8 x batch size.
    spread = reporting.Spread(1.0, 1.0, 1.0, (1.0,))
    rows = [reporting.Row(RunConfig("sample", "resnet", placement, 2.0, shuffle, 0), 1, 1,
                          ((Measure.FRESH_EXAMPLES, spread),), ((Measure.FRESH_EXAMPLES, None),))
            for placement, shuffles in (("after_batch", (0, 8)), ("before_augment", (0, 1024))) for shuffle in shuffles]
    figure = plots._fresh_vs_shuffle("resnet", rows)
    drawn = {bars.get_label(): sorted(bars.lines[0].get_xdata()) for bars in figure.axes[0].containers}
    plots.plt.close(figure)
    batch = TASKS["resnet"].settings.batch_size
    assert drawn == {"after_batch e=2": [1, 8 * batch], "before_augment e=2": [1, 1024]}


def test_time_only_saves_auto_echo_timelines_and_a_later_run_trains_on_them(finished):
    output, *_, timed_only = finished
    before = reporting.results_of(timed_only)
    assert not [r for r in before.runs if r.config.auto_echo]
    (measured,) = before.auto_echo_timelines
    timeline = measured.value
    (run,) = [r for r in records(output, "replay") if r.config.auto_echo]
    assert results_of(output).timeline_of(run.config) == timeline and run.seconds == timeline.seconds[run.steps - 1]


def test_a_timeline_recorded_with_another_law_is_refused(finished, tmp_path):
    output, plan, *_ = finished
    document = json.loads(output.read_text())
    document["results"]["runs"] = [r for r in document["results"]["runs"] if not r["config"].get("auto_echo")]
    for measured in document["results"]["auto_echo_timelines"]:
        measured["value"]["law"] = "an earlier law"
    stale = tmp_path / "time_to_target.json"
    stale.write_text(json.dumps(document))
    with pytest.raises(RuntimeError, match="recorded with another law \\('an earlier law', this one is"):
        T.run_plan(dataclasses.replace(plan, tasks=["resnet"], modes=["replay"]), stale, TINY_TASKS, log=lambda line: None)


def test_a_tasks_pipeline_settings_reach_its_pipeline_config(tmp_path):
    task = TINY_TASKS["transformer"].with_settings(pipeline={"max_record_bytes": 4096})
    config = run_spec(task, "example", 2.0, 8, cache_dir=str(tmp_path)).pipeline_config()
    assert config.max_record_bytes == 4096 and config.batch_size == 4
    plain = TINY_TASKS["transformer"].with_settings(pipeline={})
    assert run_spec(plain, "none", 1.0, 0).pipeline_config().max_record_bytes is None


def test_a_tasks_pipeline_settings_cannot_override_what_every_run_sets():
    task = TINY_TASKS["transformer"].with_settings(pipeline={"seed": 3})
    with pytest.raises(ValueError, match="pipeline: 'seed' is set by every run"):
        run_spec(task, "none", 1.0, 0).pipeline_config()


def test_the_r_each_reading_gave_is_read_back_from_the_controllers_own_reasons():
    from benchmarks.lib import readings
    from echoing.simulation import ELEMENTS_PER_STEP, Scenario, simulate

    # A real controller's decisions, so that a change to EchoDecision.reason's wording fails here.
    controller = echoing.EchoController(max_factor=8.0, elements_per_step=ELEMENTS_PER_STEP)
    simulate(Scenario(ratio=lambda step: 3.0 if step < 300 else 6.0, steps=900, step_seconds=0.01),
             factor=controller.factor, controller=controller)
    measuring = [d for d in controller.decisions if d.cause in readings.MEASURING]
    assert measuring
    for decision in measuring:
        factor, ratio = readings.ratio_read(Decision.of(decision))
        assert factor == pytest.approx(decision.reading.factor, rel=1e-3)
        assert ratio == pytest.approx(decision.ratio, rel=1e-2)
    assert readings.ratio_read(Decision.of(controller.decisions[0])) == (None, None)  # The opening reads none.
    broken = dataclasses.replace(Decision.of(measuring[0]), reason="the input cannot keep up")
    with pytest.raises(ValueError, match="reason: expected an R read"):
        readings.ratio_read(broken)


def test_the_reads_table_sets_autoechos_readings_of_r_beside_the_r_set_and_counts_its_climbs():
    from benchmarks.lib import readings

    def decision(step, factor, cause, reason):
        return Decision(step, factor, 8.0, Phase.HOLD, cause, reason)

    def saved(seed, mode, reads, climbs=0):
        config = RunConfig(mode, "transformer", "example", None, 256, seed, 4.0, auto_echo=True, max_factor=8.0)
        decisions = [decision(0, 8.0, Cause.START, "opening at e=8 to measure the step's own rate")]
        decisions += [decision(100 * (i + 1), min(8.0, 1.05 * r), Cause.MEASURED,
                               f"the input cannot keep up: R = {r:.3g} (at e={e:g} over 56 steps: 30 steps/s, the input "
                               f"made 27 batches/s +-29%, the step's own rate 64/s)") for i, (e, r) in enumerate(reads)]
        decisions += [decision(1000 + i, 5.0, Cause.CLIMB, "steps still wait") for i in range(climbs)]
        timeline = AutoEchoTimeline((0.1,), (8.0,), 0.0, tuple(decisions), None, law="test")
        return SavedTimeline(config, timeline)

    results = TimeToTargetResults((), auto_echo_timelines=(
        saved(0, "replay", [(2.828, 8.0), (3.2, 4.0)]), saved(1, "replay", [(2.828, 4.4), (6.0, 12.0)], climbs=1),
        saved(0, "wallclock", [(2.0, 40.0)])))  # Left out: R on this CPU is not the R set.
    table = readings.reads_table(results)
    # Below R: 2.0, 1.0 and 1.1 times R (median 1.1); at or above: 3.0; off by 1.5x: 8.0 and 12.0.
    assert "| transformer | 4 | 2 | 4 | 1.10 (1.00-2.00) (3) | 3.00 (1) | 2 of 4 | 1 (0) |" in table
    assert "wallclock" not in table and table.count("| transformer |") == 1
