"""A Keras callback that sets the echo factor during ``fit`` from the step rate it measures.

:class:`AutoEcho` is a thin adapter: it timestamps the end of every training batch from
the callback's batch hooks (the model and its step are untouched), reads the echo stage's
fresh count (``stats``, ``elements_per_step``: both required), hands both to an
:class:`echoing.EchoController`, and assigns the controller's factor to the
``tf.Variable`` the pipeline's :func:`echoing.echo` stage reads. The control law (the
step's own rate at ``max_factor``, R where the input cannot keep up, e held at about R,
raised when the input falls behind, checked below now and then) is stated in
:mod:`echoing.controller`; what its measuring costs is in ``docs/choosing.md``.

Example, with a step of about 5 ms and an input pipeline throttled to one batch per 20 ms
(R is about 4; the test suite checks the settled factor against that):

>>> import time, keras, numpy as np, tensorflow as tf, echoing
>>> def sleep(seconds):  # stands in for slow storage, and for an accelerator's step
...     return tf.ensure_shape(tf.numpy_function(lambda: np.float32(time.sleep(seconds) or 0), [], tf.float32), [])
>>> factor = tf.Variable(1.0, dtype=tf.float64)
>>> stats = echoing.EchoStats()
>>> ds = (tf.data.Dataset.range(10**9).batch(8).map(lambda b: tf.cast(b, tf.float32) + sleep(0.020)).unbatch()
...       .apply(echoing.echo(factor, seed=0, stats=stats)).batch(8).prefetch(2))
>>> model = keras.Sequential([keras.Input(()), keras.layers.Lambda(
...     lambda x: x + sleep(0.005))])
>>> model.compile(loss=lambda y, p: tf.reduce_mean(p) * 0.0)
>>> auto = echoing.AutoEcho(factor, max_factor=8.0, stats=stats, elements_per_step=8, verbose=0)
>>> history = model.fit(ds.map(lambda x: (x, x)), steps_per_epoch=80, epochs=8, callbacks=[auto], verbose=0)
>>> sorted(k for k in history.history if k != "loss")
['echo_factor', 'fresh_examples', 'steps_per_second']
>>> auto.decisions[0].phase.value, "hold" in [d.phase for d in auto.decisions]
('open', True)
>>> 1.5 < float(factor.numpy()) <= 8.0  # doctest: +SKIP
True
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import time
import warnings
from typing import Optional

import keras
import tensorflow as tf

from echoing.controller import EchoController, EchoDecision
from echoing.stats import EchoStats


class AutoEcho(keras.callbacks.Callback):
    """Sets a ``tf.Variable`` echo factor to about R, measured under load during ``fit``.

    Build the pipeline with the variable as its factor, then pass the callback to ``fit``:

    .. code-block:: python

        factor = tf.Variable(1.0, dtype=tf.float64)
        stats = echoing.EchoStats()
        ds = upstream.apply(echoing.echo(factor, shuffle_buffer_size=1024, seed=0, stats=stats))
        ds = ds.batch(128).prefetch(2)
        auto = echoing.AutoEcho(factor, max_factor=8.0, stats=stats, elements_per_step=128)
        model.fit(ds, steps_per_epoch=500, epochs=10, callbacks=[auto])

    What it measures: the seconds between the ends of consecutive training batches, from
    ``on_train_batch_end``, summed over windows of at least 8 steps until a reading can
    tell whether the input keeps up. The time across an epoch boundary
    (evaluation, a new iterator) is never counted. From ``stats`` and
    ``elements_per_step`` (the batch size when the stage echoes examples, 1 when it echoes
    batches) it reads ``stats.fresh`` at every step: how fast the input delivers. With it
    a lower factor shows before the buffers drain, so a check need not make a step wait.
    Both are required: a Keras callback never sees the batches, so it cannot find the
    batch size itself.

    What it sets: ``factor``, to ``max_factor`` for the opening, then halved while the
    input keeps up, then ``min(R * headroom, max_factor)``, or exactly 1 when training is
    not input-bound. Where steps still wait there (lumpy input), it tries raises of 1.25x
    and keeps each that trains faster by the objective, the progress per second
    ``T(e) / (1 + copy_cost (e - 1))`` (:func:`echoing.fit_copy_cost` fits ``copy_cost``
    from a sample run; 0.13 by default). It raises the factor when the input falls behind
    and checks every ``check_every_steps`` whether R has fallen.

    What it logs:

    * ``echo_factor``, ``steps_per_second`` (over the epoch's training steps, from the end
      of its first step to the end of its last) and ``fresh_examples``
      (``stats.fresh`` so far) in ``history.history`` at each epoch end;
    * every decision in :attr:`decisions` (:class:`echoing.EchoDecision`: step, factor,
      the measured rates and the reason);
    * with ``log_dir``, TensorBoard scalars ``echo/factor``, ``echo/ratio`` (at each
      decision), ``echo/steps_per_second`` and ``echo/fresh_examples`` (at each window),
      in ``log_dir/train`` beside ``keras.callbacks.TensorBoard``'s;
    * with ``verbose=1``, one sentence per decision.

    Backends: Keras 3's TensorFlow, JAX and PyTorch backends (``tests/test_keras_backends.py``
    runs it on each). Before it calls a callback that is not marked ``async_safe`` (this
    one is not), Keras turns the step's logs into Python numbers, which waits for the
    step: under JAX's asynchronous dispatch too, the timestamps come after the step ran.

    Epochs: with a ``tf.Variable`` factor the echoed dataset's cardinality is unknown.
    Over such a dataset without ``steps_per_epoch``, Keras 3 runs the first epoch until the
    dataset is exhausted and takes its number of batches as every later epoch's length:
    an epoch that a larger factor makes longer is cut there and its remaining batches are
    dropped unseen (no warning from Keras), and a shorter one ends early ("Your input ran
    out of data"). AutoEcho warns when ``fit`` is set up this way. Use an infinite dataset
    (``repeat()``) with ``fit(steps_per_epoch=...)``: one iterator then runs through all
    epochs, each a fixed number of steps, and no batch is dropped.

    Args:
      factor: the scalar ``tf.Variable`` of floating dtype that the pipeline's
        :func:`echoing.echo` stage reads, or the :class:`echoing.grain.Factor` of an
        :func:`echoing.grain.echo` stage (a grain pipeline, through Keras's grain adapter).
      max_factor: the largest factor it sets, and the one it opens at (>= 1).
      stats: the :class:`echoing.EchoStats` (or :class:`echoing.grain.EchoStats`) of that
        echo stage (required): the controller reads its fresh count, and it is logged.
      elements_per_step: (required) the fresh elements one step reads without echo: the
        batch size when the stage echoes examples, 1 when it echoes batches.
      log_dir: a TensorBoard directory, or ``None``.
      verbose: 1 prints each decision as one sentence; 0 is silent.
      **settings: any other field of :class:`echoing.ControllerSettings`
        (``copy_cost``, ``initial_factor``, ``headroom``, ``check_every_steps``,
        ``check_divisor``, ``tolerance``).

    Attributes:
      controller: the :class:`echoing.EchoController` that decides.
      decisions: every decision so far (the controller's).

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.
    """

    def __init__(self, factor: tf.Variable, *, max_factor: float = 8.0, stats: Optional[EchoStats] = None,
                 log_dir: Optional[str] = None, verbose: int = 1, **settings):
        super().__init__()
        grain_stage = sys.modules.get("echoing.grain")  # Only loaded where grain is installed and used.
        self._grain = grain_stage is not None and isinstance(factor, grain_stage.Factor)
        if self._grain:
            if stats is not None and not isinstance(stats, grain_stage.EchoStats):
                raise TypeError(f"stats: with an echoing.grain.Factor, expected the echo stage's echoing.grain.EchoStats, "
                                f"got {type(stats).__name__}: {stats!r:.200}")
        else:
            if not isinstance(factor, tf.Variable):
                raise TypeError(
                    f"factor: expected the tf.Variable that the pipeline's echoing.echo stage reads (or the "
                    f"echoing.grain.Factor of an echoing.grain.echo stage), got {type(factor).__name__}: {factor!r:.200}; "
                    "create it as tf.Variable(1.0, dtype=tf.float64) and pass it to echoing.echo too")
            if not factor.dtype.is_floating:
                raise TypeError(f"factor: the tf.Variable must have a floating dtype, got {factor.dtype.name}; "
                                "create it as tf.Variable(1.0, dtype=tf.float64)")
            if factor.shape.rank != 0:
                raise ValueError(f"factor: the tf.Variable must be a scalar, got shape {factor.shape}")
            if stats is not None and not isinstance(stats, EchoStats):
                raise TypeError(f"stats: expected an echoing.EchoStats, got {type(stats).__name__}: {stats!r:.200}")
        if log_dir is not None and not isinstance(log_dir, (str, os.PathLike)):
            raise TypeError(f"log_dir: expected a directory path or None, got {type(log_dir).__name__}: {log_dir!r:.200}")
        if isinstance(verbose, bool) or not isinstance(verbose, numbers.Integral) or verbose < 0:
            raise ValueError(f"verbose: expected 0 or 1, got {verbose!r}")
        self.factor = factor
        self.stats = stats
        self.log_dir = None if log_dir is None else os.fspath(log_dir)
        self.verbose = int(verbose)
        if stats is None:
            raise ValueError("stats: AutoEcho reads the echo stage's fresh count; pass the EchoStats given to the "
                             "stage (echoing.echo(factor, stats=stats)); got None")
        self.controller = EchoController(max_factor=max_factor, verbose=self.verbose, **settings)
        self._step = 0
        self._last_batch = -1
        self._epoch_first = self._epoch_last = None
        self._writer = None
        self._windows_written = 0

    @property
    def decisions(self) -> list[EchoDecision]:
        return self.controller.decisions

    def on_train_begin(self, logs=None):
        self.controller.interrupt()
        params = self.params or {}
        if params.get("steps") is None and (params.get("epochs") or 1) > 1:
            warnings.warn(
                "AutoEcho: fit has no steps_per_epoch and the dataset's length is unknown (a tf.Variable echo factor "
                "makes it so). Keras takes the first epoch's number of batches as every later epoch's length: an epoch "
                "that the echo factor makes longer is cut there and its remaining batches are dropped unseen, and a "
                "shorter one ends early. Pass dataset.repeat() and fit(steps_per_epoch=...) instead.",
                UserWarning, stacklevel=2)

    def on_epoch_begin(self, epoch, logs=None):
        # The gap since the last batch (evaluation, a new iterator) is not a training step.
        self.controller.interrupt()
        self._last_batch = -1
        self._epoch_first = None  # (step, time) at the end of the epoch's first batch
        self._epoch_last = None

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        # batch is the index of the last step that ran; with steps_per_execution > 1 one
        # call covers several steps.
        self._step += max(1, batch - self._last_batch)
        self._last_batch = batch
        if self._epoch_first is None:
            self._epoch_first = (self._step, now)
        self._epoch_last = (self._step, now)
        decision = self.controller.observe(self._step, now, fresh=self._fresh())
        if decision is not None:
            self.factor.assign(decision.factor)
            self._write_decision(decision)
        self._write_windows()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        # History (added after user callbacks) records these.
        logs["echo_factor"] = float(self.factor.value if self._grain else self.factor.numpy())
        logs["steps_per_second"] = self._epoch_rate()
        logs["fresh_examples"] = self._fresh()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.flush()

    def _fresh(self) -> int:
        return int(self.stats.fresh) if self._grain else int(self.stats.fresh.numpy())

    def _epoch_rate(self) -> float:
        if self._epoch_first is None or self._epoch_last[0] == self._epoch_first[0]:
            return math.nan
        (first_step, first_time), (last_step, last_time) = self._epoch_first, self._epoch_last
        return (last_step - first_step) / (last_time - first_time) if last_time > first_time else math.nan

    def _summary_writer(self):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, "train"))
        return self._writer

    def _write_decision(self, decision: EchoDecision) -> None:
        if self.log_dir is None:
            return
        with self._summary_writer().as_default(step=decision.step):
            tf.summary.scalar("echo/factor", decision.factor)
            if math.isfinite(decision.ratio):
                tf.summary.scalar("echo/ratio", decision.ratio)

    def _write_windows(self) -> None:
        rates = self.controller.window_rates
        if self.log_dir is None or self._windows_written == len(rates):
            return
        with self._summary_writer().as_default():
            for step, rate in rates[self._windows_written:]:
                tf.summary.scalar("echo/steps_per_second", rate, step=step)
                tf.summary.scalar("echo/fresh_examples", self._fresh(), step=step)
        self._windows_written = len(rates)
