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
>>> record = measure(BackendsConfig(factors=(1,), warmup_steps=2, steps=5, auto_steps=0))
>>> record["backend"], [run["factor"] for run in record["fixed"]]
('tensorflow', [1])
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
from benchmarks.lib.reporting import spread


@dataclasses.dataclass(frozen=True)
class BackendsConfig:
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


def measure(config: BackendsConfig) -> dict:
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
        fixed.append({"factor": factor, "steps_per_second": rate_between(times.times, config.warmup_steps)})
    record = {"backend": keras.backend.backend(), "versions": backend_versions(), "fixed": fixed}
    if config.auto_steps:
        factor = tf.Variable(1.0, dtype=tf.float64)
        auto = echoing.AutoEcho(factor, max_factor=8.0, verbose=0)
        spent = []
        observe = auto.on_train_batch_end

        def timed(batch, logs=None):  # The callback's own time per step.
            start = time.perf_counter()
            observe(batch, logs)
            spent.append(time.perf_counter() - start)

        auto.on_train_batch_end = timed
        times = StepTimes()
        model(config).fit(pipeline(config, factor), steps_per_epoch=config.warmup_steps + config.auto_steps, epochs=1,
                          verbose=0, callbacks=[auto, times])
        auto_rate = rate_between(times.times, config.warmup_steps)
        best = max(run["steps_per_second"] for run in fixed)
        record["auto"] = {"steps_per_second": auto_rate, "over_best_fixed": auto_rate / best,
                          "callback_ms_per_step": 1000 * statistics.median(spent), "final_factor": float(factor.numpy())}
    return record


def backend_versions() -> dict:
    """Keras's version and its backend's, as this interpreter runs them."""
    import importlib

    import keras

    backend = keras.backend.backend()
    return {"keras": keras.__version__, backend: importlib.import_module(backend).__version__}


def run_worker(backend: str, config: BackendsConfig) -> dict:
    """:func:`measure` in a fresh interpreter with ``KERAS_BACKEND=backend``."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"))
    result = subprocess.run([sys.executable, "-m", "benchmarks.backends", "--worker", json.dumps(dataclasses.asdict(config))],
                            env=env, capture_output=True, text=True, check=False, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"the {backend} worker failed:\n{result.stderr[-3000:]}")
    record = json.loads(result.stdout.strip().splitlines()[-1])
    if record["backend"] != backend:
        raise RuntimeError(f"asked for the {backend} backend, the worker ran {record['backend']}")
    return record


def run(config: BackendsConfig, output) -> dict:
    runs = []
    for repeat in range(config.repeats):
        order = config.backends if repeat % 2 == 0 else tuple(reversed(config.backends))
        for backend in order:
            record = {"repeat": repeat, **run_worker(backend, config)}
            runs.append(record)
            print(f"repeat {repeat} {backend}: "
                  + ", ".join(f"e={run['factor']:g} {run['steps_per_second']:.1f}" for run in record["fixed"])
                  + (f", AutoEcho {record['auto']['steps_per_second']:.1f} steps/s" if "auto" in record else ""))
    results = {"runs": runs, "summary": summary(runs, config)}
    results_io.write_results(output.stem, dataclasses.asdict(config), results, output.parent)
    return {"settings": dataclasses.asdict(config), "results": results}


def rate_at(record: dict, factor) -> float:
    """A run's steps per second at a fixed factor."""
    return next(run["steps_per_second"] for run in record["fixed"] if run["factor"] == factor)


def summary(runs: list[dict], config: BackendsConfig) -> list[dict]:
    """One entry per backend: median and range over repeats of each rate, and of its rate over TensorFlow's in the same repeat."""
    tensorflow = {r["repeat"]: r for r in runs if r["backend"] == "tensorflow"}
    out = []
    for backend in config.backends:
        mine = [r for r in runs if r["backend"] == backend]
        entry = {"backend": backend, "fixed": [
            {"factor": f, "steps_per_second": spread([rate_at(r, f) for r in mine]),
             "over_tensorflow": spread([rate_at(r, f) / rate_at(tensorflow[r["repeat"]], f)
                                        for r in mine if r["repeat"] in tensorflow])}
            for f in config.factors]}
        if config.auto_steps:
            entry["auto"] = {name: spread([r["auto"][name] for r in mine])
                             for name in ("steps_per_second", "over_best_fixed", "callback_ms_per_step")}
        out.append(entry)
    return out


def table(document: dict) -> str:
    """The results page's table: steps per second per backend and factor, AutoEcho's rate and cost."""
    settings, summary_ = document["settings"], document["results"]["summary"]
    factors = settings["factors"]

    def cell(value: Optional[dict], spec: str = ".1f") -> str:
        return "–" if value is None else f"{value['median']:{spec}} ({value['min']:{spec}}-{value['max']:{spec}})"

    head = " | ".join(f"e={f:g}, steps/s" for f in factors)
    lines = [f"| backend | {head} | AutoEcho, steps/s | AutoEcho / best fixed | AutoEcho callback, ms/step |",
             "|---|" + "---:|" * (len(factors) + 3)]
    for entry in summary_:
        auto = entry.get("auto", {})
        lines.append(f"| {entry['backend']} | " + " | ".join(cell(run["steps_per_second"]) for run in entry["fixed"])
                     + f" | {cell(auto.get('steps_per_second'))} | {cell(auto.get('over_best_fixed'), '.2f')}"
                     + f" | {cell(auto.get('callback_ms_per_step'), '.2f')} |")
    jax = next((entry for entry in summary_ if entry["backend"] == "jax"), None)
    if jax is not None:
        lines += ["", "| JAX over TensorFlow, same repeat | " + " | ".join(f"e={f:g}" for f in factors) + " |",
                  "|---|" + "---:|" * len(factors),
                  "| steps/s | " + " | ".join(cell(run["over_tensorflow"], ".2f") for run in jax["fixed"]) + " |"]
    return "\n".join(lines) + (f"\n\nMedian (range) over {settings['repeats']} repeats; each backend in its own "
                               f"interpreter, alternating. The source makes {settings['input_batches_per_second']:g} "
                               f"fresh batches of {settings['batch_size']} per second.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BackendsConfig.backends))
    parser.add_argument("--repeats", type=int, default=BackendsConfig.repeats)
    parser.add_argument("--quick", action="store_true", help="one repeat of a few steps (a check that it runs)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # Internal: measure in this interpreter.
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    if args.worker:
        settings = json.loads(args.worker)
        config = BackendsConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
        print(json.dumps(measure(config)))
        return
    config = BackendsConfig(backends=tuple(args.backends), repeats=args.repeats)
    if args.quick:
        config = dataclasses.replace(config, warmup_steps=2, steps=10, auto_steps=40, repeats=1)
    output = args.output_dir / ("backends_quick.json" if args.quick else "backends.json")
    print(table(run(config, output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
