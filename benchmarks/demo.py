"""The main job: what echoing buys a ResNet whose storage is 4x slower than its training step.

On the embedded data, with the read throttled so that reading a batch takes R=4 training
steps, it trains the baseline, AutoEcho and a fixed e=4 (the best fixed e at R=4 in the full
time-to-target runs) to the same validation accuracy (0.4) and reports, for each, the steps,
the fresh examples read, the factor AutoEcho chose and the wall-clock time to the target on
a modelled accelerator host.

How (the protocol of :mod:`benchmarks.time_to_target`, in small):

1. Throttle the read for R=4 against a modelled step of ``step_seconds``, and measure the
   R this gives (:func:`benchmarks.lib.replay.measure_pipeline`).
2. Replay AutoEcho (:class:`echoing.EchoController`) on that pipeline: the step sleeps, as
   a host's CPU is free while its accelerator computes; the controller sets e.
3. Train the baseline, the fixed e, and on AutoEcho's choices, to the target (two
   evaluations in a row at or above it); training is deterministic per seed, so its steps
   are the steps the host would take.
4. Replay the baseline and the fixed e for their steps. Each run's time to target is its
   replay's clock at the step where its training crossed.

The wall clock is the modelled host's, not this CPU's: here the training step itself
shares two cores with the pipeline, so training on this CPU says little about a host
whose step runs on an accelerator (docs/results/time_to_target.md has both).

Run ``python -m benchmarks.demo`` (the README's "Set-up"; the table of
``benchmarks/results/demo.json`` says how long its run took, and how much of that the
embedded data's generation); it prints a table and writes ``demo.json`` and ``demo.png`` to ``runs/``
(``--output-dir``). ``--quick`` runs every part in small in under a minute (:data:`QUICK`):
a check that the job runs, not a result.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Optional, Sequence

import tensorflow as tf

import echoing
from benchmarks.lib import replay, results_io
from benchmarks.lib.results_io import fields_of
from benchmarks.lib.run_records import HoldsTrained, Mode, PipelineMeasure, RunConfig, Trained
from benchmarks.lib.timelines import AutoEchoTimeline
from benchmarks.lib.tasks import TASKS, DataOptions, RunSpec, Task
from benchmarks.lib.training import train_to_target
from benchmarks.lib.tables import markdown_table


@dataclasses.dataclass(frozen=True)
class DemoConfig(results_io.Record):
    """Settings of the main job.

    Attributes:
      ratio: R, the read's time per batch over the step's.
      target: validation accuracy to reach, four times chance (the full benchmark's is
        0.80; 0.4 keeps the job short: at 0.5 the three runs trained some 50 steps more
        each).
      num_train_examples: the embedded training split. 50,000 is more than any run reads
        here (the baseline's 200 steps read 25,600) and takes less time to generate on a
        fresh machine than the 100,000 (24 s against 34 s: ``data_seconds`` in
        benchmarks/results/demo.json, and docs/decisions/0004-figures-from-earlier-runs.md).
      step_seconds: the modelled accelerator's step. 20 ms keeps this pipeline's own CPU
        work well below the step (its share is measured and printed).
      seed: seeds data, augmentation, echo and weights.
      budget_steps: steps after which a run stops without the target.
      eval_every: steps between evaluations. A crossing is placed to within this many
        steps, and AutoEcho's steps are compared with e=4's (about 280): at 25 one
        interval is 9% of e=4's steps, as much as the 10% the comparison is judged by
        (AutoEcho's 300 against e=4's 275 in an earlier run was one interval:
        docs/decisions/0004-figures-from-earlier-runs.md). At 10 an interval is 4% of
        them, for about 18 more evaluations of 500 images per run.
      eval_examples: held-out examples per evaluation.
      max_factor: the largest factor AutoEcho may set.
      auto_echo_steps: steps of AutoEcho's replay; its training must cross within them
        to be timed.
      echo_shuffle_batches: the echo shuffle buffer, in batches' worth of examples.
      fixed_factor: also train and replay this fixed factor (``None``: not run). The
        default, e = R, was the best fixed e at R=4 in the full runs (docs/results/time_to_target.md, "Time to
        target on the modelled accelerator").
      batch_norm_momentum: the ResNet's batch normalisation momentum. Keras's 0.99 lets
        the statistics that evaluation uses lag the weights by about 100 steps, and early
        in training the validation accuracy swings: seed 0's baseline read 0.41, 0.40,
        0.47, 0.54, 0.37, 0.55 at steps 225-350, e=4's 0.39, 0.16, 0.37, 0.22 at 225-300
        (docs/decisions/0004-figures-from-earlier-runs.md). At 0.9 (PyTorch's default)
        the baseline climbs, 0.32, 0.34, 0.36, 0.47, 0.56, 0.65 at steps 150-275, and met
        the target at 250 steps instead of 350, e=4 at 325 instead of 400, so the job is
        shorter; e=4 still swings (0.45, 0.24, 0.47 at 225-275, ibid.).
      model_width: the ResNet-8's width (the time-to-target runs' is 16). Training is
        most of the job, and steps to the target, not this CPU's time per step, are what
        it needs from training: at width 8 a step took 0.15 s against 0.26 s, and the
        three runs' training 167 s against 262 s (the baseline's steps to 0.5 went from 300
        to 325; the training loop's own clock in the job's log, alone on the machine).
    """

    ratio: float = 4.0
    target: float = 0.4
    step_seconds: float = 0.02
    seed: int = 0
    budget_steps: int = 800
    eval_every: int = 10
    eval_examples: int = 500
    max_factor: float = 8.0
    auto_echo_steps: int = 600
    echo_shuffle_batches: int = 8
    fixed_factor: Optional[float] = 4.0
    batch_norm_momentum: float = 0.9
    num_train_examples: Optional[int] = 50_000
    model_width: int = 8


def demo_task(config: DemoConfig, *, quick: bool = False) -> Task:
    """The ResNet of the time-to-target runs (a width-4 one with ``quick``), with the config's target, evaluation and batch normalisation."""
    task = QUICK_TASK if quick else TASKS["resnet"]
    model = {**task.settings.model, "batch_norm_momentum": config.batch_norm_momentum}
    if not quick:
        model["width"] = config.model_width
    return task.with_settings(target=config.target, budget_steps=config.budget_steps, eval_every=config.eval_every,
                              eval_examples=config.eval_examples, model=model)


@dataclasses.dataclass(frozen=True)
class DemoRun(HoldsTrained, results_io.Record):
    """One run of the main job: which run it is, its training, and its time on the modelled host.

    Attributes:
      name: a label for the table and the plot ("baseline", "AutoEcho", "e=4"); never
        read back: what a run is, its ``config`` says.
      config: the run (:class:`benchmarks.lib.run_records.RunConfig`, replay mode at the job's R).
      trained: its training to the target (:class:`benchmarks.lib.run_records.Trained`;
        ``trained.seconds`` is training's own clock on this CPU).
      seconds: time to target on the modelled host (``None`` if not reached, or past
        AutoEcho's replay).
      step_times: the replay's clock at every step (``None`` when not timed; AutoEcho's
        is its timeline's, :attr:`DemoResults.auto_echo`).

    >>> config = RunConfig("replay", "resnet", "before_augment", 4.0, 1024, 0, 4.0)
    >>> run = DemoRun("e=4", config, Trained(True, 300, 9600.0, 80.0, 4.0, ()), 6.5, None)
    >>> DemoRun.from_record(run.record()) == run, run.is_auto_echo, run.is_baseline, run.steps
    (True, False, False, 300)
    """

    name: str
    config: RunConfig
    trained: Trained
    seconds: Optional[float]
    step_times: Optional[tuple[float, ...]]

    @property
    def is_auto_echo(self) -> bool:
        return self.config.auto_echo

    @property
    def is_baseline(self) -> bool:
        return self.config.is_baseline



@dataclasses.dataclass(frozen=True)
class DemoResults(results_io.Record):
    """The main job's results: the pipeline measured, AutoEcho's timed replay, the runs, and the job's time.

    Attributes:
      pipeline: the throttled pipeline (:class:`benchmarks.lib.run_records.PipelineMeasure`).
      auto_echo: AutoEcho's replay on the modelled host, with its decisions
        (:class:`benchmarks.lib.timelines.AutoEchoTimeline`).
      runs: every run, in the order they ran.
      job_seconds: the whole job; data_seconds: the embedded data's reading (its
        generation, the first time).
    """

    pipeline: PipelineMeasure
    auto_echo: AutoEchoTimeline
    runs: tuple[DemoRun, ...]
    job_seconds: float
    data_seconds: float

    def clock_of(self, run: DemoRun) -> Optional[tuple[float, ...]]:
        """The replay's clock at every step of ``run``: its own replay's, or AutoEcho's timeline."""
        return self.auto_echo.seconds if run.is_auto_echo else run.step_times


@dataclasses.dataclass(frozen=True)
class DemoSettings(DemoConfig):
    """The main job's settings as its results file holds them: the :class:`DemoConfig`, and whether ``--quick``."""

    quick: bool = False


def typed(document: dict) -> tuple[DemoSettings, DemoResults]:
    """A main-job results document's settings and results."""
    return results_io.typed(document, DemoSettings, DemoResults)


def run(config: DemoConfig, *, quick: bool = False, cache_dir=None, log=print) -> DemoResults:
    """Runs the main job; returns its results.

    ``quick`` trains the width-4 ResNet of ``--quick`` instead of the time-to-target one.
    """
    started = time.perf_counter()
    task = demo_task(config, quick=quick)
    data = DataOptions(source=None, cache_dir=cache_dir, num_train_examples=config.num_train_examples)
    shuffle = config.echo_shuffle_batches * task.settings.batch_size
    # Every run is described by its results record (RunConfig); a RunSpec adds what only a running job has.
    echoed = RunConfig(Mode.REPLAY, task.name, task.default_point, config.max_factor, shuffle, config.seed, config.ratio)
    runs_to_train = [("baseline", echoed.baseline()),
                     ("AutoEcho", dataclasses.replace(echoed, factor=None, auto_echo=True, max_factor=config.max_factor))]
    if config.fixed_factor is not None:
        runs_to_train.append((f"e={config.fixed_factor:g}", dataclasses.replace(echoed, factor=config.fixed_factor)))

    # The embedded data is generated once and cached: reading a batch of each split first
    # keeps its generation out of every measurement, and its time is reported apart.
    prepared = RunSpec(task, runs_to_train[0][1], data).pipeline_config()
    task.eval_batches(prepared)
    next(iter(task.train_dataset(prepared)))
    data_seconds = time.perf_counter() - started
    log(f"Measuring the pipeline throttled for R={config.ratio:g} against a {config.step_seconds * 1e3:.0f} ms step")
    # The image pipeline's read is smooth: 60 batches read the nominal R (4.00 in
    # benchmarks/results/demo.json), where the text pipeline's lumps need the default 200.
    pipeline = replay.measure_pipeline(task, ratio=config.ratio, step_seconds=config.step_seconds, seed=config.seed,
                                       max_factor=config.max_factor, echo_shuffle=shuffle, data=data, batches=60)
    log(f"  measured R {pipeline.measured_ratio:.2f}; the pipeline's own CPU work at e={config.max_factor:g} is "
        f"{pipeline.cpu_share_of_step:.0%} of the step")

    log("AutoEcho on the modelled host")
    factor = tf.Variable(1.0, dtype=tf.float64)
    controller = replay.auto_echo_controller(task, task.default_point, config.max_factor)
    auto_pipeline = RunSpec(task, runs_to_train[1][1], data).with_factor(factor).throttled(pipeline.read_rate).pipeline_config()
    auto_echo = AutoEchoTimeline.of(replay.replay(task, auto_pipeline, steps=config.auto_echo_steps,
                                                  step_seconds=config.step_seconds, controller=controller, factor=factor),
                                    echoing.controller.LAW)
    held = auto_echo.held
    log(f"  step {held.step}: held e={held.factor:g}: {held.reason}" if held else "  AutoEcho did not settle")

    runs = []
    for name, run_config in runs_to_train:
        log(f"Training {name} to accuracy {config.target:g}")
        auto = run_config.auto_echo
        trained = train_to_target(RunSpec(task, run_config, data), factor_schedule=auto_echo.factors if auto else None, log=log)
        seconds = step_times = None
        if trained.reached:
            clock = auto_echo.seconds
            if not auto:
                log(f"Replaying {name} for its {trained.steps} steps")
                throttled = RunSpec(task, run_config, data).throttled(pipeline.read_rate).pipeline_config()
                clock = step_times = replay.replay(task, throttled, steps=trained.steps,
                                                   step_seconds=config.step_seconds).seconds
            if trained.steps <= len(clock):
                seconds = clock[trained.steps - 1]
        runs.append(DemoRun(name, run_config, trained, seconds, step_times))
    return DemoResults(pipeline=pipeline, auto_echo=auto_echo, runs=tuple(runs),
                       job_seconds=time.perf_counter() - started, data_seconds=data_seconds)


# ``--quick``: every part of the job in small, to see that it runs on a machine, not a
# result (tests/test_demo.py runs it): a ResNet of width 4 on 16-image batches from 1,000
# training images, a target of 0 (every run reaches it at its second evaluation), e=2.
# A width-4 ResNet stays at chance for hundreds of steps, so no target above chance fits
# in a minute on 2 cores.
QUICK = DemoConfig(target=0.0, step_seconds=0.01, budget_steps=12, auto_echo_steps=12, eval_every=2, eval_examples=32,
                   echo_shuffle_batches=2, fixed_factor=2.0, num_train_examples=1000)
QUICK_TASK = TASKS["resnet"].with_settings(batch_size=16, model={"depth": 8, "width": 4}, jit_compile=False)


def table(document: dict) -> str:
    """Markdown: each run's steps, fresh examples and modelled time to target, against the baseline."""
    _, results = typed(document)
    runs = results.runs
    base = next(run for run in runs if run.is_baseline)
    held = results.auto_echo.held_factor
    rows = []
    for run in runs:
        if run.is_auto_echo:
            factor = f"chosen: {held:.1f}" if held else f"auto (<= {run.config.max_factor:g})"
        else:
            factor = f"{run.config.factor:g}"
        if not run.reached:
            rows.append([run.name, factor, "not reached", "-", "-", "-", "-"])
            continue
        fresh = f"{run.fresh_examples / base.fresh_examples:.2f}" if base.reached else "-"
        seconds = "-" if run.seconds is None else f"{run.seconds:.1f}"
        speedup = f"{base.seconds / run.seconds:.2f}x" if base.seconds and run.seconds else "-"
        rows.append([run.name, factor, f"{run.steps:,}", f"{run.fresh_examples:,.0f}", fresh, seconds, speedup])
    lines = [markdown_table(["run", "e", "steps to target", "fresh examples", "fresh vs baseline",
                             "time to target (s, modelled host)", "speedup"], rows, align="llrrrrr")]
    pipeline = results.pipeline
    lines.append("")
    fixed = next((run for run in runs if not run.is_auto_echo and not run.is_baseline), None)
    spread = seed_spread(fixed.config.factor) if fixed is not None else None
    lines.append(f"Read throttled for R={pipeline.ratio:g} (measured {pipeline.measured_ratio:.2f}) against a "
                 f"{pipeline.step_seconds * 1e3:.0f} ms modelled step; one seed. {verdict(runs, spread)}")
    lines.append("")
    lines.append(f"The job took {results.job_seconds / 60:.1f} minutes, {results.data_seconds:.0f} s of them "
                 "reading the embedded data (its generation, the first time).")
    return "\n".join(lines)


# The committed runs of many seeds at fixed factors (python -m benchmarks.time_to_target,
# docs/results/time_to_target.md): how far one seed's steps to target move.
SEEDS_RESULTS = "time_to_target_seeds.json"


def seed_spread(factor: float) -> Optional[tuple[float, float, int]]:
    """Steps to target of the ResNet at one fixed ``factor`` over the committed seeds: (least, most) over their median, seeds.

    ``None`` where the results file holds fewer than 3 seeds at that factor.
    """
    import statistics

    from benchmarks.lib import reporting

    path = results_io.RESULTS_DIR / SEEDS_RESULTS
    if not path.exists():
        return None
    task = TASKS["resnet"].name
    steps = sorted(r.steps for r in reporting.results_of(results_io.read_results(path)).runs
                   if r.config.mode == Mode.SAMPLE and not r.config.auto_echo and r.reached
                   and r.config.task == task and r.config.factor == factor)
    if len(steps) < 3:
        return None
    median = statistics.median(steps)
    return steps[0] / median, steps[-1] / median, len(steps)


def verdict(runs: Sequence[DemoRun], spread: Optional[tuple[float, float, int]] = None) -> str:
    """What one seed can show: the factor AutoEcho chose, its time per step against the fixed e's, and its steps.

    A time to target is (time per step) x (steps). The first is measured by the replays
    and is precise; the second comes from one seed's training, and ``spread`` (from
    :func:`seed_spread`) says how far the fixed e's own steps moved from seed to seed, so
    that a difference in steps inside it is not read as the law's doing.

    >>> def run(name, placement, factor, max_factor, seconds, steps):
    ...     config = RunConfig("replay", "resnet", placement, factor, 0, 0, 4.0, max_factor is not None, max_factor)
    ...     return DemoRun(name, config, Trained(True, steps, 0.0, 1.0, 1.0, ()), seconds, None)
    >>> runs = [run("baseline", "none", 1.0, None, 60.0, 300), run("AutoEcho", "before_augment", None, 8.0, 21.0, 210),
    ...         run("e=4", "before_augment", 4.0, None, 20.0, 200)]
    >>> print(verdict(runs, (0.84, 1.24, 9)))
    AutoEcho took 0.35x the baseline time to target. Against e=4: its steps took 1.00x as long (the replays), and it needed 1.05x as many (one seed); over 9 seeds at e=4 alone, steps to target ran 0.84-1.24x their median, so one seed cannot tell the two apart by steps.
    """
    auto = next((run for run in runs if run.is_auto_echo), None)
    if auto is None or not auto.seconds:
        return "AutoEcho did not reach the target within its replay."
    base = next((run for run in runs if run.is_baseline and run.seconds), None)
    fixed = next((run for run in runs if not run.is_auto_echo and not run.is_baseline and run.seconds), None)
    sentence = (f"AutoEcho took {auto.seconds / base.seconds:.2f}x the baseline time to target." if base is not None
                else "AutoEcho reached the target; the baseline did not within its budget.")
    if fixed is None:
        return sentence
    steps = auto.steps / fixed.steps
    per_step = auto.seconds / fixed.seconds / steps
    sentence += (f" Against e={fixed.config.factor:g}: its steps took {per_step:.2f}x as long (the replays), and it needed "
                 f"{steps:.2f}x as many (one seed)")
    if spread is None:
        return sentence + "."
    low, high, seeds = spread
    inside = low / high <= steps <= high / low
    return sentence + (f"; over {seeds} seeds at e={fixed.config.factor:g} alone, steps to target ran {low:.2f}-{high:.2f}x "
                       f"their median, so one seed " + ("cannot tell the two apart by steps." if inside else
                                                        "shows a difference in steps beyond that spread."))


def plot(document: dict, path) -> None:
    """Validation accuracy against modelled seconds, baseline and echoed runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings, results = typed(document)
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for run in results.runs:
        clock = results.clock_of(run)
        if not clock or not run.reached:
            continue
        points = [(clock[p.step - 1], p.metric) for p in run.curve if p.step <= len(clock)]
        axes.plot(*zip(*points), "-", label=run.name)
    axes.axhline(settings.target, color="k", linestyle=":", label=f"target {settings.target:g}")
    axes.set(xlabel="seconds on the modelled host", ylabel="validation accuracy",
             title=f"R={settings.ratio:g}: time to target")
    axes.legend(fontsize=8)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


def parse_config(argv=None) -> tuple[DemoConfig, argparse.Namespace]:
    """The settings the command line asks for; bad options exit with a message naming them.

    >>> parse_config([])[0].fixed_factor, parse_config(["--no-fixed-factor"])[0].fixed_factor
    (4.0, None)
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DemoConfig.seed)
    fixed = parser.add_mutually_exclusive_group()
    fixed.add_argument("--fixed-factor", type=float, default=None,
                       help=f"the fixed echo factor run beside AutoEcho (default: {DemoConfig.fixed_factor:g}, "
                            f"and {QUICK.fixed_factor:g} with --quick)")
    fixed.add_argument("--no-fixed-factor", action="store_true", help="run the baseline and AutoEcho only")
    parser.add_argument("--quick", action="store_true",
                        help="every part in small (a width-4 ResNet, target 0, e=2; under a minute): a check that it runs, "
                             "not a result")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    if args.fixed_factor is not None and not args.fixed_factor >= 1:
        parser.error(f"--fixed-factor: expected a number >= 1, got {args.fixed_factor}")
    config = dataclasses.replace(QUICK if args.quick else DemoConfig(), seed=args.seed)
    if args.no_fixed_factor:
        config = dataclasses.replace(config, fixed_factor=None)
    elif args.fixed_factor is not None:
        config = dataclasses.replace(config, fixed_factor=args.fixed_factor)
    return config, args


def main(argv=None) -> None:
    config, args = parse_config(argv)
    results = run(config, quick=args.quick)
    name = "demo_quick" if args.quick else "demo"
    settings = DemoSettings(**fields_of(config), quick=args.quick)
    path = results_io.write_results(name, settings.record(), results.record(), args.output_dir)
    document = results_io.read_results(path)
    plot(document, args.output_dir / f"{name}.png")
    print()
    print(table(document))
    print()
    print(f"Time is that of a host whose step ({config.step_seconds * 1e3:g} ms, modelled) runs on an accelerator while "
          "this pipeline runs for real; training on this CPU shares its two cores with the pipeline and gains less.")
    print(f"results: {path}\nplot: {args.output_dir / f'{name}.png'}")


if __name__ == "__main__":
    main()
