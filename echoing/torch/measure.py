"""Measuring R for a PyTorch loader and training step: the two halves timed apart.

:func:`measure_ratio` does for a ``DataLoader`` (or any iterable of batches) and a step
function what :func:`echoing.measure_ratio` does for a ``tf.data.Dataset``: it times the
loader with training idle, then the step on batches already in memory, and returns the
same :class:`echoing.RatioMeasurement`, so :func:`echoing.recommend` gives the same
verdicts on it.

>>> import time, torch
>>> from echoing import torch as echo_torch
>>> class Slow(torch.utils.data.IterableDataset):
...     def __iter__(self):
...         for i in range(1000):
...             time.sleep(0.008)  # 8 ms a batch to read
...             yield torch.full((4,), float(i))
>>> loader = torch.utils.data.DataLoader(Slow(), batch_size=None)
>>> m = echo_torch.measure_ratio(loader, lambda batch: time.sleep(0.001), batches=10, repeats=3)
>>> m.bottleneck.startswith("the input pipeline")  # R is about 8
True
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Iterable
from typing import Any, Callable, Sequence

import torch

from echoing._checks import check_int
from echoing.measure import RatioMeasurement, time_steps

__all__ = ["measure_ratio"]


def measure_ratio(loader: Iterable, train_step: Callable[[Any], Any], *, batches: int = 20, warmup: int = 3,
                  repeats: int = 5, restore: Sequence[Any] = ()) -> RatioMeasurement:
    """Measures the upstream and downstream times of a PyTorch training set-up, and R.

    Upstream: ``batches`` batches drawn from one pass over ``loader`` with no training
    running (its workers, decoding and augmentation included). Downstream: ``batches``
    calls of ``train_step`` on batches already in memory (the first ``min(batches, 8)``
    the loader yielded, cycled), so that no input work is included. Each is warmed up with
    ``warmup`` batches or steps (worker start-up, the first kernels) and timed ``repeats``
    times; medians are reported. Where CUDA is initialized, each timed repeat of the step
    ends with ``torch.cuda.synchronize()``, so that queued kernels are counted.

    The caveat of :func:`echoing.measure_ratio` holds: on a CPU-only machine the loader's
    workers and the step share the cores, and R under load can differ from R apart; the
    Lightning callback :class:`echoing.torch.lightning.AutoEcho` or an
    :class:`echoing.EchoController` in your loop measures it under load.

    Args:
      loader: a ``DataLoader``, ``StatefulDataLoader``, ``nodes.Loader`` or any iterable of
        batches; one pass must yield at least ``warmup + repeats * batches`` of them.
      train_step: a callable taking one batch and running one training step (forward,
        backward, optimizer step).
      batches: batches or steps per timed repeat (>= 1).
      warmup: untimed batches or steps before timing (>= 0).
      repeats: timed repeats (>= 1); the median is reported.
      restore: objects with ``state_dict()`` and ``load_state_dict()`` (the model, its
        optimizer, a scheduler) whose state is put back after the measurement, so that
        measuring does not train the model. Without them, the steps taken stay taken.

    Returns:
      An :class:`echoing.RatioMeasurement`.

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it, or a
        loader that runs out of batches.
    """
    check_int("batches", batches, low=1)
    check_int("warmup", warmup, low=0)
    check_int("repeats", repeats, low=1)
    if not isinstance(loader, Iterable):
        raise TypeError(f"loader: expected an iterable of batches (a DataLoader, a StatefulDataLoader, ...), got "
                        f"{type(loader).__name__}: {loader!r:.200}")
    if not callable(train_step):
        raise TypeError(f"train_step: expected a callable taking one batch, got {type(train_step).__name__}: "
                        f"{train_step!r:.200}")
    if isinstance(restore, (str, bytes)) or not isinstance(restore, Sequence):
        raise TypeError(f"restore: expected a list of objects with state_dict() and load_state_dict(), got "
                        f"{type(restore).__name__}: {restore!r:.200}")
    for held in restore:
        if not (callable(getattr(held, "state_dict", None)) and callable(getattr(held, "load_state_dict", None))):
            raise TypeError(f"restore: expected objects with state_dict() and load_state_dict(), got "
                            f"{type(held).__name__}: {held!r:.200}")

    needed = warmup + repeats * batches
    kept = min(batches, 8)
    in_memory = []
    iterator = iter(loader)
    try:
        for _ in range(warmup):
            batch = next(iterator)
            if len(in_memory) < kept:
                in_memory.append(batch)
        upstream = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(batches):
                batch = next(iterator)
                if len(in_memory) < kept:
                    in_memory.append(batch)
            upstream.append((time.perf_counter() - start) / batches)
    except StopIteration:
        raise ValueError(f"loader: ran out of batches; one pass must yield at least {needed} (warmup + repeats * "
                         f"batches); lower batches or repeats, or measure over a longer pass") from None

    synchronize = torch.cuda.synchronize if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    saved = [copy.deepcopy(held.state_dict()) for held in restore]
    try:
        downstream = time_steps(train_step, in_memory, warmup=warmup, batches=batches, repeats=repeats,
                                after_repeat=synchronize)
    finally:
        for held, state in zip(restore, saved):
            held.load_state_dict(state)
    return RatioMeasurement(statistics.median(upstream), statistics.median(downstream), tuple(upstream),
                            tuple(downstream))
