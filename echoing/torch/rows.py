"""Re-mixing the rows of a group of batches into new batches of the same sizes: example echo after augmentation.

A batch is any structure (dicts, lists, tuples, named tuples) of tensors whose first
dimension is the batch's rows. :func:`mix_rows` takes the copies of a group (a window of
copies of whole batches, from :func:`echoing.torch.echo`), stacks each tensor's rows
across them, permutes the rows with the generator it is given, and cuts them back into
batches of the sizes the group had: every row goes out as often as before, and a batch
now mixes rows of several fresh batches. The new batches are new tensors.

>>> import numpy as np, torch
>>> copies = [{"id": torch.tensor([0, 1])}, {"id": torch.tensor([0, 1])}, {"id": torch.tensor([2, 3])}]
>>> mixed = mix_rows(copies, np.random.default_rng(0))
>>> [len(b["id"]) for b in mixed], sorted(torch.cat([b["id"] for b in mixed]).tolist())
([2, 2, 2], [0, 0, 1, 1, 2, 3])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import numpy as np
import torch

__all__ = ["mix_rows"]


def mix_rows(copies: list, rng: np.random.Generator) -> list:
    """The rows of ``copies`` permuted by ``rng`` and cut into batches of the copies' sizes, in order.

    Raises:
      TypeError: a leaf that is not a tensor, or batches of different structures, naming its path.
      ValueError: a batch whose tensors have different numbers of rows, naming the path.
    """
    sizes = [_rows(copy) for copy in copies]
    order = torch.from_numpy(rng.permutation(sum(sizes)))
    mixed = _map_leaves(lambda *leaves: torch.cat(leaves)[order], copies, path="")
    starts = np.cumsum([0] + sizes[:-1])
    return [_map_leaves(lambda leaf, start=start, size=size: leaf[start:start + size], [mixed], path="")
            for start, size in zip(starts.tolist(), sizes)]


def _rows(batch: Any) -> int:
    """The rows of ``batch``: the first dimension its tensors share."""
    found = _first_dims(batch, "")
    if not found:
        raise TypeError("batch: mix_rows needs tensors with a first dimension of rows; the batch has none")
    rows = {size for _, size in found}
    if len(rows) != 1:
        path, size = next((p, s) for p, s in found if s != found[0][1])
        raise ValueError(f"batch: mix_rows needs every tensor of a batch to have the same rows; the tensor at "
                         f"{found[0][0] or 'the batch'} has {found[0][1]} and the one at {path} has {size}")
    return rows.pop()


def _first_dims(batch: Any, path: str) -> list[tuple[str, int]]:
    if isinstance(batch, torch.Tensor):
        if batch.dim() == 0:
            raise TypeError(f"batch: mix_rows needs tensors with a first dimension of rows; the tensor at "
                            f"{path or 'the batch'} is a scalar")
        return [(path, batch.shape[0])]
    if isinstance(batch, Mapping):
        return [found for key, value in batch.items() for found in _first_dims(value, f"{path}[{key!r}]")]
    if isinstance(batch, (list, tuple)):
        return [found for index, value in enumerate(batch) for found in _first_dims(value, f"{path}[{index}]")]
    raise TypeError(f"batch: mix_rows needs a structure of tensors; at {path or 'the batch'} it found "
                    f"{type(batch).__name__}: {batch!r:.100}")


def _map_leaves(function: Callable[..., torch.Tensor], batches: list, path: str) -> Any:
    """``function`` of the tensors at each path of ``batches`` (all of one structure), in that structure."""
    first = batches[0]
    if isinstance(first, torch.Tensor):
        if not all(isinstance(b, torch.Tensor) for b in batches):
            raise TypeError(f"batch: mix_rows needs batches of one structure; at {path or 'the batch'} they differ")
        return function(*batches)
    if isinstance(first, Mapping):
        if any(not isinstance(b, Mapping) or b.keys() != first.keys() for b in batches):
            raise TypeError(f"batch: mix_rows needs batches of one structure; at {path or 'the batch'} the keys differ")
        return type(first)({key: _map_leaves(function, [b[key] for b in batches], f"{path}[{key!r}]")
                            for key in first})
    if isinstance(first, (list, tuple)):
        if any(not isinstance(b, (list, tuple)) or len(b) != len(first) for b in batches):
            raise TypeError(f"batch: mix_rows needs batches of one structure; at {path or 'the batch'} the lengths "
                            "differ")
        items = [_map_leaves(function, [b[index] for b in batches], f"{path}[{index}]") for index in range(len(first))]
        return type(first)(*items) if hasattr(first, "_fields") else type(first)(items)
    raise TypeError(f"batch: mix_rows needs a structure of tensors; at {path or 'the batch'} it found "
                    f"{type(first).__name__}: {first!r:.100}")
