"""The ResNet image input pipeline, with echo points before and after augmentation and after batching.

Sources: ``"shapes"`` (embedded, generated on first use, no download; see
:mod:`pipelines.shapes_data`), and the ``tensorflow-datasets`` sets ``"cifar10"``,
``"imagenet2012"`` and ``"imagenette"`` when they are prepared in ``data_dir``. All are read
as encoded images (tfds with ``SkipDecoding``) so that decoding is a real pipeline step.

Example (embedded data, a small split):

>>> import tempfile
>>> config = ImagePipelineConfig(source="shapes", num_train_examples=300, batch_size=8,
...                              cache_dir=tempfile.mkdtemp(), seed=0,
...                              echo=EchoConfig("before_augment", factor=2))
>>> images, labels = next(iter(train_dataset(config)))
>>> images.shape, images.dtype.name, labels.shape
(TensorShape([8, 32, 32, 3]), 'float32', TensorShape([8]))
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

import tensorflow as tf

import echoing
from pipelines import shapes_data
from pipelines.slow_storage import sleep_per_record, throttle
from pipelines.staged import (AFTER_AUGMENT, AFTER_BATCH, BATCH, BEFORE_AUGMENT, PREFETCH, REPEAT, SERVICE, SHUFFLE,
                              EchoConfig, EchoHere, PipelineConfig, Stage, echo_points, run_stages, stream_seed)

TFDS_SOURCES = {"cifar10": 32, "imagenet2012": 224, "imagenette": 224}  # name -> training image size
SOURCES = ("shapes",) + tuple(TFDS_SOURCES)
# Per-channel mean and standard deviation of ImageNet in [0, 1] pixels; the usual
# normalisation for ResNets, applied to every source so that models see one scale.
_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)
_AUTOTUNE = tf.data.AUTOTUNE


def read(config: ImagePipelineConfig, split: str, shuffle_files: bool) -> tf.data.Dataset:
    """Records of ``{"image": encoded bytes, "label": int64}`` from the configured source."""
    if config.source == "shapes":
        count = config.num_train_examples if split == "train" else config.num_eval_examples
        files = shapes_data.tfrecord_files(split, count, cache_dir=config.cache_dir)
        ds = tf.data.Dataset.from_tensor_slices(files)
        if shuffle_files:
            ds = ds.shuffle(len(files), seed=config.seed, reshuffle_each_iteration=True)
        # Sequential over shards: one reader, like one storage link (the throttle models its rate).
        ds = ds.flat_map(tf.data.TFRecordDataset)
        if config.read_rate is not None:
            ds = ds.apply(_slow_read(config))
        return ds.map(shapes_data.parse, num_parallel_calls=_AUTOTUNE)

    import tensorflow_datasets as tfds

    tfds_split = {"train": "train", "eval": "test" if config.source == "cifar10" else "validation"}[split]
    ds = tfds.load(
        config.source,
        split=tfds_split,
        data_dir=config.data_dir,
        shuffle_files=shuffle_files,
        decoders={"image": tfds.decode.SkipDecoding()},
        read_config=tfds.ReadConfig(shuffle_seed=config.seed),
        download=False,
    )
    if config.read_rate is not None:
        ds = ds.apply(_slow_read(config))
    return ds.map(lambda record: {"image": record["image"], "label": record["label"]})


def decode(record: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
    """Encoded image to float32 ``[h, w, 3]`` in [0, 1]; label to int64."""
    image = tf.io.decode_image(record["image"], channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return tf.image.convert_image_dtype(image, tf.float32), record["label"]


def augment(image: tf.Tensor, label: tf.Tensor, seed: tf.Tensor, size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Standard ResNet augmentation, stateless from a per-element ``seed`` of shape [2].

    32x32 data: pad by 4 and crop 32x32 at random, flip left-right. Larger data:
    random-resized crop (8%-100% of the area, aspect 3/4-4/3) to ``size``, flip.
    """
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    if size <= 32:
        image = tf.image.resize_with_crop_or_pad(image, size + 8, size + 8)
        image = tf.image.stateless_random_crop(image, [size, size, 3], seed=crop_seed)
    else:
        begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.shape(image), tf.zeros([0, 0, 4]), seed=crop_seed, min_object_covered=0.0,
            aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        image = tf.image.resize(tf.slice(image, begin, crop_size), [size, size])
    image = tf.image.stateless_random_flip_left_right(image, seed=flip_seed)
    return image, label


# Images augmented together by :func:`augment_small_batch`: one vectorised map per 64
# elements instead of one per element, which was the pipeline's largest CPU cost. With it,
# a batch echoed 8 times before augmentation costs 10-12 ms of pipeline CPU on 2 cores
# (`cpu_seconds_per_batch` under `pipelines` in benchmarks/results/time_to_target.json).
_AUGMENT_GROUP = 64
_PAD = 4


def augment_small_batch(images: tf.Tensor, labels: tf.Tensor, draws: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The 32x32 augmentation of :func:`augment` on a group of images at once, then normalised.

    Pads every ``[n, s, s, 3]`` image by 4 and crops ``s x s`` at an offset, then flips
    left-right, all chosen from one random int64 per image in ``draws`` (``[n]``): the
    row offset, the column offset and the flip are its digits in bases 9, 9 and 2. Each
    image's draw is its own, so echoed copies (which get different draws) are augmented
    independently, and a seeded stream of draws makes the pipeline reproducible.
    """
    size = tf.shape(images)[1]
    offsets = 2 * _PAD + 1
    draws = tf.math.floormod(draws, offsets * offsets * 2)
    rows, cols, flips = draws // (offsets * 2), (draws // 2) % offsets, tf.equal(draws % 2, 1)
    padded = tf.pad(images, [[0, 0], [_PAD, _PAD], [_PAD, _PAD], [0, 0]])
    span = tf.range(size, dtype=draws.dtype)
    cropped = tf.gather(padded, rows[:, None] + span[None, :], axis=1, batch_dims=1)
    cropped = tf.gather(cropped, cols[:, None] + span[None, :], axis=2, batch_dims=1)
    flipped = tf.where(flips[:, None, None, None], tf.reverse(cropped, axis=[2]), cropped)
    return normalize(flipped, labels)


def normalize(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return (image - _MEAN) / _STD, label


def _center(image: tf.Tensor, label: tf.Tensor, size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Evaluation view: the image as is at 32x32, else resize to 1.14x and centre-crop."""
    if size > 32:
        image = tf.image.resize(image, [int(size * 1.14), int(size * 1.14)])
        image = tf.image.resize_with_crop_or_pad(image, size, size)
    return tf.ensure_shape(image, [size, size, 3]), label


def _augment(ds: tf.data.Dataset, config: ImagePipelineConfig) -> tf.data.Dataset:
    """Each example augmented from its own draw of the augmentation stream, then normalised."""
    size = config.image_size
    augment_seed = stream_seed(config.seed, "augmentation")
    if size <= 32:
        draws = tf.data.Dataset.random(seed=augment_seed, rerandomize_each_iteration=True)
        ds = tf.data.Dataset.zip((ds, draws)).batch(_AUGMENT_GROUP)
        return ds.map(lambda example, draw: augment_small_batch(*example, draw), num_parallel_calls=_AUTOTUNE).unbatch()
    seeds = tf.data.Dataset.random(seed=augment_seed, rerandomize_each_iteration=True).batch(2)
    ds = tf.data.Dataset.zip((ds, seeds))
    return ds.map(lambda example, seed: normalize(*augment(*example, seed, size)), num_parallel_calls=_AUTOTUNE)


# The training pipeline after the read, in order; its echo points are the EchoHere entries.
TRAIN_STAGES = (
    REPEAT,
    SHUFFLE,
    Stage("decode", lambda ds, config: ds.map(decode, num_parallel_calls=_AUTOTUNE)),
    SERVICE,
    EchoHere(BEFORE_AUGMENT),
    Stage("augment", _augment),
    EchoHere(AFTER_AUGMENT),
    BATCH,
    EchoHere(AFTER_BATCH),
    PREFETCH,
)
ECHO_POINTS = echo_points(TRAIN_STAGES)


@dataclasses.dataclass(frozen=True)
class ImagePipelineConfig(PipelineConfig):
    """Settings of the image pipelines: :class:`pipelines.staged.PipelineConfig`'s, and these.

    ``source`` is ``"shapes"`` (embedded), ``"cifar10"``, ``"imagenet2012"`` or
    ``"imagenette"``; ``read_rate`` is in records per second; the input shuffle buffer of
    10,000 holds two shards of the embedded data, enough to mix them (and as in common
    CIFAR pipelines); with ``service``, read, shuffle and decode run on the workers.

    Attributes:
      num_train_examples: size of the embedded training split (at least 100k is the
        large-data regime of the paper; smaller for tests).
      num_eval_examples: size of the embedded evaluation split.
    """

    source: str = "shapes"
    batch_size: int = 128
    num_train_examples: int = shapes_data.DEFAULT_TRAIN_EXAMPLES
    num_eval_examples: int = shapes_data.DEFAULT_EVAL_EXAMPLES

    PIPELINE: ClassVar[str] = "image"
    SOURCES: ClassVar[tuple] = SOURCES
    STAGES: ClassVar[tuple] = TRAIN_STAGES
    POSITIVE_INTS: ClassVar[tuple] = ("num_train_examples", "num_eval_examples")

    @property
    def image_size(self) -> int:
        return 32 if self.source == "shapes" else TFDS_SOURCES[self.source]




def train_dataset(config: ImagePipelineConfig, stats: Optional[echoing.EchoStats] = None) -> tf.data.Dataset:
    """The training pipeline: batches of (normalised float32 images, int64 labels): the read, then :data:`TRAIN_STAGES`.

    ``stats`` counts the echo stage's fresh and emitted elements (examples, or batches for
    ``after_batch``).
    """
    return run_stages(read(config, "train", shuffle_files=True), config, stats)


def eval_dataset(config: ImagePipelineConfig) -> tf.data.Dataset:
    """The evaluation pipeline: every example once, no augmentation or echo, in order."""
    size = config.image_size
    ds = read(config, "eval", shuffle_files=False)
    ds = ds.map(decode, num_parallel_calls=_AUTOTUNE)
    ds = ds.map(lambda image, label: normalize(*_center(image, label, size)), num_parallel_calls=_AUTOTUNE)
    return ds.batch(config.batch_size).prefetch(_AUTOTUNE)


def _slow_read(config):
    """The read's throttle: on tf.data service, graph ops that run on every worker (a rate per worker)."""
    return sleep_per_record(config.read_rate) if config.service is not None else throttle(config.read_rate)
