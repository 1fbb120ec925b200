"""AutoEcho against fixed echo factors: a throttled upstream, a modelled training step.

The training step is modelled by :class:`SleepStep`, a Keras model whose step sleeps
``step_seconds`` (it releases the CPU, as a step on an accelerator does), so the figures
do not depend on how busy this machine's cores are. The upstream is slow storage,
:func:`pipelines.slow_storage.throttle` at a rate set from the step rate measured alone,
so that R is what the run says: ``rate = batch_size * step_rate / R`` elements per second.
Everything runs through Keras ``fit``, with the echo factor in a ``tf.Variable``.

For every R, each repeat measures side by side:

* the step rate at each fixed factor e (after a warm-up);
* a run with :class:`echoing.AutoEcho`: the factor it chose, the step at which it first
  held a factor (settled), and its steady-state step rate, from that step to the end of
  the run (its periodic checks included).

A last scenario changes R mid-run (slower storage, then faster again) and counts the steps
AutoEcho takes to hold a factor near the new R.

Run ``python -m benchmarks.auto_echo`` (about 15 minutes, alone on the machine); results
go to ``runs/auto_echo.json`` (``--output-dir benchmarks/results`` regenerates the committed
file); ``--quick`` for a short check (about 2 minutes).

"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

import echoing
from benchmarks import results_io
from benchmarks.reporting import spread
from benchmarks.step_times import StepTimes, rate_between  # noqa: F401 (tests import them from here too)
from pipelines.slow_storage import RateLimiter, throttle

FEATURES = 16  # Floats per example: tiny, so that the pipeline's own CPU work is negligible.


@dataclass(frozen=True)
class AutoEchoBenchmarkConfig:
    """Settings of one run.

    Attributes:
      ratios: the values of R to set.
      factors: the fixed echo factors to compare AutoEcho with.
      step_seconds: the modelled step's sleep (Keras adds about 2 ms per step here).
      batch_size: examples per batch; with the controller's default settle of 10 steps,
        64 covers the lag of an echo micro-batch at ``max_factor=8``
        (``8 * 64 / 64 + 2`` prefetched batches, see :mod:`echoing.controller`).
      shuffle_buffer_size: the echo shuffle buffer, in examples.
      warmup_steps: untimed steps before a fixed factor's measurement.
      fixed_steps: timed steps per fixed factor.
      auto_steps: steps of each AutoEcho run.
      max_factor: AutoEcho's ``max_factor``.
      repeats: repeats of the whole comparison (medians and ranges are reported).
      follow_ratios: R in each segment of the scenario where R changes mid-run.
      follow_segment_steps: steps per segment of that scenario.
      seed: seed of the echo stage.
    """

    ratios: list[float] = field(default_factory=lambda: [1, 2, 4, 6])
    factors: list[float] = field(default_factory=lambda: [1, 2, 3, 4, 6, 8])
    step_seconds: float = 0.010
    batch_size: int = 64
    shuffle_buffer_size: int = 256
    warmup_steps: int = 30
    fixed_steps: int = 150
    auto_steps: int = 700
    max_factor: float = 8.0
    repeats: int = 3
    follow_ratios: list[float] = field(default_factory=lambda: [2, 5, 2])
    follow_segment_steps: int = 800
    seed: int = 0


QUICK = AutoEchoBenchmarkConfig(ratios=[1, 4], factors=[1, 4, 8], fixed_steps=80, auto_steps=400, repeats=1,
                                follow_ratios=[2, 5, 2], follow_segment_steps=600)


class SleepStep(keras.Model):
    """A model whose training step sleeps ``seconds``: an accelerator's step, which leaves the CPU free.

    >>> import tensorflow as tf
    >>> model = SleepStep(0.001)
    >>> model.compile()
    >>> ds = tf.data.Dataset.from_tensors((tf.zeros([2, 3]), tf.zeros([2]))).repeat(3)
    >>> len(model.fit(ds, verbose=0).history["slept_seconds"])
    1
    """

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = float(seconds)

    def call(self, inputs):
        return inputs

    def train_step(self, data):
        slept = tf.numpy_function(lambda: np.float32(time.sleep(self.seconds) or self.seconds), [], tf.float32,
                                  stateful=True)
        return {"slept_seconds": slept}


class RateSchedule(keras.callbacks.Callback):
    """Sets a :class:`RateLimiter`'s rate at given steps: storage that gets slower or faster."""

    def __init__(self, limiter: RateLimiter, rates_by_step: dict[int, float]):
        super().__init__()
        self.limiter, self.rates_by_step, self.step = limiter, dict(rates_by_step), 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step in self.rates_by_step:
            self.limiter.rate = self.rates_by_step[self.step]


def paced_dataset(limiter: RateLimiter, factor: tf.Variable, config: AutoEchoBenchmarkConfig,
                  stats: Optional[echoing.EchoStats] = None) -> tf.data.Dataset:
    """Examples read through ``limiter``, echoed by the variable ``factor``, batched and prefetched."""
    ds = tf.data.Dataset.range(2**62).apply(throttle(limiter))
    ds = ds.map(lambda i: (tf.fill([FEATURES], tf.cast(i, tf.float32)), i))
    # The echo stage reads the variable live; the shuffle buffer spreads copies apart.
    ds = ds.apply(echoing.echo(factor, shuffle_buffer_size=config.shuffle_buffer_size, seed=config.seed, stats=stats))
    return ds.batch(config.batch_size).prefetch(2)


def step_rate_alone(model: SleepStep, config: AutoEchoBenchmarkConfig) -> float:
    """The modelled step's rate under ``fit``, on batches that are already in memory."""
    batch = (tf.zeros([config.batch_size, FEATURES]), tf.zeros([config.batch_size], tf.int64))
    ds = tf.data.Dataset.from_tensors(batch).repeat()
    times = StepTimes()
    model.fit(ds, steps_per_epoch=config.warmup_steps + config.fixed_steps, epochs=1, verbose=0, callbacks=[times])
    return rate_between(times.times, config.warmup_steps)


def fixed_rate(model, limiter, factor_value, config) -> float:
    """The step rate at a fixed echo factor."""
    factor = tf.Variable(float(factor_value), dtype=tf.float64)
    times = StepTimes()
    model.fit(paced_dataset(limiter, factor, config), steps_per_epoch=config.warmup_steps + config.fixed_steps,
              epochs=1, verbose=0, callbacks=[times])
    return rate_between(times.times, config.warmup_steps)


def auto_run(model, limiter, config, steps, schedule=None, **settings) -> tuple[echoing.AutoEcho, StepTimes]:
    """One ``fit`` of ``steps`` steps with AutoEcho (and ``settings``); ``schedule`` maps steps to new upstream rates."""
    factor = tf.Variable(1.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    auto = echoing.AutoEcho(factor, max_factor=config.max_factor, stats=stats, verbose=0, **settings)
    times = StepTimes()
    callbacks = [auto, times] + ([RateSchedule(limiter, schedule)] if schedule else [])
    model.fit(paced_dataset(limiter, factor, config, stats), steps_per_epoch=steps, epochs=1, verbose=0, callbacks=callbacks)
    return auto, times


def compare(config: AutoEchoBenchmarkConfig, model: SleepStep, step_rate: float, ratio: float) -> dict:
    """One repeat at one R: every fixed factor and one AutoEcho run, side by side."""
    limiter = RateLimiter(config.batch_size * step_rate / ratio)
    fixed = {f"{e:g}": fixed_rate(model, limiter, e, config) for e in config.factors}
    auto, times = auto_run(model, limiter, config, config.auto_steps)
    holds = [d for d in auto.decisions if d.phase == "hold"]
    settled = holds[0].step if holds else None
    steady = rate_between(times.times, settled - 1) if settled is not None and settled < len(times.times) - 1 else None
    best = max(fixed, key=fixed.get)
    return {
        "fixed": fixed,
        "best_fixed_factor": float(best),
        "auto_factor": holds[0].factor if holds else None,
        "auto_final_factor": auto.decisions[-1].factor,
        "auto_ratio_estimate": holds[0].ratio if holds else None,
        "auto_settled_step": settled,
        "auto_steady_rate": steady,
        "auto_over_best_fixed": None if steady is None else steady / fixed[best],
        "auto_over_no_echo": None if steady is None or "1" not in fixed else steady / fixed["1"],
        "decisions": [dataclasses.asdict(d) for d in auto.decisions],
    }


def follow(config: AutoEchoBenchmarkConfig, model: SleepStep, step_rate: float) -> dict:
    """R changes every ``follow_segment_steps`` steps; how many steps until AutoEcho holds near the new R?"""
    rate_for = lambda r: config.batch_size * step_rate / r  # noqa: E731
    limiter = RateLimiter(rate_for(config.follow_ratios[0]))
    segment = config.follow_segment_steps
    schedule = {i * segment: rate_for(r) for i, r in enumerate(config.follow_ratios) if i > 0}
    auto, _ = auto_run(model, limiter, config, segment * len(config.follow_ratios), schedule)
    segments = []
    for i, r in enumerate(config.follow_ratios):
        start, end = i * segment, (i + 1) * segment
        near = [d for d in auto.decisions if start <= d.step < end and d.phase == "hold"
                and abs(d.factor / min(config.max_factor, r) - 1) <= 0.35]
        segments.append({"ratio": r, "start_step": start,
                         "steps_to_hold_near_ratio": near[0].step - start if near else None,
                         "held_factor": near[0].factor if near else None})
    return {"segments": segments, "decisions": [dataclasses.asdict(d) for d in auto.decisions]}


def summarise(repeats: list[dict], factors: list[float]) -> dict:
    """Medians and ranges over repeats of one R."""
    return {
        "fixed": {f"{e:g}": spread([r["fixed"][f"{e:g}"] for r in repeats]) for e in factors},
        "best_fixed_factor": statistics.median(r["best_fixed_factor"] for r in repeats),
        "auto_factor": spread([r["auto_factor"] for r in repeats]),
        "auto_settled_step": spread([r["auto_settled_step"] for r in repeats]),
        "auto_steady_rate": spread([r["auto_steady_rate"] for r in repeats]),
        "auto_over_best_fixed": spread([r["auto_over_best_fixed"] for r in repeats]),
        "auto_over_no_echo": spread([r["auto_over_no_echo"] for r in repeats]),
    }


def run(config: AutoEchoBenchmarkConfig, output: Optional[Path]) -> dict:
    model = SleepStep(config.step_seconds)
    model.compile()
    step_rate = step_rate_alone(model, config)
    print(f"modelled step alone: {step_rate:.1f} steps/s")
    by_ratio = {f"{r:g}": [] for r in config.ratios}
    for repeat in range(config.repeats):
        for r in config.ratios:
            result = compare(config, model, step_rate, r)
            by_ratio[f"{r:g}"].append(result)
            print(f"repeat {repeat} R={r:g}: fixed {', '.join(f'e={e}: {v:.1f}' for e, v in result['fixed'].items())}; "
                  f"AutoEcho e={result['auto_factor']} settled at step {result['auto_settled_step']}, "
                  f"{result['auto_steady_rate'] or float('nan'):.1f} steps/s")
    follow_result = follow(config, model, step_rate)
    for s in follow_result["segments"]:
        print(f"R={s['ratio']:g} from step {s['start_step']}: held e={s['held_factor']} after {s['steps_to_hold_near_ratio']} steps")
    results = {
        "step_rate_alone": step_rate,
        "by_ratio": {r: {"summary": summarise(rows, config.factors), "repeats": rows} for r, rows in by_ratio.items()},
        "follow": follow_result,
    }
    if output is not None:
        results_io.write_results(output.stem, asdict(config), results, output.parent)
    return {"settings": asdict(config), "results": results}


def table(document: dict) -> str:
    """The README table: fixed factors against AutoEcho at each R (medians, ranges over repeats)."""
    settings, results = document["settings"], document["results"]
    factors = [f"{e:g}" for e in settings["factors"]]

    def cell(spread, fmt="{:.1f}"):
        if spread is None:
            return "n/a"
        return f"{fmt.format(spread['median'])} ({fmt.format(spread['min'])}-{fmt.format(spread['max'])})"

    lines = ["| R | " + " | ".join(f"e={e}" for e in factors)
             + " | AutoEcho e | AutoEcho steps/s | AutoEcho / best fixed | AutoEcho / no echo | settled at step |",
             "|---:|" + "---:|" * (len(factors) + 5)]
    for r, entry in results["by_ratio"].items():
        s = entry["summary"]
        best = max(factors, key=lambda e: s["fixed"][e]["median"])
        fixed = [(f"**{s['fixed'][e]['median']:.1f}**" if e == best else f"{s['fixed'][e]['median']:.1f}") for e in factors]
        lines.append(f"| {r} | " + " | ".join(fixed) + f" | {cell(s['auto_factor'], '{:.2f}')} | {cell(s['auto_steady_rate'])} | "
                     f"{cell(s['auto_over_best_fixed'], '{:.2f}')} | {cell(s['auto_over_no_echo'], '{:.2f}')} | "
                     f"{cell(s['auto_settled_step'], '{:.0f}')} |")
    segments = results["follow"]["segments"]
    follow_text = "; ".join(
        f"R={s['ratio']:g} from step {s['start_step']}: "
        + (f"held e={s['held_factor']:g} {s['steps_to_hold_near_ratio']} steps later" if s["held_factor"] is not None
           else "no factor near R held within the segment")
        for s in segments)
    return "\n".join(lines) + (f"\n\nSteps per second, median over {settings['repeats']} repeats (AutoEcho cells: median (min-max)); "
                               "the fixed e with the highest median in bold. AutoEcho's rate is its steady state, from the step "
                               "it first held a factor to the end of its run (its checks included); each repeat's ratios are taken "
                               "against that repeat's own fixed-e runs, measured beside it. "
                               f"R changing mid-run: {follow_text}.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two values of R, one repeat (about 2 minutes)")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    output = args.output_dir / ("auto_echo_quick.json" if args.quick else "auto_echo.json")
    print(table(run(QUICK if args.quick else AutoEchoBenchmarkConfig(), output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
