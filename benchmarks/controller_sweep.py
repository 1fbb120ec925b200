"""The echo controller on a randomized family of training loops: its distribution against the best fixed factor.

Each case is a loop of :mod:`echoing.simulation` drawn at random (:func:`draw_case`):

* R log-uniform in 0.5-16 (a third of the cases keep it, a third change it at once at a
  step in 300-900, a third ramp it to another R over 300-1,000 steps), ``max_factor`` 4,
  8 or 16;
* an output buffer of 2-64 batches and an upstream prefetch of 1-32 (log-uniform);
* half read batch by batch, half in lumps of 2-32 batches (fixed or log-normal);
* step-time jitter 0-40% and read jitter 0-50%; steps of 10-300 ms;
* in half the cases, an unannounced pause of 0.1-5 s every 50-1,000 steps;
* ``steps_per_execution`` 1, 2, 4 or 8; cold or warm starts (buffers empty, or full of
  batches made at the variable's first value, 1).

Every case runs the controller as shipped (the law, given the echo stage's fresh count),
a reference told the true R at every step (:class:`ToldRatio`: no law can know it
sooner), the same reference told R only after an opening of :data:`OPENING_STEPS` steps at
``max_factor`` (what the law's opening alone costs, however well it measured after) and
every fixed factor of a grid from 1 to
``max_factor`` (ratio 1.1), each until it reaches the same training progress, a step at
factor e making ``1 / (1 + c (e - 1))`` of a fresh step's. ``c`` is a task's own (fitted:
0.08 for the ResNet, 0.21 for the Transformer); every case is judged at 0.05 and 0.19
(:data:`SLOPES`). A second reference, "one known factor", knows every fixed factor's
time in advance but not c: it runs the grid factor whose larger ratio over the two
slopes' best is smallest, as a law that knew each loop perfectly but not what a copy
costs would (:func:`known_factor`). Figures, per case and slope:
the controller's time over the best fixed factor's (``over_best``), over no echo's
(``over_none``), over ``max_factor``'s where R stays at or above it, and after a change
of R the share of steps from 150 steps after it whose factor is within [0.85, 1.5] of
the new R (clipped to ``[1, max_factor]``).

**What one factor chosen without c can reach** (:class:`KnownFactor`): on every case,
the grid factor best at each of :data:`CHOSEN_AT` (a factor chosen knowing every fixed
factor's time at one slope c'), judged at both slopes, beside the "one known factor"
above. It is the frontier a law that does not know c cannot pass on loops whose R stays
put, where no law beats the best fixed factor by more than its start-up: each row's
slowest loops against the best fixed factor, and the loops where it is slower than no
echo (at all, and by more than :data:`SLOWER_TOLERANCE`).

A second family runs two trainers in step (synchronous data parallelism,
``MultiWorkerMirroredStrategy``), each reading its own input at its own R (log-uniform in
1-8 each, ``max_factor`` 8, step jitter 0-20%, read jitter 0-30%, buffers of 4-16 and
prefetch of 1-8), each with its own controller given its own fresh count, and then also
its loop's own wait for input (:class:`Signals`; :func:`draw_pair`, :func:`judge_pair`).
Figures: the step rate over the second half over the step's own rate, the share of
trainers whose mean factor over the second half is within [0.85, 1.5] of their own R
(clipped to ``[1, max_factor]``), and the highest such ratio.

The law was designed on cases drawn from seeds 1000 and up; the committed results and
the CI slice (``tests/test_controller_sweep.py``) use seeds 0-199, which it was never
tuned on. Run ``python -m benchmarks.controller_sweep`` (about a minute on 2 cores;
``--cases 30`` for a slice). It writes ``controller_sweep.json`` and a plot of the
distributions to ``runs/`` (``--output-dir benchmarks/results`` for the committed ones);
``python -m benchmarks.readme_tables`` makes the page's tables from the JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import math
import multiprocessing
import random
import statistics
from pathlib import Path
from typing import Callable, Optional

import echoing
from echoing.simulation import ELEMENTS_PER_STEP, Run, Scenario, simulate, simulate_in_step
from benchmarks.lib import results_io

# Progress per step at factor e is 1 / (1 + c (e - 1)). Fitted to the committed sample
# runs (benchmarks.lib.progress.progress_slope on benchmarks/results/time_to_target.json,
# checked in tests/test_controller_sweep.py): 0.080 for the ResNet echoing before
# augmentation with a shuffle of 1024, 0.212 for the Transformer with a shuffle of 256 (seeds 0-5).
# The sweep judges every loop at 0.05 and 0.19, a little echo's cost and a lot's.
SLOPES = (0.05, 0.19)
# The training progress every run reaches, in fresh steps: long enough for a change of R
# at step 900 and 1,000 steps after it at e = 1.
PROGRESS = 1500.0
# Fixed factors: 1 and then 1.1 times apart up to max_factor (which is in the grid too).
GRID_RATIO = 1.1
# A change of R is judged from this many steps after it (the target).
SETTLE_AFTER_CHANGE = 150
FIRST_REPORTED_SEED = 0
FIRST_TUNING_SEED = 1000


class Contender(str, enum.Enum):
    """What runs each case besides the grid of fixed factors: the law, and the references it is held against."""

    LAW = "law"  # echoing.EchoController as shipped (its default copy_cost), given the fresh count
    LAW_AT_MATCHED_C = "law, copy_cost = c"  # the same, told the c it is judged at
    TOLD_R = "told R"  # a reference: the factor set to HEADROOM x the true R at every step
    TOLD_R_AFTER_OPENING = "told R after an opening"  # the same after OPENING_STEPS steps at max_factor
    ONE_KNOWN_FACTOR = "one known factor"  # a reference: see known_factor()


# The slopes c' at which the frontier's factors are chosen (the two judged, 0.1 about their
# geometric mean, 0.097, and two between it and 0.19).
CHOSEN_AT = (0.05, 0.1, 0.13, 0.16, 0.19)
# "Slower than no echo" is also counted beyond this share: on a loop with R below 1 no
# echo is best, and a law that sees only step times and the fresh count must run a factor
# above 1 for some steps to learn so, which costs a little progress at any c > 0.
SLOWER_TOLERANCE = 0.02


# The told-R reference holds the shipped law's headroom over R.
HEADROOM = echoing.ControllerSettings().headroom


# The law's opening reads the step's own rate at max_factor over at least 3 windows of 8
# steps (echoing.control.estimate) after a settle of 4: the told-R-after-an-opening
# reference spends this many steps there before it is told R.
OPENING_STEPS = 28


class ToldRatio:
    """The reference a law is held against besides the best fixed factor: told the true R at every step, it sets ``HEADROOM x R``.

    No law can know R sooner; on lumpy input the best factor lies well above R, which this
    shows. With ``opening_steps``, it first runs that many steps at ``max_factor``, as the
    law's opening does, and is told R only then.
    """

    def __init__(self, case: "Case", opening_steps: int = 0):
        self.case = case
        self.opening_steps = opening_steps
        self.factor = 1.0  # The variable's first value; the first call sets R's factor.

    def _at(self, step: int) -> float:
        if step < self.opening_steps:
            return self.case.max_factor
        return min(self.case.max_factor, max(1.0, HEADROOM * self.case.ratio_at(step)))

    def observe(self, step: int, timestamp: float, fresh=None):
        factor = self._at(step)
        changed, self.factor = factor != self.factor, factor
        return True if changed else None


class Change(str, enum.Enum):
    NONE = "none"
    STEP = "step"
    RAMP = "ramp"


@dataclasses.dataclass(frozen=True)
class Case(results_io.Record):
    """One drawn loop: the scenario's settings, with R's schedule as plain numbers."""

    seed: int
    ratio: float
    ratio_after: float
    change: Change
    change_step: int
    change_steps: int
    max_factor: float
    step_seconds: float
    step_jitter: float
    upstream_jitter: float
    buffer_batches: int
    upstream_batches: int
    lump_batches: int
    lump_sigma: float
    pause_seconds: float
    pause_every_steps: int
    steps_per_execution: int
    warm: bool

    def ratio_at(self, step: int) -> float:
        if self.change == Change.NONE or step < self.change_step:
            return self.ratio
        if self.change == Change.STEP or step >= self.change_step + self.change_steps:
            return self.ratio_after
        share = (step - self.change_step) / self.change_steps
        return self.ratio * (self.ratio_after / self.ratio) ** share  # geometric ramp

    def scenario(self, steps: int) -> Scenario:
        return Scenario(ratio=self.ratio_at, steps=steps, step_seconds=self.step_seconds,
                        step_jitter=self.step_jitter, upstream_jitter=self.upstream_jitter,
                        buffer_batches=self.buffer_batches, upstream_batches=self.upstream_batches,
                        lump_batches=self.lump_batches, lump_sigma=self.lump_sigma,
                        pause_seconds=self.pause_seconds, pause_every_steps=self.pause_every_steps,
                        steps_per_execution=self.steps_per_execution, warm=self.warm, seed=self.seed)


def draw_case(seed: int) -> Case:
    """The loop of seed ``seed`` (see the module docstring for the family)."""
    rng = random.Random(seed)

    def log_uniform(low: float, high: float) -> float:
        return math.exp(rng.uniform(math.log(low), math.log(high)))

    change = rng.choice(list(Change))
    lumpy = rng.random() < 0.5
    paused = rng.random() < 0.5
    return Case(
        seed=seed, ratio=round(log_uniform(0.5, 16), 3), ratio_after=round(log_uniform(0.5, 16), 3), change=change,
        change_step=rng.randint(300, 900), change_steps=1 if change != Change.RAMP else rng.randint(300, 1000),
        max_factor=float(rng.choice([4, 8, 16])), step_seconds=round(log_uniform(0.01, 0.3), 4),
        step_jitter=round(rng.uniform(0, 0.4), 3), upstream_jitter=round(rng.uniform(0, 0.5), 3),
        buffer_batches=round(log_uniform(2, 64)), upstream_batches=round(log_uniform(1, 32)),
        lump_batches=round(log_uniform(2, 32)) if lumpy else 1,
        lump_sigma=round(rng.uniform(0.5, 1.2), 2) if lumpy and rng.random() < 0.5 else 0.0,
        pause_seconds=round(log_uniform(0.1, 5), 2) if paused else 0.0,
        pause_every_steps=round(log_uniform(50, 1000)), steps_per_execution=rng.choice([1, 2, 4, 8]),
        warm=rng.random() < 0.5)


def grid(max_factor: float) -> list[float]:
    factors, factor = [], 1.0
    while factor < max_factor - 1e-9:
        factors.append(round(factor, 4))
        factor *= GRID_RATIO
    return factors + [max_factor]


def max_steps(case: Case, progress: float = PROGRESS) -> int:
    return math.ceil(progress * (1 + max(SLOPES) * (case.max_factor - 1))) + 10


def run_case(case: Case, contender: Optional[Contender] = None, factor: Optional[float] = None,
             progress: float = PROGRESS, copy_cost: Optional[float] = None) -> Run:
    """The case at a fixed ``factor``, or run by ``contender`` (the law or a told-R reference), until ``progress``.

    ``copy_cost``: the law's setting, for ``Contender.LAW_AT_MATCHED_C``.
    """
    scenario = case.scenario(max_steps(case, progress))
    if factor is not None:
        return simulate(scenario, factor=factor, progress=progress, slope=max(SLOPES))
    controller = {Contender.LAW: lambda: echoing.EchoController(max_factor=case.max_factor,
                                                                 elements_per_step=ELEMENTS_PER_STEP),
                  Contender.LAW_AT_MATCHED_C: lambda: echoing.EchoController(
                      max_factor=case.max_factor, elements_per_step=ELEMENTS_PER_STEP, copy_cost=copy_cost),
                  Contender.TOLD_R: lambda: ToldRatio(case),
                  Contender.TOLD_R_AFTER_OPENING: lambda: ToldRatio(case, OPENING_STEPS)}[contender]()
    return simulate(scenario, factor=1.0, controller=controller, progress=progress, slope=max(SLOPES))


@dataclasses.dataclass(frozen=True)
class Result(results_io.Record):
    """One contender on one case, judged at one progress slope.

    Attributes:
      seed, contender, slope: which case, contender and ``c``.
      seconds: the controller's time to the progress.
      best_seconds, best_factor: the best fixed factor's.
      none_seconds: no echo's (factor 1).
      max_seconds: ``max_factor``'s.
      mean_factor: the controller's mean factor over its steps.
      near_share: after a change of R, the share of steps from 150 after it whose factor
        is within [0.85, 1.5] of the new R; ``nan`` without a change.
      ratio_at_or_above_max: whether R is at or above ``max_factor`` throughout.
    """

    seed: int
    contender: Contender
    slope: float
    seconds: float
    best_seconds: float
    best_factor: float
    none_seconds: float
    max_seconds: float
    mean_factor: float
    near_share: float
    ratio_at_or_above_max: bool

    @property
    def over_best(self) -> float:
        return self.seconds / self.best_seconds

    @property
    def over_none(self) -> float:
        return self.seconds / self.none_seconds

    @property
    def over_max(self) -> float:
        return self.seconds / self.max_seconds


def near_share(case: Case, run: Run) -> float:
    if case.change == Change.NONE:
        return math.nan
    start = case.change_step + case.change_steps - 1 + SETTLE_AFTER_CHANGE
    judged = [(f, min(case.max_factor, max(1.0, r))) for f, r in zip(run.factors[start:], run.ratios[start:])]
    if not judged:
        return math.nan
    return sum(0.85 * r <= f <= 1.5 * r for f, r in judged) / len(judged)


def known_factor(times_at: dict) -> float:
    """The grid factor whose larger time over the best fixed factor's, at the two :data:`SLOPES`, is smallest.

    ``times_at[slope][factor]`` is each fixed factor's time to the progress. This is the
    one factor that does best on a loop whatever c of the two applies: chosen knowing
    every fixed factor's time, as no law measuring while it trains can.

    >>> known_factor({0.05: {1.0: 10.0, 2.0: 5.5, 4.0: 5.0}, 0.19: {1.0: 10.0, 2.0: 7.0, 4.0: 8.0}})
    2.0
    """
    best = {slope: min(times_at[slope].values()) for slope in SLOPES}
    return min(times_at[SLOPES[0]], key=lambda f: max(times_at[slope][f] / best[slope] for slope in SLOPES))


@dataclasses.dataclass(frozen=True)
class KnownFactor(results_io.Record):
    """On one case, the grid factor best at slope ``chosen_at`` (c'), judged at ``slope`` (c)."""

    seed: int
    chosen_at: float
    slope: float
    factor: float
    over_best: float
    over_none: float


def judge(case: Case, progress: float = PROGRESS) -> tuple[list[Result], list[KnownFactor]]:
    """Every contender and slope on ``case`` (against the grid's runs, each until ``progress``), and the frontier's factors."""
    fixed = {factor: run_case(case, factor=factor, progress=progress) for factor in grid(case.max_factor)}
    times_at = {slope: {f: r.time_to_progress(progress, slope) for f, r in fixed.items()}
                for slope in sorted({*SLOPES, *CHOSEN_AT})}
    best_at = {slope: min(times_at[slope].values()) for slope in SLOPES}
    frontier = []
    for chosen_at in CHOSEN_AT:
        chosen = min(fixed, key=times_at[chosen_at].get)
        frontier += [KnownFactor(seed=case.seed, chosen_at=chosen_at, slope=slope, factor=chosen,
                                 over_best=times_at[slope][chosen] / best_at[slope],
                                 over_none=times_at[slope][chosen] / times_at[slope][1.0]) for slope in SLOPES]
    results = []
    runs = {}  # (contender, slope) -> the run judged at that slope
    for contender in Contender:
        if contender == Contender.ONE_KNOWN_FACTOR:
            runs.update({(contender, slope): fixed[known_factor(times_at)] for slope in SLOPES})
        elif contender == Contender.LAW_AT_MATCHED_C:
            runs.update({(contender, slope): run_case(case, contender, progress=progress, copy_cost=slope)
                         for slope in SLOPES})
        else:
            run = run_case(case, contender, progress=progress)
            runs.update({(contender, slope): run for slope in SLOPES})
    for contender in Contender:
        for slope in SLOPES:
            run = runs[contender, slope]
            times = times_at[slope]
            best = min(times, key=times.get)
            results.append(Result(
                seed=case.seed, contender=contender, slope=slope, seconds=run.time_to_progress(progress, slope),
                best_seconds=times[best], best_factor=best, none_seconds=times[1.0],
                max_seconds=times[case.max_factor], mean_factor=statistics.fmean(run.factors),
                near_share=near_share(case, run),
                ratio_at_or_above_max=min(case.ratio, case.ratio_after if case.change != Change.NONE else case.ratio)
                >= case.max_factor))
    return results, frontier


def sweep(seeds, processes: int = 2, progress: float = PROGRESS) -> tuple[list[Case], list[Result], list[KnownFactor]]:
    cases = [draw_case(seed) for seed in seeds]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            judged = pool.starmap(judge, [(case, progress) for case in cases], chunksize=4)
    else:
        judged = [judge(case, progress) for case in cases]
    return (cases, [result for results, _ in judged for result in results],
            [known for _, frontier in judged for known in frontier])


# Steps of a two-trainer run; the second half is judged.
IN_STEP_STEPS = 2000


@dataclasses.dataclass(frozen=True)
class Pair(results_io.Record):
    """Two trainers in step: each its own input (R), the same step."""

    seed: int
    ratios: tuple
    step_jitter: float
    upstream_jitter: float
    buffer_batches: int
    upstream_batches: int

    def scenarios(self) -> list[Scenario]:
        return [Scenario(ratio=ratio, steps=IN_STEP_STEPS, step_seconds=0.02, step_jitter=self.step_jitter,
                         upstream_jitter=self.upstream_jitter, buffer_batches=self.buffer_batches,
                         upstream_batches=self.upstream_batches, seed=self.seed) for ratio in self.ratios]


def draw_pair(seed: int) -> Pair:
    rng = random.Random(seed)
    return Pair(seed=seed, ratios=(round(math.exp(rng.uniform(0, math.log(8))), 3),
                                   round(math.exp(rng.uniform(0, math.log(8))), 3)),
                step_jitter=round(rng.uniform(0, 0.2), 3), upstream_jitter=round(rng.uniform(0, 0.3), 3),
                buffer_batches=rng.randint(4, 16), upstream_batches=rng.randint(1, 8))


@dataclasses.dataclass(frozen=True)
class PairResult(results_io.Record):
    """The controllers on one :class:`Pair`: the second half's step rate over the step's own, and each trainer's factor over its R."""

    seed: int
    signals: Signals
    rate_share: float
    factor_over_ratio: tuple


class Signals(str, enum.Enum):
    """What a trainer's controller is given in step (examples/two_trainers.py gives both)."""

    COUNT = "fresh count"  # observe(step, timestamp, fresh)
    COUNT_AND_WAIT = "fresh count and own wait"  # observe(step, timestamp, fresh, input_wait)


def judge_pair(pair: Pair, signals: Signals = Signals.COUNT_AND_WAIT) -> PairResult:
    half = IN_STEP_STEPS // 2
    controllers = [echoing.EchoController(max_factor=8.0, elements_per_step=ELEMENTS_PER_STEP) for _ in pair.ratios]
    runs = simulate_in_step(pair.scenarios(), controllers=controllers, pass_wait=signals == Signals.COUNT_AND_WAIT)
    ends = runs[0].step_ends
    rate_share = (len(ends) - half - 1) / (ends[-1] - ends[half]) * 0.02
    over = tuple(round(statistics.fmean(run.factors[half:]) / min(8.0, max(1.0, ratio)), 4)
                 for run, ratio in zip(runs, pair.ratios))
    return PairResult(seed=pair.seed, signals=signals, rate_share=round(rate_share, 4), factor_over_ratio=over)


@dataclasses.dataclass(frozen=True)
class PairSummary(results_io.Record):
    """The two-trainer family's distribution, for one of :class:`Signals`."""

    signals: Signals
    pairs: int
    rate_p50: float
    rate_p05: float
    rate_worst: float
    near: int
    trainers: int
    over_worst: float  # the highest of any trainer's mean factor over its own R


def summarize_pairs(results: list[PairResult], signals: Signals) -> PairSummary:
    results = [r for r in results if r.signals == signals]
    rates = sorted(r.rate_share for r in results)
    overs = [o for r in results for o in r.factor_over_ratio]
    return PairSummary(signals=signals, pairs=len(results), rate_p50=statistics.median(rates),
                       rate_p05=rates[len(rates) // 20], rate_worst=rates[0],
                       near=sum(0.85 <= o <= 1.5 for o in overs), trainers=len(overs), over_worst=max(overs))


def pair_table(summaries: list[PairSummary]) -> str:
    lines = ["| each controller given | pairs | step rate / own: p50 | p5 | worst | "
             "trainers within [0.85, 1.5] x own R | highest factor / own R |",
             "|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s.signals.value} | {s.pairs} | {s.rate_p50:.3f} | {s.rate_p05:.3f} | {s.rate_worst:.3f} | "
                     f"{s.near} of {s.trainers} | {s.over_worst:.2f} |")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class SweepSettings(results_io.Record):
    """The sweep's settings, as its results file holds them."""

    cases: int
    pairs: int
    first_seed: int
    slopes: tuple[float, ...]
    progress: float
    grid_ratio: float
    settle_after_change: int
    chosen_at: tuple[float, ...]
    slower_tolerance: float
    controller: dict  # echoing.ControllerSettings, as dataclasses.asdict gives it


@dataclasses.dataclass(frozen=True)
class SweepResults(results_io.Record):
    """Every case, result and summary of the sweep, and of its two-trainer family."""

    cases: tuple[Case, ...]
    results: tuple[Result, ...]
    summaries: tuple[Summary, ...]
    frontier: tuple[KnownFactor, ...]
    frontier_summaries: tuple[FrontierSummary, ...]
    in_step: tuple[Pair, ...]
    in_step_results: tuple[PairResult, ...]
    in_step_summaries: tuple[PairSummary, ...]


def document_pair_table(document: dict) -> str:
    """The two-trainer family's table from a results document (``python -m benchmarks.readme_tables``)."""
    settings, results = results_io.typed(document, SweepSettings, SweepResults)
    if not settings.pairs:
        return "_No two-trainer pairs were drawn (`--pairs 0`)._"
    seeds = f"{settings.first_seed}-{settings.first_seed + settings.pairs - 1}"
    return pair_table(list(results.in_step_summaries)) + f"\n\n_Pairs of seeds {seeds}._"


def sweep_pairs(seeds, processes: int = 2) -> tuple[list[Pair], list[PairResult]]:
    """Every pair of ``seeds`` judged with each of :class:`Signals`."""
    pairs = [draw_pair(seed) for seed in seeds]
    jobs = [(pair, signals) for signals in Signals for pair in pairs]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            return pairs, pool.starmap(judge_pair, jobs, chunksize=4)
    return pairs, [judge_pair(*job) for job in jobs]


def quantile(values: list, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


@dataclasses.dataclass(frozen=True)
class Summary(results_io.Record):
    """The distribution of one contender at one slope."""

    contender: Contender
    slope: float
    cases: int
    p50: float
    p95: float
    worst: float
    worst_seed: int
    slower_than_none: int
    slower_beyond_tolerance: int  # slower than no echo by more than SLOWER_TOLERANCE
    max_cases: int
    worst_over_max: float
    change_cases: int
    change_met: int


def slower_counts(over_none: list[float]) -> dict:
    """How many of the times over no echo's are slower at all, and by more than :data:`SLOWER_TOLERANCE`."""
    return {"slower_than_none": sum(ratio > 1.0 + 1e-9 for ratio in over_none),
            "slower_beyond_tolerance": sum(ratio > 1.0 + SLOWER_TOLERANCE for ratio in over_none)}


def summarize(results: list[Result], contender: Contender, slope: float) -> Summary:
    mine = [r for r in results if r.contender == contender and r.slope == slope]
    over = [r.over_best for r in mine]
    worst = max(mine, key=lambda r: r.over_best)
    at_max = [r for r in mine if r.ratio_at_or_above_max]
    changed = [r for r in mine if not math.isnan(r.near_share)]
    return Summary(contender=contender, slope=slope, cases=len(mine), p50=statistics.median(over), p95=quantile(over, 0.95),
                   worst=worst.over_best, worst_seed=worst.seed,
                   **slower_counts([r.over_none for r in mine]), max_cases=len(at_max),
                   worst_over_max=max((r.over_max for r in at_max), default=math.nan),
                   change_cases=len(changed), change_met=sum(r.near_share >= 0.9 for r in changed))


@dataclasses.dataclass(frozen=True)
class Target:
    """A bound on one figure of the law's distribution at one slope (the controller issue's targets)."""

    figure: str  # a Summary field
    slope: float
    bound: float
    what: str  # the figure in words
    contender: Contender = Contender.LAW  # whose figure

    def value(self, summary: Summary) -> float:
        return getattr(summary, self.figure)

    def met(self, summary: Summary) -> bool:
        return self.value(summary) <= self.bound


TARGETS = tuple(
    Target(figure, slope, bound, what) for figure, what, bounds in (
        ("p50", "p50 over the best fixed factor", (1.02, 1.02)),
        ("p95", "p95 over the best fixed factor", (1.20, 1.12)),
        ("worst", "worst over the best fixed factor", (1.50, 1.50)),
        ("worst_over_max", "R >= max_factor throughout: worst over e = max_factor", (1.05, 1.05)),
        ("slower_beyond_tolerance", f"loops slower than no echo by over {SLOWER_TOLERANCE:.0%}", (4, 4)),
    ) for slope, bound in zip(SLOPES, bounds)) + tuple(
    Target("p95", slope, 1.10, "copy_cost = c: p95 over the best fixed factor", Contender.LAW_AT_MATCHED_C)
    for slope in SLOPES)


def target_table(summaries: list[Summary]) -> str:
    """Each target, the law's figure and whether it is met, beside the told-R references' figures."""
    at = {(s.contender, s.slope): s for s in summaries}
    shown = [c for c in (Contender.TOLD_R, Contender.TOLD_R_AFTER_OPENING) if (c, SLOPES[0]) in at]
    lines = ["| figure | c | target | law | met | " + " | ".join(c.value for c in shown) + " |",
             "|---|---|---|---|---|" + "---|" * len(shown)]
    for t in TARGETS:
        if (t.contender, t.slope) not in at:
            continue
        law = at[t.contender, t.slope]
        figures = [t.value(law)] + [t.value(at[c, t.slope]) for c in shown]
        text = [f"{v:.0f}" if t.figure == "slower_beyond_tolerance" else f"{v:.3f}" for v in figures]
        bound = f"{t.bound:.0f}" if t.figure == "slower_beyond_tolerance" else f"{t.bound:.2f}"
        lines.append(f"| {t.what} | {t.slope:g} | <= {bound} | {text[0]} | {'yes' if t.met(law) else 'no'} | "
                     + " | ".join(text[1:]) + " |")
    return "\n".join(lines)


def document_target_table(document: dict) -> str:
    """The targets' table from a results document (``python -m benchmarks.readme_tables``)."""
    return _with_seeds(document, lambda results: target_table(list(results.summaries)))


@dataclasses.dataclass(frozen=True)
class FrontierSummary(results_io.Record):
    """The distribution of the factor chosen at ``chosen_at``, judged at ``slope``, over one set of cases."""

    cases_of: str  # "all", or "R constant"
    chosen_at: float
    slope: float
    cases: int
    p50: float
    p95: float
    worst: float
    slower_than_none: int
    slower_beyond_tolerance: int


def summarize_frontier(frontier: list[KnownFactor], cases: list[Case]) -> list[FrontierSummary]:
    """Each chosen slope at each judged slope, over every case and over the cases whose R stays put."""
    constant = {case.seed for case in cases if case.change == Change.NONE}
    summaries = []
    for cases_of, keep in (("all", lambda k: True), ("R constant", lambda k: k.seed in constant)):
        for chosen_at in CHOSEN_AT:
            for slope in SLOPES:
                mine = [k for k in frontier if k.chosen_at == chosen_at and k.slope == slope and keep(k)]
                if not mine:
                    continue
                over = [k.over_best for k in mine]
                summaries.append(FrontierSummary(
                    cases_of=cases_of, chosen_at=chosen_at, slope=slope, cases=len(mine),
                    p50=statistics.median(over), p95=quantile(over, 0.95), worst=max(over),
                    **slower_counts([k.over_none for k in mine])))
    return summaries


def frontier_table(summaries: list[FrontierSummary]) -> str:
    lines = ["| loops | factor best at c' | judged at c | cases | p50 | p95 | worst | "
             f"slower than no echo (by over {SLOWER_TOLERANCE:.0%}) |",
             "|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s.cases_of} | {s.chosen_at:g} | {s.slope:g} | {s.cases} | {s.p50:.3f} | {s.p95:.3f} | "
                     f"{s.worst:.3f} | {s.slower_than_none} ({s.slower_beyond_tolerance}) |")
    return "\n".join(lines)


def document_frontier_table(document: dict) -> str:
    """The frontier's table from a results document (``python -m benchmarks.readme_tables``)."""
    return _with_seeds(document, lambda results: frontier_table(list(results.frontier_summaries)))


def _with_seeds(document: dict, table_of: Callable[["SweepResults"], str]) -> str:
    """A table of a results document's cases, and the seeds they were drawn from."""
    settings, results = results_io.typed(document, SweepSettings, SweepResults)
    seeds = f"{settings.first_seed}-{settings.first_seed + settings.cases - 1}"
    return table_of(results) + f"\n\n_Cases of seeds {seeds}._"


def table(summaries: list[Summary]) -> str:
    lines = [f"| run by | c | cases | p50 | p95 | worst (seed) | slower than no echo (by over {SLOWER_TOLERANCE:.0%}) "
             "| R >= max: worst over e = max | after a change of R: >= 90% near R |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s.contender.value} | {s.slope:g} | {s.cases} | {s.p50:.3f} | {s.p95:.3f} | "
                     f"{s.worst:.3f} ({s.worst_seed}) | {s.slower_than_none} ({s.slower_beyond_tolerance}) | "
                     f"{s.worst_over_max:.3f} ({s.max_cases} cases) | {s.change_met} of {s.change_cases} |")
    return "\n".join(lines)


def document_table(document: dict) -> str:
    """The summaries' table from a results document (``python -m benchmarks.readme_tables``)."""
    return _with_seeds(document, lambda results: table(list(results.summaries)))


def document_reads_table(document: dict) -> str:
    """Each contender's distribution on the loops whose upstream reads batch by batch and on those that read in lumps."""
    settings, results = results_io.typed(document, SweepSettings, SweepResults)
    lumpy = {case.seed: case.lump_batches > 1 for case in results.cases}
    lines = ["| run by | c | reads | cases | p50 | p95 | worst |", "|---|---|---|---|---|---|---|"]
    for contender in Contender:
        for slope in settings.slopes:
            for name, in_lumps in (("batch by batch", False), ("in lumps", True)):
                over = sorted(r.over_best for r in results.results
                              if r.contender == contender and r.slope == slope and lumpy[r.seed] == in_lumps)
                lines.append(f"| {contender.value} | {slope:g} | {name} | {len(over)} | {statistics.median(over):.3f} | "
                             f"{quantile(over, 0.95):.3f} | {over[-1]:.3f} |")
    return "\n".join(lines)


def plot(results: list[Result], path: Path) -> Path:
    """The distribution of ``over_best`` per contender and slope (sorted, one line each), with the targets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 3.6))
    styles = {Contender.LAW: "-", Contender.LAW_AT_MATCHED_C: (0, (5, 1, 1, 1)), Contender.TOLD_R: ":",
              Contender.TOLD_R_AFTER_OPENING: "--", Contender.ONE_KNOWN_FACTOR: "-."}
    for contender in Contender:
        for slope in SLOPES:
            values = sorted(r.over_best for r in results if r.contender == contender and r.slope == slope)
            shares = [(i + 0.5) / len(values) for i in range(len(values))]
            axis.plot(values, shares, label=f"{contender.value}, c = {slope:g}", linestyle=styles[contender])
    for target in TARGETS:
        if target.figure in ("p50", "p95"):
            axis.axvline(target.bound, color="grey", linewidth=0.8, linestyle=":" if target.figure == "p95" else "-")
    axis.set_xlabel("time to the same progress / the best fixed factor's")
    axis.set_ylabel("share of cases")
    axis.set_xlim(0.9, 1.4)
    axis.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="cases to draw (default 200)")
    parser.add_argument("--first-seed", type=int, default=FIRST_REPORTED_SEED,
                        help=f"the first case's seed (default {FIRST_REPORTED_SEED}; the law was designed on "
                             f"{FIRST_TUNING_SEED} and up)")
    parser.add_argument("--pairs", type=int, default=100, help="two-trainer pairs to draw (default 100)")
    parser.add_argument("--progress", type=float, default=PROGRESS,
                        help=f"the training progress every run reaches, in fresh steps (default {PROGRESS:g}); "
                             "longer runs show what the law costs once its opening is paid for")
    parser.add_argument("--processes", type=int, default=2)
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    for name, value, low in (("--cases", args.cases, 1), ("--pairs", args.pairs, 0), ("--processes", args.processes, 1)):
        if value < low:
            parser.error(f"{name}: expected a whole number >= {low}, got {value!r}")
    if not args.progress > 0:
        parser.error(f"--progress: expected a number of fresh steps above 0, got {args.progress!r}")
    seeds = range(args.first_seed, args.first_seed + args.cases)
    cases, results, frontier = sweep(seeds, args.processes, args.progress)
    summaries = [summarize(results, contender, slope) for contender in Contender for slope in SLOPES]
    print(table(summaries))
    print(target_table(summaries))
    frontier_summaries = summarize_frontier(frontier, cases)
    print(frontier_table(frontier_summaries))
    pairs, pair_results, pair_summaries = [], [], []
    if args.pairs:  # --pairs 0 runs the single-host family alone
        pairs, pair_results = sweep_pairs(range(args.first_seed, args.first_seed + args.pairs), args.processes)
        pair_summaries = [summarize_pairs(pair_results, signals) for signals in Signals]
        print(pair_table(pair_summaries))
    settings = SweepSettings(cases=args.cases, pairs=args.pairs, first_seed=args.first_seed, slopes=SLOPES,
                             progress=args.progress, grid_ratio=GRID_RATIO, settle_after_change=SETTLE_AFTER_CHANGE,
                             chosen_at=CHOSEN_AT, slower_tolerance=SLOWER_TOLERANCE,
                             controller=dataclasses.asdict(echoing.ControllerSettings()))
    document = SweepResults(tuple(cases), tuple(results), tuple(summaries), tuple(frontier),
                            tuple(frontier_summaries), tuple(pairs), tuple(pair_results), tuple(pair_summaries))
    path = results_io.write_results("controller_sweep", settings.record(), document.record(), args.output_dir)
    print(f"results: {path}")
    print(f"plot: {plot(results, args.output_dir / 'controller_sweep.png')}")


if __name__ == "__main__":
    main()
