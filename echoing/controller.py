"""Choosing the echo factor online from the training step's timestamps: the control law, without Keras.

Echoing helps only while the input pipeline is the bottleneck. With the two halves of
training overlapped, a factor ``e`` gives about

    steps per second = min(e * u, s)

where ``u`` is the rate at which the input pipeline delivers fresh batches and ``s`` the
training step's own rate: the rate rises linearly with ``e`` up to ``e = R = s / u`` and
then saturates. The controller needs ``s`` and one rate on the rising line to know R.

What it exploits is the buffer between the echo stage and the step (the prefetch, what
the pipeline holds):

* **A higher factor shows at once**: the producer outruns the step from the next batch,
  and the buffer fills. So ``s`` is cheap: a short probe at ``max_factor`` costs no time.
* **A lower factor costs nothing until the buffer drains**, at ``1 - e / R`` batches per
  step; only then do steps wait, each ``R / e`` times as long as the step. So instead of
  measuring a lower factor for a fixed number of steps, the controller waits for that
  drop, measures a few waiting steps (which give ``u``), and moves at once.

There are two laws, chosen by what the loop gives :meth:`EchoController.observe`.

**The supply law** (``observe(step, timestamp, fresh=int(stats.fresh))``, with
``elements_per_step`` set): the echo stage's :class:`echoing.EchoStats` counts the fresh
elements it pulls, so the input's rate ``u`` is read directly, at any factor at which the
input cannot keep up: ``R = s * elements_per_step / (fresh elements per second)``. Where
the input does keep up, the echo stage waits for the step and reads exactly what the
steps use, ``1 / e`` of a step's elements each; the estimate is then ``e`` itself, which
says only ``R <= e``. So:

* ``PROBE`` opens at ``max_factor`` for ``supply_settle_steps`` + ``supply_window_steps``
  steps: the step's own rate ``s``, the reference.
* ``CHECK`` runs a lower factor for as long: if the input cannot keep up there, its rate
  gives R and the factor goes to ``R * headroom`` (the median of the last three
  estimates, against the jitter of one window) in ``HOLD``; if it keeps up, R is at most
  that factor and the next check halves it (at 1: no echoing). The opening search starts
  at ``max_factor / 2``, or at ``initial_factor`` when one is given.
* ``HOLD`` reads every window: an input that stops keeping up (R rose) moves the factor
  at once; one that keeps up refines ``s``. Every ``supply_check_every_steps`` (60)
  steps a ``CHECK`` divides the factor by ``supply_check_divisor`` (1.4).

A lower factor shows in the fresh count at once, long before the buffer between the echo
stage and the step drains, so a check makes no step wait while the buffer lasts: about
``b / (1 - e_low / R)`` steps for a buffer of ``b`` batches, 47 for 10 batches at a
periodic check's ``e_low = 1.1 R / 1.4``, which lasts at most ``supply_settle_steps + 2 *
supply_window_steps`` = 28 steps. "The input keeps up" needs those two windows after a
held factor (a few increments of the count are noisy just below R); within a descent,
and for "it cannot keep up", one window does. Bursts downstream of the echo stage (a
text pipeline's bucketing) do not touch the count.

**Lumpy input under the supply law.** A text pipeline that reads whole documents (or
records of many rows) hands fresh input over in floods and stalls. In a flood the input
keeps up at any factor, so a check's descent runs down to 1; in the next stall one
window's fresh count reads R of 8 to infinity, often while the steps still run at their
own rate on what the buffers after the echo stage hold. So the factor swung between 1 and
``max_factor`` (the Transformer's replay at R = 4, ``docs/results/time_to_target.md``).
When an estimate of R exceeds, within ``lumpy_window`` steps, 1.5 times a factor at which
the input was just found to keep up, for the second time (once can be a real rise of R),
the controller marks the input lumpy (:attr:`EchoController.lumpy`, said in the decision
log), and from then on:

* a check that finds the input keeping up holds that factor instead of halving it again
  (the next check, ``supply_check_every_steps`` later, may go lower);
* a window whose steps did not wait raises nothing in ``HOLD`` (nor starts the periodic
  check, which waits for a window where the input keeps up), and in a ``CHECK`` returns at
  most to the factor held before the check: the count lagged, the buffers covered it;
* every window spans ``lumpy_supply_window_steps`` (120) steps instead of
  ``supply_window_steps`` (12): a 12-step window reads one flood or one stall (R of 0.3
  to infinity on the Transformer's replay at R = 4), and a raise to a stall's reading is
  a raise to ``max_factor``; 120 steps hold several records (a record of 16 batches lasts
  64 steps at R = 4);
* R is the median of the last ``lumpy_estimates`` (5) windows' readings, whether the
  input kept up in them or not (where it kept up, the reading is what the steps drew): one
  long window can still hold one long stall. A window whose steps waited raises the
  factor to ``R * headroom``, at least keeping it and at most doubling it; a check whose
  steps did not wait returns at most to that and to the factor held before the check.
  The decision log's "median of the last n" is still that of the readings that could
  not keep up, which the factor follows on smooth input.

On smooth input (the simulated steady, jittered, rising and falling R of
``tests/test_controller.py``) the condition is not met twice, and the law is the one
above: every committed ResNet timeline decides as it did before these rules
(``tests/test_time_to_target.py``).

**What tuning costs under the supply law**, in step-times against ``e = R * headroom``
from the first step:

* once, at the start: the search from ``max_factor`` halves the factor while the input
  keeps up, so it ends at one factor ``e_low >= R / 2`` where it cannot; there steps wait
  at most ``R / e_low - 1 <= 1`` step-time each, and only once the buffer is empty, for
  at most ``supply_settle_steps + supply_window_steps`` = 16 steps: at most 16 step-times,
  nothing where the buffer holds ``16 * (1 - e_low / R)`` batches (8 at worst);
* in training, once: the search echoes at ``max_factor`` and then ``max_factor / 2`` for
  16 steps each at the very start of training, which the step-times above do not count.
  On the ResNet at R = 2 AutoEcho's timelines needed 1.05x e = 2's steps to target over
  nine seeds with that opening and 1.05x when trained again with its 64 opening steps at
  the factor it then held (``python -m benchmarks.opening_cost``,
  ``docs/results/time_to_target.md``): no cost nine seeds tell from the noise;
* per periodic check: nothing while the buffer holds 6 batches (28 steps at 0.21
  batches per step);
* R at or above ``max_factor``: the steps wait at every factor; a check makes them wait
  ``R / e_low - R / max_factor`` step-times more for at most 16 steps, every 60 steps;
* after a change of R: a rise shows in the next window (12 steps), a fall at the next
  check, within 60 steps, and the descent that follows halves the factor every 16 steps;
* on lumpy input no factor near R stops the steps waiting, so there is no bound: on the
  Transformer's replay (records of up to 16 batches) AutoEcho took 1.02x the best fixed
  factor's time to target at R = 2 and 0.99x at R = 4 (median of 3 seeds,
  ``docs/results/time_to_target.md``).

On the simulated loop (``python -m benchmarks.controller_simulation``, the ``fresh count``
rows of ``benchmarks/results/controller_simulation.json``) that is no time lost at R = 2,
4 and 6 and at most a few percent with jitter, against 3.6-6.1% for the timing law.

**The timing law** (``observe(step, timestamp)``): only the step's timestamps, for a loop
that cannot read the echo stage's counters. Phases (:class:`Phase`):

* ``PROBE`` opens: ``max_factor`` for ``settle_steps`` + ``window_steps`` steps gives the
  step's own rate (the reference), whatever the buffer held at the start. Later, a
  probe follows a rise of the rate in ``HOLD`` (the step got faster): its gain over the
  held factor's rate gives R.
* ``BASELINE``: factor 1. Once the buffer has drained the rate drops, and
  ``measure_steps`` waiting steps give ``R = s / rate``; the factor goes to
  ``R * headroom`` (``VERIFY``). No drop within ``drain_steps``: training is not
  input-bound, and the factor stays 1 (``HOLD``). With ``initial_factor`` above 1 (a warm
  estimate), the opening probe goes straight to ``VERIFY`` at that factor instead.
* ``VERIFY``: the new factor for ``windows`` windows. Below the reference, R was
  under-estimated: the factor rises by the linear law (``R = e * s / rate``), at most
  doubling, up to ``max_corrections`` times in a row; above it, ``s`` was.
* ``HOLD``: windows of ``window_steps`` steps are compared with the rate verified. A drop
  for ``patience`` windows means the input got slower: the factor rises by the linear
  law at once. A fall of R does not show at all (the step was already the bottleneck),
  so every ``check_every_steps`` steps a ``CHECK`` follows.
* ``CHECK``: the factor is divided by ``check_divisor``. If the rate drops within
  ``drain_steps``, its size gives R again: back to the held factor if R is unchanged
  (within twice ``drift_tolerance``: a few waiting steps are noisy), else to
  ``R * headroom``. If it does not drop, R has fallen below the lower factor and
  ``BASELINE`` measures again at factor 1.

Every rate is steps over seconds (a mean, so that a lumpy input's stalls count, and so
that batch echoing's uneven steps average out). A step *waits* when it is slower than the
reference by ``drift_tolerance``. A drop shows when the median of the last ``drop_steps``
steps waits (smooth input), or when at least two of the last ``window_steps`` steps wait
and their mean is slower (bursty input: a text pipeline hands over batches in bursts, so
most steps are served at once and every few steps one waits long). The measurement after
a drop spans ``measure_steps`` waits and ends on one, so that it holds whole bursts; a
window of ``drain_steps`` steps slower than the reference is a drop even where no wait
showed one. ``HOLD`` and ``VERIFY`` windows count every wait: on bursty input one long
wait per window is the input's rate. A *stall* is not: one step in a window longer than
a wait for ``stall_batches`` batches can be at the factor in force (a shuffle buffer
refilling, a slow read) shows at any factor, and raising the factor for it only spends
fresh data; it is left out of the window and listed in :attr:`EchoController.stalls`.

**Lumpy input.** Some pipelines keep up for long stretches and then stall (a text
pipeline refilling its shuffle buffer at each epoch): a check or a baseline then finds no
drop, and soon after the step waits again. When an estimate of R exceeds, within
``lumpy_window`` steps, 1.5 times a factor at which R was just found to be at most that
factor, the controller marks the input lumpy (:attr:`EchoController.lumpy`, said in the
decision log) and from then on never sets less than ``headroom`` times the median of its
last ``lumpy_estimates`` estimates of R (the floor). A raise then goes to that floor,
not to the latest estimate: one lump's estimate is not R, and a rise of R moves the
median once most recent estimates show it.

**Timestamps that do not time the step.** A loop under asynchronous dispatch (JAX) that
timestamps when a step is queued, not when it has run, shows steps far shorter than a
step and, every few dozen, one far longer, when the queue of steps in flight is full.
``implausible_pauses`` such pauses within 200 steps make the controller say so
(:attr:`EchoController.implausible`), measure nothing and keep the factor while they go
on: block on the step's result before timestamping (``examples/jax_loop.py``).

**What tuning costs under the timing law**, in step-times lost against running at
``e = R * headroom`` from the first step, with the defaults (``m = measure_steps`` = 3, ``check_divisor`` = 2,
``headroom`` = 1.1, ``P = check_every_steps`` = 80):

* once, at the start: the waiting steps at factor 1, about ``(m + 2) * (R - 1)`` (the
  step that waits for the rest of a batch in production, ``m`` measured, one more while
  the first batch at the new factor is made): 5 at R=2, 15 at R=4, 25 at R=6; in the
  worst case, R at or above ``max_factor``, ``(m + 2) * (max_factor - 1)`` = 35 of the
  run's own step-times (each waiting step at factor 1 takes ``max_factor`` of them). The
  opening probe costs no time, only ``settle_steps + window_steps`` = 20 steps' worth
  of echoing at ``max_factor``;
* per check, with R unchanged: about ``(m + 2) * (check_divisor / headroom - 1)`` = 4,
  every ``P`` steps: about 5% of a run's step-times;
* after a change of R: a rise is followed within ``patience * window_steps`` steps, a fall
  within ``P + 2 * drain_steps`` = 160 steps;
* on bursty input each measured wait is a whole burst, so the start and every check cost
  about the mean burst (in batches) times the above, and after a check the emptied buffer
  refills only at ``e / R - 1`` batches per step, so bursts make steps wait meanwhile.

``python -m benchmarks.controller_simulation`` measures these on the model of
:mod:`echoing.simulation` (``benchmarks/results/controller_simulation.json``: 3.6%, 5.1%
and 6.1% of the time at R = 2, 4, 6, start and checks together).

Example, on a simulated loop with R = 4 (a step of 10 ms, a batch of fresh input every
40 ms, a buffer of 10 batches), first with the timestamps alone, then with the fresh
count of an echo stage whose elements are examples, 64 to a step:

>>> from echoing.controller import EchoController
>>> from echoing.simulation import Scenario, simulate
>>> controller = EchoController(max_factor=8.0)
>>> run = simulate(Scenario(ratio=4.0, step_seconds=0.01, steps=300), controller=controller)
>>> round(controller.ratio, 1), controller.factor, controller.phase.value
(4.0, 4.4, 'hold')
>>> [d.phase.value for d in controller.decisions][:4]
['probe', 'baseline', 'verify', 'hold']
>>> supplied = EchoController(max_factor=8.0, elements_per_step=64)
>>> run = simulate(Scenario(ratio=4.0, step_seconds=0.01, steps=300), controller=supplied, count_fresh=True)
>>> [(d.phase.value, d.factor) for d in supplied.decisions][:4]
[('probe', 8.0), ('check', 4.0), ('check', 2.0), ('hold', 4.4)]
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
import numbers
import statistics
from typing import Optional

from echoing._checks import check_int, check_number


class Phase(str, enum.Enum):
    """What the controller is doing (a ``str``, so ``phase == "hold"`` holds too)."""

    BASELINE = "baseline"
    PROBE = "probe"
    VERIFY = "verify"
    HOLD = "hold"
    CHECK = "check"

    def __str__(self) -> str:
        return self.value


PHASES = tuple(phase.value for phase in Phase)

# An estimate of R this many times above a factor at which R was just found to be at most
# that factor contradicts it: the input came in lumps. 1.5 leaves room for the jitter of a
# few waiting steps (35% per batch in the simulated jitter scenarios), so that steady input
# with R near 1 is not taken for lumpy (tests/test_controller.py).
LUMPY_CONTRADICTION = 1.5


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """The settings of an :class:`EchoController` (see :mod:`echoing.controller` for the law).

    Attributes:
      max_factor: the largest factor it sets and the one it probes at; >= 1.
      initial_factor: the factor after the opening probe, in [1, max_factor]. 1 (the
        default) measures R at factor 1, which costs about ``(measure_steps + 2) * (R - 1)``
        step-times once; a warm estimate (``R * headroom`` with R from
        :func:`echoing.measure_ratio`) skips that: it is verified, and raised if below R.
      headroom: the factor is set to ``R * headroom``, a little above R, so that the
        step stays the bottleneck despite jitter in the input rate (> 0).
      min_gain: a probe at ``max_factor`` gaining less than this over the base rate means
        training is not input-bound.
      settle_steps: steps after raising the factor before measuring: the batches the
        pipeline holds in its echo micro-batch and prefetch (``max_factor * 64 /
        batch_size + prefetch depth`` for example echoing, ``max_factor + prefetch depth``
        for batch echoing; the default 10 covers batches of 64 at ``max_factor=8`` with a
        prefetch of 2).
      window_steps: steps per window in ``HOLD`` (rate: steps over seconds, every step
        counted).
      windows: ``VERIFY`` and ``PROBE`` measure this many windows.
      drift_tolerance: relative change of the rate that counts (a drop, a drift).
      patience: windows in a row beyond ``drift_tolerance`` that make a drift in ``HOLD``.
      check_every_steps: steps of ``HOLD`` between downward checks; ``None`` for none.
      check_divisor: a check divides the held factor by this (> 1).
      drain_steps: the longest the controller waits for a lower factor to show in the
        rate: about 2.5x the batches the pipeline buffers after the echo stage (its
        prefetch depth plus the echo micro-batch), 60 for the default ~10 and up to 24.
      drop_steps: the last this many steps' median shows a drop (>= 1).
      measure_steps: waits measured after a drop (on smooth input, steps; on bursty
        input, bursts); each costs ``R / e - 1`` step-times (a burst, that times its
        batches), and more average out the input's jitter (>= 2).
      max_corrections: how many times ``VERIFY`` may move the factor in a row.
      lumpy_window: the input is taken to be lumpy when, within this many steps of
        concluding that R had fallen below a factor, the step waits for the input at that
        factor or below (the supply law: an estimate of R over 1.5 times that factor, a
        second time); from then on the timing law keeps the factor at or above
        ``headroom`` times the median of the last ``lumpy_estimates`` estimates of R, and
        the supply law neither chains checks down nor raises without waiting steps (see
        :mod:`echoing.controller`).
      lumpy_estimates: how many of the latest estimates of R make that floor (timing law),
        and how many of the latest windows' readings make R on lumpy input (supply law).
      pause_factor: a step longer than this many reference steps is taken as a pause
        the loop did not announce (an evaluation, a checkpoint): left out of every
        measurement and logged.
      stall_batches: in ``HOLD`` and ``VERIFY`` windows, one step longer than the wait for
        this many batches is a stall of the input that no factor up to ``max_factor``
        would have covered (a shuffle buffer refilling, a long read): it is left out of
        the window's rate and listed in :attr:`EchoController.stalls`. At factor ``e`` a
        wait for one batch lasts ``R / e`` steps, at most ``max_factor / e`` where R is
        within reach, and a burst of ``k`` batches ``k`` times that: the limit is
        ``stall_batches * max_factor / e`` steps (at the default 16 and ``max_factor=8``:
        128 steps at e=1, 32 at e=4). A window where more than a tenth of the steps are
        that long counts them all: the input is that slow.
      implausible_pauses: this many pauses within 200 steps are not pauses but wrong
        timestamps: most steps look far shorter than a step and every few dozen one looks
        far longer. That is a loop that timestamps the moment a step is *dispatched*
        under asynchronous dispatch (JAX), whose dispatch stalls whenever the queue of
        steps in flight is full. The controller then measures nothing and keeps the
        factor until the pattern stops, and says so (:attr:`EchoController.implausible`).
      elements_per_step: the fresh elements one training step would read without echo:
        the batch size where the echo stage echoes examples, 1 where it echoes batches.
        Needed (and only used) when :meth:`EchoController.observe` is given the stage's
        ``fresh`` count, which selects the supply law (see :mod:`echoing.controller`).
      supply_settle_steps: steps the supply law lets pass after a change of the factor
        before it measures (the micro-batch the echo stage holds at the old factor).
      supply_window_steps: steps per window of the supply law (at least; a window also
        spans three increments of the ``fresh`` count, which comes in micro-batches).
      supply_check_every_steps: steps of the supply law's ``HOLD`` between checks; ``None``
        for none.
      supply_check_divisor: a check of the supply law divides the held factor by this
        (> 1). It costs nothing while the buffer lasts, so it can be gentle: 1.4 drains
        about 0.2 batches per step at ``e = 1.1 R``.
      lumpy_supply_window_steps: steps per window of the supply law once the input is
        named lumpy (at least ``supply_window_steps``): long enough to hold several
        of its lumps, so that one stall does not read as R.
      verbose: 1 prints each decision as one sentence.
    """

    max_factor: float = 8.0
    initial_factor: float = 1.0
    headroom: float = 1.1
    min_gain: float = 0.1
    settle_steps: int = 10
    window_steps: int = 10
    windows: int = 2
    drift_tolerance: float = 0.12
    patience: int = 2
    check_every_steps: Optional[int] = 80
    check_divisor: float = 2.0
    drain_steps: int = 40
    drop_steps: int = 3
    measure_steps: int = 3
    max_corrections: int = 3
    lumpy_window: int = 500
    lumpy_estimates: int = 5
    pause_factor: float = 100.0
    stall_batches: float = 16.0
    implausible_pauses: int = 3
    elements_per_step: Optional[int] = None
    supply_settle_steps: int = 4
    supply_window_steps: int = 12
    supply_check_every_steps: Optional[int] = 60
    supply_check_divisor: float = 1.4
    lumpy_supply_window_steps: int = 120
    verbose: int = 0

    def __post_init__(self):
        check_number("max_factor", self.max_factor, low=1.0)
        check_number("initial_factor", self.initial_factor, low=1.0)
        if self.initial_factor > self.max_factor:
            raise ValueError(f"initial_factor: expected a number in [1, max_factor={self.max_factor!r}], "
                             f"got {self.initial_factor!r}")
        check_number("headroom", self.headroom, low=0.0, low_open=True)
        check_number("min_gain", self.min_gain, low=0.0)
        check_number("drift_tolerance", self.drift_tolerance, low=0.0, high=1.0, low_open=True, high_open=True)
        check_number("check_divisor", self.check_divisor, low=1.0, low_open=True)
        check_number("pause_factor", self.pause_factor, low=1.0, low_open=True)
        check_number("stall_batches", self.stall_batches, low=1.0)
        check_int("implausible_pauses", self.implausible_pauses, low=2)
        check_int("settle_steps", self.settle_steps, low=0)
        check_int("window_steps", self.window_steps, low=1)
        check_int("windows", self.windows, low=1)
        check_int("patience", self.patience, low=1)
        check_int("drain_steps", self.drain_steps, low=1)
        check_int("drop_steps", self.drop_steps, low=1)
        check_int("measure_steps", self.measure_steps, low=2)
        check_int("max_corrections", self.max_corrections, low=0)
        check_int("lumpy_window", self.lumpy_window, low=0)
        check_int("lumpy_estimates", self.lumpy_estimates, low=1)
        check_int("check_every_steps", self.check_every_steps, low=1, none_ok=True)
        check_int("elements_per_step", self.elements_per_step, low=1, none_ok=True)
        check_int("supply_settle_steps", self.supply_settle_steps, low=0)
        check_int("supply_window_steps", self.supply_window_steps, low=2)
        check_int("supply_check_every_steps", self.supply_check_every_steps, low=1, none_ok=True)
        check_number("supply_check_divisor", self.supply_check_divisor, low=1.0, low_open=True)
        check_int("lumpy_supply_window_steps", self.lumpy_supply_window_steps, low=self.supply_window_steps)
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, numbers.Integral) or self.verbose < 0:
            raise ValueError(f"verbose: expected 0 or 1, got {self.verbose!r}")


@dataclasses.dataclass(frozen=True)
class MeasuredRate:
    """A step rate a decision rests on: ``steps_per_second`` measured at echo ``factor``."""

    factor: float
    steps_per_second: float


@dataclasses.dataclass(frozen=True)
class EchoDecision:
    """One decision of an :class:`EchoController`.

    Attributes:
      step: the training step at which it was taken.
      factor: the echo factor from this step on.
      previous_factor: the factor before it.
      phase: the :class:`Phase` the controller entered.
      reason: one sentence, with the measured rates behind it.
      rates: the step rates the decision rests on, each a :class:`MeasuredRate` (the
        factor it was measured at and the steps per second); :meth:`rate_at` finds one.
      reference_rate: the step's own rate (steps per second where the step, not the
        input, is the bottleneck) as the controller knows it after this decision; ``nan``
        before the opening probe ends.
      ratio: the estimate of R under load after this decision (``nan`` when unknown).
    """

    step: int
    factor: float
    previous_factor: float
    phase: Phase
    reason: str
    rates: tuple
    reference_rate: float
    ratio: float

    def rate_at(self, factor: float) -> Optional[float]:
        """The steps per second measured at ``factor`` for this decision, or ``None``."""
        return next((r.steps_per_second for r in self.rates if r.factor == factor), None)

    def __str__(self) -> str:
        return (f"step {self.step}: echo factor {self.previous_factor:g} -> {self.factor:g} ({self.phase.value}): "
                f"{self.reason}")


class EchoController:
    """Sets the echo factor to about R, measured from the training step's timestamps; no Keras needed.

    A training loop calls :meth:`observe` after every step with the step number and a
    timestamp; when it returns a decision, the loop assigns :attr:`factor` to the
    ``tf.Variable`` its :func:`echoing.echo` stage reads. :class:`echoing.AutoEcho` does
    exactly this from Keras ``fit``. A custom loop:

    .. code-block:: python

        factor = tf.Variable(1.0, dtype=tf.float64)
        stats = echoing.EchoStats()
        ds = upstream.apply(echoing.echo(factor, shuffle_buffer_size=1024, seed=0, stats=stats)).batch(128).prefetch(2)
        controller = echoing.EchoController(max_factor=8.0, elements_per_step=128)
        for step, batch in enumerate(ds):
            train_step(batch)   # under JAX: block on its result first
            if controller.observe(step, time.perf_counter(), fresh=int(stats.fresh)):
                factor.assign(controller.factor)

    Without ``stats`` and ``elements_per_step``, ``observe(step, timestamp)`` follows the
    timing law from the timestamps alone.

    Call :meth:`interrupt` before a pause that is not training (evaluation, a checkpoint),
    so that its duration does not count as a slow step.

    Settings are a :class:`ControllerSettings`, given whole (``settings=``) or as keyword
    arguments (``EchoController(max_factor=8.0, verbose=1)``), not both. The law, its
    phases and what it costs are described in :mod:`echoing.controller`.

    Attributes:
      settings: the :class:`ControllerSettings`.
      factor: the factor the loop should be running at now.
      phase: the current :class:`Phase`.
      ratio: the latest estimate of R under load (``nan`` before the first). When the
        rate did not saturate at ``max_factor`` it is a lower bound.
      decisions: every :class:`EchoDecision` so far.
      window_rates: ``(step, steps per second)`` at the end of every window measured in
        ``HOLD``, and of every measurement in the other phases.
      lumpy: whether the input was found lumpy (see the module docstring).
      stalls: ``(step, seconds)`` of every stall left out of a window (see ``stall_batches``
        in :class:`ControllerSettings`).
      implausible: whether the step times were ever implausible (see
        ``implausible_pauses`` in :class:`ControllerSettings`): the loop's timestamps were
        wrong, and the factor was kept while they were.

    Raises:
      TypeError, ValueError: for a setting of the wrong type or value, naming it.
    """

    def __init__(self, settings: Optional[ControllerSettings] = None, **keywords) -> None:
        if settings is not None and keywords:
            raise TypeError(f"settings: give a ControllerSettings or keyword settings, not both; got both settings and "
                            f"{sorted(keywords)}")
        if settings is None:
            known = {field.name for field in dataclasses.fields(ControllerSettings)}
            unknown = sorted(set(keywords) - known)
            if unknown:
                raise TypeError(f"{unknown[0]}: not a setting of EchoController; the settings are {sorted(known)}")
            settings = ControllerSettings(**keywords)
        elif not isinstance(settings, ControllerSettings):
            raise TypeError(f"settings: expected a ControllerSettings, got {type(settings).__name__}: {settings!r:.200}")
        self.settings = settings
        self.factor = float(settings.max_factor)
        self.phase = Phase.PROBE
        self.ratio = math.nan
        self.decisions: list[EchoDecision] = []
        self.window_rates: list[tuple[int, float]] = []
        self._last: Optional[tuple[int, float]] = None  # the previous (step, timestamp), None after an interrupt
        self._last_step: Optional[int] = None
        self._reference = math.nan  # steps/s where the step is the bottleneck (s)
        self._held = 1.0
        self._base: Optional[tuple[float, float]] = None  # (factor, rate) a probe compares with; None at the start
        self._corrections = 0
        self._estimates: list[tuple[int, float]] = []  # (step, R) measured where the step waited for the input
        self._lumpy_readings: list[float] = []  # R read by the latest windows on lumpy input
        self._fell: Optional[tuple[int, float]] = None  # (step, factor) of the last conclusion "R <= factor"
        self.lumpy = False
        self.implausible = False
        self.stalls: list[tuple[int, float]] = []
        self._pauses: collections.deque = collections.deque()  # Steps at which a pause was seen.
        self._note = ""  # said once, in the next decision's reason
        self._supply_law: Optional[bool] = None  # whether observe gets the fresh count (fixed by the first call)
        self._supply: list[tuple[int, float, int]] = []  # (step, timestamp, fresh) since the last window or restart
        self._check_from_hold = False
        self._contradictions = 0
        self._enter(0)

    @property
    def max_factor(self) -> float:
        return self.settings.max_factor

    # The loop's side.

    def observe(self, step: int, timestamp: float, fresh: Optional[int] = None) -> Optional[EchoDecision]:
        """Records that training step ``step`` ended at ``timestamp`` (seconds, monotonic).

        Returns the decision taken at this step, if any; then assign :attr:`factor` to the
        echo stage's variable. The first call returns one: the starting factor.
        ``step`` must increase; it may skip (``steps_per_execution > 1``). A timestamp
        that goes backwards, or a step far longer than the others (a pause the loop did
        not announce with :meth:`interrupt`), is left out of every measurement and
        logged as a decision that keeps the factor.

        ``fresh``: the echo stage's count of fresh elements so far (``int(stats.fresh)``
        of its :class:`echoing.EchoStats`), at every call or at none; with it the
        controller follows the supply law, which needs ``elements_per_step``. A count
        that goes back (``stats.reset()``) is treated as a timestamp that goes back.
        """
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"step: expected an int, got {type(step).__name__}: {step!r}")
        if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Real) or not math.isfinite(timestamp):
            raise ValueError(f"timestamp: expected finite seconds, got {timestamp!r}")
        step, timestamp = int(step), float(timestamp)
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(f"step: expected steps to increase, got {step} after {self._last_step}")
        self._check_fresh(fresh)
        self._last_step = step
        if not self.decisions:
            self._last = (step, timestamp)
            self._supply = [] if fresh is None else [(step, timestamp, int(fresh))]
            if self.settings.max_factor == 1:
                return self._decide(step, 1.0, Phase.HOLD, "max_factor is 1: nothing to choose")
            return self._decide(step, self.factor, Phase.PROBE,
                                f"measuring the step's own rate at e={self.factor:g}, where the input is outrun")
        previous, self._last = self._last, (step, timestamp)
        origin = [] if fresh is None else [(step, timestamp, int(fresh))]
        if previous is None:
            self._supply = origin
            return None  # After an interrupt: the time since the last step was not training.
        elapsed, steps = timestamp - previous[1], step - previous[0]
        if elapsed <= 0:
            self._restart_measurement()
            self._supply = origin
            return self._keep(step, f"the timestamp went back or stood still ({elapsed:+.3g} s over {steps} steps): "
                                    "not measured, keeping the factor")
        if fresh is not None and self._supply and fresh < self._supply[-1][2]:
            self._restart_measurement()
            self._supply = origin
            return self._keep(step, f"the fresh count went back (to {fresh}, a reset?): not "
                                    "measured, keeping the factor")
        duration = elapsed / steps
        typical = self._typical_duration()
        while self._pauses and self._pauses[0] <= step - _IMPLAUSIBLE_WINDOW_STEPS:
            self._pauses.popleft()
        if typical is not None and duration > self.settings.pause_factor * typical:
            self._restart_measurement()
            self._supply = origin
            self._pauses.append(step)
            if len(self._pauses) >= self.settings.implausible_pauses:
                self.implausible = True
                return self._keep(step, f"implausible step times: {len(self._pauses)} steps within "
                                        f"{_IMPLAUSIBLE_WINDOW_STEPS} took over {self.settings.pause_factor:g}x the "
                                        f"typical {typical:.3g} s (this one {duration:.3g} s): the timestamps do not "
                                        "time the steps (a JAX loop must block on the step's result, e.g. "
                                        "jax.block_until_ready, before timestamping; a loop that pauses must call "
                                        "interrupt() first); keeping the factor and measuring nothing until it stops")
            return self._keep(step, f"a step took {duration:.3g} s, {duration / typical:.0f}x the typical "
                                    f"{typical:.3g} s: taken as a pause (call interrupt() before one), not measured")
        if len(self._pauses) >= self.settings.implausible_pauses:
            # Between the stalls of a dispatch queue the steps look far too fast: not measured.
            self._restart_measurement()
            self._supply = origin
            return None
        self._durations.append((step, duration, steps))
        if fresh is not None:
            self._supply.append(origin[0])
            return self._on_supply_step(step)
        return self._on_step(step)

    def _check_fresh(self, fresh) -> None:
        if fresh is not None and (isinstance(fresh, bool) or not isinstance(fresh, numbers.Integral) or fresh < 0):
            raise ValueError(f"fresh: expected a count of fresh elements (an int >= 0), got {fresh!r}")
        if self._supply_law is None:
            if fresh is not None and self.settings.elements_per_step is None:
                raise ValueError(f"elements_per_step: the fresh count ({fresh}) needs the fresh elements one step reads "
                                 "without echo (the batch size when the stage echoes examples, 1 for batches); got None")
            self._supply_law = fresh is not None
        elif self._supply_law != (fresh is not None):
            raise ValueError(f"fresh: give the fresh count at every call or at none; got {fresh!r} after "
                             f"{'counts' if self._supply_law else 'none'}")

    def interrupt(self) -> None:
        """The time until the next step is not training (an evaluation, a checkpoint, a new epoch)."""
        self._last = None

    # The control law.

    def _on_step(self, step: int) -> Optional[EchoDecision]:
        since = step - self._phase_step
        if self.phase in (Phase.BASELINE, Phase.CHECK):
            return self._watch_for_drop(step, since)
        if self.phase == Phase.HOLD:
            return self._on_hold_step(step)
        if since < self.settings.settle_steps:
            return None
        measured = self._steps_after(self._phase_step + self.settings.settle_steps)
        # The opening probe needs one window: it only fixes the reference, which every
        # later measurement checks again.
        windows = 1 if self.phase == Phase.PROBE and self._base is None else self.settings.windows
        if sum(n for _, _, n in measured) < self.settings.window_steps * windows:
            return None
        rate = self._window_rate(measured)
        self.window_rates.append((step, rate))
        if self.phase == Phase.PROBE:
            return self._after_probe(step, rate)
        return self._after_verify(step, rate)

    def _watch_for_drop(self, step: int, since: int) -> Optional[EchoDecision]:
        """BASELINE and CHECK: a lower factor shows only once the buffer has drained."""
        settings = self.settings
        durations = self._durations
        slow = (1 + settings.drift_tolerance) / self._reference
        if self._drop_start is None:
            first = self._first_waiting_step(slow)
            if first is not None:
                # The first waiting step waited only for the rest of a batch already in
                # production: the measurement starts after it.
                self._drop_start = first + 1
        if self._drop_start is not None:
            waiting = durations[self._drop_start:]
            waited = [i for i, (_, d, _) in enumerate(waiting) if d > slow]
            # Smooth input waits at every step; lumpy input waits at some and is served from
            # a burst at the others: the measurement spans ``measure_steps`` waits, and ends
            # on one, so that it holds whole bursts (or the longest a drain may take).
            if len(waiting) < settings.measure_steps:
                return None
            if len(waited) < settings.measure_steps and len(waiting) < settings.drain_steps:
                return None
            if len(waited) >= settings.measure_steps:
                waiting = waiting[:waited[settings.measure_steps - 1] + 1]
            rate = _rate(waiting)
            if rate * slow >= 1:
                return self._after_no_drop(step)  # The waits stopped: R fell while measuring.
            self.window_rates.append((step, rate))
            return self._after_drop(step, rate)
        if since >= settings.drain_steps:
            return self._after_no_drop(step)
        return None

    def _first_waiting_step(self, slow: float) -> Optional[int]:
        """The index of the step that shows a drop, if one shows: the buffer has drained.

        Smooth input: the median of the last ``drop_steps`` steps is slower than ``slow``.
        Lumpy input (bursts, with steps served from them in between): at least two of
        the last ``window_steps`` steps waited, and the mean over them is slower. A single
        slow step (a hiccup of the host) is neither.
        """
        settings, durations = self.settings, self._durations
        recent = durations[-settings.drop_steps:]
        if len(recent) >= settings.drop_steps and statistics.median(d for _, d, _ in recent) > slow:
            start = len(durations) - len(recent)
        else:
            recent = durations[-settings.window_steps:]
            waits = sum(1 for _, d, _ in recent if d > slow)
            if waits < 2 or _rate(recent) * slow >= 1:
                return None
            start = len(durations) - len(recent)
        return start + next(i for i, (_, d, _) in enumerate(recent) if d > slow)

    def _after_drop(self, step: int, rate: float) -> EchoDecision:
        settings, low = self.settings, self.factor
        rates = [(low, rate)]
        measured = f"after the buffer drained, e={low:g} gives {rate:.1f} steps/s against {self._reference:.1f}"
        self.ratio = low * self._reference / rate
        self._record_estimate(step)
        factor = self._factor_for(self.ratio)
        # A check's few waiting steps are noisy: only a clear fall moves the factor (a rise of
        # R shows in HOLD as a drop of the rate at the held factor, measured over windows).
        unchanged = self._held * (1 - 2 * settings.drift_tolerance) <= factor
        if self.phase == Phase.CHECK and unchanged:
            return self._decide(step, self._held, Phase.HOLD,
                                f"{measured}: R is still about {self.ratio:.2f}; back to e={self._held:g}", rates)
        self._corrections = 0
        bound = ""
        if self.ratio >= settings.max_factor * (1 - settings.drift_tolerance):
            bound = (f" (R >= {self.ratio:.2f}: the reference was measured at max_factor={settings.max_factor:g}, which "
                     "the input may not have kept up with)")
        return self._decide(step, factor, Phase.VERIFY,
                            f"{measured}: R = {self.ratio:.2f} under load{bound}; e = min(R x {settings.headroom:g}, "
                            f"{settings.max_factor:g})", rates)

    def _after_no_drop(self, step: int) -> EchoDecision:
        settings, low = self.settings, self.factor
        rate = _rate(self._durations[-settings.window_steps:])
        if rate * (1 + settings.drift_tolerance) < self._reference:
            # No wait showed as a drop, yet the steps are slower: the rate says so.
            self.window_rates.append((step, rate))
            return self._after_drop(step, rate)
        rates = [(low, rate)]
        waited = f"e={low:g} still gives {rate:.1f} steps/s after {settings.drain_steps} steps"
        if self.phase == Phase.CHECK:
            self._fell = (step, low)
            if self.lumpy:
                # The input keeps up for a while, then stalls: a quiet stretch says little.
                self._reference = rate
                return self._decide(step, low, Phase.HOLD,
                                    f"{waited}; the input is lumpy, so holding e={low:g}, not below "
                                    f"{self._floor():g}", rates)
            if low > 1:
                return self._decide(step, 1.0, Phase.BASELINE,
                                    f"{waited}: R has fallen below {low:g}; measuring at e=1", rates)
            self.ratio = min(self.ratio, 1.0) if math.isfinite(self.ratio) else 1.0
            self._reference = rate
            return self._decide(step, 1.0, Phase.HOLD, f"{waited}: R has fallen to 1 or below; no echoing", rates)
        self._fell = (step, 1.0)
        self.ratio = rate / self._reference
        return self._decide(step, 1.0, Phase.HOLD, f"{waited}: training is not input-bound; no echoing", rates)

    def _after_probe(self, step: int, rate: float) -> EchoDecision:
        settings = self.settings
        if self._base is None:
            # The start: at max_factor the input is outrun (unless R > max_factor) and the
            # buffer fills, so this is the step's own rate, whatever the buffer held before.
            self._reference = rate
            rates = [(settings.max_factor, rate)]
            if settings.initial_factor > 1:
                self._corrections = 0
                return self._decide(step, settings.initial_factor, Phase.VERIFY,
                                    f"the step runs {rate:.1f} steps/s at e={settings.max_factor:g}; verifying the "
                                    f"initial e={settings.initial_factor:g}", rates)
            return self._decide(step, 1.0, Phase.BASELINE,
                                f"the step runs {rate:.1f} steps/s at e={settings.max_factor:g}; measuring e=1 once "
                                "the buffer drains", rates)
        base_factor, base_rate = self._base
        rates = [(base_factor, base_rate), (settings.max_factor, rate)]
        gain = rate / base_rate
        measured = f"e={settings.max_factor:g} gives {rate:.1f} steps/s against {base_rate:.1f} at e={base_factor:g}"
        self._reference = max(rate, base_rate)
        if gain < 1 + settings.min_gain:
            self.ratio = base_factor * gain
            if base_factor == 1:
                return self._decide(step, 1.0, Phase.HOLD, f"{measured}, less than {settings.min_gain:.0%} more: "
                                                           "training is not input-bound (R <= 1), so no echoing", rates)
            return self._decide(step, base_factor, Phase.HOLD, f"{measured}: no gain; holding e={base_factor:g}", rates)
        self.ratio = base_factor * gain
        self._record_estimate(step)
        saturated = self.ratio < settings.max_factor * (1 - settings.drift_tolerance)
        bound = "R" if saturated else f"R >= {self.ratio:.2f} (the rate had not saturated at e={settings.max_factor:g}), so"
        self._corrections = 0
        return self._decide(step, self._factor_for(self.ratio), Phase.VERIFY,
                            f"{measured}: {bound} = {self.ratio:.2f} under load; e = min(R x {settings.headroom:g}, "
                            f"{settings.max_factor:g})", rates)

    def _after_verify(self, step: int, rate: float) -> EchoDecision:
        settings, factor = self.settings, self.factor
        rates = [(factor, rate)]
        tolerance = settings.drift_tolerance
        if self._corrections < settings.max_corrections:
            # Where the step is the bottleneck the buffer absorbs the input's jitter and the
            # rate is the reference's: a third of the tolerance separates the two.
            if rate < (1 - tolerance / 3) * self._reference and factor < settings.max_factor:
                # Still on the rising line rate = e * u: u = rate / e, so R = s / u.
                self._corrections += 1
                self.ratio = factor * self._reference / rate
                self._record_estimate(step)
                new = self._raised(factor)
                return self._decide(step, new, Phase.VERIFY, f"e={factor:g} gives {rate:.1f} steps/s, below "
                                                             f"{self._reference:.1f}: R is about {self.ratio:.2f}, raising e",
                                    rates)
            if rate > (1 + tolerance) * self._reference:
                # The reference was low (warm-up steps): R = s / u grows with it.
                self._corrections += 1
                if math.isfinite(self.ratio):
                    self.ratio *= rate / self._reference
                self._reference = rate
                new = self._factor_for(self.ratio) if math.isfinite(self.ratio) else factor
                if new > factor * (1 + tolerance):
                    return self._decide(step, new, Phase.VERIFY,
                                        f"e={factor:g} gives {rate:.1f} steps/s, above the reference: the step is "
                                        f"faster than measured, so R is about {self.ratio:.2f}; raising e", rates)
        self._reference = rate
        return self._decide(step, factor, Phase.HOLD, f"holding e={factor:g} at {rate:.1f} steps/s", rates)

    def _on_hold_step(self, step: int) -> Optional[EchoDecision]:
        settings = self.settings
        if sum(n for _, _, n in self._durations[self._window_start:]) < settings.window_steps:
            return None
        window = self._durations[self._window_start:]
        self._window_start = len(self._durations)
        # Every wait counts: on bursty input (text in buckets) a window's one long wait is the
        # input's rate. Leaving the slowest step out held e=2 for 600 steps where R was about
        # 4 (the Transformer at R=4, python -m benchmarks.time_to_target --tasks transformer
        # --ratios 4 --time-only, its first timing on this controller). Only a stall longer
        # than a wait for a batch can be (stall_batches) is left out.
        rate = self._window_rate(window)
        self.window_rates.append((step, rate))
        change = rate / self._reference - 1
        direction = (change > settings.drift_tolerance) - (change < -settings.drift_tolerance)
        if direction != self._drift_direction:
            self._drift_rates = []
        self._drift_direction = direction
        if direction:
            self._drift_rates.append(rate)
        if len(self._drift_rates) >= settings.patience:
            drifted = statistics.median(self._drift_rates)
            return self._on_drift(step, drifted)
        due = settings.check_every_steps is not None and step - self._phase_step >= settings.check_every_steps
        low = round(max(1.0, self.factor / settings.check_divisor, self._floor()), 2)
        if due and low < self.factor * (1 - settings.drift_tolerance):
            self._held = self.factor
            return self._decide(step, low, Phase.CHECK,
                                f"checking whether R has fallen: does e={low:g} drop below {self._reference:.1f} "
                                "steps/s once the buffer drains?", [(self.factor, self._reference)])
        return None

    def _on_drift(self, step: int, rate: float) -> EchoDecision:
        """The rate moved at the held factor: the input or the step got slower or faster."""
        settings, factor = self.settings, self.factor
        moved = f"the step rate moved {rate / self._reference - 1:+.0%} from {self._reference:.1f} to {rate:.1f} steps/s at e={factor:g}"
        rates = [(factor, rate)]
        if rate > self._reference:
            # The step got faster: where the rate saturated it shows only in part, so R
            # may have grown; a probe tells.
            self._base = (factor, rate)
            if factor >= settings.max_factor:
                self._reference = rate
                return self._decide(step, factor, Phase.HOLD, f"{moved}; e is at max_factor, holding", rates)
            return self._decide(step, settings.max_factor, Phase.PROBE, f"{moved}; probing e={settings.max_factor:g}",
                                rates)
        if factor >= settings.max_factor:
            self._reference = rate
            return self._decide(step, factor, Phase.HOLD, f"{moved}; e is at max_factor, holding", rates)
        # On the rising line again: R = e * s / rate.
        self.ratio = factor * self._reference / rate
        self._record_estimate(step)
        self._corrections = 0
        new = self._raised(factor)
        if new <= factor:
            return self._decide(step, factor, Phase.HOLD,
                                f"{moved}: R is about {self.ratio:.2f} here, but the input is lumpy and the median of "
                                f"its recent estimates keeps e={factor:g}", rates)
        return self._decide(step, new, Phase.VERIFY,
                            f"{moved}: the input is slower, R is about {self.ratio:.2f}; raising e", rates)

    # The supply law: the fresh count says how fast the input delivers.

    def _on_supply_step(self, step: int) -> Optional[EchoDecision]:
        """PROBE, CHECK and HOLD from the fresh count: ``R = s * elements_per_step / fresh rate``."""
        settings = self.settings
        first = self._phase_step + settings.supply_settle_steps
        entries = [entry for entry in self._supply if entry[0] >= first]
        window = self._supply_window_steps()
        measured = self._supply_window(entries)
        if self.phase == Phase.CHECK and measured is not None:
            # The latest window: just after the factor falls, the echo stage first empties the
            # buffers upstream of it at the steps' own pace, which looks like an input that
            # keeps up (tests/test_auto_echo.py at R = 4: 3.35 at e = 3.06 over a whole check, 3.96 later).
            latest = [entry for entry in entries if entry[0] >= entries[-1][0] - window]
            measured = self._supply_window(latest) or measured
        if measured is None:
            return None
        step_rate, fresh_rate = measured
        factor = self.factor
        reference = step_rate if self.phase == Phase.PROBE else self._reference
        ratio = reference * settings.elements_per_step / fresh_rate if fresh_rate > 0 else math.inf
        waiting = step_rate * (1 + settings.drift_tolerance) < reference
        if waiting:
            # Steps that wait are the surest sign the input cannot keep up, and with the buffer
            # empty their rate is e * u: R = e * s / rate, exact where the count's few
            # micro-batches are not (a step of 8 examples takes 8 steps of a 64-element one).
            ratio = max(ratio, factor * reference / step_rate)
        outrun = not waiting and ratio <= factor * (1 + settings.drift_tolerance)
        if (self.phase == Phase.CHECK and outrun and self._check_from_hold and factor > 1 and not self.lumpy
                and entries[-1][0] - entries[0][0] < 2 * window):
            # "The input keeps up" starts a descent: one window's few increments of the count
            # are not enough to say so just below a held factor, where R is near. In a
            # descent (R was found lower a moment ago) one window is.
            return None
        self._supply = self._supply[-1:]  # The next window starts here.
        self._reference = reference  # At max_factor the step is the bottleneck, unless R >= max_factor.
        self.window_rates.append((step, step_rate))
        # Where the input keeps up, the echo stage waits for the step and reads exactly what
        # the steps use: ratio = factor. Above that, the input cannot keep up at this factor.
        rates = [(factor, step_rate)]
        if self.lumpy and self.phase != Phase.PROBE:
            # Every long window's reading, kept up or not: one window may still be one stall.
            self._lumpy_readings = (self._lumpy_readings + [ratio])[-settings.lumpy_estimates:]
        supply = (f"e={factor:g}: {step_rate:.1f} steps/s, fresh input {fresh_rate:.1f} elements/s "
                  f"({ratio:.2f} x what a step at {self._reference:.1f} steps/s reads at e=1)")
        if outrun:
            # The step is the bottleneck: its rate is s.
            self._reference = step_rate if self.phase == Phase.PROBE else 0.5 * (self._reference + step_rate)
        if self.phase == Phase.PROBE:
            if not outrun:
                self.ratio = ratio
                return self._decide(step, factor, Phase.HOLD, f"{supply}: the input does not keep up even at "
                                                              f"max_factor (R >= {factor:g}); holding it", rates)
            # A warm estimate is checked first; else the search halves the factor.
            low = settings.initial_factor if settings.initial_factor > 1 else factor / 2
            return self._supply_check(step, low, f"{supply}: the input keeps up", rates)
        if not outrun:
            self.ratio = ratio
            self._estimates = (self._estimates + [(step, ratio)])[-3:]
            median = statistics.median(r for _, r in self._estimates)
            new = self._factor_for(median)
            self._note_contradiction(step, ratio)
            if self.lumpy:
                if not waiting and self.phase == Phase.HOLD:
                    return None  # Buffers after the echo stage covered the lag: no step waited.
                typical = self._factor_for(statistics.median(self._lumpy_readings or [ratio]))
                new = min(typical, self._held) if not waiting else min(max(typical, factor), round(2 * factor, 2))
            if self.phase == Phase.CHECK or abs(new / factor - 1) > settings.drift_tolerance:
                return self._decide(step, new, Phase.HOLD, f"{supply}: R = {ratio:.2f} (median of the last "
                                                           f"{len(self._estimates)}: {median:.2f}); e = R x "
                                                           f"{settings.headroom:g}", rates)
        elif self.phase == Phase.CHECK:
            self._estimates = []
            self._fell = (step, factor)
            if self.lumpy and factor > 1:
                return self._decide(step, factor, Phase.HOLD, f"{supply}: the input keeps up, so R <= {factor:g}; "
                                                              "holding it (the input is lumpy: no further descent)",
                                    rates)
            if factor <= 1:
                self.ratio = min(self.ratio, 1.0) if math.isfinite(self.ratio) else 1.0
                return self._decide(step, 1.0, Phase.HOLD, f"{supply}: the input keeps up at e=1; no echoing", rates)
            return self._supply_check(step, factor / 2, f"{supply}: the input keeps up, so R <= {factor:g}", rates)
        every = settings.supply_check_every_steps
        due = every is not None and step - self._phase_step >= every
        if due and factor > 1:
            return self._supply_check(step, factor / settings.supply_check_divisor,
                                      f"{supply}; checking a lower factor", rates)
        return None

    def _note_contradiction(self, step: int, ratio: float) -> None:
        """Marks the input lumpy at the second estimate far above a factor it kept up at a moment before."""
        if not self._contradicts(step, ratio):
            return
        self._contradictions += 1
        fell, self._fell = self._fell, None
        if self._contradictions >= 2:
            self.lumpy = True
            self._note = (f"the input is lumpy (it kept up at e={fell[1]:g} at step {fell[0]}, R = {ratio:.2f} now, a "
                          "second time): from now on a raise needs steps that wait and at most doubles e, and a "
                          "check that finds the input keeping up holds its factor")

    def _supply_check(self, step: int, factor: float, reason: str, rates) -> EchoDecision:
        if self.phase == Phase.HOLD:
            self._held = self.factor
        self._check_from_hold = self.phase == Phase.HOLD
        low = round(max(1.0, factor), 2)
        return self._decide(step, low, Phase.CHECK, f"{reason}; measuring e={low:g} (free while the buffer lasts)",
                            rates)

    def _supply_window(self, entries: list) -> Optional[tuple[float, float]]:
        """(steps per second, fresh elements per second) over ``entries``, or ``None`` until they suffice.

        The count grows in micro-batches, so the fresh rate runs from the first increment
        in the window to the last, over at least three increments; a window of four times
        the length with fewer takes the plain count (the input is that slow).
        """
        window = self._supply_window_steps()
        if len(entries) < 2 or entries[-1][0] - entries[0][0] < window:
            return None
        (first_step, first_time, first_fresh), (last_step, last_time, last_fresh) = entries[0], entries[-1]
        step_rate = (last_step - first_step) / (last_time - first_time)
        increments = [later for earlier, later in zip(entries, entries[1:]) if later[2] > earlier[2]]
        if len(increments) >= 3:
            (_, start, counted), (_, end, total) = increments[0], increments[-1]
            return step_rate, (total - counted) / (end - start)
        if last_step - first_step >= 4 * window:
            return step_rate, (last_fresh - first_fresh) / (last_time - first_time)
        return None

    # Bookkeeping.

    def _supply_window_steps(self) -> int:
        """Steps per window of the supply law: on lumpy input, long enough to hold several lumps."""
        settings = self.settings
        return settings.lumpy_supply_window_steps if self.lumpy else settings.supply_window_steps

    def _factor_for(self, ratio: float) -> float:
        settings = self.settings
        factor = max(1.0, ratio * settings.headroom, self._floor())
        # Within the tolerance of the cap, R may well be above it: the reference itself may
        # have been measured at max_factor with the step waiting for the input.
        if factor >= settings.max_factor * (1 - settings.drift_tolerance):
            return settings.max_factor
        return round(factor, 2)

    def _raised(self, factor: float) -> float:
        """The factor after finding the step waiting at ``factor``: at most twice it, at least the floor.

        On lumpy input one estimate is one lump: the floor (the median of the recent
        estimates) follows a rise of R once most of them show it.
        """
        target = self._floor() if self.lumpy else self._factor_for(self.ratio)
        return max(min(target, 2 * factor), self._floor())

    def _contradicts(self, step: int, ratio: float) -> bool:
        """Whether ``ratio``, measured at ``step``, is far above a factor the input kept up at a moment before.

        R was found to be at most ``_fell[1]`` within ``lumpy_window`` steps and is well above
        it now: the input came in lumps (the timing law names it lumpy at once, the supply
        law at the second time).
        """
        fell = self._fell
        return (not self.lumpy and fell is not None and step - fell[0] <= self.settings.lumpy_window
                and ratio > fell[1] * LUMPY_CONTRADICTION)

    def _record_estimate(self, step: int) -> None:
        """Keeps :attr:`ratio`, just measured with the step waiting for the input."""
        self._estimates = (self._estimates + [(step, self.ratio)])[-self.settings.lumpy_estimates:]
        if self._contradicts(step, self.ratio):
            self.lumpy = True
            self._note = (f"the input is lumpy (R <= {self._fell[1]:g} at step {self._fell[0]}, {self.ratio:.2f} now), "
                          f"so e stays at or above {self._floor():g} from now on")

    def _floor(self) -> float:
        """The lowest factor the controller sets: 1, or on lumpy input ``headroom`` x the recent R."""
        if not self.lumpy or self._supply_law:
            return 1.0
        ratio = statistics.median(r for _, r in self._estimates)
        return round(min(self.settings.max_factor, max(1.0, ratio * self.settings.headroom)), 2)

    def _window_rate(self, entries: list) -> float:
        """The rate of a ``HOLD`` or ``VERIFY`` window, without a stall no factor would have covered."""
        if not math.isfinite(self._reference):
            return _rate(entries)
        limit = self.settings.stall_batches * self.settings.max_factor / (self.factor * self._reference)
        stalls = [entry for entry in entries if entry[1] > limit]
        if not stalls or len(stalls) > max(1, len(entries) // 10):
            return _rate(entries)
        self.stalls.extend((entry[0], entry[1] * entry[2]) for entry in stalls)
        return _rate([entry for entry in entries if entry[1] <= limit])

    def _typical_duration(self) -> Optional[float]:
        if math.isfinite(self._reference):
            return 1 / self._reference
        if len(self._durations) >= 3:
            return statistics.median(d for _, d, _ in self._durations)
        return None

    def _steps_after(self, first_step: int) -> list:
        return [entry for entry in self._durations if entry[0] > first_step]

    def _restart_measurement(self) -> None:
        """Forgets the steps measured in this phase; the phase goes on."""
        self._durations = []
        self._drop_start = None
        self._window_start = 0
        self._drift_rates, self._drift_direction = [], 0
        self._phase_step = self._last_step

    def _keep(self, step: int, reason: str) -> EchoDecision:
        return self._decide(step, self.factor, self.phase, reason, enter=False)

    def _enter(self, step: int) -> None:
        self._phase_step = step
        self._supply = self._supply[-1:]  # The decision's step is the origin of the next window.
        self._durations: list[tuple[int, float, int]] = []  # (step, seconds per step, steps)
        self._drop_start: Optional[int] = None
        self._window_start = 0
        self._drift_rates: list[float] = []
        self._drift_direction = 0

    def _decide(self, step, factor, phase, reason, rates=(), *, enter=True) -> EchoDecision:
        if self._note:
            reason, self._note = f"{reason}; {self._note}", ""
        measured = tuple(MeasuredRate(float(at), round(rate, 3)) for at, rate in rates)
        reference = round(self._reference, 3) if math.isfinite(self._reference) else math.nan
        decision = EchoDecision(step=step, factor=float(factor), previous_factor=self.factor, phase=Phase(phase),
                                reason=reason, rates=measured, reference_rate=reference, ratio=self.ratio)
        self.decisions.append(decision)
        self.factor, self.phase = float(factor), Phase(phase)
        if enter:
            self._enter(step)
        if self.settings.verbose:
            print(f"echo factor: {decision}")
        return decision


# Pauses are counted over this many steps: an unannounced evaluation or checkpoint comes
# far less often; a JAX dispatch queue stalls every few dozen steps (examples/jax_loop.py
# --no-block: about every 50 steps on this machine).
_IMPLAUSIBLE_WINDOW_STEPS = 200


def _rate(durations) -> float:
    """Steps per second over ``(step, seconds per step, steps)`` entries: all steps over all seconds.

    A mean, not a median: where the input stalls now and then (long documents), its
    stalls are part of its rate, and with batch echoing the steps' own times alternate
    between waiting for a fresh batch and not.
    """
    steps = sum(n for _, _, n in durations)
    seconds = sum(d * n for _, d, n in durations)
    return steps / seconds
