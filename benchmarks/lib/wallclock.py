"""Real training on this CPU: the replay with a real step, the read throttled for R *under load*.

The wallclock mode of :mod:`benchmarks.time_to_target` times a configuration as the replay
does (:func:`benchmarks.lib.replay.replay`: steps to target from the same seed's sample run,
the clock from the first batch, no evaluation pauses), but each step is a real training
step on this CPU (:func:`warmed_up_train_step`), so the pipeline and the step share the
two cores.

Sharing the cores makes the step slower than when timed alone
(:func:`echoing.measure_ratio`), so a throttle set from the step alone gives a lower R
during training than the nominal one. :func:`calibrate` measures R as
:class:`echoing.AutoEcho` does, while training runs: the step time at e=1 with the read
throttled, over the step time at a large e, where the read no longer limits and the
pipeline echoes at full load. It then scales the throttle by how far that R is from the
nominal one (R is inversely proportional to the read rate) and measures once more; the
record keeps every round. Each round's R rests on 30 steps at each factor, so it carries
their noise: the correction lands near the nominal R, not on it, and
:func:`benchmarks.lib.reporting.wallclock_table` also gives R as the runs met it (the
baseline's seconds per step over the largest fixed e's).

By this definition R is at least 1 (at e=1 a step takes no less than a step), so a
nominal R of 1 means "the read just keeps up". The large e must exceed the nominal R, or
the step would still wait for the read.

Every new pipeline fills its input shuffle buffer (10,000 examples) first, with the read
unthrottled (:func:`benchmarks.lib.lifecycles.fill_unthrottled`; at the throttled rate it would
take 10,000 / read rate seconds: at R=4, 10,000 x 4 / 128, about 310 step times).

Example: the correction alone (``tests/test_time_to_target.py`` runs the whole mode):

>>> next_read_rate(200.0, measured_ratio=3.0, ratio=4.0)  # R measured 3: read a quarter slower
150.0
"""

from __future__ import annotations

import time
from typing import Callable

import tensorflow as tf

import echoing
from benchmarks.lib.lifecycles import fill_unthrottled
from benchmarks.lib.run_records import Mode, RateRound, Rates
from benchmarks.lib.tasks import DataOptions, Task, fixed_run


def loaded_ratio(task: Task, model, *, read_rate: float, seed: int, max_factor: float, echo_shuffle: int, steps: int,
                 settle: int, data: DataOptions) -> RateRound:
    """R under load at one throttle: training steps at e=1, then at ``max_factor``, in one pipeline.

    The pipeline echoes at the task's default point through a variable factor, as under
    AutoEcho; ``settle`` untimed steps precede each timed stretch of ``steps`` (the first
    compiles and fills the buffers, the second drains batches echoed at the old factor).
    """
    factor = tf.Variable(1.0, dtype=tf.float64)
    config = fixed_run(task, data, task.default_point, 1.0, echo_shuffle, seed, mode=Mode.WALLCLOCK,
                       read_rate=read_rate).with_factor(factor).pipeline_config()
    iterator = iter(task.train_dataset(config))

    def seconds_per_step(count: int) -> float:
        start = time.perf_counter()
        for _ in range(count):
            model.train_on_batch(*next(iterator))
        return (time.perf_counter() - start) / count

    with fill_unthrottled(config):
        first = next(iterator)  # The buffers fill at full speed: a fill is no part of R.
    model.train_on_batch(*first)
    seconds_per_step(settle)
    at_one = seconds_per_step(steps)
    factor.assign(float(max_factor))
    seconds_per_step(settle)
    saturated = seconds_per_step(steps)
    return RateRound(read_rate=read_rate, step_seconds_at_e1=at_one, step_seconds_saturated=saturated,
                     measured_ratio=at_one / saturated)


def warmed_up_train_step(task: Task, seed: int, data: DataOptions) -> Callable:
    """A fresh model's ``train_on_batch``, compiled on one unthrottled batch so no timed step compiles.

    Only the step's cost matters here: the steps to target come from the sample run.
    """
    model = task.build_model()
    batch = next(iter(task.train_dataset(fixed_run(task, data, seed=seed, mode=Mode.WALLCLOCK).pipeline_config())))
    model.train_on_batch(*batch)
    return lambda batch: model.train_on_batch(*batch)


def next_read_rate(read_rate: float, measured_ratio: float, ratio: float) -> float:
    """The throttle that moves ``measured_ratio`` to ``ratio``: R scales as 1 / read rate."""
    return read_rate * measured_ratio / ratio


def calibrate(task: Task, *, ratio: float, seed: int, max_factor: float, echo_shuffle: int, steps: int = 30,
              settle: int = 20, rounds: int = 1, data: DataOptions) -> Rates:
    """The throttle for R under load: a first guess from the step alone, then ``rounds`` corrections.

    Returns a :class:`benchmarks.lib.run_records.Rates`: ``read_rate`` (the last round's throttle, examples per second),
    ``measured_ratio`` (R under load at it), ``step_seconds_alone`` (the first guess's step)
    and ``rounds`` (every measurement, in order).
    """
    if not max_factor > ratio:
        raise ValueError(f"max_factor: expected more than the nominal R {ratio:g}, got {max_factor!r}")
    if rounds < 0:
        raise ValueError(f"rounds: expected an int >= 0, got {rounds!r}")
    unthrottled = fixed_run(task, data, seed=seed, mode=Mode.WALLCLOCK).pipeline_config()
    # One model for every measurement: it compiles once, and only its step's cost matters.
    model = task.build_model()
    alone = echoing.measure_ratio(task.train_dataset(unthrottled), model, batches=10, warmup=3, repeats=3)
    read_rate = task.settings.batch_size / (ratio * alone.downstream_seconds)
    history = []
    for round_index in range(rounds + 1):
        if round_index:
            read_rate = next_read_rate(read_rate, history[-1].measured_ratio, ratio)
        history.append(loaded_ratio(task, model, read_rate=read_rate, seed=seed, max_factor=max_factor, echo_shuffle=echo_shuffle,
                                    steps=steps, settle=settle, data=data))
    return Rates(ratio=ratio, read_rate=read_rate, measured_ratio=history[-1].measured_ratio,
                 step_seconds_alone=alone.downstream_seconds, max_factor=max_factor, rounds=tuple(history))
