"""Keras loops whose step sleeps, fed by a throttled echoed input: real ``fit`` loops with a known R (a test helper).

The training step is :class:`SleepStep`, a Keras model whose step sleeps
``step_seconds`` (it releases the CPU, as a step on an accelerator does), so what a
loop measures does not depend on how busy this machine's cores are. The input is slow
storage, :func:`pipelines.slow_storage.throttle` at a rate set from the step rate
measured alone, so that R is what the loop says: ``rate = batch_size * step_rate / R``
elements per second. ``tests/test_auto_echo.py`` and ``tests/test_real_loops.py`` run
AutoEcho in such loops.

>>> config = SleepLoopConfig(step_seconds=0.005, batch_size=8, warmup_steps=5, fixed_steps=20)
>>> model = SleepStep(config.step_seconds)
>>> model.compile()
>>> step_rate_alone(model, config) < 1 / config.step_seconds  # Steps of 5 ms: under 200 a second.
True
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

import echoing
from benchmarks.lib.step_times import StepTimes, rate_between  # noqa: F401 (the tests take them from here)
from pipelines.slow_storage import RateLimiter, throttle

FEATURES = 16  # Floats per example: tiny, so that the pipeline's own CPU work is negligible.


@dataclass(frozen=True)
class SleepLoopConfig:
    """Settings of a sleeping loop.

    Attributes:
      step_seconds: the modelled step's sleep (Keras adds about 2 ms per step here).
      batch_size: examples per batch; with the controller's default settle of 10 steps,
        64 covers the lag of an echo micro-batch at ``max_factor=8``
        (``8 * 64 / 64 + 2`` prefetched batches, see :mod:`echoing.controller`).
      shuffle_buffer_size: the echo shuffle buffer, in examples.
      warmup_steps: untimed steps before a fixed factor's measurement.
      fixed_steps: timed steps per fixed factor.
      max_factor: AutoEcho's ``max_factor``.
      seed: seed of the echo stage.
    """

    step_seconds: float = 0.010
    batch_size: int = 64
    shuffle_buffer_size: int = 256
    warmup_steps: int = 30
    fixed_steps: int = 150
    max_factor: float = 8.0
    seed: int = 0


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


def paced_dataset(limiter: RateLimiter, factor: tf.Variable, config: SleepLoopConfig,
                  stats: Optional[echoing.EchoStats] = None) -> tf.data.Dataset:
    """Examples read through ``limiter``, echoed by the variable ``factor``, batched and prefetched."""
    ds = tf.data.Dataset.range(2**62).apply(throttle(limiter))
    ds = ds.map(lambda i: (tf.fill([FEATURES], tf.cast(i, tf.float32)), i))
    # The echo stage reads the variable live; the shuffle buffer spreads copies apart.
    ds = ds.apply(echoing.echo(factor, shuffle_buffer_size=config.shuffle_buffer_size, seed=config.seed, stats=stats))
    return ds.batch(config.batch_size).prefetch(2)


def step_rate_alone(model: SleepStep, config: SleepLoopConfig) -> float:
    """The modelled step's rate under ``fit``, on batches that are already in memory."""
    batch = (tf.zeros([config.batch_size, FEATURES]), tf.zeros([config.batch_size], tf.int64))
    ds = tf.data.Dataset.from_tensors(batch).repeat()
    times = StepTimes()
    model.fit(ds, steps_per_epoch=config.warmup_steps + config.fixed_steps, epochs=1, verbose=0, callbacks=[times])
    return rate_between(times.times, config.warmup_steps)


class StopWhen(keras.callbacks.Callback):
    """Ends ``fit`` after the first step at which ``done()`` holds."""

    def __init__(self, done):
        super().__init__()
        self.done = done

    def on_train_batch_end(self, batch, logs=None):
        if self.done():
            self.model.stop_training = True


def auto_run(model, limiter, config, steps, schedule=None, until=None, **settings) -> tuple[echoing.AutoEcho, StepTimes]:
    """One ``fit`` of at most ``steps`` steps with AutoEcho (and ``settings``).

    ``schedule`` maps steps to new upstream rates; ``until(auto)`` ends the fit early once it holds,
    so a test that waits for a decision runs only as long as the law takes on this host.
    """
    factor = tf.Variable(1.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    settings.setdefault("elements_per_step", config.batch_size)  # The stage echoes examples.
    auto = echoing.AutoEcho(factor, max_factor=config.max_factor, stats=stats, verbose=0, **settings)
    times = StepTimes()
    callbacks = [auto, times] + ([RateSchedule(limiter, schedule)] if schedule else [])
    callbacks += [StopWhen(lambda: until(auto))] if until else []
    model.fit(paced_dataset(limiter, factor, config, stats), steps_per_epoch=steps, epochs=1, verbose=0, callbacks=callbacks)
    return auto, times
