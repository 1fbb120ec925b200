"""The family of simulated training loops the controller is judged on, and what every study of it shares.

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

Every run goes until the same training progress, a step at factor e making
``1 / (1 + c (e - 1))`` of a fresh step's, judged at the two :data:`SLOPES`; the fixed
factors of :func:`grid` are what every contender is held against (:func:`run_fixed`).

>>> case = draw_case(0)
>>> case == draw_case(0) and grid(case.max_factor)[0] == 1.0 and grid(case.max_factor)[-1] == case.max_factor
True
"""

from __future__ import annotations

import dataclasses
import enum
import math
import random
import statistics
from typing import Callable

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
# "Slower than no echo" is also counted beyond this share: on a loop with R below 1 no
# echo is best, and a law that sees only step times and the fresh count must run a factor
# above 1 for some steps to learn so, which costs a little progress at any c > 0.
SLOWER_TOLERANCE = 0.02


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

    def scenario(self, steps: int, common_random_numbers: bool = True) -> Scenario:
        """The loop for ``steps`` steps; the sweep judges every run of it on common random numbers.

        With them, a controller and every fixed factor meet the same k-th step time and the
        same k-th read, so a time over the best fixed factor's is the factor's doing, not
        the luck of an order of events (``echoing.simulation.Scenario``).
        """
        return Scenario(ratio=self.ratio_at, steps=steps, step_seconds=self.step_seconds,
                        step_jitter=self.step_jitter, upstream_jitter=self.upstream_jitter,
                        buffer_batches=self.buffer_batches, upstream_batches=self.upstream_batches,
                        lump_batches=self.lump_batches, lump_sigma=self.lump_sigma,
                        pause_seconds=self.pause_seconds, pause_every_steps=self.pause_every_steps,
                        steps_per_execution=self.steps_per_execution, warm=self.warm, seed=self.seed,
                        common_random_numbers=common_random_numbers)


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


def quantile(values: list, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


# How a Distribution reads its p50 and p95 from the cases' ratios (bootstrap_interval reads them alike).
FIGURES = {"p50": statistics.median, "p95": lambda values: quantile(values, 0.95)}


# Resamples of the cases an interval is read from, and the RNG seed that draws them (fixed,
# so that a table regenerated from the same results is the same table).
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 0


def bootstrap_interval(values: list, figure: Callable[[list], float], level: float = 0.95) -> tuple[float, float]:
    """The ``level`` percentile-bootstrap interval of ``figure(values)``, over the cases drawn.

    It says how far a figure of 200 drawn loops could move on another 200 drawn alike: a
    target outside it is missed, or met, by more than the luck of the draw.

    >>> bootstrap_interval([1.0] * 50, statistics.median)
    (1.0, 1.0)
    >>> values = [1.0 + i / 100 for i in range(100)]
    >>> low, high = bootstrap_interval(values, statistics.median)
    >>> low < statistics.median(values) < high
    True
    """
    rng = random.Random(BOOTSTRAP_SEED)
    figures = sorted(figure(rng.choices(values, k=len(values))) for _ in range(BOOTSTRAP_DRAWS))
    tail = (1 - level) / 2
    return figures[math.floor(tail * BOOTSTRAP_DRAWS)], figures[math.ceil((1 - tail) * BOOTSTRAP_DRAWS) - 1]


def slower_counts(over_none: list[float]) -> dict:
    """How many of the times over no echo's are slower at all, and by more than :data:`SLOWER_TOLERANCE`."""
    return {"slower_than_none": sum(ratio > 1.0 + 1e-9 for ratio in over_none),
            "slower_beyond_tolerance": sum(ratio > 1.0 + SLOWER_TOLERANCE for ratio in over_none)}


@dataclasses.dataclass(frozen=True)
class Distribution(results_io.Record):
    """How one choice of factor did across cases, judged at ``slope``: its time over the best fixed factor's.

    Attributes:
      slope, cases: the slope judged at, and how many cases.
      p50, p95, worst: the time over the best fixed factor's (:func:`quantile` for p95).
      slower_than_none, slower_beyond_tolerance: cases slower than no echo at all, and by
        more than :data:`SLOWER_TOLERANCE`.
    """

    slope: float
    cases: int
    p50: float
    p95: float
    worst: float
    slower_than_none: int
    slower_beyond_tolerance: int


def distribution(slope: float, over_best: list[float], over_none: list[float]) -> dict:
    """A :class:`Distribution`'s fields, from each case's time over the best fixed factor's and over no echo's.

    >>> Distribution(**distribution(0.05, [1.0, 1.1, 1.3], [0.5, 1.01, 1.2]))
    Distribution(slope=0.05, cases=3, p50=1.1, p95=1.3, worst=1.3, slower_than_none=2, slower_beyond_tolerance=1)
    """
    return {"slope": slope, "cases": len(over_best), **{name: figure(over_best) for name, figure in FIGURES.items()},
            "worst": max(over_best), **slower_counts(over_none)}



def run_fixed(case: Case, factor: float, progress: float = PROGRESS) -> Run:
    """The case at a fixed ``factor``, until ``progress``."""
    return simulate(case.scenario(max_steps(case, progress)), factor=factor, progress=progress, slope=max(SLOPES))


def the_law(case: Case, copy_cost: float | None = None) -> echoing.EchoController:
    """The shipped law for ``case``, given the echo stage's fresh count; ``copy_cost`` None keeps its default."""
    settings = {} if copy_cost is None else {"copy_cost": copy_cost}
    return echoing.EchoController(max_factor=case.max_factor, elements_per_step=ELEMENTS_PER_STEP, **settings)


def run_controlled(case: Case, controller, progress: float = PROGRESS, pass_wait: bool = False) -> Run:
    """The case run by ``controller`` (the law or a reference) until ``progress``; ``pass_wait``: given the loop's wait too."""
    return simulate_in_step([case.scenario(max_steps(case, progress))], controllers=[controller], progress=progress,
                            slope=max(SLOPES), pass_wait=pass_wait)[0]


# After a change of R, a factor within this band of the new R counts as near it, and a law
# meets the change when at least NEAR_BAR of its steps are near (the table's last column).
NEAR_BAND = (0.85, 1.5)
NEAR_BAR = 0.9


def near_share(case: Case, run: Run) -> float:
    """The share of steps from :data:`SETTLE_AFTER_CHANGE` after a change of R whose factor is in :data:`NEAR_BAND` of R."""
    if case.change == Change.NONE:
        return math.nan
    start = case.change_step + case.change_steps - 1 + SETTLE_AFTER_CHANGE
    judged = [(f, min(case.max_factor, max(1.0, r))) for f, r in zip(run.factors[start:], run.ratios[start:])]
    if not judged:
        return math.nan
    low, high = NEAR_BAND
    return sum(low * r <= f <= high * r for f, r in judged) / len(judged)


def course_of_ratio(case: Case) -> str:
    """Whether R stays put, rises or falls over the case (a step or a ramp)."""
    if case.change == Change.NONE:
        return "stays put"
    return "rises" if case.ratio_after > case.ratio else "falls"


def how_it_reads(case: Case) -> str:
    """Whether the case's upstream reads batch by batch or in lumps of several batches."""
    return "in lumps" if case.lump_batches > 1 else "batch by batch"


def split_rows(results, contenders, slopes, group_of, groups) -> list[list]:
    """Table rows: each contender's time over the best fixed factor (cases, p50, p95, worst) at each slope, per group.

    ``results`` carry ``contender``, ``slope`` and ``over_best``; ``group_of(result)`` names its group.
    """
    rows = []
    for contender in contenders:
        for slope in slopes:
            for name in groups:
                over = sorted(r.over_best for r in results
                              if r.contender == contender and r.slope == slope and group_of(r) == name)
                if over:
                    rows.append([contender.value, f"{slope:g}", name, len(over), f"{statistics.median(over):.3f}",
                                 f"{quantile(over, 0.95):.3f}", f"{over[-1]:.3f}"])
    return rows
