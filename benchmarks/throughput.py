"""Throughput of the echo stage: alone, behind a bandwidth-limited upstream, and its memory.

Three measurements, side by side in one process (memory in one child process per size):

1. ``echo_stage``: a free upstream (32x32x3 float32 images and int64 labels already in
   memory) through ``echoing.echo(e)`` for e in 1, 1.5, 2, 4, 8, against no echo stage and
   the paper's one-liner ``flat_map(lambda *t: Dataset.from_tensors(t).repeat(e))``.
2. ``throttled``: the same upstream limited to U elements per second by
   :func:`pipelines.slow_storage.throttle`, echoed; compared with ``min(e * U, ceiling)``.
3. ``memory``: peak resident memory against the echo shuffle buffer size.

Rates count output elements consumed in batches of 256 (the consumer's cost is the same for
every configuration). Every configuration is warmed up first; the repeats go round-robin
over the configurations so that machine noise hits them alike; medians are reported.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf

import echoing
from benchmarks import results_io
from pipelines.slow_storage import throttle

IMAGE_SHAPE = (32, 32, 3)
# Distinct images in memory; the upstream cycles over them. Large enough that the data
# does not sit in L2 cache, small enough to build in a blink.
DISTINCT_IMAGES = 2048
CONSUMER_BATCH = 256


@dataclass
class ThroughputConfig:
    """Settings of one throughput run.

    Attributes:
      factors: echo factors for the echo-stage and throttled measurements.
      one_liner_factors: integer factors for the paper's flat_map one-liner.
      seconds: how long each timed repeat consumes.
      repeats: timed repeats per configuration (the median is reported).
      upstream_rate: U, elements per second admitted by the throttled upstream.
      throttled_seconds: how long each throttled repeat consumes.
      buffer_sizes: echo shuffle buffer sizes for the memory measurement.
      memory_factor: echo factor used in the memory measurement.
    """

    factors: list[float] = field(default_factory=lambda: [1, 1.5, 2, 4, 8])
    one_liner_factors: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    seconds: float = 1.0
    repeats: int = 7
    upstream_rate: float = 2000.0
    throttled_seconds: float = 3.0
    buffer_sizes: list[int] = field(default_factory=lambda: [0, 1_000, 10_000, 100_000])
    memory_factor: float = 2


QUICK = ThroughputConfig(seconds=0.5, repeats=3, throttled_seconds=1.5, buffer_sizes=[0, 1_000, 10_000])


def free_upstream() -> tf.data.Dataset:
    """Images and labels already in memory, cycled forever: an upstream that costs ~nothing."""
    rng = np.random.default_rng(0)
    images = rng.random((DISTINCT_IMAGES,) + IMAGE_SHAPE, dtype=np.float32)
    labels = rng.integers(0, 10, DISTINCT_IMAGES).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat()


def one_liner(factor: int):
    """The paper's echo stage, for comparison."""
    return lambda ds: ds.flat_map(lambda *t: tf.data.Dataset.from_tensors(t).repeat(factor))


def output_rate(dataset: tf.data.Dataset, seconds: float) -> float:
    """Output elements per second, consuming batches for about ``seconds`` after a warm-up."""
    iterator = iter(dataset.batch(CONSUMER_BATCH).prefetch(2))
    for _ in range(3):  # Warm-up: fills buffers and micro-batches, traces nothing later.
        next(iterator)
    count, start = 0, time.perf_counter()
    while True:
        count += int(next(iterator)[1].shape[0])
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return count / elapsed


def measure_round_robin(builders: dict[str, callable], seconds: float, repeats: int) -> dict[str, list[float]]:
    """Rates of every named dataset, ``repeats`` times each, interleaved across configurations."""
    rates = {name: [] for name in builders}
    for _ in range(repeats):
        for name, build in builders.items():
            rates[name].append(output_rate(build(), seconds))
    return rates


def echo_stage(config: ThroughputConfig) -> dict:
    """Measurement 1: the echo stage alone on a free upstream."""
    builders = {"no echo": free_upstream}
    for e in config.factors:
        builders[f"echo e={e:g}"] = lambda e=e: free_upstream().apply(echoing.echo(e))
    for e in config.one_liner_factors:
        builders[f"one-liner e={e}"] = lambda e=e: free_upstream().apply(one_liner(e))
    rates = measure_round_robin(builders, config.seconds, config.repeats)
    rows = [{"name": name, "rates": r, "median": statistics.median(r)} for name, r in rates.items()]
    by_name = {row["name"]: row["median"] for row in rows}
    comparisons = {}
    for e in config.one_liner_factors:
        if f"echo e={e:g}" in by_name and e > 1:
            comparisons[f"echo / one-liner at e={e}"] = by_name[f"echo e={e:g}"] / by_name[f"one-liner e={e}"]
    if "echo e=1" in by_name:
        comparisons["echo e=1 / no echo"] = by_name["echo e=1"] / by_name["no echo"]
    # Side-by-side ratios per repeat, whose median is robust to drift between repeats.
    paired = {}
    for e in config.one_liner_factors:
        if e > 1 and f"echo e={e:g}" in rates:
            paired[f"echo / one-liner at e={e}"] = statistics.median(
                a / b for a, b in zip(rates[f"echo e={e:g}"], rates[f"one-liner e={e}"])
            )
    return {"rows": rows, "ratios_of_medians": comparisons, "median_paired_ratios": paired}


def throttled(config: ThroughputConfig, ceilings: dict[float, float]) -> dict:
    """Measurement 2: a bandwidth-limited upstream, echoed."""
    rate = config.upstream_rate
    builders = {
        f"e={e:g}": (lambda e=e: free_upstream().apply(throttle(rate)).apply(echoing.echo(e)))
        for e in config.factors
    }
    rates = measure_round_robin(builders, config.throttled_seconds, config.repeats)
    rows = []
    for e in config.factors:
        measured = statistics.median(rates[f"e={e:g}"])
        bound = min(e * rate, ceilings.get(e, math.inf))
        rows.append(
            {"factor": e, "rates": rates[f"e={e:g}"], "median": measured, "bound": bound, "fraction_of_bound": measured / bound}
        )
    return {"upstream_rate": rate, "rows": rows}


def memory_child(buffer_size: int, factor: float) -> dict:
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
    return {
        "buffer_size": buffer_size,
        "baseline_rss_mib": baseline / 2**20,
        "peak_rss_mib": peak / 2**20,
        "growth_mib": (peak - baseline) / 2**20,
        "buffer_payload_mib": buffer_size * element_bytes / 2**20,
    }


def _rss_bytes(field_name: str) -> int:
    """Current (VmRSS) or peak (VmHWM) resident memory of this process, from Linux /proc."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field_name + ":"))
    return int(line.split()[1]) * 1024  # /proc reports kB.


def memory(config: ThroughputConfig) -> list[dict]:
    """Measurement 3: one child process per buffer size, so each peak is its own."""
    rows = []
    for size in config.buffer_sizes:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.throughput", "--memory-child", str(size), "--memory-factor", str(config.memory_factor)],
            check=True, capture_output=True, text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def table(document: dict) -> str:
    """Markdown tables of a throughput results document."""
    results = document["results"]
    lines = ["| configuration | elements/s (median) |", "|---|---:|"]
    lines += [f"| {row['name']} | {row['median']:,.0f} |" for row in results["echo_stage"]["rows"]]
    lines += ["", "| ratio (side by side) | value |", "|---|---:|"]
    for name, value in {**results["echo_stage"]["ratios_of_medians"]}.items():
        lines.append(f"| {name} | {value:.2f} |")
    up = results["throttled"]
    lines += ["", f"| throttled upstream U={up['upstream_rate']:g}/s | elements/s | min(e*U, ceiling) | fraction |", "|---|---:|---:|---:|"]
    lines += [f"| e={r['factor']:g} | {r['median']:,.0f} | {r['bound']:,.0f} | {r['fraction_of_bound']:.3f} |" for r in up["rows"]]
    lines += ["", f"| echo shuffle buffer (e={document['settings']['memory_factor']:g}) | peak RSS growth MiB | buffer payload MiB |", "|---:|---:|---:|"]
    lines += [f"| {r['buffer_size']:,} | {r['growth_mib']:,.0f} | {r['buffer_payload_mib']:,.0f} |" for r in results["memory"]]
    return "\n".join(lines)


def run(config: ThroughputConfig, output: Path | None) -> dict:
    stage = echo_stage(config)
    ceilings = {}
    for row in stage["rows"]:
        if row["name"].startswith("echo e="):
            ceilings[float(row["name"].split("=")[1])] = row["median"]
    results = {"echo_stage": stage, "throttled": throttled(config, ceilings), "memory": memory(config)}
    document = {"settings": asdict(config), "results": results}
    if output is not None:
        results_io.write_results(output.stem, asdict(config), results, output.parent)
    return document


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repeats (about a minute)")
    results_io.add_output_dir_argument(parser)
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--memory-factor", type=float, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args.memory_factor)))
        return
    config = QUICK if args.quick else ThroughputConfig()
    output = args.output_dir / ("throughput_quick.json" if args.quick else "throughput.json")
    document = run(config, output)
    print(table(document))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
