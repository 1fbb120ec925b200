"""The loop's calls to ``observe`` turned into measured intervals, with what must not be measured left out.

An interval runs from one call to the next: the steps it covers, its seconds, the fresh
batches the echo stage pulled in it (the :class:`echoing.EchoStats` count over
``elements_per_step``) and the factor in force. An interval is *left out* of the
measurements, with a :class:`LeftOut` cause, when:

* it follows :meth:`StepClock.interrupt` (the loop said the time was not training);
* its clock, its fresh count or its input wait went back (``stats.reset()``, a restored checkpoint);
* its timestamp is not finite (NaN, inf), or its step index did not increase: that call
  is left out, and so is the interval after it (it would start from a bad call);
* its steps took :data:`PAUSE_FACTOR` typical steps longer than typical steps would
  have (so a pause shows within ``steps_per_execution`` steps too), it is alone, and the
  echo stage made no more meanwhile than the steps took (plus one micro-batch): a pause
  the loop did not announce (a checkpoint save, a logging callback, an evaluation),
  during which the buffers were full and the input stood still (its seconds beyond
  typical steps add to :attr:`StepClock.pause_per_step`). **The pause rule:** a pause
  is left out of the opening only, which reads the step's own rate; from
  :meth:`StepClock.end_opening` on, it is measured like any interval and charged to the
  loop instead: :meth:`StepClock.loop_rate` is the rate where the input keeps up with the
  pauses in, which every reading is held against. A pause costs every factor alike, and
  what the input reads meanwhile counts for the factor that banks it. Where the echo
  stage made more, the input was working: a lump's stall, or a pause with room in the
  buffers, whose time is the input's and counts.
  Where the loop gives its wait for input (``input_wait``), the wait places a long
  interval instead: the input's if the loop waited over half the interval's excess,
  else the loop's pause, whatever the echo stage made (the count alone cannot tell a
  lump's stall into small buffers from a pause, nor a pause with room in large buffers
  from a stall; decision 0019), and the recurrence below does not apply.
  Without the wait, long intervals that recur (:data:`RECURRING_LONG` within :data:`RECURRING_STEPS` steps,
  whether or not the echo stage made more in them) are the input's own stalls (lumps, records read whole) and are measured (those of them
  taken for pauses before they recurred are taken off the pause count), unless
  the others are :data:`IMPLAUSIBLE_SPREAD` times shorter still: then the loop timestamps
  steps when they are dispatched, not when they have run (JAX without blocking), and
  nothing is measured while that goes on (``LeftOut.IMPLAUSIBLE``).
  Before those rules, without the wait, the factors tell
  (:mod:`echoing.control.pauses_and_stalls`): a long interval on a lattice of steps that
  held across a change of factor is the loop's pause, charged to the loop whatever the
  echo stage made (a loop pauses every so many steps at any factor; the input's stalls
  move with the factor); one at a factor where long intervals last far longer than at
  factors above it is the input's stall, measured, and those charged as pauses at that
  factor are taken back.

A typical step is the median of the last :data:`TYPICAL_INTERVALS` intervals' per-step
durations, so a slower input (longer steps) moves it within a few dozen steps.

**The step's own rate from the steps between pulls.** An interval in which the echo
stage pulled nothing and that was not long ran on batches already made: its steps did
not wait for input, whatever the input did before or after. A step that waits for input
waits for the echo stage's next pull, so the wait falls in an interval with a pull. The
recent such intervals (:data:`PULL_FREE_STEPS` steps of them) give
:meth:`StepClock.pull_free_rate`, the step's own rate read where the input is behind as
well as where it keeps up, as long as the loop calls ``observe`` more often than the
echo stage pulls (``steps_per_execution`` below ``e``). Where the pulls follow the
input's reads rather than the steps, a longer interval is likelier to hold one, so this
rate reads a jittered step a little fast (:mod:`echoing.control.policy` says how the law
allows for it).

>>> clock = StepClock(elements_per_step=64)
>>> clock.observe(0, 0.0, fresh=0, factor=2.0) is None  # The first call only starts the clock.
True
>>> interval = clock.observe(1, 0.1, fresh=64, factor=2.0)
>>> interval.steps, interval.seconds, interval.fresh, interval.left_out
(1, 0.1, 1.0, None)
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
from collections import deque
from typing import Optional

from echoing.control.pauses_and_stalls import PauseLattice, ShrinkingStalls

# A step over this many times the typical step is a pause, not input: an input-bound step
# waits R / e step-times, and the law holds e near R, so a wait of 4 step-times is a
# change of R no law would see within one step (the sweep in benchmarks/controller_sweep.py
# draws pauses of 0.1-5 s every 50-1,000 steps against steps of 10-300 ms).
PAUSE_FACTOR = 4.0
# The typical step is the median of this many recent intervals: enough that the lumps of
# an input read in large records (up to 32 batches in the sweep) do not move it.
TYPICAL_INTERVALS = 31
# This many long intervals within RECURRING_STEPS steps are not pauses but the input's
# stalls: a record of L batches at e stalls every L e steps, while a loop's own pauses (a
# checkpoint, a logging callback) come every 50 steps at the most often in the sweep
# (benchmarks/controller_sweep.py), so at most two fall within 96 steps. Within 48 steps,
# the stalls of lumps of 9 at e = 2 (design seed 1124) were charged to the loop as pauses,
# its rate read at 9.8 steps/s against its own 44.5, and the search ran down to 1.
RECURRING_LONG = 4
RECURRING_STEPS = 96
# Recurring long intervals over this many times the typical one are not the input's: a
# lump's stall is L R step-times, at most about 24 where it recurs within 96 steps, while
# a JAX loop that timestamps at dispatch sees calls that return at once and, every few,
# one that waits for a whole queue of steps (examples/jax_loop.py without --block).
IMPLAUSIBLE_SPREAD = 50.0
# The pull-free intervals the step's own rate is read from: the last this many steps of
# them, long enough that a step jittered by 40% (the sweep's most) reads within a few
# percent, short enough to follow a step that gets slower within a few hundred steps.
PULL_FREE_STEPS = 256
# The pull intervals at one factor that its overhead a fresh batch is read from (where the
# clock tracks them: ControllerSettings.pulls_on_loop_thread): the last this many steps of them.
PULL_OVERHEAD_STEPS = 256
# Pull intervals an overhead needs at least, for its standard error: a reading of 32 steps
# at e = 8 holds 4 (the PyTorch study's loop, docs/results/torch.md, pulls every 8 steps).
PULL_OVERHEAD_MIN_INTERVALS = 4
# Factors within this ratio share their pull intervals: a held factor moves by a few
# percent at a time (a new knee), and a pull's cost does not.
PULL_OVERHEAD_BIN = 1.1
# Long intervals charged as pauses that a later verdict of stalls at their factor can take back.
CHARGED_KEPT = 32


def factor_bin(factor: float) -> int:
    """The factors that share their pull intervals: within :data:`PULL_OVERHEAD_BIN` of each other on a log scale.

    >>> factor_bin(4.0) == factor_bin(4.1), factor_bin(4.0) == factor_bin(4.6)
    (True, False)
    """
    return round(math.log(factor) / math.log(PULL_OVERHEAD_BIN))


class LeftOut(str, enum.Enum):
    """Why an interval is left out of the measurements (``PAUSE``: of the opening's only)."""

    INTERRUPTED = "interrupted"
    CLOCK_WENT_BACK = "clock_went_back"
    COUNT_WENT_BACK = "count_went_back"
    NOT_FINITE = "not_finite"  # a timestamp that is NaN or infinite
    STEP_DID_NOT_INCREASE = "step_did_not_increase"
    PAUSE = "pause"
    IMPLAUSIBLE = "implausible"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class PullOverhead:
    """What the recent pull intervals at one factor took beyond the steps between pulls (:meth:`StepClock.pull_overhead`).

    Attributes:
      seconds: seconds a fresh batch beyond the steps between pulls.
      error: its standard error.
      step_seconds: a step between pulls, the time it was compared with.
    """

    seconds: float
    error: float
    step_seconds: float


@dataclasses.dataclass(frozen=True)
class Interval:
    """The steps between two calls of ``observe``.

    Attributes:
      end_step: the step index of the later call.
      steps: steps covered (1, or ``steps_per_execution``).
      seconds: their time.
      fresh: fresh batches the echo stage pulled meanwhile.
      factor: the echo factor in force.
      left_out: ``None`` if measured, else why not.
      waited: seconds of it the loop waited for its own input (``None`` if not told).
    """

    end_step: int
    steps: int
    seconds: float
    fresh: float
    factor: float
    left_out: Optional[LeftOut] = None
    waited: Optional[float] = None


class StepClock:
    """Turns ``observe(step, timestamp, fresh)`` calls into :class:`Interval` records.

    Args:
      elements_per_step: fresh elements per step without echo (the fresh count is
        divided by it).
      track_pulls: keep the intervals with a pull, by factor, for :meth:`pull_overhead`.

    Raises:
      TypeError, ValueError: from :meth:`observe`, for a step that is not an int, a
        timestamp that is not a number, or a fresh count that is missing or not an int >= 0.
    """

    def __init__(self, elements_per_step: int, track_pulls: bool = False) -> None:
        self.elements_per_step = elements_per_step
        # Where tracked, a factor's bin: [deque of (steps, seconds, fresh) of its pull intervals, their steps].
        self._pulls: Optional[dict] = {} if track_pulls else None
        self._last: Optional[tuple[int, float, int]] = None
        self._opening = True
        self._last_wait: Optional[float] = None
        self._waits: Optional[bool] = None
        self._interrupted = False
        self._durations: deque = deque(maxlen=TYPICAL_INTERVALS)
        self._long: deque = deque()  # [step, per-step seconds, seconds charged as a pause, factor] of the recent long intervals
        self.implausible = False
        self._steps = 0  # of every interval timed (measured or a pause)
        self._pause_seconds = 0.0  # what the pauses took beyond typical steps
        self._pull_free: deque = deque()  # (steps, seconds) of the recent pull-free intervals
        self._pull_free_sums = [0, 0.0]  # their steps and seconds
        # Told apart across factors (told the wait, not used): the loop's pauses by where they
        # fall, the input's stalls by how they shrink; the long intervals charged as pauses, to take back.
        self._lattice = PauseLattice()
        self._stalls = ShrinkingStalls()
        self._charged: deque = deque(maxlen=CHARGED_KEPT)
        self._first_step: Optional[int] = None  # the first step the clock saw, where the steps before a stall are counted from

    def pull_free_rate(self, min_steps: int) -> float:
        """Steps per second of the recent intervals without a pull (see the module docstring); nan under ``min_steps``.

        >>> clock = StepClock(elements_per_step=1)
        >>> for step in range(12):  # A pull every third step, after a wait of 0.2 s; 0.1 s a step.
        ...     _ = clock.observe(step, 0.1 * step + 0.2 * (step // 3), fresh=step // 3, factor=3.0)
        >>> round(clock.pull_free_rate(min_steps=4), 6), clock.pull_free_rate(min_steps=100)
        (10.0, nan)
        """
        steps, seconds = self._pull_free_sums
        return steps / seconds if steps >= min_steps and seconds > 0 else math.nan

    def pull_overhead(self, factor: float, min_steps: int) -> Optional[PullOverhead]:
        """Seconds a fresh batch the recent pull intervals at ``factor`` took beyond the steps between pulls, with its error.

        ``None`` without :data:`PULL_OVERHEAD_MIN_INTERVALS` of them, or without
        ``min_steps`` steps between pulls to compare them with (:meth:`pull_free_rate`;
        see :mod:`echoing.control.pull_cost`).

        >>> clock = StepClock(elements_per_step=1, track_pulls=True)
        >>> for step in range(40):  # A pull every 4th step, which takes 15 ms more.
        ...     _ = clock.observe(step, 0.01 * step + 0.015 * (step // 4), fresh=step // 4, factor=4.0)
        >>> overhead = clock.pull_overhead(4.0, min_steps=8)
        >>> round(overhead.seconds, 4), round(overhead.error, 6), round(overhead.step_seconds, 4)
        (0.015, 0.0, 0.01)
        """
        entry = (self._pulls or {}).get(factor_bin(factor))
        pulls = entry[0] if entry else ()
        rate = self.pull_free_rate(min_steps)
        if len(pulls) < PULL_OVERHEAD_MIN_INTERVALS or not math.isfinite(rate):
            return None
        step_seconds = 1 / rate
        each = [(seconds - steps * step_seconds) / fresh for steps, seconds, fresh in pulls]
        steps, seconds, fresh = (sum(column) for column in zip(*pulls))
        mean = sum(each) / len(each)
        spread = math.sqrt(sum((x - mean) ** 2 for x in each) / (len(each) - 1))
        return PullOverhead((seconds - steps * step_seconds) / fresh, spread / math.sqrt(len(each)), step_seconds)

    def _add_pull(self, factor: float, steps: int, seconds: float, fresh: float) -> None:
        # The steps are summed as they come: observe runs once a training step.
        entry = self._pulls.setdefault(factor_bin(factor), [deque(), 0])
        pulls = entry[0]
        pulls.append((steps, seconds, fresh))
        entry[1] += steps
        while entry[1] - pulls[0][0] >= PULL_OVERHEAD_STEPS:
            entry[1] -= pulls.popleft()[0]

    def _add_pull_free(self, steps: int, seconds: float) -> None:
        self._pull_free.append((steps, seconds))
        self._pull_free_sums[0] += steps
        self._pull_free_sums[1] += seconds
        while self._pull_free_sums[0] - self._pull_free[0][0] >= PULL_FREE_STEPS:
            old_steps, old_seconds = self._pull_free.popleft()
            self._pull_free_sums[0] -= old_steps
            self._pull_free_sums[1] -= old_seconds

    def interrupt(self) -> None:
        """The time until the next call is not training."""
        self._interrupted = True

    @property
    def pause_per_step(self) -> float:
        """Seconds of unannounced pause per step since :meth:`end_opening` (or the start), on average."""
        return self._pause_seconds / self._steps if self._steps else 0.0

    def end_opening(self) -> None:
        """From the next interval on, pauses are measured and charged to the loop (:meth:`loop_rate`).

        The pause count starts afresh: a cold start's first waits for input look like pauses.
        """
        self._opening = False
        self._steps, self._pause_seconds = 0, 0.0
        for entry in self._long:
            entry[2] = 0.0

    def loop_rate(self, own_rate: float) -> float:
        """Steps per second where the input keeps up, with the loop's unannounced pauses in."""
        return 1 / (1 / own_rate + self.pause_per_step)

    @property
    def typical_step_seconds(self) -> Optional[float]:
        """The median per-step duration of the recent measured intervals, or None before any."""
        if not self._durations:
            return None
        ordered = sorted(self._durations)
        return ordered[len(ordered) // 2]

    @property
    def long_intervals_keep_a_lattice(self) -> bool:
        """Whether the recent long intervals fall on a lattice of steps (confirmed or not): likely the loop's pauses."""
        return self._lattice.found

    def observe(self, step, timestamp, fresh, factor: float, input_wait=None) -> Optional[Interval]:
        """The interval since the previous call, or None for the first call (or the first after an interrupt).

        ``input_wait`` is the loop's total wait for its own input so far, in seconds (the
        time spent in ``next(iterator)``), at every call or at none.
        """
        step, timestamp, fresh = self._checked(step, timestamp, fresh)
        input_wait = self._checked_wait(input_wait)
        bad = (LeftOut.STEP_DID_NOT_INCREASE if self._last is not None and step <= self._last[0]
               else LeftOut.NOT_FINITE if not math.isfinite(timestamp) else None)
        if bad is not None:
            # Kept out, and the interval after it too: it would start from this call.
            self._interrupted = True
            return Interval(step, 0, math.nan, 0.0, float(factor), left_out=bad)
        last, self._last = self._last, (step, timestamp, fresh)
        last_wait, self._last_wait = self._last_wait, input_wait
        interrupted, self._interrupted = self._interrupted, False
        if last is None:
            if self._first_step is None:
                self._first_step = step
            return None
        steps, seconds = step - last[0], timestamp - last[1]
        counted = (fresh - last[2]) / self.elements_per_step
        waited = None if input_wait is None else input_wait - last_wait
        interval = Interval(step, steps, seconds, counted, float(factor), waited=waited)
        if interrupted:
            return dataclasses.replace(interval, left_out=LeftOut.INTERRUPTED)
        if not seconds > 0:
            return dataclasses.replace(interval, left_out=LeftOut.CLOCK_WENT_BACK)
        if counted < 0 or (waited is not None and waited < 0):
            return dataclasses.replace(interval, left_out=LeftOut.COUNT_WENT_BACK)
        duration, typical = seconds / steps, self.typical_step_seconds
        self._steps += steps
        self._durations.append(duration)
        while self._long and self._long[0][0] <= step - RECURRING_STEPS:
            self._long.popleft()
        long = typical is not None and len(self._durations) > 8 and seconds - steps * typical > PAUSE_FACTOR * typical
        # The echo stage made more than the steps took (and a micro-batch): the input was
        # working all along, so its time counts (a lump's stall, or a pause with room in
        # the buffers, where the input's rate is what it was).
        worked = counted * factor > steps + factor
        # Told the loop's wait, the clock need not guess: the interval was the input's if
        # the loop waited for it over half the interval's excess, else the loop's own pause
        # (decision 0019: without it, the stalls of lumps into small buffers were taken for
        # pauses, and pauses with room in large buffers for the input's time). Not where
        # the echo stage pulls on the loop's thread: there the wait holds the pulls too.
        placed_by_wait = waited is not None and self._pulls is None
        if long and placed_by_wait:
            worked = waited > (seconds - steps * typical) / 2
        on_lattice = None
        if not placed_by_wait:
            if long:
                on_lattice = self._lattice.place(step, steps, float(factor))
            else:
                self._lattice.passed(step)
        if long and not placed_by_wait and not on_lattice:
            if self._stalls.note(float(factor), seconds - steps * typical, step, self._first_step, steps * typical):
                # They last far longer here than at higher factors: the input's stalls, measured,
                # and those charged as pauses at this factor are taken back (decision 0027).
                for entry in self._charged:
                    if entry[3] == float(factor):
                        self._pause_seconds -= entry[2]
                        entry[2] = 0.0
                self._long.append([step, duration / typical, 0.0, float(factor)])
                return interval
        if long and on_lattice:
            # On a lattice of steps that held across a change of factor: the loop's pause,
            # whatever the echo stage made, and no stall's recurrence (decision 0027).
            self._pause_seconds += seconds - steps * typical
            return dataclasses.replace(interval, left_out=LeftOut.PAUSE) if self._opening else interval
        if long and not (placed_by_wait and worked):
            # Every long interval counts toward a recurrence, the input's own stalls and the
            # waits of a full dispatch queue alike (the echo stage may work through either);
            # told the wait, only those the loop did not wait through (a dispatch queue's are).
            self._long.append([step, duration / typical, 0.0, float(factor)])
        # Steps on batches already made, that did not wait: the step's own rate (see the module docstring).
        pull_free = not long and counted == 0
        if self._pulls is not None and not long and counted > 0:
            self._add_pull(factor, steps, seconds, counted)
        long = long and not worked
        if len(self._long) >= RECURRING_LONG:
            if not placed_by_wait:
                for entry in self._long:  # Taken for pauses before they recurred: the input's stalls after all.
                    self._pause_seconds -= entry[2]
                    entry[2] = 0.0
            if min(entry[1] for entry in self._long) > IMPLAUSIBLE_SPREAD:
                # Between the long waits of a full dispatch queue the steps look far too fast.
                self.implausible = True
                self._pull_free.clear()  # Calls that returned at once: no step's own rate.
                self._pull_free_sums = [0, 0.0]
                return dataclasses.replace(interval, left_out=LeftOut.IMPLAUSIBLE)
            if not placed_by_wait:
                if pull_free:
                    self._add_pull_free(steps, seconds)
                return interval  # The input's own stalls: measured.
        if long:
            self._long[-1][2] = seconds - steps * typical
            self._pause_seconds += self._long[-1][2]
            self._charged.append(self._long[-1])
            return dataclasses.replace(interval, left_out=LeftOut.PAUSE) if self._opening else interval
        if pull_free:
            self._add_pull_free(steps, seconds)
        return interval

    def _checked_wait(self, input_wait) -> Optional[float]:
        if input_wait is not None and (isinstance(input_wait, bool) or not isinstance(input_wait, numbers.Real)
                                       or not math.isfinite(input_wait) or input_wait < 0):
            raise ValueError(f"input_wait: expected the seconds waited for input so far (a finite number >= 0), "
                             f"got {input_wait!r}")
        if self._waits is None:
            self._waits = input_wait is not None
        elif self._waits != (input_wait is not None):
            raise ValueError(f"input_wait: give the wait at every call or at none; got {input_wait!r} after "
                             f"{'waits' if self._waits else 'none'}")
        return None if input_wait is None else float(input_wait)

    def _checked(self, step, timestamp, fresh):
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"step: expected an int, got {type(step).__name__}: {step!r}")
        if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Real):
            raise TypeError(f"timestamp: expected seconds (a number), got {type(timestamp).__name__}: {timestamp!r}")
        if fresh is None:
            raise ValueError("fresh: the echo stage's count of fresh elements so far (int(stats.fresh)) is required "
                             "at every call; got None")
        if isinstance(fresh, bool) or not isinstance(fresh, numbers.Integral) or fresh < 0:
            raise ValueError(f"fresh: expected a count of fresh elements (an int >= 0), got {fresh!r}")
        return int(step), float(timestamp), int(fresh)
