"""The simulated slow storage admits elements at the requested rate, sleeping."""

import time

import numpy as np
import pytest
import tensorflow as tf

from pipelines.slow_storage import RateLimiter, throttle

# Rates measured against sleeps: wide margins, but a loaded machine can still move them.
pytestmark = pytest.mark.timing


def measured_rate(dataset, warmup=5):
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    count, start = 0, time.perf_counter()
    for _ in iterator:
        count += 1
    return count / (time.perf_counter() - start)


@pytest.mark.parametrize("rate", [200, 1000])
def test_element_rate_is_within_five_percent(rate):
    ds = tf.data.Dataset.range(rate // 2 + 5).apply(throttle(rate))
    assert measured_rate(ds) == pytest.approx(rate, rel=0.05)


def test_byte_rate_is_within_five_percent():
    # 1000-byte elements at 200 kB/s: 200 elements per second.
    ds = tf.data.Dataset.from_tensors(np.zeros(250, np.float32)).repeat(105).apply(throttle(bytes_per_second=200_000))
    assert measured_rate(ds) == pytest.approx(200, rel=0.05)


def test_throttle_waits_without_using_cpu():
    ds = tf.data.Dataset.range(31).apply(throttle(100))
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    assert sum(1 for _ in ds) == 31
    cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
    assert wall > 0.25
    assert cpu < 0.5 * wall


def test_throttle_keeps_structure_and_values():
    ds = tf.data.Dataset.range(3).map(lambda i: {"a": i, "b": (tf.strings.as_string(i),)})
    assert list(ds.apply(throttle(1000)).as_numpy_iterator()) == list(ds.as_numpy_iterator())


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({}, ValueError, "exactly one of"),
        ({"elements_per_second": 1, "bytes_per_second": 1}, ValueError, "exactly one of"),
        ({"elements_per_second": 0}, ValueError, "elements_per_second: .*got 0"),
        ({"elements_per_second": float("inf")}, ValueError, "elements_per_second: .*got inf"),
        ({"bytes_per_second": -5}, ValueError, "bytes_per_second: .*got -5"),
        ({"elements_per_second": "fast"}, TypeError, "elements_per_second: .*got str"),
    ],
)
def test_bad_rate_is_rejected(kwargs, error, message):
    with pytest.raises(error, match=message):
        throttle(**kwargs)


def test_an_unthrottled_link_admits_at_once_then_paces_again_from_then():
    link = RateLimiter(20.0)
    ds = tf.data.Dataset.range(100).apply(throttle(link))
    # No prefetch thread reading ahead while the link is open: each element is read when pulled.
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    iterator = iter(ds.with_options(options))
    start = time.perf_counter()
    with link.unthrottled():
        first = [int(next(iterator)) for _ in range(40)]  # 2 s at 20 per second.
    lifted = time.perf_counter() - start
    start = time.perf_counter()
    after = [int(next(iterator)) for _ in range(10)]
    paced = time.perf_counter() - start
    assert first + after == list(range(50))  # Nothing lost or repeated across the switch.
    assert lifted < 1.0
    assert 0.3 < paced < 3.0  # 10 more at 20 per second: 0.5 s.


def test_a_link_in_bytes_can_be_shared_and_lifted():
    link = RateLimiter(20_000.0)  # 1000-byte elements: 20 per second.
    ds = tf.data.Dataset.from_tensors(np.zeros(250, np.float32)).repeat(30).apply(throttle(bytes_per_second=link))
    start = time.perf_counter()
    with link.unthrottled():
        assert sum(1 for _ in ds) == 30
    assert time.perf_counter() - start < 1.0


def test_sleep_per_record_paces_by_bytes_with_graph_ops_and_refuses_bad_rates():
    import time

    from pipelines.slow_storage import RateLimiter, sleep_per_record

    ds = tf.data.Dataset.from_tensor_slices([b"x" * 1000, b"y" * 3000]).apply(sleep_per_record(bytes_per_second=10_000))
    list(ds)  # Builds the graph once.
    start = time.monotonic()
    assert [len(x) for x in ds.as_numpy_iterator()] == [1000, 3000]
    assert 0.35 <= time.monotonic() - start <= 2.0  # 4,000 bytes at 10,000 a second.
    with pytest.raises(ValueError, match="elements_per_second, bytes_per_second: give exactly one"):
        sleep_per_record()
    with pytest.raises(ValueError, match=r"elements_per_second: .*RateLimiter cannot reach workers"):
        sleep_per_record(RateLimiter(10.0))
