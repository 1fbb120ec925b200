"""Echo inside ``DataLoader`` workers: :class:`EchoedDataset`, for augmentation that must stay there.

:func:`echoing.torch.echo` echoes on the trainer, after the workers: the cheapest place,
and the one a live factor, the counts and a checkpoint reach. Where augmentation must run
in the workers (it is on the CPU and too slow for the trainer's process), wrap the
dataset instead: each worker reads and decodes an element once, then yields ``e`` copies
of it, each through ``transform`` (the augmentation) on its own, from a shuffle buffer of
``shuffle_buffer_size`` copies, so the copies of an element seldom share a batch.

What reaches the workers, and what does not:

* **The factor is fixed within an epoch.** A worker runs on a copy of the dataset taken
  when the ``DataLoader``'s iterator starts, so :attr:`EchoedDataset.factor` set on the
  trainer reaches the workers at the next epoch's iterator, and only with
  ``persistent_workers=False`` (the default); an :class:`echoing.torch.Factor` is refused.
  A controller that changes e every few hundred steps needs the trainer-side stage.
* **No counts on the trainer.** The workers' counts stay in the workers; the law, which
  reads the fresh count, needs the trainer-side stage.
* **No mid-epoch resume.** The copies drawn and the shuffle buffer live in the workers;
  set :meth:`set_epoch` at each epoch (as with ``DistributedSampler``) so that each epoch
  draws its own copies, and resume at an epoch's start.

Sharding is the wrapped dataset's as without echo: a map-style dataset is split by worker
here (worker ``w`` of ``n`` reads indices ``w, w + n, ...``), an ``IterableDataset``
shards itself (``torch.utils.data.get_worker_info()``).

>>> import torch
>>> from echoing import torch as echo_torch
>>> dataset = echo_torch.EchoedDataset(list(range(4)), 2, shuffle_buffer_size=0, seed=0)
>>> [int(x) for x in torch.utils.data.DataLoader(dataset, batch_size=None)]
[0, 0, 1, 1, 2, 2, 3, 3]
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Optional

import numpy as np
import torch

from echoing._checks import check_int
from echoing._echo_groups import LiveFactor, factor_value
from echoing.echo import _check_seed

__all__ = ["EchoedDataset"]


class EchoedDataset(torch.utils.data.IterableDataset):
    """A dataset whose elements come out about ``factor`` times each, drawn and shuffled in the worker that reads them.

    Args:
      dataset: a map-style dataset (``__getitem__`` and ``__len__``) or an ``IterableDataset``.
      factor: the echo factor (a number >= 1; fixed within an epoch, see the module docstring).
      transform: a function run on each copy in the worker (the augmentation), or ``None``.
      shuffle_buffer_size: copies held in each worker's shuffle buffer (0: copies adjacent).
      seed: seeds the fractional draws and the shuffle, with the epoch and the worker's id.

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.
    """

    def __init__(self, dataset: Any, factor: float, *, transform: Optional[Callable[[Any], Any]] = None,
                 shuffle_buffer_size: int = 64, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(dataset, torch.utils.data.IterableDataset) and not (
                callable(getattr(dataset, "__getitem__", None)) and callable(getattr(dataset, "__len__", None))):
            raise TypeError(f"dataset: expected a map-style dataset (__getitem__ and __len__) or an IterableDataset, "
                            f"got {type(dataset).__name__}: {dataset!r:.200}")
        if transform is not None and not callable(transform):
            raise TypeError(f"transform: expected a function of one element, or None, got {type(transform).__name__}: "
                            f"{transform!r:.200}")
        check_int("shuffle_buffer_size", shuffle_buffer_size, low=0)
        if seed is None:
            raise TypeError("seed: expected an int in [0, 2**63), got None: every worker and every rank must draw "
                            "from the same seed")
        _check_seed(seed)
        self.dataset = dataset
        self.factor = factor  # Checked by the property.
        self.transform = transform
        self.shuffle_buffer_size = int(shuffle_buffer_size)
        self.seed = int(seed)
        self.epoch = 0

    @property
    def factor(self) -> float:
        """The echo factor; set on the trainer, it reaches the workers at the next epoch's iterator."""
        return self._factor

    @factor.setter
    def factor(self, value: float) -> None:
        if isinstance(value, LiveFactor):
            raise TypeError(f"factor: a live {type(value).__name__} cannot reach DataLoader workers; give a number "
                            "(set EchoedDataset.factor between epochs), or echo on the trainer with echoing.torch.echo")
        self._factor = factor_value(value, "factor", "echoing.torch.Factor")

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iterator draw the copies and the shuffle of ``epoch`` (an int >= 0)."""
        check_int("epoch", epoch, low=0)
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if isinstance(self.dataset, torch.utils.data.IterableDataset):
            elements = iter(self.dataset)
        else:
            elements = (self.dataset[index] for index in range(worker, len(self.dataset), workers))
        rng = np.random.default_rng([self.seed, self.epoch, worker])
        whole, part = math.floor(self._factor), self._factor - math.floor(self._factor)
        buffer: list = []
        for element in elements:
            copies = whole + 1 if part and rng.random() < part else whole
            for _ in range(copies):
                copy = element if self.transform is None else self.transform(element)
                if self.shuffle_buffer_size == 0:
                    yield copy
                    continue
                buffer.append(copy)
                if len(buffer) >= self.shuffle_buffer_size:
                    yield buffer.pop(int(rng.integers(len(buffer))))
        while buffer:
            yield buffer.pop(int(rng.integers(len(buffer))))
