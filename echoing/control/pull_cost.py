"""What the echo stage's pulls cost the loop's own thread, where it pulls there, and the factor below which it outweighs the copies.

:func:`echoing.torch.echo` takes each fresh batch from the ``DataLoader`` inside the
loop's own ``next``: the hand-over (the worker's batch unpickled, rows mixed) is paid by
the step that pulls, not beside it as ``tf.data`` pays it. A step at factor ``e`` then
takes ``a + p / e`` seconds where the input keeps up (``a``: a step that pulls nothing,
``p``: the pull's seconds a fresh batch), so the steps between pulls run faster than any
step can, and taken for the step's own rate they read the input as behind at every
factor: in the PyTorch study (``docs/results/torch.md``) they ran at 98.5 steps a second
where the steps at e = 8 ran at 85-92 with the input keeping up (R = 4), and the law held
5-8.

**The estimate.** For each factor run, the seconds a fresh batch the pull intervals took
beyond the steps between pulls (:meth:`echoing.control.windows.StepClock.pull_overhead`).
A wait for input lands in the pull intervals too, but only adds to the cost: the least
overhead read at any factor bounds the cost from above, and where the input keeps up at
that factor it is the cost itself. The cost is that least overhead, each factor's latest
counting (factors within 10% of each other count as one, since the clock pools their
intervals: :func:`echoing.control.windows.factor_bin`), as long as every one is at least
:data:`Z` standard errors above zero; a factor whose overhead is not says the pulls cost
nothing, and the cost is 0.

**The floor.** Where pulls cost, ``(a + p / e) (1 + c (e - 1))`` (seconds a step over its
progress, ``c`` the copy cost) is least at ``e = sqrt(p (1 - c) / (a c))``: below that,
a copy saves more time on the loop's thread than it costs in progress, whatever R is.

Only for loops that say their echo stage pulls on their own thread
(``ControllerSettings.pulls_on_loop_thread``): where it pulls beside the steps, as in the
simulated loops of ``benchmarks/controller_sweep.py``, the steps between pulls read a
jittered step a little fast, and the overhead that leaves is taken for a cost on some
loops (the design seeds' p50 at c = 0.05 went from 1.025 to 1.029:
``docs/decisions/0016-pulls-on-the-loops-thread.md``).

>>> cost = PullCost()
>>> cost.note(8.0, PullOverhead(seconds=0.010, error=0.001, step_seconds=0.01))  # 10 ms a fresh batch at e = 8,
>>> cost.note(2.0, PullOverhead(seconds=0.025, error=0.001, step_seconds=0.01))  # and a wait besides at e = 2.
>>> cost.seconds
0.01
>>> round(cost.floor(step_seconds=0.01, copy_cost=0.13, max_factor=8.0), 2)
2.59
"""

from __future__ import annotations

import math

from echoing.control.windows import PullOverhead, factor_bin

# An overhead counts only at this many standard errors above zero: the steps between
# pulls read a jittered step a little fast (echoing.control.windows), which leaves a
# small overhead where pulls cost nothing.
Z = 3.0
# An overhead whose standard error is over this share of a step says nothing either way and
# is not noted: the PyTorch study's opening (seed 2, docs/results/torch.md) read 3-6 pulls at
# e = 8, whose hand-overs vary, and its overhead, not significant, kept the cost at 0 all run.
PRECISION = 0.25


class PullCost:
    """The pulls' cost on the loop's thread, from the overheads read at the factors run (see the module docstring).

    Attributes:
      seconds: the cost, in seconds a fresh batch (0 before any overhead, or where one is not significant).
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self._overheads: dict[int, tuple[float, float]] = {}  # factor_bin(factor): (overhead, error)

    def note(self, factor: float, overhead: PullOverhead) -> None:
        """Records the overhead read at ``factor``.

        It replaces the one read there before, or at a factor within 10% of it (the clock
        pools their pull intervals, so the later reading holds the earlier's); none
        expires, since a pull's hand-over does not get cheaper. One whose error is over
        :data:`PRECISION` of a step between pulls is not noted.
        """
        if overhead.error > PRECISION * overhead.step_seconds:
            return
        self._overheads[factor_bin(factor)] = (overhead.seconds, overhead.error)
        significant = all(seconds > Z * error for seconds, error in self._overheads.values())
        self.seconds = min(seconds for seconds, _ in self._overheads.values()) if significant else 0.0

    def floor(self, step_seconds: float, copy_cost: float, max_factor: float) -> float:
        """The factor below which a copy saves more of the loop's time than it costs in progress (1 without a cost)."""
        if self.seconds <= 0 or not step_seconds > 0:
            return 1.0
        if copy_cost <= 0:
            return max_factor
        best = math.sqrt(self.seconds * (1 - copy_cost) / (step_seconds * copy_cost))
        return min(max_factor, max(1.0, best))
