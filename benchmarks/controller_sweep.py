"""The echo controller on a randomized family of training loops: its distribution against the best fixed factor.

The loops are :mod:`benchmarks.lib.loops`'s. Every case runs the controller as shipped
(:data:`Contender.LAW`: the law, given the echo stage's fresh count, at its default
``copy_cost``), the same law told the c it is judged at, the law given the loop's wait
for input too (as a loop that times ``next(iterator)`` can), a reference told the true R at
every step (:class:`~benchmarks.lib.references.ToldRatio`: no law can know it sooner), the
same reference told R only after an opening of ``OPENING_STEPS`` steps at ``max_factor``
(what an opening alone costs, however well a law measured after), the law's own opening,
and its opening and search, each followed by the loop's best fixed factor at the slope
judged (:class:`~benchmarks.lib.references.LawThenFixed`: what the law's measuring costs,
whatever it did after), and "one known factor"
(:func:`benchmarks.lib.frontier.known_factor`), each until the same training progress,
against every fixed factor of the grid. Figures, per case and slope: the controller's
time over the best fixed factor's (``over_best``), over no echo's (``over_none``), over
``max_factor``'s where R stays at or above it, and after a change of R the share of
steps from 150 steps after it whose factor is within [0.85, 1.5] of the new R (clipped
to ``[1, max_factor]``). The targets are named values (:data:`TARGETS`), tabled with a
"met" column and plotted from the same values. The same command runs the frontier of one
factor chosen without c (:mod:`benchmarks.lib.frontier`), from the first step and after the
law's search, and two trainers in step (:mod:`benchmarks.lib.in_step`) into the same file.

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
import functools
import math
import multiprocessing
import statistics
from pathlib import Path
from typing import Callable, Optional

import echoing
from echoing.simulation import Run
from benchmarks.lib import results_io
from benchmarks.lib.frontier import (CHOSEN_AT, FrontierSummary, KnownFactor, frontier_table, known_factor,
                                     law_over_frontier, summarize_frontier)
from benchmarks.lib.in_step import Pair, PairResult, PairSummary, Signals, pair_table, summarize_pairs, sweep_pairs
from benchmarks.lib.references import (ABOVE, AROUND, OPENING, OPENING_STEPS, SEARCH, LawThenFixed, LawThenReads,
                                       ToldRatio)
from benchmarks.lib.loops import (FIRST_REPORTED_SEED, FIRST_TUNING_SEED, GRID_RATIO, NEAR_BAR, PROGRESS,
                                  SETTLE_AFTER_CHANGE, FIGURES, SLOPES, SLOWER_TOLERANCE, Case, Change, Distribution,
                                  bootstrap_interval, course_of_ratio, distribution, draw_case, grid, how_it_reads,
                                  near_share, run_controlled, run_fixed, split_rows, the_law)
from benchmarks.lib.tables import markdown_table


class Contender(str, enum.Enum):
    """What runs each case besides the grid of fixed factors: the law, and the references it is held against."""

    LAW = "law"  # echoing.EchoController as shipped (its default copy_cost), given the fresh count
    LAW_AT_MATCHED_C = "law, copy_cost = c"  # the same, told the c it is judged at
    LAW_GIVEN_WAIT = "law, given the wait"  # the shipped law given the loop's wait for input too (input_wait)
    TOLD_R = "told R"  # a reference: the factor set to HEADROOM x the true R at every step
    TOLD_R_AFTER_OPENING = "told R after an opening"  # the same after OPENING_STEPS steps at max_factor
    OPENING_THEN_BEST = "law's opening, then the best factor"  # the law until its opening ends, then the best fixed factor
    SEARCH_THEN_BEST = "law's search, then the best factor"  # the law until its search ends, then the best fixed factor
    # The law until its search ends, then readings at the best fixed factor and 1.25 times it (or 1.25 to either
    # side), the best read held: what confirming the peak by measuring costs (benchmarks.lib.references.LawThenReads)
    SEARCH_THEN_READS_ABOVE = "law's search, then reads of the best factor and above"
    SEARCH_THEN_READS_AROUND = "law's search, then reads of the best factor and either side"
    ONE_KNOWN_FACTOR = "one known factor"  # a reference: see known_factor()


def run_case(case: Case, contender: Optional[Contender] = None, factor: Optional[float] = None,
             progress: float = PROGRESS, copy_cost: Optional[float] = None, then_factor: float = 1.0) -> Run:
    """The case at a fixed ``factor``, or run by ``contender`` (the law or a reference), until ``progress``.

    ``copy_cost``: the law's setting, for ``Contender.LAW_AT_MATCHED_C``; the slope the readings are
    valued at, for the ``SEARCH_THEN_READS`` ones. ``then_factor``: the factor the law's opening or search
    is followed by (``Contender.OPENING_THEN_BEST``, ``SEARCH_THEN_BEST``), or read around (``SEARCH_THEN_READS``).
    """
    if factor is not None:
        return run_fixed(case, factor, progress)
    law = lambda: the_law(case)  # noqa: E731
    controller = {Contender.LAW: law, Contender.LAW_GIVEN_WAIT: law,
                  Contender.LAW_AT_MATCHED_C: lambda: the_law(case, copy_cost),
                  Contender.TOLD_R: lambda: ToldRatio(case),
                  Contender.TOLD_R_AFTER_OPENING: lambda: ToldRatio(case, OPENING_STEPS),
                  Contender.OPENING_THEN_BEST: lambda: LawThenFixed(law(), then_factor, OPENING),
                  Contender.SEARCH_THEN_BEST: lambda: LawThenFixed(law(), then_factor, SEARCH),
                  Contender.SEARCH_THEN_READS_ABOVE: lambda: LawThenReads(law(), then_factor, copy_cost, ABOVE),
                  Contender.SEARCH_THEN_READS_AROUND: lambda: LawThenReads(law(), then_factor, copy_cost, AROUND),
                  }[contender]()
    return run_controlled(case, controller, progress, pass_wait=contender == Contender.LAW_GIVEN_WAIT)


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
      near_share: after a change of R, the share of steps from :data:`SETTLE_AFTER_CHANGE` after it
        whose factor is within :data:`benchmarks.lib.loops.NEAR_BAND` of the new R; ``nan`` without a change.
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


def judge(case: Case, progress: float = PROGRESS) -> tuple[list[Result], list[KnownFactor]]:
    """Every contender and slope on ``case`` (against the grid's runs, each until ``progress``), and the frontier's factors."""
    fixed = {factor: run_case(case, factor=factor, progress=progress) for factor in grid(case.max_factor)}
    times_at = {slope: {f: r.time_to_progress(progress, slope) for f, r in fixed.items()}
                for slope in sorted({*SLOPES, *CHOSEN_AT})}
    best_factor = {slope: min(times_at[slope], key=times_at[slope].get) for slope in SLOPES}
    # The law's opening or search, then one factor: run once, for the frontier and the references alike.
    then = functools.cache(lambda contender, factor: run_case(case, contender, progress=progress, then_factor=factor))
    frontier = []
    for chosen_at in CHOSEN_AT:
        chosen = min(fixed, key=times_at[chosen_at].get)
        for searched_first, time_at in ((False, lambda s: times_at[s][chosen]), (True, lambda s: then(
                Contender.SEARCH_THEN_BEST, chosen).time_to_progress(progress, s))):
            frontier += [KnownFactor(seed=case.seed, chosen_at=chosen_at, slope=slope, factor=chosen,
                                     over_best=time_at(slope) / times_at[slope][best_factor[slope]],
                                     over_none=time_at(slope) / times_at[slope][1.0], after_search=searched_first)
                         for slope in SLOPES]
    results = []
    runs = {}  # (contender, slope) -> the run judged at that slope
    for contender in Contender:
        if contender == Contender.ONE_KNOWN_FACTOR:
            runs.update({(contender, slope): fixed[known_factor(times_at)] for slope in SLOPES})
        elif contender in (Contender.OPENING_THEN_BEST, Contender.SEARCH_THEN_BEST):
            runs.update({(contender, slope): then(contender, best_factor[slope]) for slope in SLOPES})
        elif contender in (Contender.LAW_AT_MATCHED_C, Contender.SEARCH_THEN_READS_ABOVE,
                           Contender.SEARCH_THEN_READS_AROUND):  # each told the slope it is judged at
            runs.update({(contender, slope): run_case(case, contender, progress=progress, copy_cost=slope,
                                                      then_factor=best_factor[slope]) for slope in SLOPES})
        else:
            run = run_case(case, contender, progress=progress)
            runs.update({(contender, slope): run for slope in SLOPES})
    for contender in Contender:
        for slope in SLOPES:
            run = runs[contender, slope]
            times, best = times_at[slope], best_factor[slope]
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


@dataclasses.dataclass(frozen=True)
class Summary(Distribution):
    """The :class:`~benchmarks.lib.loops.Distribution` of one contender at one slope, and its worst case's seed, its
    cases at or above ``max_factor`` and those where R changed."""

    contender: Contender
    worst_seed: int
    max_cases: int
    worst_over_max: float
    change_cases: int
    change_met: int


def summarize(results: list[Result], contender: Contender, slope: float) -> Summary:
    mine = [r for r in results if r.contender == contender and r.slope == slope]
    over = [r.over_best for r in mine]
    worst = max(mine, key=lambda r: r.over_best)
    at_max = [r for r in mine if r.ratio_at_or_above_max]
    changed = [r for r in mine if not math.isnan(r.near_share)]
    return Summary(contender=contender, **distribution(slope, over, [r.over_none for r in mine]), worst_seed=worst.seed,
                   max_cases=len(at_max),
                   worst_over_max=max((r.over_max for r in at_max), default=math.nan),
                   change_cases=len(changed), change_met=sum(r.near_share >= NEAR_BAR for r in changed))


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


def target_table(summaries: list[Summary], results: Optional[list[Result]] = None) -> str:
    """Each target, the law's figure and whether it is met, beside the told-R and measuring references' figures.

    Given the ``results`` the summaries came from, the law's p50 and p95 carry their 95%
    bootstrap interval over the cases: how far they could move on another draw of loops.
    """
    at = {(s.contender, s.slope): s for s in summaries}
    shown = [c for c in (Contender.TOLD_R, Contender.TOLD_R_AFTER_OPENING, Contender.OPENING_THEN_BEST,
                         Contender.SEARCH_THEN_BEST, Contender.SEARCH_THEN_READS_ABOVE,
                         Contender.SEARCH_THEN_READS_AROUND) if (c, SLOPES[0]) in at]
    rows = []
    for t in TARGETS:
        if (t.contender, t.slope) not in at:
            continue
        law = at[t.contender, t.slope]
        figures = [t.value(law)] + [t.value(at[c, t.slope]) for c in shown]
        text = [f"{v:.0f}" if t.figure == "slower_beyond_tolerance" else f"{v:.3f}" for v in figures]
        bound = f"{t.bound:.0f}" if t.figure == "slower_beyond_tolerance" else f"{t.bound:.2f}"
        interval = ""
        if results is not None and t.figure in FIGURES:
            mine = [r.over_best for r in results if r.contender == t.contender and r.slope == t.slope]
            interval = "%.3f-%.3f" % bootstrap_interval(mine, FIGURES[t.figure])
        rows.append([t.what, f"{t.slope:g}", f"<= {bound}", text[0], "yes" if t.met(law) else "no",
                     *([interval] if results is not None else []), *text[1:]])
    intervals = ["law: 95% interval over the loops drawn"] if results is not None else []
    return markdown_table(["figure", "c", "target", "law", "met", *intervals, *(c.value for c in shown)], rows)


def document_target_table(document: dict) -> str:
    """The targets' table from a results document (``python -m benchmarks.readme_tables``)."""
    return _with_seeds(document, lambda results: target_table(list(results.summaries), list(results.results)))


def document_frontier_table(document: dict, after_search: bool = False) -> str:
    """The frontier's table (from the first step, or after the law's search, with the law held to it) from a document."""
    return _with_seeds(document, lambda results: frontier_table(list(results.frontier_summaries), after_search) + (
        "\n\n" + law_over_frontier({(r.seed, r.slope): r.over_best for r in results.results if r.contender ==
                                     Contender.LAW}, list(results.frontier)) if after_search else ""))


def _with_seeds(document: dict, table_of: Callable[["SweepResults"], str]) -> str:
    """A table of a results document's cases, and the seeds they were drawn from."""
    settings, results = results_io.typed(document, SweepSettings, SweepResults)
    seeds = f"{settings.first_seed}-{settings.first_seed + settings.cases - 1}"
    return table_of(results) + f"\n\n_Cases of seeds {seeds}._"


def table(summaries: list[Summary]) -> str:
    return markdown_table(
        ["run by", "c", "cases", "p50", "p95", "worst (seed)", f"slower than no echo (by over {SLOWER_TOLERANCE:.0%})",
         "R >= max: worst over e = max", f"after a change of R: >= {NEAR_BAR:.0%} near R"],
        [[s.contender.value, f"{s.slope:g}", s.cases, f"{s.p50:.3f}", f"{s.p95:.3f}", f"{s.worst:.3f} ({s.worst_seed})",
          f"{s.slower_than_none} ({s.slower_beyond_tolerance})", f"{s.worst_over_max:.3f} ({s.max_cases} cases)",
          f"{s.change_met} of {s.change_cases}"] for s in summaries])


def document_table(document: dict) -> str:
    """The summaries' table from a results document (``python -m benchmarks.readme_tables``)."""
    return _with_seeds(document, lambda results: table(list(results.summaries)))


def _split_table(document: dict, column: str, group_of: Callable, groups: tuple, contenders: tuple) -> str:
    """Each of ``contenders``' distributions on the cases of each group (``group_of(case)``), in the order of ``groups``."""
    settings, results = results_io.typed(document, SweepSettings, SweepResults)
    group = {case.seed: group_of(case) for case in results.cases}
    return markdown_table(["run by", "c", column, "cases", "p50", "p95", "worst"],
                          split_rows(results.results, contenders, settings.slopes, lambda r: group[r.seed], groups))


def document_reads_table(document: dict) -> str:
    """Each contender's distribution on the loops whose upstream reads batch by batch and on those that read in lumps."""
    return _split_table(document, "reads", how_it_reads, ("batch by batch", "in lumps"), tuple(Contender))


def document_changes_table(document: dict) -> str:
    """The law's and two references' distributions where R stays put (its loss is all measuring), rises or falls."""
    return _split_table(document, "R", course_of_ratio, ("stays put", "rises", "falls"),
                        (Contender.LAW, Contender.TOLD_R_AFTER_OPENING, Contender.ONE_KNOWN_FACTOR))


def plot(results: list[Result], path: Path) -> Path:
    """The distribution of ``over_best`` per contender and slope (sorted, one line each), with the targets.

    The two references that follow the law's opening or search by the best factor are
    tabled, not drawn, so that the plot stays readable.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 3.6))
    styles = {Contender.LAW: "-", Contender.LAW_AT_MATCHED_C: (0, (5, 1, 1, 1)), Contender.TOLD_R: ":",
              Contender.LAW_GIVEN_WAIT: (0, (1, 1)), Contender.TOLD_R_AFTER_OPENING: "--", Contender.ONE_KNOWN_FACTOR: "-."}
    for contender in styles:
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
    print(table(summaries), target_table(summaries), sep="\n")
    frontier_summaries = summarize_frontier(frontier, cases)
    print(frontier_table(frontier_summaries), frontier_table(frontier_summaries, after_search=True), sep="\n")
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
