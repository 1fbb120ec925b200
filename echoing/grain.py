"""Data echoing for grain pipelines: :func:`echo`, a live :class:`Factor` and exact :class:`EchoStats`.

The contract of :func:`echoing.echo`, for a ``grain.IterDataset``: each element is emitted
``floor(e)`` times, plus once more with probability ``e - floor(e)`` (drawn afresh per
element from ``seed``); with ``shuffle_buffer_size`` the copies are spread through windows
of that many elements; the same seed gives the same output. The iterator's state
(``get_state()`` / ``set_state()``) holds its position and the counts, so a restored
iterator continues exactly, at any step.

The shuffle differs from tf.data's streaming buffer in one way: a window of at least
``shuffle_buffer_size`` copies is filled (whole elements' copies, in pull order), shuffled
and emitted, as grain's own ``WindowShuffleIterDataset`` does. A checkpoint then holds
the window's start and its copy counts, never its elements.

A live factor (:class:`Factor`) is read at every pull from upstream, so an assignment is
followed from the next fresh element. It must run in the training process: echo after
``mp_prefetch``, not inside its workers (a live factor or counts sent to a worker
process would be copies that the trainer never sees; :func:`echo` refuses that).

>>> import grain
>>> from echoing import grain as echo_grain
>>> stats = echo_grain.EchoStats()
>>> ds = echo_grain.echo(grain.MapDataset.range(3), 2, stats=stats)
>>> [int(x) for x in ds]
[0, 0, 1, 1, 2, 2]
>>> int(stats.fresh), int(stats.emitted)
(3, 6)
"""

from __future__ import annotations

from typing import Optional, Union

try:
    import grain
except ImportError as error:  # pragma: no cover - exercised in a process without grain
    raise ImportError("echoing.grain needs grain: install the extra with pip install -e '.[grain]' "
                      "(or pip install 'echoing[grain]')") from error
import numpy as np

from echoing._checks import check_int
from echoing._echo_groups import EchoGroups, LiveFactor, factor_value
from echoing.echo import _check_seed

__all__ = ["EchoStats", "Factor", "echo"]


def _factor_value(value, name: str) -> float:
    return factor_value(value, name, "echoing.grain.Factor")


class Factor(LiveFactor):
    """An echo factor that can change while the pipeline runs (grain's counterpart of a ``tf.Variable``).

    >>> factor = Factor(2.0)
    >>> factor.assign(3.5)
    >>> float(factor)
    3.5

    Raises:
      TypeError, ValueError: for a value that is not a finite number >= 1 (at construction
        and at :meth:`assign`), naming it.
    """

    _type = "echoing.grain.Factor"
    _workers = "grain's worker processes"
    _instead = "apply echoing.grain.echo after mp_prefetch"


class EchoStats:
    """Exact counts of one echo stage: ``fresh`` (elements pulled from upstream) and ``emitted``.

    The counts are those of the stage's latest iterator, and they are part of its state:
    ``set_state`` restores them with the position. ``int(stats.fresh)`` reads one.

    >>> stats = EchoStats()
    >>> stats.fresh, stats.emitted
    (0, 0)
    """

    def __init__(self) -> None:
        self._iterator: Optional["_EchoIterator"] = None

    @property
    def fresh(self) -> int:
        return 0 if self._iterator is None else self._iterator._groups.fresh

    @property
    def emitted(self) -> int:
        return 0 if self._iterator is None else self._iterator._groups.emitted

    def __repr__(self) -> str:
        return f"EchoStats(fresh={self.fresh}, emitted={self.emitted})"

    def __reduce__(self):
        raise TypeError("stats: echoing.grain.EchoStats cannot be sent to grain's worker processes, where the counts "
                        "would stay there: apply echoing.grain.echo after mp_prefetch")


def echo(dataset: Union["grain.IterDataset", "grain.MapDataset"], factor: Union[float, Factor], *,
         shuffle_buffer_size: int = 0, seed: Optional[int] = None,
         stats: Optional[EchoStats] = None) -> "grain.IterDataset":
    """Repeats each element of ``dataset`` about ``factor`` times (see the module docstring).

    Args:
      dataset: a ``grain.IterDataset``, or a ``grain.MapDataset`` (taken through
        ``to_iter_dataset()``).
      factor: the echo factor (>= 1), fixed, or a :class:`Factor` followed while it runs.
      shuffle_buffer_size: ``0`` emits copies side by side; above 0, copies are shuffled
        within windows of at least this many elements.
      seed: seeds the fractional draws and the shuffle (an int in ``[0, 2**63)``); ``None``
        draws one per iterator (kept in its state, so a restore is still exact).
      stats: an :class:`EchoStats` to count into.

    Returns:
      A ``grain.IterDataset``.

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.

    >>> import grain
    >>> ds = echo(grain.MapDataset.range(100), 1.5, seed=0)
    >>> sorted(set(x for x in ds)) == list(range(100))
    True
    """
    if isinstance(dataset, grain.MapDataset):
        dataset = dataset.to_iter_dataset()
    if not isinstance(dataset, grain.IterDataset):
        raise TypeError(f"dataset: expected a grain.IterDataset or grain.MapDataset, got "
                        f"{type(dataset).__name__}: {dataset!r:.200}")
    if not isinstance(factor, Factor):
        _factor_value(factor, "factor")
    check_int("shuffle_buffer_size", shuffle_buffer_size, low=0)
    _check_seed(seed)
    if stats is not None and not isinstance(stats, EchoStats):
        raise TypeError(f"stats: expected an echoing.grain.EchoStats or None, got {type(stats).__name__}: {stats!r:.200}")
    return EchoIterDataset(dataset, factor, shuffle_buffer_size=int(shuffle_buffer_size),
                           seed=None if seed is None else int(seed), stats=stats)


class EchoIterDataset(grain.IterDataset):
    """The echo stage; build it with :func:`echo`."""

    def __init__(self, parent, factor, *, shuffle_buffer_size: int, seed: Optional[int],
                 stats: Optional[EchoStats]) -> None:
        super().__init__(parent)
        self._factor = factor
        self._shuffle_buffer_size = shuffle_buffer_size
        self._seed = seed
        self._echo_stats = stats

    def __iter__(self) -> "_EchoIterator":
        return _EchoIterator(self._parent.__iter__(), self._factor, self._shuffle_buffer_size, self._seed,
                             self._echo_stats)

    def __str__(self) -> str:
        return f"EchoIterDataset(factor={self._factor!r}, shuffle_buffer_size={self._shuffle_buffer_size})"


class _EchoIterator(grain.DatasetIterator):
    """Emits copies; its state is the parent's state where the current group of copies began.

    Without shuffle a group is one element's copies; with shuffle it is a window. Restoring
    sets the parent back to the group's start, pulls the group's elements again, and skips
    what was emitted (``echoing/_echo_groups.py``).
    """

    def __init__(self, parent, factor, shuffle_buffer_size: int, seed: Optional[int],
                 stats: Optional[EchoStats]) -> None:
        super().__init__(parent)
        self._factor = factor
        self._live = isinstance(factor, Factor)
        self._buffer = shuffle_buffer_size
        self._seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else seed
        if stats is not None:
            stats._iterator = self  # The stage's counts are its latest iterator's.
        self._groups = EchoGroups(pull=lambda: next(self._parent), parent_state=self._parent.get_state,
                                  factor=self._current_factor, shuffle_buffer_size=shuffle_buffer_size,
                                  key=(self._seed,))

    def __next__(self):
        return next(self._groups)

    def close(self) -> None:
        """Closes the pipeline above it (grain's ``close``) and lets go of the copies it holds.

        They are freed now, not when the iterator is collected, which the stage's
        ``EchoStats`` (its counts are its latest iterator's) would put off: after
        ``mp_prefetch`` they are grain's shared memory. The counts stay readable; ``next``
        raises ``ValueError``.
        """
        self._groups.release()
        super().close()

    def _current_factor(self) -> float:
        if self._live:
            # Checked again here: a value set around assign() must not pass unseen.
            return _factor_value(self._factor.value, "factor (current value of the echoing.grain.Factor)")
        return float(self._factor)

    def get_state(self) -> dict:
        # The group is found again from where it began, its factor and the draws: the state
        # has one shape at every step (grain checks that), whatever the group's size.
        return {**self._groups.state(), "seed": self._seed}

    def set_state(self, state: dict) -> None:
        self._parent.set_state(state["parent"])
        self._seed = state["seed"]
        self._groups.restore(state, key=(self._seed,))

    def __str__(self) -> str:
        return f"_EchoIterator(factor={self._factor!r}, shuffle_buffer_size={self._buffer})"
