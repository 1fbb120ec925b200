"""Echoed iterators and EchoStats in tf.train.Checkpoint: a round trip at many break points.

The round trips use the helper users get, ``echoing.testing.assert_restores_at_every_break_point``
(after TensorFlow's CheckpointTestBase and grain's "restore at every step"): run once
uninterrupted; then, for each break point, take that many elements, save, build
everything afresh (as a restarted process would), restore, and take the rest. The elements
and the final counts must equal the uninterrupted run's.
"""

import itertools

import numpy as np
import pytest
import tensorflow as tf

import echoing
from echoing import testing

N = 40  # Input elements; with echoing, 40-120 outputs.


def element_of(shape):
    if shape == "fixed":
        return lambda i: tf.fill([3], tf.cast(i, tf.float32))  # Micro-batched path.
    return lambda i: tf.fill([i % 4 + 1], tf.cast(i, tf.float32))  # One element at a time.


def build(factor_kind, with_stats, shuffle, shape):
    """A fresh pipeline, with its factor variable (if any) and its EchoStats (if any), for echoing.testing."""
    factor = {"int": 3, "fraction": 2.5, "variable": tf.Variable(1.5, dtype=tf.float64)}[factor_kind]
    stats = echoing.EchoStats() if with_stats else None
    ds = tf.data.Dataset.range(N).map(element_of(shape))
    ds = ds.apply(echoing.echo(factor, shuffle_buffer_size=16 if shuffle else 0, seed=3, stats=stats))
    return testing.Pipeline(ds.prefetch(2), stats, {"factor": factor} if isinstance(factor, tf.Variable) else {})


def values(iterator, count=None):
    taken = itertools.islice(iterator, count) if count is not None else iterator
    return [np.asarray(x).tolist() for x in taken]


CONFIGURATIONS = list(itertools.product(["int", "fraction", "variable"], [False, True], [False, True], ["fixed", "varying"]))
IDS = [f"{f}-{'stats' if s else 'no_stats'}-{'shuffle' if b else 'no_shuffle'}-{shape}" for f, s, b, shape in CONFIGURATIONS]


@pytest.mark.parametrize("factor_kind, with_stats, shuffle, shape", CONFIGURATIONS, ids=IDS)
def test_echoed_iterator_restores_exactly_at_break_points(factor_kind, with_stats, shuffle, shape, tmp_path):
    testing.assert_restores_at_every_break_point(lambda: build(factor_kind, with_stats, shuffle, shape), [0, 1, 33, 99],
                                                 str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("factor_kind, with_stats, shuffle, shape", CONFIGURATIONS, ids=IDS)
def test_echoed_iterator_restores_exactly_at_every_step(factor_kind, with_stats, shuffle, shape, tmp_path):
    testing.assert_restores_at_every_break_point(lambda: build(factor_kind, with_stats, shuffle, shape), range(0, 121),
                                                 str(tmp_path))


def test_counts_are_exact_even_when_the_stats_were_saved_a_moment_apart(tmp_path):
    # A prefetch thread may pull between saving the counters and saving the iterator. The
    # count in the iterator's state wins at the next element the stage pulls: here the
    # saved counters are made wrong on purpose, and the restored run ends exact.
    def make():
        stats = echoing.EchoStats()
        return tf.data.Dataset.range(500).apply(echoing.echo(3, stats=stats)).prefetch(2), stats

    ds, stats = make()
    list(ds)
    expected = (int(stats.fresh), int(stats.emitted))
    ds, stats = make()
    iterator = iter(ds)
    values(iterator, 10)
    stats.fresh.assign(999)
    path = tf.train.Checkpoint(iterator=iterator, stats=stats).write(str(tmp_path / "ckpt"))
    ds, stats = make()
    iterator = iter(ds)
    tf.train.Checkpoint(iterator=iterator, stats=stats).read(path)
    values(iterator)
    assert (int(stats.fresh), int(stats.emitted)) == expected


def test_echo_stats_saves_beside_a_model_and_counting_continues_after_a_restore(tmp_path):
    stats = echoing.EchoStats()
    list(tf.data.Dataset.range(10).apply(echoing.echo(2, stats=stats)))
    model_weight = tf.Variable(1.0)
    path = tf.train.Checkpoint(stats=stats, weight=model_weight).write(str(tmp_path / "ckpt"))

    restored = echoing.EchoStats()
    tf.train.Checkpoint(stats=restored, weight=tf.Variable(0.0)).read(path).assert_consumed()
    assert (int(restored.fresh), int(restored.emitted)) == (10, 20)
    # No iterator was saved: a new one continues from the restored counts.
    list(tf.data.Dataset.range(5).apply(echoing.echo(2, stats=restored)))
    assert (int(restored.fresh), int(restored.emitted)) == (15, 30)


def test_reset_while_iterating_counts_from_zero():
    stats = echoing.EchoStats()
    iterator = iter(tf.data.Dataset.range(8).apply(echoing.echo(2, stats=stats)))
    values(iterator, 1)  # The first element pulls all 8 inputs (one micro-batch).
    assert int(stats.fresh) == 8
    stats.reset()
    values(iterator)
    assert int(stats.fresh) == 0 and int(stats.emitted) == 0
    list(tf.data.Dataset.range(3).apply(echoing.echo(1, stats=echoing.EchoStats())))


def test_a_stateful_op_of_the_users_upstream_still_blocks_saving():
    # Not hidden: TensorFlow refuses, as it would without echoing.
    noisy = tf.data.Dataset.range(10).map(lambda i: tf.cast(i, tf.float32) + tf.random.uniform([]))
    iterator = iter(noisy.apply(echoing.echo(2, stats=echoing.EchoStats())))
    next(iterator)
    with pytest.raises(tf.errors.FailedPreconditionError, match="is stateful"):
        tf.train.Checkpoint(iterator=iterator).write("/tmp/never-written")
    # TensorFlow names the first stateful op it meets, which may be the echo stage's own;
    # stateful_op_in on the input names the user's.
    assert "RandomUniform" in echoing.external_state.stateful_op_in(noisy)


def test_a_policy_the_user_chose_is_kept():
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.WARN
    ds = tf.data.Dataset.range(4).with_options(options).apply(echoing.echo(2, stats=echoing.EchoStats()))
    assert ds.options().experimental_external_state_policy == tf.data.experimental.ExternalStatePolicy.WARN


def test_without_stats_or_a_variable_echo_sets_no_policy():
    ds = tf.data.Dataset.range(4).apply(echoing.echo(2.5, seed=0))
    assert ds.options().experimental_external_state_policy is None


def test_the_policy_covers_steps_after_echo_as_documented(tmp_path):
    # The documented limit: the pipeline-wide IGNORE also covers a stateful op placed after
    # the echo stage, whose state the checkpoint then does not hold. Keep those steps stateless.
    def pipeline():
        ds = tf.data.Dataset.range(4).apply(echoing.echo(2, stats=echoing.EchoStats()))
        return ds.map(lambda i: tf.cast(i, tf.float32) + tf.random.uniform([]))

    iterator = iter(pipeline())
    next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "ckpt"))  # Saved; the op's state is not.
    expected = float(next(iterator))
    restored = iter(pipeline())
    tf.train.Checkpoint(iterator=restored).read(path).assert_consumed()
    resumed = float(next(restored))
    assert int(resumed) == int(expected) == 0  # The echo stage resumes at the second copy of 0.


@pytest.mark.parametrize("bad", [0.5, float("nan")])
def test_a_bad_runtime_factor_stops_iteration_and_the_counts_match_what_arrived(bad):
    factor = tf.Variable(2.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    # Varying shapes: one element at a time; no injected prefetch, so that the stage pulls
    # only when the consumer asks and the counts equal what arrived.
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    ds = tf.data.Dataset.range(20).map(element_of("varying")).apply(echoing.echo(factor, stats=stats)).with_options(options)
    iterator = iter(ds)
    arrived = values(iterator, 10)
    factor.assign(bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must hold a finite value >= 1"):
        arrived += values(iterator)
    # The element drawn at the bad factor is counted nowhere.
    assert len(arrived) == 10 and int(stats.emitted) == 10 and int(stats.fresh) == 5


@pytest.mark.slow
def test_soak_ten_million_elements_with_a_thousand_random_factor_changes():
    import resource

    rng = np.random.default_rng(0)
    factor = tf.Variable(2.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    total = 10**7
    ds = tf.data.Dataset.range(total).apply(echoing.echo(factor, shuffle_buffer_size=1024, seed=0, stats=stats))
    ds = ds.batch(1000).prefetch(2)
    changes, emitted, warm_kib = 0, 0, None
    for index, batch in enumerate(ds):  # About 20,000 batches at a mean factor of 2.
        emitted += int(batch.shape[0])
        if index % 20 == 0:
            factor.assign(float(rng.uniform(1.0, 3.0)))
            changes += 1
        if index == 500:
            warm_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Peak RSS in KiB on Linux.
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"soak: {emitted:,} emitted, {changes} factor changes, peak RSS grew {(peak_kib - warm_kib) / 1024:.1f} MiB after warm-up")
    assert changes >= 900
    assert int(stats.fresh) == total and int(stats.emitted) == emitted
    assert (peak_kib - warm_kib) / 1024 < 50, f"resident memory grew {(peak_kib - warm_kib) / 1024:.0f} MiB after warm-up"
