"""The gradient noise scale: estimator, micro-batch gradient norms, and the Keras callback."""

import math
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import echoing
from echoing.noise_scale import GradientNorms, NoiseScaleEstimator, unbiased_estimates


# --- The estimator, on norms with known answers -------------------------------------------

def expected_norms(gradient_sq_norm, trace_sigma, small_batch, big_batch):
    return GradientNorms(gradient_sq_norm + trace_sigma / small_batch, gradient_sq_norm + trace_sigma / big_batch,
                         small_batch, big_batch)


@pytest.mark.parametrize("g2, trace, small, big", [(1.0, 64.0, 8, 32), (0.01, 5.0, 1, 128), (3.0, 0.5, 16, 64)])
def test_unbiased_estimates_recover_exact_expectations(g2, trace, small, big):
    assert unbiased_estimates(expected_norms(g2, trace, small, big)) == pytest.approx((g2, trace))


def test_smoothed_estimate_of_constant_measurements_is_exact_from_the_first():
    estimator = NoiseScaleEstimator(smoothing=0.95)
    for count in range(1, 4):
        estimate = estimator.update(expected_norms(2.0, 100.0, 4, 32))
        assert estimate.count == count
        assert estimate.b_simple == pytest.approx(50.0)
        assert estimate.b_simple_smoothed == pytest.approx(50.0)  # Bias correction: no pull towards 0.


def test_smoothing_averages_numerator_and_denominator_separately():
    estimator = NoiseScaleEstimator(smoothing=0.0)  # No history: the latest measurement only.
    estimator.update(expected_norms(1.0, 10.0, 2, 8))
    assert estimator.update(expected_norms(4.0, 10.0, 2, 8)).b_simple_smoothed == pytest.approx(2.5)
    estimator = NoiseScaleEstimator(smoothing=0.5)
    estimator.update(expected_norms(1.0, 10.0, 2, 8))
    second = estimator.update(expected_norms(4.0, 10.0, 2, 8))
    # Weights 1/3 and 2/3 after bias correction: |G|^2 = 3, tr = 10; the mean of ratios would be 5.
    assert second.smoothed_gradient_sq_norm == pytest.approx(3.0)
    assert second.b_simple_smoothed == pytest.approx(10 / 3)


def test_noisy_gaussian_gradients_give_the_true_noise_scale_once_smoothed():
    rng = np.random.default_rng(0)
    dim, true_gradient, scale = 50, np.full(50, 0.2), 1.5  # |G|^2 = 2, tr(Sigma) = 112.5, B_simple = 56.25
    estimator = NoiseScaleEstimator(smoothing=0.99)
    for _ in range(2000):
        per_example = true_gradient + scale * rng.normal(size=(64, dim))
        micro = per_example.reshape(8, 8, dim).mean(axis=1)
        norms = GradientNorms(np.mean(np.sum(micro**2, axis=1)), np.sum(micro.mean(axis=0) ** 2), 8, 64)
        estimate = estimator.update(norms)
    assert estimate.b_simple_smoothed == pytest.approx(dim * scale**2 / 2.0, rel=0.1)


def test_raw_noise_scale_is_nan_when_the_gradient_estimate_is_not_positive():
    estimate = NoiseScaleEstimator().update(GradientNorms(10.0, 9.0, 2, 4))  # |G|^2 estimate = 8
    assert estimate.b_simple == pytest.approx(0.5)
    estimate = NoiseScaleEstimator().update(GradientNorms(10.0, 4.0, 2, 4))  # |G|^2 estimate = -2
    assert math.isnan(estimate.b_simple) and math.isnan(estimate.b_simple_smoothed)
    assert estimate.regime(64) == "unknown" and "not yet known" in estimate.describe(64)


@pytest.mark.parametrize("ratio, regime", [(0.1, "noise-dominated"), (1.0, "critical"), (5.0, "curvature-dominated")])
def test_regime_is_named_from_the_batch_to_noise_scale_ratio(ratio, regime):
    estimate = NoiseScaleEstimator().update(expected_norms(1.0, 100.0, 10, 50))  # B_simple = 100
    assert estimate.regime(int(100 * ratio)) == regime
    assert estimate.describe(int(100 * ratio)).startswith("near the critical" if regime == "critical" else regime)


@pytest.mark.parametrize("norms, field", [
    (GradientNorms(-1.0, 1.0, 2, 4), "small_sq_norm"),
    (GradientNorms(1.0, float("nan"), 2, 4), "big_sq_norm"),
    (GradientNorms(1.0, 1.0, 4, 4), "small_batch"),
    (GradientNorms(1.0, 1.0, 0, 4), "small_batch"),
])
def test_bad_norms_raise_an_error_naming_the_field(norms, field):
    with pytest.raises(ValueError, match=field):
        unbiased_estimates(norms)


@pytest.mark.parametrize("smoothing", [1.0, -0.1, "0.9", True])
def test_bad_smoothing_is_rejected(smoothing):
    with pytest.raises(ValueError, match=r"smoothing: .*" + repr(smoothing).replace(".", r"\.")):
        NoiseScaleEstimator(smoothing)


# --- Micro-batch gradient norms ------------------------------------------------------------

def regularised_model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input((6,)),
        keras.layers.Dense(8, activation="tanh", kernel_regularizer=keras.regularizers.L2(0.01),
                           activity_regularizer=keras.regularizers.L2(0.001)),
        keras.layers.Dense(3),
    ])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def data(n, seed=0, dim=6, classes=3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, dim)).astype("float32"), rng.integers(0, classes, size=n).astype("int32")


def full_loss_gradient(model, x, y):
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = model.compute_loss(x, y, y_pred)
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


def test_norms_are_those_of_the_micro_batch_gradients_and_their_mean():
    model, (x, y) = regularised_model(), data(32)
    norms = echoing.microbatch_gradient_norms(model, (x, y), num_microbatches=4)
    micro = [full_loss_gradient(model, x[i * 8:(i + 1) * 8], y[i * 8:(i + 1) * 8]) for i in range(4)]
    small = np.mean([sum(np.sum(g**2) for g in grads) for grads in micro])
    # The big-batch gradient is the whole batch's loss gradient, regularisation included.
    big = sum(np.sum(g**2) for g in full_loss_gradient(model, x, y))
    assert float(norms.small_sq_norm) == pytest.approx(small, rel=1e-4)
    assert float(norms.big_sq_norm) == pytest.approx(big, rel=1e-4)
    assert (float(norms.small_batch), float(norms.big_batch)) == (8.0, 32.0)


def test_measuring_leaves_batch_norm_statistics_dropout_state_and_metrics_untouched():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8), keras.layers.BatchNormalization(),
                              keras.layers.Dropout(0.5), keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    model.evaluate(*data(16), verbose=0)
    before = [v.numpy().copy() for v in model.variables + model.metrics_variables]
    echoing.microbatch_gradient_norms(model, data(16), num_microbatches=2)
    after = [v.numpy() for v in model.variables + model.metrics_variables]
    for old, new in zip(before, after):
        np.testing.assert_array_equal(old, new)


def test_a_batch_that_does_not_split_is_rejected_naming_both_sizes():
    model = regularised_model()
    with pytest.raises(ValueError, match=r"batch size 30 .*num_microbatches=4"):
        echoing.microbatch_gradient_norms(model, data(30), num_microbatches=4)
    with pytest.raises(ValueError, match=r"batch size 3 .*num_microbatches=4"):
        echoing.microbatch_gradient_norms(model, data(3), num_microbatches=4, drop_remainder=True)


def test_a_batch_that_does_not_split_at_run_time_raises_in_the_graph():
    model = regularised_model()
    spec = (tf.TensorSpec([None, 6], tf.float32), tf.TensorSpec([None], tf.int32))
    measure = tf.function(lambda x, y: echoing.microbatch_gradient_norms(model, (x, y), 4), input_signature=spec)
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_microbatches=4"):
        measure(*data(30))
    assert float(measure(*data(32)).big_batch) == 32.0


def test_drop_remainder_measures_the_largest_multiple_of_k():
    model, (x, y) = regularised_model(), data(30)
    dropped = echoing.microbatch_gradient_norms(model, (x, y), num_microbatches=4, drop_remainder=True)
    exact = echoing.microbatch_gradient_norms(model, (x[:28], y[:28]), num_microbatches=4)
    assert (float(dropped.small_batch), float(dropped.big_batch)) == (7.0, 28.0)
    assert float(dropped.small_sq_norm) == pytest.approx(float(exact.small_sq_norm))
    assert float(dropped.big_sq_norm) == pytest.approx(float(exact.big_sq_norm))


@pytest.mark.parametrize("k, error", [(1, ValueError), (0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_num_microbatches_must_be_an_int_of_at_least_two(k, error):
    with pytest.raises(error, match=r"num_microbatches: expected an int >= 2"):
        echoing.microbatch_gradient_norms(regularised_model(), data(8), num_microbatches=k)


def test_an_uncompiled_model_needs_a_loss_fn():
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
    with pytest.raises(ValueError, match="not compiled"):
        echoing.microbatch_gradient_norms(model, data(8), 2)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    norms = echoing.microbatch_gradient_norms(model, data(8), 2, loss_fn=loss)
    assert float(norms.small_sq_norm) > 0


# --- Validation against the exact noise scale of softmax regression -------------------------

def test_estimate_agrees_with_the_exact_noise_scale_of_softmax_regression_within_10_percent():
    rng = np.random.default_rng(1)
    n, dim, classes = 8192, 10, 4
    x = rng.normal(size=(n, dim)).astype("float32")
    true_weights = rng.normal(size=(dim, classes))
    y = np.array([rng.choice(classes, p=p) for p in _softmax(x @ true_weights)]).astype("int32")
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((dim,)), keras.layers.Dense(classes)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.trainable_variables[0].assign(0.25 * true_weights.astype("float32"))  # Part-way to the optimum.
    kernel, bias = (v.numpy().astype("float64") for v in model.trainable_variables)

    # Exact per-example gradients of the cross-entropy: x (p - onehot) for the kernel, p - onehot for the bias.
    residual = _softmax(x @ kernel + bias) - np.eye(classes)[y]
    per_example = np.concatenate([(x[:, :, None] * residual[:, None, :]).reshape(n, -1), residual], axis=1)
    gradient = per_example.mean(axis=0)
    exact = np.sum((per_example - gradient) ** 2) / n / np.sum(gradient**2)

    measure = tf.function(lambda xb, yb: echoing.microbatch_gradient_norms(model, (xb, yb), num_microbatches=8))
    estimator = NoiseScaleEstimator(smoothing=0.99)
    for _ in range(400):
        index = rng.integers(0, n, size=128)  # With replacement: the estimator's i.i.d. model.
        norms = measure(x[index], y[index])
        estimate = estimator.update(GradientNorms(*(float(v) for v in (
            norms.small_sq_norm, norms.big_sq_norm, norms.small_batch, norms.big_batch))))
    # B_simple is about 74 here, so at B = 128 both |G|^2 and tr(Sigma) matter. Simulated
    # with numpy over 20 seeds, this set-up's smoothed error had a 2% standard deviation.
    assert 30 < exact < 300, exact
    assert estimate.b_simple_smoothed == pytest.approx(exact, rel=0.1)


def _softmax(logits):
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


# --- The callback -------------------------------------------------------------------------

def noisy_model_and_data(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dropout(0.3), keras.layers.Dense(3)])
    model.compile(keras.optimizers.SGD(0.05, momentum=0.9),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model, data(640, seed=3)


def fit_state(callbacks):
    model, (x, y) = noisy_model_and_data()
    history = model.fit(x, y, batch_size=64, epochs=2, shuffle=False, callbacks=callbacks, verbose=0)
    return model, history, [v.numpy() for v in model.variables + model.optimizer.variables]


def test_callback_leaves_the_training_trajectory_unchanged():
    _, plain_history, plain = fit_state([])
    callback = echoing.NoiseScaleCallback(every_n_steps=3, num_microbatches=4, verbose=0)
    _, history, measured = fit_state([callback])
    assert len(callback.measurements) == 7  # Steps 0, 3, ..., 18 of 20.
    for a, b in zip(plain, measured):
        np.testing.assert_array_equal(a, b)
    assert history.history["loss"] == plain_history.history["loss"]


def test_callback_logs_to_history_tensorboard_and_in_words(tmp_path, capsys):
    callback = echoing.NoiseScaleCallback(every_n_steps=2, num_microbatches=4, log_dir=str(tmp_path))
    model, history, _ = fit_state([callback])
    assert [m["step"] for m in callback.measurements] == list(range(0, 20, 2))
    assert all(m["batch_size"] == 64 for m in callback.measurements)
    latest = callback.measurements[-1]
    assert history.history["noise_scale_smoothed"][-1] == latest["b_simple_smoothed"]
    assert callback.noise_scale == latest["b_simple_smoothed"]  # The value echoing.recommend takes.
    assert history.history["batch_over_noise_scale"][-1] == pytest.approx(64 / latest["b_simple_smoothed"])
    assert len(history.history["noise_scale"]) == 2
    assert "the noise scale B_simple" in capsys.readouterr().out
    assert latest["regime"] in callback.describe()
    tags = set()
    for event_file in (tmp_path / "train").iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            tags.update(value.tag for value in event.summary.value)
    assert {"noise_scale/b_simple_smoothed", "noise_scale/batch_over_b_simple"} <= tags
    assert "train_step" not in model.__dict__  # The model's own train_step is back.
    assert model.train_function is not None


def test_callback_measures_the_largest_multiple_of_k_of_a_partial_batch():
    callback = echoing.NoiseScaleCallback(every_n_steps=1, num_microbatches=4, verbose=0)
    model, (x, y) = noisy_model_and_data()
    model.fit(x[:70], y[:70], batch_size=64, epochs=1, callbacks=[callback], verbose=0)
    assert [m["batch_size"] for m in callback.measurements] == [64, 4]  # The last batch has 6 examples.
    model.fit(x[:67], y[:67], batch_size=64, epochs=1, callbacks=[callback], verbose=0)
    assert [m["batch_size"] for m in callback.measurements] == [64, 4, 64]  # 3 examples: not measured.


def test_callback_rejects_bad_settings_naming_them():
    with pytest.raises(ValueError, match=r"every_n_steps: expected an int >= 1, got 0"):
        echoing.NoiseScaleCallback(every_n_steps=0)
    with pytest.raises(ValueError, match=r"num_microbatches: expected an int >= 2, got 1"):
        echoing.NoiseScaleCallback(num_microbatches=1)
    model, (x, y) = noisy_model_and_data()
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=4)
    with pytest.raises(ValueError, match=r"steps_per_execution: .*got 4"):
        model.fit(x, y, batch_size=64, callbacks=[echoing.NoiseScaleCallback(every_n_steps=2)], verbose=0)


MIRRORED_SCRIPT = textwrap.dedent("""
    import os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import numpy as np, tensorflow as tf, keras, echoing
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(256, 6)).astype("float32"), rng.integers(0, 3, size=256).astype("int32")

    def build():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    single = build()
    expected = echoing.microbatch_gradient_norms(single, (x[:64], y[:64]), num_microbatches=8)
    with strategy.scope():
        model = build()
    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(64))))
    norms = strategy.run(tf.function(lambda b: echoing.microbatch_gradient_norms(model, b, num_microbatches=4)), args=(batch,))
    got = [float(strategy.experimental_local_results(v)[0]) for v in (norms.small_sq_norm, norms.big_sq_norm, norms.small_batch, norms.big_batch)]
    want = [float(v) for v in (expected.small_sq_norm, expected.big_sq_norm, expected.small_batch, expected.big_batch)]
    np.testing.assert_allclose(got, want, rtol=1e-4)

    callback = echoing.NoiseScaleCallback(every_n_steps=2, num_microbatches=4, verbose=0)
    with strategy.scope():
        model = build()
    model.fit(x, y, batch_size=64, epochs=2, callbacks=[callback], verbose=0)
    assert [m["batch_size"] for m in callback.measurements] == [64, 64, 64, 64], callback.measurements
    print("OK", strategy.num_replicas_in_sync, got)
""")


def test_works_under_mirrored_strategy_with_two_logical_cpus():
    # Logical devices must be configured before TensorFlow starts, so this runs in a child process.
    result = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("OK 2")


def test_one_callback_serves_two_fits_and_then_another_model():
    callback = echoing.NoiseScaleCallback(every_n_steps=5, num_microbatches=4, verbose=0)
    model, (x, y) = noisy_model_and_data()
    model.fit(x, y, batch_size=64, epochs=1, callbacks=[callback], verbose=0)
    model.fit(x, y, batch_size=64, epochs=1, callbacks=[callback], verbose=0)
    assert [m["step"] for m in callback.measurements] == [0, 5, 10, 15]  # Steps continue across fits.
    other, _ = noisy_model_and_data(seed=1)
    other.fit(x, y, batch_size=64, epochs=1, callbacks=[callback], verbose=0)
    assert [m["step"] for m in callback.measurements][4:] == [0, 5]


@pytest.mark.parametrize("backend", ["numpy", "openvino"])
def test_the_callback_refuses_an_unsupported_keras_backend_at_construction_naming_it(backend, monkeypatch):
    import keras

    monkeypatch.setattr(keras.backend, "backend", lambda: backend)
    with pytest.raises(RuntimeError, match=rf"the Keras backend '{backend}' is not supported.*'tensorflow', 'jax', 'torch'"):
        echoing.NoiseScaleCallback()
    with pytest.raises(RuntimeError, match=rf"the Keras backend '{backend}' is not supported"):
        echoing.microbatch_gradient_norms(keras.Sequential([keras.layers.Dense(1)]), None, 2, loss_fn=lambda y, p: 0.0)
