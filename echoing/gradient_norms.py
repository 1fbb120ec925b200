"""Squared gradient norms at two batch sizes from one training batch, split into micro-batches.

A batch of B examples is split into k micro-batches of ``B / k``. Each micro-batch's
gradient is computed on the model's current weights; the mean of their squared norms is
``|G_small|^2`` at ``B_small = B / k`` and the squared norm of their mean (the gradient of
the whole batch, since the loss is a mean over examples) is ``|G_big|^2`` at ``B_big = B``.
No data beyond the batch is read.

The model's state is left untouched: the forward passes run in a ``keras.StatelessScope``
(as ``keras.Model.stateless_call`` does), so batch-normalisation statistics, dropout seed
state and metrics are updated in the scope and discarded, and no optimizer is involved. Under ``tf.distribute`` (inside ``strategy.run``), every replica
splits its own share of the batch and the sums are all-reduced across replicas, so the
result describes the global batch.

Backends: each computes the gradients with its own differentiation. On TensorFlow
(``tf.GradientTape``; eagerly or in a ``tf.function``) and PyTorch (``torch.autograd``,
eagerly) :func:`microbatch_gradient_norms` reads the model's variables. On JAX
(``jax.grad``) it does too when called eagerly; inside a jitted function, where the
weights are values passed in rather than the model's variables, call
:func:`stateless_microbatch_gradient_norms` with them.

Example (a custom training loop):

>>> import keras, numpy as np
>>> from echoing.gradient_norms import microbatch_gradient_norms
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
>>> model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
>>> x, y = np.random.default_rng(0).normal(size=(8, 3)).astype("float32"), np.arange(8) % 2
>>> norms = microbatch_gradient_norms(model, (x, y), num_microbatches=4)
>>> int(norms.small_batch), int(norms.big_batch), bool(norms.small_sq_norm >= norms.big_sq_norm)
(2, 8, True)
"""

from __future__ import annotations

from typing import Callable, Optional

import keras
import tensorflow as tf

from echoing._checks import check_int
from echoing.noise_scale import GradientNorms

SUPPORTED_BACKENDS = ("tensorflow", "jax", "torch")


def microbatch_gradient_norms(
    model: keras.Model,
    data,
    num_microbatches: int,
    *,
    loss_fn: Optional[Callable] = None,
    drop_remainder: bool = False,
) -> GradientNorms:
    """Gradient norms at ``B / num_microbatches`` and at ``B`` from one batch, without side effects.

    Works with any Keras 3 model on the TensorFlow backend (eagerly and inside a
    ``tf.function``; the fields are then tensors), the PyTorch backend (eagerly; the
    fields are floats) and the JAX backend (eagerly; inside ``jax.jit`` use
    :func:`stateless_microbatch_gradient_norms`).

    Args:
      model: a built Keras model; compiled unless ``loss_fn`` is given.
      data: one batch, ``(x, y)`` or ``(x, y, sample_weight)`` as ``fit`` takes it.
      num_microbatches: k >= 2, the number of micro-batches the batch is split into.
      loss_fn: optional ``loss_fn(y_true, y_pred) -> scalar mean loss`` used instead of
        the compiled loss (and then the model's own regularisation losses are not added).
        By default the loss is what ``fit`` minimises: the compiled loss, weight
        regularisation and losses added during ``call``.
      drop_remainder: if the batch size is not a multiple of ``num_microbatches``, leave
        the last ``B mod k`` examples out of the measurement (``big_batch`` then says how
        many were used) instead of raising an error.

    Under ``tf.distribute`` the loss is taken as ``fit`` trains on it: Keras divides the
    compiled loss by the replica count and then sums replica gradients, so weight
    regularisation counts once per replica; this measures that same gradient.

    Returns:
      :class:`echoing.noise_scale.GradientNorms` with ``small_batch = B // k`` and
      ``big_batch = k * (B // k)`` (summed over replicas under ``tf.distribute``).

    Raises:
      TypeError, ValueError: ``num_microbatches`` is not an int >= 2; ValueError: the model has no compiled
        loss and no ``loss_fn`` is given, or (static batch size) the batch does not split.
      tf.errors.InvalidArgumentError: the batch size, known only at run time, does not split.
    """
    _check_arguments(model, num_microbatches, loss_fn)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return _tensorflow_norms(model, data, num_microbatches, loss_fn, drop_remainder)
    if backend == "torch":
        return _torch_norms(model, data, num_microbatches, loss_fn, drop_remainder)
    if backend == "jax":
        optimizer = getattr(model, "optimizer", None)
        return stateless_microbatch_gradient_norms(
            model, [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
            data, num_microbatches, metrics_variables=[v.value for v in model.metrics_variables],
            optimizer_variables=None if optimizer is None else [v.value for v in optimizer.variables],
            loss_fn=loss_fn, drop_remainder=drop_remainder)
    raise RuntimeError(f"microbatch_gradient_norms: the Keras backend {backend!r} is not supported; "
                       f"use one of {SUPPORTED_BACKENDS}")


def stateless_microbatch_gradient_norms(
    model: keras.Model,
    trainable_variables,
    non_trainable_variables,
    data,
    num_microbatches: int,
    *,
    metrics_variables=None,
    optimizer_variables=None,
    loss_fn: Optional[Callable] = None,
    drop_remainder: bool = False,
) -> GradientNorms:
    """:func:`microbatch_gradient_norms` on the JAX backend, on weights passed as values: a pure function.

    For a jitted JAX step, where the weights are the step's state rather than the model's
    variables (as in ``keras.Model.stateless_call``). The arguments are those of
    :func:`microbatch_gradient_norms` plus the values of the model's variables, in the
    order of ``model.trainable_variables``, ``model.non_trainable_variables``,
    ``model.metrics_variables`` and ``model.optimizer.variables`` (the last two are
    needed only for the compiled loss; ``None`` reads them from the model). Nothing is
    assigned: batch-normalisation statistics, seed state and metrics are computed and
    discarded. The batch size must be static (as it is under ``jax.jit``).

    Example:

    >>> import os, keras, numpy as np
    >>> from echoing.gradient_norms import stateless_microbatch_gradient_norms
    >>> if keras.backend.backend() != "jax":
    ...     print("2 8 True")  # This example needs KERAS_BACKEND=jax; tests/test_backends.py runs it there.
    ... else:
    ...     import jax
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    ...     model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ...     x, y = np.random.default_rng(0).normal(size=(8, 3)).astype("float32"), np.arange(8) % 2
    ...     measure = jax.jit(lambda tv, ntv, mv, ov, batch: stateless_microbatch_gradient_norms(
    ...         model, tv, ntv, batch, 4, metrics_variables=mv, optimizer_variables=ov))
    ...     norms = measure([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
    ...                     [v.value for v in model.metrics_variables], [v.value for v in model.optimizer.variables], (x, y))
    ...     print(int(norms.small_batch), int(norms.big_batch), bool(norms.small_sq_norm >= norms.big_sq_norm))
    2 8 True
    """
    import jax
    import jax.numpy as jnp

    _check_arguments(model, num_microbatches, loss_fn)
    optimizer = getattr(model, "optimizer", None)
    if loss_fn is None and type(optimizer).__name__ == "LossScaleOptimizer":
        # Keras's JAX loss is the scaled one under loss scaling: the norms would be scaled too.
        raise ValueError("model: compiled with a LossScaleOptimizer; on the JAX backend pass loss_fn (the unscaled "
                         "loss) to measure the gradient norms")
    if loss_fn is None:
        if metrics_variables is None:
            metrics_variables = [v.value for v in model.metrics_variables]
        if optimizer is not None and optimizer_variables is None:
            optimizer_variables = [v.value for v in optimizer.variables]
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    micro = _static_batch_size(x, num_microbatches, drop_remainder) // num_microbatches

    def loss_of(trainable, x_i, y_i, w_i):
        if loss_fn is not None:
            y_pred, _ = model.stateless_call(trainable, non_trainable_variables, x_i, training=True)
            return loss_fn(y_i, y_pred)
        # What fit minimises: compiled loss, weight regularisation and losses added in call.
        loss, _ = model.compute_loss_and_updates(trainable, non_trainable_variables, metrics_variables, x_i, y_i, w_i,
                                                 training=True, optimizer_variables=optimizer_variables)
        return loss

    gradient_of = jax.grad(loss_of)
    sq_norm_sum = jnp.float32(0.0)
    gradient_sum = [jnp.zeros(jnp.shape(v), jnp.float32) for v in trainable_variables]
    for i in range(num_microbatches):
        gradients = gradient_of(list(trainable_variables), *_microbatch((x, y, sample_weight), i, micro))
        gradients = [g.astype(jnp.float32) for g in gradients]
        sq_norm_sum = sq_norm_sum + sum(jnp.sum(jnp.square(g)) for g in gradients)
        gradient_sum = [s + g for s, g in zip(gradient_sum, gradients)]
    big_sq_norm = sum(jnp.sum(jnp.square(s / num_microbatches)) for s in gradient_sum)
    return GradientNorms(sq_norm_sum / num_microbatches, big_sq_norm, jnp.float32(micro),
                         jnp.float32(micro * num_microbatches))


def _check_arguments(model, num_microbatches, loss_fn) -> None:
    check_int("num_microbatches", num_microbatches, low=2)
    if loss_fn is None and not getattr(model, "compiled", False):
        raise ValueError(f"model: {model.name!r} is not compiled; compile it with a loss or pass loss_fn")


def _torch_norms(model, data, num_microbatches, loss_fn, drop_remainder) -> GradientNorms:
    """PyTorch: each micro-batch's gradient by ``torch.autograd.grad`` on detached copies of the weights."""
    import torch

    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    micro = _static_batch_size(x, num_microbatches, drop_remainder) // num_microbatches
    trainable = [v.value.detach().clone().requires_grad_(True) for v in model.trainable_variables]
    others = model.non_trainable_variables + model.metrics_variables
    state = list(zip(model.trainable_variables, trainable)) + [(v, v.value.detach().clone()) for v in others]
    sq_norm_sum = 0.0
    gradient_sum = [torch.zeros_like(v, dtype=torch.float32) for v in trainable]
    for i in range(num_microbatches):
        x_i, y_i, w_i = _microbatch((x, y, sample_weight), i, micro)
        # As on TensorFlow: the model reads these values, and what it assigns stays in the scope.
        with keras.StatelessScope(state_mapping=state, collect_losses=True):
            y_pred = model(x_i, training=True)
            loss = loss_fn(y_i, y_pred) if loss_fn is not None else model.compute_loss(x_i, y_i, y_pred, w_i)
        gradients = torch.autograd.grad(loss, trainable, allow_unused=True)
        gradients = [torch.zeros_like(v, dtype=torch.float32) if g is None else g.detach().float()
                     for v, g in zip(trainable, gradients)]
        sq_norm_sum += float(sum(torch.sum(torch.square(g)) for g in gradients))
        gradient_sum = [s + g for s, g in zip(gradient_sum, gradients)]
    big_sq_norm = float(sum(torch.sum(torch.square(s / num_microbatches)) for s in gradient_sum))
    return GradientNorms(sq_norm_sum / num_microbatches, big_sq_norm, float(micro), float(micro * num_microbatches))


def _tensorflow_norms(model, data, num_microbatches, loss_fn, drop_remainder) -> GradientNorms:
    """TensorFlow: each micro-batch's gradient by ``tf.GradientTape``; all-reduced under ``tf.distribute``."""
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    batch_size = _batch_size(x, num_microbatches, drop_remainder)
    micro = batch_size // num_microbatches

    trainable = [tf.convert_to_tensor(v.value) for v in model.trainable_variables]
    others = model.non_trainable_variables + model.metrics_variables
    state = list(zip(model.trainable_variables, trainable)) + [(v, tf.convert_to_tensor(v.value)) for v in others]
    # Keras divides the per-replica loss by the replica count so that summing gradients
    # across replicas gives the mean; here each replica's gradient must be its own mean.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync

    sq_norm_sum = tf.constant(0.0, tf.float32)
    gradient_sum = [tf.zeros_like(v, dtype=tf.float32) for v in trainable]
    for i in range(num_microbatches):
        x_i, y_i, w_i = _microbatch((x, y, sample_weight), i, micro)
        with tf.GradientTape() as tape:
            tape.watch(trainable)
            # Inside the scope the model reads these values instead of its variables, and
            # whatever it would assign (statistics, seeds, metrics) is kept in the scope.
            with keras.StatelessScope(state_mapping=state, collect_losses=True):
                y_pred = model(x_i, training=True)
                if loss_fn is not None:
                    loss = loss_fn(y_i, y_pred)
                else:
                    # What fit minimises: the compiled loss plus the model's losses
                    # (regularisation and add_loss), which this call put into the scope.
                    loss = model.compute_loss(x_i, y_i, y_pred, w_i) * replicas
        gradients = tape.gradient(loss, trainable, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        gradients = [tf.cast(tf.convert_to_tensor(g), tf.float32) for g in gradients]  # IndexedSlices to dense.
        sq_norm_sum += tf.add_n([tf.reduce_sum(tf.square(g)) for g in gradients])
        gradient_sum = [s + g for s, g in zip(gradient_sum, gradients)]

    count = tf.constant(float(num_microbatches))
    examples = tf.cast(micro * num_microbatches, tf.float32)
    context = tf.distribute.get_replica_context()
    if replicas > 1 and context is not None:
        sq_norm_sum, count, examples, *gradient_sum = context.all_reduce("sum", [sq_norm_sum, count, examples, *gradient_sum])
    big_sq_norm = tf.add_n([tf.reduce_sum(tf.square(s / count)) for s in gradient_sum])
    return GradientNorms(sq_norm_sum / count, big_sq_norm, tf.cast(micro, tf.float32), examples)


def _microbatch(structure, i, micro):
    """Micro-batch ``i`` of ``micro`` examples of every tensor in ``structure`` (``None`` stays ``None``)."""
    return tf.nest.map_structure(lambda t: None if t is None else t[i * micro:(i + 1) * micro], structure)


def _static_batch_size(x, num_microbatches: int, drop_remainder: bool) -> int:
    """:func:`_batch_size` where the batch size is known (JAX under jit, PyTorch)."""
    size = int(keras.tree.flatten(x)[0].shape[0])
    if size < num_microbatches or (size % num_microbatches and not drop_remainder):
        raise ValueError(_split_message(size, num_microbatches))
    return size - size % num_microbatches


def _batch_size(x, num_microbatches: int, drop_remainder: bool):
    """The number of examples to measure on: the batch size, or its largest multiple of k."""
    first = tf.nest.flatten(x)[0]
    static = first.shape[0] if hasattr(first, "shape") else None
    if static is not None:
        if static < num_microbatches or (static % num_microbatches and not drop_remainder):
            raise ValueError(_split_message(static, num_microbatches))
        return static - static % num_microbatches
    size = tf.shape(first)[0]
    tf.debugging.assert_greater_equal(size, num_microbatches, message=_split_message("(run time)", num_microbatches))
    if not drop_remainder:
        tf.debugging.assert_equal(size % num_microbatches, 0, message=_split_message("(run time)", num_microbatches))
    return size - size % num_microbatches


def _split_message(batch_size, num_microbatches: int) -> str:
    return (f"batch size {batch_size} does not split into num_microbatches={num_microbatches} equal micro-batches "
            "of at least one example; use a batch size that is a multiple of it, or drop_remainder=True")
