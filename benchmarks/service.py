"""tf.data service workers against echoing: the trainer's step rate with 1, 2 and 4 workers, with and without echo.

Each worker's read is throttled to ``worker_rate`` examples per second (a sleep per
example in TensorFlow's own sleep op, so that workers in one process do not steal each
other's CPU), the upstream runs
on in-process tf.data service workers on localhost (``distributed_epoch``), and the trainer
echoes after ``distribute``, batches, and runs a modelled step that sleeps ``step_seconds``
(releasing the CPU, as an accelerator does). With ``w`` workers the trainer can reach at
most ``min(w * worker_rate * e / batch_size, 1 / step_seconds)`` steps per second, so
echoing by ``e`` should cut the workers needed for a given step rate by about ``e``.

Run ``python -m benchmarks.service`` (about 3 minutes, alone on the machine); results go
to ``runs/service.json`` (``--output-dir benchmarks/results`` regenerates the committed
file). The servers bind their ports on every interface (TensorFlow offers no bind
address); the benchmark talks to them through localhost only and stops them all.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import statistics
import time
from typing import Optional

import tensorflow as tf
from tensorflow.python.data.experimental.ops import testing

import echoing
from benchmarks.lib import results_io
from benchmarks.lib.service_settings import ServiceSettings
from benchmarks.lib.tables import markdown_table

service = tf.data.experimental.service


def slow_read(rate: float) -> tf.data.Dataset:
    """Examples read at ``rate`` per second by whichever worker runs this dataset.

    TensorFlow's own sleep transformation, not a Python function: it serialises to any
    worker, and it does not hold the GIL (a Python sleep inside a worker's job deadlocks
    ``WorkerServer.stop`` in this process).
    """
    return tf.data.Dataset.range(10**9).apply(testing.sleep(int(1e6 / rate)))


def step_rate(target: str, factor: float, config: ServiceSettings, job: str) -> float:
    """Steps per second of a trainer echoing by ``factor`` after ``distribute``."""
    ds = slow_read(config.worker_rate).apply(echoing.service.distribute("distributed_epoch", target, job_name=job))
    ds = ds.map(lambda i: tf.fill([16], tf.cast(i, tf.float32)))
    if factor != 1:
        ds = ds.apply(echoing.echo(factor, shuffle_buffer_size=4 * config.batch_size, seed=0))
    ds = ds.batch(config.batch_size).prefetch(2)
    iterator = iter(ds)
    next(iterator)
    start = time.perf_counter()
    steps, measuring_from = 0, None
    try:
        while True:
            next(iterator)
            time.sleep(config.step_seconds)  # The modelled step: the CPU is free meanwhile.
            now = time.perf_counter()
            if measuring_from is None and now - start >= config.warmup_seconds:
                measuring_from, steps = now, 0
            elif measuring_from is not None:
                steps += 1
                if now - measuring_from >= config.seconds:
                    return steps / (now - measuring_from)
    finally:
        del iterator  # Ends the job's consumer before the servers stop.
        gc.collect()


@dataclasses.dataclass(frozen=True)
class WorkerRow(results_io.Record):
    """The trainer's steps per second at one worker count and factor.

    Attributes:
      workers, factor: the configuration.
      rates: steps per second, one per repeat.
      median, min, max: of ``rates``.
      nominal_bound: the model with the nominal worker rate.
      model: the model with the measured rate of one worker at e = 1 (``None`` without e = 1).
    """

    workers: int
    factor: float
    rates: tuple[float, ...]
    median: float
    min: float
    max: float
    nominal_bound: float
    model: Optional[float]


@dataclasses.dataclass(frozen=True)
class WorkersNeeded(results_io.Record):
    """At one factor, the fewest workers that reached ``target_steps_per_second`` (``None``: none tried), and the model's."""

    factor: float
    target_steps_per_second: float
    workers: Optional[int]
    predicted: Optional[int]


@dataclasses.dataclass(frozen=True)
class ServiceResults(results_io.Record):
    rows: tuple[WorkerRow, ...]
    steps_per_second_per_worker_at_e1: Optional[float]
    workers_needed: tuple[WorkersNeeded, ...]


def run(config: ServiceSettings, output) -> ServiceResults:
    rates: dict[tuple[int, float], list[float]] = {}  # (workers, factor) -> steps/s per repeat
    for repeat in range(config.repeats):
        for workers in config.worker_counts:
            dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
            address = dispatcher.target.split("://")[1]
            started = [service.WorkerServer(service.WorkerConfig(dispatcher_address=address,
                                                                 worker_address="localhost:%port%", port=0))
                       for _ in range(workers)]
            try:
                for factor in config.factors:
                    name = f"workers={workers}/e={factor:g}"  # A job name and a log line, never parsed.
                    rate = step_rate(dispatcher.target, factor, config, job=f"{name}/{repeat}")
                    rates.setdefault((workers, factor), []).append(rate)
                    print(f"repeat {repeat} {name}: {rate:.1f} steps/s (bound {config.bound(workers, factor):.1f})")
            finally:
                for worker in started:
                    worker.stop()
                dispatcher.stop()
    # What one worker really delivers (sleep overshoot and per-element transfer cost take
    # their share), measured in this run: the model's rates scale from it.
    fewest = min(config.worker_counts)
    per_worker = statistics.median(rates[(fewest, 1.0)]) / fewest if 1.0 in config.factors else None
    rows = []
    for workers in config.worker_counts:
        for factor in config.factors:
            values = rates[(workers, factor)]
            model = None if per_worker is None else min(workers * per_worker * factor, 1 / config.step_seconds)
            rows.append(WorkerRow(workers, factor, tuple(values), statistics.median(values), min(values), max(values),
                                  config.bound(workers, factor), model))
    results = ServiceResults(tuple(rows), per_worker, workers_needed(rows, config, per_worker))
    results_io.write_results(output.stem, config.record(), results.record(), output.parent)
    return results


def workers_needed(rows: list[WorkerRow], config: ServiceSettings, per_worker) -> tuple[WorkersNeeded, ...]:
    """Per e, the fewest workers whose measured median reached 90% of the step's own rate."""
    target = 0.9 / config.step_seconds
    needed = []
    for factor in config.factors:
        reached = [r.workers for r in rows if r.factor == factor and r.median >= target]
        needed.append(WorkersNeeded(factor, target, min(reached) if reached else None,
                                    None if not per_worker else math.ceil(target / (per_worker * factor))))
    return tuple(needed)


def document_table(document: dict) -> str:
    """The README table from a results document (``python -m benchmarks.readme_tables``)."""
    return table(*results_io.typed(document, ServiceSettings, ServiceResults))


def table(settings: ServiceSettings, results: ServiceResults) -> str:
    """The README table: steps per second by workers and e, and the workers needed per e."""
    factors = settings.factors
    rows = []
    for workers in settings.worker_counts:
        cells = []
        for factor in factors:
            row = next(r for r in results.rows if r.workers == workers and r.factor == factor)
            model = "-" if row.model is None else f"{row.model:.1f}"
            cells.append(f"{row.median:.1f} ({row.min:.1f}-{row.max:.1f}; {model})")
        rows.append([workers, *cells])
    most = max(settings.worker_counts)
    needed = "; ".join(
        f"e={n.factor:g}: " + (str(n.workers) if n.workers is not None else f"more than {most}")
        + f" (model {n.predicted})" for n in results.workers_needed)
    table = markdown_table(["workers", *(f"e={e:g} steps/s (model)" for e in factors)], rows,
                           align="r" * (len(factors) + 1))
    return table + (
        f"\n\nMedian (min-max over {settings.repeats} repeats; the model) of the trainer's steps per second, "
        f"each worker's read throttled to {settings.worker_rate:g} examples/s, batches of {settings.batch_size}, a "
        f"{settings.step_seconds * 1e3:g} ms modelled step. The model is min(workers x e x r1, step rate), r1 being one "
        f"worker's measured rate at e=1 ({results.steps_per_second_per_worker_at_e1:.1f} steps/s). "
        f"Workers needed for 90% of the step's own rate: {needed}.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short repeat (a check that it runs)")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    config = ServiceSettings()
    if args.quick:
        config = dataclasses.replace(config, worker_counts=(1, 2), factors=(1.0, 2.0), warmup_seconds=0.5, seconds=1.0, repeats=1)
    output = args.output_dir / ("service_quick.json" if args.quick else "service.json")
    print(table(config, run(config, output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
