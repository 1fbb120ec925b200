"""echoing.grain against grain's own FlatMap, and a throttled grain pipeline at R = 4, side by side in one run.

Two measurements, each repeated (``--repeats``, interleaved so that a noisy neighbour
hits every variant alike):

* **The stage alone.** Elements per second out of :func:`echoing.grain.echo` and out of
  grain's ``FlatMapIterDataset`` with a ``FlatMapTransform`` returning ``[x] * e``,
  at e = 2 and 4, on small elements (an int) and on elements of 1 MB (a numpy array),
  over an in-memory list read by a bare iterator (grain's own sources cost more per
  element than either stage, which would hide the stages' difference). The ratio is
  taken per repeat (same repeat, both stages).
* **A throttled pipeline.** A source whose examples take ``--read-seconds`` each on one
  reading thread, then the echo stage (a live :class:`echoing.grain.Factor`), batching
  and a prefetch thread, against a step that sleeps ``--step-seconds``: R = 4 with the
  defaults. Steps per second at e = 1, 2 and 4, and with :class:`echoing.EchoController`
  choosing e from the fresh count. Then the same with the reads in ``--workers`` worker
  processes (``mp_prefetch``, grain's usual set-up; 0 leaves it out), each reading
  ``--workers`` times slower, so that R is the same; the echo stage runs after them.

Run ``python -m benchmarks.grain_echo`` (about twelve minutes; alone on the machine) with
``--output-dir benchmarks/results`` for the committed results;
``python -m benchmarks.readme_tables`` makes ``docs/results/grain.md``'s tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Optional

import numpy as np

from benchmarks.lib import results_io
from benchmarks.lib.run_records import PipelineRate
from benchmarks.lib.tables import markdown_table

FACTORS = (2, 4)
SIZES = {"small": 0, "1 MB": 2**20}
PIPELINE_FACTORS = (1.0, 2.0, 4.0)


@dataclasses.dataclass(frozen=True)
class StageRun(results_io.Record):
    """Elements per second out of one stage, one repeat."""

    stage: str  # "echoing.grain" or "grain FlatMap"
    size: str
    factor: int
    repeat: int
    elements_per_second: float


@dataclasses.dataclass(frozen=True)
class PipelineRun(PipelineRate):
    """Steps per second of the throttled pipeline at one factor (``None``: the controller's), one repeat.

    ``workers`` is the ``mp_prefetch`` processes that read (0: a thread in this process),
    ``held_factor`` the controller's factor at the last step, ``mean_factor`` the factor in
    force over the measured half, step by step (absent from runs before it was kept).
    """

    OMITTED_WHEN_NONE = ("mean_factor",)

    factor: Optional[float]
    mean_factor: Optional[float] = None


def _source(size: str, elements: int):
    """An in-memory source as cheap as an iterator can be, so that the stage's own cost shows."""
    import grain

    # Sixteen distinct arrays in turn for 1 MB: both stages hand on references, never copies.
    arrays = [np.full(SIZES[size], k, np.uint8) for k in range(16)] if SIZES[size] else None
    values = [arrays[i % 16] if arrays else i for i in range(elements)]

    class ListIterator(grain.DatasetIterator):
        def __init__(self):
            super().__init__()
            self.index = 0

        def __next__(self):
            if self.index >= len(values):
                raise StopIteration
            self.index += 1
            return values[self.index - 1]

        def get_state(self):
            return {"index": self.index}

        def set_state(self, state):
            self.index = state["index"]

    class ListIterDataset(grain.IterDataset):
        def __iter__(self):
            return ListIterator()

    return ListIterDataset()


def _flat_map(parent, factor: int):
    import grain

    class Copies(grain.experimental.FlatMapTransform):
        max_fan_out = factor

        def flat_map(self, element):
            return [element] * factor

    return grain.experimental.FlatMapIterDataset(parent, Copies())


def stage_rate(stage: str, size: str, factor: int, elements: int) -> float:
    from echoing import grain as echo_grain

    source = _source(size, elements)
    ds = echo_grain.echo(source, factor) if stage == "echoing.grain" else _flat_map(source, factor)
    start = time.perf_counter()
    count = sum(1 for _ in ds)
    return count / (time.perf_counter() - start)


class SlowRead:
    """Example ``i``, read in ``seconds``: a picklable transform, so that grain's worker processes can run it."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, i):
        time.sleep(self.seconds)
        return {"x": np.full([16], i, np.float32)}


def pipeline_rate(factor: Optional[float], *, steps: int, read_seconds: float, step_seconds: float,
                  batch_size: int, max_factor: float, workers: int = 0) -> tuple[float, Optional[float], Optional[float]]:
    """Steps per second over the last half of ``steps``; with the controller, its factor at the end and over that half.

    With ``workers``, the reads run in that many ``mp_prefetch`` processes, each ``workers``
    times slower (the same R), and the echo stage after them, in this process.
    """
    import grain

    import echoing
    from echoing import grain as echo_grain

    live = echo_grain.Factor(1.0 if factor is None else factor)
    stats = echo_grain.EchoStats()
    source = grain.MapDataset.range(10**9).map(SlowRead(read_seconds * max(workers, 1))).to_iter_dataset(
        grain.ReadOptions(num_threads=1, prefetch_buffer_size=batch_size))
    if workers:
        source = source.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    ds = echo_grain.echo(source, live, shuffle_buffer_size=4 * batch_size, seed=0, stats=stats).batch(batch_size)
    batches = iter(grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=2))
    controller = None
    if factor is None:
        controller = echoing.EchoController(max_factor=max_factor, elements_per_step=batch_size, verbose=0)
        live.assign(controller.factor)
    times, factors = [], []
    for step in range(steps):
        next(batches)
        time.sleep(step_seconds)  # The modelled accelerator's step.
        times.append(time.perf_counter())
        factors.append(float(live))
        if controller is not None and controller.observe(step, times[-1], stats.fresh) is not None:
            live.assign(controller.factor)
    batches.close()  # Closes the pipeline: the workers stop and the echo stage lets go of its copies.
    half = steps // 2
    rate = (steps - 1 - half) / (times[-1] - times[half])
    if controller is None:
        return rate, None, None
    # A check of a lower factor can be under way at the last step: the mean says what the half ran at.
    return rate, controller.factor, statistics.fmean(factors[half + 1:])


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def stage_table(runs: list[StageRun]) -> str:
    rows = []
    for size in SIZES:
        for factor in FACTORS:
            ours = {r.repeat: r.elements_per_second for r in runs
                    if (r.stage, r.size, r.factor) == ("echoing.grain", size, factor)}
            theirs = {r.repeat: r.elements_per_second for r in runs
                      if (r.stage, r.size, r.factor) == ("grain FlatMap", size, factor)}
            ratios = [ours[k] / theirs[k] for k in ours if k in theirs]
            if ratios:
                rows.append([size, factor, summary(list(ours.values())), summary(list(theirs.values())),
                             f"{summary(ratios)}x"])
    return markdown_table(["element", "e", "echoing.grain (elements/s)", "grain FlatMap (elements/s)",
                           "ratio, per repeat"], rows)


def pipeline_table(runs: list[PipelineRun]) -> str:
    table_rows = []
    for workers in sorted({r.workers for r in runs}):
        base = {r.repeat: r.steps_per_second for r in runs if r.factor == 1.0 and r.workers == workers}
        reads = f"{workers} mp_prefetch workers" if workers else "a thread"
        for factor in (*PIPELINE_FACTORS, None):
            rows = [r for r in runs if r.factor == factor and r.workers == workers]
            if not rows:
                continue
            ratios = [r.steps_per_second / base[r.repeat] for r in rows if r.repeat in base]
            held = [r.held_factor for r in rows if r.held_factor is not None]
            mean = [r.mean_factor for r in rows if r.mean_factor is not None]
            table_rows.append([reads, "EchoController" if factor is None else f"{factor:g}",
                               summary([r.steps_per_second for r in rows]), f"{summary(ratios)}x",
                               summary(mean) if mean else "-", summary(held) if held else "-"])
    return markdown_table(["reads in", "factor", "steps/s", "over e = 1, per repeat", "mean factor, measured half",
                           "factor at the last step"], table_rows)


@dataclasses.dataclass(frozen=True)
class GrainSettings(results_io.Record):
    """The command's settings (its flags), and the controller's law."""

    OMITTED_WHEN_NONE = ("law",)

    repeats: int
    small_elements: int
    large_elements: int
    steps: int
    read_seconds: float
    step_seconds: float
    batch_size: int
    max_factor: float
    law: Optional[str] = None  # the controller's (echoing.controller.LAW; absent before it was kept)
    workers: int = 0  # the pipeline's mp_prefetch workers in its second arm (absent before it was run)


@dataclasses.dataclass(frozen=True)
class GrainResults(results_io.Record):
    stages: tuple[StageRun, ...]
    pipelines: tuple[PipelineRun, ...]


def document_table(document: dict) -> str:
    """Both tables from a results document (``python -m benchmarks.readme_tables``)."""
    settings, results = results_io.typed(document, GrainSettings, GrainResults)
    return (stage_table(list(results.stages)) + "\n\n" + pipeline_table(list(results.pipelines))
            + f"\n\n_The pipeline: {settings.read_seconds * 1000:g} ms an example, batches of "
              f"{settings.batch_size}, a step of {settings.step_seconds * 1000:g} ms (R = "
              f"{settings.read_seconds * settings.batch_size / settings.step_seconds:g})"
              + (f"; in {settings.workers} workers, {settings.read_seconds * settings.workers * 1000:g} ms an "
                 f"example each" if settings.workers else "")
              + f". Medians and ranges over {settings.repeats} repeats._")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--small-elements", type=int, default=200_000, help="source elements, small")
    parser.add_argument("--large-elements", type=int, default=20_000, help="source elements, 1 MB")
    parser.add_argument("--steps", type=int, default=600, help="steps of the throttled pipeline per run")
    parser.add_argument("--read-seconds", type=float, default=0.005, help="seconds to read one example")
    parser.add_argument("--step-seconds", type=float, default=0.01, help="the modelled step")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-factor", type=float, default=8.0)
    parser.add_argument("--workers", type=int, default=2,
                        help="mp_prefetch worker processes for the pipeline's second arm (0: leave it out)")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    if args.workers < 0:
        parser.error(f"--workers: expected a whole number >= 0, got {args.workers!r}")
    if args.workers:
        from absl import flags

        flags.FLAGS.mark_as_parsed()  # grain's workers read an absl flag (google/grain#1355).

    stages, pipelines = [], []
    for repeat in range(args.repeats):
        for size in SIZES:
            elements = args.small_elements if size == "small" else args.large_elements
            for factor in FACTORS:
                for stage in ("echoing.grain", "grain FlatMap"):
                    stages.append(StageRun(stage, size, factor, repeat, stage_rate(stage, size, factor, elements)))
        for workers in sorted({0, args.workers}):
            for factor in (*PIPELINE_FACTORS, None):
                rate, held, mean = pipeline_rate(factor, steps=args.steps, read_seconds=args.read_seconds,
                                                 step_seconds=args.step_seconds, batch_size=args.batch_size,
                                                 max_factor=args.max_factor, workers=workers)
                pipelines.append(PipelineRun(workers=workers, repeat=repeat, steps_per_second=rate,
                                             held_factor=held, factor=factor, mean_factor=mean))
        print(f"repeat {repeat + 1} of {args.repeats} done", flush=True)
    print(stage_table(stages))
    print(pipeline_table(pipelines))
    import echoing

    settings = GrainSettings(**{k: v for k, v in vars(args).items() if k != "output_dir"}, law=echoing.controller.LAW)
    path = results_io.write_results("grain_echo", settings.record(),
                                    GrainResults(tuple(stages), tuple(pipelines)).record(), args.output_dir)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
