"""Keras 3 backends side by side: one small model on TensorFlow and JAX, fed by the same echoed pipeline.

Each backend runs in an interpreter of its own (Keras picks its backend once per
process), and the backends alternate within each repeat, which goes first alternating
too, so that machine noise hits both alike. In each interpreter the same ``tf.data``
pipeline (a source throttled to ``input_batches_per_second`` fresh batches, example
echoing, batching, prefetch) feeds the same MLP through ``fit`` at e = 1, 2 and 4, then
under :class:`echoing.AutoEcho` (``max_factor`` 8). Per run: steps per second after
warm-up; for AutoEcho also the time its callback takes per step and its rate over the
best fixed factor's in the same interpreter (its tuning included).

Run ``python -m benchmarks.backends`` (about 4 minutes, alone on the machine; needs the
``jax`` extra, and ``--backends tensorflow jax torch`` adds PyTorch when torch is
installed); results go to ``runs/backends.json`` (``--output-dir benchmarks/results``
regenerates the committed file).

Example (one short repeat on the TensorFlow backend, in this interpreter):

>>> from benchmarks.backends import BackendsConfig, measure
>>> run = measure(BackendsConfig(factors=(1,), warmup_steps=2, steps=5, auto_steps=0))
>>> run.backend, [fixed.factor for fixed in run.fixed], run.auto
('tensorflow', [1], None)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Optional

from benchmarks.lib import results_io
from benchmarks.lib.reporting import Spread, spread
from benchmarks.lib.tables import markdown_table


@dataclasses.dataclass(frozen=True)
class BackendsConfig(results_io.Record):
    """Settings of the comparison.

    Attributes:
      backends: Keras backends to compare, each in its own interpreter.
      factors: fixed echo factors measured.
      batch_size: examples per training batch.
      features: inputs per example.
      width: units of each of the MLP's three hidden layers (sizes the step).
      input_batches_per_second: fresh batches the throttled source makes per second.
      warmup_steps: steps not timed (tracing, compilation, the buffer filling).
      steps: steps timed per fixed factor.
      auto_steps: steps of the AutoEcho run (0 leaves it out); timed after ``warmup_steps``.
      repeats: rounds over the backends.
    """

    backends: tuple[str, ...] = ("tensorflow", "jax")
    factors: tuple[int, ...] = (1, 2, 4)
    batch_size: int = 64
    features: int = 64
    width: int = 512
    input_batches_per_second: float = 100.0
    warmup_steps: int = 30
    steps: int = 300
    auto_steps: int = 1000
    repeats: int = 3


@dataclasses.dataclass(frozen=True)
class FixedRate(results_io.Record):
    factor: float
    steps_per_second: float


@dataclasses.dataclass(frozen=True)
class AutoRate(results_io.Record):
    """AutoEcho's run: its rate, that over the best fixed factor's, its callback's time per step and its last factor."""

    steps_per_second: float
    over_best_fixed: float
    callback_ms_per_step: float
    final_factor: float


@dataclasses.dataclass(frozen=True)
class BackendRun(results_io.Record):
    """One interpreter's figures on one backend, in one repeat (``auto``: ``None`` without an AutoEcho run)."""

    repeat: int
    backend: str
    versions: dict
    fixed: tuple[FixedRate, ...]
    auto: Optional[AutoRate]


@dataclasses.dataclass(frozen=True)
class FixedSummary(results_io.Record):
    factor: float
    steps_per_second: Spread
    over_tensorflow: Optional[Spread]


@dataclasses.dataclass(frozen=True)
class AutoSummary(results_io.Record):
    steps_per_second: Spread
    over_best_fixed: Spread
    callback_ms_per_step: Spread


@dataclasses.dataclass(frozen=True)
class BackendSummary(results_io.Record):
    backend: str
    fixed: tuple[FixedSummary, ...]
    auto: Optional[AutoSummary]


@dataclasses.dataclass(frozen=True)
class BackendsResults(results_io.Record):
    runs: tuple[BackendRun, ...]
    summary: tuple[BackendSummary, ...]


def pipeline(config: BackendsConfig, factor, stats=None):
    """The echoed input: a throttled source of fresh batches, unbatched, echoed, batched and prefetched."""
    import tensorflow as tf

    import echoing
    from echoing import testing

    def fresh_batch(i):
        x = tf.random.stateless_normal([config.batch_size, config.features], seed=tf.stack([i, 0]))
        return x, tf.cast(tf.reduce_sum(x[:, :4], axis=1) > 0, tf.int64)

    return (testing.throttled_range(config.input_batches_per_second).map(fresh_batch).unbatch()
            .apply(echoing.echo(factor, shuffle_buffer_size=4 * config.batch_size, seed=0, stats=stats))
            .batch(config.batch_size, drop_remainder=True).prefetch(2))


def model(config: BackendsConfig):
    import keras

    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((config.features,))]
                           + [keras.layers.Dense(config.width, activation="relu") for _ in range(3)]
                           + [keras.layers.Dense(2)])
    net.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return net


def measure(config: BackendsConfig, repeat: int = 0) -> BackendRun:
    """One interpreter's figures, on its Keras backend: steps per second at each factor, and AutoEcho's."""
    import keras
    import tensorflow as tf

    import echoing
    from benchmarks.lib.step_times import StepTimes, rate_between

    fixed = []
    for factor in config.factors:
        times = StepTimes()
        model(config).fit(pipeline(config, factor), steps_per_epoch=config.warmup_steps + config.steps,
                          epochs=1, verbose=0, callbacks=[times])
        fixed.append(FixedRate(factor, rate_between(times.times, config.warmup_steps)))
    auto_rate = None
    if config.auto_steps:
        factor, stats = tf.Variable(1.0, dtype=tf.float64), echoing.EchoStats()
        auto = echoing.AutoEcho(factor, max_factor=8.0, stats=stats, elements_per_step=config.batch_size, verbose=0)
        spent = []
        observe = auto.on_train_batch_end

        def timed(batch, logs=None):  # The callback's own time per step.
            start = time.perf_counter()
            observe(batch, logs)
            spent.append(time.perf_counter() - start)

        auto.on_train_batch_end = timed
        times = StepTimes()
        model(config).fit(pipeline(config, factor, stats), steps_per_epoch=config.warmup_steps + config.auto_steps, epochs=1,
                          verbose=0, callbacks=[auto, times])
        rate = rate_between(times.times, config.warmup_steps)
        best = max(run.steps_per_second for run in fixed)
        auto_rate = AutoRate(rate, rate / best, 1000 * statistics.median(spent), float(factor.numpy()))
    return BackendRun(repeat, keras.backend.backend(), backend_versions(), tuple(fixed), auto_rate)


def backend_versions() -> dict:
    """Keras's version and its backend's, as this interpreter runs them."""
    import importlib

    import keras

    backend = keras.backend.backend()
    return {"keras": keras.__version__, backend: importlib.import_module(backend).__version__}


def run_worker(backend: str, config: BackendsConfig, repeat: int) -> BackendRun:
    """:func:`measure` in a fresh interpreter with ``KERAS_BACKEND=backend``."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"))
    result = subprocess.run([sys.executable, "-m", "benchmarks.backends", "--worker", json.dumps(config.record()),
                             "--repeat", str(repeat)],
                            env=env, capture_output=True, text=True, check=False, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"the {backend} worker failed:\n{result.stderr[-3000:]}")
    run = BackendRun.from_record(json.loads(result.stdout.strip().splitlines()[-1]))
    if run.backend != backend:
        raise RuntimeError(f"asked for the {backend} backend, the worker ran {run.backend}")
    return run


def run(config: BackendsConfig, output) -> BackendsResults:
    runs = []
    for repeat in range(config.repeats):
        order = config.backends if repeat % 2 == 0 else tuple(reversed(config.backends))
        for backend in order:
            measured = run_worker(backend, config, repeat)
            runs.append(measured)
            print(f"repeat {repeat} {backend}: "
                  + ", ".join(f"e={fixed.factor:g} {fixed.steps_per_second:.1f}" for fixed in measured.fixed)
                  + (f", AutoEcho {measured.auto.steps_per_second:.1f} steps/s" if measured.auto else ""))
    results = BackendsResults(tuple(runs), summary(runs, config))
    results_io.write_results(output.stem, config.record(), results.record(), output.parent)
    return results


def rate_at(run: BackendRun, factor) -> float:
    """A run's steps per second at a fixed factor."""
    return next(fixed.steps_per_second for fixed in run.fixed if fixed.factor == factor)


def summary(runs: list[BackendRun], config: BackendsConfig) -> tuple[BackendSummary, ...]:
    """One entry per backend: median and range over repeats of each rate, and of its rate over TensorFlow's in the same repeat."""
    tensorflow = {r.repeat: r for r in runs if r.backend == "tensorflow"}
    out = []
    for backend in config.backends:
        mine = [r for r in runs if r.backend == backend]
        fixed = tuple(FixedSummary(f, spread([rate_at(r, f) for r in mine]),
                                   spread([rate_at(r, f) / rate_at(tensorflow[r.repeat], f)
                                            for r in mine if r.repeat in tensorflow]))
                      for f in config.factors)
        auto = None
        if config.auto_steps:
            auto = AutoSummary(*(spread([getattr(r.auto, name) for r in mine])
                                 for name in ("steps_per_second", "over_best_fixed", "callback_ms_per_step")))
        out.append(BackendSummary(backend, fixed, auto))
    return tuple(out)


def document_table(document: dict) -> str:
    """The table from a results document (``python -m benchmarks.readme_tables``)."""
    return table(*results_io.typed(document, BackendsConfig, BackendsResults))


def table(settings: BackendsConfig, results: BackendsResults) -> str:
    """The results page's table: steps per second per backend and factor, AutoEcho's rate and cost."""
    factors = settings.factors

    def cell(value: Optional[Spread], spec: str = ".1f") -> str:
        return "–" if value is None else f"{value.median:{spec}} ({value.min:{spec}}-{value.max:{spec}})"

    rows = [[entry.backend, *(cell(fixed.steps_per_second) for fixed in entry.fixed),
             cell(entry.auto and entry.auto.steps_per_second), cell(entry.auto and entry.auto.over_best_fixed, ".2f"),
             cell(entry.auto and entry.auto.callback_ms_per_step, ".2f")] for entry in results.summary]
    lines = [markdown_table(["backend", *(f"e={f:g}, steps/s" for f in factors), "AutoEcho, steps/s",
                             "AutoEcho / best fixed", "AutoEcho callback, ms/step"], rows, align="l" + "r" * (len(factors) + 3))]
    jax = next((entry for entry in results.summary if entry.backend == "jax"), None)
    if jax is not None:
        lines += ["", markdown_table(["JAX over TensorFlow, same repeat", *(f"e={f:g}" for f in factors)],
                                     [["steps/s", *(cell(fixed.over_tensorflow, ".2f") for fixed in jax.fixed)]],
                                     align="l" + "r" * len(factors))]
    return "\n".join(lines) + (f"\n\nMedian (range) over {settings.repeats} repeats; each backend in its own "
                               f"interpreter, alternating. The source makes {settings.input_batches_per_second:g} "
                               f"fresh batches of {settings.batch_size} per second.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BackendsConfig.backends))
    parser.add_argument("--repeats", type=int, default=BackendsConfig.repeats)
    parser.add_argument("--quick", action="store_true", help="one repeat of a few steps (a check that it runs)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # Internal: measure in this interpreter.
    parser.add_argument("--repeat", type=int, default=0, help=argparse.SUPPRESS)  # Internal: the worker's repeat.
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(BackendsConfig.from_record(json.loads(args.worker)), args.repeat).record()))
        return
    config = BackendsConfig(backends=tuple(args.backends), repeats=args.repeats)
    if args.quick:
        config = dataclasses.replace(config, warmup_steps=2, steps=10, auto_steps=40, repeats=1)
    output = args.output_dir / ("backends_quick.json" if args.quick else "backends.json")
    print(table(config, run(config, output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
