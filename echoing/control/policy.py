"""What echo factor to run next, from the readings at the factors run so far: open, search, hold, check.

The policy knows two rates: the step's own rate ``s`` (steps per second where the input
keeps up) and, through each reading where it cannot, ``R = e * s / production``. It
moves through four phases (:class:`Phase`):

* ``OPEN``: ``max_factor``, where the input is outrun if anywhere: its step rate is ``s``.
* ``SEARCH``: ``max_factor / 2``, halved while the input keeps up (R is below it), until
  a reading says it cannot (then R is known) or the factor is 1 (training is not
  input-bound).
* ``HOLD``: ``headroom * R`` (within ``[1, max_factor]``). Every reading there either
  finds the input keeping up (``s`` is refined) or not (R rose: the factor rises to the
  new ``headroom * R`` at once).
* ``CHECK``: after ``check_every_steps`` of holding, the factor is divided by
  ``check_divisor``, below R: a reading there gives R afresh, and the factor returns to
  ``headroom * R``; if the input keeps up even there, R fell, and the search goes on
  down from there. A check that puts the factor back where it was confirms it, and the
  next waits twice as long (up to :data:`MAX_CHECK_BACKOFF` times). There is no check
  while the input is behind at ``max_factor`` (a lower factor can only be slower there):
  once a reading finds it behind there, or R at or above ``max_factor`` anywhere, checks
  run again only after readings at ``max_factor`` have found it keeping up for
  :data:`AT_MAX_KEEPS_UP_STEPS` steps in a row; on lumpy input a shorter stretch can be
  the flood after a lump (the buffers and the upstream's prefetch full).

A reading **held back** (a trainer in step whose loop did not wait for its own input
while another's held the steps back) keeps the factor and holds it; in ``HOLD`` it
counts as keeping up.

A reading at a factor whose step rate beats ``s`` by more than the tolerance raises
``s`` to it (the opening read a slower step: a cold start, an input slower than
``max_factor`` steps); two raises in a row that brought no faster steps lower ``s`` to
the rate measured (it was read too high, or the step got slower).

>>> policy = Policy(max_factor=8.0, headroom=1.05, check_divisor=1.25, check_every_steps=200)
>>> policy.factor, policy.phase.value
(8.0, 'open')
"""

from __future__ import annotations

import enum
import math
from typing import Optional

from echoing.control.estimate import Reading


# Raises in a row that brought no faster steps before the step's own rate is taken to be
# lower: one can be a rise of R between the two readings (tests/test_auto_echo.py, R 2 -> 5
# mid-run), two in a row is an own rate read too high on a jittered step (the sweep's
# seed 1041, 37% step jitter, ran away to max_factor without this rule).
FUTILE_RAISES = 2
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


class Phase(str, enum.Enum):
    """What the controller is doing (a ``str``, so ``phase == "hold"`` holds too)."""

    OPEN = "open"
    SEARCH = "search"
    HOLD = "hold"
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
    CHECK = "check"  # a periodic check below the held factor
    HELD_BACK = "held_back"  # another trainer's input held the steps back: the factor is kept
    LEFT_OUT = "left_out"  # an interval was not measured (a pause, a clock that went back, ...)

    def __str__(self) -> str:
        return self.value


class Policy:
    """The phases of the law (see the module docstring); :class:`echoing.EchoController` feeds it readings.

    Args:
      max_factor: the largest factor; the opening's.
      headroom: the held factor is ``headroom * R``.
      check_divisor: a check runs at the held factor over this.
      check_every_steps: steps of holding between checks (``None``: never).
      initial_factor: above 1, the search starts there instead of at ``max_factor / 2``.
    """

    def __init__(self, max_factor: float, headroom: float, check_divisor: float,
                 check_every_steps: Optional[int], initial_factor: float = 1.0) -> None:
        self.max_factor = float(max_factor)
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
        self._keeps_up_at_max_since: Optional[int] = None  # the first step of the readings at max_factor that keep up

    def clip(self, factor: float) -> float:
        return min(self.max_factor, max(1.0, round(factor, 3)))

    def next(self, step: int, reading: Reading) -> tuple[Phase, float, Cause]:
        """The phase and factor after a complete ``reading`` taken at the factor in force, and why."""
        if reading.step_rate > self.own_rate * (1 + 2 * _tol(reading)) or not math.isfinite(self.own_rate):
            self.own_rate = reading.step_rate  # Steps this fast prove the step's own rate at least this.
        if self.phase == Phase.OPEN:
            if math.isfinite(reading.wait_share):
                self.own_wait = reading.wait_share
            start = self.initial_factor if self.initial_factor > 1 else self.max_factor / 2
            return self._go(step, Phase.SEARCH, self.clip(start), Cause.OWN_RATE)
        if reading.input_bound and (reading.factor >= self.max_factor or reading.ratio >= self.max_factor):
            self.behind_at_max, self._keeps_up_at_max_since = True, None
        elif reading.factor >= self.max_factor and not reading.input_bound and self.behind_at_max:
            if self._keeps_up_at_max_since is None:
                self._keeps_up_at_max_since = step - reading.steps
            if step - self._keeps_up_at_max_since >= AT_MAX_KEEPS_UP_STEPS:
                self.behind_at_max = False
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
        if reading.input_bound:
            self.ratio = min(reading.ratio, 10 * self.max_factor)
            target = self.clip(self.headroom * self.ratio)
            if self.phase == Phase.CHECK and self._checked_from is not None:
                confirmed = abs(target / self._checked_from - 1) <= CONFIRM_BAND
                self._backoff = min(2 * self._backoff, MAX_CHECK_BACKOFF) if confirmed else 1
            if self.phase == Phase.HOLD:
                if target <= reading.factor:
                    cause = Cause.SLOWER_THAN_MAX if reading.factor >= self.max_factor else Cause.MEASURED
                    return self._go(step, Phase.HOLD, reading.factor, cause, restart_hold=False)
                self._last_raise = (reading.step_rate, reading.factor)
                self._backoff = 1
                return self._go(step, Phase.HOLD, target, Cause.INPUT_SLOWER)
            if target > reading.factor:
                self._last_raise = (reading.step_rate, reading.factor)
            cause = Cause.SLOWER_THAN_MAX if target >= self.max_factor and self.ratio >= self.max_factor else Cause.MEASURED
            return self._go(step, Phase.HOLD, target, cause)
        if reading.held_back and self.phase != Phase.HOLD:
            # Not this trainer's input (it did not wait for it): keep the factor, and hold.
            return self._go(step, Phase.HOLD, reading.factor, Cause.HELD_BACK)
        # The input kept up at this factor: R is at most it.
        if self.phase == Phase.HOLD:
            if (self.check_every_steps is not None and reading.factor > 1
                    and not (reading.factor >= self.max_factor and self.behind_at_max)
                    and step - self.held_since >= self.check_every_steps * self._backoff):
                self._checked_from = reading.factor
                return self._go(step, Phase.CHECK, self.clip(reading.factor / self.check_divisor), Cause.CHECK)
            return self._go(step, Phase.HOLD, reading.factor, Cause.KEEPS_UP, restart_hold=False)
        self._backoff = 1
        if reading.factor <= 1:
            self.ratio = 1.0
            return self._go(step, Phase.HOLD, 1.0, Cause.NOT_INPUT_BOUND)
        self.ratio = min(self.ratio, reading.factor) if math.isfinite(self.ratio) else reading.factor
        return self._go(step, Phase.SEARCH, self.clip(reading.factor / 2), Cause.KEEPS_UP)

    def _go(self, step: int, phase: Phase, factor: float, cause: Cause, restart_hold: bool = True):
        if phase == Phase.HOLD and (restart_hold or self.held_since is None or self.phase != Phase.HOLD):
            self.held_since = step
        self.phase, self.factor = phase, factor
        return phase, factor, cause


def _tol(reading: Reading) -> float:
    return max(0.05, reading.error)
