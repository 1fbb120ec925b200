"""Screens an echo controller on the replay without training: AutoEcho's time to target, predicted.

A change to :class:`echoing.EchoController` is judged on the modelled-accelerator replay
(:mod:`benchmarks.replay`): AutoEcho's timed replays, then training on the factors each
one chose to find the step at which it reached the target. For the Transformer the timed
replays take about 10 minutes (``--time-only``) and the training about 70. This module
predicts the training instead, so that a controller can be screened in the 10:

* a step at factor ``e`` makes ``1 / (1 + a (e - 1))`` of a fresh step's progress
  (:func:`benchmarks.progress.progress_per_step`), with ``a`` fitted by least
  squares to the task's sample runs at fixed factors (the median steps to target of each,
  at AutoEcho's placement and echo shuffle, against the median at ``e = 1``);
* the target is the same seed's steps to target at ``e = 1``;
* the predicted step is where a timeline's factors make that much progress, and the time
  is the timeline's seconds at that step, in step times; it is set against the same
  seed's time at the best fixed configuration, chosen as ``docs/results/time_to_target.md``
  chooses it (:func:`benchmarks.reporting.best_rows`).

On the Transformer's committed timelines (``benchmarks/results/time_to_target.json``,
training text in records of at most 64 kB) training took -10% to +1% more steps than
predicted, and the predicted median time is 1.02x the best fixed e's at R = 2, as
trained; at R = 4 the screen predicted 1.11x where training gave 0.99x. Time at e = 8
costs training more than the linear model says: with the long windows alone (commit
2167fe9), whose timelines spent 9-23% of their steps to the target there, training took
3-24% more steps than predicted (the more, the more time at 8; 1.06x predicted, 1.21x
trained at R = 4); before them 11-34% at 8 and 0-30% more (1.09x, 1.20x); before commit
2edb856, 40-46% and 14-23% more. So a screen is kind to a law in proportion to its time
at 8 (tests/test_screen_replay.py). When the text was read as
whole files (git show 452150c:benchmarks/screen_replay.py) the steps were within -13% to
+5%. A screen tells a law that loses 30% from one that loses 10% where the factors stay
below 8; ResNet's steps to target move more from seed to seed (500 to 775 at e = 4),
and there the predicted steps are within -18% to +33%.

Each row also gives the fresh examples the timeline read to its predicted target against
the best fixed configuration's, and the timeline's longest step with the fresh count by
then: a single long read on the way to the target (4-11 s for the 757 kB file read whole)
decides a comparison on its own.

A prediction is a screen, not a result: what lands is trained. To screen a change:

.. code-block:: bash

    cp benchmarks/results/time_to_target.json runs/screen.json   # then delete the task's
    # AutoEcho replay records and auto_echo_timelines from runs/screen.json, and alone:
    python -m benchmarks.time_to_target --tasks transformer --ratios 2 4 --replay-factors 1 2 4 8 \\
        --step-seconds 0.015 --seeds 0 1 2 --modes replay --output runs/screen.json --time-only
    python -m benchmarks.screen_replay runs/screen.json --task transformer

Example, on the committed results:

>>> from benchmarks.results_io import read_results
>>> document = read_results(RESULTS / "time_to_target.json")
>>> [(p.ratio, p.seed) for p in predict(document, "transformer")][:2]
[(2.0, 0), (2.0, 1)]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
from pathlib import Path
from typing import Optional

from echoing.points import EchoPoint
from benchmarks import reporting, results_io
from benchmarks.progress import steps_to_progress

RESULTS = Path(__file__).resolve().parent / "results"


@dataclasses.dataclass(frozen=True)
class Prediction:
    """AutoEcho's predicted time to target on one timed replay.

    Attributes:
      ratio, seed: the replay's nominal R and seed.
      predicted_steps: where its factors make the progress of the seed's steps at ``e = 1``
        (``None`` if they never do within the replay).
      trained_steps: the steps training on the timeline took, when it has been trained on.
      predicted_step_times: the replay's time at ``predicted_steps``, in step times.
      best_factor, best_echo_shuffle: the best fixed configuration at this R.
      best_step_times: its time to target for this seed, in step times.
      fresh_at_target: the fresh examples the timeline had read by ``predicted_steps``
        (``None`` where it never gets there, or where its echo stage echoes batches).
      best_fresh: the fresh examples the best fixed configuration read to the target.
      longest_wait: ``(step, seconds, fresh examples read by then)`` of the timeline's
        longest step up to ``predicted_steps`` (its whole length where it never gets
        there): on the text pipeline, the read of a long record.
    """

    ratio: float
    seed: int
    predicted_steps: Optional[int]
    trained_steps: Optional[int]
    predicted_step_times: Optional[float]
    best_factor: float
    best_echo_shuffle: int
    best_step_times: float
    fresh_at_target: Optional[float] = None
    best_fresh: Optional[float] = None
    longest_wait: Optional[tuple] = None

    @property
    def over_best(self) -> Optional[float]:
        """Predicted time over the best fixed configuration's (``None`` when it never gets there)."""
        return None if self.predicted_step_times is None else self.predicted_step_times / self.best_step_times


def progress_slope(runs: list, task: str, placement: str, echo_shuffle: int) -> float:
    """``a`` of the progress model, fitted to the task's sample runs at fixed factors (see the module docstring)."""
    steps = collections.defaultdict(list)
    for record in runs:
        config = record["config"]
        if (config["task"] == task and config["mode"] == "sample" and not config.get("auto_echo") and record["reached"]
                and (config["factor"] == 1.0 or (config["placement"], config["echo_shuffle"]) == (placement, echo_shuffle))):
            steps[config["factor"]].append(record["steps"])
    if 1.0 not in steps or len(steps) < 2:
        raise ValueError(f"task: {task!r} has no sample runs at e=1 and at another factor with placement={placement!r} "
                         f"and echo_shuffle={echo_shuffle!r} to fit the progress model on")
    fresh = statistics.median(steps[1.0])
    pairs = [(factor - 1, statistics.median(counts) / fresh - 1) for factor, counts in steps.items() if factor != 1.0]
    return sum(x * y for x, y in pairs) / sum(x * x for x, _ in pairs)


def predict(document: dict, task: str) -> list[Prediction]:
    """A :class:`Prediction` for every AutoEcho timeline of ``task`` in a time_to_target results document."""
    results = document["results"]
    timelines = [t for t in results.get("auto_echo_timelines", []) if t["of"]["task"] == task]
    if not timelines:
        tasks = sorted({t["of"]["task"] for t in results.get("auto_echo_timelines", [])})
        raise ValueError(f"task: no AutoEcho timelines of {task!r} in the results (they have {tasks})")
    runs = results["runs"]
    best = {(row["task"], row["ratio"]): row for row in reporting.best_rows(document)}
    predictions = []
    for timeline in sorted(timelines, key=lambda t: (t["of"]["ratio"], t["of"]["seed"])):
        of, value = timeline["of"], timeline["value"]
        slope = progress_slope(runs, task, of["placement"], of["echo_shuffle"])
        fresh = _one(runs, task, "sample", seed=of["seed"], factor=1.0)
        steps = steps_to_progress(value["factors"], fresh["steps"], slope)
        chosen = best[task, of["ratio"]]
        twin = _one(runs, task, "replay", seed=of["seed"], ratio=of["ratio"], factor=chosen["best_factor"],
                    echo_shuffle=chosen["best_echo_shuffle"], placement=chosen["best_placement"])
        trained = [r for r in runs if r["config"]["task"] == task and r["config"]["mode"] == "replay"
                   and r["config"].get("auto_echo") and r["config"]["ratio"] == of["ratio"]
                   and r["config"]["seed"] == of["seed"] and r["reached"]]
        seconds, counts = value["seconds"], value.get("fresh")
        # The timeline's fresh count is in the echo stage's elements: examples, unless it echoes batches.
        examples = counts if counts and not EchoPoint.parse(of["placement"]).echoes_batches else None
        end = len(seconds) if steps is None else steps
        durations = [seconds[0]] + [later - earlier for earlier, later in zip(seconds, seconds[1:end])]
        longest = max(range(end), key=durations.__getitem__)
        predictions.append(Prediction(
            ratio=of["ratio"], seed=of["seed"], predicted_steps=steps,
            trained_steps=trained[0]["steps"] if trained else None,
            predicted_step_times=(None if steps is None else seconds[steps - 1] / twin["pipeline"]["step_seconds"]),
            best_factor=chosen["best_factor"], best_echo_shuffle=chosen["best_echo_shuffle"],
            best_step_times=twin["seconds_in_steps"],
            fresh_at_target=None if examples is None or steps is None else float(examples[steps - 1]),
            best_fresh=twin["fresh_examples"],
            longest_wait=(longest, durations[longest], None if examples is None else float(examples[longest]))))
    return predictions


def table(predictions: list[Prediction]) -> str:
    """A Markdown table: a row per timeline, and the median over the seeds at every R."""
    lines = ["| R | seed | predicted steps | trained steps | best fixed e (echo shuffle) | predicted time / best's "
             "| fresh examples to target, AutoEcho / best's | longest step: at step, seconds, fresh examples by then |",
             "|---:|---:|---:|---:|---|---:|---|---|"]
    for p in predictions:
        over = "never" if p.over_best is None else f"{p.over_best:.2f}"
        trained = "" if p.trained_steps is None else f"{p.trained_steps:,}"
        predicted = "never" if p.predicted_steps is None else f"{p.predicted_steps:,}"
        fresh = "" if p.fresh_at_target is None else f"{p.fresh_at_target:,.0f} / {p.best_fresh:,.0f}"
        step, seconds, by_then = p.longest_wait
        wait = f"{step:,}, {seconds:.1f} s" + ("" if by_then is None else f", {by_then:,.0f}")
        lines.append(f"| {p.ratio:g} | {p.seed} | {predicted} | {trained} | {p.best_factor:g} ({p.best_echo_shuffle}) | "
                     f"{over} | {fresh} | {wait} |")
    for ratio in sorted({p.ratio for p in predictions}):
        overs = [p.over_best for p in predictions if p.ratio == ratio and p.over_best is not None]
        if overs:
            lines.append(f"| {ratio:g} | median | | | | {statistics.median(overs):.2f} | | |")
    return "\n".join(lines)


def _one(runs: list, task: str, mode: str, **fields) -> dict:
    found = [r for r in runs if r["config"]["task"] == task and r["config"]["mode"] == mode
             and not r["config"].get("auto_echo") and all(r["config"].get(k) == v for k, v in fields.items())]
    if not found:
        raise ValueError(f"task: no {mode} run of {task!r} with {fields} in the results")
    return found[0]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a time_to_target results file with AutoEcho timelines")
    parser.add_argument("--task", default="transformer", help="the task whose timelines to screen")
    args = parser.parse_args(argv)
    print(table(predict(results_io.read_results(args.results), args.task)))


if __name__ == "__main__":
    main()
