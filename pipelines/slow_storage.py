"""Simulated slow storage: a stage that limits a dataset to a given rate, sleeping."""

from __future__ import annotations

import contextlib
import numbers
import threading
import time
from typing import Callable, Optional, Union

import numpy as np
import tensorflow as tf

# After the consumer has left the link idle for this long, the schedule restarts from
# "now" instead of letting elements through in a burst to catch up: a network link does
# not bank unused bandwidth. Shorter gaps are caught up on, which is what keeps the long-run
# rate exact despite sleep overshoot (time.sleep wakes a little late; by how much here:
# `python -m timeit -s "import time" "time.sleep(0.001)"` against 1 msec).
_MAX_CATCH_UP_SECONDS = 0.05


class RateLimiter:
    """A pacing clock, one link: each admission books ``amount / rate`` seconds of it.

    Pass one to :func:`throttle` instead of a number to change the rate while the dataset
    runs, as storage that gets slower or faster does; the next admission uses the new rate.
    Inside :meth:`unthrottled` the link admits at once and books nothing.

    >>> from pipelines.slow_storage import RateLimiter
    >>> link = RateLimiter(100.0)
    >>> link.rate = 50.0
    >>> link.rate
    50.0
    """

    def __init__(self, rate: float) -> None:
        self._rate = _check_rate("rate", rate)
        self._next = None
        self._open = False
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def unthrottled(self):
        """Admits everything at once inside the block; afterwards the pacing restarts from then.

        For a start-up that is not being measured, such as the fill of the shuffle buffers
        before the first batch: at a throttled rate it can take minutes.

        >>> import time
        >>> link = RateLimiter(10.0)
        >>> start = time.monotonic()
        >>> with link.unthrottled():
        ...     _ = [link.admit(1) for _ in range(50)]  # 5 s at 10 per second
        >>> time.monotonic() - start < 1
        True
        """
        with self._lock:
            self._open = True
        try:
            yield self
        finally:
            with self._lock:
                self._open, self._next = False, None

    @property
    def rate(self) -> float:
        """Elements (or bytes) per second."""
        return self._rate

    @rate.setter
    def rate(self, value: float) -> None:
        value = _check_rate("rate", value)
        with self._lock:
            self._rate = value

    def admit(self, amount) -> np.int64:
        with self._lock:
            if self._open:
                return np.int64(0)
            now = time.monotonic()
            if self._next is None or self._next < now - _MAX_CATCH_UP_SECONDS:
                self._next = now
            start = self._next
            self._next += float(amount) / self._rate
        delay = start - now
        if delay > 0:
            time.sleep(delay)  # Sleeps, so the CPU stays free for the training step.
        return np.int64(0)


def throttle(
    elements_per_second: Union[float, RateLimiter, None] = None,
    *,
    bytes_per_second: Union[float, RateLimiter, None] = None,
) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """Limits a dataset to a rate of elements or bytes per second, like slow storage.

    Place it at the read step (right after the source, before decoding) to model a disk or
    network link that upstream work waits on. It paces elements through one clock: each
    element books ``1 / elements_per_second`` (or ``its bytes / bytes_per_second``) seconds
    and waits with ``time.sleep`` until its slot, so it uses no CPU while waiting and does not
    steal cores from the training step. It runs single-threaded, like one link: one element
    is admitted at a time, whatever parallelism follows it. Sleep overshoot is caught up on
    later, so the long-run rate is exact; a consumer that leaves the link idle for more than
    50 ms does not get a burst afterwards. Bytes are the element's tensor bytes
    (string lengths for strings).

    Example:

    >>> import time, tensorflow as tf
    >>> from pipelines.slow_storage import throttle
    >>> ds = tf.data.Dataset.range(21).apply(throttle(200))
    >>> start = time.monotonic(); n = sum(1 for _ in ds); elapsed = time.monotonic() - start
    >>> n, 0.09 < elapsed < 0.5
    (21, True)

    Args:
      elements_per_second: the link's rate in elements per second, or a
        :class:`RateLimiter` whose rate may change while the dataset runs.
      bytes_per_second: the link's rate in bytes per second, or a :class:`RateLimiter`
        in bytes (exactly one of the two).

    Returns:
      A function for ``Dataset.apply``.
    """
    if (elements_per_second is None) == (bytes_per_second is None):
        raise ValueError(
            "throttle: give exactly one of elements_per_second and bytes_per_second, got "
            f"elements_per_second={elements_per_second!r}, bytes_per_second={bytes_per_second!r}"
        )
    if isinstance(elements_per_second, RateLimiter):
        limiter = elements_per_second
    elif elements_per_second is not None:
        limiter = RateLimiter(_check_rate("elements_per_second", elements_per_second))
    elif isinstance(bytes_per_second, RateLimiter):
        limiter = bytes_per_second
    else:
        limiter = RateLimiter(_check_rate("bytes_per_second", bytes_per_second))
    by_bytes = bytes_per_second is not None

    def admit(element):
        amount = _element_bytes(element) if by_bytes else tf.constant(1, tf.int64)
        token = tf.numpy_function(limiter.admit, [amount], tf.int64, stateful=True)
        with tf.control_dependencies([token]):
            return tf.nest.map_structure(tf.identity, element)

    def _apply_fn(dataset: tf.data.Dataset) -> tf.data.Dataset:
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(f"throttle(...) must be applied to a tf.data.Dataset, got {type(dataset).__name__}")
        # The 1-tuple zip hands `admit` the element with its structure intact; no
        # num_parallel_calls, so one element waits on the link at a time.
        return tf.data.Dataset.zip((dataset,)).map(admit)

    return _apply_fn


def _check_rate(name: str, rate) -> float:
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise TypeError(f"{name}: expected a positive number, got {type(rate).__name__}: {rate!r}")
    if not np.isfinite(rate) or rate <= 0:
        raise ValueError(f"{name}: expected a positive finite number, got {rate!r}")
    return float(rate)


def _element_bytes(element) -> tf.Tensor:
    """Bytes of an element's tensors: dtype size times elements, string lengths for strings."""
    total = tf.constant(0, tf.int64)
    for t in tf.nest.flatten(element, expand_composites=True):
        if t.dtype == tf.string:
            total += tf.reduce_sum(tf.cast(tf.strings.length(t), tf.int64))
        else:
            total += tf.size(t, out_type=tf.int64) * t.dtype.size
    return total


def sleep_per_record(elements_per_second: Optional[float] = None, *,
                     bytes_per_second: Optional[float] = None) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """Slow storage from graph ops only: each record sleeps ``1 / elements_per_second`` (or its bytes over ``bytes_per_second``).

    :func:`throttle` paces through a Python clock, which reaches no tf.data service
    worker outside the trainer's process. This stage is TensorFlow's own sleep dataset
    op, so it travels with the dataset's graph and runs on every worker: each reader is
    a link of that rate (``n`` workers read ``n`` times as fast). It sleeps a fixed time
    per record, on top of the reading itself, rather than keeping a schedule, so its rate
    is a little below the one given. Bytes are string lengths (the text pipeline's
    documents).

    >>> import time, tensorflow as tf
    >>> from pipelines.slow_storage import sleep_per_record
    >>> ds = tf.data.Dataset.range(20).apply(sleep_per_record(200))
    >>> start = time.monotonic(); n = sum(1 for _ in ds); elapsed = time.monotonic() - start
    >>> n, 0.09 < elapsed < 1.0
    (20, True)

    Raises:
      ValueError: unless exactly one rate is given, a positive finite number.
    """
    from tensorflow.python.data.experimental.ops import testing as tf_data_testing

    if (elements_per_second is None) == (bytes_per_second is None):
        raise ValueError(f"elements_per_second, bytes_per_second: give exactly one, got {elements_per_second!r} and "
                         f"{bytes_per_second!r}")
    name, rate = (("elements_per_second", elements_per_second) if elements_per_second is not None
                  else ("bytes_per_second", bytes_per_second))
    if isinstance(rate, RateLimiter):
        raise ValueError(f"{name}: expected a positive finite number (a RateLimiter cannot reach workers in other "
                         f"processes), got {rate!r}")
    _check_rate(name, rate)

    def _apply_fn(dataset: tf.data.Dataset) -> tf.data.Dataset:
        if elements_per_second is not None:
            return dataset.apply(tf_data_testing.sleep(int(round(1e6 / elements_per_second))))

        def one(record):
            microseconds = tf.cast(tf.strings.length(record), tf.float64) * (1e6 / bytes_per_second)
            return tf.data.Dataset.from_tensors(record).apply(tf_data_testing.sleep(tf.cast(microseconds, tf.int64)))

        return dataset.flat_map(one)

    return _apply_fn
