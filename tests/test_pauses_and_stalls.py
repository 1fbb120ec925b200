"""The loop's own pauses told from the input's stalls across a change of factor (echoing/control/pauses_and_stalls.py)."""

import pytest

from benchmarks.lib import loops
from echoing.control.pauses_and_stalls import MIN_PERIOD_STEPS, PauseLattice, ShrinkingStalls
from echoing.control.windows import StepClock


def _long_intervals(lattice, steps, factor, width=1):
    return [lattice.place(step, width, factor) for step in steps]


def test_pauses_every_so_many_steps_are_confirmed_once_the_lattice_holds_across_a_change_of_factor():
    lattice = PauseLattice()
    assert _long_intervals(lattice, (79, 159, 239, 319), 2.0) == [None] * 4  # One factor: not yet.
    assert not lattice.confirmed
    assert _long_intervals(lattice, (399, 479), 3.0) == [True, True]
    assert lattice.confirmed
    assert lattice.place(500, 1, 3.0) is False  # Between its points: not a pause by the lattice.
    assert lattice.place(559, 1, 3.0) is True


def test_stalls_whose_spacing_moves_with_the_factor_never_confirm_a_lattice():
    # A lump of 20 batches stalls every 20 e steps: every 40 steps at e = 2, every 60 at e = 3.
    lattice = PauseLattice()
    results = _long_intervals(lattice, range(40, 321, 40), 2.0) + _long_intervals(lattice, range(380, 1000, 60), 3.0)
    assert set(results) == {None} and not lattice.confirmed


def test_a_confirmed_lattice_whose_points_pass_without_a_long_interval_is_dropped():
    lattice = PauseLattice()
    _long_intervals(lattice, (100, 200, 300), 2.0)
    _long_intervals(lattice, (400, 500), 4.0)
    assert lattice.confirmed
    lattice.passed(650)  # Point 600 passed: one miss is forgiven.
    assert lattice.confirmed
    lattice.passed(750)  # Point 700 too.
    assert not lattice.confirmed
    assert lattice.place(800, 1, 4.0) is None


def test_an_unconfirmed_lattice_is_dropped_at_its_first_miss():
    lattice = PauseLattice()
    _long_intervals(lattice, (100, 200, 300), 2.0)
    lattice.passed(420)
    assert _long_intervals(lattice, (500, 600), 4.0) == [None, None] and not lattice.confirmed


def test_long_intervals_closer_than_the_least_period_form_no_lattice():
    lattice = PauseLattice()
    period = MIN_PERIOD_STEPS - 8
    steps = range(period, 12 * period, period)
    assert set(_long_intervals(lattice, steps[:6], 2.0) + _long_intervals(lattice, steps[6:], 4.0)) == {None}


def test_with_steps_per_execution_the_lattice_allows_an_intervals_width():
    # Pauses every 79 steps, seen by a loop that calls observe every 8: at the first call after each.
    lattice = PauseLattice()
    seen = [8 * (79 * k // 8 + 1) - 1 for k in range(1, 8)]
    results = _long_intervals(lattice, seen[:4], 2.0, width=8) + _long_intervals(lattice, seen[4:], 4.0, width=8)
    assert results[-2:] == [True, True]


@pytest.mark.parametrize("factor_after", [2.0, 4.0])
def test_the_clock_charges_a_pause_on_a_confirmed_lattice_even_where_the_echo_stage_worked_through_it(factor_after):
    # 10 ms steps; every 100 steps a pause of 1 s in which the echo stage refilled 10 batches of its buffer.
    clock = StepClock(elements_per_step=1)
    clock.end_opening()
    now, fresh, factor = 0.0, 0, 2.0
    for step in range(1000):
        if step == 500:
            factor = factor_after
        now += 0.01
        fresh += 1 if step % 2 else 0
        if step % 100 == 99:
            now += 1.0
            fresh += 10
        clock.observe(step, now, fresh=fresh, factor=factor)
    if factor_after == 2.0:
        assert clock.pause_per_step == 0.0  # One factor: the intervals count as the input's time, as before.
    else:
        assert clock.pause_per_step == pytest.approx(5 * 1.0 / 999)  # The pauses at 599-999 charged.


def test_long_intervals_that_shrink_at_higher_factors_are_stalls_and_those_that_do_not_are_not():
    stalls = ShrinkingStalls()
    # Spaced so that what they cost a step does not move: only how long they last tells here.
    assert stalls.note(4.0, 2.0, step=100, first_step=0, typical_seconds=0.01) is False  # Nothing above yet.
    assert stalls.note(2.0, 2.1, 205, 0, 0.01) is False  # As long as at e = 4: not by this rule.
    assert stalls.note(1.0, 6.0, 505, 0, 0.01) is True  # Three times as long as above it.
    assert stalls.note(1.0, 1.0, 550, 0, 0.01) is True  # The median there still is.


def test_long_intervals_as_long_at_every_factor_that_cost_each_step_more_at_lower_factors_are_stalls():
    # Lumps of 20 batches every 15 s: a stall of about 13 s at any factor, every 20 e steps.
    stalls = ShrinkingStalls()
    assert stalls.note(4.0, 13.0, step=80, first_step=0, typical_seconds=0.08) is False
    assert stalls.note(2.0, 13.5, 120, 0, 0.08) is False  # One at e = 2 is not enough.
    assert stalls.note(2.0, 13.4, 160, 0, 0.08) is True  # Twice what they cost a step at e = 4.


def test_what_a_long_interval_costs_a_step_counts_only_long_ones_far_enough_apart():
    def at_two(typical_at_two, steps_at_two):
        stalls = ShrinkingStalls()
        stalls.note(4.0, 20.0, step=80, first_step=0, typical_seconds=0.5)  # 0.25 s a step.
        return [stalls.note(2.0, 15.0, step, 0, typical_at_two) for step in steps_at_two]

    assert at_two(0.1, (120, 160)) == [False, True]  # 0.375 s a step at e = 2: stalls.
    # The same, under 16 times the interval's typical time (a dispatch queue's wait): not counted.
    assert at_two(1.0, (120, 160)) == [False, False]
    # The same, under 32 steps from the one before alike: not counted.
    assert at_two(0.1, (100, 110)) == [False, False]


def test_pauses_every_so_many_steps_cost_each_step_the_same_at_any_factor():
    stalls = ShrinkingStalls()
    notes = [stalls.note(factor, 1.5, step, 0, 0.08) for factor, step in ((16.0, 496), (8.0, 992), (8.0, 1488))]
    assert notes == [False, False, False]


def test_the_clock_takes_back_the_pauses_charged_at_a_factor_whose_long_intervals_prove_to_be_stalls():
    # 10 ms steps; stalls of 2.5 s at e = 2, of 1 s at e = 8 (each lump lasts longer there).
    clock = StepClock(elements_per_step=1)
    clock.end_opening()
    now, fresh = 0.0, 0
    long_at = {50: (2.0, 2.5), 170: (8.0, 1.0), 250: (2.0, 2.5)}
    for step in range(300):
        factor = 8.0 if 100 <= step < 200 else 2.0
        now += 0.01 + long_at.get(step, (0, 0.0))[1]
        fresh += 0 if step in long_at else 1
        clock.observe(step, now, fresh=fresh, factor=factor)
        if step == 249:
            assert clock.pause_per_step == pytest.approx((2.5 + 1.0) / 249)  # Both charged as pauses so far.
    assert clock.pause_per_step == pytest.approx(1.0 / 299)  # The one at e = 8 stays; e = 2's were stalls.


def test_the_law_holds_max_factor_where_lumps_stall_as_long_at_every_factor():
    # The sweep's seed 46 (R 9.8 over max_factor 4; lumps of 20 batches into a buffer of 3: a
    # stall of about 13.5 s at every factor). Charged as pauses, the stalls read the input as
    # keeping up, and the law held 2.7 on average, 1.36 times e = 4's time at c = 0.05
    # (docs/decisions/0028-what-a-stall-costs-each-step.md).
    case = loops.draw_case(46)
    law = loops.run_controlled(case, loops.the_law(case))
    at_max = loops.run_fixed(case, case.max_factor)
    slope = min(loops.SLOPES)
    assert law.time_to_progress(loops.PROGRESS, slope) < 1.1 * at_max.time_to_progress(loops.PROGRESS, slope)


def test_the_law_trains_near_no_echo_where_long_pauses_let_the_input_keep_up():
    # The sweep's seed 35 (R 1.6 falling to 0.85, pauses of 3.8 s every 67 steps into a buffer of
    # 32 batches): taken for the input's time, the pauses held the law at 3.6 on average and 1.39
    # times e = 1's time at c = 0.19 (docs/decisions/0027-pauses-and-stalls-across-factors.md).
    case = loops.draw_case(35)
    law = loops.run_controlled(case, loops.the_law(case))
    none = loops.run_fixed(case, 1.0)
    slope = max(loops.SLOPES)
    assert law.time_to_progress(loops.PROGRESS, slope) < 1.2 * none.time_to_progress(loops.PROGRESS, slope)
