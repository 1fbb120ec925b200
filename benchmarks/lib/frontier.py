"""What one factor chosen without c can reach: the frontier a law that does not know c cannot pass.

On every case of :mod:`benchmarks.lib.loops`, the grid factor best at each of
:data:`CHOSEN_AT` (a factor chosen knowing every fixed factor's time at one slope c'),
judged at both slopes (:class:`KnownFactor`), and "one known factor"
(:func:`known_factor`): the grid factor whose larger ratio over the two slopes' best is
smallest. On loops whose R stays put no law beats the best fixed factor by more than its
start-up, so each row's slowest loops, and the loops where it is slower than no echo (at
all, and by more than :data:`benchmarks.lib.loops.SLOWER_TOLERANCE`), bound what any law
can promise. :mod:`benchmarks.controller_sweep` runs it beside the laws, into the same
results file.

>>> known_factor({0.05: {1.0: 10.0, 2.0: 5.5, 4.0: 5.0}, 0.19: {1.0: 10.0, 2.0: 7.0, 4.0: 8.0}})
2.0
"""

from __future__ import annotations

import dataclasses

from benchmarks.lib import results_io
from benchmarks.lib.tables import markdown_table
from benchmarks.lib.loops import SLOPES, SLOWER_TOLERANCE, Case, Change, Distribution, distribution


# The slopes c' at which the frontier's factors are chosen (the two judged, 0.1 about their
# geometric mean, 0.097, and two between it and 0.19).
CHOSEN_AT = (0.05, 0.1, 0.13, 0.16, 0.19)


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


@dataclasses.dataclass(frozen=True)
class FrontierSummary(Distribution):
    """The :class:`Distribution` of the factor chosen at ``chosen_at`` over one set of cases ("all", or "R constant")."""

    cases_of: str
    chosen_at: float


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
                summaries.append(FrontierSummary(
                    cases_of=cases_of, chosen_at=chosen_at,
                    **distribution(slope, [k.over_best for k in mine], [k.over_none for k in mine])))
    return summaries


def frontier_table(summaries: list[FrontierSummary]) -> str:
    return markdown_table(
        ["loops", "factor best at c'", "judged at c", "cases", "p50", "p95", "worst",
         f"slower than no echo (by over {SLOWER_TOLERANCE:.0%})"],
        [[s.cases_of, f"{s.chosen_at:g}", f"{s.slope:g}", s.cases, f"{s.p50:.3f}", f"{s.p95:.3f}", f"{s.worst:.3f}",
          f"{s.slower_than_none} ({s.slower_beyond_tolerance})"] for s in summaries])
