"""Data echoing for PyTorch loaders: :func:`echo`, a live :class:`Factor` and exact :class:`EchoStats`.

PyTorch reads, decodes and augments in ``DataLoader`` workers, so the cheapest place to
echo is after the loader, on the trainer: each batch the loader yields goes to ``e``
steps. :func:`echo` wraps any iterable of batches (a ``DataLoader``, torchdata's
``StatefulDataLoader`` or ``nodes.Loader``, a generator) under the contract of
:func:`echoing.echo`:

* **Copies.** Each fresh batch is emitted ``floor(e)`` times, plus once more with
  probability ``e - floor(e)``, drawn from the seed, the epoch and the batch's position,
  so every rank of a data-parallel job draws the same copies and runs the same steps.
* **Order.** Without a buffer the copies are adjacent. ``shuffle_buffer_size`` (in
  batches) shuffles them within windows of at least that many copies of whole batches;
  nothing is lost or repeated beyond the draws.
* **Structures.** A batch passes unchanged, whatever its structure: a copy is the same
  object, never a copy of its tensors. A loop that changes a batch in place would change
  its later copies too: the stage refuses, naming the tensor, when it finds a tensor it
  emitted changed before its next copy (tensors count their in-place changes).
* **A live** :class:`Factor` is read when a group of copies begins (each fresh batch
  without a buffer, each window with one).
* **Checkpoints.** :class:`EchoedLoader` has ``state_dict()`` and ``load_state_dict()``
  (PyTorch's ``Stateful`` protocol, which Lightning, accelerate and
  ``torch.distributed.checkpoint`` save as it is). The state holds the upstream's own
  state where the current group began, the draws' position and the counts, never a
  batch; a loader restored from it re-reads the group and continues exactly. The
  upstream must have a state of its own for that (``StatefulDataLoader``,
  ``nodes.Loader``); over one without it, only the counts and the epoch resume.

Each ``for`` over the echoed loader is an epoch, as over a ``DataLoader``; the counts in
:class:`EchoStats` run on across epochs.

:func:`measure_ratio` times a loader and a step function apart and returns R, for
:func:`echoing.recommend`. :class:`EchoedDataset` echoes inside ``DataLoader`` workers,
for augmentation that must stay there (a factor fixed within an epoch, no counts on the
trainer: see :mod:`echoing.torch.workers`).

>>> import torch
>>> from echoing import torch as echo_torch
>>> batches = [torch.full((2,), i) for i in range(3)]
>>> stats = echo_torch.EchoStats()
>>> echoed = echo_torch.echo(batches, 2, stats=stats)
>>> [int(b[0]) for b in echoed]
[0, 0, 1, 1, 2, 2]
>>> stats.fresh, stats.emitted
(3, 6)
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Iterator, Optional, Union

try:
    import torch
except ImportError as error:  # pragma: no cover - exercised in a process without torch
    raise ImportError("echoing.torch needs PyTorch: install the extra with pip install -e '.[torch]' "
                      "(or pip install 'echoing[torch]')") from error
import numpy as np

from echoing._checks import check_int
from echoing._echo_groups import EchoGroups, LiveFactor, factor_value
from echoing.echo import _check_seed
from echoing.torch.rows import mix_rows as _mix_rows

__all__ = ["EchoStats", "EchoedDataset", "EchoedLoader", "Factor", "echo", "measure_ratio"]

# The version of the state's layout: a state of another layout is refused, not guessed at.
_STATE_VERSION = 1


def _factor_value(value, name: str) -> float:
    return factor_value(value, name, "echoing.torch.Factor")


class Factor(LiveFactor):
    """An echo factor that can change while training runs (the torch counterpart of a ``tf.Variable``).

    >>> factor = Factor(2.0)
    >>> factor.assign(3.5)
    >>> float(factor)
    3.5

    Raises:
      TypeError, ValueError: for a value that is not a finite number >= 1 (at construction
        and at :meth:`assign`), naming it.
    """

    _type = "echoing.torch.Factor"
    _workers = "DataLoader worker processes"
    _instead = "echo the loader's output, on the trainer"


class EchoStats:
    """Exact counts of one echo stage, over all its epochs: ``fresh`` (batches pulled from upstream) and ``emitted``.

    They are part of the stage's state: ``load_state_dict`` restores them with the position.

    >>> stats = EchoStats()
    >>> stats.fresh, stats.emitted
    (0, 0)
    """

    def __init__(self) -> None:
        self._loader: Optional["EchoedLoader"] = None

    @property
    def fresh(self) -> int:
        return 0 if self._loader is None else self._loader._count("fresh")

    @property
    def emitted(self) -> int:
        return 0 if self._loader is None else self._loader._count("emitted")

    def __repr__(self) -> str:
        return f"EchoStats(fresh={self.fresh}, emitted={self.emitted})"

    def __reduce__(self):
        raise TypeError("stats: echoing.torch.EchoStats cannot be sent to DataLoader worker processes, where the "
                        "counts would stay there: echo the loader's output, on the trainer")


def echo(loader: Iterable, factor: Union[float, Factor], *, shuffle_buffer_size: int = 0, seed: Optional[int] = None,
         stats: Optional[EchoStats] = None, transform: Optional[Callable[[Any], Any]] = None,
         mix_rows: bool = False) -> "EchoedLoader":
    """Emits each batch of ``loader`` about ``factor`` times (see the module docstring).

    Args:
      loader: any iterable of batches that can be iterated again for each epoch: a
        ``torch.utils.data.DataLoader``, a ``StatefulDataLoader``, a
        ``torchdata.nodes.Loader``, a list. (A generator is iterated once.)
      factor: the echo factor (>= 1), fixed, or a :class:`Factor` followed while it runs.
      shuffle_buffer_size: ``0`` emits a batch's copies side by side; above 0, copies are
        shuffled within windows of at least this many batches.
      seed: seeds the fractional draws and the shuffle (an int in ``[0, 2**63)``). Under
        ``torch.distributed`` it is required, and must be the same on every rank.
        ``None`` draws one per loader (kept in its state, so a restore is still exact).
      stats: an :class:`EchoStats` to count into.
      transform: a function run on every copy as it goes out, on the trainer: each copy
        of a batch is then transformed on its own. Echo before augmentation this way:
        the loader's workers read and decode, and a random crop and flip of the batch
        (on the device, where there is one) makes each copy different. The copy handed
        to the loop is the transform's output; the batch the loader made is never
        changed (the stage raises if the transform changes it in place). The transform's
        randomness is its own: seed a generator in it where a restore must repeat the
        same crops.

      mix_rows: ``True`` echoes examples, not batches: the rows of each group of copies
        (a window of at least ``shuffle_buffer_size`` copies of whole batches) are
        permuted together and cut back into batches of the same sizes
        (:func:`echoing.torch.rows.mix_rows`), so a batch mixes rows of several fresh
        batches and an example's copies land in different batches. Echo after
        augmentation this way. Every leaf of a batch must be a tensor whose first
        dimension is the rows; the batches handed out are new tensors. The counts stay
        in batches.

    Returns:
      An :class:`EchoedLoader`.

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.

    >>> echoed = echo(range(100), 1.5, seed=0)
    >>> copies = list(echoed)
    >>> sorted(set(copies)) == list(range(100)) and 130 < len(copies) < 170
    True
    """
    if isinstance(loader, (str, bytes, Mapping)) or not isinstance(loader, Iterable):
        raise TypeError(f"loader: expected an iterable of batches (a DataLoader, a StatefulDataLoader, a "
                        f"torchdata.nodes.Loader, a generator), got {type(loader).__name__}: {loader!r:.200}")
    if not isinstance(factor, Factor):
        _factor_value(factor, "factor")
    check_int("shuffle_buffer_size", shuffle_buffer_size, low=0)
    _check_seed(seed)
    if stats is not None and not isinstance(stats, EchoStats):
        raise TypeError(f"stats: expected an echoing.torch.EchoStats or None, got {type(stats).__name__}: {stats!r:.200}")
    if not isinstance(mix_rows, bool):
        raise TypeError(f"mix_rows: expected True or False, got {type(mix_rows).__name__}: {mix_rows!r:.200}")
    if transform is not None and not callable(transform):
        raise TypeError(f"transform: expected a function of one batch, or None, got {type(transform).__name__}: "
                        f"{transform!r:.200}")
    if seed is None and torch.distributed.is_available() and torch.distributed.is_initialized():
        raise ValueError("seed: None under torch.distributed, where each rank would draw its own copies and run "
                         "a different number of steps; give every rank the same int seed")
    return EchoedLoader(loader, factor, shuffle_buffer_size=int(shuffle_buffer_size),
                        seed=None if seed is None else int(seed), stats=stats, transform=transform,
                        mix_rows=mix_rows)


def _has_state(loader) -> bool:
    return callable(getattr(loader, "state_dict", None)) and callable(getattr(loader, "load_state_dict", None))


class EchoedLoader:
    """The echo stage over a loader; build it with :func:`echo`. Iterate it as the loader, once per epoch."""

    def __init__(self, loader: Iterable, factor: Union[float, Factor], *, shuffle_buffer_size: int,
                 seed: Optional[int], stats: Optional[EchoStats],
                 transform: Optional[Callable[[Any], Any]] = None, mix_rows: bool = False) -> None:
        self._loader = loader
        self._transform = transform
        self._mix_rows = mix_rows
        self._factor = factor
        self._live = isinstance(factor, Factor)
        self._shuffle_buffer_size = shuffle_buffer_size
        self._seed_setting = seed
        self._seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else seed
        self._stateful = _has_state(loader)
        if stats is not None:
            stats._loader = self  # The stage's counts.
        self._epoch = -1  # epochs begun
        self._done = {"fresh": 0, "emitted": 0}  # the counts of the epochs before the current one
        self._groups: Optional[EchoGroups] = None  # the current epoch's copies
        self._finished = False  # whether the current epoch has ended
        self._pending: Optional[dict] = None  # a loaded state, taken up by the next iterator

    # Settings and counts.

    def _settings(self) -> dict:
        return {"factor": "live" if self._live else float(self._factor),
                "shuffle_buffer_size": self._shuffle_buffer_size, "mix_rows": self._mix_rows}

    def _count(self, name: str) -> int:
        if self._pending is not None:  # Loaded, not yet iterated: the counts it was saved with.
            return self._pending["counts"][name]
        groups = self._groups
        current = 0 if groups is None else getattr(groups, name)
        return self._done[name] + current

    def __len__(self) -> int:
        if self._live or float(self._factor) != int(self._factor):
            raise TypeError(f"len: the echoed loader's length is known only for a fixed integer factor, not "
                            f"{self._factor!r}")
        try:
            return int(self._factor) * len(self._loader)
        except TypeError as error:
            raise TypeError(f"len: the loader {type(self._loader).__name__} has no length") from error

    # Iteration.

    def __iter__(self) -> Iterator[Any]:
        pending, self._pending = self._pending, None
        if pending is not None and not pending["finished"]:
            return self._resume(pending)
        if self._groups is not None:
            self._done = {name: self._count(name) for name in self._done}
        self._epoch += 1
        self._finished = False
        upstream = iter(self._loader)
        self._groups = self._new_groups(upstream)
        return self._emit(upstream)

    def _new_groups(self, upstream) -> EchoGroups:
        # Nothing in the groups refers back to this stage: a stage dropped mid-epoch frees
        # its upstream iterator (and a DataLoader's worker processes) at once, not at exit.
        factor, live = self._factor, self._live
        return EchoGroups(pull=lambda: next(upstream),
                          parent_state=self._loader.state_dict if self._stateful else (lambda: None),
                          factor=lambda: _current_factor(factor, live), shuffle_buffer_size=self._shuffle_buffer_size,
                          key=(self._seed, self._epoch), arrange=_mix_rows if self._mix_rows else None)

    def _resume(self, state: dict) -> Iterator[Any]:
        groups_state = state["groups"]
        self._finished = False
        if self._stateful:
            self._loader.load_state_dict(groups_state["parent"])
            upstream = iter(self._loader)
            self._groups = self._new_groups(upstream)
            self._groups.restore(groups_state, key=(self._seed, self._epoch))
        else:
            # No position to go back to: a new pass from the loader's beginning, with the
            # counts and the draws' position kept (the warning was given at the load).
            upstream = iter(self._loader)
            self._groups = self._new_groups(upstream)
            self._groups.restore({**groups_state, "position": 0,
                                  "emitted_before": groups_state["emitted_before"] + groups_state["position"]},
                                 key=(self._seed, self._epoch))
        return self._emit(upstream)

    def _emit(self, upstream) -> Iterator[Any]:
        groups, transform = self._groups, self._transform
        versions: dict[int, list[tuple[str, int]]] = {}
        group = -1
        while True:
            try:
                batch = next(groups)
            except StopIteration:
                self._finished = True
                return
            if groups.group != group:
                group, versions = groups.group, {}
            seen = versions.get(id(batch))
            now = _tensor_versions(batch)
            if seen is None:
                versions[id(batch)] = now
            elif seen != now:
                changed = next(path for (path, before), (_, after) in zip(seen, now) if before != after)
                raise RuntimeError(
                    f"batch: the tensor at {changed or 'the batch'} was changed in place after its copy went out, "
                    "and its next copy is the same tensor: echoed copies are references, not copies. Change the "
                    "loop (or the transform) to leave the batch as it is (x = x.float().div(255), not "
                    "x.div_(255)), or clone it first.")
            yield batch if transform is None else transform(batch)

    # Checkpoints: the Stateful protocol.

    def state_dict(self) -> dict:
        """The stage's state: the upstream's state where the current group began, the draws' position, the counts.

        No batch is in it. Take it between batches, as a ``DataLoader``'s.
        """
        groups = None if self._groups is None else self._groups.state()
        return {"version": _STATE_VERSION, "settings": self._settings(), "seed": self._seed, "epoch": self._epoch,
                "done": dict(self._done), "groups": groups, "finished": self._finished,
                "counts": {name: self._count(name) for name in self._done},
                "factor_value": self._factor.value if self._live else None}

    def load_state_dict(self, state: dict) -> None:
        """Takes up ``state`` (from :meth:`state_dict`); the next ``for`` goes on from there.

        Raises:
          ValueError: for a state of another layout, or saved with other settings (named),
            or with another seed than the one this stage was given.
        """
        if not isinstance(state, Mapping) or state.get("version") != _STATE_VERSION:
            raise ValueError(f"state: expected a state_dict() of echoing.torch.EchoedLoader (version "
                             f"{_STATE_VERSION}), got {state!r:.200}")
        for name, value in self._settings().items():
            saved = state["settings"].get(name, False if name == "mix_rows" else None)  # mix_rows came later.
            if saved != value:
                raise ValueError(f"{name}: the state was saved with {name}={saved!r}, this stage has {value!r}; "
                                 "restore it into a stage built with the same settings")
        if self._seed_setting is not None and state["seed"] != self._seed_setting:
            raise ValueError(f"seed: the state was saved with seed={state['seed']!r}, this stage has "
                             f"{self._seed_setting!r}")
        if state["groups"] is not None and state["groups"]["parent"] is None and self._stateful:
            raise ValueError("state: saved over a loader without a state of its own; this loader has one, and "
                             "cannot be set to the saved position")
        if state["groups"] is not None and not self._stateful:
            warnings.warn(
                f"loader: {type(self._loader).__name__} has no state_dict()/load_state_dict(), so its position cannot "
                "be restored: the counts and the draws go on from the state, and the next pass starts from the "
                "loader's beginning. Use torchdata's StatefulDataLoader for an exact resume.", stacklevel=2)
        self._seed, self._epoch, self._done = state["seed"], state["epoch"], dict(state["done"])
        if self._live:
            self._factor.assign(state["factor_value"])
        self._groups = None
        if state["groups"] is None:  # Saved before its first batch: the next for begins its next epoch.
            self._pending = None
        elif state["finished"]:
            # The epoch had ended (its last group found the upstream at its end, and took
            # the upstream's state there): its counts are done, and the next for begins
            # the next epoch.
            groups = state["groups"]
            self._done = {"fresh": self._done["fresh"] + groups["group_fresh"],
                          "emitted": self._done["emitted"] + groups["emitted_before"] + groups["position"]}
            if self._stateful:
                self._loader.load_state_dict(groups["parent"])
            self._pending = None
        else:
            self._pending = dict(state)

    def __repr__(self) -> str:
        return (f"EchoedLoader({type(self._loader).__name__}, factor={self._factor!r}, "
                f"shuffle_buffer_size={self._shuffle_buffer_size})")


def _current_factor(factor: Union[float, Factor], live: bool) -> float:
    if live:
        # Checked again here: a value set around assign() must not pass unseen.
        return _factor_value(factor.value, "factor (current value of the echoing.torch.Factor)")
    return float(factor)


def _tensor_versions(batch, path: str = "") -> list[tuple[str, int]]:
    """Each tensor in ``batch`` with its count of in-place changes, by its path."""
    if isinstance(batch, torch.Tensor):
        return [(path, batch._version)]
    if isinstance(batch, Mapping):
        return [v for key, value in batch.items() for v in _tensor_versions(value, f"{path}[{key!r}]")]
    if isinstance(batch, (list, tuple)):
        return [v for index, value in enumerate(batch) for v in _tensor_versions(value, f"{path}[{index}]")]
    return []


from echoing.torch.measure import measure_ratio  # noqa: E402  (it needs nothing of this module)
from echoing.torch.workers import EchoedDataset  # noqa: E402  (echo in DataLoader workers)
