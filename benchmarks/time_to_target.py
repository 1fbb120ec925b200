"""Time to target: fresh examples, steps and wall-clock time to reach a target, across e, placement and R.

Three modes, on the embedded data by default (``--source`` for tfds data where present):

* ``sample``: no throttle; for every task, placement, echo factor, echo shuffle buffer
  and seed, train until the target is confirmed or the step budget runs out, recording
  fresh examples, steps and the evaluation curve (:mod:`benchmarks.lib.training` has the
  crossing rule and the counting).
* ``replay``: the modelled accelerator (:mod:`benchmarks.lib.replay`). For every R and e, the
  real pipeline is throttled to R and replayed, against a sleeping step, for the steps
  the same seed's sample run needed. The echo shuffle is the one the sample runs say is
  best at that R. Unless ``--no-auto-echo``, an :class:`echoing.EchoController` also drives
  the factor during a replay, and the choices it made are then trained on (sample mode,
  same seed) to find the step at which the target is reached.
* ``wallclock``: real training on this CPU with the read throttled so that R, measured
  under load while training runs (:mod:`benchmarks.lib.wallclock`), is close to the nominal
  one (one correction of a first guess; the tables give R as calibrated and as the runs
  met it); the fixed factors with the largest echo shuffle buffer, and AutoEcho's
  controller driving the factor as training runs (unless ``--no-auto-echo``).

The committed results files are made by named plans (``--plan NAME``; the plans and
their parts are in :mod:`benchmarks.lib.plans`); the options ``--tasks``, ``--modes`` and
the rest narrow an invocation without a plan. Every finished configuration is appended
to the results file at once, and a rerun skips
the configurations already there, so a long run can be stopped and resumed (``--fresh``
starts over). Results go to ``runs/`` unless given ``--output-dir`` (``--output-dir
benchmarks/results`` regenerates the committed ones); ``python -m benchmarks.lib.plots``
draws the figures, ``python -m benchmarks.readme_tables`` writes the tables into the pages.

Hyperparameters are fixed per task (:data:`benchmarks.lib.tasks.TASKS`), not tuned per
configuration: a constant learning rate after a short warm-up, so that "steps to target"
does not depend on a schedule length chosen in advance.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Callable, Optional, Union

import tensorflow as tf

import echoing
from benchmarks.lib import replay, reporting, results_io, upkeep, wallclock
from benchmarks.lib.plans import (PLANS, BenchmarkPlan, NamedPlan, echo_shuffle_elements,
                                  find_sample, planned_replay_runs, planned_sample_runs, planned_wallclock_runs)
from benchmarks.lib.timelines import AutoEchoTimeline
from benchmarks.lib.run_records import (MODES, AutoEchoRun, Mode, PipelineMeasure, Rates, Run,
                                        RunConfig, SampleRun, TimedRun, TimeToTargetSettings, read_run)
from benchmarks.lib.tasks import TASKS, DataOptions, RunSpec, Task
from benchmarks.lib.training import train_to_target


def run_sample(run: RunConfig, task: Task, data: DataOptions, log) -> SampleRun:
    trained = train_to_target(RunSpec(task, run, data), log=log)
    return SampleRun.of(trained, run, task.settings.target, results_io.command_line())


def run_replay(run: RunConfig, task: Task, plan: BenchmarkPlan, results: results_io.ResultsFile, data: DataOptions,
               log) -> Optional[Run]:
    """One replay; ``None`` (skipped) when the same seed's sample run is missing."""
    of = {"task": run.task, "ratio": run.ratio, "seed": run.seed, "step_seconds": plan.step_seconds}
    label = f"{run.task} R={run.ratio:g} seed={run.seed} step={plan.step_seconds:g}s"
    echo_shuffle = echo_shuffle_elements(task, task.default_point, max(plan.echo_shuffle_batches))
    measured = PipelineMeasure.from_record(results.measure_once("pipelines", of, lambda: replay.measure_pipeline(
        task, ratio=run.ratio, step_seconds=plan.step_seconds, seed=run.seed, max_factor=max(plan.replay_factors),
        echo_shuffle=echo_shuffle, data=data).record()))
    log(f"  {label}: measured R {measured.measured_ratio:.2f}, pipeline CPU "
        f"{measured.cpu_share_of_step:.0%} of the step at e={max(plan.replay_factors):g}")
    step = StepModel(step_seconds=plan.step_seconds, unit_seconds=plan.step_seconds)
    return run_timed(run, task, results, measured, step, data, log, train=not plan.time_only)


def run_wallclock(run: RunConfig, task: Task, plan: BenchmarkPlan, results: results_io.ResultsFile, data: DataOptions,
                  log) -> Optional[Run]:
    """The replay with a real training step on this CPU, the read throttled for R under load."""
    label = f"{run.task} R={run.ratio:g}"
    echo_shuffle = echo_shuffle_elements(task, task.default_point, max(plan.echo_shuffle_batches))
    # Calibrated once per task and R (seed 0's data order): the rates do not depend on the seed.
    measured = Rates.from_record(results.measure_once("rates", {"task": run.task, "ratio": run.ratio}, lambda: wallclock.calibrate(
        task, ratio=run.ratio, seed=0, max_factor=max(plan.replay_factors), echo_shuffle=echo_shuffle, data=data).record()))
    log(f"  {label}: read {measured.read_rate:.0f} examples/s, R under load {measured.measured_ratio:.2f}"
        f" (step alone {measured.step_seconds_alone * 1e3:.0f} ms)")
    step = StepModel(train_step=wallclock.warmed_up_train_step(task, run.seed, data),
                     unit_seconds=measured.rounds[-1].step_seconds_saturated)
    return run_timed(run, task, results, measured, step, data, log, train=not plan.time_only)


@dataclasses.dataclass(frozen=True)
class StepModel:
    """What a timed run's training step is: a sleep (the replay) or a real step (wallclock).

    ``unit_seconds`` converts seconds to step times: the modelled step, or the real step
    under load when the read does not limit it.
    """

    unit_seconds: float
    step_seconds: Optional[float] = None
    train_step: Optional[Callable] = None


def measured_fields(measured: Union[PipelineMeasure, Rates]) -> dict:
    """Where a timed run keeps the pipeline it ran on: ``pipeline`` on the modelled host, ``rates`` on this CPU."""
    return {"pipeline": measured} if isinstance(measured, PipelineMeasure) else {"rates": measured}


def run_timed(run: RunConfig, task: Task, results: results_io.ResultsFile, measured: Union[PipelineMeasure, Rates],
              step: StepModel, data: DataOptions, log, *, train: bool = True) -> Optional[Run]:
    """A fixed factor timed for the steps its sample run needed; ``None`` without that run."""
    if run.auto_echo:
        return run_auto_echo_timed(run, task, results, measured, step, data, log, train=train)
    sample = find_sample(runs_of(results), run)
    if sample is None:
        log(f"  skipped: no sample run for {run.describe()}")
        return None
    seconds = startup_seconds = seconds_in_steps = None
    if sample.reached:
        config = RunSpec(task, run, data, read_rate=measured.read_rate).pipeline_config()
        timeline = replay.replay(task, config, steps=sample.steps, step_seconds=step.step_seconds,
                                 train_step=step.train_step)
        seconds, startup_seconds = timeline.seconds[-1], timeline.startup_seconds
        seconds_in_steps = seconds / step.unit_seconds
        log(f"  {sample.steps} steps in {seconds:.1f}s ({seconds_in_steps:.0f} step times)")
    return TimedRun(config=run, target=task.settings.target, sample_steps=sample.steps, reached=sample.reached,
                    fresh_examples=sample.fresh_examples, steps=sample.steps, seconds=seconds,
                    startup_seconds=startup_seconds, seconds_in_steps=seconds_in_steps,
                    command=results_io.command_line(), **measured_fields(measured))


def runs_of(results: results_io.ResultsFile) -> list[Run]:
    """The runs a results file holds so far, as records."""
    return [read_run(record) for record in results.runs]


def auto_echo_replay_steps(task: Task, records: list[Run], run: RunConfig) -> int:
    """Steps to replay AutoEcho for: 1.5x the longest fixed-factor run of the same seed to reach the target.

    Its training must cross within the replay to be timed; the budget caps it.
    """
    steps = [r.steps for r in records if r.config.mode == Mode.SAMPLE and r.config.task == run.task
             and r.config.seed == run.seed and r.reached and not r.config.auto_echo]
    return min(task.settings.budget_steps, int(1.5 * max(steps))) if steps else task.settings.budget_steps


def run_auto_echo_timed(run: RunConfig, task: Task, results: results_io.ResultsFile,
                        measured: Union[PipelineMeasure, Rates], step: StepModel, data: DataOptions, log, *,
                        train: bool = True) -> Optional[AutoEchoRun]:
    """AutoEcho timed on the pipeline, then its choices trained on to find the crossing.

    The timed replay is saved (``auto_echo_timelines`` in the results) as soon as it ends,
    so that ``train=False`` can time every run first, alone on the machine, and a later
    invocation trains on the saved timelines, which needs no clock (``None`` until then).
    """
    def timed() -> dict:
        factor = tf.Variable(1.0, dtype=tf.float64)
        config = RunSpec(task, run, data, read_rate=measured.read_rate, factor_variable=factor).pipeline_config()
        controller = replay.auto_echo_controller(task, run.placement, run.max_factor)
        timeline = replay.replay(task, config, steps=auto_echo_replay_steps(task, runs_of(results), run),
                                 step_seconds=step.step_seconds, train_step=step.train_step, controller=controller,
                                 factor=factor)
        return AutoEchoTimeline.of(timeline, echoing.controller.LAW).record()

    timeline = AutoEchoTimeline.from_record(results.measure_once("auto_echo_timelines", run.record(), timed))
    if timeline.law != echoing.controller.LAW:
        raise RuntimeError(f"{run.describe()}: the saved AutoEcho timeline was recorded with another law "
                           f"({timeline.law or 'before laws were named'!r}, this one is {echoing.controller.LAW!r}); "
                           "delete it from auto_echo_timelines in the results file and time it again with --time-only, "
                           "alone")
    log(f"  AutoEcho held e={timeline.held.factor:.2f} from step {timeline.held.step}"
        if timeline.held else "  AutoEcho never held a factor")
    if not train:
        return None
    trained = train_to_target(RunSpec(task, run, data), factor_schedule=timeline.factors, log=log)
    seconds = seconds_in_steps = None
    if trained.reached and trained.steps > len(timeline.seconds):
        log(f"  reached at step {trained.steps}, after the {len(timeline.seconds)} replayed: not timed")
    elif trained.reached:
        seconds = timeline.seconds[trained.steps - 1]
        seconds_in_steps = seconds / step.unit_seconds
    return AutoEchoRun(config=run, target=task.settings.target, trained=trained, seconds=seconds,
                       seconds_in_steps=seconds_in_steps, command=results_io.command_line(), **measured_fields(measured))


def run_plan(plan: BenchmarkPlan, output: Path, tasks: dict, *, source=None, cache_dir=None, log=print) -> results_io.ResultsFile:
    """Runs every planned configuration not already in ``output``; returns the results.

    Sample runs come first: the replays need their steps and choose the echo shuffle from them.
    """
    settings = TimeToTargetSettings({name: task.settings for name, task in tasks.items()})
    results = results_io.ResultsFile(output, settings.record(), key=lambda record: read_run(record).config)
    data = DataOptions(source=source, cache_dir=cache_dir, num_train_examples=plan.num_train_examples)
    started = time.perf_counter()
    stages = [(Mode.SAMPLE, lambda: planned_sample_runs(plan, tasks)),
              (Mode.REPLAY, lambda: planned_replay_runs(plan, tasks, runs_of(results))),
              (Mode.WALLCLOCK, lambda: planned_wallclock_runs(plan, tasks))]
    for mode, planned in stages:
        if mode not in plan.modes:
            continue
        runs = planned()
        for index, run in enumerate(runs, 1):
            if results.done(run):
                continue
            log(f"[{mode} {index}/{len(runs)}] {run.describe()}  ({(time.perf_counter() - started) / 60:.0f} min so far)")
            task = tasks[run.task]
            if mode == Mode.SAMPLE:
                record = run_sample(run, task, data, log)
            elif mode == Mode.REPLAY:
                record = run_replay(run, task, plan, results, data, log)
            else:
                record = run_wallclock(run, task, plan, results, data, log)
            if record is not None:
                results.add(record.record())
    return results


def parse_arguments(argv=None) -> tuple[argparse.Namespace, BenchmarkPlan]:
    """The command line and the plan it asks for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", choices=sorted(PLANS),
                        help="a named plan (benchmarks/lib/plans.py): the runs behind a committed results file; "
                             "the options below narrow an invocation without one")
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS))
    parser.add_argument("--modes", nargs="+", choices=MODES)
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--placements", nargs="+", help="placements to run (applied to every task that has them)")
    parser.add_argument("--factors", nargs="+", type=float, help="echo factors for sample mode")
    parser.add_argument("--echo-shuffle-batches", nargs="+", type=int,
                        help="echo shuffle buffers for sample mode, in batches' worth of the echo stage's elements")
    parser.add_argument("--ratios", nargs="+", type=float,
                        help="R values for the replay and wallclock modes (> 0; below 1 the step is the bottleneck)")
    parser.add_argument("--replay-factors", nargs="+", type=float, help="echo factors replayed at every R")
    parser.add_argument("--no-auto-echo", action="store_true", help="do not replay AutoEcho")
    parser.add_argument("--step-seconds", type=float, help="the modelled accelerator's step in the replay")
    parser.add_argument("--source", default=None, help="tfds source instead of the embedded data (cifar10, imagenet2012, imagenette, lm1b)")
    results_io.add_output_dir_argument(parser)
    parser.add_argument("--output", type=Path, default=None, metavar="FILE",
                        help="results JSON (default: OUTPUT_DIR/time_to_target.json)")
    parser.add_argument("--fresh", action="store_true", help="discard the results file instead of resuming it")
    parser.add_argument("--carry-timelines", action="store_true",
                        help="relabel the saved AutoEcho timelines that today's law decides alike (echoing.controller.LAW), "
                             "drop the others and their trained runs, and stop")
    parser.add_argument("--retime-other-machines", action="store_true",
                        help="drop the timed replays (fixed factors and AutoEcho's timelines) that another CPU made, "
                             "with AutoEcho's runs trained on them, so that the next run times them again here, and stop")
    parser.add_argument("--retime-beside-autoecho", action="store_true",
                        help="drop the fixed factors' replays that another CPU timed for a task, R and seed whose "
                             "AutoEcho replay this CPU timed, so that the next run times them again beside it, and stop")
    parser.add_argument("--time-only", action="store_true",
                        help="only the timed replays (run alone); AutoEcho's training on them follows in a run without it")
    args = parser.parse_args(argv)
    plan = BenchmarkPlan()
    chosen = {name: getattr(args, name) for name in ("tasks", "modes", "seeds", "factors", "echo_shuffle_batches", "ratios",
                                                     "replay_factors", "step_seconds")}
    if args.plan:
        narrowing = sorted(f"--{name.replace('_', '-')}" for name, value in {**chosen, "placements": args.placements,
                                                                           "no_auto_echo": args.no_auto_echo}.items() if value)
        if narrowing:
            parser.error(f"--plan: a named plan sets its runs; it takes no {', '.join(narrowing)}")
    plan = dataclasses.replace(plan, **{k: v for k, v in chosen.items() if v}, auto_echo=not args.no_auto_echo,
                               time_only=args.time_only)
    for name in ("factors", "replay_factors"):
        bad = [v for v in getattr(plan, name) if not v >= 1]
        if bad:
            parser.error(f"--{name.replace('_', '-')}: expected values >= 1, got {bad}")
    # R below 1 is allowed: the read is then faster than the step (training is not input-bound).
    bad = [v for v in plan.ratios if not v > 0]
    if bad:
        parser.error(f"--ratios: expected positive values, got {bad}")
    if plan.step_seconds <= 0:
        parser.error(f"--step-seconds: expected a positive number, got {plan.step_seconds}")
    if args.placements:
        known = sorted({p for task in TASKS.values() for p in task.placements})
        unknown = sorted(set(args.placements) - set(known))
        if unknown:
            parser.error(f"--placements: unknown {unknown}; known: {known}")
        plan = dataclasses.replace(plan, placements={name: [p for p in task.placements if p in args.placements]
                                                     for name, task in TASKS.items()})
    return args, plan


def parts_of(args: argparse.Namespace, plan: BenchmarkPlan) -> tuple[list[BenchmarkPlan], str]:
    """What an invocation runs, and the results file's name: a named plan's parts, or the one plan its options make."""
    if not args.plan:
        return [plan], "time_to_target"
    named: NamedPlan = PLANS[args.plan]
    return [dataclasses.replace(part, time_only=args.time_only) for part in named.parts], named.results_file


def main(argv=None) -> None:
    args, plan = parse_arguments(argv)
    parts, results_file = parts_of(args, plan)
    output = args.output or args.output_dir / f"{results_file}.json"
    if args.retime_other_machines:
        print(f"{output}: {upkeep.retime_other_machines(output)} dropped, timed on another CPU than this one")
        return
    if args.retime_beside_autoecho:
        print(f"{output}: {upkeep.retime_beside_autoecho(output)} dropped, timed on another CPU than their seed's AutoEcho replay")
        return
    if args.carry_timelines:
        carried, dropped = upkeep.carry_timelines(output, TASKS)
        print(f"{output}: {carried} timelines carried to {echoing.controller.LAW}, {dropped} dropped")
        return
    if args.fresh and output.exists():
        output.unlink()
    for part in parts:
        run_plan(part, output, TASKS, source=args.source)
    print_report(output)


def print_report(output: Path) -> None:
    """The sample and replay tables of a results file, and its figures beside it."""
    from benchmarks.lib import plots

    results = reporting.results_of(results_io.read_results(output))
    print(reporting.sample_table(results))
    print(reporting.replay_table(results))
    for path in plots.plot_all(output):
        print(f"plot: {path}")
    print(f"results: {output}")


if __name__ == "__main__":
    main()
