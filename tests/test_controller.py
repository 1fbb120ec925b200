"""The control law of EchoController on synthetic step rates (no TensorFlow, no clock)."""

import math
import random

import pytest

from echoing.controller import PHASES, EchoController

STEP_RATE = 100.0  # s: the training step's own rate, steps per second


def saturating(ratio):
    """The rate law of an overlapped pipeline: min(e * u, s) with R = s / u."""
    return lambda step, factor: min(factor * STEP_RATE / ratio, STEP_RATE)


def run(controller, rate, steps, start=0, noise=0.0, seed=0):
    """Drives ``controller`` as a training loop would; returns the factor in force at every step."""
    rng = random.Random(seed)
    now, factor, trace = 0.0, 1.0, []
    for step in range(start, start + steps):
        jitter = 1 + rng.uniform(-noise, noise)
        now += 1 / (rate(step, factor) * jitter)
        if controller.observe(step, now):
            factor = controller.factor
        trace.append(factor)
    return trace


def test_it_settles_near_r_with_headroom_when_input_bound():
    controller = EchoController(max_factor=8.0)
    trace = run(controller, saturating(4.0), 300)
    assert controller.phase == "hold"
    assert controller.ratio == pytest.approx(4.0, rel=0.01)
    assert trace[-1] == pytest.approx(4.4, rel=0.01)
    assert [d.phase for d in controller.decisions] == ["baseline", "probe", "verify", "hold"]


def test_it_settles_at_exactly_one_when_training_is_not_input_bound():
    controller = EchoController(max_factor=8.0)
    trace = run(controller, saturating(0.5), 600)
    assert set(trace[130:]) == {1.0}
    assert controller.phase == "hold" and controller.factor == 1.0
    assert "not input-bound" in controller.decisions[2].reason


def test_it_never_sets_more_than_max_factor_and_says_r_is_a_lower_bound():
    controller = EchoController(max_factor=3.0)
    trace = run(controller, saturating(20.0), 1500)
    assert max(trace) == 3.0 and trace[-1] == 3.0
    assert "had not saturated" in controller.decisions[2].reason
    assert not any(d.phase == "check" for d in controller.decisions)  # Nothing to check below the cap.


def test_it_re_probes_and_follows_when_r_rises_within_200_steps():
    controller = EchoController(max_factor=8.0)
    rate = lambda step, factor: saturating(2.0 if step < 500 else 5.0)(step, factor)  # noqa: E731
    trace = run(controller, rate, 1000)
    assert trace[499] == pytest.approx(2.2, rel=0.05)
    holds = [d for d in controller.decisions if d.step >= 500 and d.phase == "hold"]
    assert holds and holds[0].step - 500 <= 200
    assert holds[0].factor == pytest.approx(5.5, rel=0.05)
    # The drifted rate at e = 2.2 is the probe's base: no need to go back to e = 1.
    after = [d for d in controller.decisions if d.step >= 500]
    assert after[0].phase == "probe" and "moved" in after[0].reason
    assert "baseline" not in [d.phase for d in after]


def test_a_periodic_probe_finds_that_the_step_got_faster_which_the_rate_barely_shows():
    controller = EchoController(max_factor=8.0, check_every_steps=200)
    # R = 4, then the step gets 40% faster (R = 5.6): at e = 4.4 the rate rises only 10%.
    rate = lambda step, factor: min(factor * 25.0, 100.0 if step < 300 else 140.0)  # noqa: E731
    run(controller, rate, 800)
    holds = [d for d in controller.decisions if d.step >= 300 and d.phase == "hold"]
    assert holds and holds[0].step - 300 <= 200 + 150
    assert 5.6 <= holds[0].factor <= 5.6 * 1.1 * 1.1  # At or just above the new R: the step is the bottleneck again.
    assert not any(d.phase == "baseline" for d in controller.decisions[1:])


def test_a_periodic_check_finds_that_r_has_fallen_which_the_step_rate_cannot_show():
    controller = EchoController(max_factor=8.0, check_every_steps=200)
    rate = lambda step, factor: saturating(5.0 if step < 300 else 2.0)(step, factor)  # noqa: E731
    trace = run(controller, rate, 1000)
    # At e = 5.5 > R = 2 the step rate stays at s: only a lower factor reveals the change.
    assert any("R has fallen" in d.reason for d in controller.decisions)
    holds = [d for d in controller.decisions if d.step >= 300 and d.phase == "hold" and d.factor < 3]
    assert holds and holds[0].step - 300 <= 200 + 250
    assert holds[-1].factor == pytest.approx(2.2, rel=0.05)
    # Held, or probing up and checking below now and then.
    assert set(trace[holds[0].step + 1:]) <= {holds[0].factor, 8.0, round(holds[0].factor / 1.5, 2)}


def test_a_periodic_probe_and_check_that_confirm_r_return_to_the_held_factor():
    controller = EchoController(max_factor=8.0, check_every_steps=100)
    run(controller, saturating(4.0), 800)
    phases = [d.phase for d in controller.decisions]
    assert phases[:4] == ["baseline", "probe", "verify", "hold"]
    assert phases[4:8] == ["probe", "check", "hold", "probe"]  # Up: no gain; down: the rate drops; hold.
    assert controller.decisions[6].factor == pytest.approx(4.4, rel=0.01)
    assert "baseline" not in phases[1:]


def test_it_settles_within_bounds_despite_noisy_step_times():
    factors = []
    for seed in range(5):
        controller = EchoController(max_factor=8.0)
        factors.append(run(controller, saturating(4.0), 400, noise=0.15, seed=seed)[-1])
    assert all(3.5 <= f <= 5.5 for f in factors), factors


def test_interrupt_keeps_a_pause_out_of_the_rate():
    def with_pause(interrupt):
        controller = EchoController(max_factor=8.0)
        now, factor = 0.0, 1.0
        for step in range(400):
            now += 1 / saturating(4.0)(step, factor)
            if step == 250:
                now += 30.0  # An evaluation between two training steps.
                if interrupt:
                    controller.interrupt()
            if controller.observe(step, now):
                factor = controller.factor
        return controller

    assert [d.phase for d in with_pause(True).decisions] == ["baseline", "probe", "verify", "hold"]
    assert len(with_pause(False).window_rates) > 0
    assert min(rate for _, rate in with_pause(False).window_rates) < 1  # Without it, the pause reads as a slow window.


def test_the_first_measurement_waits_out_whatever_factor_ran_before():
    controller = EchoController(max_factor=8.0, settle_steps=10)
    controller.observe(0, 0.0)
    assert [controller.observe(step, step * 0.01) for step in range(1, 10)] == [None] * 9
    assert controller.window_rates == []  # Not even a window is started before step 10.
    controller.observe(10, 0.1)
    assert controller._window_start == (10, 0.1)


def test_steps_may_skip_as_with_steps_per_execution():
    controller = EchoController(max_factor=8.0)
    now, factor = 0.0, 1.0
    for step in range(0, 1600, 4):
        now += 4 / saturating(4.0)(step, factor)
        if controller.observe(step, now):
            factor = controller.factor
    assert controller.ratio == pytest.approx(4.0, rel=0.01)


def test_decisions_carry_step_factor_rates_reason_and_ratio():
    controller = EchoController(max_factor=8.0)
    run(controller, saturating(4.0), 200)
    probe_result = controller.decisions[2]
    assert probe_result.previous_factor == 8.0 and probe_result.phase == "verify"
    assert probe_result.rates == {"e=1": pytest.approx(25.0), "e=8": pytest.approx(100.0)}
    assert probe_result.ratio == pytest.approx(4.0)
    assert "R = 4.00 under load" in probe_result.reason
    assert str(probe_result).startswith(f"step {probe_result.step}: echo factor 8 -> 4.4 (verify): ")
    assert all(d.phase in PHASES for d in controller.decisions)
    assert math.isnan(EchoController().ratio)


def test_verbose_prints_one_sentence_per_decision(capsys):
    controller = EchoController(max_factor=8.0, verbose=1)
    run(controller, saturating(4.0), 200)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(controller.decisions) and all(line.startswith("echo factor: step ") for line in lines)


@pytest.mark.parametrize("setting, value, error", [
    ("max_factor", 0.5, ValueError), ("max_factor", "8", TypeError), ("max_factor", math.inf, ValueError),
    ("headroom", 0, ValueError), ("min_gain", -0.1, ValueError),
    ("settle_steps", -1, ValueError), ("window_steps", 0, ValueError), ("windows", 0, ValueError),
    ("window_steps", 2.5, TypeError), ("drift_tolerance", 1.5, ValueError), ("patience", 0, ValueError),
    ("check_every_steps", 0, ValueError), ("check_divisor", 1.0, ValueError), ("max_corrections", -1, ValueError),
])
def test_bad_settings_name_the_argument_and_show_the_value(setting, value, error):
    with pytest.raises(error, match=rf"{setting}: .*{value!r}"):
        EchoController(**{setting: value})


def test_observe_rejects_steps_that_do_not_increase():
    controller = EchoController()
    controller.observe(5, 1.0)
    with pytest.raises(ValueError, match="step: expected steps to increase, got 5 after 5"):
        controller.observe(5, 2.0)
    with pytest.raises(ValueError, match="timestamp"):
        controller.observe(6, math.nan)
