"""The Keras-facing parts on whichever Keras 3 backend this interpreter runs.

The default run takes them on TensorFlow; ``tests/test_backends.py`` runs this module
again in a fresh interpreter with ``KERAS_BACKEND=jax`` and, when torch is installed,
``KERAS_BACKEND=torch``. Nothing here may assume a backend: figures are checked against
numpy, and steps are paced by sleeping in a callback, which every backend's ``fit`` runs.
"""

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import echoing
from echoing import testing

BACKEND = keras.backend.backend()


def softmax_regression(weights=None, classes=3, features=5):
    model = keras.Sequential([keras.Input((features,)), keras.layers.Dense(classes)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if weights is not None:
        model.set_weights(weights)
    return model


def numpy_gradient(kernel, bias, x, y):
    """The gradient of the mean cross-entropy of softmax(x @ kernel + bias), by hand."""
    logits = x @ kernel + bias
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return np.concatenate([(x.T @ p).ravel(), p.sum(axis=0)]) / len(y)


def data(n=64, features=5, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    y = (np.argmax(x[:, :classes] + 0.5 * rng.normal(size=(n, classes)), axis=1)).astype("int64")
    return x, y


def test_microbatch_gradient_norms_equal_numpys_on_this_backend():
    rng = np.random.default_rng(1)
    kernel, bias = rng.normal(size=(5, 3)).astype("float32"), rng.normal(size=3).astype("float32")
    model = softmax_regression([kernel, bias])
    x, y = data(32)
    norms = echoing.microbatch_gradient_norms(model, (x, y), num_microbatches=4)
    gradients = [numpy_gradient(kernel, bias, x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)]
    small = np.mean([np.sum(g ** 2) for g in gradients])
    big = np.sum(np.mean(gradients, axis=0) ** 2)
    assert [float(norms.small_batch), float(norms.big_batch)] == [8.0, 32.0]
    np.testing.assert_allclose([float(norms.small_sq_norm), float(norms.big_sq_norm)], [small, big], rtol=1e-4)
    np.testing.assert_array_equal(model.get_weights()[0], kernel)  # Nothing was assigned.


def test_the_fixed_echo_trains_and_the_noise_scale_callback_measures_logs_and_leaves_training_alone(tmp_path):
    x, y = data(256)
    echoed = tf.data.Dataset.from_tensor_slices((x, y)).apply(echoing.echo(2, seed=0)).batch(32)
    weights = softmax_regression().get_weights()

    plain = softmax_regression(weights)
    plain_history = plain.fit(echoed, epochs=2, verbose=0)
    measured = softmax_regression(weights)
    callback = echoing.NoiseScaleCallback(every_n_steps=4, num_microbatches=4, log_dir=str(tmp_path), verbose=0)
    history = measured.fit(echoed, epochs=2, callbacks=[callback], verbose=0)

    assert plain_history.history["loss"][1] < plain_history.history["loss"][0]  # The echoed data trains.
    # 16 steps per epoch, a measurement every 4th: steps 0, 4, ..., 28.
    assert [m["step"] for m in callback.measurements] == list(range(0, 32, 4))
    assert all(m["batch_size"] == 32 and np.isfinite(m["b_simple_smoothed"]) for m in callback.measurements[1:])
    assert {"noise_scale", "noise_scale_smoothed", "batch_over_noise_scale"} <= set(history.history)
    assert list((tmp_path / "train").glob("events.out.tfevents.*")), "no TensorBoard events written"
    # The measurement is on the side: the same weights as training without it.
    for a, b in zip(plain.get_weights(), measured.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_first_measurement_equals_numpys_gradient_norms_on_the_first_batch():
    rng = np.random.default_rng(2)
    kernel, bias = rng.normal(size=(5, 3)).astype("float32"), rng.normal(size=3).astype("float32")
    x, y = data(64)
    callback = echoing.NoiseScaleCallback(every_n_steps=100, num_microbatches=2, verbose=0)
    softmax_regression([kernel, bias]).fit(x, y, batch_size=32, epochs=1, shuffle=False, callbacks=[callback], verbose=0)
    gradients = [numpy_gradient(kernel, bias, x[i:i + 16], y[i:i + 16]) for i in (0, 16)]
    expected = echoing.NoiseScaleEstimator(0.9).update(echoing.GradientNorms(
        np.mean([np.sum(g ** 2) for g in gradients]), np.sum(np.mean(gradients, axis=0) ** 2), 16, 32))
    assert len(callback.measurements) == 1
    np.testing.assert_allclose(callback.measurements[0]["b_simple"], expected.b_simple, rtol=1e-3)


class PacedStep(keras.callbacks.Callback):
    """Makes every training step take at least ``seconds`` (a stand-in for an accelerator's step)."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_train_batch_begin(self, batch, logs=None):
        time.sleep(self.seconds)


@pytest.mark.timing
def test_auto_echo_raises_the_factor_on_an_input_bound_loop_and_logs(tmp_path):
    # The input makes a batch of 8 every 40 ms; a step takes about 8 ms: R is about 5.
    factor = tf.Variable(1.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    x = testing.throttled_range(8 / 0.040).map(lambda i: (tf.cast(tf.fill([5], i % 7), tf.float32), i % 3))
    ds = x.apply(echoing.echo(factor, seed=0, stats=stats)).batch(8).prefetch(2)
    auto = echoing.AutoEcho(factor, max_factor=8.0, stats=stats, elements_per_step=8, log_dir=str(tmp_path), verbose=0)
    # Three epochs: the search halves from 4 with 64 steps a reading at least before R is read.
    history = softmax_regression().fit(ds, steps_per_epoch=120, epochs=3, callbacks=[PacedStep(0.008), auto], verbose=0)
    assert {"echo_factor", "steps_per_second", "fresh_examples"} <= set(history.history)
    assert float(factor.numpy()) > 2.0, [str(d) for d in auto.decisions]
    assert list((tmp_path / "train").glob("events.out.tfevents.*")), "no TensorBoard events written"


@pytest.mark.parametrize("shuffle, prefetch", [(0, 0), (0, 2), (256, 2)])
def test_consumed_examples_are_exact_and_the_echo_stage_leads_within_the_documented_bound(shuffle, prefetch):
    batch, factor, steps, fits = 32, 2, 40, 2
    stats = echoing.EchoStats()
    source = tf.data.Dataset.range(10**6).map(lambda i: (tf.cast(tf.fill([5], i % 7), tf.float32), i % 3))
    ds = source.apply(echoing.echo(factor, shuffle_buffer_size=shuffle, seed=0, stats=stats)).batch(batch).prefetch(prefetch)
    consumed = echoing.ConsumedExamples(stats)
    model = softmax_regression()
    for _ in range(fits):
        history = model.fit(ds, steps_per_epoch=steps, epochs=2, callbacks=[consumed], verbose=0)
    assert consumed.steps == fits * 2 * steps
    assert consumed.examples == fits * 2 * steps * batch
    assert history.history["consumed_examples"] == [consumed.examples - steps * batch, consumed.examples]
    # echoing/consumption.py: per iterator, one echo micro-batch's copies, the echo shuffle
    # buffer and the prefetched batches plus one; Keras opens one iterator per fit, and the
    # JAX and PyTorch backends one more in the first fit, which also read one batch ahead.
    per_iterator = 64 * factor + shuffle + (prefetch + 1) * batch
    iterators = fits + (BACKEND != "tensorflow")
    lead = int(stats.emitted) - consumed.examples
    # The epoch end logged the lead at that moment; the iterators' prefetch threads may read
    # on until their buffers are full, so the lead now is at least that, and within the bound.
    logged = history.history["unconsumed_examples"][-1]
    assert 0 <= logged <= lead <= iterators * per_iterator + batch, (logged, lead, iterators, per_iterator)


@pytest.mark.timing
def test_auto_echo_drives_a_grain_pipeline_through_keras_grain_adapter():
    grain = pytest.importorskip("grain", reason="grain is not installed; pip install -e '.[grain]' runs this test")
    from echoing import grain as echo_grain

    def slow_read(i):  # 4 ms an example, 32 ms a batch of 8, on one reading thread.
        time.sleep(0.004)
        return {"x": np.full([5], i % 7, np.float32), "y": np.int64(i % 3)}

    class Pace(keras.callbacks.Callback):  # The step: about 9 ms with the sleep. R is about 3.5.
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.008)

    factor, stats = echo_grain.Factor(1.0), echo_grain.EchoStats()
    ds = grain.MapDataset.range(10**9).map(slow_read).to_iter_dataset(
        grain.ReadOptions(num_threads=1, prefetch_buffer_size=16))
    ds = echo_grain.echo(ds, factor, shuffle_buffer_size=32, seed=0, stats=stats).batch(8)
    ds = grain.experimental.ThreadPrefetchIterDataset(ds.map(lambda b: (b["x"], b["y"])), prefetch_buffer_size=4)
    model = softmax_regression()
    auto = echoing.AutoEcho(factor, max_factor=8.0, stats=stats, elements_per_step=8, verbose=0)
    history = model.fit(ds, steps_per_epoch=100, epochs=4, callbacks=[Pace(), auto], verbose=0)
    holds = [d for d in auto.decisions if d.phase == echoing.Phase.HOLD]
    assert holds and 2.0 <= holds[-1].factor <= 6.0, [str(d) for d in auto.decisions]
    assert float(factor) == history.history["echo_factor"][-1] == auto.decisions[-1].factor
    assert 0 < history.history["fresh_examples"][-1] <= stats.fresh  # The prefetch thread reads on after fit.
