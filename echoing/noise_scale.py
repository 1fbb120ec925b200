"""The simple gradient noise scale, B_simple = tr(Sigma) / |G|^2, from gradient norms at two batch sizes.

McCandlish, Kaplan et al., "An Empirical Model of Large-Batch Training" (2018), appendix A:
a batch of size B gives a gradient whose expected squared norm is
``|G|^2 + tr(Sigma) / B``. Two batch sizes ``B_small < B_big`` give two such equations,
whose solution is an unbiased estimate of each quantity:

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

Each single estimate is very noisy (the |G|^2 one is often negative), so the two are
smoothed by exponential moving averages kept *separately*, and ``B_simple`` is the ratio
of the smoothed values: the ratio of two unbiased averages, not an average of ratios,
which would be dominated by the estimates with a |G|^2 near zero.

This module is plain Python (no TensorFlow); :mod:`echoing.gradient_norms` computes the
norms from a Keras model, and :class:`echoing.NoiseScaleCallback` does both during ``fit``.

Example:

>>> from echoing.noise_scale import GradientNorms, NoiseScaleEstimator
>>> # |G|^2 = 1 and tr(Sigma) = 64 give E|G_B|^2 = 1 + 64 / B.
>>> estimator = NoiseScaleEstimator(smoothing=0.9)
>>> estimate = estimator.update(GradientNorms(small_sq_norm=1 + 64 / 8, big_sq_norm=1 + 64 / 32,
...                                           small_batch=8, big_batch=32))
>>> round(estimate.b_simple, 6), round(estimate.b_simple_smoothed, 6)
(64.0, 64.0)
>>> print(estimate.describe(batch_size=32))
near the critical batch size: B = 32 is 0.5x the noise scale B_simple = 64; steps and examples ...
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple


class GradientNorms(NamedTuple):
    """Squared gradient norms measured at two batch sizes on the same weights.

    Attributes:
      small_sq_norm: mean squared norm of gradients over ``small_batch`` examples each.
      big_sq_norm: squared norm of a gradient over ``big_batch`` examples.
      small_batch: examples behind each small-batch gradient (B_small).
      big_batch: examples behind the big-batch gradient (B_big > B_small).

    Fields may be tensors (a named tuple, so a ``tf.function`` can return it); the
    estimator converts them to floats.
    """

    small_sq_norm: Any
    big_sq_norm: Any
    small_batch: Any
    big_batch: Any


def unbiased_estimates(norms: GradientNorms) -> tuple[float, float]:
    """Unbiased single-measurement estimates ``(|G|^2, tr(Sigma))`` (appendix A of the paper).

    >>> unbiased_estimates(GradientNorms(1 + 10 / 2, 1 + 10 / 8, 2, 8))
    (1.0, 10.0)

    Raises:
      ValueError: naming the field, when a norm is negative or not finite, or the batch
        sizes are not ``0 < small_batch < big_batch``.
    """
    small, big = float(norms.small_sq_norm), float(norms.big_sq_norm)
    b_small, b_big = float(norms.small_batch), float(norms.big_batch)
    for name, value in (("small_sq_norm", small), ("big_sq_norm", big)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name}: expected a finite squared norm >= 0, got {value!r}")
    if not 0 < b_small < b_big:
        raise ValueError(f"small_batch, big_batch: expected 0 < small_batch < big_batch, got {b_small:g} and {b_big:g}")
    gradient_sq_norm = (b_big * big - b_small * small) / (b_big - b_small)
    trace_sigma = (small - big) / (1 / b_small - 1 / b_big)
    return gradient_sq_norm, trace_sigma


@dataclasses.dataclass(frozen=True)
class NoiseScale:
    """One measurement of the noise scale, raw and smoothed.

    Attributes:
      gradient_sq_norm: this measurement's unbiased estimate of |G|^2 (may be negative).
      trace_sigma: this measurement's unbiased estimate of tr(Sigma) (may be negative).
      b_simple: ``trace_sigma / gradient_sq_norm``; ``nan`` when either is not positive
        (a single measurement is too noisy to say).
      smoothed_gradient_sq_norm: bias-corrected moving average of the |G|^2 estimates.
      smoothed_trace_sigma: bias-corrected moving average of the tr(Sigma) estimates.
      b_simple_smoothed: ratio of the two averages; ``nan`` while either is not positive.
      count: measurements so far, this one included.
    """

    gradient_sq_norm: float
    trace_sigma: float
    b_simple: float
    smoothed_gradient_sq_norm: float
    smoothed_trace_sigma: float
    b_simple_smoothed: float
    count: int

    def batch_ratio(self, batch_size: int) -> float:
        """``batch_size / b_simple_smoothed`` (``nan`` while the noise scale is unknown)."""
        return batch_size / self.b_simple_smoothed if self.b_simple_smoothed > 0 else math.nan

    def regime(self, batch_size: int) -> str:
        """``"noise-dominated"``, ``"critical"``, ``"curvature-dominated"`` or ``"unknown"``.

        The paper's model: steps to a target fall as ``1 + B_noise / B``, so below half the
        noise scale doubling the batch still almost halves the steps (noise dominates), and
        above twice it the gradient is already close to the true one (curvature dominates).
        """
        return regime_of(self.batch_ratio(batch_size))

    def describe(self, batch_size: int) -> str:
        """Where training stands, in words, and what it means for batch size and echoing."""
        regime = self.regime(batch_size)
        if regime == "unknown":
            return (f"noise scale not yet known after {self.count} measurement(s): the smoothed |G|^2 or tr(Sigma) "
                    "estimate is not positive yet")
        where = f"B = {batch_size} is {self.batch_ratio(batch_size):.2g}x the noise scale B_simple = {self.b_simple_smoothed:.3g}"
        meaning = {
            "noise-dominated": "gradient noise dominates: a larger batch would cut steps almost in proportion, "
                               "and a repeated batch is worth much less than a fresh one",
            "critical": "steps and examples trade off evenly: a repeated batch is worth part of a fresh one",
            "curvature-dominated": "the batch gradient is close to the true gradient: a larger batch would mostly "
                                   "waste examples, and a repeated batch is nearly as useful as a fresh one",
        }[regime]
        return f"{'near the critical batch size' if regime == 'critical' else regime}: {where}; {meaning}"


class NoiseScaleEstimator:
    """Bias-corrected moving averages of the |G|^2 and tr(Sigma) estimates, and their ratio.

    Args:
      smoothing: the moving averages' decay per measurement, in ``[0, 1)``; 0 keeps no
        history. The bias correction (as in Adam) divides by ``1 - smoothing**count``, so
        early values are averages of the measurements so far, not pulled towards zero.

    >>> estimator = NoiseScaleEstimator(smoothing=0.5)
    >>> for small, big in ((5.0, 3.0), (7.0, 3.0)):  # B_small=2, B_big=8
    ...     estimate = estimator.update(GradientNorms(small, big, 2, 8))
    >>> estimate.count, round(estimate.smoothed_gradient_sq_norm, 4), round(estimate.smoothed_trace_sigma, 4)
    (2, 1.8889, 8.8889)
    """

    def __init__(self, smoothing: float = 0.9):
        if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not 0 <= smoothing < 1:
            raise ValueError(f"smoothing: expected a number in [0, 1), got {smoothing!r}")
        self.smoothing = float(smoothing)
        self.reset()

    def reset(self) -> None:
        """Forgets all measurements."""
        self.count = 0
        self._gradient_sq_norm = 0.0
        self._trace_sigma = 0.0

    def update(self, norms: GradientNorms) -> NoiseScale:
        """Adds one measurement; returns it with the smoothed values."""
        gradient_sq_norm, trace_sigma = unbiased_estimates(norms)
        self.count += 1
        decay = self.smoothing
        self._gradient_sq_norm = decay * self._gradient_sq_norm + (1 - decay) * gradient_sq_norm
        self._trace_sigma = decay * self._trace_sigma + (1 - decay) * trace_sigma
        correction = 1 - decay ** self.count
        smoothed_g, smoothed_trace = self._gradient_sq_norm / correction, self._trace_sigma / correction
        return NoiseScale(
            gradient_sq_norm=gradient_sq_norm,
            trace_sigma=trace_sigma,
            b_simple=_ratio(trace_sigma, gradient_sq_norm),
            smoothed_gradient_sq_norm=smoothed_g,
            smoothed_trace_sigma=smoothed_trace,
            b_simple_smoothed=_ratio(smoothed_trace, smoothed_g),
            count=self.count,
        )


def regime_of(batch_ratio: float) -> str:
    """The regime of a batch ``batch_ratio`` times the noise scale (see :meth:`NoiseScale.regime`).

    >>> regime_of(0.25), regime_of(1.0), regime_of(4.0), regime_of(float("nan"))
    ('noise-dominated', 'critical', 'curvature-dominated', 'unknown')
    """
    if math.isnan(batch_ratio):
        return "unknown"
    return "noise-dominated" if batch_ratio < 0.5 else "curvature-dominated" if batch_ratio > 2 else "critical"


def _ratio(trace_sigma: float, gradient_sq_norm: float) -> float:
    return trace_sigma / gradient_sq_norm if trace_sigma > 0 and gradient_sq_norm > 0 else math.nan
