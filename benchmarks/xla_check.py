"""XLA on or off per task: the training step's rate with and without ``jit_compile`` on this host.

:meth:`benchmarks.lib.tasks.Task.build_model` compiles each task with its ``jit_compile``
setting (:data:`benchmarks.lib.tasks.TASKS`); this measures the choice. Each task's model
trains on one batch held in memory (so that only the step is timed), with XLA off and on
alternated over repeats (and which goes first) so that machine noise hits both alike; the figure is the median
steps per second after warm-up, and the ratio is taken within each repeat.

Run ``python -m benchmarks.xla_check`` (about 3 minutes, alone on the machine); results
go to ``runs/xla_check.json`` (``--output-dir benchmarks/results`` regenerates the
committed file).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

import tensorflow as tf

from benchmarks.lib import results_io
from benchmarks.lib.tasks import TASKS, Task
from benchmarks.lib.step_times import StepTimes, rate_between
from benchmarks.lib.tables import markdown_table


@dataclasses.dataclass(frozen=True)
class XlaCheckConfig(results_io.Record):
    """Settings of the check.

    Attributes:
      tasks: keys of :data:`benchmarks.lib.tasks.TASKS`.
      warmup_steps: steps not timed (tracing, XLA compilation).
      steps: steps timed after warm-up.
      repeats: off/on pairs per task.
    """

    tasks: tuple[str, ...] = ("resnet", "transformer")
    warmup_steps: int = 10
    steps: int = 40
    repeats: int = 3


def step_rate(task: Task, jit_compile: bool, config: XlaCheckConfig) -> float:
    """Steps per second of ``fit`` on one batch held in memory, after warm-up."""
    model = task.build_model(jit_compile=jit_compile)
    times = StepTimes()
    dataset = tf.data.Dataset.from_tensors(task.example_batch()).repeat()
    model.fit(dataset, steps_per_epoch=config.warmup_steps + config.steps, epochs=1, verbose=0, callbacks=[times])
    return rate_between(times.times, config.warmup_steps)


@dataclasses.dataclass(frozen=True)
class XlaPair(results_io.Record):
    """One repeat: steps per second with XLA off and on."""

    off: float
    on: float
    on_over_off: float


@dataclasses.dataclass(frozen=True)
class XlaTask(results_io.Record):
    """One task's pairs and their medians; ``chosen`` is whether the task's settings compile with XLA."""

    repeats: tuple[XlaPair, ...]
    off_median: float
    on_median: float
    on_over_off_median: float
    on_over_off_range: tuple[float, float]
    chosen: bool


def run(config: XlaCheckConfig, output) -> dict[str, XlaTask]:
    results = {}
    for task in config.tasks:
        chosen = TASKS[task]
        pairs = []
        for repeat in range(config.repeats):
            # Alternate which goes first, so that warming the machine favours neither.
            if repeat % 2 == 0:
                off = step_rate(chosen, False, config)
                on = step_rate(chosen, True, config)
            else:
                on = step_rate(chosen, True, config)
                off = step_rate(chosen, False, config)
            pairs.append(XlaPair(off, on, on / off))
            print(f"{task} repeat {repeat}: XLA off {off:.2f}, on {on:.2f} steps/s")
        ratios = [p.on_over_off for p in pairs]
        results[task] = XlaTask(tuple(pairs), statistics.median(p.off for p in pairs),
                                statistics.median(p.on for p in pairs), statistics.median(ratios),
                                (min(ratios), max(ratios)), TASKS[task].settings.jit_compile)
    results_io.write_results(output.stem, config.record(), {task: r.record() for task, r in results.items()},
                             output.parent)
    return results


def document_table(document: dict) -> str:
    """The table from a results document (``python -m benchmarks.readme_tables``)."""
    return table(*results_io.typed(document, XlaCheckConfig, dict[str, XlaTask]))


def table(config: XlaCheckConfig, results: dict[str, XlaTask]) -> str:
    """The README table: steps per second with XLA off and on, per task."""
    rows = [[task, f"{r.off_median:.2f}", f"{r.on_median:.2f}",
             f"{r.on_over_off_median:.2f} ({r.on_over_off_range[0]:.2f}-{r.on_over_off_range[1]:.2f})",
             "on" if TASKS[task].settings.jit_compile else "off"] for task, r in results.items()]
    return (markdown_table(["task", "XLA off, steps/s", "XLA on, steps/s", "on / off (range)", "used by time to target now"],
                           rows, align="lrrrl")
            + f"\n\nMedians over {config.repeats} off/on pairs, one batch held in memory.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat of a few steps (a check that it runs)")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    config = XlaCheckConfig(warmup_steps=2, steps=3, repeats=1) if args.quick else XlaCheckConfig()
    output = args.output_dir / ("xla_check_quick.json" if args.quick else "xla_check.json")
    print(table(config, run(config, output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
