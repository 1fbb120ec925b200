"""The references a law is held against on the sweep's loops, besides the best fixed factor.

* :class:`ToldRatio`: told the true R at every step, it sets ``HEADROOM x R``. No law can
  know R sooner; on lumpy input the best factor lies well above R, which this shows. With
  ``opening_steps``, it first runs that many steps at ``max_factor``, as the law's opening
  does, and is told R only then.
* :class:`LawThenFixed`: the shipped law until it ends its opening (:data:`OPENING`) or its
  search (:data:`SEARCH`: its first decision in any later phase), then a fixed factor: in
  the sweep, the loop's best fixed factor at the slope judged. Its time over that factor's
  is what the law's measuring cost, whatever it did after; a target it misses is out of
  reach of any law that opens, or opens and searches, as the shipped law does.
* :class:`LawThenReads`: the shipped law until it ends its search, then a reading of
  :data:`READ_STEPS` steps at each of a few factors around a given one (in the sweep, the
  best fixed factor at the slope judged), and from then on the factor whose reading made
  the most progress a second at that slope. What it loses against
  :class:`LawThenFixed` at the same factor is what confirming the peak by measuring costs,
  where a law knew where it lies.

>>> from benchmarks.lib.loops import draw_case
>>> ToldRatio(draw_case(0), opening_steps=28)._at(0) == draw_case(0).max_factor
True
"""

from __future__ import annotations

import echoing
import echoing.control.policy
from echoing.controller import Phase

# The told-R reference holds the shipped law's headroom over R.
HEADROOM = echoing.ControllerSettings().headroom
# The law's opening reads the step's own rate at max_factor over at least 3 windows of 8
# steps (echoing.control.estimate) after a settle of 4: the told-R-after-an-opening
# reference spends this many steps there before it is told R.
OPENING_STEPS = 28
# The phases a LawThenFixed follows the law through: its opening, or its opening and search.
OPENING = (Phase.OPEN,)
SEARCH = (Phase.OPEN, Phase.SEARCH)
# A LawThenReads reading: the steps let go after each change of factor (the buffers after the
# echo stage still hold the last factor's batches), then the steps it times.
READ_SETTLE_STEPS = 16
READ_STEPS = 128
# The factors a LawThenReads reads, as multiples of the one given: it and one climb's step
# above (echoing.control.policy.CLIMB_STEP), or one step to either side.
ABOVE = (1.0, 1.25)
AROUND = (1 / 1.25, 1.0, 1.25)


class ToldRatio:
    """Told the true R at every step, it sets ``HEADROOM x R`` (after ``opening_steps`` at ``max_factor``)."""

    def __init__(self, case, opening_steps: int = 0):
        self.case = case
        self.opening_steps = opening_steps
        self.factor = 1.0  # The variable's first value; the first call sets R's factor.

    def _at(self, step: int) -> float:
        if step < self.opening_steps:
            return self.case.max_factor
        return min(self.case.max_factor, max(1.0, HEADROOM * self.case.ratio_at(step)))

    def observe(self, step: int, timestamp: float, fresh=None):
        factor = self._at(step)
        changed, self.factor = factor != self.factor, factor
        return True if changed else None


class LawThenFixed:
    """``law`` while its phase is one of ``phases``; from its first decision in another phase on, ``factor``.

    Args:
      law: an :class:`echoing.EchoController`, given the fresh count as the loop gives it.
      factor: the factor run from the step the law leaves ``phases``.
      phases: :data:`OPENING` or :data:`SEARCH`.
    """

    def __init__(self, law: echoing.EchoController, factor: float, phases: tuple = SEARCH):
        self.law = law
        self.fixed = float(factor)
        self.phases = phases
        self.factor = law.factor
        self.left_at = None  # the step at which the law left its phases

    @property
    def decisions(self) -> list:
        """The law's decisions, up to and including the one that left its phases."""
        return self.law.decisions

    def observe(self, step: int, timestamp: float, fresh=None):
        if self.left_at is None:
            decision = self.law.observe(step, timestamp, fresh=fresh)
            if decision is None:
                return None
            if decision.phase in self.phases:
                self.factor = self.law.factor
                return decision
            self.left_at = step
        changed, self.factor = self.fixed != self.factor, self.fixed
        return True if changed else None


class LawThenReads:
    """``law`` until it ends its search; then each of ``factor`` times ``multiples`` read in turn, and the best read held.

    Each reading lets :data:`READ_SETTLE_STEPS` steps go, then times :data:`READ_STEPS`;
    its value is its step rate times a step's progress at ``slope``
    (:func:`echoing.control.policy.progress_per_second`). After the last, the factor
    whose reading was worth most is held to the end.

    Args:
      law: an :class:`echoing.EchoController`, given the fresh count as the loop gives it.
      factor: the factor read around (clipped to ``[1, max_factor]`` with its neighbours).
      slope: the ``c`` a reading is valued at.
      multiples: :data:`ABOVE` or :data:`AROUND`.

    >>> reads = LawThenReads(echoing.EchoController(max_factor=8.0, elements_per_step=1), 3.0, 0.19, AROUND)
    >>> reads.candidates
    [2.4, 3.0, 3.75]
    """

    def __init__(self, law: echoing.EchoController, factor: float, slope: float, multiples: tuple = AROUND):
        self.law = law
        self.slope = slope
        top = law.settings.max_factor
        self.candidates = sorted({round(min(top, max(1.0, factor * m)), 4) for m in multiples})
        self.factor = law.factor
        self.values: list[tuple[float, float]] = []  # (progress a second, factor) of each reading
        self._searching = True
        self._reading = None  # (step, timestamp) where the timed part of the current reading starts
        self._changed_at = None  # the step at which the current candidate was set

    @property
    def decisions(self) -> list:
        return self.law.decisions

    def observe(self, step: int, timestamp: float, fresh=None):
        if self._searching:
            decision = self.law.observe(step, timestamp, fresh=fresh)
            if decision is None or decision.phase in SEARCH:
                self.factor = self.law.factor
                return decision
            self._searching = False
            return self._set(step, self.candidates[0])
        if len(self.values) == len(self.candidates):
            return None
        if self._reading is None:
            if step - self._changed_at >= READ_SETTLE_STEPS:
                self._reading = (step, timestamp)
            return None
        start, started = self._reading
        if step - start < READ_STEPS:
            return None
        rate = (step - start) / (timestamp - started)
        self.values.append((echoing.control.policy.progress_per_second(rate, self.factor, self.slope), self.factor))
        if len(self.values) < len(self.candidates):
            return self._set(step, self.candidates[len(self.values)])
        return self._set(step, max(self.values)[1])

    def _set(self, step: int, factor: float):
        self._changed_at, self._reading = step, None
        changed, self.factor = factor != self.factor, factor
        return True if changed else None
