"""The steps-examples tradeoff of McCandlish, Kaplan et al. (2018): medians per batch size, and its fit.

``(S/S_min - 1)(E/E_min - 1) = 1`` is ``S = S_min + E_min / B``, a straight line in ``1/B``;
:func:`fit_tradeoff` fits it by least squares and gives ``B_crit = E_min / S_min``.
:func:`summarise` takes the medians of the critical-batch study's runs per batch size and
fits them (:mod:`benchmarks.critical_batch`). A summary is derived from the runs whenever it
is read, never stored beside them.

>>> fit = fit_tradeoff([16, 64, 256], [50 * (1 + 100 / b) for b in (16, 64, 256)])
>>> round(fit.s_min), round(fit.b_crit)
(50, 100)
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Optional

import numpy as np



@dataclasses.dataclass(frozen=True)
class SummaryRow:
    """One batch size over its seeds: medians of steps and examples (runs that reached the target) and of ``B_simple``."""

    batch_size: int
    runs: int
    reached: int
    steps: Optional[float]
    examples: Optional[float]
    b_simple_median: Optional[float]
    b_simple_final: Optional[float]


@dataclasses.dataclass(frozen=True)
class Fit:
    """``S = S_min + E_min / B`` fitted; ``b_crit = E_min / S_min`` (``None`` unless both are positive)."""

    s_min: float
    e_min: float
    b_crit: Optional[float]


@dataclasses.dataclass(frozen=True)
class Summary:
    """Every batch size's row, and the fit over those that reached the target (``None`` below 2 of them)."""

    rows: tuple[SummaryRow, ...]
    fit: Optional[Fit]


def fit_tradeoff(batch_sizes, steps) -> Fit:
    """Least-squares fit of ``S = S_min + E_min / B``.

    >>> fit = fit_tradeoff([32, 64, 128, 256], [100 + 6400 / b for b in (32, 64, 128, 256)])
    >>> round(fit.s_min, 6), round(fit.e_min, 3), round(fit.b_crit, 3)
    (100.0, 6400.0, 64.0)
    """
    if len(batch_sizes) < 2:
        raise ValueError(f"batch_sizes: the fit needs at least 2 batch sizes that reached the target, got {list(batch_sizes)}")
    inverse = 1.0 / np.asarray(batch_sizes, dtype=float)
    e_min, s_min = np.polyfit(inverse, np.asarray(steps, dtype=float), 1)
    return Fit(s_min=float(s_min), e_min=float(e_min), b_crit=float(e_min / s_min) if s_min > 0 and e_min > 0 else None)


def summarise(runs: list) -> Summary:
    """The fit over the medians per batch size, and the noise scale measured at each.

    ``runs`` are :class:`benchmarks.critical_batch.BatchRun` records: each has a
    ``batch_size``, whether it ``reached`` the target, its ``steps`` and ``examples``, and
    its ``b_simple_median`` and ``b_simple_final`` (``None`` where not measured).
    """
    by_batch: dict = {}
    for run in runs:
        by_batch.setdefault(run.batch_size, []).append(run)
    rows = []
    for batch_size in sorted(by_batch):
        group = by_batch[batch_size]
        done = [r for r in group if r.reached]
        rows.append(SummaryRow(batch_size=batch_size, runs=len(group), reached=len(done),
                               steps=statistics.median(r.steps for r in done) if done else None,
                               examples=statistics.median(r.examples for r in done) if done else None,
                               b_simple_median=_median(r.b_simple_median for r in group),
                               b_simple_final=_median(r.b_simple_final for r in group)))
    fitted = [r for r in rows if r.steps is not None]
    fit = fit_tradeoff([r.batch_size for r in fitted], [r.steps for r in fitted]) if len(fitted) >= 2 else None
    return Summary(rows=tuple(rows), fit=fit)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
