"""Exact accounting of the fresh elements an echo stage reads and the copies it emits."""

from __future__ import annotations

import tensorflow as tf


class EchoStats(tf.Module):
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

    **Checkpoints.** ``EchoStats`` is a ``tf.Module``: save it in a ``tf.train.Checkpoint``
    beside the model. The running count also lives in the echo stage's iterator state, so
    an iterator restored from a checkpoint sets the counters to exactly the values of an
    uninterrupted run at the first element the stage pulls after the restore, even if the
    counters were saved a moment apart from the iterator (a prefetch thread may pull in
    between). A job that restores only the counters (with a new iterator) continues
    counting from them. An element whose copies cannot be drawn (a bad runtime factor)
    is counted neither as fresh nor as emitted.

    One ``EchoStats`` serves one echo stage: passing it to a second :func:`echoing.echo`
    call raises ``ValueError``, so two stages can never add into the same count by mistake.
    Iterating the same echoed dataset again (a second epoch) keeps adding; call
    :meth:`reset` to start from zero. Iterate one iterator at a time per ``EchoStats``.

    Example:

    >>> import tempfile, tensorflow as tf, echoing
    >>> stats = echoing.EchoStats()
    >>> ds = tf.data.Dataset.range(10).apply(echoing.echo(3, stats=stats))
    >>> _ = list(ds)
    >>> int(stats.fresh), int(stats.emitted)
    (10, 30)
    >>> path = tf.train.Checkpoint(stats=stats).write(tempfile.mkdtemp() + "/ckpt")
    >>> restored = echoing.EchoStats()
    >>> _ = tf.train.Checkpoint(stats=restored).read(path)
    >>> int(restored.fresh), int(restored.emitted)
    (10, 30)

    Attributes:
      fresh: int64 ``tf.Variable``, elements pulled from the input.
      emitted: int64 ``tf.Variable``, copies produced.
    """

    def __init__(self, name: str = "echo_stats") -> None:
        super().__init__(name=name)
        # Counters live on the CPU: tf.data functions run there, and a read from Python
        # then never waits for an accelerator.
        with tf.device("/CPU:0"):
            self.fresh = tf.Variable(0, dtype=tf.int64, trainable=False, name="fresh")
            self.emitted = tf.Variable(0, dtype=tf.int64, trainable=False, name="emitted")
            # Bumped by reset(), so that a running iterator re-bases its count on zero.
            self.generation = tf.Variable(0, dtype=tf.int64, trainable=False, name="generation")
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
        self.generation.assign_add(1)

    def _bind(self, owner: str) -> None:
        """Claims this object for one echo stage; a second claim is an error."""
        if self._owner is not None:
            raise ValueError(
                f"stats: this EchoStats already counts the echo stage {self._owner}; "
                "one EchoStats serves one echo stage, create another for this one"
            )
        self._owner = owner

    def _initial_state(self) -> tuple[tf.Tensor, ...]:
        """The echo stage's running count at the start of an iteration (``Dataset.scan`` state).

        ``(generation, base_fresh, base_emitted, fresh, emitted)``: what this iteration
        counted, the counters' values it started from, and the generation of those values.
        Generation -1 matches none, so the first element takes its base from the counters.
        """
        zero = tf.constant(0, tf.int64)
        return (tf.constant(-1, tf.int64), zero, zero, zero, zero)

    def _advance(self, state, fresh: tf.Tensor, emitted: tf.Tensor):
        """Adds to the running count; returns the new state and the op that publishes it.

        The counters are *assigned* ``base + count``: the count lives in the iterator's
        state, which a checkpoint restores, so the counters follow the iterator exactly.
        """
        generation, base_fresh, base_emitted, counted_fresh, counted_emitted = state
        current = self.generation.read_value()
        # A new iteration, or a reset() since the last element: continue from the
        # counters as they are now.
        rebase = tf.not_equal(generation, current)
        base_fresh = tf.where(rebase, self.fresh.read_value() - counted_fresh, base_fresh)
        base_emitted = tf.where(rebase, self.emitted.read_value() - counted_emitted, base_emitted)
        counted_fresh += tf.cast(fresh, tf.int64)
        counted_emitted += tf.cast(emitted, tf.int64)
        new_fresh, new_emitted = base_fresh + counted_fresh, base_emitted + counted_emitted
        # Both or neither: an element whose copies could not be drawn (a bad factor) must
        # not be counted as fresh.
        with tf.control_dependencies([new_fresh, new_emitted]):
            publish = tf.group(
                self.fresh.assign(new_fresh, read_value=False),
                self.emitted.assign(new_emitted, read_value=False),
            )
        return (current, base_fresh, base_emitted, counted_fresh, counted_emitted), publish

    def __repr__(self) -> str:
        return f"EchoStats(fresh={int(self.fresh)}, emitted={int(self.emitted)})"
