"""Throughput of the echo stage: alone, behind a bandwidth-limited upstream, and its memory.

Three measurements, side by side in one process (memory in one child process per size):

1. ``echo_stage``: a free upstream (32x32x3 float32 images and int64 labels already in
   memory) through ``echoing.echo(e)`` for e in 1, 1.5, 2, 4, 8 (and e=1 with
   :class:`echoing.EchoStats`, which builds the stage that e=1 alone skips), against no
   echo stage and the echo stages a user could write instead (:data:`BASELINES`): the
   paper's one-liner ``flat_map(lambda *t: Dataset.from_tensors(t).repeat(e))``, a
   vectorised ``batch(64).map(tf.repeat(..., e, axis=0)).unbatch()``, a per-element
   ``map(tf.repeat(t[None], e, axis=0)).unbatch()`` and a parallel ``interleave``.
2. ``throttled``: the same upstream limited to U elements per second by
   :func:`pipelines.slow_storage.throttle`, echoed; compared with ``min(e * U, ceiling)``.
3. ``memory``: peak resident memory against the echo shuffle buffer size.
4. ``shapes``: elements that take the stage's one-at-a-time path (:func:`echoing.echo`):
   token sequences of varying length, and 224x224x3 uint8 images (147 KiB), each through
   its own consumer (``padded_batch`` and ``batch``). Beside echo and the one-liner it
   times the consumer alone (64 cached elements cycled, no upstream work). From that and
   the no-echo rate follows the rate of an echo stage that cost nothing (the upstream's
   time per element spread over e outputs, plus the consumer's): a bound on what any
   faster echo stage could gain over the one-liner.

Rates count output elements consumed in batches of 256 (the consumer's cost is the same for
every configuration). Every configuration is warmed up first; the repeats go round-robin
over the configurations so that machine noise hits them alike; medians are reported, and
each comparison is *paired*: the median over repeats of the ratio of two configurations
measured one after the other in the same round.

Run ``python -m benchmarks.throughput --quick`` (about a minute) or without ``--quick``
for the full figures, in ``runs/`` (``--output-dir benchmarks/results`` regenerates the
committed ``throughput.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf

import echoing
from benchmarks.lib import results_io
from benchmarks.lib.tables import markdown_table
from pipelines.slow_storage import throttle

IMAGE_SHAPE = (32, 32, 3)
# Distinct images in memory; the upstream cycles over them. Large enough that the data
# does not sit in L2 cache, small enough to build in a blink.
DISTINCT_IMAGES = 2048
CONSUMER_BATCH = 256


@dataclass(frozen=True)
class ThroughputConfig(results_io.Record):
    """Settings of one throughput run.

    Attributes:
      factors: echo factors for the echo-stage and throttled measurements.
      one_liner_factors: integer factors for the baselines (:data:`BASELINES`), the paper's
        flat_map one-liner among them.
      seconds: how long each timed repeat consumes.
      repeats: timed repeats per configuration (the median is reported).
      upstream_rate: U, elements per second admitted by the throttled upstream.
      throttled_seconds: how long each throttled repeat consumes.
      buffer_sizes: echo shuffle buffer sizes for the memory measurement.
      memory_factor: echo factor used in the memory measurement.
      shape_factors: integer factors for the varying-shape and large-element measurement.
    """

    factors: tuple[float, ...] = (1, 1.5, 2, 4, 8)
    one_liner_factors: tuple[int, ...] = (1, 2, 4, 8)
    seconds: float = 1.0
    repeats: int = 7
    upstream_rate: float = 2000.0
    throttled_seconds: float = 3.0
    buffer_sizes: tuple[int, ...] = (0, 1_000, 10_000, 100_000)
    memory_factor: float = 2
    shape_factors: tuple[int, ...] = (2, 4)


QUICK = ThroughputConfig(seconds=0.5, repeats=3, throttled_seconds=1.5, buffer_sizes=(0, 1_000, 10_000), shape_factors=(2,))


def free_upstream() -> tf.data.Dataset:
    """Images and labels already in memory, cycled forever: an upstream that costs ~nothing."""
    rng = np.random.default_rng(0)
    images = rng.random((DISTINCT_IMAGES,) + IMAGE_SHAPE, dtype=np.float32)
    labels = rng.integers(0, 10, DISTINCT_IMAGES).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat()


def one_liner(factor: int):
    """The paper's echo stage, for comparison."""
    return lambda ds: ds.flat_map(lambda *t: tf.data.Dataset.from_tensors(t).repeat(factor))


def vectorised_repeat(factor: int, group: int = 64):
    """Groups of ``group`` elements, each repeated ``factor`` times in one op, then unbatched."""
    repeat = lambda *t: tuple(tf.repeat(x, factor, axis=0) for x in t)  # noqa: E731
    return lambda ds: ds.batch(group).map(repeat).unbatch()


def per_element_repeat(factor: int):
    """Each element stacked ``factor`` times by a map, then unbatched: no nested dataset."""
    repeat = lambda *t: tuple(tf.repeat(x[None], factor, axis=0) for x in t)  # noqa: E731
    return lambda ds: ds.map(repeat).unbatch()


def parallel_interleave(factor: int, cycle_length: int = 4):
    """The one-liner's nested datasets built in parallel; ``block_length`` keeps copies adjacent."""
    return lambda ds: ds.interleave(lambda *t: tf.data.Dataset.from_tensors(t).repeat(factor), cycle_length=cycle_length,
                                    block_length=factor, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


# What a user could write instead of echoing.echo, each for an integer factor.
BASELINES = {
    "one-liner": one_liner,
    "batch-repeat-unbatch": vectorised_repeat,
    "map-repeat-unbatch": per_element_repeat,
    "parallel interleave": parallel_interleave,
}


@dataclass(frozen=True)
class Stage(results_io.Record):
    """One configuration measured: what sits between the upstream and the consumer.

    Attributes:
      name: ``"no echo"``, ``"echo"`` (:func:`echoing.echo`), a name of :data:`BASELINES`,
        ``"consumer alone"`` or ``"zero-cost echo stage (bound)"``.
      factor: the echo factor; ``None`` where there is no echo stage.
      stats: whether the echo stage counts into an :class:`echoing.EchoStats`.
    """

    name: str
    factor: Optional[float] = None
    stats: bool = False

    @property
    def label(self) -> str:
        """The configuration in words, for tables (never read back)."""
        factor = "" if self.factor is None else f" e={self.factor:g}"
        return f"{self.name}{factor}{' with stats' if self.stats else ''}"


NO_ECHO = Stage("no echo")


@dataclass(frozen=True)
class StageRates(results_io.Record):
    """One :class:`Stage`'s fields, its rate (elements per second) in every round, and their median."""

    name: str
    factor: Optional[float]
    stats: bool
    rates: tuple[float, ...]
    median: float

    @property
    def stage(self) -> Stage:
        return Stage(self.name, self.factor, self.stats)


@dataclass(frozen=True)
class PairedRatio(results_io.Record):
    """The rate of ``of`` over that of ``over``, measured side by side per round: median and range."""

    of: Stage
    over: Stage
    median: float
    min: float
    max: float


@dataclass(frozen=True)
class Comparison(results_io.Record):
    """Configurations measured round robin, and the ratios of pairs of them."""

    rows: tuple[StageRates, ...]
    paired_ratios: tuple[PairedRatio, ...]


@dataclass(frozen=True)
class ThrottledRow(results_io.Record):
    """The echo stage at ``factor`` on a throttled upstream: its rates, their median, ``min(e * U, ceiling)``, and the share of it met."""

    factor: float
    rates: tuple[float, ...]
    median: float
    bound: float
    fraction_of_bound: float


@dataclass(frozen=True)
class Throttled(results_io.Record):
    upstream_rate: float
    rows: tuple[ThrottledRow, ...]


@dataclass(frozen=True)
class MemoryRow(results_io.Record):
    """Resident memory in a fresh process echoing through a shuffle buffer of ``buffer_size`` elements."""

    buffer_size: int
    baseline_rss_mib: float
    peak_rss_mib: float
    growth_mib: float
    buffer_payload_mib: float


@dataclass(frozen=True)
class ThroughputResults(results_io.Record):
    """The four measurements: the echo stage alone, throttled, its memory, and shapes by case."""

    echo_stage: Comparison
    throttled: Throttled
    memory: tuple[MemoryRow, ...]
    shapes: dict[str, Comparison]


def output_rate(dataset: tf.data.Dataset, seconds: float, consumer=lambda ds: ds.batch(CONSUMER_BATCH)) -> float:
    """Output elements per second, consuming batches for about ``seconds`` after a warm-up."""
    iterator = iter(consumer(dataset).prefetch(2))
    for _ in range(3):  # Warm-up: fills buffers and micro-batches, traces nothing later.
        next(iterator)
    count, start = 0, time.perf_counter()
    while True:
        count += int(tf.nest.flatten(next(iterator))[0].shape[0])
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return count / elapsed


def measure_round_robin(builders: dict, seconds: float, repeats: int,
                        consumer=lambda ds: ds.batch(CONSUMER_BATCH)) -> dict:
    """Rates of every dataset (keyed as ``builders`` are), ``repeats`` times each, interleaved across them."""
    rates = {key: [] for key in builders}
    for _ in range(repeats):
        for key, build in builders.items():
            rates[key].append(output_rate(build(), seconds, consumer))
    return rates


def echo_stage(config: ThroughputConfig) -> Comparison:
    """Measurement 1: the echo stage alone on a free upstream, against the baselines."""
    builders = {NO_ECHO: free_upstream}
    for e in config.factors:
        builders[Stage("echo", float(e))] = lambda e=e: free_upstream().apply(echoing.echo(e))
    # echo(1) without stats returns its input; with stats it builds the stage.
    builders[Stage("echo", 1.0, stats=True)] = lambda: free_upstream().apply(echoing.echo(1, stats=echoing.EchoStats()))
    for name, baseline in BASELINES.items():
        for e in config.one_liner_factors:
            builders[Stage(name, float(e))] = lambda e=e, baseline=baseline: free_upstream().apply(baseline(e))
    rates = measure_round_robin(builders, config.seconds, config.repeats)
    # Each ratio is paired: per round, two configurations measured one after the other.
    pairs = [(Stage("echo", 1.0), NO_ECHO), (Stage("echo", 1.0, stats=True), NO_ECHO)]
    pairs += [(Stage("echo", float(e)), Stage(name, float(e))) for name in BASELINES for e in config.one_liner_factors
              if e > 1]
    paired = [paired_ratio(a, b, rates[a], rates[b]) for a, b in pairs if a in rates and b in rates]
    return Comparison(median_rows(rates), tuple(paired))


def median_rows(rates: dict) -> tuple[StageRates, ...]:
    """One row per :class:`Stage`: its fields, its rates over rounds and their median."""
    return tuple(StageRates(stage.name, stage.factor, stage.stats, tuple(r), statistics.median(r))
                 for stage, r in rates.items())


def paired_ratio(of: Stage, over: Stage, a: list[float], b: list[float]) -> PairedRatio:
    """Median and range over rounds of ``a[i] / b[i]``, the rates of ``of`` and ``over`` measured side by side."""
    ratios = [x / y for x, y in zip(a, b)]
    return PairedRatio(of, over, statistics.median(ratios), min(ratios), max(ratios))


def throttled(config: ThroughputConfig, ceilings: dict[float, float]) -> Throttled:
    """Measurement 2: a bandwidth-limited upstream, echoed."""
    rate = config.upstream_rate
    builders = {e: (lambda e=e: free_upstream().apply(throttle(rate)).apply(echoing.echo(e))) for e in config.factors}
    rates = measure_round_robin(builders, config.throttled_seconds, config.repeats)
    rows = []
    for e in config.factors:
        measured = statistics.median(rates[e])
        bound = min(e * rate, ceilings.get(e, math.inf))
        rows.append(ThrottledRow(e, tuple(rates[e]), measured, bound, measured / bound))
    return Throttled(rate, tuple(rows))


def varying_tokens() -> tf.data.Dataset:
    """Token sequences of 16-255 int32 tokens, cycled forever (varying shape: [None])."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(16, 256, DISTINCT_IMAGES).astype(np.int32)
    tokens = rng.integers(0, 258, (DISTINCT_IMAGES, 256)).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((tokens, lengths)).map(lambda t, n: t[:n]).repeat()


def large_images() -> tf.data.Dataset:
    """224x224x3 uint8 images (147 KiB, over the stage's 128 KiB micro-batch limit), cycled forever."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 224, 224, 3), dtype=np.uint8)
    return tf.data.Dataset.from_tensor_slices(images).repeat()


# Elements the echo stage echoes one at a time, each with the consumer a user would batch it with.
SHAPE_CASES = {
    "varying-length tokens": (varying_tokens, lambda ds: ds.padded_batch(64)),
    "224x224x3 uint8 images": (large_images, lambda ds: ds.batch(64)),
}


def shapes(config: ThroughputConfig) -> dict[str, Comparison]:
    """Measurement 4: varying shapes and large elements, against the one-liner and the consumer alone."""
    results = {}
    for case, (upstream, consumer) in SHAPE_CASES.items():
        def consumer_alone(upstream=upstream):
            # 64 cached elements cycled, no upstream work: what the consumer alone costs.
            return upstream().take(64).cache().repeat()

        alone = Stage("consumer alone")
        builders = {NO_ECHO: upstream, alone: consumer_alone}
        for e in config.shape_factors:
            builders[Stage("echo", float(e))] = lambda e=e, upstream=upstream: upstream().apply(echoing.echo(e))
            builders[Stage("one-liner", float(e))] = lambda e=e, upstream=upstream: upstream().apply(one_liner(e))
        rates = measure_round_robin(builders, config.seconds, config.repeats, consumer)
        paired = []
        for e in config.shape_factors:
            echo, liner = Stage("echo", float(e)), Stage("one-liner", float(e))
            paired.append(paired_ratio(echo, liner, rates[echo], rates[liner]))
            # An echo stage that cost nothing: the upstream's time per element (no echo's
            # minus the consumer's) spread over e outputs, plus the consumer's; per round.
            bound = [1 / ((1 / none - 1 / only) / e + 1 / only) for none, only in zip(rates[NO_ECHO], rates[alone])]
            paired.append(paired_ratio(Stage("zero-cost echo stage (bound)", float(e)), liner, bound, rates[liner]))
        results[case] = Comparison(median_rows(rates), tuple(paired))
    return results


def memory_child(buffer_size: int, factor: float) -> MemoryRow:
    """Peak RSS growth while echoing through a shuffle buffer (runs in a fresh process)."""
    # Warm up on the same pipeline without a buffer, so that kernels and runtime caches are
    # loaded before the baseline; the shuffle buffer fills before its first element, so the
    # measured pipeline must start after the baseline.
    warm = iter(free_upstream().apply(echoing.echo(factor, seed=0)).batch(CONSUMER_BATCH))
    for _ in range(3):
        next(warm)
    del warm
    # Reset the kernel's peak-RSS mark so that import-time peaks do not count.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    baseline = _rss_bytes("VmRSS")
    dataset = free_upstream().apply(echoing.echo(factor, shuffle_buffer_size=buffer_size, seed=0))
    iterator = iter(dataset.batch(CONSUMER_BATCH))
    # Enough elements to fill the buffer and then turn it over once.
    for _ in range(math.ceil((2 * buffer_size + 10 * CONSUMER_BATCH) / CONSUMER_BATCH)):
        next(iterator)
    peak = _rss_bytes("VmHWM")
    element_bytes = int(np.prod(IMAGE_SHAPE)) * 4 + 8
    return MemoryRow(buffer_size=buffer_size, baseline_rss_mib=baseline / 2**20, peak_rss_mib=peak / 2**20,
                     growth_mib=(peak - baseline) / 2**20, buffer_payload_mib=buffer_size * element_bytes / 2**20)


def _rss_bytes(field_name: str) -> int:
    """Current (VmRSS) or peak (VmHWM) resident memory of this process, from Linux /proc."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field_name + ":"))
    return int(line.split()[1]) * 1024  # /proc reports kB.


def memory(config: ThroughputConfig) -> tuple[MemoryRow, ...]:
    """Measurement 3: one child process per buffer size, so each peak is its own."""
    rows = []
    for size in config.buffer_sizes:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.throughput", "--memory-child", str(size), "--memory-factor", str(config.memory_factor)],
            check=True, capture_output=True, text=True,
        )
        rows.append(MemoryRow.from_record(json.loads(out.stdout.strip().splitlines()[-1])))
    return tuple(rows)


def typed(document: dict) -> tuple[ThroughputConfig, ThroughputResults]:
    """A throughput results document's settings and results."""
    return results_io.typed(document, ThroughputConfig, ThroughputResults)


def table(document: dict) -> str:
    """Markdown tables of a throughput results document."""
    config, results = typed(document)
    up = results.throttled
    tables = [
        markdown_table(["configuration", "elements/s (median)"],
                       [[row.stage.label, f"{row.median:,.0f}"] for row in results.echo_stage.rows], align="lr"),
        markdown_table(["paired ratio (median (min-max) over rounds)", "value"],
                       [_paired_cells(value) for value in results.echo_stage.paired_ratios], align="lr"),
        markdown_table([f"throttled upstream U={up.upstream_rate:g}/s", "elements/s", "min(e*U, ceiling)", "fraction"],
                       [[f"e={r.factor:g}", f"{r.median:,.0f}", f"{r.bound:,.0f}", f"{r.fraction_of_bound:.3f}"]
                        for r in up.rows], align="lrrr"),
        markdown_table([f"echo shuffle buffer (e={config.memory_factor:g})", "peak RSS growth MiB", "buffer payload MiB"],
                       [[f"{r.buffer_size:,}", f"{r.growth_mib:,.0f}", f"{r.buffer_payload_mib:,.0f}"]
                        for r in results.memory], align="rrr"),
    ]
    for case, measured in results.shapes.items():
        tables.append(markdown_table([case, "elements/s (median)"],
                                     [[row.stage.label, f"{row.median:,.0f}"] for row in measured.rows]
                                     + [_paired_cells(value, " (paired)") for value in measured.paired_ratios],
                                     align="lr"))
    return "\n\n".join(tables)


def _paired_cells(value: PairedRatio, suffix: str = "") -> list[str]:
    return [f"{value.of.label} / {value.over.label}{suffix}", f"{value.median:.2f} ({value.min:.2f}-{value.max:.2f})"]


def run(config: ThroughputConfig, output: Path | None) -> ThroughputResults:
    stage = echo_stage(config)
    ceilings = {row.factor: row.median for row in stage.rows if row.stage == Stage("echo", row.factor)}
    results = ThroughputResults(echo_stage=stage, throttled=throttled(config, ceilings), memory=memory(config),
                                shapes=shapes(config))
    if output is not None:
        results_io.write_results(output.stem, config.record(), results.record(), output.parent)
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repeats (about a minute)")
    results_io.add_output_dir_argument(parser)
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--memory-factor", type=float, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args.memory_factor).record()))
        return
    config = QUICK if args.quick else ThroughputConfig()
    output = args.output_dir / ("throughput_quick.json" if args.quick else "throughput.json")
    run(config, output)
    print(table(results_io.read_results(output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
