"""Training progress at an echo factor: how many steps a schedule of factors needs to reach a target.

Echoed steps train less than fresh ones. The model: a step at factor ``e`` makes
``1 / (1 + a (e - 1))`` of a fresh step's progress, so a run at a fixed ``e`` needs
``1 + a (e - 1)`` times the fresh run's steps, and a schedule of factors (AutoEcho's)
reaches the target where its summed progress reaches the fresh run's steps. ``a`` is a
task's own: :func:`benchmarks.screen_replay.progress_slope` fits it to the sample runs.
The controller simulation (:mod:`benchmarks.controller_simulation`) times its
``documents`` scenario to the Transformer's.

>>> steps_to_progress([2.0] * 100, progress_steps=10, slope=1.0)
20
"""

from __future__ import annotations

from typing import Optional

# Progress per step at factor e, as a share of a fresh step's: 1 / (1 + PROGRESS_SLOPE (e - 1))
# gives the Transformer's steps to target at e = 1, 2, 4 when it read whole files (1,750,
# 2,050 and 2,700 in sample mode: 1,750, 2,083 and 2,748) and more than its budget of 4,000 at
# e = 8 (4,077), where no sample run reached the target (git show
# 452150c:docs/results/time_to_target.md). PROGRESS_STEPS is the first. The simulation's
# documents are whole files too.
PROGRESS_SLOPE = 0.19
PROGRESS_STEPS = 1750


def progress_per_step(factor: float, slope: float = PROGRESS_SLOPE) -> float:
    """A step's training progress at echo ``factor``, as a share of a fresh step's (see ``PROGRESS_SLOPE``)."""
    return 1 / (1 + slope * (factor - 1))


def steps_to_progress(factors, progress_steps: float = PROGRESS_STEPS, slope: float = PROGRESS_SLOPE) -> Optional[int]:
    """Steps, at the given factors one per step, until ``progress_steps`` fresh steps' progress; ``None`` if never.

    The same model, fitted to a task's sample runs, predicts how many steps training on
    a replayed AutoEcho timeline needs (:mod:`benchmarks.screen_replay`).

    >>> steps_to_progress([1.0] * 2000), steps_to_progress([4.0] * 2000)
    (1750, None)
    """
    progress = 0.0
    for step, factor in enumerate(factors, start=1):
        progress += progress_per_step(factor, slope)
        if progress >= progress_steps - 1e-9:
            return step
    return None
