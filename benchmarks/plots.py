"""Figures of the time-to-target results, drawn from the results file (PNG).

* ``*_fresh_vs_factor.png``: fresh examples to target against e for each placement, with
  the line "repeated data as useful as fresh" (baseline / e): the paper's Figs. 3 and 5.
* ``*_time_vs_factor.png``: wall-clock time to target against e for each R (Fig. 4),
  measured (solid) and predicted from fresh examples and rates (dashed).
* ``*_fresh_vs_shuffle.png``: fresh examples to target against the echo shuffle buffer
  size (Fig. 7).

Run ``python -m benchmarks.plots RESULTS.json``; the figures go beside the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # Files only; no display on CI or servers.
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks import results_io  # noqa: E402
from benchmarks.time_to_target import summary_rows  # noqa: E402


def plot_all(results_path: Path) -> list[Path]:
    """Draws every figure the results support, next to the results file; returns their paths."""
    results_path = Path(results_path)
    rows = summary_rows(results_io.read_results(results_path))
    written = []
    for task in sorted({r["task"] for r in rows}):
        task_rows = [r for r in rows if r["task"] == task]
        stem = results_path.with_name(f"{results_path.stem}_{task}")
        for draw, suffix in ((_fresh_vs_factor, "fresh_vs_factor"), (_time_vs_factor, "time_vs_factor"),
                             (_fresh_vs_shuffle, "fresh_vs_shuffle")):
            figure = draw(task, task_rows)
            if figure is not None:
                path = Path(f"{stem}_{suffix}.png")
                figure.savefig(path, dpi=100, bbox_inches="tight")
                plt.close(figure)
                written.append(path)
    return written


def _fresh_vs_factor(task, rows):
    sample = [r for r in rows if r["mode"] == "sample" and r["fresh_examples"] is not None]
    base = next((r for r in sample if r["placement"] == "none"), None)
    if base is None or len(sample) < 2:
        return None
    shuffle = min(r["echo_shuffle"] for r in sample if r["placement"] != "none") if len(sample) > 1 else 0
    figure, axes = plt.subplots(figsize=(5, 3.5))
    factors = sorted({1.0} | {r["factor"] for r in sample})
    axes.plot(factors, [base["fresh_examples"] / e for e in factors], "k:", label="repeated as useful as fresh")
    for placement in sorted({r["placement"] for r in sample} - {"none"}):
        points = sorted((r["factor"], r["fresh_examples"]) for r in sample if r["placement"] == placement and r["echo_shuffle"] == shuffle)
        points = [(1.0, base["fresh_examples"])] + points
        axes.plot(*zip(*points), "o-", label=placement)
    axes.set(xlabel="echo factor e", ylabel="fresh examples to target", title=f"{task}: fresh examples to target")
    axes.legend(fontsize=8)
    return figure


def _time_vs_factor(task, rows):
    wall = [r for r in rows if r["mode"] == "wallclock" and r["seconds"] is not None]
    if not wall:
        return None
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for ratio in sorted({r["ratio"] for r in wall}):
        points = sorted((r["factor"], r["seconds"], r["predicted_seconds"]) for r in wall if r["ratio"] == ratio)
        factors, seconds, predicted = zip(*points)
        line = axes.plot(factors, seconds, "o-", label=f"R={ratio:g}")[0]
        axes.plot(factors, predicted, "--", color=line.get_color())
    axes.set(xlabel="echo factor e", ylabel="training seconds to target", title=f"{task}: wall-clock time (dashed: predicted)")
    axes.legend(fontsize=8)
    return figure


def _fresh_vs_shuffle(task, rows):
    sample = [r for r in rows if r["mode"] == "sample" and r["placement"] != "none" and r["fresh_examples"] is not None]
    if len({r["echo_shuffle"] for r in sample}) < 2:
        return None
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for placement in sorted({r["placement"] for r in sample}):
        for factor in sorted({r["factor"] for r in sample if r["placement"] == placement}):
            points = sorted((r["echo_shuffle"], r["fresh_examples"]) for r in sample if r["placement"] == placement and r["factor"] == factor)
            if len(points) > 1:
                axes.plot([max(s, 1) for s, _ in points], [f for _, f in points], "o-", label=f"{placement} e={factor:g}")
    axes.set_xscale("log")
    axes.set(xlabel="echo shuffle buffer (elements; 0 drawn at 1)", ylabel="fresh examples to target", title=f"{task}: echo shuffle buffer")
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
