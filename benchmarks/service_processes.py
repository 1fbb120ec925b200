"""tf.data service with worker processes: the trainer's step rate for 1, 2 and 4 workers at e = 1, 2, 4 and the controller's, and recovery from a SIGKILL.

The dispatcher and every worker are processes of their own (``python -m echoing.service``),
on loopback. Each worker reads ``worker_rate`` examples a second (TensorFlow's sleep
dataset op, which runs in the worker's process); the trainer (this process) echoes after
``distribute``, batches, and runs a modelled step that sleeps ``step_seconds``. With the
defaults one worker feeds a quarter of the step's rate: a per-worker R of 4. Every
configuration is run in each repeat, interleaved.

* **Steps per second** per worker count and factor, and with
  :class:`echoing.EchoController` choosing e from the stage's fresh count (the factor it
  held last); the **workers saved**: the fewest workers at which each factor reaches 90%
  of the step's own rate.
* **Recovery**: two workers at e = 2, one SIGKILLed; the time from the kill until the
  rate over 0.5 s windows is back within 15% of the one-worker rate for three windows
  in a row.

Run ``python -m benchmarks.service_processes`` (about 6 minutes, alone on the machine);
``--output-dir benchmarks/results`` for the committed results, then
``python -m benchmarks.readme_tables`` for ``docs/results/service.md``'s table.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Optional

import tensorflow as tf
from tensorflow.python.data.experimental.ops import testing as tf_data_testing

import echoing
from benchmarks.lib import results_io
from benchmarks.lib.run_records import PipelineRate
from benchmarks.lib.service_settings import ServiceSettings
from benchmarks.lib.tables import markdown_table

AUTO = "auto"  # The factor column of the controller's runs.


@dataclasses.dataclass(frozen=True)
class Settings(ServiceSettings):
    """The shared settings, and the controller's run's length (every default is the committed run's).

    Attributes:
      auto_seconds: time measured with the controller choosing e.

    Its record holds R per worker too (``ratio``), for whoever reads the file.
    """

    WRITTEN_PROPERTIES = ("ratio",)

    auto_seconds: float = 12.0


@dataclasses.dataclass(frozen=True)
class RateRun(PipelineRate):
    """Steps per second of one configuration in one repeat (``factor`` is ``"auto"`` for the controller)."""

    factor: str


@dataclasses.dataclass(frozen=True)
class RecoveryRun(results_io.Record):
    """One SIGKILL of one of two workers: the rates before and after, and the seconds to steady."""

    repeat: int
    before: float
    after: float
    seconds_to_steady: Optional[float]


class Cluster:
    """A dispatcher and ``workers`` worker processes on loopback, all killed on close."""

    def __init__(self, workers: int):
        self.processes: list[subprocess.Popen] = []
        _, self.target = self._start("dispatcher", "--port", "0", "--worker-timeout-ms", "2000")
        self.workers = [self._start("worker", "--dispatcher", self.target.split("://")[1], "--port", "0")[0]
                        for _ in range(workers)]

    def _start(self, *args) -> tuple[subprocess.Popen, str]:
        process = subprocess.Popen([sys.executable, "-m", "echoing.service", *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
        self.processes.append(process)
        return process, process.stdout.readline().split()[1]

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()


def trainer_batches(target: str, factor, settings: Settings, job: str, stats=None):
    ds = tf.data.Dataset.range(10**9).apply(tf_data_testing.sleep(int(1e6 / settings.worker_rate)))
    ds = ds.apply(echoing.service.distribute("distributed_epoch", target, job_name=job))
    ds = ds.map(lambda i: tf.fill([16], tf.cast(i, tf.float32)))
    ds = ds.apply(echoing.echo(factor, shuffle_buffer_size=4 * settings.batch_size, seed=0, stats=stats))
    return iter(ds.batch(settings.batch_size).prefetch(2))


def step_rate(target: str, factor, settings: Settings, job: str) -> tuple[float, Optional[float]]:
    """Steps per second at a fixed ``factor``, or with the controller when ``factor`` is AUTO."""
    controller, stats, variable = None, None, None
    if factor == AUTO:
        controller = echoing.EchoController(max_factor=8.0, elements_per_step=settings.batch_size, verbose=0)
        stats = echoing.EchoStats()
        variable = tf.Variable(controller.factor, dtype=tf.float64)
    iterator = trainer_batches(target, variable if controller else factor, settings, job, stats)
    seconds = settings.auto_seconds if controller else settings.seconds
    next(iterator)
    start, step, measured_from = time.perf_counter(), 0, None
    try:
        while True:
            next(iterator)
            time.sleep(settings.step_seconds)  # The modelled step: the CPU is free meanwhile.
            now = time.perf_counter()
            step += 1
            if controller is not None and controller.observe(step, now, int(stats.fresh.numpy())) is not None:
                variable.assign(controller.factor)
            if measured_from is None and now - start >= settings.warmup_seconds + (seconds / 2 if controller else 0):
                measured_from = (now, step)  # The controller's runs are measured over their second half.
            elif measured_from is not None and now - start >= settings.warmup_seconds + seconds:
                rate = (step - measured_from[1]) / (now - measured_from[0])
                return rate, None if controller is None else controller.factor
    finally:
        del iterator  # Ends the job's consumer before the servers go.
        gc.collect()


def recovery(settings: Settings, repeat: int) -> RecoveryRun:
    cluster = Cluster(2)
    try:
        iterator = trainer_batches(cluster.target, 2.0, settings, f"recovery/{repeat}")
        windows, window_start, steps = [], time.perf_counter(), 0
        killed_at = None
        while True:
            next(iterator)
            time.sleep(settings.step_seconds)
            steps += 1
            now = time.perf_counter()
            if now - window_start >= 0.5:
                windows.append((now, steps / (now - window_start)))
                window_start, steps = now, 0
            if killed_at is None and windows and now >= windows[0][0] + 4:  # 4 s of two workers first.
                os.kill(cluster.workers[0].pid, signal.SIGKILL)
                killed_at = now
            if killed_at is not None and now - killed_at >= 12:
                break
        before = statistics.median(r for t, r in windows if t < killed_at and t > windows[0][0] + 1)
        after = statistics.median(r for t, r in windows if t > killed_at + 6)
        steady = None
        later = [(t, r) for t, r in windows if t > killed_at]
        for k in range(len(later) - 2):
            if all(abs(r - after) <= 0.15 * after for _, r in later[k:k + 3]):
                steady = later[k][0] - killed_at
                break
        del iterator
        gc.collect()
        return RecoveryRun(repeat, before, after, steady)
    finally:
        cluster.close()


@dataclasses.dataclass(frozen=True)
class ProcessResults(results_io.Record):
    rates: tuple[RateRun, ...]
    recoveries: tuple[RecoveryRun, ...]


def summary(values) -> str:
    values = list(values)
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def table(rates: list[RateRun], recoveries: list[RecoveryRun], settings: Settings) -> str:
    factors = [f"{f:g}" for f in settings.factors] + [AUTO]
    rows = []
    for workers in settings.worker_counts:
        cells = []
        for factor in factors:
            runs = [r for r in rates if r.workers == workers and r.factor == factor]
            cell = summary(r.steps_per_second for r in runs) if runs else "-"
            if factor == AUTO and runs:
                cell += f" (e {summary(r.held_factor for r in runs)})"
            cells.append(cell)
        rows.append([workers, *cells])
    lines = [markdown_table(["workers", *(f"e = {f}" if f != AUTO else "EchoController (e held)" for f in factors)],
                            rows)]
    own = 1 / settings.step_seconds
    saved = []
    for factor in factors:
        enough = [w for w in settings.worker_counts
                  if statistics.median(r.steps_per_second for r in rates if r.workers == w and r.factor == factor)
                  >= 0.9 * own]
        saved.append(f"e = {factor}: {min(enough) if enough else 'more than ' + str(max(settings.worker_counts))}")
    lines.append("")
    lines.append(f"Workers needed for 90% of the step's own rate ({own:g} steps/s): " + "; ".join(saved) + ".")
    if recoveries:
        steady = [r.seconds_to_steady for r in recoveries if r.seconds_to_steady is not None]
        lines.append("")
        lines.append(f"A worker SIGKILLed (two at e = 2): {summary(r.before for r in recoveries)} steps/s before, "
                     f"{summary(r.after for r in recoveries)} after; steady again "
                     f"{summary(steady) + ' s' if steady else 'never'} after the kill "
                     f"({len(steady)} of {len(recoveries)} runs).")
    return "\n".join(lines)


def document_table(document: dict) -> str:
    """The tables from a results document (``python -m benchmarks.readme_tables``)."""
    settings, results = results_io.typed(document, Settings, ProcessResults)
    return (table(list(results.rates), list(results.recoveries), settings)
            + f"\n\n_Per-worker R = {settings.ratio:g}; medians and ranges over {settings.repeats} repeats._")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=Settings.repeats)
    parser.add_argument("--seconds", type=float, default=Settings.seconds, help="seconds measured per fixed factor")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    settings = Settings(repeats=args.repeats, seconds=args.seconds)
    rates, recoveries = [], []
    for repeat in range(settings.repeats):
        for workers in settings.worker_counts:
            cluster = Cluster(workers)
            try:
                for factor in [*settings.factors, AUTO]:
                    label = AUTO if factor == AUTO else f"{factor:g}"
                    rate, held = step_rate(cluster.target, factor, settings, job=f"w{workers}/e{label}/{repeat}")
                    rates.append(RateRun(workers=workers, repeat=repeat, steps_per_second=rate, held_factor=held,
                                         factor=label))
                    print(f"repeat {repeat} workers {workers} e {label}: {rate:.1f} steps/s", flush=True)
            finally:
                cluster.close()
        recoveries.append(recovery(settings, repeat))
        print(f"repeat {repeat} recovery: {recoveries[-1]}", flush=True)
    print(table(rates, recoveries, settings))
    path = results_io.write_results("service_processes", settings.record(),
                                    ProcessResults(tuple(rates), tuple(recoveries)).record(), args.output_dir)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
