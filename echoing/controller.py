"""Choosing the echo factor while training runs: one law, from the loop's step times and the echo stage's count.

**The law.** With the two halves of training overlapped, a factor ``e`` runs at
``min(e * u, s)`` steps per second, where ``u`` is the rate at which the input delivers
fresh batches and ``s`` the step's own rate, so the best factor is ``R = s / u``. The
controller opens at ``max_factor``, where the input is outrun, and reads ``s`` off the
step rate; where the steps between the echo stage's pulls (steps on batches already
made, which did not wait) ran faster than the opening's steps on the whole, the input
was behind even there, ``s`` is their rate, and where the R it gives is at least
``max_factor`` the controller holds ``max_factor`` at once. After the opening ``s`` is the
rate of the last 256 steps between pulls. It searches from ``sqrt(max_factor)`` (the
middle of ``[1, max_factor]`` on a log scale), halving the factor while the input keeps
up (by 1.5 where the search goes on from a check); where it cannot, the echo
stage's production (``e`` times the fresh batches it pulls per second, from
:class:`echoing.EchoStats`) gives ``R = e * s / production``, and it holds the knee,
``headroom * R``. Holding, every reading that finds the input behind raises the factor
to the new ``headroom * R`` at once, but no higher than a raise could pay: past the
factor where steps at ``s`` would make the progress a second the reading made, copies
cost more than they can bring. A raise whose next reading runs the steps no faster goes
back; one whose steps ran faster but that trained slower by the objective goes back to
read the factor below afresh, and is made again only if that factor now trains slower
(on lumps each raise to the knee runs the steps a little faster and trains slower: the
knee recedes). Where steps still wait at the factor held (lumpy
input: the step rate below ``s``), it climbs: a raise of 1.25x is tried where it could
pay and kept where it trains faster by the objective, the training progress per second
``T(e) / (1 + copy_cost (e - 1))`` (:func:`echoing.fit_copy_cost`). Every
``check_every_steps`` a check divides the factor by ``check_divisor`` to read R afresh
(a faster input shows no other way); a check that confirms R returns to the factor held
and makes the next one wait twice as long, and there is none while the input is behind
at ``max_factor``. A check, or the search after it, that keeps up on over twice the fresh
batches a second the input made when last behind is reading a lump's stock, and reads on
at that factor up to three readings more before it goes lower. Every reading sums whole windows over a horizon
that grows until it can tell, at two standard errors, whether the input keeps up (lumpy
input is read for longer, up to 320 steps, and no one interval may hold half a reading's
time; one that cannot tell, short of keeping up by less than the tolerance, reads as
keeping up); two raises in a row that bring no faster steps lower ``s``. A reading never uses
batches made before the factor in force (it skips a settle and drops leading windows
that disagree with the rest), nor clocks and counts that go back, timestamps that are
not finite or steps that do not increase. A pause the loop did
not announce is left out of the opening's reading of ``s``; after it, pauses are measured
like any interval and every reading is held against the loop's own rate with its pauses,
``1 / (1 / s + p)``, ``p`` the pauses' seconds per step since the opening: a pause costs
every factor alike, and what the input reads meanwhile counts for the factor that banks
it, so a loop that pauses needs less echo than its R. A trainer of several in step also
gives its own wait for input: steps held back by another trainer's input, not its own,
keep its factor. Where the echo stage pulls on the loop's own thread
(``pulls_on_loop_thread``: :func:`echoing.torch.echo`), a step that pulls also pays for the
hand-over: the law reads that cost from the factors it runs, holds each reading against
the step's rate with it in, and runs no factor below the one where a copy stops paying
for it (:mod:`echoing.control.pull_cost`).

The parts, each with its tests: :mod:`echoing.control.windows` (intervals and what is left
out), :mod:`echoing.control.estimate` (readings and R), :mod:`echoing.control.policy`
(phases), :mod:`echoing.control.pull_cost` (what pulls on the loop's thread cost). What
measuring costs, and how the law does on 200 randomized loops, is in
``docs/choosing.md`` and ``docs/results/controller.md`` (``python -m
benchmarks.controller_sweep``).

Example, on the simulated loop of :mod:`echoing.simulation` with R = 4 (a step of 10 ms,
a fresh batch every 40 ms, a buffer of 10 batches), given the fresh count of an echo
stage whose elements are examples, 64 to a step:

>>> from echoing.controller import EchoController
>>> from echoing.simulation import Scenario, simulate
>>> controller = EchoController(max_factor=8.0, elements_per_step=64)
>>> run = simulate(Scenario(ratio=4.0, step_seconds=0.01, steps=400), controller=controller)
>>> [(d.phase.value, d.cause.value, d.factor) for d in controller.decisions][:3]
[('open', 'start', 8.0), ('search', 'own_rate', 2.828), ('hold', 'measured', 4.125)]
>>> round(controller.ratio, 1)
4.0
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Optional

from echoing._checks import check_bool, check_int, check_number
from echoing.control.estimate import Measurement, Reading
from echoing.control.policy import (FLOOD_READINGS, FLOOD_SHARE, OPENING_PULL_FREE_MIN_STEPS, PULL_FREE_MIN_STEPS, Cause,
                                    Phase, Policy)
from echoing.control.windows import Interval, LeftOut, StepClock

__all__ = ["Cause", "ControllerSettings", "EchoController", "EchoDecision", "LAW", "Phase"]

# The law's name, saved with every replayed AutoEcho timeline (benchmarks/time_to_target.py)
# so that timelines of another law are timed again rather than reused. A change of what
# the law decides names a new one; its history is in docs/decisions/.
LAW = "no-undo-behind-at-max-2026-12-04"


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """The settings of an :class:`EchoController`.

    Attributes:
      max_factor: the largest factor it sets, and the one it opens at (>= 1).
      elements_per_step: the fresh elements one step reads without echo: the batch size
        when the echo stage echoes examples, 1 when it echoes batches; the stage's
        ``fresh`` count over it is fresh batches. Required by :class:`EchoController`.
      initial_factor: above 1, the search after the opening starts at this factor (a
        warm estimate, ``R * headroom`` from :func:`echoing.measure_ratio`) instead of at
        ``sqrt(max_factor)``; in ``[1, max_factor]``.
      headroom: the knee is ``headroom * R`` (> 0): a little above R, so that the
        input's jitter seldom makes a step wait, and a little only, since every copy
        beyond R costs training progress.
      copy_cost: ``c`` of the objective the law maximizes, the training progress per
        second ``T(e) / (1 + c (e - 1))``, in [0, 1]: a step on data echoed ``e`` times
        makes ``1 / (1 + c (e - 1))`` of a fresh step's progress. It decides whether a
        raise above the knee is tried (where steps still wait for input there) and kept.
        The default, 0.13, is the compromise the sweep's frontier finds across c = 0.05
        to 0.19 (``docs/results/controller.md``); ``docs/choosing.md`` says how to fit
        yours from a sample run.
      check_every_steps: steps of holding between checks of a lower factor (``None``:
        never; the factor then follows a slower input but not a faster one).
      check_divisor: a check runs at the held factor divided by this (> 1).
      tolerance: the input keeps up while its production is within this share of the
        step's own rate, in (0, 0.5).
      pulls_on_loop_thread: the echo stage takes its fresh batches on the loop's own
        thread, inside the loop's ``next`` (:func:`echoing.torch.echo`: the
        ``DataLoader``'s hand-over), so a step that pulls is slower than one that does
        not where the input keeps up. The law then reads the pulls' cost from the factors
        it runs, holds each reading against the step's rate with that cost in, and runs
        no factor below the one where a copy stops paying for it
        (:mod:`echoing.control.pull_cost`). Leave it ``False`` for ``tf.data`` and grain,
        whose echo stage pulls beside the steps.
      verbose: 1 prints each decision as one sentence.
    """

    max_factor: float = 8.0
    elements_per_step: Optional[int] = None
    initial_factor: float = 1.0
    headroom: float = 1.05
    copy_cost: float = 0.13
    check_every_steps: Optional[int] = 200
    check_divisor: float = 1.25
    tolerance: float = 0.08
    pulls_on_loop_thread: bool = False
    verbose: int = 0

    def __post_init__(self):
        check_number("max_factor", self.max_factor, low=1.0)
        check_int("elements_per_step", self.elements_per_step, low=1, none_ok=True)
        check_number("initial_factor", self.initial_factor, low=1.0)
        if self.initial_factor > self.max_factor:
            raise ValueError(f"initial_factor: expected a number in [1, max_factor={self.max_factor!r}], "
                             f"got {self.initial_factor!r}")
        check_number("headroom", self.headroom, low=0.0, low_open=True)
        check_number("copy_cost", self.copy_cost, low=0.0, high=1.0)
        check_int("check_every_steps", self.check_every_steps, low=1, none_ok=True)
        check_number("check_divisor", self.check_divisor, low=1.0, low_open=True)
        check_number("tolerance", self.tolerance, low=0.0, high=0.5, low_open=True, high_open=True)
        check_bool("pulls_on_loop_thread", self.pulls_on_loop_thread)
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, numbers.Integral) or self.verbose < 0:
            raise ValueError(f"verbose: expected 0 or 1, got {self.verbose!r}")


@dataclasses.dataclass(frozen=True)
class EchoDecision:
    """One decision of an :class:`EchoController`.

    Attributes:
      step: the training step at which it was taken.
      factor: the echo factor from this step on.
      previous_factor: the factor before it.
      phase: the :class:`Phase` the controller entered.
      cause: the :class:`Cause`.
      reading: the :class:`echoing.control.estimate.Reading` it rests on (``None`` for the
        first decision and for left-out intervals).
      own_rate: the step's own rate (steps per second) as known after it (``nan`` before).
      ratio: the estimate of R after it (``nan`` while unknown).
      left_out: for ``Cause.LEFT_OUT``, why the interval was not measured.
    """

    step: int
    factor: float
    previous_factor: float
    phase: Phase
    cause: Cause
    reading: Optional[Reading]
    own_rate: float
    ratio: float
    left_out: Optional[LeftOut] = None

    @property
    def reason(self) -> str:
        """The decision as one sentence, with its figures."""
        r = self.reading
        figures = "" if r is None else (
            f" (at e={r.factor:g} over {r.steps} steps: {r.step_rate:.3g} steps/s, the input made "
            f"{r.production_rate:.3g} batches/s +-{100 * r.error:.0f}%, the step's own rate {self.own_rate:.3g}/s)")
        text = {
            Cause.START: f"opening at e={self.factor:g} to measure the step's own rate",
            Cause.OWN_RATE: f"the step's own rate is {self.own_rate:.3g} steps/s; searching from e={self.factor:g}",
            Cause.KEEPS_UP: "the input keeps up: R is at most this factor",
            Cause.NOT_INPUT_BOUND: "the input keeps up without echo: training is not input-bound",
            Cause.MEASURED: f"the input cannot keep up: R = {self.ratio:.3g}",
            Cause.INPUT_SLOWER: f"the input fell behind: R rose to {self.ratio:.3g}",
            Cause.SLOWER_THAN_MAX: f"the input cannot keep up even at max_factor (R = {self.ratio:.3g})",
            Cause.STEP_SLOWER: f"two raises in a row brought no faster steps: the step's own rate is {self.own_rate:.3g}",
            Cause.CLIMB: f"steps still wait for input at the factor held: trying e={self.factor:g}, in case the "
                         f"raise trains faster",
            Cause.RAISE_PAID: f"the raise trained faster (progress per second): keeping e={self.factor:g}",
            Cause.RAISE_UNPAID: f"the raise trained no faster (progress per second): back to e={self.factor:g}",
            Cause.RAISE_LIMITED: f"the input fell behind (R = {self.ratio:.3g}), but a raise past e={self.factor:g} "
                                 f"could not train faster (progress per second): steps at their own rate "
                                 f"there make no more than at e={self.previous_factor:g}",
            Cause.RAISE_UNDONE: f"the raise brought no faster steps, and the input is no slower: back to "
                                f"e={self.factor:g}",
            Cause.RAISE_REREAD: f"the raise ran the steps faster but trained slower (progress per second) than "
                                f"the reading before it: reading e={self.factor:g} afresh",
            Cause.RAISE_WITHHELD: f"the input is behind, but the last raise from e={self.factor:g} did not pay "
                                  f"and the input is no slower since: no raise",
            Cause.FLOOD: f"the input kept up, drawing fresh batches over {FLOOD_SHARE:g} times as fast as when it was "
                         f"last behind: a lump's stock, not a fall of R; reading on at this factor (up to "
                         f"{FLOOD_READINGS} readings)",
            Cause.CHECK: "checking a lower factor, to see whether R fell",
            Cause.PULL_COST: f"the echo stage's pulls cost the loop's thread more than copies below e={self.factor:g}",
            Cause.HELD_BACK: "another trainer's input held the steps back (this loop did not wait for its own): "
                             "keeping the factor",
            Cause.SLOWER_BELOW: f"the lower factor just read trained slower (progress per second) than e={self.factor:g} "
                                f"did, though it has fewer copies to pay for: its steps waited; back to e={self.factor:g}",
            Cause.LEFT_OUT: f"an interval was left out of the measurement ({self.left_out})",
        }[self.cause]
        return text + figures

    def __str__(self) -> str:
        return (f"step {self.step}: echo factor {self.previous_factor:g} -> {self.factor:g} ({self.phase.value}, "
                f"{self.cause.value}): {self.reason}")


class EchoController:
    """Sets the echo factor to about R, measured while training runs; no Keras needed.

    A training loop calls :meth:`observe` after every step (or every
    ``steps_per_execution``) with the step index, a timestamp and, best, the echo
    stage's fresh count; when it returns a decision, the loop assigns :attr:`factor` to
    the ``tf.Variable`` its :func:`echoing.echo` stage reads. :class:`echoing.AutoEcho`
    does exactly this from Keras ``fit``. A custom loop:

    .. code-block:: python

        factor = tf.Variable(1.0, dtype=tf.float64)
        stats = echoing.EchoStats()
        ds = upstream.apply(echoing.echo(factor, shuffle_buffer_size=1024, seed=0, stats=stats)).batch(128).prefetch(2)
        controller = echoing.EchoController(max_factor=8.0, elements_per_step=128)
        for step, batch in enumerate(ds):
            train_step(batch)   # under JAX: block on its result first
            if controller.observe(step, time.perf_counter(), fresh=int(stats.fresh)):
                factor.assign(controller.factor)

    The fresh count is required: the step rate alone shows a lower factor only once the
    buffers after the echo stage drain, so a law without it paid for every check in
    waiting steps (``docs/decisions/0011-one-law-with-the-fresh-count.md``). Every echo
    stage counts (:class:`echoing.EchoStats`, :class:`echoing.grain.EchoStats`,
    :class:`echoing.torch.EchoStats`).

    Call :meth:`interrupt` before a pause that is not training (evaluation, a checkpoint);
    pauses it is not told of are found and charged to the loop (:attr:`pause_per_step`).

    Settings are a :class:`ControllerSettings`, given whole (``settings=``) or as keyword
    arguments, not both.

    Attributes:
      settings: the :class:`ControllerSettings`.
      factor: the factor the loop should run at now.
      phase: the current :class:`Phase`.
      ratio: the latest estimate of R (``nan`` before the first).
      decisions: every :class:`EchoDecision` so far, left-out intervals included.
      window_rates: ``(step, steps per second)`` at the end of every reading.
      pause_per_step: seconds of unannounced pause per step since the opening, on average.
      implausible: whether the step times were ever implausible (a JAX loop that does not
        block on the step before timestamping): the factor was kept while they were.

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
        if settings.elements_per_step is None:
            raise ValueError("elements_per_step: the law reads the echo stage's fresh count, which needs the fresh "
                             "elements one step reads without echo (the batch size when the stage echoes examples, 1 "
                             "when it echoes batches); got None")
        self.settings = settings
        self._policy = Policy(settings.max_factor, settings.headroom, settings.check_divisor,
                              settings.check_every_steps, settings.initial_factor, settings.copy_cost,
                              settings.tolerance, settings.pulls_on_loop_thread)
        self._clock = StepClock(settings.elements_per_step, track_pulls=settings.pulls_on_loop_thread)
        self._measurement: Optional[Measurement] = None
        self.decisions: list[EchoDecision] = []
        self.window_rates: list[tuple[int, float]] = []
        self._said_implausible = False

    @property
    def factor(self) -> float:
        return self._policy.factor

    @property
    def phase(self) -> Phase:
        return self._policy.phase

    @property
    def ratio(self) -> float:
        return self._policy.ratio

    @property
    def max_factor(self) -> float:
        return self.settings.max_factor

    @property
    def pause_per_step(self) -> float:
        """Seconds a step of the loop spends, on average, in pauses it did not announce (0 before any)."""
        return self._clock.pause_per_step

    @property
    def implausible(self) -> bool:
        return self._clock.implausible

    def interrupt(self) -> None:
        """The time until the next step is not training (an evaluation, a checkpoint, a new epoch)."""
        self._clock.interrupt()

    def observe(self, step: int, timestamp: float, fresh: Optional[int] = None,
                input_wait: Optional[float] = None) -> Optional[EchoDecision]:
        """Records that training step ``step`` ended at ``timestamp`` (seconds, monotonic).

        Returns the decision taken at this step, if any; then assign :attr:`factor` to the
        echo stage's variable. The first call returns one: the opening factor. ``step``
        should increase; it may skip (``steps_per_execution > 1``). ``fresh`` is the echo
        stage's count of fresh elements so far (``int(stats.fresh)``), required at every
        call. A call or an interval that is left out (a pause in the opening, a clock or a
        count that went back, a timestamp that is not finite, a step that did not increase)
        returns a ``Cause.LEFT_OUT`` decision that keeps the factor. ``input_wait`` is the loop's total time so far waiting for its own
        input (the seconds spent in ``next(iterator)``), at every call or at none: a
        trainer of several in step (``MultiWorkerMirroredStrategy``) must give it, since
        its steps run at the slowest trainer's rate and only its own wait says whether its
        own input is behind (``examples/two_trainers.py``). On one host it helps too: it
        tells the input's stalls from the loop's own pauses, which the count alone cannot
        always (``docs/decisions/0019-the-wait-places-long-intervals.md``); the sweep
        judges the law both ways (``docs/results/controller.md``).
        """
        interval = self._clock.observe(step, timestamp, fresh, self.factor, input_wait)
        if not self.decisions:
            if interval is not None and interval.left_out is not None:
                raise ValueError(f"step, timestamp: the first call needs a step index and finite seconds; got "
                                 f"step={step!r}, timestamp={timestamp!r}")
            self._measurement = Measurement(self.factor, self.settings.tolerance, opening=True,
                                            waits=input_wait is not None)
            cause = Cause.START if self.settings.max_factor > 1 else Cause.NOT_INPUT_BOUND
            return self._record(int(step), self.phase, self.factor, cause, None)
        if interval is None:
            return None
        if interval.left_out == LeftOut.INTERRUPTED:
            return None  # The loop said so: nothing to log.
        if interval.left_out is not None:
            return self._left_out(interval)
        if (not self._measurement.add(interval.steps, interval.seconds, interval.fresh, interval.waited)
                or self.settings.max_factor == 1):
            return None
        self._policy.own_rate_between_pulls(self._clock.pull_free_rate(PULL_FREE_MIN_STEPS))
        own_rate = self._clock.loop_rate(self._policy.own_rate) if math.isfinite(self._policy.own_rate) else math.nan
        reading = self._measurement.reading(own_rate, self._policy.own_wait)
        if reading is None or not reading.complete:
            return None
        self.window_rates.append((interval.end_step, reading.step_rate))
        previous, opening = self.factor, self.phase == Phase.OPEN
        pull_free = self._clock.pull_free_rate(OPENING_PULL_FREE_MIN_STEPS) if opening else math.nan
        if self._policy.pull_cost is not None and not reading.held_back:
            overhead = self._clock.pull_overhead(self.factor, OPENING_PULL_FREE_MIN_STEPS if opening else PULL_FREE_MIN_STEPS)
            if overhead is not None:
                self._policy.pull_cost.note(self.factor, overhead)
        self._policy.long_intervals_keep_a_lattice = self._clock.long_intervals_keep_a_lattice
        phase, factor, cause = self._policy.next(interval.end_step, reading, pull_free)
        if opening:
            self._clock.end_opening()
        if factor != previous or cause != Cause.KEEPS_UP or phase != Phase.HOLD:
            self._measurement = Measurement(factor, self.settings.tolerance,
                                            opening=not math.isfinite(self._policy.own_rate),
                                            waits=self._measurement.waits, check=phase == Phase.CHECK)
            return self._record(interval.end_step, phase, factor, cause, reading, previous)
        # Holding, the input keeps up: keep reading over the rolling horizon.
        return None

    def _left_out(self, interval: Interval) -> Optional[EchoDecision]:
        if interval.left_out == LeftOut.IMPLAUSIBLE:
            if self._said_implausible:
                return None
            self._said_implausible = True
        return self._record(interval.end_step, self.phase, self.factor, Cause.LEFT_OUT, None, left_out=interval.left_out)

    def _record(self, step, phase, factor, cause, reading, previous=None, left_out=None) -> EchoDecision:
        decision = EchoDecision(step=step, factor=factor, previous_factor=self.factor if previous is None else previous,
                                phase=phase, cause=cause, reading=reading, own_rate=self._policy.own_rate,
                                ratio=self._policy.ratio, left_out=left_out)
        self.decisions.append(decision)
        if self.settings.verbose:
            print(f"echo factor: {decision}")
        return decision
