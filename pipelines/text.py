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
from typing import ClassVar, Optional

import tensorflow as tf

import echoing
from pipelines import stdlib_text
from pipelines.slow_storage import sleep_per_record, throttle
from pipelines.staged import (AFTER_BATCH, BATCH, EXAMPLE, PREFETCH, REPEAT, SERVICE, SHUFFLE, EchoConfig, EchoHere,
                              PipelineConfig, Stage, echo_points, run_stages)
SOURCES = ("stdlib", "lm1b")
PAD_ID = 0
END_OF_DOCUMENT_ID = 1
BYTE_OFFSET = 2
VOCAB_SIZE = 256 + BYTE_OFFSET
# Documents are whole files (tens of kB) or records of at most max_record_bytes for stdlib,
# sentences for lm1b; a few hundred in the buffer mixes sources well at a few MB.
_DOCUMENT_SHUFFLE = 256
_AUTOTUNE = tf.data.AUTOTUNE


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


# The training pipeline after the read, in order; its echo points are the EchoHere entries.
TRAIN_STAGES = (
    REPEAT,
    Stage("shuffle_documents", lambda ds, config: ds.shuffle(_DOCUMENT_SHUFFLE, seed=config.seed,
                                                             reshuffle_each_iteration=True)),
    Stage("tokenize", lambda ds, config: ds.map(tokenize, num_parallel_calls=_AUTOTUNE)),
    Stage("pack", lambda ds, config: pack(ds, config.sequence_length)),
    SHUFFLE,
    SERVICE,
    EchoHere(EXAMPLE),
    BATCH,
    EchoHere(AFTER_BATCH),
    PREFETCH,
)
ECHO_POINTS = echo_points(TRAIN_STAGES)


@dataclasses.dataclass(frozen=True)
class TextPipelineConfig(PipelineConfig):
    """Settings of the text pipelines: :class:`pipelines.staged.PipelineConfig`'s, and these.

    ``source`` is ``"stdlib"`` (embedded) or ``"lm1b"`` (tensorflow-datasets);
    ``read_rate`` is in bytes per second; the echo placement is ``"example"`` (after
    packing) or ``"after_batch"``; ``shuffle_buffer_size`` is the packed-example shuffle;
    with ``service``, read, tokenize, pack and shuffle run on the workers.

    Attributes:
      sequence_length: tokens per example (inputs and targets each).
      max_record_bytes: with the embedded source, the training split's files are split
        into records (documents) of at most this many bytes, at line ends
        (:func:`pipelines.stdlib_text.split_document`), so that a throttled read holds
        the stream up for at most one such record; ``None`` (the default): one record
        per file. The evaluation split stays whole, so that its metric does not depend
        on it. lm1b's records are sentences: setting it there raises.
    """

    source: str = "stdlib"
    batch_size: int = 64
    sequence_length: int = 128
    max_record_bytes: Optional[int] = None

    PIPELINE: ClassVar[str] = "text"
    SOURCES: ClassVar[tuple] = SOURCES
    STAGES: ClassVar[tuple] = TRAIN_STAGES
    POSITIVE_INTS: ClassVar[tuple] = ("sequence_length",)

    def __post_init__(self):
        super().__post_init__()
        stdlib_text.check_max_record_bytes(self.max_record_bytes)
        if self.max_record_bytes is not None and self.source != "stdlib":
            raise ValueError(f"max_record_bytes: only the embedded 'stdlib' source is split into records; got "
                             f"max_record_bytes={self.max_record_bytes!r} with source={self.source!r}")



def train_dataset(config: TextPipelineConfig, stats: Optional[echoing.EchoStats] = None) -> tf.data.Dataset:
    """The training pipeline: batches of (inputs, targets), int32 ``[batch, sequence_length]``: the read, then :data:`TRAIN_STAGES`."""
    return run_stages(read(config, "train"), config, stats)


def eval_dataset(config: TextPipelineConfig) -> tf.data.Dataset:
    """The evaluation pipeline: every packed example of the held-out split once, in order."""
    ds = read(config, "eval").map(tokenize, num_parallel_calls=_AUTOTUNE)
    return pack(ds, config.sequence_length).batch(config.batch_size).prefetch(_AUTOTUNE)
