"""Advice on how much to echo and where, from R and (optionally) the gradient noise scale.

:func:`recommend` turns a measured R into an echo factor, a placement and an echo
shuffle buffer size, with the reason for each. Its rules, and where they come from:

* **How much.** Choi, Passos, Shallue and Dahl, *Faster Neural Network Training with
  Data Echoing* (2019): with ``e <= R`` the extra steps cost no wall-clock time, so
  echoing never made training slower to its target in their experiments, and the best
  factor was close to R; beyond R the steps are no longer free. So ``e = min(R,
  max_factor)``, and exactly 1 when ``R <= 1`` (training is not input-bound).
* **Where, by default.** The same paper (§3.3): at the batch sizes it tried, echoing
  before augmentation was at least as good as after augmentation, which was at least as
  good as batch echoing: each copy of an example gets its own augmentation and its own
  batch mates.
* **Where, with the noise scale.** McCandlish, Kaplan et al., *An Empirical Model of
  Large-Batch Training* (2018): well above the noise scale (``B > 2 B_simple``, the
  curvature-dominated regime) a batch's gradient is close to the true gradient, so a
  repeated batch is almost as good as a fresh one (as Agarwal et al., NeurIPS 2020, find
  for batch echoing), and batch echoing is the cheapest placement: no copy of an
  example, no shuffle over examples. Well below it (``B < B_simple / 2``) a repeat adds
  little and example echoing before augmentation is the better choice. The thresholds are
  those of :meth:`echoing.NoiseScale.regime`.
* **The echo shuffle buffer.** The same paper (§3.5): a larger buffer after the echo stage
  helps, because copies of one example that share a batch are wasted. In a shuffle buffer
  of ``S`` elements each element stays about ``S`` draws, so two copies that enter it
  together end in the same batch of ``B`` with probability about ``B / (2 S)``; with
  ``e - 1`` other copies, ``S = 5 (e - 1) B`` keeps that to about 10% of examples
  (``tests/test_recommend.py`` measures it on a real buffer). For batch echoing, whose
  elements are whole batches, ``S = ceil(2 e)`` batches spreads the copies of one batch
  over about ``2e`` steps, so the same batch rarely trains twice in a row. With
  ``element_bytes`` and ``memory_budget_bytes`` the buffer is capped to the budget.

Example:

>>> import echoing
>>> advice = echoing.recommend(3.2, batch_size=128, noise_scale=900.0)
>>> advice.factor, advice.placement, advice.shuffle_buffer_size
(3.2, 'before_augment', 1408)
>>> echoing.recommend(3.2, batch_size=4096, noise_scale=900.0).placement
'after_batch'
>>> echoing.recommend(0.7).factor
1.0
>>> echoing.recommend(3.2, points=["example", "after_batch"]).placement  # A text pipeline: no augmentation.
'example'
>>> print(echoing.recommend(2.0, batch_size=64))  # doctest: +ELLIPSIS
Echo before augmentation with e = 2 and an echo shuffle buffer of 320 elements.
- R = 2: the input pipeline is 2x slower than a training step; ...
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Iterable, Optional, Sequence, Union

from echoing._checks import check_int, check_number
from echoing.measure import RatioMeasurement
from echoing.noise_scale import NoiseScale, regime_of
from echoing.points import EXAMPLE_POINTS, EchoPoint

# Expected share of examples that meet a copy of themselves in a batch, which the
# example-echoing buffer is sized for (see the module docstring for the derivation).
_TARGET_SHARED_BATCH = 0.1
_ASSUMED_BATCH_SIZE = 32  # Keras fit's default batch size, when none is given.


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """How much to echo and where, with the reasons.

    Attributes:
      factor: the echo factor ``e``: about R, capped at ``max_factor``; exactly 1 when
        ``R <= 1``.
      placement: the :class:`echoing.EchoPoint` to echo at: ``BEFORE_AUGMENT`` (or the
        pipeline's best example point) or ``AFTER_BATCH``; ``NONE`` when ``e == 1``.
      shuffle_buffer_size: for ``echoing.echo(shuffle_buffer_size=...)``: elements for
        example echoing, batches for batch echoing; 0 when not echoing.
      ratio: the R the advice rests on.
      reasons: one sentence per rule, citing the measurement and the rule's source.
    """

    factor: float
    placement: EchoPoint
    shuffle_buffer_size: int
    ratio: float
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        unit = "batches" if self.placement.echoes_batches else "elements"
        if not self.placement.echoes:
            head = "Do not echo (e = 1)."
        else:
            buffer = (f"an echo shuffle buffer of {self.shuffle_buffer_size} {unit}" if self.shuffle_buffer_size
                      else "no echo shuffle buffer")
            head = f"{self.placement.words} with e = {self.factor:g} and {buffer}."
        return "\n".join([head] + [f"- {reason}" for reason in self.reasons])


def recommend(
    ratio: Union[float, RatioMeasurement],
    *,
    batch_size: Optional[int] = None,
    noise_scale: Union[float, NoiseScale, None] = None,
    max_factor: float = 8.0,
    element_bytes: Optional[int] = None,
    memory_budget_bytes: Optional[int] = None,
    points: Optional[Sequence[Union[EchoPoint, str]]] = None,
) -> Recommendation:
    """Recommends an echo factor, a placement and an echo shuffle buffer size.

    The rules and their sources are in :mod:`echoing.recommend`. For R, prefer the value
    measured under load (:attr:`echoing.EchoController.ratio`, or ``auto.controller.ratio``
    after a run with :class:`echoing.AutoEcho`) to :func:`echoing.measure_ratio`'s, which
    times the two halves apart: where they share a CPU, R under load can come out lower
    or higher (docs/guide.md's troubleshooting gives the range measured on a CPU host).

    Example:

    >>> import echoing
    >>> advice = echoing.recommend(5.0, batch_size=256, noise_scale=64.0, max_factor=4.0,
    ...                            element_bytes=256 * 3072, memory_budget_bytes=2**30)
    >>> advice.factor, advice.placement, advice.shuffle_buffer_size
    (4.0, 'after_batch', 8)

    Args:
      ratio: R, a positive finite float, or a :class:`echoing.RatioMeasurement`.
      batch_size: the training batch size; needed to use ``noise_scale`` and to size an
        example-echoing buffer (without it a batch of 32 is assumed, and said).
      noise_scale: ``B_simple``: a float (``nan`` while unknown), a
        :class:`echoing.NoiseScale` (its smoothed value is used), or ``None``.
        ``NoiseScaleCallback.noise_scale`` gives it during ``fit``.
      max_factor: the largest factor to recommend (>= 1).
      element_bytes: bytes of one element at the echo stage (one example, or one batch
        for batch echoing), to state the buffer's memory and to apply the budget.
      memory_budget_bytes: the most the echo shuffle buffer may hold; needs
        ``element_bytes``.
      points: the echo points the pipeline has (``pipelines.IMAGE_ECHO_POINTS``,
        ``pipelines.TEXT_ECHO_POINTS``, or your own); the advice names only these.
        ``None``: a pipeline with augmentation, which has them all.

    Returns:
      A :class:`Recommendation`; ``print`` it for the advice in words.

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.
    """
    r, measured_apart = _check_ratio(ratio)
    check_int("batch_size", batch_size, low=1, none_ok=True)
    b_simple = _check_noise_scale(noise_scale)
    if b_simple is not None and batch_size is None:
        raise ValueError(f"batch_size: needed to compare the batch with noise_scale={b_simple!r}; pass the training batch size")
    check_number("max_factor", max_factor, low=1)
    check_int("element_bytes", element_bytes, low=1, none_ok=True)
    check_int("memory_budget_bytes", memory_budget_bytes, low=1, none_ok=True)
    if memory_budget_bytes is not None and element_bytes is None:
        raise ValueError(f"element_bytes: needed to apply memory_budget_bytes={memory_budget_bytes!r}; pass the bytes of one element")
    available = _check_points(points)

    reasons = []
    source = " (measured apart by measure_ratio; under load on a CPU-only host it can differ either way, see AutoEcho)" if measured_apart else ""
    if r <= 1:
        reasons.append(f"R = {r:.3g}{source}: the training step is the bottleneck, so echoing cannot speed training up "
                       "(Choi et al. 2019: echoing pays only where upstream is slower than the step).")
        return Recommendation(1.0, EchoPoint.NONE, 0, r, tuple(reasons))

    factor = round(min(r, float(max_factor)), 2)
    capped = f", capped at max_factor = {max_factor:g}" if r > max_factor else ""
    reasons.append(f"R = {r:.3g}{source}: the input pipeline is {r:.3g}x slower than a training step; e = {factor:g}{capped}, "
                   "since up to e = R the extra steps are free and e near R was best (Choi et al. 2019).")

    placement = next(point for point in EXAMPLE_POINTS if point in available) if set(EXAMPLE_POINTS) & available \
        else EchoPoint.AFTER_BATCH
    if placement is EchoPoint.AFTER_BATCH:
        reasons.append("After batching: the pipeline has no example echo point.")
    elif placement is not EchoPoint.BEFORE_AUGMENT:
        reasons.append(f"At {placement.value!r}: the pipeline has no point before augmentation, and its best example point "
                       "gives each copy its own batch mates (Choi et al. 2019, §3.3).")
    elif b_simple is None:
        reasons.append("Before augmentation by default: each copy gets its own augmentation and batch mates, and the paper found "
                       "it at least as good as after augmentation and batch echoing (Choi et al. 2019, §3.3). Pass noise_scale "
                       "(NoiseScaleCallback.noise_scale) to weigh batch echoing.")
    if b_simple is not None and placement is not EchoPoint.AFTER_BATCH:
        batch_ratio = batch_size / b_simple if b_simple > 0 else math.nan
        regime = regime_of(batch_ratio)
        if regime == "curvature-dominated" and EchoPoint.AFTER_BATCH not in available:
            reasons.append(f"B = {batch_size} is {batch_ratio:.2g}x the noise scale B_simple = {b_simple:.3g}, where batch "
                           "echoing would do as well, but the pipeline has no after_batch point (McCandlish et al. 2018).")
        elif regime == "curvature-dominated":
            placement = EchoPoint.AFTER_BATCH
            reasons.append(f"After batching: B = {batch_size} is {batch_ratio:.2g}x the noise scale B_simple = {b_simple:.3g} "
                           "(curvature-dominated, B > 2 B_simple), so a batch's gradient is close to the true one and a repeated "
                           "batch is almost as good as a fresh one (McCandlish et al. 2018); batch echoing is also the cheapest.")
        elif regime == "unknown":
            reasons.append(f"{placement.words}: the noise scale is not known yet (nan), so the paper's default holds "
                           "(Choi et al. 2019, §3.3).")
        else:
            words = ("noise-dominated, B < B_simple / 2: a repeated batch adds little" if regime == "noise-dominated"
                     else "near the critical batch size: a repeated batch is worth only part of a fresh one")
            reasons.append(f"{placement.words}: B = {batch_size} is {batch_ratio:.2g}x the noise scale B_simple = {b_simple:.3g} "
                           f"({words}; McCandlish et al. 2018), so echo examples, each copy augmented afresh "
                           "(Choi et al. 2019, §3.3).")

    size, why = _shuffle_buffer(factor, placement, batch_size)
    reasons.append(why)
    if element_bytes is not None:
        if memory_budget_bytes is not None and size * element_bytes > memory_budget_bytes:
            capped_size = max(1, memory_budget_bytes // element_bytes)
            reasons.append(f"Capped from {size} to {capped_size} to fit memory_budget_bytes = {memory_budget_bytes:,} "
                           f"at {element_bytes:,} bytes per element; copies will share batches more often.")
            size = capped_size
        else:
            reasons.append(f"The buffer holds about {size * element_bytes / 2**20:,.1f} MiB ({element_bytes:,} bytes per element).")
    return Recommendation(factor, placement, size, r, tuple(reasons))


def _check_points(points) -> set:
    """The echo points a pipeline has, as ``EchoPoint`` s; all of them for ``None``."""
    if points is None:
        return set(EchoPoint)
    if isinstance(points, (str, bytes)) or not isinstance(points, Iterable):
        raise TypeError(f"points: expected a sequence of echo points, got {type(points).__name__}: {points!r:.200}")
    available = {EchoPoint.parse(point, name="points") for point in points}
    if not available - {EchoPoint.NONE}:
        raise ValueError(f"points: the pipeline has no echo point to advise, got {list(points)!r}")
    return available


def _shuffle_buffer(factor: float, placement: EchoPoint, batch_size: Optional[int]) -> tuple[int, str]:
    if placement.echoes_batches:
        size = math.ceil(2 * factor)
        return size, (f"An echo shuffle buffer of {size} batches spreads the copies of one batch over about {size} steps, "
                      "so the same batch rarely trains twice in a row (a larger buffer helps: Choi et al. 2019, §3.5).")
    batch = batch_size if batch_size is not None else _ASSUMED_BATCH_SIZE
    assumed = "" if batch_size is not None else f" (batch_size not given: a batch of {_ASSUMED_BATCH_SIZE} is assumed)"
    size = max(1, math.ceil((factor - 1) * batch / (2 * _TARGET_SHARED_BATCH)))
    return size, (f"An echo shuffle buffer of {size} elements = 5 (e - 1) B{assumed} keeps the share of examples that meet a "
                  f"copy of themselves in a batch near {_TARGET_SHARED_BATCH:.0%} (a larger buffer helps: Choi et al. 2019, §3.5).")


def _check_ratio(ratio) -> tuple[float, bool]:
    if isinstance(ratio, RatioMeasurement):
        value, measured_apart = ratio.ratio, True
    elif isinstance(ratio, bool) or not isinstance(ratio, numbers.Real):
        raise TypeError(f"ratio: expected a float R or an echoing.RatioMeasurement, got {type(ratio).__name__}: {ratio!r:.200}")
    else:
        value, measured_apart = float(ratio), False
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"ratio: expected a positive finite R, got {value!r}")
    return value, measured_apart


def _check_noise_scale(noise_scale) -> Optional[float]:
    if noise_scale is None:
        return None
    if isinstance(noise_scale, NoiseScale):
        return noise_scale.b_simple_smoothed
    if isinstance(noise_scale, bool) or not isinstance(noise_scale, numbers.Real):
        raise TypeError(f"noise_scale: expected a float B_simple, an echoing.NoiseScale or None, got "
                        f"{type(noise_scale).__name__}: {noise_scale!r:.200}")
    value = float(noise_scale)
    if not math.isnan(value) and (not math.isfinite(value) or value <= 0):
        raise ValueError(f"noise_scale: expected a positive finite B_simple (or nan while unknown), got {noise_scale!r}")
    return value
