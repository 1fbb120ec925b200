"""What a replay records: each step's clock and factor, and the echo controller's decisions.

:func:`benchmarks.lib.replay.replay` returns a :class:`Timeline`; AutoEcho's is kept as an
:class:`AutoEchoTimeline` (with the name of the law that made it) so that its training
can follow in a later run. The controller's decisions are :class:`Decision` records.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from echoing import Cause, EchoDecision, Phase
from benchmarks.lib.results_io import Record, fields_of


@dataclasses.dataclass(frozen=True)
class Decision(Record):
    """One decision of the echo controller, as a results file keeps it (:class:`echoing.EchoDecision`, without its reading).

    Attributes:
      step: the step it was taken at; factor: the factor from then on; previous_factor:
        the one before.
      phase, cause: the :class:`echoing.Phase` entered and the :class:`echoing.Cause`.
      reason: the decision as a sentence with its figures (``EchoDecision.reason``).

    >>> import echoing
    >>> controller = echoing.EchoController(max_factor=8.0, elements_per_step=128)
    >>> decision = Decision.of(controller.observe(0, 0.0, fresh=0))
    >>> decision.step, decision.factor, decision.phase, decision.cause
    (0, 8.0, <Phase.OPEN: 'open'>, <Cause.START: 'start'>)
    >>> Decision.from_record(decision.record()) == decision
    True
    """

    step: int
    factor: float
    previous_factor: float
    phase: Phase
    cause: Cause
    reason: str

    @classmethod
    def of(cls, decision: EchoDecision) -> "Decision":
        return cls(decision.step, float(decision.factor), float(decision.previous_factor), decision.phase, decision.cause,
                   decision.reason)


def first_hold(decisions: tuple[Decision, ...]) -> Optional[Decision]:
    """The first decision that holds a factor (``None`` if the controller never held one)."""
    return next((d for d in decisions if d.phase == Phase.HOLD), None)


@dataclasses.dataclass(frozen=True)
class Timeline(Record):
    """A replay (:func:`benchmarks.lib.replay.replay`).

    Attributes:
      seconds: for every step, seconds from the first batch to the step's end.
      factors: the factor set when each step's batch was pulled.
      startup_seconds: until the first batch (the buffers' fill).
      decisions: the controller's :class:`Decision` s (empty without one).
      fresh: the echo stage's fresh count after every step, where the controller read it; else ``None``.
    """

    seconds: tuple[float, ...]
    factors: tuple[float, ...]
    startup_seconds: float
    decisions: tuple[Decision, ...]
    fresh: Optional[tuple[int, ...]]


@dataclasses.dataclass(frozen=True)
class AutoEchoTimeline(Timeline):
    """AutoEcho's timed replay, saved so that its training can follow in a later run: a :class:`Timeline` and its law.

    Attributes:
      law: :data:`echoing.controller.LAW` when it was timed (absent in timelines before laws were named).
    """

    OMITTED_WHEN_NONE = ("law",)

    law: Optional[str] = None

    @classmethod
    def of(cls, timeline: Timeline, law: str) -> "AutoEchoTimeline":
        return cls(**fields_of(timeline), law=law)

    @property
    def held(self) -> Optional[Decision]:
        """The first decision that held a factor (``None`` if it never held)."""
        return first_hold(self.decisions)

    @property
    def held_factor(self) -> Optional[float]:
        return self.held.factor if self.held else None
