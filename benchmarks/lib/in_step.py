"""Two trainers in step: each its own input and controller, every step waiting for the slower.

Synchronous data parallelism (``MultiWorkerMirroredStrategy``): each trainer reads its own
input at its own R (log-uniform in 1-8 each, ``max_factor`` 8, step jitter 0-20%, read
jitter 0-30%, buffers of 4-16 and prefetch of 1-8), each with its own controller given its
own fresh count, and then also its loop's own wait for input (:class:`Signals`;
:func:`draw_pair`, :func:`judge_pair`). Figures: the step rate over the second half over
the step's own rate, the share of trainers whose mean factor over the second half is
within [0.85, 1.5] of their own R (clipped to ``[1, max_factor]``), and the highest such
ratio. :mod:`benchmarks.controller_sweep` runs it, into the same results file.

>>> draw_pair(0) == draw_pair(0)
True
"""

from __future__ import annotations

import dataclasses
import enum
import math
import multiprocessing
import random
import statistics

import echoing
from echoing.simulation import ELEMENTS_PER_STEP, Scenario, simulate_in_step
from benchmarks.lib import results_io
from benchmarks.lib.tables import markdown_table


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
                         upstream_batches=self.upstream_batches, seed=self.seed, common_random_numbers=True)
                for ratio in self.ratios]


def draw_pair(seed: int) -> Pair:
    rng = random.Random(seed)
    return Pair(seed=seed, ratios=(round(math.exp(rng.uniform(0, math.log(8))), 3),
                                   round(math.exp(rng.uniform(0, math.log(8))), 3)),
                step_jitter=round(rng.uniform(0, 0.2), 3), upstream_jitter=round(rng.uniform(0, 0.3), 3),
                buffer_batches=rng.randint(4, 16), upstream_batches=rng.randint(1, 8))


class Signals(str, enum.Enum):
    """What a trainer's controller is given in step (examples/two_trainers.py gives both)."""

    COUNT = "fresh count"  # observe(step, timestamp, fresh)
    COUNT_AND_WAIT = "fresh count and own wait"  # observe(step, timestamp, fresh, input_wait)


@dataclasses.dataclass(frozen=True)
class PairResult(results_io.Record):
    """The controllers on one :class:`Pair`: the second half's step rate over the step's own, and each trainer's factor over its R."""

    seed: int
    signals: Signals
    rate_share: float
    factor_over_ratio: tuple


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
    return markdown_table(
        ["each controller given", "pairs", "step rate / own: p50", "p5", "worst", "trainers within [0.85, 1.5] x own R",
         "highest factor / own R"],
        [[s.signals.value, s.pairs, f"{s.rate_p50:.3f}", f"{s.rate_p05:.3f}", f"{s.rate_worst:.3f}",
          f"{s.near} of {s.trainers}", f"{s.over_worst:.2f}"] for s in summaries])


def sweep_pairs(seeds, processes: int = 2) -> tuple[list[Pair], list[PairResult]]:
    """Every pair of ``seeds`` judged with each of :class:`Signals`."""
    pairs = [draw_pair(seed) for seed in seeds]
    jobs = [(pair, signals) for signals in Signals for pair in pairs]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            return pairs, pool.starmap(judge_pair, jobs, chunksize=4)
    return pairs, [judge_pair(*job) for job in jobs]
