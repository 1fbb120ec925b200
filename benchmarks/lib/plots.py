"""Figures of the time-to-target results, drawn from the results file (PNG).

* ``*_fresh_vs_factor.png``: fresh examples to target against e for each placement, with
  the line "repeated data as useful as fresh" (baseline / e): the paper's Figs. 3 and 5.
* ``*_time_vs_factor.png``: modelled-accelerator time to target (in step times) against e
  for each R (Fig. 4), AutoEcho drawn as a star at the factor it held.
* ``*_fresh_vs_shuffle.png``: fresh examples to target against the echo shuffle buffer
  size in examples (a batch echoing buffer of 8 batches holds 8 x batch size; Fig. 7).

Points are medians over seeds; bars span the min and max.

Run ``python -m benchmarks.lib.plots RESULTS.json``; the figures go beside the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # Files only; no display on CI or servers.
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.lib import results_io  # noqa: E402
from benchmarks.lib import reporting
from benchmarks.lib.reporting import Measure
from benchmarks.lib.tasks import TASKS  # noqa: E402


def plot_all(results_path: Path) -> list[Path]:
    """Draws every figure the results support, next to the results file; returns their paths."""
    results_path = Path(results_path)
    results = reporting.results_of(results_io.read_results(results_path))
    sample, replayed = reporting.sample_rows(results), reporting.replay_rows(results)
    written = []
    for task in sorted({r.config.task for r in sample + replayed}):
        stem = results_path.with_name(f"{results_path.stem}_{task}")
        for draw, rows, suffix in ((_fresh_vs_factor, sample, "fresh_vs_factor"), (_time_vs_factor, replayed, "time_vs_factor"),
                                   (_fresh_vs_shuffle, sample, "fresh_vs_shuffle")):
            figure = draw(task, [r for r in rows if r.config.task == task and r.of(_VALUE[suffix]) is not None])
            if figure is not None:
                path = Path(f"{stem}_{suffix}.png")
                figure.savefig(path, dpi=100, bbox_inches="tight")
                plt.close(figure)
                written.append(path)
    return written


_VALUE = {"fresh_vs_factor": Measure.FRESH_EXAMPLES, "time_vs_factor": Measure.SECONDS_IN_STEPS,
          "fresh_vs_shuffle": Measure.FRESH_EXAMPLES}


def _errorbar(axes, points, fmt, **kwargs):
    """Medians with min-max bars; ``points`` are ``(x, spread)``."""
    points = sorted(points, key=lambda p: p[0])
    xs = [x for x, _ in points]
    medians = [v.median for _, v in points]
    low = [v.median - v.min for _, v in points]
    high = [v.max - v.median for _, v in points]
    return axes.errorbar(xs, medians, yerr=[low, high], fmt=fmt, capsize=3, **kwargs)


def _fresh_vs_factor(task, rows):
    rows = [r for r in rows if not r.config.auto_echo]
    base = next((r for r in rows if r.config.is_baseline), None)
    if base is None or len(rows) < 2:
        return None
    figure, axes = plt.subplots(figsize=(5, 3.5))
    factors = sorted({1.0} | {r.config.factor for r in rows})
    base_fresh = base.of(Measure.FRESH_EXAMPLES)
    axes.plot(factors, [base_fresh.median / e for e in factors], "k:", label="repeated as useful as fresh")
    for placement in sorted({r.config.placement for r in rows} - {"none"}):
        for shuffle in sorted({r.config.echo_shuffle for r in rows if r.config.placement == placement}):
            points = [(r.config.factor, r.of(Measure.FRESH_EXAMPLES)) for r in rows
                      if r.config.placement == placement and r.config.echo_shuffle == shuffle]
            _errorbar(axes, [(1.0, base_fresh)] + points, "o-", label=f"{placement}, echo shuffle {shuffle}")
    axes.set(xlabel="echo factor e", ylabel="fresh examples to target", title=f"{task}: fresh examples to target")
    axes.legend(fontsize=7)
    return figure


def _time_vs_factor(task, rows):
    if not rows:
        return None
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for ratio in sorted({r.config.ratio for r in rows}):
        fixed = [(r.config.factor, r.of(Measure.SECONDS_IN_STEPS)) for r in rows
                 if r.config.ratio == ratio and not r.config.auto_echo]
        line = _errorbar(axes, fixed, "o-", label=f"R={ratio:g}")
        for r in rows:
            if r.config.ratio == ratio and r.config.auto_echo and r.of(Measure.HELD_FACTOR):
                axes.plot([r.of(Measure.HELD_FACTOR).median], [r.of(Measure.SECONDS_IN_STEPS).median], "*",
                          markersize=12, color=line.lines[0].get_color())
    axes.set(xlabel="echo factor e", ylabel="time to target (step times)",
             title=f"{task}: modelled accelerator (star: AutoEcho)")
    axes.legend(fontsize=8)
    return figure


def _fresh_vs_shuffle(task, rows):
    rows = [r for r in rows if not r.config.is_baseline and not r.config.auto_echo]
    if len({r.config.echo_shuffle for r in rows}) < 2:
        return None
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for placement in sorted({r.config.placement for r in rows}):
        # Buffers are counted in the echo stage's elements (batches for batch echoing); drawn in examples they held.
        examples = TASKS[task].examples_per_echo_element(placement)
        for factor in sorted({r.config.factor for r in rows if r.config.placement == placement}):
            points = [(max(r.config.echo_shuffle * examples, 1), r.of(Measure.FRESH_EXAMPLES)) for r in rows
                      if r.config.placement == placement and r.config.factor == factor]
            if len(points) > 1:
                _errorbar(axes, points, "o-", label=f"{placement} e={factor:g}")
    axes.set_xscale("log")
    axes.set(xlabel="echo shuffle buffer (examples it holds; 0 drawn at 1)", ylabel="fresh examples to target", title=f"{task}: echo shuffle buffer")
    axes.legend(fontsize=7)
    return figure

def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="?", default=results_io.RESULTS_DIR / "time_to_target.json",
                        help="a time_to_target results JSON; the figures go beside it (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.results.exists():
        parser.error(f"results: no such file: {args.results}")
    for written in plot_all(args.results):
        print(written)


if __name__ == "__main__":
    main()
