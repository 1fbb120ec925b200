"""What AutoEcho's opening search costs training: its timelines trained again without it.

The supply law opens with a probe at ``max_factor`` and halves the factor while the input
keeps up (:mod:`echoing.controller`): on the ResNet at R = 2 that is 16 steps at e = 8, 16
at 4, 16 at 2 and 16 at 1 before it holds about 2.1. The controller's docstring bounds
what that costs in step times; this measures what it costs in steps to target. Each
AutoEcho timeline of a time-to-target results file is trained again, same seed, with
every step before its first hold set to the factor it then held, and the steps to target
are set beside those of the timeline as it was and of the same seed's fixed factor. No
clock is involved (steps are deterministic for one machine and code version, so the
comparison is made on one machine, in one run of the file's own commands and this one).

Example, the committed figures (``benchmarks/results/opening_cost.json``)::

    python -m benchmarks.opening_cost benchmarks/results/time_to_target_seeds.json \\
        --output benchmarks/results/opening_cost.json

>>> without_opening([8.0, 8.0, 4.0, 2.0, 2.1, 1.5, 2.1], held_from_step=4, held_factor=2.1)
[2.1, 2.1, 2.1, 2.1, 2.1, 1.5, 2.1]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Optional, Sequence

from benchmarks import results_io


def without_opening(factors: Sequence[float], *, held_from_step: int, held_factor: float) -> list[float]:
    """``factors`` with every step before ``held_from_step`` set to ``held_factor``."""
    if isinstance(held_from_step, bool) or not isinstance(held_from_step, int) or not 0 <= held_from_step <= len(factors):
        raise ValueError(f"held_from_step: expected a step in [0, {len(factors)}], got {held_from_step!r}")
    return [float(held_factor)] * held_from_step + [float(f) for f in factors[held_from_step:]]


def _trained_steps(runs: list, config: dict) -> Optional[int]:
    record = next((r for r in runs if r["config"] == config), None)
    return record["steps"] if record is not None else None


def _fixed_steps(runs: list, of: dict, factor: float) -> Optional[int]:
    """The same seed's sample run at ``factor`` with AutoEcho's placement and echo shuffle."""
    record = next((r for r in runs if r["config"]["mode"] == "sample" and r["config"]["task"] == of["task"]
                   and r["config"]["seed"] == of["seed"] and r["config"]["factor"] == factor
                   and r["config"]["placement"] == of["placement"] and r["config"]["echo_shuffle"] == of["echo_shuffle"]),
                  None)
    return record["steps"] if record is not None else None


def measure(document: dict, fixed_factor: float, output: Path, log=print) -> results_io.ResultsFile:
    """Trains every AutoEcho timeline of ``document`` without its opening; resumable, one record per timeline."""
    from benchmarks.tasks import TASKS
    from benchmarks.training import train_to_target

    results = results_io.ResultsFile(output, {"fixed_factor": fixed_factor}, key=lambda record: record["of"])
    runs = document["results"]["runs"]
    for timeline in document["results"]["auto_echo_timelines"]:
        of, value = timeline["of"], timeline["value"]
        if results.done(of):
            continue
        if value["held_from_step"] is None:
            log(f"{of['task']} R={of['ratio']:g} seed={of['seed']}: never held a factor; no opening to remove")
            continue
        task = TASKS[of["task"]]
        factors = without_opening(value["factors"], held_from_step=value["held_from_step"],
                                  held_factor=value["held_factor"])
        log(f"{of['task']} R={of['ratio']:g} seed={of['seed']}: e={value['held_factor']:g} for the "
            f"{value['held_from_step']} opening steps")
        trained = train_to_target(task, of["placement"], of["max_factor"], of["echo_shuffle"], seed=of["seed"],
                                  factor_schedule=factors, log=lambda line: None)
        results.add({"of": of, "held_factor": value["held_factor"], "held_from_step": value["held_from_step"],
                     "steps_without_opening": trained["steps"], "reached": trained["reached"],
                     "steps_with_opening": _trained_steps(runs, of),
                     "fixed_factor": fixed_factor, "fixed_steps": _fixed_steps(runs, of, fixed_factor)})
    return results


def table(document: dict) -> str:
    """Markdown: per seed, AutoEcho's steps to target with and without its opening, and the fixed factor's."""
    records = sorted(document["results"]["runs"], key=lambda r: (r["of"]["task"], r["of"]["ratio"], r["of"]["seed"]))
    lines = ["| task | R | seed | opening steps, then e held | AutoEcho's steps to target | without its opening | "
             "fixed e's | with / fixed e's | without / fixed e's | without / with |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    columns = {"with": [], "without": [], "cut": []}
    for r in records:
        of = r["of"]
        ratios = {"with": _ratio(r["steps_with_opening"], r["fixed_steps"]),
                  "without": _ratio(r["steps_without_opening"], r["fixed_steps"]),
                  "cut": _ratio(r["steps_without_opening"], r["steps_with_opening"])}
        for name, value in ratios.items():
            if value is not None:
                columns[name].append(value)
        lines.append(f"| {of['task']} | {of['ratio']:g} | {of['seed']} | {r['held_from_step']}, then "
                     f"{r['held_factor']:g} | {r['steps_with_opening'] or '-'} | {r['steps_without_opening'] or '-'} | "
                     f"{r['fixed_steps'] or '-'} (e={r['fixed_factor']:g}) | {_f(ratios['with'])} | "
                     f"{_f(ratios['without'])} | {_f(ratios['cut'])} |")
    if columns["cut"]:
        medians = " | ".join(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"
                             for v in columns.values())
        lines.append(f"| | | median of {len(columns['cut'])} | | | | | {medians} |")
    return "\n".join(lines)


def _ratio(a: Optional[int], b: Optional[int]) -> Optional[float]:
    return a / b if a and b else None


def _f(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a time_to_target results file with trained AutoEcho timelines")
    parser.add_argument("--fixed-factor", type=float, default=2.0, help="the fixed factor to set beside them")
    parser.add_argument("--output", type=Path, default=Path("runs/opening_cost.json"))
    args = parser.parse_args(argv)
    results = measure(results_io.read_results(args.results), args.fixed_factor, args.output)
    print(table({"results": {"runs": results.runs}}))
    print(f"results: {args.output}")


if __name__ == "__main__":
    main()
