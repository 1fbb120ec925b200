"""The rates at one echo factor, measured from the intervals since it was set, and what they say of R.

A :class:`Measurement` collects the measured intervals at one factor into windows of at
least :data:`WINDOW_STEPS` steps and sums them: the **step rate** (steps per second) and
the **production rate** (output batches per second the echo stage made: the factor times
the fresh batches it pulled per second; in the opening, the step rate). Sums over
many windows, not the median of one, so that lumps and stalls count at their weight.

Two things keep batches made before the factor in force out of a measurement:

* the first :data:`SETTLE_STEPS` steps after a change are not measured (the echo
  stage's micro-batch at the old factor);
* while the first quarter of its windows reads a rate more than ``tolerance`` away from
  the rest, and more than two standard errors of the windows' own spread (a jittered
  step is not a change of rate), that quarter is dropped: the buffers after the echo stage still held the old
  factor's batches (a lower factor shows in the step rate only once they are drained),
  or the upstream's prefetch still held stock that the echo stage pulled faster than the
  input reads.

A measurement is complete when it can tell, at two standard errors (from the spread of
its windows), whether the production rate is below ``(1 - tolerance)`` times the step's
own rate (**the input cannot keep up**: then ``R = e * s / production``) or not (**it
keeps up**: ``R <= e``), or after :data:`MAX_STEPS` steps (a check's, after
:data:`CHECK_MAX_STEPS`), when it says what its sums
say. Lumpy input spreads the windows, so it is measured for longer, by construction.
A reading that cannot tell, whose production is short of the threshold by less than the
tolerance, says the input keeps up: its steps ran within about twice the tolerance of
their own rate, so a raise would buy little step rate for its copies. Reading it as
behind gave a jittered step an ``R`` a little above the factor, and a raise to it, at
every reading (design seed 1014 of ``benchmarks/controller_sweep.py``, 32% step jitter,
ran from e = 8 to 13 where the best fixed factor was 2.9).

Where the loop also says how long it waited for its own input (``input_wait``: the time
spent in ``next(iterator)``), a reading whose steps themselves ran below ``(1 -
tolerance)`` times their own rate asks whose input held them back. A trainer of several
in step (``MultiWorkerMirroredStrategy``) needs this: its steps run at the slowest
trainer's rate, so its production falls with everyone's. Had its own input held the
steps to ``r`` steps a second, the loop would have waited ``1 - r / s`` of the time for
it; if it waited less than half that (beyond its wait at the opening, where the input is
outrun: the call's own cost), another trainer's input held the steps back and the
reading is **held back**, not behind: this input's R is unknown. While the steps still
run at their own rate a short production is this input's own (the buffers after the echo
stage are draining), as without the wait.

>>> m = Measurement(factor=2.0, tolerance=0.1)
>>> for step in range(40):  # Every step 0.1 s; half a fresh batch per step: production 10 a second.
...     closed = m.add(steps=1, seconds=0.1, fresh=0.5)
>>> reading = m.reading(own_rate=20.0)
>>> reading.input_bound, round(reading.ratio, 2), reading.complete
(True, 4.0, True)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

# Steps per window: the spread of windows gives a measurement's standard error, and a
# window of 8 steps holds 8 calls at steps_per_execution 1 and 1 at 8 (the sweep's range).
WINDOW_STEPS = 8
# Steps left unmeasured after a change of factor: the micro-batch the echo stage pulled
# at the old factor lasts e steps (benchmarks/controller_sweep.py, cold starts).
SETTLE_STEPS = 4
# Windows a measurement needs at least, and the steps after which it decides on its sums:
# a record of 32 fresh batches lasts 32 e steps, so 320 steps hold a few at e near R = 4.
MIN_WINDOWS = 3
MAX_STEPS = 320
# A check's reading decides after this many steps: a check just below R (held / 1.25
# where the knee was read a little high) reads a production within the tolerance of the
# step's own rate, which no length of reading tells apart, and it then ran all 320 steps
# below R (docs/results/grain.md: a check at 3.3-3.7 with R = 4, every 200 steps). At 128
# the design seeds' p95 at c = 0.05 went from 1.151 to 1.147 and on 1200-1399 from 1.181
# to 1.156; 96 and 192 did no better (docs/decisions/0017-a-check-decides-within-128-steps.md).
CHECK_MAX_STEPS = 128
# A window that saw no pull ends here anyway (a stall, a flood at a
# high factor): a fifth of the horizon.
MAX_WINDOW_STEPS = 64
# The echo stage's pulls a reading needs before it may end early: a count of a
# few pulls says little (three windows of a lumpy input's stall read "no input at all").
MIN_PULLS = 4
# The most of a reading's time one interval may hold before the reading may end early:
# a 0.6 s pause in 24 steps of 10 ms read "R = 7.6" at R = 3 (tests/test_controller.py).
LONGEST_SHARE = 0.5
# Steps a reading needs before it may say the input keeps up: the floods between a lumpy
# input's stalls last a record's batches times e (32 batches at e = 2 in the sweep).
MIN_KEEPS_UP_STEPS = 64


@dataclasses.dataclass(frozen=True)
class Reading:
    """What a measurement says at one factor.

    Attributes:
      factor: the echo factor measured.
      steps: steps measured (after settling and trimming).
      step_rate: steps per second.
      production_rate: output batches per second made by the echo stage.
      error: the standard error of ``production_rate``, relative to it.
      own_rate: the step's own rate it was compared with (``nan`` if unknown).
      input_bound: whether the input could not keep up at ``factor``.
      ratio: R if ``input_bound`` (``factor * own_rate / production_rate``), else ``nan``.
      complete: whether the measurement can stop (decided at two standard errors, or
        long enough).
      held_back: the steps ran slow, but the loop waited for its own input less than
        half as long as that input alone would have made it (only with ``input_wait``):
        another trainer's input held the steps back, and this one's R is unknown.
      wait_share: the share of the time the loop waited for its own input (``nan``
        without ``input_wait``).
      marginal: read as keeping up, though short of the threshold on its sums: by less
        than two standard errors and less than the tolerance (see the module docstring).
      made_rate: output batches per second the echo stage made from its pulls (``factor``
        times the fresh batches it pulled per second): ``production_rate``, save in the
        opening, whose production is its step rate.
    """

    factor: float
    steps: int
    step_rate: float
    production_rate: float
    error: float
    own_rate: float
    input_bound: bool
    ratio: float
    complete: bool
    held_back: bool = False
    wait_share: float = math.nan
    marginal: bool = False
    made_rate: float = math.nan

    @property
    def fresh_rate(self) -> float:
        """Fresh batches per second the reading's input made: ``production_rate / factor``."""
        return self.production_rate / self.factor


def ratio_from_sums(factor: float, own_rate: float, production: float) -> float:
    """R from a reading's sums: ``factor * own_rate / production`` (``inf`` where nothing was made).

    >>> ratio_from_sums(4.0, own_rate=100.0, production=80.0), ratio_from_sums(4.0, 100.0, 0.0)
    (5.0, inf)
    """
    return factor * own_rate / production if production > 0 else math.inf


@dataclasses.dataclass
class Window:
    """At least :data:`WINDOW_STEPS` steps of one measurement, summed.

    Attributes:
      steps: steps in it.
      seconds: their time.
      fresh: fresh batches the echo stage pulled meanwhile.
      pulls: intervals in which it pulled any.
      longest: the longest interval's seconds.
      waited: seconds the loop waited for its own input (0 if not told).
    """

    steps: int = 0
    seconds: float = 0.0
    fresh: float = 0.0
    pulls: int = 0
    longest: float = 0.0
    waited: float = 0.0


class Measurement:
    """Sums the intervals at one factor (see the module docstring).

    Args:
      factor: the echo factor in force.
      tolerance: the input keeps up when its production is within this share of the
        step's own rate.
      opening: whether this is the opening's measurement of the step's own rate.
      waits: whether intervals carry the loop's wait for its own input.
      check: whether this is a check's reading (complete after :data:`CHECK_MAX_STEPS`).
    """

    def __init__(self, factor: float, tolerance: float, opening: bool = False, waits: bool = False,
                 check: bool = False) -> None:
        self.factor = float(factor)
        self.longest_steps = CHECK_MAX_STEPS if check else MAX_STEPS
        self.tolerance = tolerance
        self.waits = waits
        self.settle_left = SETTLE_STEPS
        self.windows: list[Window] = []
        self._open = Window()
        self.steps_seen = 0  # trimmed ones too
        # The opening measures the step's own rate: its windows are judged by the step rate.
        self.of_steps = opening

    def add(self, steps: int, seconds: float, fresh: Optional[float], waited: Optional[float] = None) -> bool:
        """Adds a measured interval; returns whether it closed a window (only then can the reading change)."""
        if self.settle_left > 0:
            self.settle_left -= steps
            return False
        self.steps_seen += steps
        window = self._open
        window.steps += steps
        window.seconds += seconds
        window.fresh += fresh
        window.pulls += 1 if fresh else 0
        window.longest = max(window.longest, seconds)
        window.waited += min(waited or 0.0, seconds)
        # A window spans at least one of the echo stage's pulls, so that its fresh
        # count is rarely none: echoing.echo pulls up to 64 elements at once, which is 8
        # steps' worth at a batch of 8 and so 8 e steps; a stall ends it at MAX_WINDOW_STEPS.
        pulled = self.of_steps or window.pulls >= 1 or window.steps >= MAX_WINDOW_STEPS
        if window.steps < WINDOW_STEPS or not pulled:
            return False
        self.windows.append(window)
        self._open = Window()
        self._trim()
        while self.steps - self.windows[0].steps >= MAX_STEPS:
            del self.windows[0]  # A held factor is read over a rolling horizon of MAX_STEPS.
        return True

    @property
    def steps(self) -> int:
        return sum(w.steps for w in self.windows)

    def _amount(self, window: "Window") -> float:
        """What a window made: output batches (its steps, in the opening)."""
        return window.steps if self.of_steps else self.factor * window.fresh

    def _production(self, windows) -> float:
        return sum(self._amount(w) for w in windows) / sum(w.seconds for w in windows)

    def _trim(self) -> None:
        while len(self.windows) >= 8:  # Two windows in the quarter at least, so that one slow step is not a trend.
            quarter = len(self.windows) // 4
            head, rest = self._production(self.windows[:quarter]), self._production(self.windows[quarter:])
            if abs(head - rest) <= max(self.tolerance * rest, 2 * self._spread(rest, quarter, self.windows[quarter:])):
                return
            del self.windows[:quarter]

    def _spread(self, rate: float, count: int, windows) -> float:
        """The standard error of the rate of ``count`` windows like ``windows`` (the rest: a slow head must not widen it)."""
        seconds = sum(w.seconds for w in windows) / len(windows)
        variance = sum((self._amount(w) - rate * w.seconds) ** 2 for w in windows) / (len(windows) - 1)
        return math.sqrt(variance / count) / seconds

    def _error(self, rate: float) -> float:
        """The standard error of the production rate (a ratio estimator), in batches per second.

        Windows are taken in groups of about the square root of their number (batch
        means), so that a lump spanning neighbouring windows counts once, not as agreement.
        """
        size = max(1, math.isqrt(len(self.windows)))
        groups = [self.windows[i:i + size] for i in range(0, len(self.windows) - size + 1, size)]
        n = len(groups)
        if n < 2:
            return math.inf
        seconds = sum(w.seconds for group in groups for w in group)
        residuals = sum((sum(self._amount(w) - rate * w.seconds for w in group)) ** 2 for group in groups)
        return math.sqrt(residuals * n / (n - 1)) / seconds

    def reading(self, own_rate: float, own_wait: float = 0.0) -> Optional[Reading]:
        """What the windows so far say, compared with the step's own rate ``own_rate`` (nan if unknown).

        ``own_wait`` is the share of the time the loop spent in ``next(iterator)`` where the
        input was outrun (the opening's): the call's own cost, not a wait for input.
        """
        if len(self.windows) < MIN_WINDOWS:
            return None
        steps = self.steps
        seconds = sum(w.seconds for w in self.windows)
        step_rate = steps / seconds
        production = self._production(self.windows)
        error = self._error(production)
        held_back = False
        share = sum(w.waited for w in self.windows) / seconds if self.waits else math.nan
        marginal = False
        if not math.isfinite(own_rate):
            # The opening: how fast do steps run where the input is outrun?
            bound, complete = False, error <= self.tolerance / 2 * production or self.steps_seen >= MAX_STEPS
        else:
            threshold = (1 - self.tolerance) * own_rate
            bound = production < threshold
            pulls = sum(w.pulls for w in self.windows)
            confident = abs(production - threshold) >= 2 * error and pulls >= MIN_PULLS
            if self.waits and bound and step_rate < threshold:
                # The steps ran slow too: behind, unless the loop did not wait for its own
                # input; then another trainer's input held the steps back (see the module
                # docstring). While the steps still run at their own rate, a short production
                # is this input's own (the buffers after the echo stage are draining).
                # Had this input alone held the steps back, the loop would have waited
                # 1 - step_rate / own_rate of the time; another's did if it waited under half that.
                waited = share - own_wait >= (1 - step_rate / own_rate) / 2
                bound, held_back = waited, not waited
            long_enough = bound or steps >= MIN_KEEPS_UP_STEPS
            # No one interval decides: a stall or a pause that holds over LONGEST_SHARE of the
            # time waits for more steps around it.
            long_enough = long_enough and max(w.longest for w in self.windows) <= LONGEST_SHARE * seconds
            complete = (confident and long_enough) or self.steps_seen >= self.longest_steps
            # Short by less than two standard errors and within the tolerance of the threshold:
            # as near keeping up as the reading can tell (see the module docstring).
            marginal = (bound and not confident and pulls >= MIN_PULLS
                        and production >= (1 - self.tolerance) * threshold)
            bound = bound and not marginal
        ratio = ratio_from_sums(self.factor, own_rate, production) if bound else math.nan
        relative = error / production if production > 0 else math.inf
        made = self.factor * sum(w.fresh for w in self.windows) / seconds
        return Reading(self.factor, steps, step_rate, production, relative, own_rate, bound, ratio, complete,
                       held_back, share, marginal, made)
