"""What echo factor to run next, from the readings at the factors run so far: open, search, hold, climb, check.

The objective is the training progress per second, ``T(e) / (1 + c (e - 1))``: ``T(e)``
is the step rate read at factor ``e``, ``c`` the cost of a copy (``copy_cost``; a step on
data echoed ``e`` times makes ``1 / (1 + c (e - 1))`` of a fresh step's progress). The
policy knows two rates: the step's own rate ``s`` (the fastest steps read so far, where
the input keeps up) and, through each reading where it cannot, ``R = e * s / production``.
Where the input arrives batch by batch the objective peaks at ``R``: below it steps wait,
above it copies cost progress and buy no step rate. The policy moves through five phases
(:class:`Phase`):

* ``OPEN``: ``max_factor``, where the input is outrun if anywhere: its step rate is ``s``,
  unless the steps between the echo stage's pulls ran faster than the opening's steps did
  on the whole (``pull_free_rate``, :meth:`echoing.control.windows.StepClock.pull_free_rate`):
  then the steps waited for input even at ``max_factor``, ``s`` is that faster rate, and
  the opening gives ``R = max_factor * s / made`` (``made``: the output batches the echo
  stage made per second). Where that R is at least ``max_factor`` the law holds
  ``max_factor`` at once, without a search below it. Where the loop gives its wait for
  input (``input_wait``) but the opening had no steps between pulls to read (the loop
  calls ``observe`` no more often than the stage pulls), and the loop waited
  :data:`WAIT_BEHIND` of the opening or more, ``s`` is the opening's steps over the time
  it did not wait, and the search reads R: such an opening was behind at ``max_factor``,
  or met a slow start.
* ``SEARCH``: ``sqrt(max_factor)``, the middle of ``[1, max_factor]`` on a log scale,
  halved while the input keeps up (R is below it), until a reading says it cannot (then
  R is known) or the factor is 1 (training is not input-bound). A reading above R costs
  copies, one below R costs steps that wait; starting in the middle spends fewer of
  either than starting at ``max_factor / 2`` (:data:`SEARCH_START`).
* ``HOLD``: the knee, ``headroom * R`` (within ``[1, max_factor]``). A reading there that
  finds the input behind with R risen raises the factor to the new knee at once, but no
  higher than a raise could pay (:meth:`Policy.raise_limit`): steps can run no faster than
  ``s`` (with the loop's pauses in, less the reading's error), so past the factor where
  steps at that rate would make the progress a second the reading made, every copy costs
  more than it can bring (:attr:`Cause.RAISE_LIMITED`). Above R on lumpy input, or behind
  long pauses, the steps wait a little at every factor, R reads above each factor held,
  and raises to the knee ratcheted the factor up, past the objective's best at any copy
  cost (design seed 1174 of ``benchmarks/controller_sweep.py``: R = 2.9, lumps of 9 into a
  buffer of 13, held 5.8 on average and up to 8, with the best fixed factors 3.5-7.4;
  with this limit and the floods' rule below it goes from 1.197 to 1.077 times the best
  one's time at c = 0.19:
  docs/decisions/0024-where-the-tail-errs-and-two-guards.md). A raise whose next reading
  runs the steps no faster, where R read no higher for the factor (:data:`RISE_OF_R`), is
  undone (:attr:`Cause.RAISE_UNDONE`): steps no faster pay for no copy; not where the raise
  reached ``max_factor`` and its reading found the input behind there, where no reading
  goes lower (decision 0032). A raise whose
  steps ran faster but that trained slower by the objective than the reading before it
  goes back to read the factor below afresh (:attr:`Cause.RAISE_REREAD`): that reading may
  have drawn on a stock, or R may have risen since. If the factor below trains at least
  as fast, read afresh, the raise did not pay (:attr:`Cause.RAISE_UNPAID`); otherwise it
  is made again (:attr:`Cause.RAISE_PAID`). Where the knee recedes (lumps), each raise
  to the knee runs the steps a little faster and trains slower; judged by its step rate
  alone, design seed 1196 of ``benchmarks/controller_sweep.py`` (R = 6.6, lumps of 5 into
  a buffer of 13) ratcheted from 6.9 to 12.9 where the best fixed factor is 4.6-5.6
  (docs/decisions/0026-a-raise-judged-by-the-objective-read-afresh.md). No raise is made
  from the factor a raise went back to (:attr:`Cause.RAISE_WITHHELD`) until the input
  reads slower, or the steps there run slower than they did at the raise (the reading
  before it drew on a stock).
* ``CLIMB``: where steps still wait at the factor held (lumpy input, small buffers: the
  step rate read is below ``s``), a raise by :data:`CLIMB_STEP` is tried if it could pay
  (the loop's rate where the input keeps up, ``s`` with the loop's pauses in, which the
  reading was held against, over the rate read beats the raise's cost in progress). If
  its reading trains faster by the objective it is kept and the climb goes on; if not,
  the factor goes back and no raise is tried from there again until the factor moves.
* ``CHECK``: after ``check_every_steps`` of holding, the factor is divided by
  ``check_divisor``, below R: a reading there gives R afresh, within
  :data:`echoing.control.estimate.CHECK_MAX_STEPS` steps. A check's reading that cannot
  tell (short of the threshold by less than the tolerance: ``Reading.marginal``) gives R
  from its sums too, rather than reading as keeping up: a check just below R reads that
  way. If R stayed put (the knee
  within :data:`CONFIRM_BAND`), the factor goes back to the one held, climbed or not,
  and the next check waits twice as long (up to :data:`MAX_CHECK_BACKOFF` times); if R
  moved, the factor goes to the new knee; if the input keeps up even there, R fell,
  and the search goes on down from there, by :data:`AFTER_CHECK_DIVISOR` at a time rather
  than by 2: a check that keeps up is often the stock the buffers banked at the factor
  held, not a large fall of R. For the same reason, after the first hold a reading in a
  check or a search that keeps up while the echo stage drew fresh batches over
  :data:`FLOOD_SHARE` times as fast as the input made them at its last reading behind
  reads on at that factor, up to :data:`FLOOD_READINGS` readings more (:attr:`Cause.FLOOD`),
  before the search goes lower. There is no check while the input is behind
  at ``max_factor`` (a lower factor can only be slower there): once a reading finds it
  behind there, or R at or above ``max_factor`` anywhere, checks run again only after
  readings at ``max_factor`` have found it keeping up for :data:`AT_MAX_KEEPS_UP_STEPS`
  steps in a row; on lumpy input a shorter stretch can be the flood after a lump (the
  buffers and the upstream's prefetch full). Where only the opening's steps between
  pulls put R at or above ``max_factor`` (no reading found the input behind), the first
  reading at ``max_factor`` that keeps up ends that: on a step jittered by 20-37% those
  steps read 8-13% fast with the input keeping up
  (reported sweep seed 85, R = 1.5: R read 8.9 at ``max_factor`` 8), and 640 steps at
  ``max_factor`` before the first check left seed 85 at 1.30 times the best fixed
  factor's time at c = 0.19, and held-out seed 1262 (R = 0.5) at 1.36; the first reading
  that keeps up takes them to 1.16 and 1.20
  (docs/decisions/0023-the-median-is-the-search-and-one-copy-cost.md, row 1b).

**The factor above.** A reading in a search or a check, at a factor below the one read
before it, that trained slower by the objective than that reading did (beyond both
readings' errors) goes back to that factor and holds it (:attr:`Cause.SLOWER_BELOW`),
where the count read the input as keeping up there, or as behind with an R whose knee
lies below the factor above and could not train as fast: steps at the knee, at most as
fast as the factor above's and fed by the fresh batches this reading's input made, would
make less progress a second than the factor above did. A knee that could is held, as any
reading behind gives: the lower factor trained slower only for waiting below the knee
(the ResNet replay at R = 6 of ``benchmarks/time_to_target.py``: e = 2.8 behind, R = 5.7,
went back to ``max_factor`` 8 at 1.13 times e = 6's time; decision 0030). A lower factor
has fewer copies to pay for; if it trains slower all the same, its steps waited, and
going lower can only wait more. This places the stalls the
clock's pause rule cannot: a lump read whole into a small buffer leaves the echo stage
nothing to pull during its stall, as a pause with full buffers does, so the clock charges
it to the loop, the loop rate the reading is held against falls with it, and the count
reads "keeps up" (reported sweep seed 173: R = 8.1 over ``max_factor`` 4, lumps of 29
into a buffer of 2; at e = 2 its steps ran at 4.0 a second against 26 at e = 4, read as
keeping up, and the search went down to 1). Where the recent long intervals keep a
lattice of steps (:class:`echoing.control.pauses_and_stalls.PauseLattice`, confirmed or
not) they are likelier the loop's own pauses, which a short reading at the factor above
can miss (the opening's 24 steps between pauses every 57: design seed 1064), and the rule
is not applied; nor where the loop gives its wait for input, which places each long
interval itself. On the design seeds of ``benchmarks/controller_sweep.py`` it moves no p95
by over 0.001 and takes the worst over ``max_factor`` where R stays at or above it from
1.118 / 1.072 to 1.079 / 1.042 (c = 0.05 / 0.19); on the held-out seeds it moves neither
(docs/decisions/0029-the-factor-above.md).

**Where the echo stage pulls on the loop's own thread** (``pulls_on_loop_thread``:
:func:`echoing.torch.echo`), a step that pulls pays for the hand-over, so ``s`` at factor
``e`` is ``1 / (1 / pull_free_rate + p / e)``, ``p`` the pulls' cost a fresh batch read
from the factors run (:mod:`echoing.control.pull_cost`); no factor below the cost's floor
is run (:attr:`Cause.PULL_COST`), and the opening does not hold ``max_factor`` at once
(its steps between pulls ran faster by the cost, not by waits).

A reading **held back** (a trainer in step whose loop did not wait for its own input
while another's held the steps back) keeps the factor and holds it (a check's goes back
to the factor it left); in ``HOLD`` it counts as keeping up.

After the opening, ``s`` is the rate of the recent steps between the echo stage's pulls
once they hold :data:`PULL_FREE_MIN_STEPS` steps (``pull_free_rate``), at every reading,
up or down: a mean over a few hundred steps that did not wait, not the fastest reading
so far, which a jittered step biases high (design seed 1310 of
``benchmarks/controller_sweep.py``: 33% step jitter, R = 0.54, an opening read 11% fast
and every reading after it read "behind", up to ``max_factor`` 16). It may read a little
fast itself: where the echo stage pulls as the input's reads arrive (the input behind, or
barely keeping up), an interval is the likelier to hold a pull the longer it is, so the
pull-free ones are the shorter, by about the steps' squared coefficient of variation
times the pulls per step (15% at 36% step jitter and e = 1, design seed 1032). Lowering
``s`` only, and never raising it, was screened and not taken: trainers in step (whose
steps between pulls wait for the slowest trainer) ratcheted ``s`` down to their shared
rate and held too little echo (docs/decisions/0015-the-steps-between-pulls.md). A
reading at a factor whose step rate beats ``s`` by more than twice its error (and at
least 10%) raises ``s`` to it; two raises to a new knee in a row that brought no faster
steps lower ``s`` to the rate measured (it was read too high, or the step got slower).

>>> policy = Policy(max_factor=8.0, headroom=1.05, check_divisor=1.25, check_every_steps=200)
>>> policy.factor, policy.phase.value
(8.0, 'open')
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Optional

from echoing.control.estimate import Reading, ratio_from_sums
from echoing.control.pull_cost import PullCost


# Raises in a row that brought no faster steps before the step's own rate is taken to be
# lower: one can be a rise of R between the two readings (tests/test_auto_echo.py, R 2 -> 5
# mid-run), two in a row is an own rate read too high on a jittered step (the sweep's
# seed 1041, 37% step jitter, ran away to max_factor without this rule).
FUTILE_RAISES = 2
# A raise in a hold whose next reading ran the steps no faster (within the reading's error)
# is undone, unless that reading found the input slower: R over the factor grown past this
# share of what the reading before the raise read (a rise of R between the two, which a hold
# follows). Steps no faster can pay for no copy. On this CPU the wallclock run at R = 2,
# seed 0 (benchmarks/results/time_to_target.json) raised from 2.8 to 8 with its steps at
# 5.4 a second at 2.8 and 4.5-5.1 at 4.2-8, and held 8 for three quarters of the run; on the
# design seeds of benchmarks/controller_sweep.py the rule takes the p95 at c = 0.19 from
# 1.147 to 1.138 and on the held-out ones from 1.140 to 1.112
# (docs/decisions/0024-where-the-tail-errs-and-two-guards.md, row 11b).
RISE_OF_R = 1.25
# Steps in a row that readings at max_factor must find the input keeping up before checks
# run again, once it was behind there: on design seed 1025 of benchmarks/controller_sweep.py
# (R = 13.4 over max_factor 8, lumps of 13 batches into a buffer of 27 and a prefetch of
# 12) a flood read "keeps up" over 304 steps at e = 8, and the checks that followed
# searched down to 1.6. Two horizons of a reading (estimate.MAX_STEPS); 300 left 1.277 x
# e = max_factor's time on the design seeds' worst such loop, 640 and 1,000 1.255.
AT_MAX_KEEPS_UP_STEPS = 640
# A check whose reading puts the factor back within this share of the one it left
# confirms it, and the next check waits twice as long, up to MAX_CHECK_BACKOFF times
# check_every_steps: a loop whose R stays put pays for few checks. Any other outcome, or
# a raise, brings the checks back to every check_every_steps.
CONFIRM_BAND = 0.1
MAX_CHECK_BACKOFF = 8
# The search starts at max_factor ** SEARCH_START: 0.5, the middle of [1, max_factor] on a log
# scale. On the design seeds of benchmarks/controller_sweep.py (1000-1199, c = 0.05 / 0.19)
# it took the law's median from 1.035 / 1.032 to 1.029 / 1.025 over the best fixed factor,
# its worst from 1.618 / 1.577 to 1.379 / 1.501 and its worst over max_factor where R is above
# it from 1.204 / 1.168 to 1.080 / 1.043, against a search from max_factor / 2
# (docs/decisions/0014-the-search-starts-in-the-middle.md).
SEARCH_START = 0.5
# A climb above the knee raises the factor by this much at a time (1.5 did no better on the
# design seeds, docs/decisions/0012-the-objective-and-copy-cost.md).
CLIMB_STEP = 1.25
# A search that goes on from a check that kept up lowers the factor by this much at a time,
# not by 2: on the design seeds 1000-1199 of benchmarks/controller_sweep.py it took the p95
# over the best fixed factor from 1.188 / 1.187 to 1.166 / 1.171 (c = 0.05 / 0.19) and the
# worst at c = 0.19 from 1.533 to 1.417 (docs/decisions/0015-the-steps-between-pulls.md).
AFTER_CHECK_DIVISOR = 1.5
# A raise smaller than this share is not made: within a reading's noise.
MIN_RAISE = 1.05
# After the first hold, a reading in a search or a check that keeps up while the echo stage
# drew fresh batches over FLOOD_SHARE times as fast as the input made them at its last
# reading behind is taken for the stock a lump left (the upstream's prefetch, the buffers),
# not for a fall of R: the search reads on at that factor, up to FLOOD_READINGS readings more,
# before it goes lower. On lumpy input into small buffers such floods kept up over the
# search's 64-step readings down to a fraction of R (design seed 1063 of
# benchmarks/controller_sweep.py: R = 11.7, lumps of 31 batches, a buffer of 7, searched
# down to 1.7 twice; a lump outlasts three readings there, and the rule leaves it at 1.375
# times the best fixed factor's time at c = 0.05). Design seed 1075 (R 7.0 stepping to 1.4,
# lumps of 13, a buffer of 3): 1.380 to 1.280. Three readings, twice the supply: set before
# they were screened, and none of 1.5 or 3 times, or two readings, did better at both c
# (docs/decisions/0024-where-the-tail-errs-and-two-guards.md, rows 3-4).
FLOOD_SHARE = 2.0
FLOOD_READINGS = 3
# The pull-free steps the step's own rate is read from after the opening: at least this
# many, so that a jittered step does not set it from a few.
PULL_FREE_MIN_STEPS = 64
# The opening's steps between pulls read the step's own rate from at least this many.
OPENING_PULL_FREE_MIN_STEPS = 8


# An opening without steps between pulls whose loop waited for its input this share of its
# time was behind at max_factor or met a slow start; under it, the wait is taken for the
# call's own cost. Two trainers reading through a tf.data service (tests/test_two_trainers.py)
# spent 0.23-0.24 of their openings in next() with the input outrun. 0.25 and 0.5 give the
# same figures on the sweep's design and held-out seeds given the wait; without the rule
# the worst loop of each set is one it fixes (1.638 and 1.932: decision 0019).
WAIT_BEHIND = 0.5


class Phase(str, enum.Enum):
    """What the controller is doing (a ``str``, so ``phase == "hold"`` holds too)."""

    OPEN = "open"
    SEARCH = "search"
    HOLD = "hold"
    CLIMB = "climb"
    CHECK = "check"

    def __str__(self) -> str:
        return self.value


class Cause(str, enum.Enum):
    """Why a decision was taken (a ``str``)."""

    START = "start"  # the opening factor
    OWN_RATE = "own_rate"  # the opening measured the step's own rate
    KEEPS_UP = "keeps_up"  # the input kept up at the factor: R is below it, the search goes lower
    NOT_INPUT_BOUND = "not_input_bound"  # the input kept up at factor 1
    MEASURED = "measured"  # the input could not keep up: R measured, factor set to headroom * R
    INPUT_SLOWER = "input_slower"  # in HOLD the input fell behind: R rose, factor raised
    SLOWER_THAN_MAX = "slower_than_max"  # the input cannot keep up even at max_factor
    STEP_SLOWER = "step_slower"  # two raises in a row brought no faster steps: the step's own rate is lower
    CLIMB = "climb"  # steps still wait for input at the factor held: a raise above it is tried
    RAISE_PAID = "raise_paid"  # a climb's raise, or a hold's against the factor below read afresh, trained faster: kept
    RAISE_UNPAID = "raise_unpaid"  # such a raise trained no faster: back to (or kept at) the factor below
    RAISE_LIMITED = "raise_limited"  # in HOLD the input fell behind, but no raise past this factor could pay
    RAISE_UNDONE = "raise_undone"  # a raise in HOLD brought no faster steps, the input no slower: back
    RAISE_REREAD = "raise_reread"  # a raise in HOLD ran the steps faster but trained slower: the factor below read afresh
    RAISE_WITHHELD = "raise_withheld"  # no raise from the factor a raise was undone to, the input no slower since
    FLOOD = "flood"  # the input kept up on a lump's stock (see FLOOD_SHARE): reading on at this factor
    CHECK = "check"  # a periodic check below the held factor
    PULL_COST = "pull_cost"  # the echo stage's pulls cost the loop's thread more than the copies below this factor
    HELD_BACK = "held_back"  # another trainer's input held the steps back: the factor is kept
    SLOWER_BELOW = "slower_below"  # a lower factor trained slower than the factor read above it: back up to that one
    LEFT_OUT = "left_out"  # an interval was not measured (a pause, a clock that went back, ...)

    def __str__(self) -> str:
        return self.value


def progress_per_second(step_rate: float, factor: float, copy_cost: float) -> float:
    """The objective: steps per second times a step's progress at ``factor``, ``1 / (1 + c (e - 1))``.

    >>> round(progress_per_second(10.0, 4.0, 0.1), 3)
    7.692
    """
    return step_rate / (1 + copy_cost * (factor - 1))


class Policy:
    """The phases of the law (see the module docstring); :class:`echoing.EchoController` feeds it readings.

    Args:
      max_factor: the largest factor; the opening's.
      headroom: the held factor is ``headroom * R``.
      check_divisor: a check runs at the held factor over this.
      check_every_steps: steps of holding between checks (``None``: never).
      initial_factor: above 1, the search starts there instead of at ``max_factor ** SEARCH_START``.
      pulls_on_loop_thread: the echo stage pulls on the loop's own thread: ``s`` at factor
        ``e`` includes the pulls' cost, and no factor below the cost's floor is run
        (:mod:`echoing.control.pull_cost`); the opening does not hold ``max_factor`` at once.
    """

    def __init__(self, max_factor: float, headroom: float, check_divisor: float,
                 check_every_steps: Optional[int], initial_factor: float = 1.0, copy_cost: float = 0.13,
                 tolerance: float = 0.08, pulls_on_loop_thread: bool = False) -> None:
        self.max_factor = float(max_factor)
        self.tolerance = tolerance
        self.copy_cost = copy_cost
        self.headroom = headroom
        self.check_divisor = check_divisor
        self.check_every_steps = check_every_steps
        self.initial_factor = float(initial_factor)
        self.phase = Phase.OPEN if max_factor > 1 else Phase.HOLD
        self.factor = self.max_factor
        self.own_rate = math.nan
        self.own_wait = 0.0  # the share of the opening's time spent in next(iterator): the call's own cost
        self.ratio = math.nan
        self.held_since: Optional[int] = None
        self._last_raise: Optional[tuple[float, float]] = None  # (step rate before, factor before)
        self._futile_raises = 0  # raises in a row after which the steps ran no faster
        self._backoff = 1
        self._checked_from = None
        self.behind_at_max = False  # the input was behind at max_factor, and no long reading there says otherwise since
        self._behind_at_max_inferred = False  # behind_at_max set by the opening's steps between pulls alone
        self._keeps_up_at_max_since: Optional[int] = None  # the first step of the readings at max_factor that keep up
        self._below: Optional[tuple[float, float]] = None  # (factor, objective) a raise left
        self._climb_ended: Optional[float] = None  # the factor a raise that did not pay went back to
        self._after_check = False  # the search goes on from a check that kept up
        self._supply = math.nan  # fresh batches a second the input made at the last reading behind
        self._flood: tuple[float, int] = (math.nan, 0)  # (factor, readings) read on for a flood
        # (step rate, factor, R / factor, objective) of the reading a hold's raise left
        self._raised: Optional[tuple[float, float, float, float]] = None
        self._undone: Optional[tuple[float, float, float]] = None  # (factor, R / factor, the raise's step rate)
        # (the raised factor, its reading's objective, R / factor before the raise): the factor below is read afresh
        self._rereading: Optional[tuple[float, float, float]] = None
        self.pull_cost: Optional[PullCost] = PullCost() if pulls_on_loop_thread else None
        self._pull_free_rate = math.nan
        self._last_reading: Optional[Reading] = None
        self._read_above: Optional[Reading] = None  # the last reading at a higher factor than the one in force
        # Set by the controller from its clock: the recent long intervals fall on a lattice of steps.
        self.long_intervals_keep_a_lattice = False

    def floor(self) -> float:
        """The lowest factor the law runs: 1, or where the pulls cost the loop's thread, their floor."""
        if self.pull_cost is None or not math.isfinite(self._pull_free_rate):
            return 1.0
        return round(self.pull_cost.floor(1 / self._pull_free_rate, self.copy_cost, self.max_factor), 3)

    def clip(self, factor: float) -> float:
        return min(self.max_factor, max(self.floor(), round(factor, 3)))

    def own_rate_between_pulls(self, pull_free_rate: float) -> None:
        """After the opening, ``s`` is the recent steps' rate between pulls, where there are enough of them (nan: none).

        Where the pulls cost the loop's thread, ``s`` at the factor in force ``e`` is
        ``1 / (1 / pull_free_rate + p / e)``, ``p`` their cost a fresh batch.
        """
        if self.phase != Phase.OPEN and math.isfinite(pull_free_rate):
            self._pull_free_rate = pull_free_rate
            cost = self.pull_cost.seconds if self.pull_cost is not None else 0.0
            self.own_rate = 1 / (1 / pull_free_rate + cost / self.factor) if cost else pull_free_rate

    def next(self, step: int, reading: Reading, pull_free_rate: float = math.nan) -> tuple[Phase, float, Cause]:
        """The phase and factor after a complete ``reading`` taken at the factor in force, and why.

        ``pull_free_rate``: in the opening, the rate of its steps between the echo stage's
        pulls (nan if too few; see the module docstring).
        """
        if self.pull_cost is None:
            return self._next(step, reading, pull_free_rate)
        # The opening's steps between pulls ran faster than its steps by the pulls' cost, not by waits.
        phase, factor, cause = self._next(step, reading, math.nan)
        floor = self.floor()
        if phase == Phase.SEARCH and reading.factor <= floor and factor <= floor:
            # The input keeps up down to the floor: below it the pulls cost more than the copies.
            self.ratio = min(self.ratio, reading.factor) if math.isfinite(self.ratio) else reading.factor
            return self._go(step, Phase.HOLD, floor, Cause.PULL_COST)
        if factor < floor:
            return self._go(step, phase, floor, Cause.PULL_COST)
        return phase, factor, cause

    def _next(self, step: int, reading: Reading, pull_free_rate: float) -> tuple[Phase, float, Cause]:
        last, self._last_reading = self._last_reading, reading
        if last is not None and last.factor != reading.factor:
            self._read_above = last if last.factor > reading.factor else None
        if self.phase == Phase.CHECK and reading.marginal:
            # Near R, not below it by a fall of R (see the module docstring): R from the sums.
            reading = dataclasses.replace(reading, input_bound=True, ratio=ratio_from_sums(
                reading.factor, reading.own_rate, reading.production_rate))
        if reading.step_rate > self.own_rate * (1 + 2 * _tol(reading)) or not math.isfinite(self.own_rate):
            self.own_rate = reading.step_rate  # Steps this fast prove the step's own rate at least this.
        if self.phase == Phase.OPEN:
            return self._after_opening(step, reading, pull_free_rate)
        self._note_behind_at_max(step, reading)
        raised, self._last_raise = self._last_raise, None
        if raised is not None:
            futile = reading.input_bound and reading.step_rate < raised[0] * (1 + _tol(reading))
            self._futile_raises = self._futile_raises + 1 if futile else 0
        if self._futile_raises >= FUTILE_RAISES:
            # Raises that bring no faster steps: the step, not the input, sets the rate.
            self._futile_raises = 0
            self.own_rate = reading.step_rate
            self.ratio = reading.factor
            return self._go(step, Phase.HOLD, reading.factor, Cause.STEP_SLOWER)
        # Taken after the futile-raise rule, not with _last_raise before it: a raise that rule
        # answered with STEP_SLOWER is still judged at the reading after (the sweep's seed 25:
        # 8.4 raised to 10.6, own rate lowered, then back to 8.4 as no faster). Taking it before
        # changes 21 of the 3,200 results of benchmarks/controller_sweep.py, a change of the law.
        rereading, self._rereading = self._rereading, None
        if rereading is not None and self.phase == Phase.HOLD and not reading.held_back:
            return self._after_rereading(step, reading, rereading)
        raised, self._raised = self._raised, None
        if raised is not None and self.phase == Phase.HOLD and not reading.held_back:
            undone = self._undo(step, reading, raised)
            if undone:
                return undone
        if self.phase == Phase.CLIMB:
            return self._after_climb(step, reading)
        if reading.input_bound:
            return self._behind(step, reading)
        return self._kept_up(step, reading)

    def _after_opening(self, step: int, reading: Reading, pull_free_rate: float) -> tuple[Phase, float, Cause]:
        """The opening's reading at ``max_factor``: the step's own rate, then the search (or ``max_factor`` held)."""
        if reading.wait_share >= WAIT_BEHIND and not math.isfinite(pull_free_rate) and self.pull_cost is None:
            # Told the loop's wait, and no steps between pulls to read: its steps ran at
            # their own rate whenever it was not waiting. An opening that waited this much
            # was behind at max_factor, or met a slow start: the search reads R (decision
            # 0019). Not where the echo stage pulls on the loop's thread: there the wait
            # holds the pulls, which no factor takes off the loop.
            self.own_rate = reading.step_rate / (1.0 - reading.wait_share)
        else:
            if math.isfinite(reading.wait_share):
                self.own_wait = reading.wait_share
            if pull_free_rate > reading.step_rate * (1 + self.tolerance) and reading.made_rate > 0:
                # The steps between pulls ran faster than the opening's: they waited for input at max_factor.
                self.own_rate = pull_free_rate
                # So much of the opening's wait was for the input, not the call's own cost.
                self.own_wait = max(0.0, self.own_wait - (1 - reading.step_rate / pull_free_rate))
                ratio = reading.factor * pull_free_rate / reading.made_rate
                if ratio >= self.max_factor:
                    self.ratio = min(ratio, 10 * self.max_factor)
                    self.behind_at_max, self._keeps_up_at_max_since = True, None
                    self._behind_at_max_inferred = True
                    return self._go(step, Phase.HOLD, self.max_factor, Cause.SLOWER_THAN_MAX)
        start = self.initial_factor if self.initial_factor > 1 else self.max_factor ** SEARCH_START
        return self._go(step, Phase.SEARCH, self.clip(start), Cause.OWN_RATE)

    def _note_behind_at_max(self, step: int, reading: Reading) -> None:
        """Whether the input is behind at ``max_factor``, where no check runs (the module docstring, ``CHECK``)."""
        if reading.input_bound and (reading.factor >= self.max_factor or reading.ratio >= self.max_factor):
            self.behind_at_max, self._keeps_up_at_max_since = True, None
            self._behind_at_max_inferred = False  # A reading found it behind.
        elif reading.factor >= self.max_factor and not reading.input_bound and self.behind_at_max:
            if self._keeps_up_at_max_since is None:
                self._keeps_up_at_max_since = step - reading.steps
            if self._behind_at_max_inferred or step - self._keeps_up_at_max_since >= AT_MAX_KEEPS_UP_STEPS:
                self.behind_at_max = self._behind_at_max_inferred = False

    def _after_climb(self, step: int, reading: Reading) -> tuple[Phase, float, Cause]:
        """A climb's reading: kept where it trained faster by the objective, else back to the factor below."""
        if reading.input_bound:
            self.ratio = min(reading.ratio, 10 * self.max_factor)
        below, below_value = self._below
        value = self.objective(reading)
        # Any gain keeps the raise: a margin of one combined error, or a step of 1.5, moved the
        # design seeds' p95 by under 0.01 (docs/decisions/0012-the-objective-and-copy-cost.md).
        if reading.held_back or value <= below_value:
            self._climb_ended = below
            return self._go(step, Phase.HOLD, below, Cause.RAISE_UNPAID)
        return self._climb(step, reading) or self._go(step, Phase.HOLD, reading.factor, Cause.RAISE_PAID)

    def _behind(self, step: int, reading: Reading) -> tuple[Phase, float, Cause]:
        """A reading that found the input behind, in a search, a check or a hold: R read, and the knee."""
        if reading.production_rate > 0:
            self._supply = reading.fresh_rate
        self.ratio = min(reading.ratio, 10 * self.max_factor)
        target = self.clip(self.headroom * self.ratio)
        above = self._read_above
        if (self.phase in (Phase.SEARCH, Phase.CHECK) and above is not None
                and target < above.factor and self._trains_slower_than(reading, above)
                and not self._knee_may_pay(reading, target, above)):
            # Behind here, training slower than at the factor above, and the knee R gives
            # could not beat it either: no lower than it (the module docstring, "The factor above").
            return self._back_above(step)
        if self.phase == Phase.CHECK and self._checked_from is not None:
            knee, held = self._checked_from
            confirmed = abs(target / knee - 1) <= CONFIRM_BAND
            self._backoff = min(2 * self._backoff, MAX_CHECK_BACKOFF) if confirmed else 1
            if confirmed and held > target:
                # R stayed put: back to the factor held, climbed above the knee or not.
                return self._go(step, Phase.HOLD, held, Cause.MEASURED)
        if self.phase == Phase.HOLD:
            if target <= reading.factor:
                if reading.factor != self._climb_ended:
                    climbed = self._climb(step, reading)
                    if climbed:
                        return climbed
                cause = Cause.SLOWER_THAN_MAX if reading.factor >= self.max_factor else Cause.MEASURED
                return self._go(step, Phase.HOLD, reading.factor, cause, restart_hold=False)
            cause = Cause.INPUT_SLOWER
            judged = True
            if (self._undone is not None and reading.factor == self._undone[0]
                    and reading.ratio / reading.factor <= self._undone[1] * RISE_OF_R):
                if reading.step_rate * (1 + _tol(reading)) >= self._undone[2]:
                    return self._go(step, Phase.HOLD, reading.factor, Cause.RAISE_WITHHELD, restart_hold=False)
                # The steps here now run slower than they did at the raise: the reading before
                # it drew on a stock (the search's, a lump's). Raise, and do not judge it again.
                self._undone, judged = None, False
            limit = self.raise_limit(reading)
            if limit < target:
                # Steps at the loop's own rate past ``limit`` would train no faster than
                # this reading did: at most this high, where a raise can pay.
                if limit < reading.factor * MIN_RAISE:
                    return self._go(step, Phase.HOLD, reading.factor, Cause.RAISE_LIMITED, restart_hold=False)
                target, cause = self.clip(limit), Cause.RAISE_LIMITED
            self._last_raise = (reading.step_rate, reading.factor)
            self._backoff = 1
            if judged and not reading.held_back:
                self._raised = (reading.step_rate, reading.factor, reading.ratio / reading.factor,
                                self.objective(reading))
            return self._go(step, Phase.HOLD, target, cause)
        if target > reading.factor:
            self._last_raise = (reading.step_rate, reading.factor)
        cause = Cause.SLOWER_THAN_MAX if target >= self.max_factor and self.ratio >= self.max_factor else Cause.MEASURED
        return self._go(step, Phase.HOLD, target, cause)

    def _kept_up(self, step: int, reading: Reading) -> tuple[Phase, float, Cause]:
        """A reading that found the input keeping up (or another trainer's input holding the steps back)."""
        if reading.held_back and self.phase != Phase.HOLD:
            # Not this trainer's input (it did not wait for it): keep the factor, and hold. A
            # check learned nothing of this input, so it goes back to the factor it left: kept
            # at the lower factor, checks stepped a single loop whose opening was behind at
            # max_factor down to 1.7 from 8 (decision 0019).
            checked = self.phase == Phase.CHECK and self._checked_from is not None
            back = self._checked_from[1] if checked else reading.factor
            return self._go(step, Phase.HOLD, back, Cause.HELD_BACK)
        # The input kept up at this factor: R is at most it.
        if self.phase == Phase.HOLD and reading.factor != self._climb_ended:
            # It may keep up on average and still make steps wait, for lumps: a raise may pay.
            climbed = self._climb(step, reading)
            if climbed:
                return climbed
        if self.phase == Phase.HOLD:
            if (self.check_every_steps is not None and reading.factor > 1
                    and not (reading.factor >= self.max_factor and self.behind_at_max)
                    and step - self.held_since >= self.check_every_steps * self._backoff):
                self._checked_from = (self.clip(self.headroom * self.ratio) if math.isfinite(self.ratio)
                                      else reading.factor, reading.factor)
                return self._go(step, Phase.CHECK, self.clip(reading.factor / self.check_divisor), Cause.CHECK)
            return self._go(step, Phase.HOLD, reading.factor, Cause.KEEPS_UP, restart_hold=False)
        if self.held_since is not None and self._reads_on_a_flood(reading):
            return self._go(step, self.phase, reading.factor, Cause.FLOOD)
        above = self._read_above
        if above is not None and self._trains_slower_than(reading, above):
            # It kept up here by its count, but trained slower than at the factor above: its
            # steps waited, in stalls the clock took for pauses (the module docstring, "The factor above").
            return self._back_above(step)
        self._backoff = 1
        if reading.factor <= 1:
            self.ratio = 1.0
            return self._go(step, Phase.HOLD, 1.0, Cause.NOT_INPUT_BOUND)
        self.ratio = min(self.ratio, reading.factor) if math.isfinite(self.ratio) else reading.factor
        self._after_check = self.phase == Phase.CHECK or (self.phase == Phase.SEARCH and self._after_check)
        divisor = AFTER_CHECK_DIVISOR if self._after_check else 2
        return self._go(step, Phase.SEARCH, self.clip(reading.factor / divisor), Cause.KEEPS_UP)

    def _trains_slower_than(self, reading: Reading, above: Reading) -> bool:
        """Whether ``reading`` trained slower by the objective than ``above``, beyond both errors, with no pause lattice to explain it.

        >>> policy = Policy(max_factor=4.0, headroom=1.05, check_divisor=1.25, check_every_steps=200, copy_cost=0.13)
        >>> at = lambda factor, rate: Reading(factor=factor, steps=64, step_rate=rate, production_rate=rate, error=0.05,
        ...                                   own_rate=rate, input_bound=False, ratio=math.nan, complete=True)
        >>> policy._trains_slower_than(at(2.0, 4.0), above=at(4.0, 26.0))  # steps a sixth as fast: slower
        True
        >>> policy._trains_slower_than(at(2.0, 20.0), above=at(4.0, 26.0))  # fewer copies pay for the slower steps
        False
        """
        if self.long_intervals_keep_a_lattice:
            return False  # The loop's own pauses, which a reading may hold at one factor and miss at another.
        if math.isfinite(reading.wait_share):
            # Given the loop's wait, the clock placed each long interval by it: the count's verdict
            # stands, and a slower reading is a pause the reading above missed (on the design seeds
            # given the wait, the rule took the p95 at c = 0.19 from 1.117 to 1.139: decision 0029).
            return False
        return self.objective(reading) < self.objective(above) * (1 - _tol(reading) - _tol(above))

    def _knee_may_pay(self, reading: Reading, knee: float, above: Reading) -> bool:
        """Whether steps at ``knee``, fed by the fresh batches this reading's input made, could train as fast as ``above`` did.

        The steps there run no faster than ``above``'s did (the step's rate, as far as it was
        read) and no faster than the input feeds them.

        >>> policy = Policy(max_factor=8.0, headroom=1.05, check_divisor=1.25, check_every_steps=200, copy_cost=0.13)
        >>> at = lambda factor, rate, made: Reading(factor=factor, steps=24, step_rate=rate, production_rate=made,
        ...                                         error=0.01, own_rate=31.6, input_bound=True, ratio=5.7, complete=True)
        >>> policy._knee_may_pay(at(2.828, 16.5, 15.7), knee=6.0, above=at(8.0, 31.6, 31.6))  # 31.6 steps/s at e = 6
        True
        >>> policy._knee_may_pay(at(2.828, 8.0, 8.0), knee=6.0, above=at(8.0, 31.6, 31.6))  # the input feeds 17 at e = 6
        False
        """
        steps = min(above.step_rate, knee * reading.fresh_rate)
        return progress_per_second(steps, knee, self.copy_cost) >= self.objective(above)

    def _back_above(self, step: int):
        """Back to the factor read above the one in force, held (see the module docstring, "The factor above")."""
        factor, self._read_above = self._read_above.factor, None
        return self._go(step, Phase.HOLD, factor, Cause.SLOWER_BELOW)

    def objective(self, reading: Reading) -> float:
        """Training progress per second at the reading's factor: its step rate times a step's progress there."""
        return progress_per_second(reading.step_rate, reading.factor, self.copy_cost)

    def raise_limit(self, reading: Reading) -> float:
        """The highest factor a raise from the reading's could train faster at, by the objective.

        The most a raise can bring is the loop's rate where the input keeps up (the step's
        own rate with the loop's pauses in: the reading's ``own_rate``, less the reading's
        error); each copy costs progress. Past the factor where steps at that rate would
        make as much progress a second as the reading did, no raise can pay. ``nan`` where
        the reading has no own rate.

        >>> policy = Policy(max_factor=16.0, headroom=1.05, check_divisor=1.25, check_every_steps=200)
        >>> reading = Reading(factor=4.0, steps=200, step_rate=80.0, production_rate=80.0, error=0.05,
        ...                   own_rate=100.0, input_bound=True, ratio=5.0, complete=True)
        >>> round(policy.raise_limit(reading), 2)  # 95 steps/s at e = 6 make as much progress as 80 at e = 4
        6.0
        """
        gain = reading.own_rate * (1 - _tol(reading)) / reading.step_rate
        if not math.isfinite(gain):
            return math.nan
        if self.copy_cost == 0:
            return math.inf if gain > 1 else reading.factor
        return 1 + (gain * (1 + self.copy_cost * (reading.factor - 1)) - 1) / self.copy_cost

    def _undo(self, step: int, reading: Reading, raised: tuple[float, float, float, float]):
        """Back to the factor a hold's raise left, where its reading ran the steps no faster, or trained slower, and R did not rise; else ``None``.

        Steps no faster: undone. Steps faster but less progress a second than the reading
        before the raise: back to read that factor afresh (:meth:`_after_rereading` judges).
        Neither where the raise was to ``max_factor`` and its reading found the input behind
        there: a lower factor only waits more, and no reading goes below ``max_factor``
        while the input is behind there (the module docstring, ``CHECK``). A 32-step reading
        at ``max_factor`` that ran its steps slower than the 32 before the raise is the
        readings' noise there, not the raise's doing (design seed 1128 of
        ``benchmarks/controller_sweep.py``: R = 9.7 over ``max_factor`` 8, held 7.25 for 630
        steps after such an undo; decision 0032).

        >>> policy = Policy(max_factor=8.0, headroom=1.05, check_divisor=1.25, check_every_steps=200)
        >>> policy.phase = Phase.HOLD
        >>> behind = lambda factor, rate: Reading(factor=factor, steps=32, step_rate=rate, production_rate=rate,
        ...                                       error=0.09, own_rate=41.0, input_bound=True,
        ...                                       ratio=factor * 41.0 / rate, complete=True)
        >>> raised = (33.6, 7.25, 9.88 / 7.25, policy.objective(behind(7.25, 33.6)))
        >>> policy._undo(100, behind(8.0, 25.7), raised) is None  # behind at max_factor: the raise stays
        True
        >>> policy.max_factor = 16.0
        >>> policy._undo(100, behind(8.0, 25.7), raised)[2]  # below max_factor, steps no faster: undone
        <Cause.RAISE_UNDONE: 'raise_undone'>
        """
        step_rate, factor, share, value = raised
        if reading.input_bound and reading.factor >= self.max_factor:
            return None
        if reading.input_bound and reading.ratio / reading.factor > share * RISE_OF_R:
            return None  # R rose between the two readings: a hold follows it.
        if reading.step_rate < step_rate * (1 + _tol(reading)):
            self._undone = (factor, share, reading.step_rate)
            return self._go(step, Phase.HOLD, factor, Cause.RAISE_UNDONE)
        if self.objective(reading) < value:
            self._rereading = (reading.factor, self.objective(reading), share)
            return self._go(step, Phase.HOLD, factor, Cause.RAISE_REREAD)
        return None

    def _after_rereading(self, step: int, reading: Reading, rereading: tuple[float, float, float]):
        """The factor below a raise read afresh: kept where it trains at least as fast as the raise did, else the raise again."""
        raised_factor, raised_value, share = rereading
        if self.objective(reading) >= raised_value:
            self._undone = (reading.factor, share, reading.step_rate)
            return self._go(step, Phase.HOLD, reading.factor, Cause.RAISE_UNPAID)
        return self._go(step, Phase.HOLD, raised_factor, Cause.RAISE_PAID)

    def _reads_on_a_flood(self, reading: Reading) -> bool:
        """Whether a reading that kept up drew on a lump's stock, and the search reads on (:data:`FLOOD_SHARE`)."""
        fresh = reading.fresh_rate
        if not fresh > FLOOD_SHARE * self._supply:
            return False
        factor, readings = self._flood
        readings = readings if factor == reading.factor else 0
        if readings < FLOOD_READINGS:
            self._flood = (reading.factor, readings + 1)
            return True
        self._supply = fresh  # It kept up this long: the input makes at least this.
        return False

    def _climb(self, step: int, reading: Reading):
        """A raise above the factor read, where steps waited there and a raise could pay; else ``None``."""
        if reading.held_back:
            return None
        factor, target = reading.factor, self.clip(reading.factor * CLIMB_STEP)
        if target <= factor or not target < self.raise_limit(reading):
            return None
        # Not a raise the futile-raise rule judges: a raise above the knee that brings no faster
        # steps says the raise did not pay, not that the step's own rate was read too high.
        self._below = (factor, self.objective(reading))
        return self._go(step, Phase.CLIMB, target, Cause.CLIMB)

    def _go(self, step: int, phase: Phase, factor: float, cause: Cause, restart_hold: bool = True):
        self._after_check = self._after_check and phase == Phase.SEARCH
        if phase == Phase.HOLD and (restart_hold or self.held_since is None or self.phase != Phase.HOLD):
            self.held_since = step
        self.phase, self.factor = phase, factor
        return phase, factor, cause


def _tol(reading: Reading) -> float:
    return max(0.05, reading.error)
