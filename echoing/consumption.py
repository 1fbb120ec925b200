"""What training consumed, counted exactly from the training side, beside what the echo stage produced.

:class:`echoing.EchoStats` counts at the echo stage: what it pulled (``fresh``) and what it
produced (``emitted``). Training takes from the far end of the pipeline, so the stage runs
ahead of it by whatever sits in between, and an iterator that is dropped takes its
read-ahead with it. Per iterator opened over the dataset, ``emitted`` exceeds what
training took by at most

    (copies of one echo micro-batch) + (echo shuffle buffer) + (prefetch depth + 1) x batch size

elements, where an echo micro-batch holds the copies of up to 64 fresh elements (64 x
``ceil(e)``; see :mod:`echoing.echo`). Keras opens one iterator per ``fit`` call; on the
JAX and PyTorch backends the first ``fit`` of a model opens one more, to build the model,
and on an accelerator the JAX backend reads one batch ahead of the step
(``tests/test_keras_backends.py`` measures the lead on each backend and checks it against
this bound). Once training has stopped, the lead is
what the pipeline read and training never used.

:class:`ConsumedExamples` is the training side's count: the steps ``fit`` ran and the
examples in them, exact on every Keras 3 backend. A loop of your own knows its batches:
count their examples where it trains on them (``examples/jax_loop.py`` does).

Example:

>>> import keras, numpy as np, tensorflow as tf, echoing
>>> stats = echoing.EchoStats()
>>> x = np.zeros((100, 3), "float32")
>>> ds = tf.data.Dataset.from_tensor_slices((x, x[:, 0])).apply(echoing.echo(2, stats=stats)).batch(32)
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile("sgd", "mse")
>>> consumed = echoing.ConsumedExamples(stats)
>>> history = model.fit(ds, epochs=2, callbacks=[consumed], verbose=0)
>>> consumed.steps, consumed.examples  # 200 copies per epoch; each epoch's last batch has 8.
(14, 400)
>>> history.history["consumed_examples"]
[200, 400]
>>> # 0 on TensorFlow; on JAX and PyTorch the iterator that built the model read one
>>> # echo micro-batch (64 fresh elements, 128 copies) that training never used.
>>> history.history["unconsumed_examples"][-1] in (0, 128)
True
"""

from __future__ import annotations

from typing import Optional

import keras

from echoing.stats import EchoStats


class ConsumedExamples(keras.callbacks.Callback):
    """Counts the training steps ``fit`` ran and the examples they trained on, exactly, on any Keras 3 backend.

    The examples are what ``fit`` itself counted for its loss (its mean is over the
    examples of every batch, a last partial batch included), read at each epoch's end,
    when every backend has synchronised its state; so the count is exact at epoch ends
    and at the end of training.

    Args:
      stats: the :class:`echoing.EchoStats` of an echo stage that echoes *examples*;
        then ``unconsumed_examples`` (``stats.emitted`` minus the examples trained on) is
        logged too. For batch echoing, compare ``stats.emitted`` with :attr:`steps`.

    Attributes:
      steps: training steps run, over every ``fit`` this callback has seen.
      examples: examples those steps trained on (updated at each epoch end).

    Logged to ``history.history`` at each epoch end: ``consumed_examples`` and, with
    ``stats``, ``unconsumed_examples``.

    Raises:
      ValueError: at an epoch end, when the model has no loss tracker counting examples
        (a ``train_step`` of your own that does not update it): count in that step instead.
    """

    def __init__(self, stats: Optional[EchoStats] = None):
        super().__init__()
        if stats is not None and not isinstance(stats, EchoStats):
            raise TypeError(f"stats: expected an echoing.EchoStats or None, got {type(stats).__name__}: {stats!r}")
        self.stats = stats
        self.steps = 0
        self.examples = 0
        self._epoch_steps = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_steps = 0

    def on_train_batch_end(self, batch, logs=None):
        # Keras passes the index of the last step the call ran (steps_per_execution > 1 runs several).
        self._epoch_steps = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        self.steps += self._epoch_steps
        self.examples += self._epoch_examples()
        if logs is not None:
            logs["consumed_examples"] = self.examples
            if self.stats is not None:
                logs["unconsumed_examples"] = int(self.stats.emitted) - self.examples

    def _epoch_examples(self) -> int:
        tracker = getattr(self.model, "_loss_tracker", None)
        count = None if tracker is None else getattr(tracker, "count", None)
        examples = 0 if count is None else int(keras.ops.convert_to_numpy(count))
        if self._epoch_steps and not examples:
            raise ValueError(f"model: {self.model.name!r} ran {self._epoch_steps} steps but its loss tracker counted no "
                             "examples (a train_step of its own?); count the examples in that train_step instead")
        return examples
