"""AutoEcho under Keras fit: a sleep-throttled upstream and a step that sleeps, so R is known.

The step sleeps 10 ms and releases the CPU, and the upstream sleeps too, so the rates hold
on a busy shared machine; tolerances are wide and the exact figures live in
``tests/sleep_loops.py``.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import echoing
from sleep_loops import (SleepLoopConfig, SleepStep, StepTimes, auto_run, paced_dataset, rate_between,
                                  step_rate_alone)
from pipelines.slow_storage import RateLimiter

# Rates measured against sleeps: wide margins, but a loaded machine can still move them.
pytestmark = pytest.mark.timing

CONFIG = SleepLoopConfig(step_seconds=0.010, batch_size=64, warmup_steps=20, fixed_steps=60)


@pytest.fixture(scope="module")
def model():
    model = SleepStep(CONFIG.step_seconds)
    model.compile()
    return model


@pytest.fixture(scope="module")
def step_rate(model):
    """The modelled step's rate under fit with batches in memory (about 80 steps/s here)."""
    batch = (tf.zeros([CONFIG.batch_size, 16]), tf.zeros([CONFIG.batch_size], tf.int64))
    times = StepTimes()
    model.fit(tf.data.Dataset.from_tensors(batch).repeat(), steps_per_epoch=80, epochs=1, verbose=0, callbacks=[times])
    return rate_between(times.times, 20)


# The two ways a search settles: a reading that found the input behind and gave R, or a lower
# factor that trained slower than the one above it, so the law went back up (decision 0029).
SETTLING = (echoing.Cause.MEASURED, echoing.Cause.SLOWER_BELOW)


def assert_settled_on_its_reading(decision):
    """The reading behind a settling decision says why it settled."""
    if decision.cause == echoing.Cause.MEASURED:
        assert decision.reading.input_bound, str(decision)  # The reading that gave R.
    else:
        assert decision.reading.factor < decision.factor, str(decision)  # It went back up.


def limiter_for(ratio, step_rate):
    return RateLimiter(CONFIG.batch_size * step_rate / ratio)


def test_at_r_4_it_settles_between_3_and_6_and_trains_near_the_step_bound_rate(model, step_rate):
    auto, times = auto_run(model, limiter_for(4, step_rate), CONFIG, steps=320)
    holds = [d for d in auto.decisions if d.phase == "hold"]
    assert holds and holds[0].cause in SETTLING, [str(d) for d in auto.decisions]
    # The first estimate may read low: just after the factor falls the echo stage empties the
    # buffers upstream of it at the steps' pace. The next windows raise it (32 steps here).
    assert 3 <= holds[-1].factor <= 6, [str(d) for d in auto.decisions]
    assert rate_between(times.times, 120) >= 0.8 * step_rate


def test_at_r_one_half_it_stays_at_one():
    # A slower step (40 ms) and small batches keep the upstream's own CPU work per batch far
    # below the step: with a 10 ms step a loaded CI host measured R = 1.1 at a nominal 0.5
    # and AutoEcho rightly chose e = 1.22. Here even 4x slower element reads leave R < 1.
    config = SleepLoopConfig(**{**CONFIG.__dict__, "step_seconds": 0.040, "batch_size": 16})
    slow_model = SleepStep(config.step_seconds)
    slow_model.compile()
    slow_rate = step_rate_alone(slow_model, config)
    limiter = RateLimiter(config.batch_size * slow_rate / 0.5)
    # With the count the search halves from sqrt(max_factor) (2.8, 1.4, 1) after a 29-step
    # opening, 64 steps a reading at least and up to 320 where production sits near the step
    # rate (a CI run read 320 steps at 1.414 and had not held by step 480). Three long readings
    # take 989 steps, so the fit may run 1000 and ends at the first hold.
    def held(auto):
        return any(d.phase == "hold" for d in auto.decisions)

    auto, _ = auto_run(slow_model, limiter, config, steps=1000, until=held)
    holds = [d for d in auto.decisions if d.phase == "hold"]
    assert holds and all(d.factor <= 1.1 for d in holds), [str(d) for d in auto.decisions]


def test_max_factor_is_respected(model, step_rate):
    config = SleepLoopConfig(**{**CONFIG.__dict__, "max_factor": 2.5})
    auto, _ = auto_run(model, limiter_for(6, step_rate), config, steps=200)
    assert max(d.factor for d in auto.decisions) == 2.5
    # At R = 6 the opening at 2.5 is input-bound, so the rate it takes for the step's own is
    # the input's at 2.5, and the search at 1.58 reads R at or below 2.5 (2.04-2.17 in eight
    # runs here, 2.32 in a CI run: its first waits there are taken for pauses, decision 0014).
    # It holds 1.05 R, and a hold whose production is within twice the tolerance of that rate
    # says the input keeps up (echoing/control/estimate.py), so it may stay: the CI run held
    # 2.441 and one run here 2.28; the other seven rose to 2.5 by step 157.
    assert auto.decisions[-1].factor >= 0.85 * 2.5, [str(d) for d in auto.decisions]


def test_when_r_rises_mid_run_it_follows(model, step_rate):
    limiter = limiter_for(2, step_rate)
    auto, _ = auto_run(model, limiter, CONFIG, steps=450, schedule={200: CONFIG.batch_size * step_rate / 5})
    before = [d for d in auto.decisions if d.step < 200 and d.phase == "hold"]
    after = [d for d in auto.decisions if d.step >= 200 and d.phase == "hold"]
    # R under load drifts from the R the step_rate fixture measured alone: a full default
    # run on this shared 2-core machine held 3.55 (R read 3.22) at a nominal 2.
    assert before and 1.5 <= before[0].factor <= 3.6, [str(d) for d in auto.decisions]
    near = [d for d in after if 4 <= d.factor <= 7.5]
    assert near and near[0].step - 200 <= 250, [str(d) for d in auto.decisions]


def sleeping_model(seconds):
    """A Sequential model whose forward pass sleeps; a zero loss keeps fit happy."""
    sleep = lambda x: x + tf.ensure_shape(  # noqa: E731
        tf.numpy_function(lambda: np.float32(__import__("time").sleep(seconds) or 0), [], tf.float32), [])
    model = keras.Sequential([keras.Input((16,)), keras.layers.Lambda(sleep)])
    model.compile(loss=lambda y, p: tf.reduce_mean(p) * 0.0)
    return model


def test_fit_logs_history_decisions_tensorboard_and_sentences(tmp_path, capsys):
    factor = tf.Variable(1.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    limiter = RateLimiter(64 / 0.02)  # One batch per 20 ms against a step of about 5 ms.
    ds = paced_dataset(limiter, factor, CONFIG, stats).map(lambda x, y: (x, x))
    auto = echoing.AutoEcho(factor, max_factor=8.0, stats=stats, elements_per_step=CONFIG.batch_size,
                            log_dir=str(tmp_path), verbose=1)
    # 200 steps: the opening takes about 30, and each VERIFY 30 more; a CI-like run on this
    # machine needed four VERIFYs (the 5 ms step is noisy) and had not held by step 140.
    history = sleeping_model(0.005).fit(ds, steps_per_epoch=100, epochs=4, callbacks=[auto], verbose=0)

    assert len(history.history["echo_factor"]) == len(history.history["steps_per_second"]) == 4
    assert history.history["echo_factor"][-1] == float(factor.numpy()) == auto.decisions[-1].factor
    assert all(rate > 0 for rate in history.history["steps_per_second"])
    # Logged at the last epoch's end; the pipeline keeps prefetching until fit returns, so the
    # count read afterwards may be a micro-batch or a few further on (6080 against 6016 once).
    logged, final = history.history["fresh_examples"][-1], int(stats.fresh.numpy())
    assert 0 < logged <= final <= logged + 10 * CONFIG.batch_size, (logged, final)
    phases = [d.phase for d in auto.decisions]
    assert phases[:2] == ["open", "search"] and "hold" in phases, phases
    assert all(d.reason and d.step > 0 for d in auto.decisions)
    settled = [d for d in auto.decisions if d.cause in SETTLING]
    assert settled, [str(d) for d in auto.decisions]
    assert_settled_on_its_reading(settled[0])

    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("echo factor: step ")]
    assert len(printed) == len(auto.decisions)
    tags = set()
    for event_file in (tmp_path / "train").iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            tags.update(value.tag for value in event.summary.value)
    assert {"echo/factor", "echo/ratio", "echo/steps_per_second", "echo/fresh_examples"} <= tags


class EpochCounts(keras.callbacks.Callback):
    """Per epoch: steps trained, and the fresh and emitted elements the echo stage counted."""

    def __init__(self, stats):
        super().__init__()
        self.stats, self.epochs = stats, []

    def on_epoch_begin(self, epoch, logs=None):
        self.steps, self.start = 0, (int(self.stats.fresh.numpy()), int(self.stats.emitted.numpy()))

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1

    def on_epoch_end(self, epoch, logs=None):
        fresh, emitted = int(self.stats.fresh.numpy()), int(self.stats.emitted.numpy())
        self.epochs.append({"steps": self.steps, "fresh": fresh - self.start[0], "emitted": emitted - self.start[1]})


def finite_echoed(factor, stats):
    """96 examples echoed by a variable factor, in batches of 8: cardinality unknown."""
    ds = tf.data.Dataset.range(96).map(lambda i: tf.fill([16], tf.cast(i, tf.float32)))
    return ds.apply(echoing.echo(factor, seed=0, stats=stats)).map(lambda x: (x, x)).batch(8)


class SetFactorAtEpochEnd(keras.callbacks.Callback):
    def __init__(self, factor, values):
        super().__init__()
        self.factor, self.values = factor, values

    def on_epoch_end(self, epoch, logs=None):
        self.factor.assign(self.values[epoch])


def test_without_steps_per_epoch_keras_cuts_a_longer_epoch_to_the_first_ones_length():
    # What AutoEcho warns about: Keras takes the first epoch's batch count for every
    # later epoch over a dataset of unknown length, so a longer epoch loses batches.
    factor, stats = tf.Variable(1.0, dtype=tf.float64), echoing.EchoStats()
    ds = finite_echoed(factor, stats)
    assert ds.cardinality() == tf.data.UNKNOWN_CARDINALITY
    counts = EpochCounts(stats)
    sleeping_model(0.0).fit(ds, epochs=3, callbacks=[SetFactorAtEpochEnd(factor, [2.0, 1.0, 1.0]), counts], verbose=0)
    first, longer, shorter = counts.epochs
    assert first["steps"] == 96 // 8
    # At e=2 the epoch holds 24 batches; Keras stops it near the first epoch's 12: batches
    # the echo stage made were never trained on, and the rest of the epoch is never read.
    assert longer["steps"] < 2 * 96 // 8
    assert longer["steps"] * 8 < longer["emitted"]
    assert shorter["steps"] == 96 // 8


def test_auto_echo_warns_when_fit_has_no_steps_per_epoch_over_a_dataset_of_unknown_length():
    factor, stats = tf.Variable(1.0, dtype=tf.float64), echoing.EchoStats()
    auto = echoing.AutoEcho(factor, stats=stats, elements_per_step=8, verbose=0)
    with pytest.warns(UserWarning, match=r"AutoEcho: .*steps_per_epoch.*dropped.*repeat\(\)"):
        sleeping_model(0.0).fit(finite_echoed(factor, stats), epochs=2, callbacks=[auto], verbose=0)


def test_with_repeat_and_steps_per_epoch_no_batch_is_lost_between_epochs(recwarn):
    # The factor must change for the test to say anything, and whether the law changes it
    # within 100 steps of 1 ms depends on the clock: one run of CI's timing tests in 69
    # held the opening's e = 4 throughout (30 runs of it by hand after that all changed).
    # So the fit is tried up to three times; the counts below are checked on the last try.
    for _ in range(3):
        factor, stats = tf.Variable(1.0, dtype=tf.float64), echoing.EchoStats()
        ds = finite_echoed(factor, stats).repeat()
        auto = echoing.AutoEcho(factor, max_factor=4.0, stats=stats, elements_per_step=8, verbose=0)
        counts = EpochCounts(stats)
        sleeping_model(0.001).fit(ds, steps_per_epoch=25, epochs=4, callbacks=[auto, counts], verbose=0)
        if len({d.factor for d in auto.decisions}) > 1:
            break
    # The factor changed, within and across epochs.
    assert len({d.factor for d in auto.decisions}) > 1, [(d.step, d.factor, d.cause, d.reason) for d in auto.decisions]
    assert [e["steps"] for e in counts.epochs] == [25] * 4
    # One iterator runs through every epoch: what was emitted and not trained on is only
    # what is still in flight: at most one micro-batch of 64 elements at e <= 4, and the few
    # batches of 8 Keras prefetches (267 over the 800 trained on, in a clean clone's CI run).
    assert 0 <= int(stats.emitted.numpy()) - 4 * 25 * 8 <= 64 * 4 + 8 * 8
    assert not [w for w in recwarn if "AutoEcho" in str(w.message)]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"factor": 2.0}, TypeError, r"factor: expected the tf.Variable .* got float: 2.0"),
    ({"factor": tf.Variable(2)}, TypeError, r"factor: the tf.Variable must have a floating dtype, got int32"),
    ({"factor": tf.Variable([1.0, 2.0])}, ValueError, r"factor: the tf.Variable must be a scalar"),
    ({"max_factor": 0.5}, ValueError, r"max_factor: expected a finite number >= 1, got 0.5"),
    ({"check_every_steps": 0}, ValueError, r"check_every_steps: expected an int >= 1 or None, got 0"),
    ({"headroom": -2}, ValueError, r"headroom: expected a finite number > 0, got -2"),
    ({"stats": "stats"}, TypeError, r"stats: expected an echoing.EchoStats, got str"),
    ({"stats": None}, ValueError, r"stats: AutoEcho reads the echo stage's fresh count; pass the EchoStats .* got None"),
    ({"elements_per_step": None}, ValueError, r"elements_per_step: the law reads the echo stage's fresh count.*got None"),
    ({"elements_per_step": 0}, ValueError, r"elements_per_step: expected an int >= 1 or None, got 0"),
    ({"log_dir": 3}, TypeError, r"log_dir: expected a directory path or None, got int: 3"),
    ({"verbose": -1}, ValueError, r"verbose: expected 0 or 1, got -1"),
    ({"no_such_setting": 1}, TypeError, r"no_such_setting"),
])
def test_bad_settings_raise_naming_the_argument_and_the_value(kwargs, error, message):
    arguments = {"factor": tf.Variable(1.0, dtype=tf.float64), "stats": echoing.EchoStats(), "elements_per_step": 64,
                 **kwargs}
    with pytest.raises(error, match=message):
        echoing.AutoEcho(arguments.pop("factor"), **arguments)
