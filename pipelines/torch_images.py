"""The image pipeline in PyTorch: the embedded shapes as JPEG bytes, decoded with PIL and augmented in ``DataLoader`` workers.

The same embedded data as :mod:`pipelines.image` (:mod:`pipelines.shapes_data`), kept as
JPEG bytes (quality 90, as its TFRecords) so that decoding is a real step of the
pipeline. A worker reads an example at a paced rate (``read_rate`` examples per second
over all workers: slow storage), decodes it with PIL, and augments it in torch with a
random crop (4 pixels of padding) and a random flip. The trainer gets batches of
``float32 [B, 3, 32, 32]`` images, normalized, and ``int64 [B]`` labels.

A run is deterministic per seed: the sampler and the workers' augmentation draw from
generators seeded from it.

Example (a small split, unthrottled):

>>> import tempfile
>>> config = TorchImageConfig(num_train_examples=256, batch_size=8, num_workers=0, cache_dir=tempfile.mkdtemp())
>>> images, labels = next(iter(train_loader(config)))
>>> tuple(images.shape), images.dtype, tuple(labels.shape)
((8, 3, 32, 32), torch.float32, (8,))
"""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from PIL import Image

from pipelines import cache

IMAGE_SIZE = 32
_PAD = 4
_JPEG_QUALITY = 90  # as pipelines/shapes_data.py stores them
# Per-channel mean and standard deviation of ImageNet in [0, 1] pixels, as pipelines/image.py.
_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
_STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


@dataclasses.dataclass(frozen=True)
class TorchImageConfig:
    """The PyTorch image pipeline's settings.

    Attributes:
      num_train_examples: embedded training examples (the first of the training split).
      num_eval_examples: embedded held-out examples.
      batch_size: examples per batch.
      read_rate: examples per second the storage delivers, over all workers (``None``: unthrottled).
      num_workers: ``DataLoader`` worker processes (0: in the trainer's process).
      seed: the sampler's and the augmentation's seed.
      cache_dir: where the encoded data is kept (``None``: the pipelines' default).
    """

    num_train_examples: int = 20_000
    num_eval_examples: int = 2_000
    batch_size: int = 64
    read_rate: Optional[float] = None
    num_workers: int = 1
    seed: int = 0
    cache_dir: Optional[str] = None

    def __post_init__(self):
        for name in ("num_train_examples", "num_eval_examples", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an int of at least 1, got {value!r}")
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise ValueError(f"num_workers: expected an int of at least 0, got {self.num_workers!r}")
        if self.read_rate is not None and not (isinstance(self.read_rate, (int, float)) and self.read_rate > 0):
            raise ValueError(f"read_rate: expected a number above 0 or None, got {self.read_rate!r}")


def encoded_split(split: str, num_examples: int, cache_dir: Optional[str] = None) -> tuple[list, np.ndarray]:
    """JPEG bytes and labels of the first ``num_examples`` of ``split``, encoded once and cached."""
    def build(directory: Path) -> None:
        from pipelines import shapes_data  # Imports TensorFlow: only to generate, once.

        images, labels = shapes_data.generate_split(split, num_examples)
        encoded = []
        for image in images:
            out = io.BytesIO()
            Image.fromarray(image).save(out, format="JPEG", quality=_JPEG_QUALITY)
            encoded.append(np.frombuffer(out.getvalue(), np.uint8))
        lengths = np.array([len(e) for e in encoded], np.int64)
        np.savez(directory / "data.npz", bytes=np.concatenate(encoded), lengths=lengths, labels=labels)

    directory = cache.cached_directory(cache.cache_root(cache_dir), f"shapes-jpeg-{split}-{num_examples}", build)
    with np.load(directory / "data.npz") as data:
        flat, lengths, labels = data["bytes"], data["lengths"], data["labels"]
    ends = np.cumsum(lengths)
    return [flat[end - length:end].tobytes() for end, length in zip(ends, lengths)], labels


def decode(data: bytes) -> torch.Tensor:
    """JPEG bytes to ``uint8 [3, H, W]`` with PIL."""
    with Image.open(io.BytesIO(data)) as image:
        array = np.asarray(image.convert("RGB"))
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


def augment(image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A random crop of the image padded by 4 pixels (reflected), and a random left-right flip."""
    padded = torch.nn.functional.pad(image[None].float(), (_PAD,) * 4, mode="reflect")[0]
    top, left = (int(v) for v in torch.randint(0, 2 * _PAD + 1, (2,), generator=generator))
    crop = padded[:, top:top + IMAGE_SIZE, left:left + IMAGE_SIZE]
    if torch.rand((), generator=generator) < 0.5:
        crop = crop.flip(-1)
    return crop


def normalize(image: torch.Tensor) -> torch.Tensor:
    """``[0, 255]`` pixels to the ImageNet-normalized scale, ``float32``."""
    return (image.float() / 255 - _MEAN) / _STD


class _Pacer:
    """Paces reads to ``rate`` per second in one process, as one link of slow storage: each read books ``1 / rate`` s."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next = None

    def wait(self) -> None:
        now = time.monotonic()
        if self.next is None or now - self.next > 0.05:
            self.next = now  # An idle link does not bank bandwidth (as pipelines/slow_storage.py).
        if self.next > now:
            time.sleep(self.next - now)
        self.next += self.interval


class EncodedImages(torch.utils.data.Dataset):
    """Map-style: example ``i`` read at the paced rate, decoded with PIL, augmented (training) and normalized."""

    def __init__(self, encoded: list, labels: np.ndarray, *, train: bool, read_rate: Optional[float] = None,
                 seed: int = 0) -> None:
        self.encoded, self.labels, self.train = encoded, torch.from_numpy(labels), train
        self.read_rate, self.seed = read_rate, seed
        self._pacer: Optional[_Pacer] = None
        self._generator: Optional[torch.Generator] = None

    def __len__(self) -> int:
        return len(self.encoded)

    def start_worker(self, worker_id: int, num_workers: int) -> None:
        """Each worker paces its share of the rate and augments from its own seeded generator."""
        if self.read_rate is not None:
            self._pacer = _Pacer(self.read_rate / max(1, num_workers))
        self._generator = torch.Generator().manual_seed(self.seed * 1_000 + worker_id)

    def __getitem__(self, index: int):
        if self._generator is None:
            self.start_worker(0, 1)  # num_workers=0: the trainer's process reads.
        if self._pacer is not None:
            self._pacer.wait()
        image = decode(self.encoded[index])
        if self.train:
            image = augment(image, self._generator)
        return normalize(image), self.labels[index]


def _start_worker(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    torch.set_num_threads(1)  # A worker decodes one image at a time; it must not take the trainer's cores.
    info.dataset.start_worker(worker_id, info.num_workers)


def train_dataset(config: TorchImageConfig) -> EncodedImages:
    encoded, labels = encoded_split("train", config.num_train_examples, config.cache_dir)
    return EncodedImages(encoded, labels, train=True, read_rate=config.read_rate, seed=config.seed)


def loader_settings(config: TorchImageConfig) -> dict:
    """The ``DataLoader`` keywords of the training loader (also for loaders built around the dataset, as MONAI's)."""
    workers = config.num_workers
    return dict(batch_size=config.batch_size, shuffle=True, drop_last=True, num_workers=workers,
                generator=torch.Generator().manual_seed(config.seed), worker_init_fn=_start_worker if workers else None,
                persistent_workers=workers > 0, prefetch_factor=2 if workers else None)


def train_loader(config: TorchImageConfig) -> torch.utils.data.DataLoader:
    """The training batches, reshuffled every epoch; one ``for`` over it is one epoch."""
    return torch.utils.data.DataLoader(train_dataset(config), **loader_settings(config))


def eval_batches(config: TorchImageConfig, batch_size: int = 500) -> list:
    """The held-out split, decoded and normalized once, in batches (not throttled: evaluation is not timed)."""
    encoded, labels = encoded_split("eval", config.num_eval_examples, config.cache_dir)
    dataset = EncodedImages(encoded, labels, train=False)
    images = torch.stack([dataset[i][0] for i in range(len(dataset))])
    targets = torch.from_numpy(labels)
    return [(images[i:i + batch_size], targets[i:i + batch_size]) for i in range(0, len(images), batch_size)]


def endless(loader):
    """The loader's batches epoch after epoch, as one iterator (a training run counts steps, not epochs)."""
    while True:
        yield from loader

