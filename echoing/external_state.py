"""Checkpointing an echoed iterator: the echo stage's own state, and the user's.

``tf.train.Checkpoint(iterator=...)`` refuses to save an iterator whose pipeline runs a
stateful op (``experimental_external_state_policy`` is ``FAIL`` by default), because the
op's state would not be in the checkpoint. An echo stage runs two: it reads a
``tf.Variable`` factor, and it publishes its count to :class:`echoing.EchoStats`. Their
state is not lost: the factor variable and the ``EchoStats`` go into the same checkpoint,
and the running count also lives in the stage's ``scan`` state, which the iterator saves.

So the echo stage sets the policy to ``IGNORE`` for its pipeline, but only when the
dataset it is applied to has no stateful op of the user's: TensorFlow's own check runs on
that input first. A stateful op upstream (``tf.random.uniform``, ``py_function``, a
variable read) keeps the policy as it was, and saving fails with TensorFlow's error, as it
would without echoing. A policy the user set on the input is never changed.

The policy is one setting for a whole pipeline, so it also covers what comes *after* the
echo stage. Keep those steps free of stateful ops (shuffle, batch, maps with stateless
ops, prefetch), which is what follows an echo stage in practice.

Example:

>>> import tensorflow as tf, echoing
>>> factor = tf.Variable(2.0, dtype=tf.float64)
>>> ds = tf.data.Dataset.range(6).apply(echoing.echo(factor)).prefetch(2)
>>> it = iter(ds)
>>> [int(next(it)) for _ in range(3)]
[0, 0, 1]
>>> path = tf.train.Checkpoint(iterator=it).write(tempfile.mkdtemp() + "/ckpt")
>>> rest = [int(x) for x in it]
>>> it = iter(ds)
>>> _ = tf.train.Checkpoint(iterator=it).read(path)
>>> [int(x) for x in it] == rest == [1, 2, 2, 3, 3, 4, 4, 5, 5]
True
"""

from __future__ import annotations

import tempfile  # noqa: F401 (the example uses it)

import tensorflow as tf
from tensorflow.python.ops import gen_dataset_ops

_FAIL = 2  # tf.data.experimental.ExternalStatePolicy.FAIL, as the raw op takes it.


def stateful_op_in(dataset: tf.data.Dataset) -> str | None:
    """TensorFlow's reason why ``dataset`` cannot be checkpointed as it is, or ``None``.

    Runs the check ``tf.train.Checkpoint`` runs when it saves an iterator under the
    default ``FAIL`` policy, so it finds exactly the ops that would block saving.

    Example:

    >>> stateful_op_in(tf.data.Dataset.range(3).map(lambda x: x * 2)) is None
    True
    >>> "RandomUniform" in stateful_op_in(tf.data.Dataset.range(3).map(lambda x: tf.random.uniform([])))
    True
    """
    try:
        gen_dataset_ops.dataset_to_graph_v2(dataset._variant_tensor, external_state_policy=_FAIL)
    except tf.errors.FailedPreconditionError as error:
        return error.message
    return None


def ignore_echo_state(echoed: tf.data.Dataset, upstream: tf.data.Dataset) -> tf.data.Dataset:
    """``echoed`` with the ``IGNORE`` policy if ``upstream`` is checkpointable as it is.

    Leaves ``echoed`` alone when the user chose a policy on ``upstream``, when
    ``upstream`` holds a stateful op of theirs, or when the check itself cannot run (a
    pipeline too large to serialise): in each case saving behaves as without echoing.
    """
    if upstream.options().experimental_external_state_policy is not None:
        return echoed
    try:
        blocked = stateful_op_in(upstream)
    except (tf.errors.OpError, ValueError):
        return echoed
    if blocked is not None:
        return echoed
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return echoed.with_options(options)
