"""Measuring R, the ratio of upstream time per batch to downstream time per training step."""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable, Optional, Union

import tensorflow as tf

from echoing._checks import check_int

TrainStep = Union[Callable[[Any], Any], "keras.Model"]  # noqa: F821


@dataclasses.dataclass(frozen=True)
class RatioMeasurement:
    """Upstream and downstream times of one training set-up, and their ratio R.

    Attributes:
      upstream_seconds: median seconds per batch of the input pipeline, training idle.
      downstream_seconds: median seconds per training step on batches already in memory.
      upstream_repeats: the per-repeat upstream seconds per batch the median is taken over.
      downstream_repeats: the per-repeat downstream seconds per step.
    """

    upstream_seconds: float
    downstream_seconds: float
    upstream_repeats: tuple[float, ...]
    downstream_repeats: tuple[float, ...]

    @property
    def ratio(self) -> float:
        """R = upstream seconds per batch / downstream seconds per step."""
        return self.upstream_seconds / self.downstream_seconds

    @property
    def bottleneck(self) -> str:
        """Which half limits training, in words."""
        r = self.ratio
        if r > 1.1:
            return f"the input pipeline (upstream is {r:.1f}x slower than a training step; echo factors up to {r:.1f} are free)"
        if r < 1 / 1.1:
            return f"the training step (it is {1 / r:.1f}x slower than the input pipeline; echoing will not speed training up)"
        return "balanced (upstream and training step take about the same time; little to gain from echoing)"

    def __str__(self) -> str:
        return (
            f"R = {self.ratio:.2f}: upstream {self.upstream_seconds * 1e3:.1f} ms/batch, "
            f"downstream {self.downstream_seconds * 1e3:.1f} ms/step; bottleneck: {self.bottleneck}"
        )


def measure_ratio(
    dataset: tf.data.Dataset,
    train_step: TrainStep,
    *,
    batches: int = 20,
    warmup: int = 3,
    repeats: int = 5,
    restore_weights: bool = True,
) -> RatioMeasurement:
    """Measures the upstream and downstream times of a training set-up, and R.

    Upstream: ``batches`` batches drawn from ``dataset`` with no training running.
    Downstream: ``batches`` training steps on batches already in memory (the first
    ``min(batches, 8)`` batches, cycled), so that no input work is included. Each is warmed
    up with ``warmup`` batches or steps (tracing, buffers) and timed ``repeats`` times;
    medians are reported.

    Caveat: on a CPU-only machine the input pipeline and the training step share the same
    cores. Measured apart, each gets all of them; run together, each is slower, and R at
    training time can differ from this measurement. On an accelerator the two overlap
    without competing and R is what this returns. :class:`echoing.AutoEcho` (or
    :class:`echoing.EchoController` in a custom loop) measures R under load instead, from
    the step rate at e=1 and at a large e while training runs: where the two halves share
    a CPU, prefer its ``controller.ratio`` to this one.

    Example:

    >>> import time, tensorflow as tf
    >>> from echoing.measure import measure_ratio
    >>> slow = tf.data.Dataset.range(1000).map(
    ...     lambda x: tf.numpy_function(lambda v: (time.sleep(0.008), v)[1], [x], tf.int64))
    >>> m = measure_ratio(slow, lambda batch: time.sleep(0.001), batches=10, repeats=3)
    >>> m.bottleneck.startswith("the input pipeline")  # R is about 8 (the test suite checks it within 15%)
    True

    Args:
      dataset: the training dataset (or its upstream part), yielding batches; it must
        yield at least ``warmup + repeats * batches`` of them (``repeat()`` it if not).
      train_step: a compiled ``keras.Model`` (stepped with ``train_on_batch``) or a
        callable taking one batch.
      batches: batches or steps per timed repeat.
      warmup: untimed batches or steps before timing.
      repeats: timed repeats; the median is reported.
      restore_weights: for a Keras model, put its weights and optimizer state back after
        the measurement, so that measuring does not train the model.

    Returns:
      A :class:`RatioMeasurement`.
    """
    check_int("batches", batches, low=1)
    check_int("warmup", warmup, low=0)
    check_int("repeats", repeats, low=1)
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"dataset: expected a tf.data.Dataset, got {type(dataset).__name__}")
    step = _step_function(train_step)

    iterator = iter(dataset)
    needed = warmup + repeats * batches
    try:
        for _ in range(warmup):
            next(iterator)
        upstream = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(batches):
                next(iterator)
            upstream.append((time.perf_counter() - start) / batches)
    except StopIteration:
        raise ValueError(f"dataset: ran out of batches; it must yield at least {needed} (warmup + repeats * batches); repeat() it") from None

    in_memory = [batch for batch, _ in zip(dataset, range(min(batches, 8)))]
    snapshot = _snapshot(train_step) if restore_weights else None
    try:
        downstream = time_steps(step, in_memory, warmup=warmup, batches=batches, repeats=repeats)
    finally:
        if snapshot is not None:
            _restore(train_step, snapshot)
    return RatioMeasurement(
        statistics.median(upstream), statistics.median(downstream), tuple(upstream), tuple(downstream)
    )


def time_steps(step: Callable[[Any], Any], in_memory: list, *, warmup: int, batches: int, repeats: int,
               after_repeat: Optional[Callable[[], Any]] = None) -> list[float]:
    """Seconds per step of ``step`` on ``in_memory`` (cycled), per timed repeat, after ``warmup`` untimed steps.

    ``after_repeat`` runs inside each repeat's time, after its steps (a device's synchronize).
    Shared by :func:`measure_ratio` and :func:`echoing.torch.measure_ratio`.
    """
    for i in range(warmup):
        step(in_memory[i % len(in_memory)])
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(batches):
            step(in_memory[i % len(in_memory)])
        if after_repeat is not None:
            after_repeat()
        seconds.append((time.perf_counter() - start) / batches)
    return seconds


def _step_function(train_step):
    try:
        import keras
    except ImportError:  # pragma: no cover - keras ships with TensorFlow 2.16+
        keras = None
    if keras is not None and isinstance(train_step, keras.Model):
        if not train_step.compiled:
            raise ValueError(f"train_step: the Keras model {train_step.name!r} must be compiled first")

        def keras_step(batch):
            x, y = (batch[0], batch[1]) if isinstance(batch, (tuple, list)) else (batch, None)
            train_step.train_on_batch(x, y)

        return keras_step
    if not callable(train_step):
        raise TypeError(f"train_step: expected a compiled keras.Model or a callable, got {type(train_step).__name__}")
    return train_step


def _state_variables(train_step):
    variables = list(getattr(train_step, "variables", []))
    optimizer = getattr(train_step, "optimizer", None)
    if optimizer is not None:
        variables += list(optimizer.variables)
    return variables


def _snapshot(train_step):
    if not hasattr(train_step, "variables"):
        return None
    optimizer = getattr(train_step, "optimizer", None)
    if optimizer is not None and not getattr(optimizer, "built", True):
        # Build now, so that the optimizer state the timed steps create is restored too.
        optimizer.build(train_step.trainable_variables)
    return [(v, v.numpy().copy()) for v in _state_variables(train_step)]


def _restore(train_step, snapshot):
    for variable, value in snapshot:
        variable.assign(value)
    if hasattr(train_step, "reset_metrics"):
        train_step.reset_metrics()
