"""The Transformer text input pipeline: bytes -> tokens -> packed (inputs, targets), with echo points.

Sources: ``"stdlib"`` (embedded: the Python standard library's source, see
:mod:`pipelines.stdlib_text`) and the ``tensorflow-datasets`` set ``"lm1b"`` when prepared
in ``data_dir``. Tokens are bytes (vocabulary of 258: padding 0, end of document 1, byte
``b`` as ``b + 2``): no tokenizer to train or download, and every text is representable.
Documents are concatenated with an end-of-document token and cut into rows of
``sequence_length + 1`` tokens that overlap by one, so that ``targets`` are ``inputs``
shifted by one and no token is lost as a target.

Example:

>>> config = TextPipelineConfig(sequence_length=16, batch_size=4, seed=0, shuffle_buffer_size=10,
...                             echo=EchoConfig("example", factor=2))
>>> inputs, targets = next(iter(train_dataset(config)))
>>> inputs.shape, targets.dtype.name, bool(tf.reduce_all(inputs[:, 1:] == targets[:, :-1]))
(TensorShape([4, 16]), 'int32', True)
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow as tf

import echoing
from pipelines import stdlib_text
from pipelines.slow_storage import sleep_per_record, throttle
from pipelines.staged import AFTER_BATCH, EXAMPLE, EchoConfig, check_pipeline_config, echo_point, on_service

ECHO_POINTS = (EXAMPLE, AFTER_BATCH)
SOURCES = ("stdlib", "lm1b")
PAD_ID = 0
END_OF_DOCUMENT_ID = 1
BYTE_OFFSET = 2
VOCAB_SIZE = 256 + BYTE_OFFSET
# Documents are whole files (tens of kB) or records of at most max_record_bytes for stdlib,
# sentences for lm1b; a few hundred in the buffer mixes sources well at a few MB.
_DOCUMENT_SHUFFLE = 256
_AUTOTUNE = tf.data.AUTOTUNE


@dataclasses.dataclass(frozen=True)
class TextPipelineConfig:
    """Settings of the text pipelines.

    Attributes:
      source: ``"stdlib"`` (embedded) or ``"lm1b"`` (tensorflow-datasets).
      sequence_length: tokens per example (inputs and targets each).
      batch_size: examples per batch.
      echo: where and how much to echo: placement ``"example"`` (after packing) or
        ``"after_batch"``; no echo by default.
      seed: seeds document and example shuffles; the echo draws from its own stream derived
        from it (:func:`pipelines.staged.stream_seed`); ``None`` for random.
      shuffle_buffer_size: the packed-example shuffle buffer, in examples.
      cache_dir: cache of the embedded data; default ``$ECHOING_CACHE_DIR`` or ``~/.cache/echoing``.
      data_dir: tensorflow-datasets data directory for lm1b.
      read_rate: if set, the read step is throttled to this many bytes per second; with
        ``service``, on every worker (graph ops that travel:
        :func:`pipelines.slow_storage.sleep_per_record`). Without ``service``, also a
        :class:`pipelines.slow_storage.RateLimiter` in bytes, to change or lift it while
        the dataset runs.
      repeat: whether the training pipeline repeats forever.
      service: a tf.data service dispatcher address (``"grpc://host:port"``): read,
        tokenize, pack and shuffle then run on its workers, and echoing and batching on
        the trainer. ``None`` (the default) runs everything here.
      max_record_bytes: with the embedded source, the training split's files are split
        into records (documents) of at most this many bytes, at line ends
        (:func:`pipelines.stdlib_text.split_document`), so that a throttled read holds
        the stream up for at most one such record; ``None`` (the default): one record
        per file. The evaluation split stays whole, so that its metric does not depend
        on it. lm1b's records are sentences: setting it there raises.
    """

    source: str = "stdlib"
    sequence_length: int = 128
    batch_size: int = 64
    echo: EchoConfig = EchoConfig()
    seed: Optional[int] = None
    shuffle_buffer_size: int = 10_000
    cache_dir: Optional[str] = None
    data_dir: Optional[str] = None
    read_rate: Optional[float] = None
    repeat: bool = False
    service: Optional[str] = None
    max_record_bytes: Optional[int] = None

    def __post_init__(self):
        check_pipeline_config(self, SOURCES, ECHO_POINTS, "text")
        stdlib_text.check_max_record_bytes(self.max_record_bytes)
        if self.max_record_bytes is not None and self.source != "stdlib":
            raise ValueError(f"max_record_bytes: only the embedded 'stdlib' source is split into records; got "
                             f"max_record_bytes={self.max_record_bytes!r} with source={self.source!r}")

def read(config: TextPipelineConfig, split: str) -> tf.data.Dataset:
    """Documents as scalar strings."""
    if config.source == "stdlib":
        cap = config.max_record_bytes if split == "train" else None
        ds = tf.data.TFRecordDataset(stdlib_text.tfrecord_file(split, cache_dir=config.cache_dir, max_record_bytes=cap))
    else:
        import tensorflow_datasets as tfds

        ds = tfds.load("lm1b", split="train" if split == "train" else "test", data_dir=config.data_dir,
                       shuffle_files=split == "train", read_config=tfds.ReadConfig(shuffle_seed=config.seed),
                       download=False)
        ds = ds.map(lambda record: record["text"])
    if config.read_rate is not None:
        # On tf.data service, graph ops that run on every worker (a rate per worker).
        slow = sleep_per_record if config.service is not None else throttle
        ds = ds.apply(slow(bytes_per_second=config.read_rate))
    return ds


def tokenize(text: tf.Tensor) -> tf.Tensor:
    """A document's bytes as int32 token ids, ending with the end-of-document token.

    >>> tokenize(tf.constant("hi")).numpy().tolist()
    [106, 107, 1]
    """
    ids = tf.cast(tf.io.decode_raw(text, tf.uint8), tf.int32) + BYTE_OFFSET
    return tf.concat([ids, [END_OF_DOCUMENT_ID]], axis=0)


def detokenize(ids) -> bytes:
    """Token ids back to bytes (padding and end-of-document dropped)."""
    return bytes(int(i) - BYTE_OFFSET for i in ids if int(i) >= BYTE_OFFSET)


def pack(documents: tf.data.Dataset, sequence_length: int) -> tf.data.Dataset:
    """Token vectors to ``(inputs, targets)`` of ``sequence_length``, targets shifted by one.

    Rows of ``sequence_length + 1`` tokens overlap by one token, carried across documents
    in the scan state; a final partial row is dropped (at most ``sequence_length`` tokens).
    """

    def step(carry, tokens):
        stream = tf.concat([carry, tokens], axis=0)
        rows = tf.maximum(tf.shape(stream)[0] - 1, 0) // sequence_length
        framed = tf.signal.frame(stream[: rows * sequence_length + 1], sequence_length + 1, sequence_length)
        return stream[rows * sequence_length:], framed[:rows]

    ds = documents.scan(tf.zeros([0], tf.int32), step).unbatch()
    return ds.map(lambda row: (row[:-1], row[1:]), num_parallel_calls=_AUTOTUNE)


def train_dataset(config: TextPipelineConfig, stats: Optional[echoing.EchoStats] = None) -> tf.data.Dataset:
    """The training pipeline: batches of (inputs, targets), int32 ``[batch, sequence_length]``."""
    ds = read(config, "train")
    if config.repeat:
        ds = ds.repeat()
    # Shuffle whole documents first so that packed rows do not always follow one file order.
    ds = ds.shuffle(_DOCUMENT_SHUFFLE, seed=config.seed, reshuffle_each_iteration=True)
    ds = ds.map(tokenize, num_parallel_calls=_AUTOTUNE)
    ds = pack(ds, config.sequence_length)
    # Then shuffle packed examples, so that consecutive rows of one document spread apart.
    ds = ds.shuffle(config.shuffle_buffer_size, seed=config.seed, reshuffle_each_iteration=True)
    # With a service address, everything above runs on its workers; echo stays here.
    ds = on_service(ds, config.service)
    # Example echoing after packing (text has no augmentation); its echo shuffle follows it.
    ds = echo_point(ds, EXAMPLE, config.echo, seed=config.seed, stats=stats)
    ds = ds.batch(config.batch_size, drop_remainder=True)
    # Batch echoing repeats whole batches.
    ds = echo_point(ds, AFTER_BATCH, config.echo, seed=config.seed, stats=stats)
    return ds.prefetch(_AUTOTUNE)


def eval_dataset(config: TextPipelineConfig) -> tf.data.Dataset:
    """The evaluation pipeline: every packed example of the held-out split once, in order."""
    ds = read(config, "eval").map(tokenize, num_parallel_calls=_AUTOTUNE)
    return pack(ds, config.sequence_length).batch(config.batch_size).prefetch(_AUTOTUNE)
