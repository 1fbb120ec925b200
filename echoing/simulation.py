"""A deterministic model of an echoed input pipeline feeding a training loop; no TensorFlow.

The model is the one the echo controller is designed against (:mod:`echoing.controller`):

* a **producer** (the input pipeline up to and including the echo stage) makes batches
  one at a time; at echo factor ``e`` a batch takes ``jitter / (e * u)`` seconds, where
  ``u`` is the rate at which the upstream delivers fresh batches and ``jitter`` a
  log-normal factor of mean 1 (0 jitter: every batch takes exactly ``1 / (e * u)``);
  with ``burst_batches`` above 1 it makes them in bursts (a text pipeline's buckets
  filling, a shuffle buffer's refill): ``k`` batches at once, in ``k`` batches' time,
  ``k`` uniform in ``1 .. 2 * burst_batches - 1``;
* with ``lump_batches`` set, the upstream delivers fresh input in lumps (a long document
  packed into many rows): a lump of ``k`` fresh batches, ``k`` uniform in
  ``1 .. 2 * lump_batches - 1``, is read whole, in ``k`` batches' time, before any of it
  is handed over, and then lasts ``k * e`` steps with no read at all. The mean rate is
  still ``u``, but while a lump lasts the input keeps up at any factor, and while the
  next one is read no factor can: lumpy input, as the text pipeline's; with
  ``lump_sigma`` above 0 the sizes are log-normal instead, of mean ``lump_batches``: a
  few lumps are many times the mean (whole files of very different lengths: the
  embedded text's documents are 1.9 batches of 32 rows at the median, 4.0 in the
  mean and 26 at the 99th percentile, which is log-normal with sigma 1.2);
* a **buffer** of ``buffer_batches`` batches between them (the prefetch and whatever the
  pipeline holds after the echo stage); the producer waits while it is full;
* a **consumer** (the training step) takes one batch per step and ``1 / s`` seconds per
  step; it waits while the buffer is empty.

``R = s / u``. A controller sees only what a training loop sees: the step index and the
time at the end of each step. When it returns a decision, the new factor applies to the
batches the producer starts from then on; batches already in the buffer keep the factor
they were made at, which is what makes a lower factor show in the step rate only once the
buffer has drained.

Each step's batch records the factor it was made at, so a run reports both time and the
fresh data it read (a batch made at factor ``e`` is ``1 / e`` fresh).

Example: R = 4 with a fixed factor; at e = 1 a step waits for the input, at e = 4 it
does not (the buffer starts full, as after a pipeline's warm-up):

>>> from echoing.simulation import Scenario, simulate
>>> slow = simulate(Scenario(ratio=4.0, steps=200), factor=1.0)
>>> fast = simulate(Scenario(ratio=4.0, steps=200), factor=4.0)
>>> round(slow.seconds / fast.seconds, 1), round(fast.fresh_batches, 1)
(3.8, 50.0)
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import deque
from typing import Callable, Optional, Protocol, Union

from echoing._checks import check_int, check_number


class Controller(Protocol):
    """What :func:`simulate` drives: :class:`echoing.EchoController` has this shape."""

    factor: float

    def observe(self, step: int, timestamp: float, fresh: Optional[int] = None):  # pragma: no cover - a protocol
        ...


# The simulated echo stage pulls fresh elements in micro-batches of this many, as
# echoing.echo does, and a step reads this many at factor 1: a controller given the fresh
# count takes elements_per_step=ELEMENTS_PER_STEP.
ELEMENTS_PER_STEP = 64


RatioSchedule = Union[float, Callable[[int], float]]


@dataclasses.dataclass(frozen=True)
class Scenario:
    """An input pipeline and a training step, as the simulation models them.

    Attributes:
      ratio: R, either a number or a function of the step index (R may change as
        training runs: slower or faster storage).
      steps: training steps to run.
      step_seconds: ``1 / s``, the training step's own time.
      buffer_batches: batches the pipeline holds between the echo stage and the step.
      jitter: coefficient of variation of a batch's production time (log-normal, mean 1);
        0 for none.
      stall_probability: chance that a batch stalls (a long document, a slow read), on
        top of the jitter; 0 for none.
      stall_batches: a stalled batch takes this many batches' production time.
      burst_batches: the mean number of batches made at once (1: one at a time).
      lump_batches: the mean size of the upstream's lumps of fresh input, in fresh
        batches (``None``: no lumps, fresh input comes evenly).
      lump_sigma: 0 for lump sizes uniform in ``1 .. 2 * lump_batches - 1``; above 0,
        log-normal of mean ``lump_batches`` with this sigma (heavy-tailed).
      lump_buffer: 0 hands over each lump as it is read; above 0, lumps are read into a
        shuffle buffer of this many (full at the start) and a random one of them is handed
        over each time one is read, as a document shuffle does: the wait is the lump
        read's, the flood another lump's, so a long wait can hand over little and a short
        one a lot.
      lump_max_batches: ``None`` for whole lumps; else a lump above this many batches is
        split into equal records of at most this many, read one after another, each its
        own lump (the text pipeline's ``max_record_bytes``).
      upstream_batches: 0 for none; above 0, the upstream holds this many fresh batches
        ahead of the echo stage (a shuffle buffer, a prefetch after the read): the read
        fills it at ``u`` while it has room, and the echo stage takes what it needs from
        it at once while it holds any, waiting for the read only once it is empty. So
        just after the factor falls the echo stage pulls faster than ``u`` until the
        stock is gone, and its fresh count runs ahead of the input's rate. Not with
        jitter, stalls, bursts or lumps.
      start_full: whether the buffer is full when training starts (after a warm-up, or
        tracing the step, it is); the upstream's stock too.
      seed: seeds the jitter and the stalls.
    """

    ratio: RatioSchedule = 4.0
    steps: int = 650
    step_seconds: float = 1.0
    buffer_batches: int = 10
    jitter: float = 0.0
    stall_probability: float = 0.0
    stall_batches: float = 10.0
    burst_batches: int = 1
    lump_batches: Optional[int] = None
    lump_sigma: float = 0.0
    lump_buffer: int = 0
    lump_max_batches: Optional[float] = None
    upstream_batches: int = 0
    start_full: bool = True
    seed: int = 0

    def __post_init__(self):
        if not callable(self.ratio):
            check_number("ratio", self.ratio, low=0, low_open=True)
        check_number("step_seconds", self.step_seconds, low=0, low_open=True)
        check_int("steps", self.steps, low=1)
        check_int("buffer_batches", self.buffer_batches, low=1)
        check_int("burst_batches", self.burst_batches, low=1)
        check_int("lump_batches", self.lump_batches, low=1, none_ok=True)
        check_number("lump_sigma", self.lump_sigma, low=0, high=5)
        check_int("lump_buffer", self.lump_buffer, low=0)
        if self.lump_max_batches is not None:
            check_number("lump_max_batches", self.lump_max_batches, low=0, low_open=True)
        if self.lump_max_batches is not None and self.lump_batches is None:
            raise ValueError(f"lump_max_batches: needs lump_batches, got lump_max_batches={self.lump_max_batches!r} "
                             "with lump_batches=None")
        if self.lump_buffer and self.lump_batches is None:
            raise ValueError(f"lump_buffer: needs lump_batches, got lump_buffer={self.lump_buffer!r} with lump_batches=None")
        if self.lump_sigma and self.lump_batches is None:
            raise ValueError(f"lump_sigma: needs lump_batches, got lump_sigma={self.lump_sigma!r} with lump_batches=None")
        check_int("upstream_batches", self.upstream_batches, low=0)
        if self.upstream_batches and (self.jitter or self.stall_probability or self.burst_batches > 1
                                      or self.lump_batches is not None):
            raise ValueError(f"upstream_batches: models smooth input only; got upstream_batches="
                             f"{self.upstream_batches!r} with jitter, stalls, bursts or lumps")
        check_number("jitter", self.jitter, low=0, high=10, high_open=True)  # A coefficient of variation.
        check_number("stall_probability", self.stall_probability, low=0, high=1, high_open=True)
        check_number("stall_batches", self.stall_batches, low=0, low_open=True)

    def ratio_at(self, step: int) -> float:
        ratio = self.ratio(step) if callable(self.ratio) else self.ratio
        check_number("ratio", ratio, low=0, low_open=True)
        return float(ratio)


@dataclasses.dataclass(frozen=True)
class Run:
    """What one simulated run did.

    Attributes:
      seconds: time from the first step's start to the last step's end.
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
        """Fresh batches read: a batch made at factor ``e`` is ``1 / e`` fresh."""
        return sum(1 / e for e in self.batch_factors)

    @property
    def echoed_share(self) -> float:
        """The share of steps' data that was a repeat: 0 without echo."""
        return 1 - self.fresh_batches / len(self.batch_factors)


def simulate(scenario: Scenario, *, factor: float = 1.0, controller: Optional[Controller] = None,
             count_fresh: bool = False) -> Run:
    """Runs ``scenario`` at a fixed ``factor``, or with ``controller`` choosing it.

    Args:
      scenario: the pipeline and step.
      factor: the echo factor (>= 1), or the starting one with a controller.
      controller: anything with ``observe(step, timestamp)`` (returning a decision or
        ``None``) and ``factor``, as :class:`echoing.EchoController`.
      count_fresh: also pass the echo stage's fresh count, ``observe(step, timestamp,
        fresh=...)``: the fresh elements it has pulled, in micro-batches of
        :data:`ELEMENTS_PER_STEP` (a batch made at factor ``e`` reads ``1 / e`` of one),
        counted when the batch is made, as :class:`echoing.EchoStats` counts.

    Returns:
      a :class:`Run`.
    """
    check_number("factor", factor, low=1)
    rng = random.Random(scenario.seed)
    sigma = math.sqrt(math.log1p(scenario.jitter ** 2))
    lump_sigma2 = scenario.lump_sigma ** 2

    burst_left = 0  # batches of the current burst still to hand over, each at once
    consumed = lumps_read = 0.0  # fresh batches taken by the echo stage, and handed over in lumps

    pieces: list = []  # the rest of a lump split at lump_max_batches, read next

    def draw_lump() -> float:
        if pieces:
            return pieces.pop()
        if scenario.lump_sigma:
            lump = rng.lognormvariate(math.log(scenario.lump_batches) - lump_sigma2 / 2, scenario.lump_sigma)
        else:
            lump = rng.randint(1, 2 * scenario.lump_batches - 1)
        if scenario.lump_max_batches is not None and lump > scenario.lump_max_batches:
            # Split into equal records of at most lump_max_batches, each read on its own.
            count = math.ceil(lump / scenario.lump_max_batches)
            pieces.extend([lump / count] * (count - 1))
            lump /= count
        return lump

    # A shuffle buffer of whole lumps, full at the start (the pipeline's warm-up filled it).
    held_lumps = [draw_lump() for _ in range(scenario.lump_buffer)] if scenario.lump_batches else []

    # The upstream's stock of fresh batches, and the time up to which the read has filled it.
    stock = float(scenario.upstream_batches) if scenario.start_full else 0.0
    stocked_until = 0.0

    def from_stock(step: int, e: float, start: float) -> float:
        """Seconds to make a batch at ``e`` from ``start``: none while the stock holds 1 / e."""
        nonlocal stock, stocked_until
        read_rate = 1 / (scenario.step_seconds * scenario.ratio_at(step))  # fresh batches per second
        stock = min(float(scenario.upstream_batches), stock + (start - stocked_until) * read_rate)
        stocked_until = start
        if stock >= 1 / e - 1e-12:
            stock -= 1 / e
            return 0.0
        seconds = (1 / e - stock) / read_rate
        stock, stocked_until = 0.0, start + seconds
        return seconds

    def production_seconds(step: int, e: float, start: float) -> float:
        nonlocal burst_left, consumed, lumps_read
        if scenario.upstream_batches:
            return from_stock(step, e, start)
        if burst_left:
            burst_left -= 1
            return 0.0
        size = rng.randint(1, 2 * scenario.burst_batches - 1) if scenario.burst_batches > 1 else 1
        burst_left = size - 1
        reads = size / e  # fresh batches read for this batch (or burst)
        if scenario.lump_batches is not None:
            consumed, reads = consumed + size / e, 0.0
            while consumed > lumps_read + 1e-9:  # The next lump is read whole first.
                lump = draw_lump()
                reads += lump
                if held_lumps:  # Read into the shuffle buffer; a random lump of it is handed over.
                    held_lumps.append(lump)
                    lump = held_lumps.pop(rng.randrange(len(held_lumps)))
                lumps_read += lump
        seconds = reads * scenario.step_seconds * scenario.ratio_at(step)  # a read of a batch takes 1 / u = R / s
        if sigma:
            seconds *= math.exp(rng.gauss(-sigma * sigma / 2, sigma))
        if scenario.stall_probability and rng.random() < scenario.stall_probability:
            seconds += scenario.stall_batches * scenario.step_seconds * scenario.ratio_at(step)
        return seconds

    capacity = scenario.buffer_batches
    buffer: deque = deque([factor] * capacity if scenario.start_full else [])
    # The batch in production: (finish time, its factor), or None while the buffer is full.
    making = None if len(buffer) == capacity else (production_seconds(0, factor, 0.0), factor)
    now, step_ends, factors, batch_factors, ratios = 0.0, [], [], [], []
    fresh_batches = 0.0  # made since the start (what the batches in the buffer at the start read is not counted)
    for step in range(scenario.steps):
        # The producer runs up to now.
        while making is not None and making[0] <= now:
            done, made_at = making
            buffer.append(made_at)
            fresh_batches += 1 / made_at
            making = None if len(buffer) == capacity else (done + production_seconds(step, factor, done), factor)
        if not buffer:  # The step waits for the input.
            done, made_at = making
            now = done
            buffer.append(made_at)
            fresh_batches += 1 / made_at
            making = (done + production_seconds(step, factor, done), factor)
        batch_factors.append(buffer.popleft())
        if making is None:  # A slot is free again.
            making = (now + production_seconds(step, factor, now), factor)
        now += scenario.step_seconds
        step_ends.append(now)
        factors.append(factor)
        ratios.append(scenario.ratio_at(step))
        if controller is not None:
            # A micro-batch is counted whole when its first copy is made.
            fresh = {"fresh": ELEMENTS_PER_STEP * math.ceil(fresh_batches - 1e-9)} if count_fresh else {}
            if controller.observe(step, now, **fresh) is not None:
                factor = float(controller.factor)
    decisions = list(getattr(controller, "decisions", [])) if controller is not None else []
    return Run(seconds=now, step_ends=step_ends, factors=factors, batch_factors=batch_factors, ratios=ratios,
               decisions=decisions)
