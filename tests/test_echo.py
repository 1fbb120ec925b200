"""Properties of echoing.echo: counts, adjacency, order, randomness, structures, cardinality."""

import collections
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import echoing


def as_list(dataset):
    return list(dataset.as_numpy_iterator())


def scalar_ids(dataset):
    return [int(x) for x in dataset.as_numpy_iterator()]


# Element structures, each built from an id so that copies can be traced back to their source.
STRUCTURES = {
    "scalar": lambda i: i,
    "image": lambda i: tf.fill([4, 4, 3], tf.cast(i, tf.float32)),
    "string": lambda i: tf.strings.as_string(i),
    "tuple": lambda i: (i, tf.strings.as_string(i)),
    "dict": lambda i: {"id": i, "x": tf.fill([2], tf.cast(i, tf.float16))},
    "nested": lambda i: {"a": (i, {"b": tf.fill([2, 2], tf.cast(i, tf.uint8))}), "c": tf.strings.as_string(i)},
    "varying_shape": lambda i: tf.fill([i % 5 + 1], i),
    "ragged": lambda i: tf.RaggedTensor.from_row_lengths(tf.fill([i % 3 + 1], i), [i % 3 + 1]),
    "sparse": lambda i: tf.sparse.SparseTensor([[0]], tf.reshape(i, [1]), [3]),
    "batch": lambda i: tf.fill([32, 8], tf.cast(i, tf.float32)),
}


def source_id(element):
    """The id an element of any STRUCTURES entry was built from (its first numeric value)."""
    if isinstance(element, tf.SparseTensor):
        element = element.values
    for leaf in tf.nest.flatten(element, expand_composites=True):
        value = np.asarray(leaf)
        if value.dtype.kind in "iuf" and value.size:
            return int(value.flat[0])
        if value.dtype.kind in "OS":  # A string built with tf.strings.as_string(id).
            return int(value.flat[0])
    raise AssertionError(f"no id in {element!r}")


def structured(name, n=20):
    return tf.data.Dataset.range(n).map(STRUCTURES[name])


@pytest.mark.parametrize("name", sorted(STRUCTURES))
@pytest.mark.parametrize("factor", [1, 2, 3])
def test_integer_factor_emits_adjacent_copies_in_input_order(name, factor):
    ds = structured(name).apply(echoing.echo(factor))
    assert [source_id(x) for x in ds] == [i for i in range(20) for _ in range(factor)]


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_echo_keeps_element_spec(name):
    ds = structured(name)
    echoed = ds.apply(echoing.echo(2.5, seed=1))
    assert echoed.element_spec == ds.element_spec


def test_copies_of_structured_elements_are_equal_to_the_original():
    ds = structured("nested", 5).apply(echoing.echo(2))
    out = as_list(ds)
    for first, second in zip(out[::2], out[1::2]):
        tf.nest.map_structure(np.testing.assert_array_equal, first, second)


# One source per path of the echo stage: micro-batched (fixed shape) and one at a time.
ID_SOURCES = {
    "fixed_shape": lambda n: tf.data.Dataset.range(n),
    "varying_shape": lambda n: tf.data.Dataset.range(n).map(lambda i: tf.fill([i % 3 + 1], i)),
}


def ids_of(dataset):
    return [int(np.asarray(x).flat[0]) for x in dataset.as_numpy_iterator()]


@pytest.mark.parametrize("factor", [1.25, 1.5, 2.7, 3.9])
@pytest.mark.parametrize("path", sorted(ID_SOURCES))
def test_fractional_factor_emits_expected_mean_count(factor, path):
    n = 2000
    counted = collections.Counter(ids_of(ID_SOURCES[path](n).apply(echoing.echo(factor, seed=3))))
    assert sorted(counted) == list(range(n))
    assert set(counted.values()) <= {math.floor(factor), math.floor(factor) + 1}
    # Extra copies are Binomial(n, p): 5 standard deviations fails ~1e-6 of the time.
    p = factor - math.floor(factor)
    extra = sum(counted.values()) - n * math.floor(factor)
    assert abs(extra - n * p) <= 5 * math.sqrt(n * p * (1 - p))


def test_fractional_factor_keeps_copies_adjacent_and_order_without_buffer():
    ids = scalar_ids(tf.data.Dataset.range(500).apply(echoing.echo(1.5, seed=0)))
    assert ids == sorted(ids)


@pytest.mark.parametrize("path", sorted(ID_SOURCES))
def test_seed_reproduces_and_different_seeds_differ(path):
    def run(seed):
        return ids_of(ID_SOURCES[path](300).apply(echoing.echo(2.5, shuffle_buffer_size=50, seed=seed)))

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_seeded_output_reproduces_in_another_process():
    code = textwrap.dedent(
        """
        import tensorflow as tf, echoing
        tf.random.set_seed(11)
        ds = tf.data.Dataset.range(200).apply(echoing.echo(1.7, shuffle_buffer_size=30, seed=5))
        print([int(x) for x in ds])
        """
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # tf.data combines an op seed with the global one, which other tests (and Keras's
    # set_random_seed) set: both processes set the same global seed.
    tf.random.set_seed(11)
    here = scalar_ids(tf.data.Dataset.range(200).apply(echoing.echo(1.7, shuffle_buffer_size=30, seed=5)))
    assert other.stdout.strip().splitlines()[-1] == str(here)


def test_repeated_input_gets_fresh_draws_each_epoch():
    n = 400
    ids = scalar_ids(tf.data.Dataset.range(n).repeat(2).apply(echoing.echo(1.5, seed=2)))
    counts_by_epoch = [collections.Counter(), collections.Counter()]
    epoch = 0
    for previous, current in zip([-1] + ids, ids):
        if current < previous:
            epoch = 1
        counts_by_epoch[epoch][current] += 1
    assert [counts_by_epoch[0][i] for i in range(n)] != [counts_by_epoch[1][i] for i in range(n)]


def test_iterating_again_gets_fresh_draws():
    ds = tf.data.Dataset.range(400).apply(echoing.echo(1.5, seed=2))
    assert scalar_ids(ds) != scalar_ids(ds)


@pytest.mark.parametrize("factor", [2, 2.5])
def test_shuffle_buffer_spreads_copies_and_loses_nothing(factor):
    stats = echoing.EchoStats()
    ds = tf.data.Dataset.range(1000).apply(echoing.echo(factor, shuffle_buffer_size=200, seed=4, stats=stats))
    ids = scalar_ids(ds)
    adjacent = sum(a == b for a, b in zip(ids, ids[1:]))
    assert adjacent < len(ids) / 20
    assert collections.Counter(ids) == collections.Counter(scalar_ids(tf.data.Dataset.range(1000).apply(echoing.echo(factor, seed=4))))
    assert len(ids) == int(stats.emitted)


def test_shuffle_buffer_reshuffles_each_iteration_reproducibly():
    def two_epochs(seed):
        ds = tf.data.Dataset.range(100).apply(echoing.echo(2, shuffle_buffer_size=50, seed=seed))
        return scalar_ids(ds), scalar_ids(ds)

    first, second = two_epochs(9)
    assert first != second
    assert two_epochs(9) == (first, second)


@pytest.mark.parametrize("factor, expected", [(1, 10), (2, 20), (3.0, 30), (5, 50)])
def test_integer_factor_on_known_cardinality_is_known(factor, expected):
    ds = tf.data.Dataset.range(10).apply(echoing.echo(factor, stats=echoing.EchoStats()))
    assert int(ds.cardinality()) == expected
    assert len(as_list(ds)) == expected


@pytest.mark.parametrize("name", ["image", "varying_shape", "batch"])
def test_cardinality_known_for_both_paths(name):
    assert int(structured(name, 7).apply(echoing.echo(3, shuffle_buffer_size=4)).cardinality()) == 21


def test_infinite_stays_infinite_and_unknown_stays_unknown():
    infinite = tf.data.Dataset.range(3).repeat()
    assert infinite.apply(echoing.echo(2)).cardinality() == tf.data.INFINITE_CARDINALITY
    unknown = tf.data.Dataset.range(10).filter(lambda x: x > 3)
    assert unknown.apply(echoing.echo(2)).cardinality() == tf.data.UNKNOWN_CARDINALITY
    assert tf.data.Dataset.range(10).apply(echoing.echo(1.5)).cardinality() == tf.data.UNKNOWN_CARDINALITY


def test_factor_one_without_buffer_or_stats_returns_the_dataset_itself():
    ds = tf.data.Dataset.range(5)
    assert ds.apply(echoing.echo(1)) is ds


@pytest.mark.parametrize("name", ["scalar", "string", "varying_shape", "batch"])
@pytest.mark.parametrize("factor", [1, 2, 1.5])
def test_stats_count_fresh_and_emitted_exactly(name, factor):
    stats = echoing.EchoStats()
    n = 150  # Not a multiple of the micro-batch, so the remainder is checked too.
    out = as_list(structured(name, n).apply(echoing.echo(factor, shuffle_buffer_size=16, seed=0, stats=stats)))
    assert int(stats.fresh) == n
    assert int(stats.emitted) == len(out)
    assert stats.factor == pytest.approx(len(out) / n)


def test_stats_keep_counting_over_epochs_and_reset():
    stats = echoing.EchoStats()
    ds = tf.data.Dataset.range(10).apply(echoing.echo(2, stats=stats))
    as_list(ds)
    as_list(ds)
    assert (int(stats.fresh), int(stats.emitted)) == (20, 40)
    stats.reset()
    assert (int(stats.fresh), int(stats.emitted)) == (0, 0)
    assert math.isnan(stats.factor)


def test_one_stats_serves_one_echo_stage():
    stats = echoing.EchoStats()
    echoing.echo(2, stats=stats)
    with pytest.raises(ValueError, match="stats: .*one EchoStats serves one echo stage"):
        echoing.echo(3, stats=stats)


def test_variable_factor_change_is_honoured_while_running():
    factor = tf.Variable(2.0)
    stats = echoing.EchoStats()
    iterator = iter(tf.data.Dataset.range(1000).apply(echoing.echo(factor, stats=stats)))
    first = [int(next(iterator)) for _ in range(10)]
    factor.assign(3.0)
    rest = [int(x) for x in iterator]
    counted = collections.Counter(first + rest)
    assert first == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # Elements already pulled into the stage (at most one micro-batch of 64) keep factor 2.
    assert all(counted[i] == 2 for i in range(5))
    assert all(counted[i] == 3 for i in range(64, 1000))
    assert int(stats.emitted) == len(first) + len(rest)


def test_variable_factor_can_be_fractional():
    factor = tf.Variable(1.5, dtype=tf.float64)
    ids = scalar_ids(tf.data.Dataset.range(2000).apply(echoing.echo(factor, seed=1)))
    assert abs(len(ids) - 3000) <= 5 * math.sqrt(2000 * 0.25)


@pytest.mark.parametrize("bad", [0.5, float("nan"), float("inf")])
def test_variable_factor_invalid_at_run_time_stops_with_a_clear_error(bad):
    factor = tf.Variable(2.0)
    ds = tf.data.Dataset.range(10).apply(echoing.echo(factor))
    factor.assign(bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must hold a finite value >= 1"):
        as_list(ds)


@pytest.mark.parametrize(
    "factor, error, message",
    [
        (0, ValueError, r"factor: .*>= 1, got 0.0"),
        (-2, ValueError, r"factor: .*got -2.0"),
        (0.99, ValueError, r"factor: .*got 0.99"),
        (float("nan"), ValueError, r"factor: .*got nan"),
        (float("inf"), ValueError, r"factor: .*got inf"),
        ("2", TypeError, r"factor: .*got str: '2'"),
        (True, TypeError, r"factor: .*got bool: True"),
        (None, TypeError, r"factor: .*got NoneType"),
        (tf.constant(2.0), TypeError, r"factor: .*EagerTensor"),
    ],
)
def test_bad_factor_is_rejected_naming_the_value(factor, error, message):
    with pytest.raises(error, match=message):
        echoing.echo(factor)


def test_integer_variable_factor_is_rejected():
    with pytest.raises(TypeError, match="factor: .*floating dtype, got int32"):
        echoing.echo(tf.Variable(2))


def test_variable_factor_below_one_at_construction_is_rejected():
    with pytest.raises(ValueError, match=r"factor \(current value of the tf.Variable\): .*got 0.5"):
        echoing.echo(tf.Variable(0.5))


@pytest.mark.parametrize(
    "size, error, message",
    [(-1, ValueError, r"shuffle_buffer_size: .*got -1"), (2.5, TypeError, r"shuffle_buffer_size: .*got float: 2.5"), (True, TypeError, "shuffle_buffer_size")],
)
def test_bad_shuffle_buffer_size_is_rejected(size, error, message):
    with pytest.raises(error, match=message):
        echoing.echo(2, shuffle_buffer_size=size)


@pytest.mark.parametrize("seed, error", [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("7", TypeError)])
def test_bad_seed_is_rejected(seed, error):
    with pytest.raises(error, match="seed: "):
        echoing.echo(2, seed=seed)


def test_bad_stats_is_rejected():
    with pytest.raises(TypeError, match="stats: expected an echoing.EchoStats"):
        echoing.echo(2, stats={})


def test_applying_to_a_non_dataset_is_rejected():
    with pytest.raises(TypeError, match="must be applied to a tf.data.Dataset.*got list"):
        echoing.echo(2)([1, 2, 3])


def test_keras_fit_sees_every_echoed_batch_in_both_epochs():
    import keras

    x = np.random.default_rng(0).random((48, 4), dtype=np.float32)
    y = (x.sum(axis=1) > 2).astype(np.float32)
    stats = echoing.EchoStats()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).apply(echoing.echo(2, stats=stats))  # 6 -> 12 batches

    class CountBatches(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.per_epoch = getattr(self, "per_epoch", []) + [0]

        def on_train_batch_end(self, batch, logs=None):
            self.per_epoch[-1] += 1

    counter = CountBatches()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    model.fit(ds, epochs=2, callbacks=[counter], verbose=0, shuffle=False)
    assert counter.per_epoch == [12, 12]
    assert (int(stats.fresh), int(stats.emitted)) == (12, 24)


def test_a_cardinality_the_factor_would_overflow_is_left_unknown_not_asserted():
    huge = tf.data.Dataset.range(2**62)
    echoed = huge.apply(echoing.echo(2))
    assert int(echoed.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert [int(x) for x in echoed.take(4)] == [0, 0, 1, 1]
    # tf.data's own count overflows to 0 here; echoing must not assert that.
    unbatched = huge.map(lambda i: tf.fill([64], i)).unbatch()
    assert [int(x) for x in unbatched.apply(echoing.echo(2)).take(3)] == [0, 0, 0]
