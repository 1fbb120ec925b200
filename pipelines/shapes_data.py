"""Embedded image data: ten classes of shapes in 32x32 RGB, generated, JPEG-encoded, cached.

The class is carried by the outline of a shape only. Everything else is random per image:
position, scale, rotation, the shape's colour, a background mixing two colours through a
grating and smooth noise, small clutter blobs behind the shape, and pixel noise. So colour
or any single pixel says nothing about the class, random crops and flips still leave it
recognisable (augmentation helps rather than hurts), and a linear model on raw pixels does
poorly while a small convolutional network does well.

Images are written once as JPEG-encoded ``tf.train.Example`` records in TFRecord shards
under the cache directory (:mod:`pipelines.cache`), so that reading and decoding are real
work, as with image data on disk. Every shard is generated from its own seed, so the data
is the same in every process and on every machine with the same NumPy.
"""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from pipelines import cache

CLASS_NAMES = ("disk", "triangle", "square", "flower", "ring", "plus", "half_disk", "crescent", "two_dots", "ell")
IMAGE_SIZE = 32
NUM_CLASSES = len(CLASS_NAMES)
DEFAULT_TRAIN_EXAMPLES = 100_000
DEFAULT_EVAL_EXAMPLES = 10_000
_VERSION = 1  # Bump when the generator changes, so that old caches are not reused.
_SPLIT_SEEDS = {"train": 0, "eval": 1}
_SHARD_EXAMPLES = 5_000
_JPEG_QUALITY = 90


def render(labels: np.ndarray, rng: np.random.Generator, size: int = IMAGE_SIZE) -> np.ndarray:
    """Draws one image per label; returns uint8 ``[n, size, size, 3]``.

    Example:

    >>> images = render(np.arange(10), np.random.default_rng(0))
    >>> images.shape, images.dtype
    ((10, 32, 32, 3), dtype('uint8'))
    """
    labels = np.asarray(labels)
    n = len(labels)
    grid = np.arange(size, dtype=np.float32) + 0.5
    ys, xs = np.meshgrid(grid, grid, indexing="ij")
    image = _background(n, rng, ys, xs, size)
    image = _clutter(image, rng, ys, xs, size)

    scale = size / 32
    center_x, center_y = (rng.uniform(10, 22, (2, n)) * scale).astype(np.float32)
    radius = (rng.uniform(6.5, 11, n) * scale).astype(np.float32)[:, None, None]
    angle = rng.uniform(0, 2 * np.pi, n).astype(np.float32)[:, None, None]
    dx = xs[None] - center_x[:, None, None]
    dy = ys[None] - center_y[:, None, None]
    u = dx * np.cos(angle) + dy * np.sin(angle)  # Coordinates in the shape's own frame.
    v = -dx * np.sin(angle) + dy * np.cos(angle)
    margin = np.empty((n, size, size), np.float32)
    for label, shape in enumerate(_SHAPES):
        chosen = labels == label
        if chosen.any():
            margin[chosen] = shape(u[chosen], v[chosen], radius[chosen])
    alpha = np.clip(margin + 0.5, 0, 1)[..., None]  # Anti-aliased edge about one pixel wide.

    colour = _contrasting_colour(image.mean(axis=(1, 2)), rng)
    image = image * (1 - alpha) + colour[:, None, None, :] * alpha
    image += rng.normal(0, 1, image.shape).astype(np.float32) * rng.uniform(0.01, 0.06, (n, 1, 1, 1)).astype(np.float32)
    return np.clip(image * 255 + 0.5, 0, 255).astype(np.uint8)


def _background(n, rng, ys, xs, size):
    """Two random colours mixed through a grating and smooth noise."""
    frequency = rng.uniform(1, 6, (n, 1, 1)) / size
    direction = rng.uniform(0, 2 * np.pi, (n, 1, 1))
    phase = rng.uniform(0, 2 * np.pi, (n, 1, 1))
    grating = 0.5 + 0.5 * np.sin(2 * np.pi * frequency * (xs * np.cos(direction) + ys * np.sin(direction)) + phase)
    coarse = rng.random((n, 5, 5))
    up = _interpolation_matrix(5, size)
    smooth = np.einsum("ia,nab,jb->nij", up, coarse, up)
    weight = rng.random((n, 1, 1))
    texture = (weight * grating + (1 - weight) * smooth).astype(np.float32)[..., None]
    first, second = rng.random((2, n, 1, 1, 3)).astype(np.float32)
    return first * (1 - texture) + second * texture


def _clutter(image, rng, ys, xs, size, blobs: int = 3):
    """Small random dots behind the shape, present with probability 0.6 each."""
    n = len(image)
    for _ in range(blobs):
        cx, cy = rng.uniform(0, size, (2, n, 1, 1))
        radius = rng.uniform(1.0, 2.5, (n, 1, 1)) * size / 32
        present = rng.random((n, 1, 1)) < 0.6
        alpha = (np.clip(radius - np.hypot(xs - cx, ys - cy) + 0.5, 0, 1) * present).astype(np.float32)[..., None]
        colour = rng.random((n, 1, 1, 3)).astype(np.float32)
        image = image * (1 - alpha) + colour * alpha
    return image


def _contrasting_colour(background_mean, rng):
    """A random colour whose luminance differs from the background's by at least 0.25."""
    colour = rng.random(background_mean.shape).astype(np.float32)
    luminance = np.array([0.299, 0.587, 0.114], np.float32)
    too_close = np.abs((colour - background_mean) @ luminance) < 0.25
    dark_background = (background_mean @ luminance) < 0.5
    brighter = 0.6 + 0.4 * colour
    darker = 0.35 * colour
    return np.where((too_close & dark_background)[:, None], brighter, np.where(too_close[:, None], darker, colour))


def _interpolation_matrix(points, size):
    """Linear interpolation from ``points`` samples to ``size`` pixels."""
    position = np.linspace(0, points - 1, size)
    lower = np.clip(np.floor(position).astype(int), 0, points - 2)
    frac = position - lower
    matrix = np.zeros((size, points))
    matrix[np.arange(size), lower] = 1 - frac
    matrix[np.arange(size), lower + 1] = frac
    return matrix


# Each shape is a "margin" field in pixels: positive inside, negative outside, so that
# union is max, intersection is min, and clip(margin + 0.5, 0, 1) is an anti-aliased edge.
def _box(u, v, half_width, half_height):
    return np.minimum(half_width - np.abs(u), half_height - np.abs(v))


def _polygon(u, v, r, sides):
    apothem = r * np.cos(np.pi / sides)
    angles = 2 * np.pi * np.arange(sides) / sides
    projection = np.max([u * np.cos(a) + v * np.sin(a) for a in angles], axis=0)
    return apothem - projection


_SHAPES = (
    lambda u, v, r: r - np.hypot(u, v),  # disk
    lambda u, v, r: _polygon(u, v, 1.15 * r, 3),  # triangle
    lambda u, v, r: _polygon(u, v, r, 4),  # square
    lambda u, v, r: r * (0.62 + 0.38 * np.cos(5 * np.arctan2(v, u))) - np.hypot(u, v),  # flower
    lambda u, v, r: np.minimum(r - np.hypot(u, v), np.hypot(u, v) - 0.55 * r),  # ring
    lambda u, v, r: np.maximum(_box(u, v, 0.28 * r, r), _box(u, v, r, 0.28 * r)),  # plus
    lambda u, v, r: np.minimum(r - np.hypot(u, v + 0.4 * r), v + 0.4 * r),  # half_disk
    lambda u, v, r: np.minimum(r - np.hypot(u, v), np.hypot(u - 0.5 * r, v) - 0.8 * r),  # crescent
    lambda u, v, r: np.maximum(0.42 * r - np.hypot(u - 0.55 * r, v), 0.42 * r - np.hypot(u + 0.55 * r, v)),  # two_dots
    lambda u, v, r: np.maximum(_box(u + 0.45 * r, v, 0.28 * r, r), _box(u, v - 0.72 * r, 0.73 * r, 0.28 * r)),  # ell
)


def generate_split(split: str, num_examples: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of ``split`` examples ``[start, start + num_examples)``, as stored.

    Generation goes shard by shard, each shard from its own seed, so any range is the
    same whichever way the data is cut.
    """
    _check_split(split)
    images, labels = [], []
    for shard in range(start // _SHARD_EXAMPLES, (start + num_examples - 1) // _SHARD_EXAMPLES + 1):
        shard_images, shard_labels = _generate_shard(split, shard)
        lo = max(start - shard * _SHARD_EXAMPLES, 0)
        hi = min(start + num_examples - shard * _SHARD_EXAMPLES, _SHARD_EXAMPLES)
        images.append(shard_images[lo:hi])
        labels.append(shard_labels[lo:hi])
    return np.concatenate(images), np.concatenate(labels)


def _generate_shard(split: str, shard: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([_VERSION, _SPLIT_SEEDS[split], shard])
    labels = rng.permutation(np.arange(_SHARD_EXAMPLES) % NUM_CLASSES)  # Balanced classes.
    return render(labels, rng), labels.astype(np.int64)


def tfrecord_files(split: str, num_examples: Optional[int] = None, cache_dir: Optional[str | os.PathLike] = None) -> list[str]:
    """The TFRecord shards of ``split`` (``"train"`` or ``"eval"``), generating them on first use.

    Example:

    >>> import tempfile
    >>> files = tfrecord_files("eval", 20, cache_dir=tempfile.mkdtemp())
    >>> len(files), files[0].endswith(".tfrecord")
    (1, True)

    Args:
      split: ``"train"`` or ``"eval"``.
      num_examples: examples in the split (default 100,000 for train, 10,000 for eval).
      cache_dir: where to write them; default ``$ECHOING_CACHE_DIR`` or ``~/.cache/echoing``.
    """
    _check_split(split)
    if num_examples is None:
        num_examples = DEFAULT_TRAIN_EXAMPLES if split == "train" else DEFAULT_EVAL_EXAMPLES
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
        raise ValueError(f"num_examples: expected a positive int, got {num_examples!r}")
    name = f"shapes32-v{_VERSION}-{split}-{num_examples}"

    def write_shard(directory: Path, shard: int) -> None:
        start = shard * _SHARD_EXAMPLES
        images, labels = generate_split(split, min(_SHARD_EXAMPLES, num_examples - start), start)
        with tf.io.TFRecordWriter(str(directory / f"{split}-{shard:05d}.tfrecord")) as writer:
            for image, label in zip(images, labels):
                writer.write(_example(image, label))

    def build(directory: Path) -> None:
        # Shards are independent (each from its own seed), so they are generated on every
        # core: NumPy's array operations release the GIL. Show the progress (tqdm stays
        # silent when stderr is not a terminal).
        shards = range(-(-num_examples // _SHARD_EXAMPLES))
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            written = pool.map(lambda shard: write_shard(directory, shard), shards)
            for _ in tqdm(written, total=len(shards), desc=f"generating {name} (once)", unit="shard", disable=None):
                pass

    directory = cache.cached_directory(cache.cache_root(cache_dir), name, build)
    return sorted(str(path) for path in directory.glob(f"{split}-*.tfrecord"))


def _example(image: np.ndarray, label: int) -> bytes:
    jpeg = tf.io.encode_jpeg(image, quality=_JPEG_QUALITY).numpy()
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    # deterministic=True: protobuf map order otherwise varies between processes.
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def parse(record: tf.Tensor) -> dict[str, tf.Tensor]:
    """One serialized record to ``{"image": JPEG bytes, "label": int64}``."""
    return tf.io.parse_single_example(record, FEATURES)


def _check_split(split: str) -> None:
    if split not in _SPLIT_SEEDS:
        raise ValueError(f"split: expected one of {tuple(_SPLIT_SEEDS)}, got {split!r}")
