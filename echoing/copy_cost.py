"""What a copy costs a task: ``c`` of the progress model, fitted to steps to a target at a few factors.

The law behind :class:`echoing.AutoEcho` and :class:`echoing.EchoController` maximizes the
training progress per second, ``T(e) / (1 + c (e - 1))``: a step on data echoed ``e``
times makes ``1 / (1 + c (e - 1))`` of a fresh step's progress, so a run at a fixed ``e``
needs ``1 + c (e - 1)`` times the fresh run's steps to the same target. Given the steps
a short sample run needed at ``e = 1`` and at one or more other factors (the same model,
data and target; the echo placed as it will be), :func:`fit_copy_cost` fits ``c`` by
least squares through the origin, and the result is the ``copy_cost`` setting.

The committed sample runs give 0.08 for the ResNet and 0.21 for the Transformer
(``benchmarks/results/time_to_target.json``, through ``benchmarks.lib.progress``).

>>> import echoing
>>> round(echoing.fit_copy_cost({1: 1750, 2: 2083, 4: 2748}), 3)
0.19
"""

from __future__ import annotations

import math
import numbers
from typing import Mapping

__all__ = ["fit_copy_cost"]


def fit_copy_cost(steps_to_target: Mapping[float, float]) -> float:
    """``c`` such that a run at factor ``e`` needs ``1 + c (e - 1)`` times the steps of a run at ``e = 1``.

    Args:
      steps_to_target: the steps (or their median over seeds) each factor needed to reach
        the same target: ``1`` and at least one factor above 1.

    Returns:
      The least-squares ``c``, at least 0: where echoed runs needed no more steps than the
      fresh one (within a sample run's noise) a copy is taken as worth a fresh batch, 0.

    Raises:
      TypeError, ValueError: ``steps_to_target`` without factor 1 and another, with a factor
        below 1 or steps that are not positive numbers, naming the entry; or a fit above 1
        (each copy worth less than nothing: echo does not pay on this task).

    >>> fit_copy_cost({1.0: 1000, 3.0: 1000})
    0.0
    """
    if not isinstance(steps_to_target, Mapping):
        raise TypeError(f"steps_to_target: expected a mapping of echo factor to steps, got "
                        f"{type(steps_to_target).__name__}: {steps_to_target!r:.200}")
    for factor, steps in steps_to_target.items():
        for what, value in (("factor", factor), ("steps", steps)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise TypeError(f"steps_to_target: expected finite numbers, got {what} {value!r} "
                                f"in the entry {factor!r}: {steps!r}")
        if factor < 1 or steps <= 0:
            raise ValueError(f"steps_to_target: expected factors >= 1 and steps > 0, got the entry {factor!r}: {steps!r}")
    if 1 not in steps_to_target or len(steps_to_target) < 2:
        raise ValueError(f"steps_to_target: expected the steps at factor 1 and at least one factor above it, got "
                         f"{dict(steps_to_target)!r:.200}")
    fresh = steps_to_target[1]
    pairs = [(factor - 1, steps / fresh - 1) for factor, steps in steps_to_target.items() if factor != 1]
    cost = sum(x * y for x, y in pairs) / sum(x * x for x, _ in pairs)
    if cost > 1:
        raise ValueError(f"steps_to_target: the fit gives c = {cost:.3g} > 1 (each copy worth less than nothing: echo "
                         f"does not pay on this task), from {dict(steps_to_target)!r:.200}")
    return max(0.0, cost)
