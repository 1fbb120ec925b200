"""Choosing the echo factor online from the training step rate: the control law, without Keras.

Echoing helps only while the input pipeline is the bottleneck. With the two halves of
training overlapped, a factor ``e`` gives about

    steps per second = min(e * u, s)

where ``u`` is the rate at which the input pipeline delivers fresh batches and ``s`` the
training step's own rate: the rate rises linearly with ``e`` up to ``e = R = s / u`` and
then saturates. Two measured rates therefore give R *as training sees it*, input pipeline
and step running together: the rate at ``e = 1`` (``u``, or ``s`` when ``R <= 1``) and the
rate at ``e = max_factor`` (``s``, or ``max_factor * u`` when R is larger still). Their
ratio is ``min(R, max_factor)`` when ``R >= 1``, and about 1 when ``R <= 1``.

:class:`EchoController` runs that measurement as a small state machine over the step
timestamps a training loop hands it, and moves through these phases:

* ``"baseline"``: factor 1; measure the rate.
* ``"probe"``: factor ``max_factor``; measure the rate and compare it with the last
  measurement at a lower factor ``e0`` (1 at the start). A gain above ``1 + min_gain``
  means ``e0`` was input-bound, so ``R = e0 * gain``. No gain from ``e0 = 1`` means
  training is not input-bound and the factor goes back to 1; no gain from a larger
  ``e0`` means ``R <= e0`` and a ``"check"`` follows.
* ``"verify"``: factor ``clip(R * headroom, 1, max_factor)``; measure the rate. If it is
  still clearly below the saturated rate (R was under-estimated), R is re-estimated from
  the linear law and the factor raised (at most ``max_corrections`` times).
* ``"hold"``: training runs at the chosen factor; every window's rate is compared with the
  rate measured in ``"verify"``. A drift beyond ``drift_tolerance`` for ``patience``
  windows in a row (storage got slower or faster, the step changed) starts a
  ``"probe"`` whose base is the drifted rate at the held factor, so a re-probe does not go
  back to e=1. Every ``check_every_steps`` steps it also probes from the held factor,
  because where the rate saturated a change of R need not show in it: a faster step leaves
  e below the new R with the rate barely up (the probe finds a gain), and faster storage
  leaves e above it with the rate unchanged (the probe finds none, and a check follows).
* ``"check"``: the factor is lowered to ``held / check_divisor`` for one measurement. If
  the rate drops, the drop re-estimates R (``R = e_low * reference / rate``) and training
  goes back to ``"hold"``; if it does not, R has fallen below ``e_low`` and a new
  ``"baseline"`` starts.

Every measurement waits ``settle_steps`` after a change of factor, because an assignment
reaches the batches only after what the pipeline already holds: the echo stage's current
micro-batch (up to 64 elements, each with the old number of copies) and any prefetch
buffer after it. An echo shuffle buffer passes elements one in, one out, so it delays
*which* elements are echoed but not the *rate*. Size ``settle_steps`` to at least
``max_factor * 64 / batch_size + prefetch depth`` for example echoing, or
``max_factor + prefetch depth`` for batch echoing; the default 10 covers batches of 64
with ``max_factor=8`` and a prefetch of 2 (``8 * 64 / 64 + 2 = 10``). Those batches drain
at the rate the step outpaces the new input: fast after a large step down, slowly after
a check's small one. The held factor is about ``R * headroom``, so at ``held / d`` (``d``
is ``check_divisor``) the input falls short of the step by only ``1 - headroom / d``, and
a check waits ``settle_steps / (1 - headroom / d)`` steps (38 by default) and takes the
lowest of its windows, since draining batches can only hold the rate up. Were it to wait
only ``settle_steps`` and take the median, the old batches could keep the rate up through
its measurement and it would wrongly conclude that R had fallen, most of all right after
a probe at ``max_factor``, whose batches hold the most copies.

A measurement is the median of ``windows`` window rates, each ``window_steps`` steps long
(steps over elapsed seconds, so a window straddles the uneven waits of batch echoing),
which keeps one slow window (a garbage collection, a noisy neighbour) from moving it.

Example, on a synthetic training loop whose rate follows ``min(e * u, s)`` with R = 4:

>>> from echoing.controller import EchoController
>>> controller = EchoController(max_factor=8.0, verbose=0)
>>> now, factor = 0.0, 1.0
>>> for step in range(300):
...     now += 1 / min(factor * 25.0, 100.0)  # u = 25 batches/s, s = 100 steps/s
...     if controller.observe(step, now):
...         factor = controller.factor      # a real loop calls factor_variable.assign(...)
>>> round(controller.ratio, 2), round(controller.factor, 2), controller.phase
(4.0, 4.4, 'hold')
>>> [d.phase for d in controller.decisions]
['baseline', 'probe', 'verify', 'hold']
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import statistics
from typing import Optional

PHASES = ("baseline", "probe", "verify", "hold", "check")


@dataclasses.dataclass(frozen=True)
class EchoDecision:
    """One decision of an :class:`EchoController`.

    Attributes:
      step: the training step at which it was taken.
      factor: the echo factor from this step on.
      previous_factor: the factor before it.
      phase: the phase the controller entered (see :mod:`echoing.controller`).
      reason: one sentence, with the measured rates behind it.
      rates: the step rates (steps per second) the decision rests on, keyed by the
        factor they were measured at, e.g. ``{"e=1": 24.6, "e=8": 84.5}``, or by their
        role: ``"saturated"`` (the rate where the step was the bottleneck) and
        ``"reference"`` (the rate verified at the factor held).
      ratio: the estimate of R under load after this decision (``nan`` when unknown).
    """

    step: int
    factor: float
    previous_factor: float
    phase: str
    reason: str
    rates: dict
    ratio: float

    def __str__(self) -> str:
        return f"step {self.step}: echo factor {self.previous_factor:g} -> {self.factor:g} ({self.phase}): {self.reason}"


class EchoController:
    """Sets the echo factor to about R, measured from the training step rate; no Keras needed.

    A training loop calls :meth:`observe` after every step with the step number and a
    timestamp; when it returns a decision, the loop assigns :attr:`factor` to the
    ``tf.Variable`` its :func:`echoing.echo` stage reads. :class:`echoing.AutoEcho` does
    exactly this from Keras ``fit``. A custom loop:

    .. code-block:: python

        factor = tf.Variable(1.0, dtype=tf.float64)
        ds = upstream.apply(echoing.echo(factor, shuffle_buffer_size=1024, seed=0)).batch(128).prefetch(2)
        controller = echoing.EchoController(max_factor=8.0)
        for step, batch in enumerate(ds):
            train_step(batch)
            if controller.observe(step, time.perf_counter()):
                factor.assign(controller.factor)

    Call :meth:`interrupt` before a pause that is not training (evaluation, a checkpoint),
    so that its duration does not count as a slow step.

    The law and its phases are described in :mod:`echoing.controller`; the module's
    example runs it on a synthetic loop.

    Args:
      max_factor: the largest factor it sets and the one it probes at; >= 1.
      headroom: the factor is set to ``R * headroom``: a little above R, so that the
        step stays the bottleneck despite jitter in the input rate (> 0; 1.1 by default).
      min_gain: if the rate at ``max_factor`` is less than ``1 + min_gain`` times the rate
        at 1, training is taken to be not input-bound and the factor stays 1.
      settle_steps: steps to skip after a change of factor before measuring (see the
        module docstring for how to size it).
      window_steps: steps per window; a window's rate is its steps over its seconds.
      windows: windows per measurement; the measurement is their median.
      drift_tolerance: relative change of the rate in ``"hold"`` that counts as drift.
      patience: drifting windows in a row that start a new probe.
      check_every_steps: steps of ``"hold"`` between downward checks (see the module
        docstring); ``None`` for no checks.
      check_divisor: the factor is divided by this for a check (> 1).
      max_corrections: how many times ``"verify"`` may raise the factor.
      verbose: 1 prints each decision as one sentence.

    Attributes:
      factor: the factor the loop should be running at now.
      phase: the current phase, one of ``"baseline"``, ``"probe"``, ``"verify"``,
        ``"hold"``, ``"check"``.
      ratio: the latest estimate of R under load (``nan`` before the first probe). When
        the rate did not saturate at ``max_factor`` it is a lower bound.
      decisions: every :class:`EchoDecision` so far.
      window_rates: ``(step, steps per second)`` at the end of every window measured.

    Raises:
      TypeError, ValueError: for a setting of the wrong type or value, naming it.
    """

    def __init__(
        self,
        *,
        max_factor: float = 8.0,
        headroom: float = 1.1,
        min_gain: float = 0.1,
        settle_steps: int = 10,
        window_steps: int = 10,
        windows: int = 3,
        drift_tolerance: float = 0.15,
        patience: int = 2,
        check_every_steps: Optional[int] = 400,
        check_divisor: float = 1.5,
        max_corrections: int = 2,
        verbose: int = 0,
    ) -> None:
        _check_number("max_factor", max_factor, low=1.0)
        _check_number("headroom", headroom, low=0.0, low_inclusive=False)
        _check_number("min_gain", min_gain, low=0.0)
        _check_number("drift_tolerance", drift_tolerance, low=0.0, low_inclusive=False)
        if not drift_tolerance < 1:
            raise ValueError(f"drift_tolerance: expected a number in (0, 1), got {drift_tolerance!r}")
        _check_number("check_divisor", check_divisor, low=1.0, low_inclusive=False)
        _check_int("settle_steps", settle_steps, low=0)
        _check_int("window_steps", window_steps, low=1)
        _check_int("windows", windows, low=1)
        _check_int("patience", patience, low=1)
        _check_int("max_corrections", max_corrections, low=0)
        if check_every_steps is not None:
            _check_int("check_every_steps", check_every_steps, low=1)
        self.max_factor = float(max_factor)
        self.headroom = float(headroom)
        self.min_gain = float(min_gain)
        self.settle_steps = settle_steps
        self.window_steps = window_steps
        self.windows = windows
        self.drift_tolerance = float(drift_tolerance)
        self.patience = patience
        self.check_every_steps = check_every_steps
        self.check_divisor = float(check_divisor)
        self.max_corrections = max_corrections
        self.verbose = verbose

        self.factor = 1.0
        self.phase = "baseline"
        self.ratio = math.nan
        self.decisions: list[EchoDecision] = []
        self.window_rates: list[tuple[int, float]] = []
        self._started = False
        self._reset_phase_state()

    # The loop's side.

    def observe(self, step: int, timestamp: float) -> Optional[EchoDecision]:
        """Records that training step ``step`` ended at ``timestamp`` (seconds, monotonic).

        Returns the decision taken at this step, if any; then assign :attr:`factor` to the
        echo stage's variable. The first call always returns one: factor 1, to measure
        the baseline. ``step`` must increase; it may skip (``steps_per_execution > 1``).
        """
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"step: expected an int, got {type(step).__name__}: {step!r}")
        if not isinstance(timestamp, numbers.Real) or not math.isfinite(timestamp):
            raise ValueError(f"timestamp: expected finite seconds, got {timestamp!r}")
        step = int(step)
        if not self._started:
            self._started = True
            self._last = (step, float(timestamp))
            decision = self._decide(step, 1.0, "baseline", "measuring the step rate without echoing", {})
            # Whatever factor ran before is unknown here (the variable may not have held 1).
            self._settle_until = step + self.settle_steps
            return decision
        if step <= self._last[0]:
            raise ValueError(f"step: expected steps to increase, got {step} after {self._last[0]}")
        self._last = (step, float(timestamp))
        if step < self._settle_until:
            return None  # The pipeline still delivers batches echoed at the old factor.
        if self._window_start is None:
            self._window_start = (step, float(timestamp))
            return None
        start_step, start_time = self._window_start
        if step - start_step < self.window_steps:
            return None
        elapsed = float(timestamp) - start_time
        self._window_start = (step, float(timestamp))
        if elapsed <= 0:
            return None  # A clock that did not advance says nothing about the rate.
        rate = (step - start_step) / elapsed
        self.window_rates.append((step, rate))
        return self._on_window(step, rate)

    def interrupt(self) -> None:
        """Discards the window in progress: the time until the next step is not training."""
        self._window_start = None

    # The control law.

    def _on_window(self, step: int, rate: float) -> Optional[EchoDecision]:
        if self.phase == "hold":
            return self._on_hold_window(step, rate)
        self._rates.append(rate)
        if len(self._rates) < self.windows:
            return None
        # Old batches still draining can only hold a check's rate up, never down: its lowest
        # window is the one that has settled.
        measured = min(self._rates) if self.phase == "check" else statistics.median(self._rates)
        if self.phase == "baseline":
            return self._after_baseline(step, measured)
        if self.phase == "probe":
            return self._after_probe(step, measured)
        if self.phase == "verify":
            return self._after_verify(step, measured)
        return self._after_check(step, measured)

    def _after_baseline(self, step, rate):
        self._base = (1.0, rate)
        if self.max_factor == 1:
            self._reference = rate
            return self._decide(step, 1.0, "hold", "max_factor is 1, so there is nothing to probe", {"e=1": rate})
        return self._decide(step, self.max_factor, "probe",
                            f"{rate:.1f} steps/s without echoing; probing e={self.max_factor:g}", {"e=1": rate})

    def _after_probe(self, step, rate):
        base_factor, base_rate = self._base
        rates = {f"e={base_factor:g}": base_rate, f"e={self.max_factor:g}": rate}
        gain = rate / base_rate
        self._saturated_rate = max(rate, base_rate)
        measured = f"e={self.max_factor:g} gives {rate:.1f} steps/s against {base_rate:.1f} at e={base_factor:g}"
        if gain < 1 + self.min_gain:
            if base_factor == 1:
                self.ratio = gain
                return self._decide(step, 1.0, "verify",
                                    f"{measured}, less than {self.min_gain:.0%} more: training is not input-bound (R <= 1), "
                                    "so no echoing", rates)
            # The step was already the bottleneck at base_factor, so R <= base_factor: a
            # check at a lower factor tells how far it fell.
            self._reference = base_rate
            return self._start_check(step, base_factor, f"{measured}: the step was already the bottleneck, so R <= "
                                                        f"{base_factor:g}", rates)
        # On the rising line rate = e * u at base_factor: R = base_factor * gain, unless the
        # rate had not saturated at max_factor either, when R may be larger still.
        self.ratio = base_factor * gain
        self._saturates_below_max = self.ratio < self.max_factor * (1 - self.drift_tolerance)
        factor = self._factor_for(self.ratio)
        bound = ("R" if self._saturates_below_max
                 else f"R >= {self.ratio:.2f} (the rate had not saturated at e={self.max_factor:g}), so")
        return self._decide(step, factor, "verify",
                            f"{measured}: {bound} = {self.ratio:.2f} under load; setting e = min(R x {self.headroom:g}, "
                            f"{self.max_factor:g})", rates)

    def _after_verify(self, step, rate):
        rates = {f"e={self.factor:g}": rate, "saturated": self._saturated_rate}
        input_bound = rate < (1 - self.drift_tolerance) * self._saturated_rate
        if input_bound and self.factor < self.max_factor and self._corrections < self.max_corrections:
            # Still on the rising line rate = e * u: u = rate / e, so R = s / u.
            self._corrections += 1
            self.ratio = self.factor * self._saturated_rate / rate
            factor = self._factor_for(self.ratio)
            if factor > self.factor:
                return self._decide(step, factor, "verify",
                                    f"e={self.factor:g} gives {rate:.1f} steps/s, below the saturated {self._saturated_rate:.1f}: "
                                    f"R is about {self.ratio:.2f}, raising e", rates)
        self._reference = rate
        return self._decide(step, self.factor, "hold", f"holding e={self.factor:g} at {rate:.1f} steps/s", rates)

    def _on_hold_window(self, step, rate):
        change = rate / self._reference - 1
        direction = (change > self.drift_tolerance) - (change < -self.drift_tolerance)
        if direction != self._drift_direction:
            self._drift_rates = []
        self._drift_direction = direction
        if direction:
            self._drift_rates.append(rate)
        if len(self._drift_rates) >= self.patience:
            # The first drifting window may straddle the change: the extreme one is the new rate.
            drifted = min(self._drift_rates) if direction < 0 else max(self._drift_rates)
            return self._on_drift(step, drifted, drifted / self._reference - 1)
        self._hold_rates = (self._hold_rates + [rate])[-self.windows:]
        due = self.check_every_steps is not None and step - self._phase_step >= self.check_every_steps
        # Where the rate saturated, a change of R need not show in it: a faster step leaves
        # e below the new R with the rate barely up, and faster storage leaves e above it
        # with the rate unchanged. Probing up finds the first, a check below the second.
        if due and self.factor > 1 and self._saturates_below_max:
            held = statistics.median(self._hold_rates)
            rates = {f"e={self.factor:g}": held}
            if self.factor == self.max_factor:
                return self._start_check(step, self.factor, "checking whether R has fallen", rates)
            self._base = (self.factor, held)
            self._corrections = 0
            return self._decide(step, self.max_factor, "probe",
                                f"re-probing: is e={self.factor:g} still at R? probing e={self.max_factor:g}", rates)
        return None

    def _on_drift(self, step, rate, change):
        """The rate moved at the held factor: storage or the step got slower or faster."""
        moved = f"the step rate moved {change:+.0%} from {self._reference:.1f} to {rate:.1f} steps/s at e={self.factor:g}"
        rates = {f"e={self.factor:g}": rate, "reference": self._reference}
        if self.factor == self.max_factor:
            if change < 0:
                # Input-bound at max_factor already: R grew further and there is no more to echo.
                self._reference = rate
                return self._decide(step, self.factor, "hold", f"{moved}; e is at max_factor, holding", rates)
            # Faster at max_factor: R fell, perhaps below max_factor, which only a lower factor shows.
            self._reference = rate
            self._saturates_below_max = True
            return self._start_check(step, self.factor, moved, rates)
        # The drifted rate is a measurement at the held factor: the probe compares with it,
        # with no need to go back to e = 1.
        self._base = (self.factor, rate)
        self._corrections = 0
        return self._decide(step, self.max_factor, "probe", f"{moved}; probing e={self.max_factor:g}", rates)

    def _start_check(self, step, held, why, rates):
        """Lowers the factor below ``held`` for one measurement against the reference rate."""
        self._held_factor = held
        low = round(max(1.0, held / self.check_divisor), 2)
        return self._decide(step, low, "check",
                            f"{why}; does e={low:g} still reach {self._reference:.1f} steps/s?", rates)

    def _after_check(self, step, rate):
        held, low = self._held_factor, self.factor
        rates = {f"e={low:g}": rate, f"e={held:g}": self._reference}
        if rate >= (1 - self.drift_tolerance) * self._reference:
            if low == 1:
                self.ratio = rate / self._reference
                return self._decide(step, 1.0, "verify", f"e=1 still gives {rate:.1f} steps/s against {self._reference:.1f} at "
                                                         f"e={held:g}: training is not input-bound (R <= 1), so no echoing", rates)
            self._corrections = 0
            return self._decide(step, 1.0, "baseline",
                                f"e={low:g} still gives {rate:.1f} steps/s against {self._reference:.1f} at e={held:g}: "
                                "R has fallen; probing again from e=1", rates)
        self.ratio = low * self._reference / rate
        self._saturates_below_max = True
        factor = self._factor_for(self.ratio)
        if abs(factor / held - 1) <= self.drift_tolerance:
            factor = held  # Within the noise of the estimate: keep the factor verified before.
        # Back to the verified factor keeps its reference rate; a new factor is verified first.
        phase = "hold" if factor == held else "verify"
        return self._decide(step, factor, phase,
                            f"e={low:g} gives {rate:.1f} steps/s against {self._reference:.1f} at e={held:g}: R is about "
                            f"{self.ratio:.2f}; e={factor:g}", rates)

    # Bookkeeping.

    def _settle_for(self, previous: float, factor: float) -> int:
        """Steps until a measurement at ``factor`` reflects it (see the module docstring)."""
        if factor == previous:
            return 0
        if self.phase == "check":
            # The held factor is about R * headroom, so at held / check_divisor the input
            # falls short of the step by only 1 - headroom / check_divisor (27% by default):
            # the batches still echoed at the old factor drain that many times slower than
            # after a large step down.
            shortfall = max(1 - self.headroom / self.check_divisor, 1 - 1 / self.check_divisor)
            return math.ceil(self.settle_steps / shortfall)
        return self.settle_steps

    def _factor_for(self, ratio: float) -> float:
        return round(min(self.max_factor, max(1.0, ratio * self.headroom)), 2)

    def _decide(self, step, factor, phase, reason, rates) -> EchoDecision:
        decision = EchoDecision(step=step, factor=float(factor), previous_factor=self.factor, phase=phase,
                                reason=reason, rates={k: round(v, 3) for k, v in rates.items()}, ratio=self.ratio)
        self.decisions.append(decision)
        self.factor, self.phase = float(factor), phase
        self._phase_step = step
        self._rates = []
        self._drift_rates, self._drift_direction = [], 0
        self._hold_rates = []
        # A window in progress measured the old factor.
        self._window_start = None
        self._settle_until = step + self._settle_for(decision.previous_factor, decision.factor)
        if self.verbose:
            print(f"echo factor: {decision}")
        return decision

    def _reset_phase_state(self) -> None:
        self._phase_step = 0
        self._settle_until = 0
        self._window_start = None
        self._rates: list[float] = []
        self._base = (1.0, math.nan)  # (factor, rate) the next probe compares with
        self._saturated_rate = math.nan
        self._saturates_below_max = True
        self._reference = math.nan
        self._drift_rates: list[float] = []
        self._drift_direction = 0
        self._hold_rates: list[float] = []
        self._corrections = 0
        self._held_factor = 1.0


def _check_number(name, value, *, low, low_inclusive=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}: {value!r}")
    ok = math.isfinite(value) and (value >= low if low_inclusive else value > low)
    if not ok:
        raise ValueError(f"{name}: expected a finite number {'>=' if low_inclusive else '>'} {low:g}, got {value!r}")


def _check_int(name, value, *, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int >= {low}, got {type(value).__name__}: {value!r}")
    if value < low:
        raise ValueError(f"{name}: expected an int >= {low}, got {value!r}")
