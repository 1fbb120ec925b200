"""The time-to-target study's plans: what one invocation runs, and the named plans behind the committed results.

A :class:`BenchmarkPlan` is one product of settings (tasks x placements x factors x echo
shuffles x seeds, and the R values and factors of the timed modes); the ``planned_*``
functions list its runs as :class:`benchmarks.lib.run_records.RunConfig` records. A
:class:`NamedPlan` is a union of such parts with a name, the results file it fills and a
line saying what it is for: ``python -m benchmarks.time_to_target --plan NAME`` runs it,
and the results pages list the plans (:data:`PLANS`) with how many of their runs each
committed file holds, instead of a log of commands.

>>> plan = PLANS["resnet-replay"]
>>> plan.results_file, [part.ratios for part in plan.parts]
('time_to_target', [[2, 4, 6]])
>>> [run.describe() for run in planned_sample_runs(BenchmarkPlan(factors=[2], echo_shuffle_batches=[0], seeds=[0],
...                                                 placements={"resnet": ["none", "after_batch"]}), TASKS)]
['sample resnet none e=1 shuffle=0 seed=0', 'sample resnet after_batch e=2 shuffle=0 seed=0']
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from benchmarks.lib import reporting
from benchmarks.lib.run_records import Mode, Run, RunConfig, SampleRun
from benchmarks.lib.tables import markdown_table
from benchmarks.lib.tasks import TASKS, Task

NONE = "none"


@dataclasses.dataclass(frozen=True)
class BenchmarkPlan:
    """What a benchmark invocation runs.

    Attributes:
      tasks: task names.
      modes: any of :class:`benchmarks.lib.run_records.Mode`'s values.
      placements: placements per task (default: all the task's pipeline has).
      factors: echo factors for sample mode.
      echo_shuffle_batches: echo shuffle buffers for sample mode, in batches' worth of the
        echo stage's elements (so a buffer of 8 is 8 x 128 examples for example echoing
        and 8 batches for batch echoing).
      seeds: each configuration runs once per seed.
      ratios: R values (replay and wallclock modes).
      replay_factors: echo factors replayed (and run in wallclock mode) at every R.
      auto_echo: also replay AutoEcho's controller at every R.
      step_seconds: the modelled accelerator's step in the replay.
      num_train_examples: embedded training examples (resnet); ``None`` for the default 100k.
      time_only: run only what is timed (the fixed factors' replays, AutoEcho's timed
        replays) and leave AutoEcho's training on its saved timelines to a later run, which
        needs no machine to itself.
    """

    tasks: list = dataclasses.field(default_factory=lambda: ["resnet"])
    modes: list = dataclasses.field(default_factory=lambda: ["sample", "replay"])
    placements: Optional[dict] = None
    factors: list = dataclasses.field(default_factory=lambda: [2, 4, 8])
    echo_shuffle_batches: list = dataclasses.field(default_factory=lambda: [8, 0])
    seeds: list = dataclasses.field(default_factory=lambda: [0, 1, 2])
    ratios: list = dataclasses.field(default_factory=lambda: [2, 4, 6])
    replay_factors: list = dataclasses.field(default_factory=lambda: [1, 2, 4, 8])
    auto_echo: bool = True
    step_seconds: float = 0.03
    num_train_examples: Optional[int] = None
    time_only: bool = False


@dataclasses.dataclass(frozen=True)
class NamedPlan:
    """A plan of the study by name: the parts it runs, in order, and the results file they fill.

    Attributes:
      name: what ``--plan`` takes.
      results_file: the results file's name in the output directory, without ``.json``.
      about: one line for the results page's table of plans.
      parts: the :class:`BenchmarkPlan` products whose union is the plan.
    """

    name: str
    results_file: str
    about: str
    parts: tuple[BenchmarkPlan, ...]

    def command(self, output_dir: str = "benchmarks/results") -> str:
        return f"python -m benchmarks.time_to_target --plan {self.name} --output-dir {output_dir}"


def echo_shuffle_elements(task: Task, placement: str, batches: int) -> int:
    """An echo shuffle buffer of ``batches`` batches' worth, in the echo stage's elements."""
    return 0 if placement == NONE else batches * task.echo_elements_per_step(placement)


def planned_sample_runs(plan: BenchmarkPlan, tasks: dict) -> list[RunConfig]:
    """Sample-mode runs: all seeds' baselines first, then the largest echo shuffle's runs first."""
    runs = []
    for name in plan.tasks:
        task = tasks[name]
        placements = (plan.placements or {}).get(name, task.placements)
        runs += [RunConfig(Mode.SAMPLE, name, NONE, 1.0, 0, seed) for seed in plan.seeds if NONE in placements]
        for batches in plan.echo_shuffle_batches:
            for seed in plan.seeds:
                for placement in placements:
                    if placement == NONE:
                        continue
                    for factor in plan.factors:
                        runs.append(RunConfig(Mode.SAMPLE, name, placement, float(factor),
                                              echo_shuffle_elements(task, placement, batches), seed))
    return runs


def best_echo_shuffle(records: list[Run], task: str, placement: str, factor: float, ratio: float,
                      batch_size: int) -> Optional[int]:
    """The sample runs' echo shuffle with the least modelled time at R, medians over seeds.

    The modelled time of a run, in steps, is ``max(steps, fresh batches * R)``: the step or
    the read, whichever is slower (:func:`reporting.modelled_steps`).
    """
    by_shuffle: dict = {}
    for record in records:
        config = record.config
        if (config.mode, config.task, config.placement, config.factor) != (Mode.SAMPLE, task, placement, factor):
            continue
        if config.auto_echo:
            continue
        by_shuffle.setdefault(config.echo_shuffle, []).append(
            reporting.modelled_steps(record, ratio, batch_size) if record.reached else float("inf"))
    finite = {shuffle: float(np.median(times)) for shuffle, times in by_shuffle.items()}
    finite = {shuffle: t for shuffle, t in finite.items() if np.isfinite(t)}
    return min(finite, key=finite.get) if finite else None


def find_sample(records: list[Run], run: RunConfig) -> Optional[SampleRun]:
    """The sample-mode record with the same task, placement, factor, shuffle and seed."""
    want = RunConfig(Mode.SAMPLE, run.task, run.placement, run.factor, run.echo_shuffle, run.seed)
    return next((r for r in records if r.config == want), None)


def planned_replay_runs(plan: BenchmarkPlan, tasks: dict, records: list[Run]) -> list[RunConfig]:
    """Replays of the fixed factors with their best echo shuffle, then AutoEcho's, per seed and R."""
    runs = []
    for name in plan.tasks:
        task = tasks[name]
        for ratio in plan.ratios:
            for seed in plan.seeds:
                for factor in plan.replay_factors:
                    if factor == 1:
                        runs.append(RunConfig(Mode.REPLAY, name, NONE, 1.0, 0, seed, float(ratio)))
                        continue
                    shuffle = best_echo_shuffle(records, name, task.default_point, float(factor), float(ratio),
                                                task.settings.batch_size)
                    if shuffle is not None:
                        runs.append(RunConfig(Mode.REPLAY, name, task.default_point, float(factor), shuffle, seed,
                                              float(ratio)))
                if plan.auto_echo:
                    shuffle = echo_shuffle_elements(task, task.default_point, max(plan.echo_shuffle_batches))
                    runs.append(RunConfig(Mode.REPLAY, name, task.default_point, None, shuffle, seed, float(ratio),
                                          auto_echo=True, max_factor=float(max(plan.replay_factors))))
    return runs


def planned_wallclock_runs(plan: BenchmarkPlan, tasks: dict) -> list[RunConfig]:
    """Real training at every R: the fixed factors with the largest echo shuffle buffer, then AutoEcho."""
    runs = []
    for name in plan.tasks:
        task = tasks[name]
        shuffle = echo_shuffle_elements(task, task.default_point, max(plan.echo_shuffle_batches))
        for seed in plan.seeds:
            for ratio in plan.ratios:
                for factor in plan.replay_factors:
                    if factor == 1:
                        runs.append(RunConfig(Mode.WALLCLOCK, name, NONE, 1.0, 0, seed, float(ratio)))
                    else:
                        runs.append(RunConfig(Mode.WALLCLOCK, name, task.default_point, float(factor), shuffle, seed,
                                              float(ratio)))
                if plan.auto_echo:
                    runs.append(RunConfig(Mode.WALLCLOCK, name, task.default_point, None, shuffle, seed, float(ratio),
                                          auto_echo=True, max_factor=float(max(plan.replay_factors))))
    return runs


def planned_runs(plan: BenchmarkPlan, tasks: dict, records: list[Run]) -> list[RunConfig]:
    """Every run of one part, sample runs first (the replays choose their echo shuffle from ``records``)."""
    runs = []
    if Mode.SAMPLE.value in plan.modes:
        runs += planned_sample_runs(plan, tasks)
    if Mode.REPLAY.value in plan.modes:
        runs += planned_replay_runs(plan, tasks, records)
    if Mode.WALLCLOCK.value in plan.modes:
        runs += planned_wallclock_runs(plan, tasks)
    return runs


@dataclasses.dataclass(frozen=True)
class Coverage:
    """How much of a named plan a results file holds: its runs planned, and those the file has."""

    plan: NamedPlan
    planned: int
    held: int


def coverage(plans: list[NamedPlan], records: list[Run], tasks: dict = TASKS) -> tuple[list[Coverage], list[RunConfig]]:
    """Each plan's runs against a results file's, and the file's runs that no plan makes (none, for a committed file)."""
    held = {record.config for record in records}
    made, out = set(), []
    for plan in plans:
        runs = {run for part in plan.parts for run in planned_runs(part, tasks, records)}
        made |= runs
        out.append(Coverage(plan, len(runs), len(runs & held)))
    return out, sorted(held - made, key=lambda run: run.describe())


def _resnet(*placements: str) -> dict:
    return {"resnet": list(placements)}


# The Transformer's sample runs echo examples only (its batch echoing is not in a table).
_TEXT = dict(modes=["sample"], tasks=["transformer"], placements={"transformer": ["none", "example"]})


_SAMPLE = dict(modes=["sample"], tasks=["resnet"])
_TRANSFORMER = dict(tasks=["transformer"], echo_shuffle_batches=[8], replay_factors=[1, 2, 4, 8], step_seconds=0.015)

# The plans that made the committed results files, each part as it ran. The ResNet's
# sample runs grew over time: factor 1.5 and 6, and the runs without an echo shuffle, were
# added where a table needed them, not as a full product.
PLANS: dict[str, NamedPlan] = {plan.name: plan for plan in (
    NamedPlan("samples", "time_to_target",
              "sample runs: both tasks, every placement, factor and echo shuffle that a table reads",
              (BenchmarkPlan(**_SAMPLE, factors=[1.5, 2, 4, 8], echo_shuffle_batches=[8]),
               BenchmarkPlan(**_SAMPLE, placements=_resnet("before_augment"), factors=[6], echo_shuffle_batches=[8]),
               BenchmarkPlan(**_SAMPLE, placements=_resnet("before_augment"), factors=[1.5, 2, 4, 8],
                             echo_shuffle_batches=[0]),
               BenchmarkPlan(**_SAMPLE, placements=_resnet("after_augment", "after_batch"), factors=[2, 4],
                             echo_shuffle_batches=[0]),
               BenchmarkPlan(**_SAMPLE, placements=_resnet("after_batch"), factors=[8], echo_shuffle_batches=[0]),
               BenchmarkPlan(**_TEXT, factors=[2, 4, 8], echo_shuffle_batches=[8]),
               BenchmarkPlan(**_TEXT, factors=[2, 4], echo_shuffle_batches=[0]),
               BenchmarkPlan(**_TEXT, factors=[2, 4], echo_shuffle_batches=[8], seeds=[3, 4, 5]))),
    NamedPlan("resnet-replay", "time_to_target",
              "the ResNet on the modelled host at R = 2, 4, 6: e = 1-8 and AutoEcho",
              (BenchmarkPlan(modes=["replay"], ratios=[2, 4, 6], replay_factors=[1, 2, 4, 6, 8]),)),
    NamedPlan("transformer-replay", "time_to_target",
              "the Transformer on the modelled host at R = 2 and 4, and R = 4 on held-out seeds 3-5",
              (BenchmarkPlan(modes=["replay"], ratios=[2, 4], **_TRANSFORMER),
               BenchmarkPlan(modes=["replay"], ratios=[4], seeds=[3, 4, 5], **_TRANSFORMER))),
    NamedPlan("resnet-wallclock", "time_to_target",
              "the ResNet trained on this CPU, the read throttled for R = 1, 2, 4, 6 under load",
              (BenchmarkPlan(modes=["wallclock"], ratios=[1, 2, 4, 6], replay_factors=[1, 2, 4, 6, 8],
                             echo_shuffle_batches=[8]),)),
    NamedPlan("nine-seeds", "time_to_target_seeds",
              "the ResNet at R = 2 and 4: AutoEcho beside e = 2 and 4 on seeds 0-8, one machine",
              (BenchmarkPlan(modes=["sample"], placements=_resnet("before_augment"), factors=[2, 4],
                             echo_shuffle_batches=[8], seeds=list(range(9))),
               BenchmarkPlan(modes=["replay"], ratios=[2, 4], replay_factors=[2, 4, 8], echo_shuffle_batches=[8],
                             seeds=list(range(9))))),
)}


def plans_of(results_file: str) -> list[NamedPlan]:
    """The named plans that fill one results file, in order."""
    return [plan for plan in PLANS.values() if plan.results_file == results_file]


def plans_table(results_file: str, records: list[Run], tasks: dict = TASKS) -> str:
    """Markdown: the named plans of one results file, what each runs, how many of its runs the file holds, and its command.

    A run is timed alone on the machine: ``--time-only`` first (the fixed factors' replays
    and AutoEcho's timed replays), then the same command without it trains AutoEcho on its
    saved timelines, which needs no machine to itself.

    Raises:
      ValueError: the file holds runs that none of its plans makes, naming them.
    """
    found, orphans = coverage(plans_of(results_file), records, tasks)
    if orphans:
        raise ValueError(f"{results_file}: runs no named plan makes (benchmarks/lib/plans.py): "
                         f"{[run.describe() for run in orphans][:5]}")
    rows = [(f"`{c.plan.name}`", c.plan.about, f"{c.held} of {c.planned}", f"`{c.plan.command()}`") for c in found]
    return markdown_table(("plan", "what it runs", "runs in the file", "command"), rows, "llrl")
