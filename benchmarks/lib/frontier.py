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

The same choice after the shipped law's opening and search (``after_search``: the law
until its first hold, then the factor best at c', as
:class:`benchmarks.lib.references.LawThenFixed` runs it) bounds a law that searches as the
shipped one does and then holds the factor that maximizes the objective at one
``copy_cost``, knowing every factor's time: what its search costs, and what not knowing c
costs on top.

>>> known_factor({0.05: {1.0: 10.0, 2.0: 5.5, 4.0: 5.0}, 0.19: {1.0: 10.0, 2.0: 7.0, 4.0: 8.0}})
2.0
"""

from __future__ import annotations

import dataclasses

import echoing

from benchmarks.lib import results_io
from benchmarks.lib.tables import markdown_table
from benchmarks.lib.loops import FIGURES, SLOPES, SLOWER_TOLERANCE, Case, Change, Distribution, distribution


# The c' whose factor after the law's search the law is held against, loop by loop: its default copy_cost.
LAW_CHOSEN_AT = echoing.ControllerSettings().copy_cost
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
    """On one case, the grid factor best at slope ``chosen_at`` (c'), judged at ``slope`` (c).

    ``after_search``: run from the law's first hold, after its opening and search; else from the first step.
    """

    seed: int
    chosen_at: float
    slope: float
    factor: float
    over_best: float
    over_none: float
    after_search: bool


@dataclasses.dataclass(frozen=True)
class FrontierSummary(Distribution):
    """The :class:`Distribution` of the factor chosen at ``chosen_at`` over one set of cases ("all", or "R constant")."""

    cases_of: str
    chosen_at: float
    after_search: bool


def summarize_frontier(frontier: list[KnownFactor], cases: list[Case]) -> list[FrontierSummary]:
    """Each chosen slope at each judged slope, from the first step and after the law's search, over every case and
    over the cases whose R stays put."""
    constant = {case.seed for case in cases if case.change == Change.NONE}
    summaries = []
    for after_search in (False, True):
        for cases_of, keep in (("all", lambda k: True), ("R constant", lambda k: k.seed in constant)):
            for chosen_at in CHOSEN_AT:
                for slope in SLOPES:
                    mine = [k for k in frontier if k.chosen_at == chosen_at and k.slope == slope
                            and k.after_search == after_search and keep(k)]
                    if not mine:
                        continue
                    summaries.append(FrontierSummary(
                        cases_of=cases_of, chosen_at=chosen_at, after_search=after_search,
                        **distribution(slope, [k.over_best for k in mine], [k.over_none for k in mine])))
    return summaries


def frontier_table(summaries: list[FrontierSummary], after_search: bool = False) -> str:
    """The rows from the first step, or (``after_search``) those after the law's search."""
    summaries = [s for s in summaries if s.after_search == after_search]
    return markdown_table(
        ["loops", "factor best at c'", "judged at c", "cases", "p50", "p95", "worst",
         f"slower than no echo (by over {SLOWER_TOLERANCE:.0%})"],
        [[s.cases_of, f"{s.chosen_at:g}", f"{s.slope:g}", s.cases, f"{s.p50:.3f}", f"{s.p95:.3f}", f"{s.worst:.3f}",
          f"{s.slower_than_none} ({s.slower_beyond_tolerance})"] for s in summaries])


def law_over_frontier(law_over_best: dict, frontier: list[KnownFactor], chosen_at: float = LAW_CHOSEN_AT) -> str:
    """A sentence: the law's time over the factor best at ``chosen_at`` after its search, loop by loop, at each slope.

    ``law_over_best[seed, slope]`` is the law's time over the best fixed factor's. Both
    share the search, so the ratio is what the law lost after it.

    >>> searched = [KnownFactor(seed, 0.13, slope, 2.0, 1.02, 0.5, True) for seed in (0, 1) for slope in SLOPES]
    >>> law_over_frontier({(0, s): 1.02 for s in SLOPES} | {(1, s): 1.122 for s in SLOPES}, searched)
    "_The law's time over this reference's at c' = 0.13, loop by loop: p50 1.050 and p95 1.100 at c = 0.05; p50 1.050 and p95 1.100 at c = 0.19._"
    """
    parts = []
    for slope in SLOPES:
        ratios = [law_over_best[k.seed, slope] / k.over_best for k in frontier
                  if k.after_search and k.chosen_at == chosen_at and k.slope == slope]
        figures = " and ".join(f"{name} {figure(ratios):.3f}" for name, figure in FIGURES.items())
        parts.append(f"{figures} at c = {slope:g}")
    return f"_The law's time over this reference's at c' = {chosen_at:g}, loop by loop: {'; '.join(parts)}._"
