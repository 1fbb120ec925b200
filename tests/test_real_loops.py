"""AutoEcho in the loops users run: checkpoints and pausing callbacks, steps_per_execution, validation, a slow first step, an input slower than max_factor.

Each loop is a Keras ``fit`` whose step sleeps 10 ms (:class:`sleep_loops.SleepStep`, ``tests/sleep_loops.py``)
over an input throttled so that R is known, with AutoEcho given the echo stage's fresh
count. The held factor (the last factor the controller held, checks below it aside) must
be within [0.8, 1.5] x R, or at least 0.9 ``max_factor`` where R is above it. Sleeps on
a shared machine: the margins are wide, and they are `timing` tests, outside the default run. The JAX
loop's counterpart is in ``tests/test_jax_loop.py``.
"""

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import echoing
from sleep_loops import SleepLoopConfig, SleepStep, paced_dataset, step_rate_alone
from pipelines.slow_storage import RateLimiter

pytestmark = pytest.mark.timing

CONFIG = SleepLoopConfig(step_seconds=0.010, batch_size=64, warmup_steps=20, fixed_steps=60)


@pytest.fixture(scope="module")
def step_rate():
    """The 10 ms step's rate under ``fit`` with batches in memory (about 80 steps/s here)."""
    model = SleepStep(CONFIG.step_seconds)
    model.compile()
    return step_rate_alone(model, CONFIG)


class SlowFirstStep(SleepStep):
    """A step that takes ``first_seconds`` once (as a first step that compiles), then ``seconds``."""

    def __init__(self, seconds: float, first_seconds: float):
        super().__init__(seconds)
        self.first_seconds, self.calls = first_seconds, 0

    def train_step(self, data):
        def sleep():
            self.calls += 1
            seconds = self.first_seconds if self.calls == 1 else self.seconds
            time.sleep(seconds)
            return np.float32(seconds)

        return {"slept_seconds": tf.numpy_function(sleep, [], tf.float32, stateful=True)}


class SleepStepWithWeights(SleepStep):
    """A sleeping step with 4 MB of weights, so that a checkpoint has something to write."""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.dense = keras.layers.Dense(1024)
        self.dense.build((None, 1024))

    def call(self, inputs):
        return self.dense(inputs)


class SleepStepWithValidation(SleepStep):
    """A sleeping step whose validation step sleeps as well."""

    def test_step(self, data):
        slept = tf.numpy_function(lambda: np.float32(time.sleep(self.seconds) or self.seconds), [], tf.float32,
                                  stateful=True)
        return {"slept_seconds": slept}


class PauseEvery(keras.callbacks.Callback):
    """Sleeps ``seconds`` after every ``every`` batches without telling AutoEcho (a logging callback, a save)."""

    def __init__(self, every: int, seconds: float):
        super().__init__()
        self.every, self.seconds = every, seconds

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.every == 0:
            time.sleep(self.seconds)


def fit_with_auto_echo(ratio, step_rate, *, steps, model=None, max_factor=8.0, epochs=1, callbacks=(),
                       steps_per_execution=1, **fit_kwargs):
    """One ``fit`` at R = ``ratio`` with AutoEcho reading the fresh count; returns AutoEcho."""
    if model is None:
        model = SleepStep(CONFIG.step_seconds)
    model.compile(steps_per_execution=steps_per_execution)
    factor = tf.Variable(1.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    limiter = RateLimiter(CONFIG.batch_size * step_rate / ratio)
    config = SleepLoopConfig(**{**CONFIG.__dict__, "max_factor": max_factor})
    auto = echoing.AutoEcho(factor, max_factor=max_factor, stats=stats, elements_per_step=CONFIG.batch_size, verbose=0)
    model.fit(paced_dataset(limiter, factor, config, stats), steps_per_epoch=steps // epochs, epochs=epochs,
              verbose=0, callbacks=[auto, *callbacks], **fit_kwargs)
    return auto


def held_factor(auto) -> float:
    holds = [d for d in auto.decisions if d.phase == echoing.Phase.HOLD]
    assert holds, [str(d) for d in auto.decisions]
    return holds[-1].factor


def assert_near(auto, ratio, max_factor=8.0):
    factor = held_factor(auto)
    log = [str(d) for d in auto.decisions]
    if ratio >= max_factor:
        assert factor >= 0.9 * max_factor, log
    else:
        assert 0.8 * ratio <= factor <= 1.5 * ratio, log


def test_a_callback_that_pauses_mid_epoch_unannounced_does_not_raise_the_factor(step_rate):
    # 0.5 s every 100 steps: the fit, where the rule-by-rule law went from 5.2 to 7.3.
    every, seconds = 100, 0.5
    auto = fit_with_auto_echo(3.0, step_rate, steps=600, callbacks=[PauseEvery(every, seconds)])
    log = [str(d) for d in auto.decisions]
    # Found, though not told: left out of the opening, or charged to the loop afterwards.
    assert auto.controller.pause_per_step > 0 or any(d.cause == echoing.Cause.LEFT_OUT for d in auto.decisions)
    # The pause rule charges the pauses to the loop: a step of the loop takes 1 / step_rate + seconds / every
    # (about 12.5 + 5 ms), and the upstream reads through the pauses, so where its buffers hold a pause's batches
    # the input keeps up from R / (1 + step_rate * seconds / every) (about 2.1 at R = 3), the factor the objective
    # holds there; where they hold fewer, nearer R. The pauses must not raise it above R's band.
    keeps_up_from = 3.0 / (1 + step_rate * seconds / every)
    assert 0.8 * keeps_up_from <= held_factor(auto) <= 1.5 * 3.0, (keeps_up_from, log)


def test_model_checkpoint_saving_mid_epoch(step_rate, tmp_path):
    save = keras.callbacks.ModelCheckpoint(str(tmp_path / "ckpt.weights.h5"), save_weights_only=True, save_freq=150)
    model = SleepStepWithWeights(CONFIG.step_seconds)
    model.build((None, 1024))
    auto = fit_with_auto_echo(3.0, step_rate, steps=600, model=model, callbacks=[save])
    assert_near(auto, 3.0)
    assert (tmp_path / "ckpt.weights.h5").exists()


def test_steps_per_execution_4(step_rate):
    auto = fit_with_auto_echo(4.0, step_rate, steps=600, steps_per_execution=4)
    assert_near(auto, 4.0)
    assert all(d.step % 4 == 0 for d in auto.decisions[1:])  # One call of the callback per 4 steps.


def test_validation_every_epoch_is_not_taken_for_input(step_rate):
    # 20 validation batches, read slowly (20 ms each), after every epoch of 150 steps.
    batch = (tf.zeros([CONFIG.batch_size, 16]), tf.zeros([CONFIG.batch_size], tf.int64))
    slow = lambda x, y: (x + tf.ensure_shape(tf.numpy_function(  # noqa: E731
        lambda: np.float32(time.sleep(0.02) or 0), [], tf.float32, stateful=True), []), y)
    val = tf.data.Dataset.from_tensors(batch).repeat(20).map(slow)
    auto = fit_with_auto_echo(3.0, step_rate, steps=600, epochs=4, model=SleepStepWithValidation(CONFIG.step_seconds),
                              validation_data=val, validation_freq=1)
    assert_near(auto, 3.0)


def test_a_first_step_that_compiles_for_seconds_with_the_factor_at_1(step_rate):
    # The buffers fill with e = 1 batches while the first step runs for 3 s.
    model = SlowFirstStep(CONFIG.step_seconds, first_seconds=3.0)
    auto = fit_with_auto_echo(4.0, step_rate, steps=500, model=model)
    assert_near(auto, 4.0)


def test_an_input_slower_than_max_factor_steps_holds_max_factor(step_rate):
    auto = fit_with_auto_echo(12.0, step_rate, steps=500, max_factor=8.0)
    assert_near(auto, 12.0, max_factor=8.0)
