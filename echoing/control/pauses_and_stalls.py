"""The loop's own pauses told from the input's stalls across a change of factor: a pause costs every factor alike, a stall does not.

Without the loop's wait for input, one long interval cannot say whose it was (decision
0019, ``docs/decisions/0019-the-wait-places-long-intervals.md``). Across factors it can:

* **Where pauses fall.** A loop that pauses on its own (an evaluation, a checkpoint, a
  logging callback) does it every so many *steps*, whatever the echo factor. The input's
  stalls do not keep such a lattice: a lump of L batches lasts ``L e`` steps, so where
  stalls recur at one factor, their spacing and their phase change with the factor.
  :class:`PauseLattice` keeps the recent long intervals (those
  :class:`echoing.control.windows.StepClock` found long) and looks for three spaced alike
  (within one interval's width, the loop's ``steps_per_execution``) and at least
  :data:`MIN_PERIOD_STEPS` apart. From them it predicts where the next long intervals
  fall. Once :data:`PREDICTED_HITS` of its predictions have come true, one of them at a
  factor at least :data:`CONFIRM_FACTOR_RATIO` from a factor that holds two long
  intervals on it (its spacing held across the change), the lattice is *confirmed*: a
  long interval on it is the loop's pause, whatever the echo stage made meanwhile (a
  pause with room in the buffers lets the input work through it; without the lattice
  that interval counted as the input's time, and every reading that held one read the
  input as behind). A lattice whose predicted points pass :data:`MAX_MISSES` times in a
  row without a long interval is dropped; an unconfirmed one at its first miss.
* **What they cost.** A pause lasts as long at any factor; a stall shrinks as the factor
  rises (each lump lasts longer against the same read). :class:`ShrinkingStalls` keeps
  the recent long intervals off a lattice with their excess over typical steps: those at
  a factor whose median excess is over ``1 / STALL_SHRINK`` times that of the ones at
  factors :data:`ABOVE_RATIO` times higher or more are the input's stalls. Where a lump
  takes far longer to come than its steps take, its stall hardly shrinks, but what it
  costs each step does: spread over the steps since the one before it alike, a pause
  costs every step the same at any factor, and a stall ``(R / e - 1)`` times a step, less
  as e rises. Long intervals at a factor whose median cost a step is over
  ``1 / PER_STEP_SHRINK`` times that at factors :data:`ABOVE_RATIO` times higher are the
  input's stalls too.

Neither says anything where the long intervals fall at one factor only; there the clock's
other rules stand. Where the loop gives its wait for input, the wait places each interval
and neither is used.

>>> lattice = PauseLattice()
>>> [lattice.place(step, 1, 2.0) for step in (99, 199, 299)]  # Every 100 steps at e = 2: a lattice, not yet confirmed.
[None, None, None]
>>> lattice.passed(350)  # Measured intervals in between; no point has passed.
>>> lattice.place(399, 1, 4.0), lattice.place(499, 1, 4.0)  # The factor changed; the points still fall where predicted.
(None, True)
>>> lattice.place(530, 1, 4.0)  # Off the lattice: not a pause by this rule.
False
"""

from __future__ import annotations

import math
from collections import deque
from typing import Optional

# Long intervals a lattice is looked for among: enough to hold three pauses between a
# few stalls.
RECENT_LONG = 12
# Long intervals off a lattice whose excess ShrinkingStalls compares across factors.
RECENT_EXCESS = 8
# Factors this far above one another, and a median excess this much shorter there, tell a
# stall from a pause: on the design seeds of benchmarks/controller_sweep.py 0.6 and 0.8
# gave the same p95 (decision 0027), and one interval above (often the opening's at
# max_factor) was enough where two lost what it gains.
ABOVE_RATIO = 1.25
STALL_SHRINK = 0.6
# What a long interval costs each step: its excess over the steps since the previous one
# alike (an excess within ALIKE of its own), or since the clock began. Counted only where
# the excess is over PER_STEP_MIN_EXCESS times the interval's typical time and the steps
# since over MIN_PERIOD_STEPS (short ones are a dispatch queue's waits, whose cost a step
# is noise: design seed 1093 lost 1.052 to 1.209 at c = 0.19 without them), and compared
# where a factor holds PER_STEP_MIN_HERE of them. On the design seeds of
# benchmarks/controller_sweep.py these took design seed 1077 from 1.857 to 1.287 at
# c = 0.05 (the worst loop from 1.857 to 1.375) with no p95 lost; 0.6 for PER_STEP_SHRINK, or one interval at the factor, gave
# the same figures, and 4 for the excess lost 0.002 of the p95 at c = 0.19 (decision 0028).
ALIKE = 0.5
PER_STEP_MIN_EXCESS = 16.0
PER_STEP_MIN_HERE = 2
PER_STEP_SHRINK = 0.8
# A lattice's period is at least this many steps. The sweep's loops pause every 50-1,000
# steps (benchmarks/lib/loops.py); a period under 32 steps is likelier the stalls of a
# lumpy input at one factor, or a dispatch queue's waits (echoing/control/windows.py's
# IMPLAUSIBLE_SPREAD), than a loop's own pause. 16 and 48 gave the same figures on the
# design seeds (docs/decisions/0027-pauses-and-stalls-across-factors.md).
MIN_PERIOD_STEPS = 32
# Predictions that must come true before the lattice is confirmed. One confirmed lattices
# of stalls on the design seeds of benchmarks/controller_sweep.py; three confirmed the
# pauses too late to help (decision 0027).
PREDICTED_HITS = 2
# A confirmed lattice's spacing held across a change of factor by at least this much: a
# predicted long interval at a factor this far from one that holds two on the lattice. At
# one factor the stalls of a lump of fixed size keep a lattice too, and the last stall
# before a change can fall in step with the stalls after it.
CONFIRM_FACTOR_RATIO = 1.1
# Predicted points passed in a row without a long interval before a confirmed lattice is
# dropped (a pause that grew short, or a loop that stopped pausing).
MAX_MISSES = 2


class PauseLattice:
    """Long intervals on a lattice of steps that held across a change of factor: the loop's pauses (see the module docstring)."""

    def __init__(self) -> None:
        self._recent: deque = deque(maxlen=RECENT_LONG)  # (step, width, factor) of the recent long intervals
        self._on: Optional[list] = None  # (index on the lattice, step, width, factor) of the long intervals on it
        self._next_index = 0  # the lattice's next point not yet met or passed
        self._predicted = 0  # predicted points met
        self._misses = 0  # predicted points passed in a row
        self.confirmed = False

    def place(self, step: int, width: int, factor: float) -> Optional[bool]:
        """A long interval ending at ``step`` over ``width`` steps: ``True`` on a confirmed lattice, ``False`` off it, ``None`` without one."""
        self._recent.append((step, width, factor))
        if self._on:
            index = round((step - self._on[0][1]) / self._period()) + self._on[0][0]
            if index >= self._next_index and abs(step - self._point(index)) <= self._tolerance(width):
                self._on.append((index, step, width, factor))
                self._next_index, self._predicted, self._misses = index + 1, self._predicted + 1, 0
                if self._predicted >= PREDICTED_HITS and self._seen_at_two_factors():
                    self.confirmed = True
                return True if self.confirmed else None
            if self.confirmed:
                return False
        self._look_for_one()
        return None

    @property
    def found(self) -> bool:
        """Whether a lattice holds the recent long intervals, confirmed or not yet."""
        return self._on is not None

    def passed(self, step: int) -> None:
        """A measured interval that was not long, ending at ``step``: each lattice point it passed is a miss."""
        while self._on and step > self._point(self._next_index) + self._tolerance(0):
            self._misses += 1
            self._next_index += 1
            if not self.confirmed or self._misses >= MAX_MISSES:
                self._on, self.confirmed = None, False

    def _seen_at_two_factors(self) -> bool:
        """A predicted long interval at least CONFIRM_FACTOR_RATIO from a factor that held two on the lattice: its spacing held across the change."""
        counts: dict = {}
        for each in self._on:
            counts[each[3]] = counts.get(each[3], 0) + 1
        twice = [factor for factor, count in counts.items() if count >= 2]
        predicted = [each[3] for each in self._on[3:]]
        return any(max(a, b) >= CONFIRM_FACTOR_RATIO * min(a, b) for a in twice for b in predicted)

    def _period(self) -> float:
        (first_index, first, _, _), (last_index, last, _, _) = self._on[0], self._on[-1]
        return (last - first) / (last_index - first_index)

    def _point(self, index: int) -> float:
        return self._on[0][1] + (index - self._on[0][0]) * self._period()

    def _tolerance(self, width: int) -> int:
        # The pause falls somewhere in the interval that ends at the step seen: up to its width apart.
        return max([width] + [each[2] for each in self._on])

    def _look_for_one(self) -> None:
        """The last long interval and two before it spaced alike, at least MIN_PERIOD_STEPS apart: a new, unconfirmed lattice."""
        self._on, self.confirmed = None, False
        points = list(self._recent)
        last, last_width, last_factor = points[-1]
        for j in range(len(points) - 2, 0, -1):
            middle, middle_width, middle_factor = points[j]
            gap = last - middle
            if gap < MIN_PERIOD_STEPS:
                continue
            for first, first_width, first_factor in reversed(points[:j]):
                width = max(first_width, middle_width, last_width)
                if abs((middle - first) - gap) < width:
                    self._on = [(0, first, first_width, first_factor), (1, middle, middle_width, middle_factor),
                                (2, last, last_width, last_factor)]
                    self._next_index, self._predicted, self._misses = 3, 0, 0
                    return
                if middle - first > gap + width:
                    break


class ShrinkingStalls:
    """Long intervals at a factor that last far longer, or cost each step far more, than those at factors above it: the input's stalls.

    See the module docstring. ``step`` is where the interval ended, ``first_step`` where
    the clock began, and ``typical_seconds`` what the interval's steps take at a typical step.

    >>> stalls = ShrinkingStalls()
    >>> stalls.note(8.0, 1.0, step=40, first_step=0, typical_seconds=0.01)  # The opening at max_factor: a stall of 1 s.
    False
    >>> stalls.note(2.0, 3.0, 100, 0, 0.01), stalls.note(2.0, 1.1, 140, 0, 0.01)  # At e = 2 they last 2-3 times as long.
    (True, True)
    >>> lumps = ShrinkingStalls()  # Stalls of 10 s every 20 e steps: as long at e = 4 as at e = 2, but 40 steps apart there.
    >>> [lumps.note(factor, 10.0, step, 0, 0.01) for factor, step in ((4.0, 80), (2.0, 120), (2.0, 160))]
    [False, False, True]
    >>> pauses = ShrinkingStalls()  # 1 s every 50 steps at any factor: not by either rule.
    >>> [pauses.note(factor, 1.0, step, 0, 0.01) for factor, step in ((8.0, 50), (2.0, 100), (2.0, 150))]
    [False, False, False]
    """

    def __init__(self) -> None:
        self._recent: deque = deque(maxlen=RECENT_EXCESS)  # (factor, seconds beyond typical steps, per step or nan)
        self._ends: deque = deque(maxlen=4 * RECENT_EXCESS)  # (step, excess) of every long interval noted

    def note(self, factor: float, excess: float, step: int, first_step: int, typical_seconds: float) -> bool:
        """A long interval at ``factor``, ``excess`` seconds longer than typical steps: whether the long ones there are stalls."""
        alike = [at for at, each in self._ends if ALIKE * excess <= each <= excess / ALIKE]
        since = step - (alike[-1] if alike else first_step)
        self._ends.append((step, excess))
        counted = excess > PER_STEP_MIN_EXCESS * typical_seconds and since > MIN_PERIOD_STEPS
        self._recent.append((factor, excess, excess / since if counted else math.nan))
        return (self._shrinks_above(factor, 1, STALL_SHRINK, min_here=1)
                or self._shrinks_above(factor, 2, PER_STEP_SHRINK, min_here=PER_STEP_MIN_HERE))

    def _shrinks_above(self, factor: float, kind: int, shrink: float, min_here: int) -> bool:
        """Whether the median of field ``kind`` (1: the excess, 2: its cost a step) at factors ABOVE_RATIO above is under ``shrink`` times ``factor``'s."""
        here = [each[kind] for each in self._recent if each[0] == factor and not math.isnan(each[kind])]
        above = [each[kind] for each in self._recent if each[0] >= factor * ABOVE_RATIO and not math.isnan(each[kind])]
        return bool(above) and len(here) >= min_here and _upper_median(above) < shrink * _upper_median(here)


def _upper_median(values: list) -> float:
    return sorted(values)[len(values) // 2]
