"""Exact accounting of the fresh elements an echo stage reads and the copies it emits."""

from __future__ import annotations

import tensorflow as tf


class EchoStats:
    """Counters of one echo stage: fresh elements in, elements out.

    Pass an ``EchoStats`` to :func:`echoing.echo`; the echo stage then counts, as it runs,

    * ``fresh``: elements it has pulled from its input (the upstream reads that echoing
      saves; the paper's "fresh examples" when the stage echoes examples, fresh batches
      when it echoes batches);
    * ``emitted``: copies it has produced (``fresh`` times the realised echo factor).

    When an element is counted: at the moment the echo stage pulls it from its input, and
    its copies at that same moment, before they leave the stage. Small fixed-shape elements
    are pulled in micro-batches of up to 64 (see :mod:`echoing.echo`), so while the dataset
    runs both counters may be ahead of what the consumer has taken by one micro-batch,
    the echo shuffle buffer and any prefetch after the stage. Once the dataset is
    exhausted both are exact. The counters are ``tf.Variable`` s, so reading them during
    training is cheap and thread-safe.

    One ``EchoStats`` serves one echo stage: passing it to a second :func:`echoing.echo`
    call raises ``ValueError``, so two stages can never add into the same count by mistake.
    Iterating the same echoed dataset again (a second epoch) keeps adding; call
    :meth:`reset` to start from zero.

    Example:

    >>> import tensorflow as tf, echoing
    >>> stats = echoing.EchoStats()
    >>> ds = tf.data.Dataset.range(10).apply(echoing.echo(3, stats=stats))
    >>> _ = list(ds)
    >>> int(stats.fresh), int(stats.emitted)
    (10, 30)

    Attributes:
      fresh: int64 ``tf.Variable``, elements pulled from the input.
      emitted: int64 ``tf.Variable``, copies produced.
    """

    def __init__(self) -> None:
        # Counters live on the CPU: tf.data functions run there, and a read from Python
        # then never waits for an accelerator.
        with tf.device("/CPU:0"):
            self.fresh = tf.Variable(0, dtype=tf.int64, trainable=False, name="echo_fresh")
            self.emitted = tf.Variable(0, dtype=tf.int64, trainable=False, name="echo_emitted")
        self._owner: str | None = None

    @property
    def factor(self) -> float:
        """The realised echo factor so far, ``emitted / fresh`` (``nan`` before any element)."""
        fresh = int(self.fresh)
        return float("nan") if fresh == 0 else int(self.emitted) / fresh

    def reset(self) -> None:
        """Sets both counters to zero (the stage stays bound to this object)."""
        self.fresh.assign(0)
        self.emitted.assign(0)

    def _bind(self, owner: str) -> None:
        """Claims this object for one echo stage; a second claim is an error."""
        if self._owner is not None:
            raise ValueError(
                f"stats: this EchoStats already counts the echo stage {self._owner}; "
                "one EchoStats serves one echo stage, create another for this one"
            )
        self._owner = owner

    def _count(self, fresh: tf.Tensor, emitted: tf.Tensor) -> tf.Operation:
        """Adds to both counters; called inside the echo stage's dataset functions."""
        return tf.group(
            self.fresh.assign_add(tf.cast(fresh, tf.int64), read_value=False),
            self.emitted.assign_add(tf.cast(emitted, tf.int64), read_value=False),
        )

    def __repr__(self) -> str:
        return f"EchoStats(fresh={int(self.fresh)}, emitted={int(self.emitted)})"
