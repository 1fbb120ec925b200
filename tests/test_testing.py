"""echoing.testing: its helpers catch what they promise to catch, and pass what is right."""

import pytest
import tensorflow as tf

import echoing
from echoing import testing


def echoed(factor, *, shuffle=0, stats=True, start=0):
    stats_object = echoing.EchoStats() if stats else None
    ds = tf.data.Dataset.range(start, start + 12).apply(
        echoing.echo(factor, shuffle_buffer_size=shuffle, seed=0, stats=stats_object))
    return testing.Pipeline(ds.prefetch(2), stats=stats_object)


@pytest.mark.parametrize("factor, shuffle", [(2, 0), (2.5, 4), (3, 8)])
def test_a_correct_echoed_pipeline_restores_at_every_break_point_and_keeps_the_contract(factor, shuffle, tmp_path):
    outputs = testing.assert_restores_at_every_break_point(lambda: echoed(factor, shuffle=shuffle), range(0, 40, 3),
                                                           str(tmp_path))
    testing.assert_echo_contract(range(12), outputs, factor=factor)


def test_a_variable_factor_is_checkpointed_beside_the_iterator(tmp_path):
    def make():
        factor = tf.Variable(2.0, dtype=tf.float64)
        ds = tf.data.Dataset.range(10).apply(echoing.echo(factor))
        return testing.Pipeline(ds, trackables={"factor": factor})

    assert len(testing.assert_restores_at_every_break_point(make, [0, 5, 20], str(tmp_path))) == 20


def test_a_pipeline_that_does_not_resume_is_caught_at_its_break_point(tmp_path):
    builds = []

    def make():  # Each rebuild reads other data: a restart that lost its place.
        builds.append(None)
        values = [100 * len(builds) + i for i in range(12)]
        return testing.Pipeline(tf.data.Dataset.from_tensor_slices(values).apply(echoing.echo(2)))

    with pytest.raises(AssertionError, match="break point 4: element 0"):
        testing.assert_restores_at_every_break_point(make, [4], str(tmp_path))


def test_counts_that_differ_after_the_restore_are_caught(tmp_path):
    builds = []

    def make():  # Counters that leak in from elsewhere, and no echo stage to correct them.
        builds.append(None)
        stats = echoing.EchoStats()
        if len(builds) > 1:
            stats.fresh.assign(5)
        return testing.Pipeline(tf.data.Dataset.range(12), stats=stats)

    with pytest.raises(AssertionError, match=r"break point 3: EchoStats \(fresh, emitted\) \(5, 0\) after the restore"):
        testing.assert_restores_at_every_break_point(make, [3], str(tmp_path))


@pytest.mark.parametrize("outputs, message", [
    ([1, 1, 2], "element 2 came out 1 times"),
    ([1, 1, 2, 2, 3], "element 3 came out 1 times but was not an input"),
    ([1, 1, 1, 2, 2], "element 1 came out 3 times"),
])
def test_the_contract_names_the_element_that_breaks_it(outputs, message):
    with pytest.raises(AssertionError, match=message):
        testing.assert_echo_contract([1, 2], outputs, factor=2)


def test_the_contract_checks_the_mean_of_a_fractional_factor():
    inputs = list(range(400))
    testing.assert_echo_contract(inputs, inputs * 2 + inputs[:200], factor=2.5)
    with pytest.raises(AssertionError, match="copies per element on average"):
        testing.assert_echo_contract(inputs, inputs * 2 + inputs[:20], factor=2.5)  # Mostly 2 copies.


def test_the_contract_compares_structured_elements():
    inputs = [{"x": [1, 2], "y": 0}, {"x": [3, 4], "y": 1}]
    outputs = list(tf.data.Dataset.from_tensor_slices({"x": [[1, 2], [3, 4]], "y": [0, 1]}).apply(echoing.echo(2)))
    testing.assert_echo_contract(inputs, outputs, factor=2)


@pytest.mark.parametrize("call, message", [
    (lambda: testing.assert_echo_contract([1], [1], factor=0.5), "factor: expected a finite number >= 1, got 0.5"),
    (lambda: testing.throttled_range(rate=0), "rate: expected a finite number > 0, got 0"),
    (lambda: testing.throttled_range(rate=10, count=-1), "count: expected an int >= 0 or None, got -1"),
    (lambda: testing.assert_restores_at_every_break_point(lambda: echoed(2), [-1], "/tmp"), r"break_points \(each\): expected an int >= 0, got -1"),
])
def test_bad_arguments_name_themselves(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_make_must_return_a_pipeline(tmp_path):
    with pytest.raises(TypeError, match="make: expected it to return an echoing.testing.Pipeline, got tuple"):
        testing.assert_restores_at_every_break_point(lambda: (tf.data.Dataset.range(3), None), [1], str(tmp_path))


@pytest.mark.timing
def test_the_throttled_range_admits_about_its_rate():
    import time

    start = time.perf_counter()
    assert [int(x) for x in testing.throttled_range(rate=50.0, count=11)] == list(range(11))
    assert 0.15 < time.perf_counter() - start < 2.0  # 10 intervals of 20 ms, with wide margins.


def test_the_simulated_loop_is_at_hand():
    run = testing.simulate(testing.Scenario(ratio=2.0, steps=50), factor=2.0)
    assert len(run.step_ends) == 50
