"""Helpers for testing pipelines that echo, for this project's tests and for yours.

* :func:`assert_restores_at_every_break_point`: the checkpoint round trip of TensorFlow's
  ``CheckpointTestBase`` and grain's ``assert_equal_output_after_checkpoint``, at every
  break point you name: take ``k`` elements, save, rebuild everything as a restarted
  process would, restore, take the rest; the whole must equal an uninterrupted run, and
  the :class:`echoing.EchoStats` counts too.
* :func:`assert_echo_contract`: every input element comes out ``floor(e)`` or
  ``ceil(e)`` times (exactly ``e`` times for an integer factor), and nothing else comes
  out, in any order (an echo shuffle buffer reorders).
* :func:`throttled_range`: a source that admits ``rate`` elements per second, sleeping:
  slow storage for a test of an input-bound loop.
* :func:`echoing.simulation.simulate`: an input-bound training loop without TensorFlow,
  for testing a controller (re-exported here as :func:`simulate` with its ``Scenario``).

Example, a pipeline with a fractional factor, an echo shuffle buffer and counters:

>>> import tempfile, tensorflow as tf, echoing
>>> from echoing import testing
>>> def make():
...     stats = echoing.EchoStats()
...     ds = tf.data.Dataset.range(20).apply(echoing.echo(2.5, shuffle_buffer_size=8, seed=1, stats=stats))
...     return testing.Pipeline(ds.prefetch(2), stats=stats)
>>> outputs = testing.assert_restores_at_every_break_point(make, [0, 7, 31], tempfile.mkdtemp())
>>> testing.assert_echo_contract(range(20), outputs, factor=2.5)
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import os
import threading
import time
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import tensorflow as tf

from echoing._checks import check_int, check_number
from echoing.simulation import Scenario, simulate  # noqa: F401 (re-exported)
from echoing.stats import EchoStats


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """What :func:`assert_restores_at_every_break_point` rebuilds at every break point.

    Attributes:
      dataset: the pipeline under test.
      stats: its :class:`echoing.EchoStats`, if any; checked and checkpointed.
      trackables: anything else the job checkpoints beside the iterator (a
        ``tf.Variable`` factor, the model), by name.
    """

    dataset: tf.data.Dataset
    stats: Optional[EchoStats] = None
    trackables: dict = dataclasses.field(default_factory=dict)


def assert_restores_at_every_break_point(make: Callable[[], Pipeline], break_points: Iterable[int],
                                         directory: str) -> list:
    """Asserts that ``make()``'s pipeline resumes exactly from a checkpoint after each break point.

    Args:
      make: builds the pipeline afresh (a new dataset, new variables, new ``EchoStats``), as
        a restarted process would.
      break_points: numbers of elements taken before saving; those beyond the end are skipped.
      directory: where the checkpoints go.

    Returns:
      the uninterrupted run's elements (as nested lists), e.g. for
      :func:`assert_echo_contract`.

    Raises:
      AssertionError: naming the break point where the elements or the counts differ.
    """
    pipeline = _checked(make())
    expected = _values(iter(pipeline.dataset))
    counts = _counts(pipeline.stats)
    for k in break_points:
        check_int("break_points (each)", k, low=0)
        if k > len(expected):
            continue
        pipeline = _checked(make())
        iterator = iter(pipeline.dataset)
        head = _values(iterator, k)
        path = tf.train.Checkpoint(**_trackables(iterator, pipeline)).write(os.path.join(directory, f"ckpt-{k}"))
        pipeline = _checked(make())  # A restarted process.
        iterator = iter(pipeline.dataset)
        tf.train.Checkpoint(**_trackables(iterator, pipeline)).read(path).assert_consumed()
        tail = _values(iterator)
        if head + tail != expected:
            first = next(i for i, (a, b) in enumerate(itertools.zip_longest(head + tail, expected)) if a != b)
            raise AssertionError(f"break point {k}: element {first} after the restore is "
                                 f"{(head + tail)[first:first + 1]}, uninterrupted {expected[first:first + 1]}")
        if _counts(pipeline.stats) != counts:
            raise AssertionError(f"break point {k}: EchoStats (fresh, emitted) {_counts(pipeline.stats)} after the "
                                 f"restore, {counts} uninterrupted")
    return expected


def assert_echo_contract(inputs: Iterable, outputs: Sequence, factor: float) -> None:
    """Asserts that ``outputs`` are the ``inputs`` echoed at ``factor``, in any order.

    Each input element must come out ``floor(factor)`` or ``ceil(factor)`` times
    (``factor`` times when it is an integer), nothing else may come out, and for a
    fractional factor the mean number of copies must be within 4 standard errors of it.

    >>> assert_echo_contract([1, 2], [2, 1, 1, 2], factor=2)
    >>> assert_echo_contract([1, 2], [1, 1, 2], factor=2)
    Traceback (most recent call last):
    AssertionError: element 2 came out 1 times; at factor 2 each comes out 2 times
    """
    check_number("factor", factor, low=1)
    counts = collections.Counter(_key(x) for x in outputs)
    inputs = [_key(x) for x in inputs]
    low, high = math.floor(factor), math.ceil(factor)
    allowed = f"{low}" if low == high else f"{low} or {high}"
    for element in inputs:
        copies = counts.pop(element, 0)
        if not low <= copies <= high:
            raise AssertionError(f"element {_show(element)} came out {copies} times; at factor {factor:g} each comes out "
                                 f"{allowed} times")
    if counts:
        stray = next(iter(counts))
        raise AssertionError(f"element {_show(stray)} came out {counts[stray]} times but was not an input")
    if low != high and inputs:
        mean = len(outputs) / len(inputs)
        spread = 4 * math.sqrt((factor - low) * (high - factor) / len(inputs))
        if abs(mean - factor) > spread:
            raise AssertionError(f"{mean:.3f} copies per element on average, factor {factor:g} (4 standard errors: "
                                 f"{spread:.3f})")


def throttled_range(rate: float, count: Optional[int] = None) -> tf.data.Dataset:
    """``Dataset.range(count)`` admitting ``rate`` elements per second: slow storage for a test.

    The pacing sleeps in a ``tf.numpy_function``, which releases the CPU and, being a
    Python function, blocks iterator checkpoints (keep it out of round-trip tests).

    >>> import time
    >>> start = time.perf_counter()
    >>> [int(x) for x in throttled_range(rate=100.0, count=5)]
    [0, 1, 2, 3, 4]
    >>> time.perf_counter() - start > 0.03  # 5 elements at 100 per second, the first at once
    True
    """
    check_number("rate", rate, low=0, low_open=True)  # Elements per second.
    check_int("count", count, low=0, none_ok=True)
    pace = _Pace(float(rate))
    ds = tf.data.Dataset.range(count) if count is not None else tf.data.Dataset.counter()
    return ds.map(lambda i: i + tf.ensure_shape(tf.numpy_function(pace.admit, [], tf.int64, stateful=True), []))


class _Pace:
    """Admits one element every ``1 / rate`` seconds, sleeping; thread-safe."""

    def __init__(self, rate: float):
        self._interval = 1.0 / rate
        self._next = None
        self._lock = threading.Lock()

    def admit(self) -> np.int64:
        with self._lock:
            now = time.perf_counter()
            self._next = max(now, self._next if self._next is not None else now)
            wait = self._next - now
            self._next += self._interval
        if wait > 0:
            time.sleep(wait)
        return np.int64(0)


def _checked(pipeline) -> Pipeline:
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"make: expected it to return an echoing.testing.Pipeline, got {type(pipeline).__name__}")
    return pipeline


def _trackables(iterator, pipeline: Pipeline) -> dict:
    found = {"iterator": iterator, **pipeline.trackables}
    if pipeline.stats is not None:
        found["stats"] = pipeline.stats
    return found


def _values(iterator, count=None) -> list:
    taken = itertools.islice(iterator, count) if count is not None else iterator
    return [tf.nest.map_structure(lambda t: np.asarray(t).tolist(), x) for x in taken]


def _counts(stats: Optional[EchoStats]):
    return None if stats is None else (int(stats.fresh), int(stats.emitted))


def _key(element):
    """A hashable stand-in for an element: nested lists and arrays become tuples."""
    element = tf.nest.map_structure(lambda t: np.asarray(t).tolist(), element)

    def freeze(x):
        if isinstance(x, (list, tuple)):
            return tuple(freeze(y) for y in x)
        if isinstance(x, dict):
            return tuple(sorted((k, freeze(v)) for k, v in x.items()))
        return x

    return freeze(element)


def _show(key) -> str:
    return repr(key)[:80]
