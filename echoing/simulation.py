"""A deterministic model of an echoed input pipeline feeding a training loop; no TensorFlow.

The echo controller (:mod:`echoing.controller`) is designed and judged on this model,
which has the three stages of an echoed ``tf.data`` pipeline and the loop around it:

* the **upstream** reads fresh batches in lumps (a lump of ``k`` fresh batches is read
  whole, in ``k`` batches' time, before any of it is handed over: a long document, a
  record of many rows, a file) into a prefetch of ``upstream_batches`` fresh batches; a
  batch's read takes ``R * step_seconds`` seconds times a log-normal jitter of mean 1;
* the **echo stage** pulls fresh batches from that prefetch, one micro-batch of
  :data:`ELEMENTS_PER_STEP` elements at a time (counted as :class:`echoing.EchoStats`
  counts them), and turns each into ``e`` output batches at the factor in force when it
  makes them, into a buffer of ``buffer_batches`` (the prefetch after ``batch``); it
  takes no time of its own, unless it pulls on the loop's own thread (``pull_seconds``:
  :func:`echoing.torch.echo` takes each fresh batch from the ``DataLoader`` inside the
  loop's ``next``), where the step after a pull takes that much longer per fresh batch;
* the **step** takes one output batch per step and ``step_seconds`` times a log-normal
  jitter of mean 1; every ``pause_every_steps`` steps the loop pauses for
  ``pause_seconds`` without saying so (a checkpoint, a logging callback);
* the **loop** timestamps every ``steps_per_execution`` steps and hands the controller
  the step index, the time and the echo stage's fresh count.

``R = t_upstream / t_step``. At a cold start every buffer is empty; at a warm start
(after a first step that compiled, say) they are full, the output buffer with batches
made at the starting factor. Each step's batch records the factor it was made at, so a
run reports its training progress: a step at factor ``e`` makes ``1 / (1 + c (e - 1))``
of a fresh step's (:func:`progress_per_step`).

Example: R = 4 with a fixed factor; at e = 1 a step waits for the input, at e = 4 it
does not:

>>> from echoing.simulation import Scenario, simulate
>>> slow = simulate(Scenario(ratio=4.0, steps=400), factor=1.0)
>>> fast = simulate(Scenario(ratio=4.0, steps=400), factor=4.0)
>>> round(slow.seconds / fast.seconds, 1), round(fast.fresh_batches)
(3.9, 100)
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import deque
from typing import Callable, Optional, Protocol, Sequence, Union

from echoing._checks import check_bool, check_int, check_number


class Controller(Protocol):
    """What :func:`simulate` drives: :class:`echoing.EchoController` has this shape."""

    factor: float

    def observe(self, step: int, timestamp: float, fresh: int):  # pragma: no cover - a protocol
        ...


# The echo stage pulls fresh elements in micro-batches of this many, a step's worth at
# factor 1, as echoing.echo does: a controller given the fresh count takes
# elements_per_step=ELEMENTS_PER_STEP.
ELEMENTS_PER_STEP = 64

RatioSchedule = Union[float, Callable[[int], float]]


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A training loop around an echoed input pipeline, as the model runs it.

    Attributes:
      ratio: R, a number or a function of the step index (slower or faster storage).
      steps: training steps to run (``simulate(..., progress=...)`` may stop earlier).
      step_seconds: the step's own mean time.
      step_jitter: coefficient of variation of a step's time (log-normal, mean 1).
      upstream_jitter: coefficient of variation of a lump's read time.
      buffer_batches: output batches the pipeline holds between the echo stage and the step.
      upstream_batches: fresh batches the upstream's prefetch holds before the echo stage.
      lump_batches: the mean size of a read, in fresh batches (1: batch by batch).
      lump_sigma: 0 for reads of exactly ``lump_batches``; above 0, log-normal sizes of
        mean ``lump_batches`` and this sigma, rounded to whole batches (at least 1).
      pause_seconds: an unannounced pause of the loop (0: none).
      pause_every_steps: the loop pauses after every this many steps.
      pull_seconds: seconds the loop's own thread spends on each fresh batch the echo
        stage pulls, added to the next step (0: the stage pulls beside the steps, as
        ``tf.data`` does).
      steps_per_execution: steps per call of the loop's hook (Keras ``steps_per_execution``).
      warm: whether the buffers are full when training starts (False: a cold start).
      seed: seeds the jitter and the lump sizes.
      common_random_numbers: draw the steps' times and each trainer's reads from streams of
        their own, so that runs of the scenario at different factors, or under a controller,
        meet the same k-th step time and the same k-th read, and differ only by what the
        factor does. ``False`` draws everything from one stream in the order events happen,
        so a run's luck depends on that order (the law's tests were written against it).
    """

    ratio: RatioSchedule = 4.0
    steps: int = 650
    step_seconds: float = 1.0
    step_jitter: float = 0.0
    upstream_jitter: float = 0.0
    buffer_batches: int = 10
    upstream_batches: int = 1
    lump_batches: int = 1
    lump_sigma: float = 0.0
    pause_seconds: float = 0.0
    pause_every_steps: int = 100
    pull_seconds: float = 0.0
    steps_per_execution: int = 1
    warm: bool = True
    seed: int = 0
    common_random_numbers: bool = False

    def __post_init__(self):
        if not callable(self.ratio):
            check_number("ratio", self.ratio, low=0, low_open=True)
        check_int("steps", self.steps, low=1)
        check_number("step_seconds", self.step_seconds, low=0, low_open=True)
        check_number("step_jitter", self.step_jitter, low=0, high=10)
        check_number("upstream_jitter", self.upstream_jitter, low=0, high=10)
        check_int("buffer_batches", self.buffer_batches, low=1)
        check_int("upstream_batches", self.upstream_batches, low=1)
        check_int("lump_batches", self.lump_batches, low=1)
        check_number("lump_sigma", self.lump_sigma, low=0, high=5)
        check_number("pause_seconds", self.pause_seconds, low=0)
        check_int("pause_every_steps", self.pause_every_steps, low=1)
        check_number("pull_seconds", self.pull_seconds, low=0)
        check_int("steps_per_execution", self.steps_per_execution, low=1)
        check_bool("warm", self.warm)
        check_int("seed", self.seed, low=0)
        check_bool("common_random_numbers", self.common_random_numbers)

    def ratio_at(self, step: int) -> float:
        ratio = self.ratio(step) if callable(self.ratio) else self.ratio
        check_number("ratio", ratio, low=0, low_open=True)
        return float(ratio)


@dataclasses.dataclass(frozen=True)
class Run:
    """What one simulated run did.

    Attributes:
      seconds: time from the start to the end of the last step.
      step_ends: the time at the end of every step.
      factors: the factor in force (the controller's) at every step.
      batch_factors: the factor each step's batch was made at.
      ratios: R at every step.
      decisions: the controller's decisions, if it has any.
    """

    seconds: float
    step_ends: list
    factors: list
    batch_factors: list
    ratios: list
    decisions: list

    @property
    def fresh_batches(self) -> float:
        """Fresh batches the steps trained on: a batch made at factor ``e`` is ``1 / e`` fresh."""
        return sum(1 / e for e in self.batch_factors)

    def time_to_progress(self, progress: float, slope: float) -> Optional[float]:
        """Seconds until the steps' summed progress (:func:`progress_per_step`) reaches ``progress``; None if never."""
        total = 0.0
        for end, factor in zip(self.step_ends, self.batch_factors):
            total += progress_per_step(factor, slope)
            if total >= progress - 1e-9:
                return end
        return None


def progress_per_step(factor: float, slope: float) -> float:
    """A step's training progress at echo ``factor``, as a share of a fresh step's: ``1 / (1 + slope (e - 1))``.

    >>> progress_per_step(1.0, 0.19), round(progress_per_step(4.0, 0.19), 3)
    (1.0, 0.637)
    """
    return 1 / (1 + slope * (factor - 1))


def _jitter(rng: random.Random, sigma: float) -> float:
    """A log-normal factor of mean 1 and log-sigma ``sigma`` (1, and no draw, where ``sigma`` is 0)."""
    return math.exp(rng.gauss(-sigma * sigma / 2, sigma)) if sigma else 1.0


class _Pipeline:
    """The upstream and the echo stage of one scenario, stepped by event times (see the module docstring)."""

    def __init__(self, scenario: Scenario, factor: float, rng: random.Random) -> None:
        s = self.scenario = scenario
        self.rng = rng
        self.factor = factor
        self.read_sigma = math.sqrt(math.log1p(s.upstream_jitter ** 2))
        self.lump_mu = math.log(s.lump_batches) - s.lump_sigma ** 2 / 2
        self.prefetch = s.upstream_batches if s.warm else 0  # fresh batches read, not yet pulled
        self.output: deque = deque([factor] * s.buffer_batches if s.warm else [])  # factors of the batches made
        self.credit = 0.0  # output batches still to make from the micro-batch pulled last
        self.fresh = ELEMENTS_PER_STEP * math.ceil(s.buffer_batches / factor - 1e-9) if s.warm else 0
        self.reading: Optional[tuple[float, int]] = None  # (end time, size) of the read under way
        self.pulled = 0  # with pull_seconds: fresh batches pulled for the next step, counted and paid when it starts

    def jitter(self, sigma: float) -> float:
        return _jitter(self.rng, sigma)

    def move(self, now: float, steps_done: int) -> None:
        """The echo stage fills the output buffer, and the upstream starts a read if it has room."""
        s = self.scenario
        while len(self.output) < s.buffer_batches:
            if self.credit >= 1 - 1e-9:
                self.output.append(self.factor)
                self.credit -= 1
            elif self.prefetch >= 1:
                self.prefetch -= 1
                if s.pull_seconds:
                    self.pulled += 1
                else:
                    self.fresh += ELEMENTS_PER_STEP
                self.credit += self.factor  # one fresh batch makes e output batches (fractional: on average)
            else:
                break
        if self.reading is None and self.prefetch < s.upstream_batches:
            if s.lump_sigma:
                size = max(1, round(self.rng.lognormvariate(self.lump_mu, s.lump_sigma)))
            else:
                size = s.lump_batches
            seconds = size * s.ratio_at(steps_done) * s.step_seconds * self.jitter(self.read_sigma)
            self.reading = (now + seconds, size)

    def arrive(self) -> float:
        """The read under way ends; returns its end time."""
        now, size = self.reading
        self.reading = None
        self.prefetch += size
        return now


def simulate(scenario: Scenario, *, factor: float = 1.0, controller: Optional[Controller] = None,
             progress: Optional[float] = None, slope: float = 0.0) -> Run:
    """Runs ``scenario`` at a fixed ``factor``, or with ``controller`` choosing it.

    Args:
      scenario: the loop and pipeline.
      factor: the echo factor (>= 1), or the starting one (the variable's first value)
        with a controller; a warm start's buffers hold batches made at it.
      controller: anything with ``observe(step, timestamp, fresh=...)`` (returning a
        decision or ``None``) and ``factor``, as :class:`echoing.EchoController`; it is
        given the echo stage's fresh count.
      progress, slope: stop once the steps' summed progress at this ``slope`` reaches
        ``progress`` (or after ``scenario.steps``, whichever comes first).

    Returns:
      a :class:`Run`.
    """
    return simulate_in_step([scenario], factor=factor, controllers=None if controller is None else [controller],
                            progress=progress, slope=slope)[0]


def simulate_in_step(scenarios: Sequence[Scenario], *, factor: float = 1.0,
                     controllers: Optional[Sequence[Controller]] = None, pass_wait: bool = False,
                     progress: Optional[float] = None, slope: float = 0.0) -> list:
    """Runs trainers in step, one per scenario: each step starts once every trainer has a batch.

    This is synchronous data parallelism (``MultiWorkerMirroredStrategy``): each trainer
    reads and echoes its own input, and the step, whose time is the first scenario's
    (``step_seconds``, ``step_jitter``, pauses, ``steps``), waits for the slowest. Each
    trainer may have its own controller, given its own fresh count and, with
    ``pass_wait``, its loop's total wait for its own input (``input_wait``: from the end
    of a step until its own batch was there, and with ``pull_seconds`` its own pulls,
    which run in its loop's ``next``, as a loop that times ``next(iterator)`` counts them).

    Returns:
      one :class:`Run` per trainer (the same step times; each its own factors).
    """
    check_number("factor", factor, low=1)
    if not scenarios:
        raise ValueError("scenarios: expected at least one Scenario, got none")
    if controllers is not None and len(controllers) != len(scenarios):
        raise ValueError(f"controllers: expected one per scenario ({len(scenarios)}), got {len(controllers)}")
    s = scenarios[0]
    if s.common_random_numbers:
        # The k-th step's time comes from a stream of its own, and each trainer's k-th read
        # from its own: whatever the factors do, every run meets the same steps and reads.
        rngs = [random.Random(each.seed * 2 + i * 1_000_003) for i, each in enumerate(scenarios)]
        steps_rng = random.Random(s.seed * 2 + 1)
    else:
        # One trainer draws its step times and its reads from one generator, in the order
        # events happen; more trainers draw their reads apart.
        rngs = [random.Random(s.seed)] + [random.Random(each.seed * 1_000_003 + i) for i, each in
                                          enumerate(scenarios[1:], 1)]
        steps_rng = rngs[0]
    pipes = [_Pipeline(each, factor, rng) for each, rng in zip(scenarios, rngs)]
    step_sigma = math.sqrt(math.log1p(s.step_jitter ** 2))
    steps_done = 0
    stepping: Optional[tuple[float, list]] = None  # (end time, factors of its batches) of the step under way
    now = last_end = 0.0
    waits = [0.0] * len(pipes)
    waiting = [True] * len(pipes)  # for its own batch since the last step's end
    step_ends, factors, batch_factors, ratios = [], [[] for _ in pipes], [[] for _ in pipes], [[] for _ in pipes]
    summed = 0.0
    pulls_on_loop = any(pipe.scenario.pull_seconds for pipe in pipes)

    def move(now: float) -> None:
        """Everything that can happen at ``now`` without time passing."""
        nonlocal stepping
        for i, pipe in enumerate(pipes):
            pipe.move(now, steps_done)
            if waiting[i] and pipe.output:
                waits[i] += now - last_end
                waiting[i] = False
        if stepping is None and all(pipe.output for pipe in pipes):
            seconds = s.step_seconds * _jitter(steps_rng, step_sigma)
            if s.pause_seconds and (steps_done + 1) % s.pause_every_steps == 0:
                seconds += s.pause_seconds
            # A pull on the loop's thread happens in the loop's next(): it delays the step that takes its
            # batches, and the echo stage's count moves in that step (in step, the slowest trainer's delay).
            # It is part of that trainer's wait in next() too; the others wait for it in the step's
            # collective, not in their next().
            if pulls_on_loop:  # Skipped where no pull costs the loop (it would add zeros), for speed.
                seconds += max(pipe.scenario.pull_seconds * pipe.pulled for pipe in pipes)
                for i, pipe in enumerate(pipes):
                    waits[i] += pipe.scenario.pull_seconds * pipe.pulled
                    pipe.fresh += ELEMENTS_PER_STEP * pipe.pulled
                    pipe.pulled = 0
            stepping = (now + seconds, [pipe.output.popleft() for pipe in pipes])

    move(now)
    while steps_done < s.steps:
        arriving = [pipe.reading[0] for pipe in pipes if pipe.reading is not None]
        if stepping is not None and (not arriving or stepping[0] <= min(arriving)):
            now, made_at = stepping
            stepping = None
            steps_done += 1
            last_end = now
            waiting = [True] * len(pipes)
            step_ends.append(now)
            for i, pipe in enumerate(pipes):
                factors[i].append(pipe.factor)
                batch_factors[i].append(made_at[i])
                ratios[i].append(pipe.scenario.ratio_at(steps_done - 1))
            summed += sum(progress_per_step(e, slope) for e in made_at) / len(made_at) if progress is not None else 0.0
            if controllers is not None and (steps_done % s.steps_per_execution == 0):
                for i, (pipe, controller) in enumerate(zip(pipes, controllers)):
                    told = {"fresh": pipe.fresh}
                    if pass_wait:
                        told["input_wait"] = waits[i]
                    if controller.observe(steps_done - 1, now, **told) is not None:
                        pipe.factor = float(controller.factor)
            if progress is not None and summed >= progress - 1e-9:
                break
        else:
            now = min((pipe for pipe in pipes if pipe.reading is not None), key=lambda pipe: pipe.reading[0]).arrive()
        move(now)
    runs = []
    for i in range(len(pipes)):
        controller = controllers[i] if controllers is not None else None
        decisions = list(getattr(controller, "decisions", [])) if controller is not None else []
        runs.append(Run(seconds=now, step_ends=step_ends, factors=factors[i], batch_factors=batch_factors[i],
                        ratios=ratios[i], decisions=decisions))
    return runs
