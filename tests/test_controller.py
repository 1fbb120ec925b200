"""The control law of EchoController on the simulated loop of echoing.simulation (no TensorFlow graph, no clock)."""

import dataclasses
import math
import statistics

import pytest

from benchmarks import controller_simulation as sim
from echoing.controller import PHASES, ControllerSettings, EchoController, Phase
from echoing.simulation import Scenario, simulate


def schedule(*segments):
    """R by step from ``(first_step, R)`` segments, e.g. ``schedule((0, 4), (300, 2))``."""
    return lambda step: [ratio for first, ratio in segments if step >= first][-1]


def holds(controller, after=0):
    return [d for d in controller.decisions if d.step >= after and d.phase == Phase.HOLD]


def test_it_settles_near_r_with_headroom_when_input_bound():
    controller = EchoController(max_factor=8.0)
    simulate(Scenario(ratio=4.0, steps=300), controller=controller)
    assert controller.phase == "hold" and controller.phase is Phase.HOLD
    assert controller.ratio == pytest.approx(4.0, rel=0.02)
    assert controller.factor == pytest.approx(4.4, rel=0.02)
    # A short probe at max_factor for the step's rate, then e=1 until the buffer drains.
    assert [d.phase for d in controller.decisions][:4] == ["probe", "baseline", "verify", "hold"]
    assert controller.decisions[2].step < 45


@pytest.mark.parametrize("start_full", [True, False])
def test_the_opening_probe_gives_the_step_rate_whatever_the_buffer_held_and_few_steps_wait(start_full):
    controller = EchoController(max_factor=8.0)
    run = simulate(Scenario(ratio=6.0, steps=300, start_full=start_full), controller=controller)
    measured, held = controller.decisions[2], controller.decisions[3]
    steps = zip([0.0] + run.step_ends, run.step_ends[:held.step])
    waited = sum(1 for start, end in steps if end - start > 1.5)
    assert measured.reference_rate == pytest.approx(1.0)  # s = 1 step per second
    assert controller.ratio == pytest.approx(6.0, rel=0.05)
    # Until it holds: the few waiting steps that measure u, the batch made at the old
    # factor, and with an empty buffer the opening probe's first two batches.
    assert waited <= (5 if start_full else 7), waited


def test_it_holds_exactly_one_when_not_input_bound():
    controller = EchoController(max_factor=8.0)
    run = simulate(Scenario(ratio=0.5, steps=400), controller=controller)
    assert controller.factor == 1.0 and controller.phase == "hold"
    assert set(run.factors[100:]) == {1.0}
    assert any("not input-bound" in d.reason for d in controller.decisions)


def test_it_never_sets_more_than_max_factor_and_says_r_is_a_lower_bound():
    controller = EchoController(max_factor=3.0)
    run = simulate(Scenario(ratio=20.0, steps=600), controller=controller)
    assert max(run.factors) == 3.0 and run.factors[-1] == 3.0
    assert any("R >= " in d.reason and "max_factor=3" in d.reason for d in controller.decisions)


def test_when_r_rises_the_factor_follows_within_60_steps():
    controller = EchoController(max_factor=8.0)
    simulate(Scenario(ratio=schedule((0, 2.0), (300, 5.0)), steps=650), controller=controller)
    raised = [d for d in controller.decisions if d.step >= 300 and d.factor >= 5.0]
    assert raised and raised[0].step - 300 <= 60
    assert holds(controller, 300)[-1].factor == pytest.approx(5.5, rel=0.05)
    assert "baseline" not in [d.phase for d in controller.decisions if d.step >= 300]  # No measurement at e=1.


def test_a_periodic_check_finds_that_r_has_fallen_which_the_step_rate_cannot_show():
    controller = EchoController(max_factor=8.0)
    simulate(Scenario(ratio=schedule((0, 5.0), (300, 2.0)), steps=700), controller=controller)
    assert any("R has fallen" in d.reason for d in controller.decisions)
    assert holds(controller, 300)[-1].factor == pytest.approx(2.2, rel=0.05)


def test_a_check_that_confirms_r_returns_to_the_held_factor():
    controller = EchoController(max_factor=8.0, check_every_steps=100)
    simulate(Scenario(ratio=4.0, steps=600), controller=controller)
    checks = [i for i, d in enumerate(controller.decisions) if d.phase == Phase.CHECK]
    assert len(checks) >= 3
    for i in checks[:-1]:
        back = controller.decisions[i + 1]
        assert back.phase == Phase.HOLD and back.factor == controller.decisions[i].previous_factor
        assert "still about" in back.reason


def test_on_lumpy_input_it_keeps_a_floor_instead_of_dropping_to_one_after_every_quiet_stretch():
    # Fast stretches (the input keeps up at e=1) between slow ones, as a text pipeline's
    # epoch ends and refills give.
    lumpy = schedule(*[(start, ratio) for k in range(6) for start, ratio in ((250 * k, 3.0), (250 * k + 150, 0.5))])
    controller = EchoController(max_factor=8.0)
    run = simulate(Scenario(ratio=lumpy, steps=1500), controller=controller)
    assert controller.lumpy
    became = next(d for d in controller.decisions if "lumpy" in d.reason)
    assert min(run.factors[became.step + 1:]) > 1.5
    plain = simulate(Scenario(ratio=lumpy, steps=1500), controller=EchoController(max_factor=8.0, lumpy_window=0))
    assert run.seconds < plain.seconds  # The floor pays on such input.


def test_on_lumpy_input_a_raise_goes_at_once_to_the_floor_and_one_lump_does_not_set_the_factor():
    lumpy = schedule(*[(start, ratio) for k in range(6) for start, ratio in ((250 * k, 3.0), (250 * k + 150, 0.5))])
    controller = EchoController(max_factor=8.0)
    simulate(Scenario(ratio=lumpy, steps=1500), controller=controller)
    floors = []
    for previous, decision in zip(controller.decisions, controller.decisions[1:]):
        if controller.lumpy and "lumpy" in previous.reason:
            floors.append(decision.step)
    became = next(d for d in controller.decisions if "lumpy" in d.reason)
    # The decision that finds the input lumpy sets the floor it names, not the old cap of twice the factor.
    assert became.factor == float(became.reason.rsplit("at or above ", 1)[1].split()[0])
    later = [d for d in controller.decisions if d.step > became.step]
    assert later and all(d.factor >= 1.5 for d in later)


def test_a_stall_no_factor_covers_is_left_out_and_does_not_raise_the_factor():
    # R = 3 with rare stalls of 60 steps' time (a shuffle buffer refilling): raising e cannot
    # cover them, so they must not read as a rise of R.
    scenario = Scenario(ratio=3.0, steps=2000, stall_probability=0.01, stall_batches=20.0, seed=2)
    controller = EchoController(max_factor=8.0)
    run = simulate(scenario, controller=controller)
    counting = EchoController(max_factor=8.0, stall_batches=1000.0)  # Every stall counted, as before.
    counted = simulate(scenario, controller=counting)
    assert len(controller.stalls) >= 5 and not counting.stalls
    assert not controller.lumpy and counting.lumpy  # Counted, the stalls contradict every check.
    mean = sum(run.factors[300:]) / len(run.factors[300:])
    assert 2.7 < mean < 3.6 and sum(counted.factors[300:]) / len(counted.factors[300:]) > 4.5
    assert run.fresh_batches > 1.2 * counted.fresh_batches


def test_it_does_not_take_steady_input_for_lumpy():
    for ratio in (1.0, 2.0, 4.0):
        controller = EchoController(max_factor=8.0)
        simulate(Scenario(ratio=ratio, steps=650, jitter=0.35, seed=1), controller=controller)
        assert not controller.lumpy, ratio


def test_a_warm_start_at_r_costs_less_than_starting_at_one():
    cold = simulate(Scenario(ratio=6.0, steps=300), controller=EchoController(max_factor=8.0))
    warm = simulate(Scenario(ratio=6.0, steps=300), factor=6.6, controller=EchoController(max_factor=8.0, initial_factor=6.6))
    assert warm.seconds < cold.seconds


def test_interrupt_keeps_a_pause_out_of_the_rate():
    def with_pause(interrupt):
        controller = EchoController(max_factor=8.0, pause_factor=1e9)  # Only interrupt() can tell here.
        now = 0.0
        for step in range(200):
            now += 0.1  # Never input-bound: every window runs at 10 steps/s.
            if step in (152, 154):
                # Evaluations between training steps; two in a window, as a window leaves
                # out its slowest step.
                now += 30.0
                if interrupt:
                    controller.interrupt()
            controller.observe(step, now)
        return controller

    assert min(rate for _, rate in with_pause(True).window_rates) > 1
    assert min(rate for _, rate in with_pause(False).window_rates) < 1  # Without it, the pause reads as slow steps.


def test_a_pause_it_was_not_told_about_is_logged_and_does_not_raise_the_factor():
    controller = EchoController(max_factor=8.0)
    run = simulate(Scenario(ratio=0.5, steps=200), controller=controller)
    factor = controller.factor
    decision = controller.observe(200, run.step_ends[-1] + 500.0)  # 500 step-times with no interrupt()
    assert decision is not None and decision.factor == factor == 1.0
    assert "taken as a pause" in decision.reason
    assert controller.observe(201, run.step_ends[-1] + 501.0) is None  # Measuring resumes.


def dispatch_timestamps(steps, dispatch=0.0003, stall=0.2, queue=16):
    """What a JAX loop that timestamps at dispatch records: fast steps, and a long stall whenever the queue fills."""
    now, times = 0.0, []
    for step in range(steps):
        now += stall if step and step % queue == 0 else dispatch
        times.append(now)
    return times


def test_timestamps_taken_at_dispatch_are_called_implausible_and_the_factor_is_kept():
    controller = EchoController(max_factor=8.0)
    for step, timestamp in enumerate(dispatch_timestamps(400)):
        controller.observe(step, timestamp)
    flagged = next(i for i, d in enumerate(controller.decisions) if "implausible" in d.reason)
    assert controller.implausible
    assert "jax.block_until_ready" in controller.decisions[flagged].reason
    # From then on the factor does not move while the stalls go on.
    assert {d.factor for d in controller.decisions[flagged:]} == {controller.decisions[flagged].previous_factor}


def test_a_rare_pause_is_not_implausible():
    controller = EchoController(max_factor=8.0)
    run = simulate(Scenario(ratio=4.0, steps=300), controller=controller)
    end = run.step_ends[-1]
    for k in range(3):  # Three unannounced pauses, 250 steps apart.
        end += 500.0
        controller.observe(300 + 250 * k, end)
        for step in range(301 + 250 * k, 300 + 250 * (k + 1)):
            end += run.step_ends[-1] - run.step_ends[-2]
            controller.observe(step, end)
    assert not controller.implausible


def test_a_timestamp_that_goes_backwards_keeps_the_factor_and_says_why():
    controller = EchoController(max_factor=8.0)
    controller.observe(0, 100.0)
    for step in range(1, 15):
        controller.observe(step, 100.0 + step)
    decision = controller.observe(15, 50.0)
    assert decision.factor == decision.previous_factor
    assert "went back" in decision.reason


def test_a_single_slow_step_does_not_move_the_factor():
    controller = EchoController(max_factor=8.0)
    run = simulate(Scenario(ratio=4.0, steps=100), controller=controller)
    held, decisions = controller.factor, len(controller.decisions)
    assert controller.phase == "hold"
    controller.observe(100, run.step_ends[-1] + 20.0)  # One step 20x the others (not yet a pause).
    for step in range(101, 105):
        controller.observe(step, run.step_ends[-1] + 20.0 + (step - 100))
    assert controller.factor == held and len(controller.decisions) == decisions


def test_in_hold_one_long_wait_per_window_is_the_inputs_rate_and_raises_the_factor():
    # Lumpy input held below R: most steps are served from a burst, one per window waits
    # long. The windows' mean shows the input's rate; leaving the wait out would hide it.
    controller = EchoController(max_factor=8.0)
    run = simulate(Scenario(ratio=2.0, steps=100), controller=controller)
    held = controller.factor
    now = run.step_ends[-1]
    for step in range(100, 140):
        now += 10.0 if step % 10 == 5 else 1.0
        controller.observe(step, now)
    assert controller.factor > held and controller.phase == "verify", controller.decisions[-1]


@pytest.mark.parametrize("ratio", [2.0, 4.0])
def test_on_bursty_input_the_drop_shows_and_r_is_measured_over_whole_bursts(ratio):
    # A text pipeline hands over batches in bursts (buckets filling): at e=1 most steps are
    # served from a burst and every few steps one waits long, so no median of a few steps
    # shows the drop; the mean does.
    for seed in range(3):
        controller = EchoController(max_factor=8.0)
        simulate(Scenario(ratio=ratio, steps=300, burst_batches=3, seed=seed), controller=controller)
        assert not any("not input-bound" in d.reason for d in controller.decisions), controller.decisions
        measured = next(d for d in controller.decisions if "after the buffer drained" in d.reason)
        assert measured.ratio == pytest.approx(ratio, rel=0.35), measured
        assert holds(controller)[-1].factor >= 0.85 * ratio


def test_it_never_calls_input_not_bound_while_the_steps_run_slower_than_the_reference():
    # A drop that no wait showed (one long wait, then steps from a burst): the rate of the
    # last window still tells.
    controller = EchoController(max_factor=8.0)
    now = 0.0
    for step in range(200):
        now += 25.0 if step > 20 and step % 10 == 5 else 1.0
        controller.observe(step, now)
    baseline_end = next(d for d in controller.decisions if d.step > 20)
    assert "not input-bound" not in baseline_end.reason and baseline_end.factor > 1, baseline_end


def test_the_first_call_opens_with_a_probe_and_no_estimate():
    controller = EchoController(max_factor=8.0)
    decision = controller.observe(0, 1.0)
    assert decision.phase == "probe" and decision.factor == 8.0 and math.isnan(controller.ratio)
    assert EchoController(max_factor=1.0).observe(0, 1.0).factor == 1.0


class EveryFourthStep:
    """A loop with steps_per_execution=4: the controller sees every fourth step only."""

    def __init__(self, controller):
        self.controller = controller

    @property
    def factor(self):
        return self.controller.factor

    def observe(self, step, timestamp):
        return self.controller.observe(step, timestamp) if step % 4 == 3 else None


def test_steps_may_skip_as_with_steps_per_execution():
    controller = EchoController(max_factor=8.0)
    simulate(Scenario(ratio=4.0, steps=1200), controller=EveryFourthStep(controller))
    assert controller.ratio == pytest.approx(4.0, rel=0.15)
    assert controller.phase == "hold" and 4.0 <= controller.factor <= 5.5


def test_decisions_carry_step_factor_rates_reason_and_ratio():
    controller = EchoController(max_factor=8.0)
    simulate(Scenario(ratio=4.0, steps=200), controller=controller)
    measured = controller.decisions[2]
    assert measured.previous_factor == 1.0 and measured.phase == "verify"
    assert measured.rate_at(1.0) == pytest.approx(0.25, rel=0.05)
    assert measured.reference_rate == pytest.approx(1.0)
    assert measured.ratio == pytest.approx(4.0, rel=0.05)
    assert str(measured).startswith(f"step {measured.step}: echo factor 1 -> {measured.factor:g} (verify): ")
    assert all(d.phase in PHASES for d in controller.decisions)
    assert math.isnan(EchoController().ratio)
    # Rates are typed values, keyed by nothing parsed: the factor is a field.
    assert [(r.factor, type(r.steps_per_second)) for r in measured.rates] == [(1.0, float)]
    assert measured.rate_at(2.0) is None and math.isnan(controller.decisions[0].reference_rate)


def test_verbose_prints_one_sentence_per_decision(capsys):
    controller = EchoController(max_factor=8.0, verbose=1)
    simulate(Scenario(ratio=4.0, steps=200), controller=controller)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(controller.decisions) and all(line.startswith("echo factor: step ") for line in lines)


def test_settings_may_be_given_whole_or_as_keywords():
    settings = ControllerSettings(max_factor=4.0, check_every_steps=None)
    assert EchoController(settings).settings == EchoController(max_factor=4.0, check_every_steps=None).settings
    assert EchoController(settings).max_factor == 4.0
    assert dataclasses.replace(settings, headroom=1.2).headroom == 1.2
    with pytest.raises(TypeError, match="settings: give a ControllerSettings or keyword settings, not both"):
        EchoController(settings, max_factor=2.0)
    with pytest.raises(TypeError, match="settings: expected a ControllerSettings, got dict"):
        EchoController({"max_factor": 2.0})
    with pytest.raises(TypeError, match="max_factr: not a setting of EchoController"):
        EchoController(max_factr=2.0)


@pytest.mark.parametrize("setting, value, error", [
    ("max_factor", 0.5, ValueError), ("max_factor", "8", TypeError), ("max_factor", math.inf, ValueError),
    ("initial_factor", 0.5, ValueError), ("initial_factor", 9.0, ValueError),
    ("headroom", 0, ValueError), ("min_gain", -0.1, ValueError),
    ("settle_steps", -1, ValueError), ("window_steps", 0, ValueError), ("windows", 0, ValueError),
    ("window_steps", 2.5, TypeError), ("drift_tolerance", 1.5, ValueError), ("patience", 0, ValueError),
    ("check_every_steps", 0, ValueError), ("check_divisor", 1.0, ValueError), ("max_corrections", -1, ValueError),
    ("drain_steps", 0, ValueError), ("drop_steps", 0, ValueError), ("measure_steps", 1, ValueError),
    ("pause_factor", 1.0, ValueError), ("implausible_pauses", 1, ValueError), ("implausible_pauses", 2.0, TypeError),
    ("lumpy_window", -1, ValueError), ("lumpy_estimates", 0, ValueError),
    ("lumpy_supply_window_steps", 11, ValueError), ("lumpy_supply_window_steps", 12.5, TypeError),
    ("verbose", -1, ValueError), ("verbose", True, ValueError),
])
def test_bad_settings_name_the_argument_and_show_the_value(setting, value, error):
    with pytest.raises(error, match=rf"{setting}: .*{value!r}"):
        EchoController(**{setting: value})


def test_observe_rejects_steps_that_do_not_increase_and_timestamps_that_are_not_finite():
    controller = EchoController()
    controller.observe(5, 1.0)
    with pytest.raises(ValueError, match="step: expected steps to increase, got 5 after 5"):
        controller.observe(5, 2.0)
    with pytest.raises(ValueError, match="timestamp"):
        controller.observe(6, math.nan)
    with pytest.raises(TypeError, match="step: expected an int, got float"):
        controller.observe(7.0, 3.0)


# The supply law: observe(step, timestamp, fresh=...) with the echo stage's fresh count.

from echoing.simulation import ELEMENTS_PER_STEP  # noqa: E402


def supplied(**settings):
    return EchoController(max_factor=8.0, elements_per_step=ELEMENTS_PER_STEP, **settings)


@pytest.mark.parametrize("ratio", [2.0, 4.0, 6.0])
def test_with_the_fresh_count_it_settles_near_r_and_no_step_waits_after_the_opening_search(ratio):
    controller = supplied()
    run = simulate(Scenario(ratio=ratio, steps=650), controller=controller, count_fresh=True)
    held = holds(controller)
    assert held and held[0].ratio == pytest.approx(ratio, rel=0.1), [str(d) for d in controller.decisions]
    assert held[-1].factor == pytest.approx(1.1 * ratio, rel=0.1)  # The run may end inside a check.
    # Checks run every 60 steps, yet none makes a step wait: the fresh count shows the lower
    # factor long before the buffer drains.
    durations = [end - start for start, end in zip(run.step_ends, run.step_ends[1:])]
    assert sum(1 for d in durations[held[0].step:] if d > 1.01) == 0
    assert sum(1 for d in controller.decisions if d.phase == Phase.CHECK and d.step > held[0].step) >= 4


def test_with_the_fresh_count_it_holds_one_when_not_input_bound():
    controller = supplied()
    run = simulate(Scenario(ratio=0.5, steps=400), controller=controller, count_fresh=True)
    assert controller.factor == 1.0 and set(run.factors[150:]) == {1.0}
    assert any("no echoing" in d.reason for d in controller.decisions)


def test_with_the_fresh_count_it_follows_r_up_and_down():
    controller = supplied()
    run = simulate(Scenario(ratio=schedule((0, 2), (250, 5), (450, 1.5)), steps=650), controller=controller,
                   count_fresh=True)
    assert 4.5 <= run.factors[400] <= 7.5 and 1.3 <= run.factors[-1] <= 2.3, [str(d) for d in controller.decisions]


def test_with_the_fresh_count_a_warm_start_is_checked_first():
    controller = supplied(initial_factor=4.4)
    simulate(Scenario(ratio=4.0, steps=120), controller=controller, count_fresh=True)
    assert controller.decisions[1].phase == Phase.CHECK and controller.decisions[1].factor == 4.4


def test_with_the_fresh_count_r_above_max_factor_holds_max_factor():
    controller = EchoController(max_factor=3.0, elements_per_step=ELEMENTS_PER_STEP)
    run = simulate(Scenario(ratio=20.0, steps=400), controller=controller, count_fresh=True)
    assert run.factors[-1] == 3.0 and controller.ratio >= 3.0


def test_a_fresh_count_that_goes_back_keeps_the_factor_and_says_why():
    controller = supplied()
    controller.observe(0, 0.0, fresh=0)
    controller.observe(1, 1.0, fresh=640)
    decision = controller.observe(2, 2.0, fresh=64)
    assert decision.factor == decision.previous_factor and "fresh count went back" in decision.reason


@pytest.mark.parametrize("calls, message", [
    ([dict(fresh=-1)], r"fresh: expected a count of fresh elements \(an int >= 0\), got -1"),
    ([dict(fresh=2.5)], r"fresh: expected a count of fresh elements \(an int >= 0\), got 2.5"),
    ([dict(fresh=True)], r"fresh: expected a count of fresh elements \(an int >= 0\), got True"),
    ([dict(fresh=0), dict()], r"fresh: give the fresh count at every call or at none; got None after counts"),
    ([dict(), dict(fresh=0)], r"fresh: give the fresh count at every call or at none; got 0 after none"),
])
def test_bad_fresh_counts_name_the_argument_and_the_value(calls, message):
    controller = supplied()
    with pytest.raises(ValueError, match=message):
        for step, keywords in enumerate(calls):
            controller.observe(step, float(step), **keywords)


def test_a_fresh_count_needs_elements_per_step():
    with pytest.raises(ValueError, match=r"elements_per_step: the fresh count \(0\) needs .* got None"):
        EchoController(max_factor=8.0).observe(0, 0.0, fresh=0)


def records(ratio, seed, steps=sim.DOCUMENT_STEPS):
    """The embedded text's documents split into records of at most 16 batches, as the simulation benchmark reads them."""
    return dataclasses.replace(sim.document_scenario(ratio, seed, sim.RECORD_BATCHES), steps=steps)


@pytest.mark.parametrize("seed", [0, 1])
def test_with_the_fresh_count_lumpy_input_is_named_and_then_the_factor_neither_chains_down_nor_leaps(seed):
    controller = supplied()
    simulate(records(4.0, seed), controller=controller, count_fresh=True)
    log = [str(d) for d in controller.decisions]
    named = next(i for i, d in enumerate(controller.decisions) if "the input is lumpy" in d.reason)
    after = controller.decisions[named + 1:]
    assert controller.lumpy and len(after) > 10, log
    # A check that finds the input keeping up holds its factor: no check follows a check.
    assert not any(a.phase == b.phase == Phase.CHECK for a, b in zip(after, after[1:])), log
    # A raise at most doubles the factor (and never leaps from 1 to max_factor on one stall).
    assert all(d.factor <= 2 * d.previous_factor + 0.01 for d in after), log


@pytest.mark.parametrize("seed", [0, 1])
def test_with_the_fresh_count_lumpy_input_is_measured_over_windows_that_hold_several_records(seed):
    controller = supplied()
    simulate(records(4.0, seed, steps=3000), controller=controller, count_fresh=True)
    named = next(i for i, d in enumerate(controller.decisions) if "the input is lumpy" in d.reason)
    measured = [d for d in controller.decisions[named:] if d.rates]
    gaps = [later.step - earlier.step for earlier, later in zip(measured, measured[1:])]
    assert len(gaps) > 5 and min(gaps) >= controller.settings.lumpy_supply_window_steps, gaps


def test_with_the_fresh_count_long_windows_keep_lumpy_input_off_max_factor():
    # One 12-step window reads a flood or a stall; a raise to a stall's estimate is a raise to max_factor.
    def share_at_max(window):
        controller = supplied(lumpy_supply_window_steps=window)
        run = simulate(records(2.0, 0, steps=3000), controller=controller, count_fresh=True)
        return sum(factor >= 8.0 for factor in run.factors) / len(run.factors)

    assert share_at_max(120) <= share_at_max(12) - 0.15


@pytest.mark.parametrize("scenario", [Scenario(ratio=4.0, steps=650), Scenario(ratio=4.0, steps=650, jitter=0.35, seed=2),
                                      Scenario(ratio=schedule((0, 2), (300, 5)), steps=650),
                                      Scenario(ratio=schedule((0, 6), (300, 1)), steps=650)],
                         ids=["steady", "jitter", "rise", "fall"])
def test_with_the_fresh_count_smooth_input_is_never_taken_for_lumpy(scenario):
    controller = supplied()
    simulate(scenario, controller=controller, count_fresh=True)
    assert not controller.lumpy, [str(d) for d in controller.decisions]


class Recorded:
    """A controller that keeps the last observation it was given, and each decision with the
    readings of R it had kept on lumpy input when it took it."""

    def __init__(self, controller):
        self.controller, self.last, self.decisions = controller, None, []

    def observe(self, step, timestamp, fresh=None):
        self.last = (step, timestamp, fresh)
        decision = self.controller.observe(step, timestamp, fresh=fresh)
        if decision is not None:
            self.decisions.append((decision, list(self.controller._lumpy_readings)))
        return decision

    @property
    def factor(self):
        return self.controller.factor


@pytest.mark.parametrize("seed", [0, 1])
def test_with_the_fresh_count_a_raise_on_lumpy_input_goes_no_higher_than_the_median_reading(seed):
    recorded = Recorded(supplied())
    simulate(records(4.0, seed, steps=3000), controller=recorded, count_fresh=True)
    controller = recorded.controller
    named = next(i for i, (d, _) in enumerate(recorded.decisions) if "the input is lumpy" in d.reason)
    raises = [(d, readings) for d, readings in recorded.decisions[named + 1:] if d.factor > d.previous_factor]
    assert len(raises) > 3
    for decision, readings in raises:
        median = statistics.median(readings)
        assert decision.factor <= max(controller._factor_for(median), decision.previous_factor) + 0.01, decision


def test_with_the_fresh_count_a_lagging_count_without_waiting_steps_raises_nothing_once_lumpy():
    recorded = Recorded(supplied())
    simulate(records(4.0, 0, steps=3000), controller=recorded, count_fresh=True)
    controller = recorded.controller
    assert controller.lumpy
    # Hold at the factor in force, then: steps at the step's own rate while the count stands still
    # (the buffers after the echo stage serve them).
    step, now, fresh = recorded.last
    while controller.phase != Phase.HOLD:
        step, now, fresh = step + 1, now + 1.0, fresh + int(64 / controller.factor)
        controller.observe(step, now, fresh=fresh)
    held, decisions = controller.factor, len(controller.decisions)
    for _ in range(50):
        step, now = step + 1, now + 1.0
        controller.observe(step, now, fresh=fresh)
    assert controller.factor <= held, [str(d) for d in controller.decisions[decisions:]]
