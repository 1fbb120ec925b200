"""A Keras callback that measures the gradient noise scale during ``fit``, on the training batches.

Every ``every_n_steps`` steps, ``fit`` runs a second training function whose step first
splits its batch into micro-batches and measures the gradient norms
(:func:`echoing.gradient_norms.microbatch_gradient_norms`) on the weights it is about to
update, then trains exactly as the usual step does; the other steps run the usual
function untouched. The measurement runs on the
side (stateless forward passes, no optimizer), so the weights and optimizer state after a
run are the same as without the callback; it costs about one more forward and backward
pass over the batch per measurement.

Example:

>>> import keras, numpy as np
>>> from echoing import NoiseScaleCallback
>>> rng = np.random.default_rng(0)
>>> x = rng.normal(size=(512, 4)).astype("float32")
>>> y = (x[:, 0] + 0.5 * rng.normal(size=512) > 0).astype("int32")
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
>>> model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
>>> callback = NoiseScaleCallback(every_n_steps=2, num_microbatches=4, verbose=0)
>>> history = model.fit(x, y, batch_size=64, epochs=2, callbacks=[callback], verbose=0)
>>> len(callback.measurements), sorted(k for k in history.history if "noise" in k)
(8, ['batch_over_noise_scale', 'noise_scale', 'noise_scale_smoothed'])
>>> callback.describe()  # doctest: +SKIP
'noise-dominated: B = 64 is 0.21x the noise scale B_simple = 300; ...'
"""

from __future__ import annotations

import math
import os
from typing import Optional

import keras
import tensorflow as tf

from echoing._checks import check_int
from echoing.gradient_norms import SUPPORTED_BACKENDS, microbatch_gradient_norms, stateless_microbatch_gradient_norms
from echoing.noise_scale import GradientNorms, NoiseScale, NoiseScaleEstimator


class NoiseScaleCallback(keras.callbacks.Callback):
    """Measures ``B_simple`` every N training steps of ``fit``; logs it to the history and TensorBoard.

    Logged to ``history.history`` at the end of each epoch (latest values):
    ``noise_scale`` (the latest raw ``B_simple``), ``noise_scale_smoothed`` and
    ``batch_over_noise_scale`` (``B / smoothed B_simple``). Every measurement is kept in
    :attr:`measurements` and, with ``log_dir``, written to TensorBoard under
    ``noise_scale/*`` in ``log_dir/train`` (beside ``keras.callbacks.TensorBoard``'s).

    Args:
      every_n_steps: measure at every step whose optimizer iteration is a multiple of this.
        The model must be compiled with ``steps_per_execution=1`` (the default).
      num_microbatches: k >= 2; each measured batch is split into k micro-batches. A batch
        that is not a multiple of k (a last partial batch) is measured on its largest
        multiple of k; a batch of fewer than k examples is not measured (under
        ``tf.distribute``, every replica's share of a measured batch must have k).
      smoothing: decay of the moving averages, per measurement (see
        :class:`echoing.noise_scale.NoiseScaleEstimator`).
      log_dir: TensorBoard directory, or ``None``.
      verbose: 1 prints where training stands (:meth:`describe`) at the end of each epoch.

    Attributes:
      measurements: one dict per measurement: ``step``, ``batch_size`` (examples
        measured), the :class:`echoing.noise_scale.NoiseScale` fields and ``regime``.
      estimator: the :class:`echoing.noise_scale.NoiseScaleEstimator`, carried across
        ``fit`` calls (``estimator.reset()`` to forget).

    Backends: Keras 3's TensorFlow, JAX and PyTorch backends, each measuring with its
    own differentiation (see :mod:`echoing.gradient_norms`); the three agree to float
    precision (``tests/test_backends.py``). On TensorFlow it works under ``tf.distribute``
    strategies whose replicas run in one process (``MirroredStrategy``, including logical
    CPU devices): each replica measures its share and the norms are all-reduced. On JAX
    it refuses a ``keras.distribution`` at construction. Not with ``model.fit`` replaced
    by a custom loop: there, call :func:`echoing.microbatch_gradient_norms` (or, inside a
    jitted JAX step, :func:`echoing.stateless_microbatch_gradient_norms`) yourself.

    Raises:
      RuntimeError: at construction, on a backend other than those three, or on JAX with
        a ``keras.distribution`` set.
    """

    def __init__(self, every_n_steps: int = 10, num_microbatches: int = 4, smoothing: float = 0.9,
                 log_dir: Optional[str] = None, verbose: int = 1):
        super().__init__()
        self._backend = _check_backend("NoiseScaleCallback")
        check_int("every_n_steps", every_n_steps, low=1)
        check_int("num_microbatches", num_microbatches, low=2)
        self.every_n_steps = every_n_steps
        self.num_microbatches = num_microbatches
        self.estimator = NoiseScaleEstimator(smoothing)
        self.log_dir = log_dir
        self.verbose = verbose
        self.measurements: list[dict] = []
        self._latest: Optional[NoiseScale] = None
        self._writer = None

    def set_model(self, model):
        if model is not getattr(self, "model", None):
            # Another model: its strategy and training function are its own.
            self.__dict__.pop("_norms", None)
            self.__dict__.pop("_plain_function", None)
        super().set_model(model)

    def on_train_begin(self, logs=None):
        model = self.model
        _check_backend("NoiseScaleCallback")
        steps_per_execution = int(getattr(model, "steps_per_execution", 1) or 1)
        if steps_per_execution != 1:
            raise ValueError(f"steps_per_execution: NoiseScaleCallback needs the model compiled with steps_per_execution=1, "
                             f"got {steps_per_execution}")
        self._next_step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
        self._due = False
        self._pending = None
        # fit has built its training function; build a second one that measures first, and
        # choose between them before each step.
        if model.train_function is getattr(self, "_plain_function", None):
            return  # Same training function as the last fit: keep the measuring one built for it.
        self._plain_function = model.train_function
        if self._backend == "tensorflow":
            self._measuring_function = self._tensorflow_measuring_function()
        elif self._backend == "jax":
            self._measuring_function = self._jax_measuring_function()
        else:
            self._measuring_function = self._torch_measuring_function()

    def _tensorflow_measuring_function(self):
        """The measurement inside the step's own ``tf.function``, so that it runs on each replica.

        No branch inside one function: under ``tf.distribute`` an all-reduce may not sit
        inside control flow. The norms reach Python through four variables.
        """
        model = self.model
        if not hasattr(self, "_norms"):
            with model.distribute_strategy.scope():
                # One replica's value is kept: after the all-reduce all replicas hold the same.
                self._norms = [tf.Variable(0.0, trainable=False, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                               for _ in range(4)]
        own_step = model.__dict__.get("train_step")  # An instance override, if any.
        model.train_step = self._measuring_train_step(model.train_step)
        try:
            model.make_train_function(force=True)
            return model.train_function
        finally:
            if own_step is None:
                del model.train_step
            else:
                model.train_step = own_step
            model.train_function = self._plain_function

    def _jax_measuring_function(self):
        """A jitted, stateless measurement on the step's state and batch, then the usual step.

        Keras's JAX ``fit`` passes the weights as state and a batch iterator to its
        training function; the measurement reads both before the step updates them.
        """
        import jax

        model, k, plain = self.model, self.num_microbatches, self._plain_function
        measure = jax.jit(lambda state, data: stateless_microbatch_gradient_norms(
            model, state[0], state[1], data, k, optimizer_variables=state[2], metrics_variables=state[3],
            drop_remainder=True))

        def measuring_function(state, iterator):
            data = next(iterator)
            self._pending = measure(state, data) if _examples(data) >= k else None
            return plain(state, iter((data,)))

        return measuring_function

    def _torch_measuring_function(self):
        """The eager measurement on the step's batch, then the usual step (Keras's PyTorch ``fit`` is eager)."""
        model, k, plain = self.model, self.num_microbatches, self._plain_function

        def measuring_function(data):
            batch = data[0]
            self._pending = (microbatch_gradient_norms(model, batch, k, drop_remainder=True)
                             if _examples(batch) >= k else None)
            return plain(data)

        return measuring_function

    def _measuring_train_step(self, train_step):
        model, k = self.model, self.num_microbatches
        single_replica = model.distribute_strategy.num_replicas_in_sync == 1

        def measuring_train_step(data):
            x, _, _ = keras.utils.unpack_x_y_sample_weight(data)

            def measure():
                norms = microbatch_gradient_norms(model, data, k, drop_remainder=True)
                return [v.assign(tf.cast(value, tf.float32)) for v, value in zip(self._norms, norms)]

            def skip():  # A batch of fewer than k examples: mark it unmeasured.
                return [v.assign(0.0) for v in self._norms]

            if single_replica:
                updates = tf.cond(tf.shape(tf.nest.flatten(x)[0])[0] >= k, measure, skip)
            else:
                updates = measure()
            # The measurement reads the weights this step is about to update.
            with tf.control_dependencies(updates):
                return train_step(data)

        return measuring_train_step

    def on_train_batch_begin(self, batch, logs=None):
        self._due = self._next_step % self.every_n_steps == 0
        self.model.train_function = self._measuring_function if self._due else self._plain_function

    def on_train_batch_end(self, batch, logs=None):
        step, self._next_step = self._next_step, self._next_step + 1
        if not self._due:
            return
        self.model.train_function = self._plain_function
        if self._backend == "tensorflow":
            small, big, b_small, b_big = (float(v.numpy()) for v in self._norms)
        elif self._pending is not None:
            small, big, b_small, b_big = (float(v) for v in self._pending)
            self._pending = None
        else:
            b_big = 0
        if b_big == 0:
            return  # The batch had fewer than num_microbatches examples.
        estimate = self.estimator.update(GradientNorms(small, big, b_small, b_big))
        self._latest = estimate
        batch_size = int(round(b_big))
        record = {"step": step, "batch_size": batch_size, **estimate.__dict__, "regime": estimate.regime(batch_size)}
        self.measurements.append(record)
        self._write_summaries(record)
        if logs is not None:
            logs.update(self._log_values())

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None and self._latest is not None:
            logs.update(self._log_values())  # History (added after user callbacks) records these.
        if self.verbose and self._latest is not None:
            print(f"Epoch {epoch + 1}: {self.describe()}")

    def on_train_end(self, logs=None):
        self.model.train_function = self._plain_function
        if self._writer is not None:
            self._writer.flush()

    @property
    def noise_scale(self) -> float:
        """The latest *smoothed* ``B_simple`` (``nan`` before it is known), as :func:`echoing.recommend` wants it.

        History's ``noise_scale`` key is the latest raw estimate; this is its smoothed
        counterpart, ``noise_scale_smoothed``.
        """
        return math.nan if self._latest is None else self._latest.b_simple_smoothed

    def describe(self) -> str:
        """Where training stands, in words (from the latest smoothed estimate)."""
        if self._latest is None:
            return "no noise-scale measurement yet"
        return self._latest.describe(self.measurements[-1]["batch_size"])

    def _log_values(self) -> dict:
        latest, batch_size = self._latest, self.measurements[-1]["batch_size"]
        return {"noise_scale": latest.b_simple, "noise_scale_smoothed": latest.b_simple_smoothed,
                "batch_over_noise_scale": latest.batch_ratio(batch_size)}

    def _write_summaries(self, record: dict) -> None:
        if self.log_dir is None:
            return
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, "train"))
        values = {"b_simple": record["b_simple"], "b_simple_smoothed": record["b_simple_smoothed"],
                  "batch_over_b_simple": self._log_values()["batch_over_noise_scale"],
                  "gradient_sq_norm": record["smoothed_gradient_sq_norm"], "trace_sigma": record["smoothed_trace_sigma"]}
        with self._writer.as_default(step=record["step"]):
            for name, value in values.items():
                if not math.isnan(value):
                    tf.summary.scalar(f"noise_scale/{name}", value)


def _check_backend(owner: str) -> str:
    """The Keras backend, if this callback supports it there; otherwise an error naming it."""
    backend = keras.backend.backend()
    if backend not in SUPPORTED_BACKENDS:
        raise RuntimeError(f"{owner}: the Keras backend {backend!r} is not supported; set KERAS_BACKEND to one of "
                           f"{SUPPORTED_BACKENDS} for the run that measures the noise scale")
    if backend == "jax" and keras.distribution.distribution() is not None:
        # The measuring function is jitted without the distribution's shardings.
        raise RuntimeError(f"{owner}: a keras.distribution ({type(keras.distribution.distribution()).__name__}) is set "
                           "on the JAX backend, which this callback does not support; measure the noise scale in a run "
                           "on one device, or call echoing.stateless_microbatch_gradient_norms in your own step")
    return backend


def _examples(data) -> int:
    """The number of examples in a batch ``(x, y[, sample_weight])``."""
    x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
    return int(keras.tree.flatten(x)[0].shape[0])
