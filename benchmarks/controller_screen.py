"""Screen a change of the echo controller's law: the law alone on the sweep's loops, against fixed factors kept between runs.

A change of the law is designed on the loops of seeds 1000-1199 and checked on
1200-1399 (docs/decisions/), before the sweep (``benchmarks/controller_sweep.py``) reports
it on 0-199. The sweep runs every reference and every fixed factor of each loop; a
screen runs only the law of this checkout, and reads each loop's fixed factors from a
cache that is reused until the simulated loops change (a fingerprint of
``echoing/simulation.py`` and ``benchmarks/lib/loops.py``). The law's figures are the
sweep's to the digit (``tests/test_controller_screen.py``).

``python -m benchmarks.controller_screen`` (seeds 1000-1199: about 45 s the first time,
10 s after it, on 2 cores) prints p50 / p95 / worst (seed) / slower than no echo by over
2% at each slope, and writes each loop's times to ``runs/controller_screen.json``;
``--against FILE`` (a screen written before, by another law) adds the loops that moved
most, each way. ``--family deep-stock`` screens the loops of
:mod:`benchmarks.lib.deep_stock` instead (lumpy reads into a deep upstream stock, drawn
after the Transformer replay's pipeline), and adds what the reference told the true R takes
there (the sweep's own ``ToldRatio``). ``--reading-errors`` adds how far the law's readings' step rates lie from
the long-run step rate of a fixed run at the same factor, on the loops whose R stays put,
by how the loop reads and whether it pauses: the error of what every decision rests on.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import multiprocessing
import statistics
from pathlib import Path
from typing import Callable, Optional

from benchmarks.lib import results_io
from benchmarks.lib.references import ToldRatio
from benchmarks.lib.deep_stock import DEEP_STOCK_PROGRESS, draw_deep_stock_case
from benchmarks.lib.loops import (FIRST_TUNING_SEED, GRID_RATIO, PROGRESS, SLOPES, SLOWER_TOLERANCE, Case, Change,
                                  Distribution, distribution, draw_case, grid, how_it_reads, quantile, run_controlled,
                                  run_fixed, the_law)
from benchmarks.lib.tables import markdown_table

ROOT = Path(__file__).resolve().parent.parent
# The sources a fixed factor's run depends on: a change to either draws other loops or runs them otherwise.
FIXED_RUN_SOURCES = ("echoing/simulation.py", "benchmarks/lib/loops.py")
CACHE_DIR = results_io.RUNS_DIR / "controller_screen_cache"
# Loops whose time moved by less than this are the same loop under both laws (``--against``).
MOVED = 0.0005


@dataclasses.dataclass(frozen=True)
class Family:
    """A family of loops a screen runs: how a seed's loop is drawn, the progress it runs to, what its runs depend on."""

    name: str
    draw: Callable[[int], Case]
    progress: float
    sources: tuple[str, ...]
    cases: int  # loops a screen runs unless told
    cache_prefix: str  # the kept fixed times' file name starts with this
    told_ratio: bool  # the screen runs the told-R reference too (the sweep reports it on its own loops)
    reading_errors: bool  # --reading-errors reads its loops by kind (how_it_reads)
    label: str  # what the screen's first line says of its loops


SWEEP = Family("sweep", draw_case, PROGRESS, FIXED_RUN_SOURCES, cases=200, cache_prefix="fixed", told_ratio=False,
               reading_errors=True, label="")
DEEP_STOCK = Family("deep-stock", draw_deep_stock_case, DEEP_STOCK_PROGRESS,
                    FIXED_RUN_SOURCES + ("benchmarks/lib/deep_stock.py",), cases=100, cache_prefix="fixed-deep-stock",
                    told_ratio=True, reading_errors=False, label=" of the deep-stock family")
FAMILIES = {family.name: family for family in (SWEEP, DEEP_STOCK)}


@dataclasses.dataclass(frozen=True)
class ScreenSettings(results_io.Record):
    """What a screen ran: its loops' seeds, whether the law was given the wait, and the fixed runs' fingerprint.

    ``family`` is None in screens written before the deep-stock family: the sweep's.
    """

    OMITTED_WHEN_NONE = ("family",)

    first_seed: int
    cases: int
    given_wait: bool
    progress: float
    slopes: tuple[float, ...]
    fixed_fingerprint: str
    family: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class LawOnLoop(results_io.Record):
    """The law's seconds to the progress on loop ``seed``, one a slope (the settings' ``slopes``)."""

    seed: int
    seconds: tuple[float, ...]


# Readings before this step are left out of the reading errors: a cold start's, or a warm start's stock.
READING_ERRORS_FROM_STEP = 200


@dataclasses.dataclass(frozen=True)
class ReadingErrors(results_io.Record):
    """How far the law's readings' step rates lay from a fixed run's at their factor, on loops of one kind.

    The error of a reading is ``log(its step rate / the fixed run's mean step rate)``, the
    fixed run's read between the grid factors around the reading's (log-linearly).
    """

    reads: str  # how the loops read: batch by batch, or in lumps
    paused: bool  # whether the loops pause
    loops: int
    readings: int
    median_abs: float
    p75_abs: float
    rms: float
    mean: float


@dataclasses.dataclass(frozen=True)
class ScreenResults(results_io.Record):
    OMITTED_WHEN_NONE = ("reading_errors",)

    law: tuple[LawOnLoop, ...]
    reading_errors: Optional[tuple[ReadingErrors, ...]] = None


def fingerprint(family: Family = SWEEP) -> str:
    """What every cached fixed-factor time depends on: the sources that run it, the progress, the grid and the slopes."""
    digest = hashlib.sha256(repr((family.progress, GRID_RATIO, SLOPES)).encode())
    for name in family.sources:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def fixed_times(seed: int, family: Family = SWEEP) -> dict[float, dict[float, float]]:
    """Seconds to the progress of each fixed factor of the grid on loop ``seed``, at each slope: ``{slope: {factor: s}}``."""
    case = family.draw(seed)
    runs = {factor: run_fixed(case, factor, family.progress) for factor in grid(case.max_factor)}
    return {slope: {factor: run.time_to_progress(family.progress, slope) for factor, run in runs.items()}
            for slope in SLOPES}


def law_times(seed: int, family: Family = SWEEP, given_wait: bool = False) -> dict[float, float]:
    """Seconds to the progress of this checkout's law on loop ``seed``, at each slope (``given_wait``: told the loop's wait)."""
    case = family.draw(seed)
    run = run_controlled(case, the_law(case), family.progress, pass_wait=given_wait)
    return {slope: run.time_to_progress(family.progress, slope) for slope in SLOPES}


def told_ratio_times(seed: int, family: Family = SWEEP) -> dict[float, float]:
    """Seconds to the progress of the reference told the true R (:class:`benchmarks.lib.references.ToldRatio`), at each slope."""
    case = family.draw(seed)
    run = run_controlled(case, ToldRatio(case), family.progress)
    return {slope: run.time_to_progress(family.progress, slope) for slope in SLOPES}


def step_rate_at(fixed_seconds: dict[float, float], factor: float, slope: float = max(SLOPES),
                 progress: float = PROGRESS) -> float:
    """A fixed run's mean step rate at ``factor``, between the grid's runs (their steps over their seconds at ``slope``).

    >>> round(step_rate_at({1.0: 100.0, 2.0: 60.0}, 1.5, slope=0.0, progress=1000.0), 2)  # 10 and 16.7 steps/s
    13.48
    """
    factors = sorted(fixed_seconds)
    rate = {f: progress * (1 + slope * (f - 1)) / fixed_seconds[f] for f in factors}
    low = max([f for f in factors if f <= factor], default=factors[0])
    high = min([f for f in factors if f >= factor], default=factors[-1])
    if high == low:
        return rate[low]
    share = math.log(factor / low) / math.log(high / low)
    return math.exp(math.log(rate[low]) + share * (math.log(rate[high]) - math.log(rate[low])))


def reading_errors_of(seed: int, fixed_seconds: dict[float, float], progress: float = PROGRESS) -> list[float]:
    """Each of the law's readings' errors on loop ``seed`` (none where R changes): see :class:`ReadingErrors`."""
    case = draw_case(seed)
    if case.change != Change.NONE:
        return []
    law = the_law(case)
    run_controlled(case, law, progress)
    return [math.log(d.reading.step_rate / step_rate_at(fixed_seconds, d.reading.factor)) for d in law.decisions
            if d.reading is not None and d.step >= READING_ERRORS_FROM_STEP and d.reading.step_rate > 0]


def reading_errors(seeds, fixed: dict[int, dict], processes: int = 2) -> tuple[ReadingErrors, ...]:
    """:class:`ReadingErrors` of the loops ``seeds`` whose R stays put, by how they read and whether they pause."""
    slope = max(SLOPES)
    errors = dict(zip(seeds, _map(reading_errors_of, [(seed, fixed[seed][slope]) for seed in seeds], processes)))
    rows = []
    for reads in ("batch by batch", "in lumps"):
        for paused in (False, True):
            kind = [seed for seed in seeds if errors[seed] and how_it_reads(draw_case(seed)) == reads
                    and (draw_case(seed).pause_seconds > 0) == paused]
            values = [e for seed in kind for e in errors[seed]]
            if values:
                sizes = [abs(e) for e in values]
                rows.append(ReadingErrors(reads, paused, len(kind), len(values), statistics.median(sizes),
                                          quantile(sizes, 0.75), math.sqrt(statistics.fmean(e * e for e in values)),
                                          statistics.fmean(values)))
    return tuple(rows)


def reading_errors_table(rows: tuple[ReadingErrors, ...]) -> str:
    return markdown_table(["loops read", "paused", "loops", "readings", "median |error|", "p75 |error|", "rms", "mean"],
                          [[r.reads, "yes" if r.paused else "no", r.loops, r.readings, f"{r.median_abs:.3f}",
                            f"{r.p75_abs:.3f}", f"{r.rms:.3f}", f"{r.mean:+.3f}"] for r in rows])


class FixedCache:
    """Each loop's fixed-factor times, kept in ``directory`` under the current :func:`fingerprint`."""

    def __init__(self, directory: Path = CACHE_DIR, family: Family = SWEEP) -> None:
        self.path = Path(directory) / f"{family.cache_prefix}-{fingerprint(family)}.json"
        self.family = family
        self._times: dict[int, dict] = {}
        if self.path.exists():
            stored = json.loads(self.path.read_text())
            self._times = {int(seed): {float(s): {float(f): t for f, t in by_factor.items()}
                                       for s, by_factor in by_slope.items()} for seed, by_slope in stored.items()}

    def times(self, seeds, processes: int = 2) -> dict[int, dict]:
        """The times of ``seeds``, run for those not kept yet (and then kept)."""
        missing = [seed for seed in seeds if seed not in self._times]
        if missing:
            self._times.update(zip(missing, _map(fixed_times, [(seed, self.family) for seed in missing], processes)))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({str(seed): self._times[seed] for seed in sorted(self._times)}))
            tmp.replace(self.path)
        return {seed: self._times[seed] for seed in seeds}


def _map(function, arguments: list[tuple], processes: int) -> list:
    if processes > 1 and len(arguments) > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            return pool.starmap(function, arguments, chunksize=4)
    return [function(*each) for each in arguments]


def over_best(law: dict[int, dict], fixed: dict[int, dict], slope: float) -> dict[int, float]:
    """Each loop's law time over its best fixed factor's, at ``slope``."""
    return {seed: law[seed][slope] / min(fixed[seed][slope].values()) for seed in law}


def summary_line(law: dict[int, dict], fixed: dict[int, dict], slope: float) -> str:
    """p50 / p95 / worst (seed) / slower than no echo (by over the tolerance), as the sweep's summaries read them."""
    over = over_best(law, fixed, slope)
    figures = Distribution(**distribution(slope, list(over.values()),
                                          [law[seed][slope] / fixed[seed][slope][1.0] for seed in law]))
    worst = max(over, key=over.get)
    return (f"c = {slope:g}: {figures.p50:.3f} / {figures.p95:.3f} / {over[worst]:.3f} ({worst}) / "
            f"{figures.slower_than_none} ({figures.slower_beyond_tolerance})")


def moved_lines(law: dict[int, dict], before: dict[int, dict], fixed: dict[int, dict], slope: float,
                shown: int = 6) -> str:
    """The loops that moved most each way at ``slope`` against a screen ``before`` (their times over the best)."""
    now, then = over_best(law, fixed, slope), over_best({s: before[s] for s in law if s in before}, fixed, slope)
    moved = sorted((now[s] - then[s], s) for s in then if abs(now[s] - then[s]) > MOVED)
    faster = [s for change, s in moved if change < 0][:shown]
    slower = [s for change, s in reversed(moved) if change > 0][:shown]
    text = lambda seeds: " ".join(f"{s}: {then[s]:.3f} -> {now[s]:.3f}" for s in seeds) or "none"  # noqa: E731
    return f"c = {slope:g}: {len(moved)} of {len(then)} loops moved; faster: {text(faster)}; slower: {text(slower)}"


def screen(seeds, processes: int = 2, family: Family = SWEEP, given_wait: bool = False,
           cache_dir: Path = CACHE_DIR) -> tuple[dict, dict]:
    """This checkout's law on ``seeds`` and the loops' fixed factors: ``(law, fixed)``, each by seed, then slope."""
    fixed = FixedCache(cache_dir, family).times(list(seeds), processes)
    law = dict(zip(seeds, _map(law_times, [(seed, family, given_wait) for seed in seeds], processes)))
    return law, fixed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-seed", type=int, default=FIRST_TUNING_SEED,
                        help=f"the first loop's seed (default {FIRST_TUNING_SEED}, the design seeds; 1200: held out)")
    parser.add_argument("--cases", type=int, default=None,
                        help="loops to run (default 200 of the sweep's family, 100 of deep-stock)")
    parser.add_argument("--family", choices=sorted(FAMILIES), default="sweep",
                        help="the loops: the controller sweep's (default), or deep-stock (benchmarks/lib/deep_stock.py)")
    parser.add_argument("--given-wait", action="store_true", help="give the law the loop's wait for input too")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR, metavar="DIR",
                        help=f"where the fixed factors' times are kept (default {CACHE_DIR}/)")
    parser.add_argument("--reading-errors", action="store_true",
                        help="also how far the law's readings lie from fixed runs' step rates, by kind of loop")
    parser.add_argument("--against", type=Path, metavar="FILE",
                        help="a screen written before (its controller_screen.json): the loops that moved most")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    family = FAMILIES[args.family]
    if args.cases is None:
        args.cases = family.cases
    if args.reading_errors and not family.reading_errors:
        parser.error(f"--reading-errors: kept by kind of loop of the sweep's family, not --family {family.name}")
    for name, value, low in (("--cases", args.cases, 1), ("--processes", args.processes, 1)):
        if value < low:
            parser.error(f"{name}: expected a whole number >= {low}, got {value!r}")
    before = None
    if args.against is not None:
        if not args.against.is_file():
            parser.error(f"--against: expected a screen's results file, got {str(args.against)!r}, which is not a file")
        settings, stored = results_io.typed(results_io.read_results(args.against), ScreenSettings, ScreenResults)
        screened = settings.family or SWEEP.name
        if screened != family.name:
            parser.error(f"--against: {str(args.against)!r} screened the {screened} family, "
                         f"this screen the {family.name} family")
        if settings.slopes != SLOPES or settings.progress != family.progress:
            parser.error(f"--against: {str(args.against)!r} was judged at slopes {settings.slopes} and progress "
                         f"{settings.progress:g}, this checkout at {SLOPES} and {family.progress:g}")
        before = {loop.seed: dict(zip(settings.slopes, loop.seconds)) for loop in stored.law}
    seeds = list(range(args.first_seed, args.first_seed + args.cases))
    law, fixed = screen(seeds, args.processes, family, given_wait=args.given_wait, cache_dir=args.cache_dir)
    print(f"law on seeds {seeds[0]}-{seeds[-1]}{family.label}{', given the wait' if args.given_wait else ''}, over the "
          f"best fixed factor: p50 / p95 / worst (seed) / slower than no echo (by over {SLOWER_TOLERANCE:.0%})")
    for slope in SLOPES:
        print(summary_line(law, fixed, slope))
    if family.told_ratio:
        told = dict(zip(seeds, _map(told_ratio_times, [(seed, family) for seed in seeds], args.processes)))
        print("the reference told the true R (1.05 R from the first step), on the same loops:")
        for slope in SLOPES:
            print(summary_line(told, fixed, slope))
    if before is not None:
        for slope in SLOPES:
            print(moved_lines(law, before, fixed, slope))
    errors = None
    if args.reading_errors:
        errors = reading_errors(seeds, fixed, args.processes)
        print(f"the law's readings (from step {READING_ERRORS_FROM_STEP}) against fixed runs' step rates, "
              "log of the ratio, loops whose R stays put:")
        print(reading_errors_table(errors))
    settings = ScreenSettings(first_seed=args.first_seed, cases=args.cases, given_wait=args.given_wait,
                              progress=family.progress, slopes=SLOPES, fixed_fingerprint=fingerprint(family),
                              family=family.name)
    results = ScreenResults(tuple(LawOnLoop(seed, tuple(law[seed][s] for s in SLOPES)) for seed in seeds), errors)
    path = results_io.write_results("controller_screen", settings.record(), results.record(), args.output_dir)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
