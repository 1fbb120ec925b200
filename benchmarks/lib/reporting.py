"""Tables of time-to-target results: medians and ranges over seeds, ratios against the same seed's baseline.

Every ratio is taken per seed (a run against the baseline of the same seed, mode, task and
R) and then summarised as the median and the min-max over seeds. A difference between two
configurations is only worth stating when it is larger than those ranges. Tables take a
:class:`benchmarks.lib.run_records.TimeToTargetResults`; :func:`results_of` reads one
from a results document.

The tables of the results pages come from here through ``python -m benchmarks.readme_tables``,
the one command that prints them.

Example:

>>> from benchmarks.lib.run_records import RunConfig, SampleRun, TimeToTargetResults
>>> def run(placement, factor, seed, steps, fresh):
...     return SampleRun(True, steps, fresh, 1.0, factor, (), RunConfig("sample", "resnet", placement, factor, 0, seed),
...                      0.8, "python -m benchmarks.time_to_target")
>>> runs = [run("none", 1.0, 0, 500, 64000.0), run("none", 1.0, 1, 600, 76800.0),
...         run("before_augment", 2.0, 0, 600, 38400.0), run("before_augment", 2.0, 1, 600, 38400.0)]
>>> (row,) = [r for r in sample_rows(TimeToTargetResults(tuple(runs))) if r.config.factor == 2]
>>> row.vs_baseline(Measure.FRESH_EXAMPLES)
Spread(median=0.55, min=0.5, max=0.6, values=(0.6, 0.5))
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional, Sequence

import numpy as np

from benchmarks.lib import results_io, run_records
from benchmarks.lib.run_records import Mode, Run, RunConfig, TimeToTargetResults
from benchmarks.lib.tables import markdown_table


def results_of(document: dict) -> TimeToTargetResults:
    """A time-to-target results document's results, typed."""
    return run_records.time_to_target(document)[1]


def modelled_steps(record: Run, ratio: float, batch_size: int) -> float:
    """A run's time to target in step times when reading a batch takes R steps: the slower of the two."""
    return max(record.steps, record.fresh_examples / batch_size * ratio)


@dataclasses.dataclass(frozen=True)
class Spread(results_io.Record):
    """The median, min and max of some values, and the values."""

    median: float
    min: float
    max: float
    values: tuple[float, ...]

    def inverse(self) -> "Spread":
        """Speedups from time ratios: 1 / ratio, with min and max swapped."""
        inverted = tuple(1 / v for v in self.values)
        return Spread(float(np.median(inverted)), 1 / self.max, 1 / self.min, inverted)


def spread(values: Sequence[Optional[float]]) -> Optional[Spread]:
    """Median, min and max of the values that exist; ``None`` if none do."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return Spread(float(np.median(present)), float(min(present)), float(max(present)), tuple(float(v) for v in present))


class Measure(str, enum.Enum):
    """What a row summarises over seeds: a field of the runs."""

    FRESH_EXAMPLES = "fresh_examples"
    STEPS = "steps"
    SECONDS = "seconds"
    SECONDS_IN_STEPS = "seconds_in_steps"
    HELD_FACTOR = "held_factor"

    def of(self, run: Run, results: Optional[TimeToTargetResults] = None) -> Optional[float]:
        """The run's value (``None`` where its kind of run has none: a fixed factor's held factor).

        AutoEcho's held factor is its saved timeline's, which ``results`` holds.
        """
        if self is Measure.HELD_FACTOR:
            timeline = results.timeline_of(run.config) if results is not None and run.config.auto_echo else None
            return timeline.held_factor if timeline is not None else None
        return getattr(run, self.value, None)


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration over its seeds: spreads of measures, and of their same-seed ratios to the baseline.

    ``config`` is the configuration with seed 0 standing for all.
    """

    config: RunConfig
    runs: int
    reached: int
    spreads: tuple[tuple[Measure, Optional[Spread]], ...]
    ratios: tuple[tuple[Measure, Optional[Spread]], ...]

    def of(self, measure: Measure) -> Optional[Spread]:
        return next(value for m, value in self.spreads if m == measure)

    def vs_baseline(self, measure: Measure) -> Optional[Spread]:
        return next(value for m, value in self.ratios if m == measure)


def rows(results: TimeToTargetResults, mode: Mode, measures: tuple[Measure, ...]) -> list[Row]:
    """One row per configuration of ``mode``: spreads of ``measures`` and of their same-seed ratios to the baseline."""
    records = [r for r in results.runs if r.config.mode == mode]
    groups: dict = {}
    for record in records:
        groups.setdefault(record.config.without_seed(), []).append(record)
    out = []
    for config, members in groups.items():
        spreads, ratios = [], []
        for measure in measures:
            spreads.append((measure, spread([measure.of(r, results) if r.reached else None for r in members])))
            over = []
            for record in members:
                base = next((b for b in records if b.config == record.config.baseline()), None)
                if (base is not None and record.reached and base.reached and measure.of(base)
                        and measure.of(record)):
                    over.append(measure.of(record) / measure.of(base))
            ratios.append((measure, spread(over)))
        out.append(Row(config, len(members), sum(bool(r.reached) for r in members), tuple(spreads), tuple(ratios)))
    return sorted(out, key=lambda r: (r.config.task, r.config.ratio or 0, not r.config.is_baseline, r.config.placement,
                                      r.config.auto_echo, r.config.factor or 0, r.config.echo_shuffle))


def sample_rows(results: TimeToTargetResults) -> list[Row]:
    return rows(results, Mode.SAMPLE, (Measure.FRESH_EXAMPLES, Measure.STEPS))


def replay_rows(results: TimeToTargetResults) -> list[Row]:
    return rows(results, Mode.REPLAY, (Measure.SECONDS_IN_STEPS, Measure.FRESH_EXAMPLES, Measure.STEPS, Measure.HELD_FACTOR))


def wallclock_rows(results: TimeToTargetResults) -> list[Row]:
    return rows(results, Mode.WALLCLOCK, (Measure.SECONDS, Measure.SECONDS_IN_STEPS, Measure.FRESH_EXAMPLES, Measure.STEPS,
                                       Measure.HELD_FACTOR))


def spread_cell(value: Optional[Spread], spec: str, ratio: bool = False) -> str:
    """A table cell: the median and, over more than one value, its range (``-`` for none); ``x`` after ratios."""
    if value is None:
        return "-"
    suffix = "x" if ratio else ""
    if len(value.values) == 1:
        return f"{format(value.median, spec)}{suffix}"
    return f"{format(value.median, spec)}{suffix} ({format(value.min, spec)}-{format(value.max, spec)})"


def _inverse(value: Optional[Spread]) -> Optional[Spread]:
    return None if value is None else value.inverse()


def _factor_label(row: Row) -> str:
    """The e column: the fixed factor, or the factor AutoEcho held."""
    if not row.config.auto_echo:
        return f"{row.config.factor:g}"
    return f"AutoEcho (held {spread_cell(row.of(Measure.HELD_FACTOR), '.1f')})"


def sample_table(results: TimeToTargetResults) -> str:
    """Markdown: fresh examples and steps to target per configuration, medians (min-max) over seeds."""
    rows = [[r.config.task, r.config.placement, f"{r.config.factor:g}", r.config.echo_shuffle, f"{r.reached}/{r.runs}",
             spread_cell(r.of(Measure.FRESH_EXAMPLES), ",.0f"), spread_cell(r.vs_baseline(Measure.FRESH_EXAMPLES), ".2f"),
             spread_cell(r.of(Measure.STEPS), ",.0f"), spread_cell(r.vs_baseline(Measure.STEPS), ".2f")]
            for r in sample_rows(results) if not r.config.auto_echo]
    return markdown_table(["task", "placement", "e", "echo shuffle", "reached", "fresh examples",
                           "fresh vs baseline (same seed)", "steps", "steps vs baseline"], rows, align="llrrrrrrr")


def replay_table(results: TimeToTargetResults) -> str:
    """Markdown: modelled-accelerator time to target per R and e, and the speedup over the same seed's baseline.

    R appears twice: as measured before the runs (the throttled pipeline's seconds per batch
    over 200 batches, over ``t_step``) and as the baseline's whole run gives it (its step
    times over its steps, :func:`runs_ratio`). They differ where the read is lumpy: the text pipeline throttles
    whole documents, so a short window can hold one long document or none.
    """
    measured: dict = {}
    for m in results.pipelines or ():
        measured.setdefault((m.of.task, m.of.ratio), []).append(m.value.measured_ratio)
    realised = runs_ratio(results, Mode.REPLAY)
    rows = []
    for r in replay_rows(results):
        key = (r.config.task, r.config.ratio)
        ratios, over_run = measured.get(key), realised.get(key)
        rows.append([r.config.task, f"{r.config.ratio:g}", spread_cell(spread(ratios), ".2f") if ratios else "-",
                     spread_cell(spread(over_run), ".2f") if over_run else "-", _factor_label(r), r.config.echo_shuffle,
                     f"{r.reached}/{r.runs}", spread_cell(r.of(Measure.SECONDS_IN_STEPS), ",.0f"),
                     spread_cell(_inverse(r.vs_baseline(Measure.SECONDS_IN_STEPS)), ".2f", ratio=True),
                     spread_cell(r.of(Measure.FRESH_EXAMPLES), ",.0f"), spread_cell(r.of(Measure.STEPS), ",.0f")])
    return markdown_table(["task", "R", "measured R", "R over the baseline's run", "e", "echo shuffle", "reached",
                           "time to target (step times)", "speedup over baseline (same seed)", "fresh examples",
                           "steps"], rows, align="lrrrlrrrrrr")


def runs_ratio(results: TimeToTargetResults, mode: Mode) -> dict:
    """R over whole runs, per task and R: each seed's baseline time per step over the training step's own.

    ``mode`` is ``Mode.REPLAY`` or ``Mode.WALLCLOCK``; they differ only in where the step's own
    time comes from. In the replay it is ``t_step``, the unit of ``seconds_in_steps``, so R
    is the baseline's step times over its steps. On this CPU it is the step under load,
    taken from the same seed's largest fixed e (above R, so the step and not the read sets
    its pace). Neither involves a calibration window.

    >>> from benchmarks.lib.run_records import TimedRun
    >>> def run(factor, seconds, steps):
    ...     config = RunConfig("wallclock", "resnet", "none" if factor == 1 else "before_augment", factor,
    ...                        0 if factor == 1 else 1024, 0, 4.0)
    ...     return TimedRun(config, 0.8, steps, True, 0.0, steps, seconds, "", seconds_in_steps=seconds / 0.1)
    >>> runs_ratio(TimeToTargetResults((run(1.0, 200.0, 500), run(8.0, 70.0, 700))), "wallclock")
    {('resnet', 4.0): [4.0]}
    """
    if mode not in (Mode.REPLAY, Mode.WALLCLOCK):
        raise ValueError(f"mode: expected 'replay' or 'wallclock', got {mode!r}")
    runs = [r for r in results.runs if r.config.mode == mode and r.seconds_in_steps]
    ratios: dict = {}
    for base in runs:
        config = base.config
        if config != config.baseline():
            continue
        if mode == Mode.REPLAY:
            step_seconds, base_seconds = 1.0, base.seconds_in_steps
        else:
            echoed = [r for r in runs if r.config.baseline() == config and not r.config.auto_echo and r.config != config]
            if not echoed:
                continue
            top = max(echoed, key=lambda r: r.config.factor)
            step_seconds, base_seconds = top.seconds / top.steps, base.seconds
        ratios.setdefault((config.task, config.ratio), []).append(base_seconds / base.steps / step_seconds)
    return ratios


def wallclock_table(results: TimeToTargetResults) -> str:
    """Markdown: real training on this CPU, time to target per R and e, and the speedup over the same seed's baseline.

    R appears twice: as calibrated before the runs (``rates`` in the results file) and over
    the runs (:func:`runs_ratio`).
    """
    measured = {(m.of.task, m.of.ratio): m.value for m in results.rates or ()}
    over_runs = runs_ratio(results, Mode.WALLCLOCK)
    rows = []
    for r in wallclock_rows(results):
        key = (r.config.task, r.config.ratio)
        rates, over_run = measured.get(key), over_runs.get(key)
        rows.append([r.config.task, f"{r.config.ratio:g}", f"{rates.measured_ratio:.2f}" if rates else "-",
                     spread_cell(spread(over_run), ".2f") if over_run else "-", _factor_label(r), r.config.echo_shuffle,
                     f"{r.reached}/{r.runs}", spread_cell(r.of(Measure.SECONDS), ",.0f"),
                     spread_cell(r.of(Measure.SECONDS_IN_STEPS), ",.0f"),
                     spread_cell(_inverse(r.vs_baseline(Measure.SECONDS)), ".2f", ratio=True),
                     spread_cell(r.of(Measure.FRESH_EXAMPLES), ",.0f"), spread_cell(r.of(Measure.STEPS), ",.0f")])
    return markdown_table(["task", "R", "R under load", "R over the runs", "e", "echo shuffle", "reached",
                           "time to target (s)", "(loaded step times)", "speedup over baseline (same seed)",
                           "fresh examples", "steps"], rows, align="lrrrlrrrrrrr")


@dataclasses.dataclass(frozen=True)
class Pair:
    """One seed's AutoEcho run against the same seed's fixed run: steps, and AutoEcho's time, time per step and steps over the fixed run's."""

    seed: int
    auto_steps: int
    fixed_steps: int
    time: float
    time_per_step: float
    steps: float


@dataclasses.dataclass(frozen=True)
class BestRow:
    """Per task and R: the best fixed configuration by median speedup, and AutoEcho against it, seed by seed."""

    task: str
    ratio: float
    best: RunConfig
    best_speedup: Spread
    auto: Optional[Row]
    pairs: tuple[Pair, ...]

    @property
    def auto_time_vs_best(self) -> Optional[Spread]:
        return spread([pair.time for pair in self.pairs])

    @property
    def auto_time_per_step_vs_best(self) -> Optional[Spread]:
        return spread([pair.time_per_step for pair in self.pairs])

    @property
    def auto_steps_vs_best(self) -> Optional[Spread]:
        return spread([pair.steps for pair in self.pairs])


def of_seeds(results: TimeToTargetResults, seeds: Sequence[int]) -> TimeToTargetResults:
    """The runs (and their pipelines' measures and timelines) of ``seeds`` only: a table of the seeds a law was chosen on, or of seeds held out from it.

    >>> from benchmarks.lib.run_records import SampleRun
    >>> run = lambda seed: SampleRun(True, 100, 0.0, 1.0, 2.0, (), RunConfig("sample", "resnet", "before_augment", 2.0, 8, seed),
    ...                              0.8, "")
    >>> [r.config.seed for r in of_seeds(TimeToTargetResults((run(0), run(3), run(4))), (3, 4, 5)).runs]
    [3, 4]
    """
    kept = dataclasses.replace(results, runs=tuple(r for r in results.runs if r.config.seed in seeds))
    if results.pipelines is not None:
        kept = dataclasses.replace(kept, pipelines=tuple(p for p in results.pipelines if p.of.seed in seeds))
    if results.auto_echo_timelines is not None:
        kept = dataclasses.replace(kept, auto_echo_timelines=tuple(t for t in results.auto_echo_timelines
                                                                   if t.of.seed in seeds))
    return kept


def best_rows(results: TimeToTargetResults, mode: Mode = Mode.REPLAY) -> list[BestRow]:
    """Per task and R (``mode`` is replay or wallclock): the best fixed e by median speedup, and AutoEcho against it, seed by seed."""
    rows_by_key: dict = {}
    for row in rows(results, mode, (Measure.SECONDS_IN_STEPS, Measure.HELD_FACTOR)):
        rows_by_key.setdefault((row.config.task, row.config.ratio), []).append(row)
    runs = [r for r in results.runs if r.config.mode == mode and r.seconds]
    out = []
    for (task, ratio), group in sorted(rows_by_key.items()):
        fixed = [r for r in group if not r.config.auto_echo and r.vs_baseline(Measure.SECONDS_IN_STEPS) is not None]
        if not fixed:
            continue
        best = max(fixed, key=lambda r: r.vs_baseline(Measure.SECONDS_IN_STEPS).inverse().median)
        auto = next((r for r in group if r.config.auto_echo), None)
        # AutoEcho's time over the best fixed e's, each seed against itself, and its two
        # factors: time per step (what the controller's choices cost on the host) times
        # steps to target (what training on its factors needed, crossing noise included).
        out.append(BestRow(task, ratio, best.config, best.vs_baseline(Measure.SECONDS_IN_STEPS).inverse(), auto,
                           tuple(_auto_echo_pairs(runs, task, ratio, best.config))))
    return out


def _auto_echo_pairs(runs: list[Run], task: str, ratio: float, fixed: RunConfig) -> list[Pair]:
    """Each seed's AutoEcho run at ``task`` and ``ratio`` against the same seed's run of the ``fixed`` configuration.

    ``fixed`` names the configuration by its ``factor``, ``echo_shuffle`` and ``placement``;
    a seed without both runs is left out.
    """
    pairs = []
    for record in runs:
        config = record.config
        if config.task != task or config.ratio != ratio or not config.auto_echo:
            continue
        twin = next((r for r in runs if r.config.task == task and r.config.ratio == ratio and not r.config.auto_echo
                     and r.config.seed == config.seed and r.config.factor == fixed.factor
                     and r.config.echo_shuffle == fixed.echo_shuffle and r.config.placement == fixed.placement), None)
        if twin is not None:
            pairs.append(Pair(seed=config.seed, auto_steps=record.steps, fixed_steps=twin.steps,
                              time=record.seconds / twin.seconds,
                              time_per_step=(record.seconds / record.steps) / (twin.seconds / twin.steps),
                              steps=record.steps / twin.steps))
    return sorted(pairs, key=lambda pair: pair.seed)


def paired_table(results: TimeToTargetResults, mode: Mode = Mode.REPLAY, factor_at_ratio: bool = False) -> str:
    """Markdown: AutoEcho against each fixed configuration of the same task and R, seed by seed, then the median.

    For a results file that times AutoEcho beside one fixed factor over many seeds (no
    baseline needed): every AutoEcho run with a same-seed run of that factor is a pair.
    ``factor_at_ratio``: only the fixed factor equal to R (the best fixed factor where
    R is, as on the ResNet replays), not every factor the file replays at that R.
    """
    runs = [r for r in results.runs if r.config.mode == mode and r.seconds]
    fixed_configs = sorted({r.config.without_seed() for r in runs if not r.config.auto_echo
                            and (not factor_at_ratio or r.config.factor == r.config.ratio)},
                           key=lambda c: (c.task, c.ratio, c.factor, c.echo_shuffle, c.placement))
    rows = []
    for fixed_config in fixed_configs:
        task, ratio = fixed_config.task, fixed_config.ratio
        pairs = _auto_echo_pairs(runs, task, ratio, fixed_config)
        fixed = f"{fixed_config.factor:g} ({fixed_config.echo_shuffle})"
        for pair in pairs:
            rows.append([task, f"{ratio:g}", pair.seed, fixed, f"{pair.auto_steps:,}", f"{pair.fixed_steps:,}",
                         f"{pair.time:.2f}", f"{pair.time_per_step:.2f}", f"{pair.steps:.2f}"])
        if pairs:
            summary = [spread_cell(spread([getattr(pair, name) for pair in pairs]), ".2f")
                       for name in ("time", "time_per_step", "steps")]
            rows.append([task, f"{ratio:g}", f"median of {len(pairs)}", fixed, "", "", *summary])
    return markdown_table(["task", "R", "seed", "fixed e (echo shuffle)", "AutoEcho steps", "fixed e's steps",
                           "AutoEcho time / fixed e's", "= time per step / fixed e's", "x steps / fixed e's"], rows,
                          align="lrrrrrrrr")


def fixed_steps_table(results: TimeToTargetResults) -> str:
    """Markdown: each fixed factor's steps to target seed by seed, and its steps over the lowest factor's.

    For a results file with sample runs of nearby factors over many seeds: how far apart
    two configurations that train almost alike land is the noise a comparison of steps
    to target carries on that task.

    >>> from benchmarks.lib.run_records import SampleRun
    >>> run = lambda factor, seed, steps: SampleRun(True, steps, 0.0, 1.0, factor, (),
    ...                                             RunConfig("sample", "resnet", "before_augment", factor, 8, seed), 0.8, "")
    >>> print(fixed_steps_table(TimeToTargetResults((run(2.0, 0, 100), run(2.5, 0, 120), run(2.0, 1, 100), run(2.5, 1, 90)))))
    | task | placement (echo shuffle) | seed | e = 2 | e = 2.5 |
    |---|---|---:|---:|---:|
    | resnet | before_augment (8) | 0 | 100 | 120 |
    | resnet | before_augment (8) | 1 | 100 | 90 |
    | resnet | before_augment (8) | median over e = 2 | | 1.05 (0.90-1.20) |
    """
    runs = [r for r in results.runs if r.config.mode == Mode.SAMPLE and not r.config.auto_echo and r.reached]
    groups = sorted({(r.config.task, r.config.placement, r.config.echo_shuffle) for r in runs})
    factors = sorted({r.config.factor for r in runs})
    rows = []
    for task, placement, echo_shuffle in groups:
        steps = {(r.config.factor, r.config.seed): r.steps for r in runs
                 if (r.config.task, r.config.placement, r.config.echo_shuffle) == (task, placement, echo_shuffle)}
        label = [task, f"{placement} ({echo_shuffle})"]
        seeds = sorted({seed for _, seed in steps})
        for seed in seeds:
            rows.append([*label, seed, *(f"{steps[f, seed]:,}" if (f, seed) in steps else "-" for f in factors)])
        low = factors[0]
        ratios = [spread([steps[f, seed] / steps[low, seed] for seed in seeds if (f, seed) in steps and (low, seed) in steps])
                  for f in factors[1:]]
        rows.append([*label, f"median over e = {low:g}", "", *(spread_cell(r, ".2f") for r in ratios)])
    return markdown_table(["task", "placement (echo shuffle)", "seed", *(f"e = {f:g}" for f in factors)], rows,
                          align="llr" + "r" * len(factors))


def best_table(results: TimeToTargetResults, mode: Mode = Mode.REPLAY) -> str:
    """Markdown: per R, the best fixed e's speedup, AutoEcho's, and AutoEcho's time over the best's (same seed)."""
    rows = []
    for r in best_rows(results, mode):
        auto = r.auto
        reached = "-" if auto is None else f"{auto.reached}/{auto.runs}"
        auto_speedup = None if auto is None else _inverse(auto.vs_baseline(Measure.SECONDS_IN_STEPS))
        held = None if auto is None else auto.of(Measure.HELD_FACTOR)
        rows.append([r.task, f"{r.ratio:g}", f"{r.best.factor:g} ({r.best.echo_shuffle})",
                     spread_cell(r.best_speedup, ".2f", ratio=True), reached,
                     spread_cell(auto_speedup, ".2f", ratio=True), spread_cell(held, ".1f"),
                     spread_cell(r.auto_time_vs_best, ".2f"), spread_cell(r.auto_time_per_step_vs_best, ".2f"),
                     spread_cell(r.auto_steps_vs_best, ".2f")])
    return markdown_table(["task", "R", "best fixed e (echo shuffle)", "its speedup", "AutoEcho reached",
                           "AutoEcho speedup", "e AutoEcho held", "AutoEcho time / best fixed e's",
                           "= time per step / best's", "x steps / best's"], rows, align="lrrrrrrrrr")
