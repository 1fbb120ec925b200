"""The settings both tf.data service experiments share (in-process servers and server processes).

>>> settings = ServiceSettings()
>>> settings.ratio, settings.bound(workers=2, factor=2.0)
(4.0, 50.0)
"""

from __future__ import annotations

import dataclasses

from benchmarks.lib import results_io


@dataclasses.dataclass(frozen=True)
class ServiceSettings(results_io.Record):
    """Settings of a tf.data service benchmark.

    Attributes:
      worker_counts: tf.data service workers to try.
      factors: echo factors on the trainer (1 is no echo).
      worker_rate: examples per second one worker's read is throttled to (it delivers
        somewhat less: the model uses the measured rate).
      batch_size: examples per training step.
      step_seconds: the modelled training step.
      warmup_seconds: time not measured after the first step (buffers filling).
      seconds: time measured per configuration.
      repeats: rounds over all configurations (interleaved, so that noise hits all alike).
    """

    worker_counts: tuple[int, ...] = (1, 2, 4)
    factors: tuple[float, ...] = (1.0, 2.0, 4.0)
    worker_rate: float = 400.0
    batch_size: int = 32
    step_seconds: float = 0.02
    warmup_seconds: float = 1.0
    seconds: float = 4.0
    repeats: int = 3

    @property
    def ratio(self) -> float:
        """R per worker: the step's rate over one worker's batches a second."""
        return self.batch_size / self.worker_rate / self.step_seconds

    def bound(self, workers: int, factor: float) -> float:
        """The step rate the model predicts: the workers' reads times e, capped by the step."""
        return min(workers * self.worker_rate * factor / self.batch_size, 1 / self.step_seconds)
