"""measure_ratio recovers a known R and leaves a Keras model as it was."""

import time

import numpy as np
import pytest
import tensorflow as tf

from echoing.measure import RatioMeasurement, measure_ratio
from pipelines.slow_storage import throttle

# Rates measured against sleeps: wide margins, but a loaded machine can still move them.
pytestmark = pytest.mark.timing


@pytest.mark.parametrize("imposed_r", [1.0, 2.0, 4.0])
def test_recovers_a_throttle_imposed_ratio_within_15_percent(imposed_r):
    # 20 ms, not less: a sleep overshoots by a millisecond or so on a loaded machine, and at
    # a 4 ms step that alone read R = 1 as 0.76 in one fresh clone's full run.
    step_seconds = 0.02
    # Batches of 8 elements at 8 / (imposed_r * step) elements per second.
    rate = 8 / (imposed_r * step_seconds)
    dataset = tf.data.Dataset.range(100_000).apply(throttle(rate)).batch(8)
    measured = measure_ratio(dataset, lambda batch: time.sleep(step_seconds), batches=15, repeats=3)
    assert measured.ratio == pytest.approx(imposed_r, rel=0.15)
    assert len(measured.upstream_repeats) == len(measured.downstream_repeats) == 3


def test_keras_model_is_left_unchanged():
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.BatchNormalization(), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss="mse")
    before = [v.numpy().copy() for v in model.variables]
    x = np.random.default_rng(0).random((64, 4), dtype=np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1))).batch(8).repeat()
    measured = measure_ratio(dataset, model, batches=4, repeats=2)
    assert measured.downstream_seconds > 0
    for old, new in zip(before, model.variables):
        np.testing.assert_array_equal(old, new.numpy())
    assert all(not np.any(v.numpy()) for v in model.optimizer.variables if "iteration" in v.path)


def test_result_reads_as_a_sentence():
    m = RatioMeasurement(0.02, 0.005, (0.02,), (0.005,))
    assert m.ratio == pytest.approx(4.0)
    assert "input pipeline" in m.bottleneck
    assert str(m).startswith("R = 4.00: upstream 20.0 ms/batch, downstream 5.0 ms/step")
    assert "training step" in RatioMeasurement(0.005, 0.02, (), ()).bottleneck


def test_bad_arguments_are_rejected():
    ds = tf.data.Dataset.range(10).batch(2)
    with pytest.raises(ValueError, match="batches: expected an int >= 1, got 0"):
        measure_ratio(ds, lambda b: None, batches=0)
    with pytest.raises(TypeError, match="dataset: expected a tf.data.Dataset, got list"):
        measure_ratio([1], lambda b: None)
    with pytest.raises(TypeError, match="train_step: expected a compiled keras.Model or a callable, got int"):
        measure_ratio(ds, 3)
    with pytest.raises(ValueError, match="dataset: ran out of batches; it must yield at least 23"):
        measure_ratio(ds, lambda b: None, batches=4, warmup=3, repeats=5)
