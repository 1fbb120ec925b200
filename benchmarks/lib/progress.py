"""Training progress at an echo factor: how many steps a schedule of factors needs to reach a target.

Echoed steps train less than fresh ones. The model: a step at factor ``e`` makes
``1 / (1 + a (e - 1))`` of a fresh step's progress, so a run at a fixed ``e`` needs
``1 + a (e - 1)`` times the fresh run's steps, and a schedule of factors (AutoEcho's)
reaches the target where its summed progress reaches the fresh run's steps. ``a`` is a
task's own: :func:`progress_slope` fits it to the sample runs. The controller sweep
(:mod:`benchmarks.controller_sweep`) judges its loops at slopes that bracket the tasks'.

>>> steps_to_progress([2.0] * 100, progress_steps=10, slope=1.0)
20
"""

from __future__ import annotations

import collections
import statistics
from typing import Optional

import echoing
from echoing import simulation
from benchmarks.lib.run_records import Mode

# Progress per step at factor e, as a share of a fresh step's: 1 / (1 + PROGRESS_SLOPE (e - 1))
# gives the Transformer's steps to target at e = 1, 2, 4 when it read whole files (1,750,
# 2,050 and 2,700 in sample mode: 1,750, 2,083 and 2,748) and more than its budget of 4,000 at
# e = 8 (4,077), where no sample run reached the target
# (docs/decisions/0004-figures-from-earlier-runs.md). PROGRESS_STEPS is the first. The simulation's
# documents are whole files too.
PROGRESS_SLOPE = 0.19
PROGRESS_STEPS = 1750


def progress_per_step(factor: float, slope: float = PROGRESS_SLOPE) -> float:
    """A step's training progress at echo ``factor``, as a share of a fresh step's (see ``PROGRESS_SLOPE``)."""
    return simulation.progress_per_step(factor, slope)


def progress_slope(runs: list, task: str, placement: str, echo_shuffle: int) -> float:
    """``a`` of the progress model, fitted by least squares to ``task``'s sample runs at fixed factors.

    Each factor's median steps to target over e = 1's is ``1 + a (e - 1)``; ``runs`` are the
    runs of a time_to_target results file (:class:`benchmarks.lib.run_records.TimeToTargetResults`).
    """
    steps = collections.defaultdict(list)
    for record in runs:
        config = record.config
        if (config.task == task and config.mode == Mode.SAMPLE and not config.auto_echo and record.reached
                and (config.factor == 1.0 or (config.placement, config.echo_shuffle) == (placement, echo_shuffle))):
            steps[config.factor].append(record.steps)
    if 1.0 not in steps or len(steps) < 2:
        raise ValueError(f"task: {task!r} has no sample runs at e=1 and at another factor with placement={placement!r} "
                         f"and echo_shuffle={echo_shuffle!r} to fit the progress model on")
    return echoing.fit_copy_cost({factor: statistics.median(counts) for factor, counts in steps.items()})


def steps_to_progress(factors, progress_steps: float = PROGRESS_STEPS, slope: float = PROGRESS_SLOPE) -> Optional[int]:
    """Steps, at the given factors one per step, until ``progress_steps`` fresh steps' progress; ``None`` if never.

    With ``slope`` fitted to a task's sample runs (:func:`progress_slope`), it predicts how
    many steps training on a schedule of factors needs.

    >>> steps_to_progress([1.0] * 2000), steps_to_progress([4.0] * 2000)
    (1750, None)
    """
    progress = 0.0
    for step, factor in enumerate(factors, start=1):
        progress += progress_per_step(factor, slope)
        if progress >= progress_steps - 1e-9:
            return step
    return None
