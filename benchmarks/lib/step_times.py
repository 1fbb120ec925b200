"""Timing a Keras ``fit`` from outside the model: step end times, and the rate between two of them.

A part of the benchmarks' library (``critical_batch``, ``xla_check`` and the tests' ``tests/sleep_loops.py`` use
it). Example:

>>> times = [0.0, 0.1, 0.2, 0.4]
>>> round(rate_between(times, 1), 2)  # steps 2 and 3 in 0.3 seconds
6.67
"""

from __future__ import annotations

import time

import keras


class StepTimes(keras.callbacks.Callback):
    """Records ``time.perf_counter()`` at the end of every training batch."""

    def __init__(self):
        super().__init__()
        self.times: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter())


def rate_between(times: list[float], first: int) -> float:
    """Steps per second from the end of step ``first`` to the end of the last step."""
    return (len(times) - 1 - first) / (times[-1] - times[first])
