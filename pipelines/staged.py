"""Where echoing goes in a staged input pipeline: the echo points and their configuration.

Every training pipeline in this package (and a user's own) is a straight list of
stages (:class:`Stage`), with echo points as entries in it (:class:`EchoHere`)::

    read -> decode/parse -> [before_augment] -> augment -> [after_augment]
         -> (echo shuffle) -> batch -> [after_batch] -> prefetch

A pipeline without augmentation (text: read -> tokenize -> pack) has a single example
echo point, named ``example``.

:class:`EchoConfig` names one echo point and the echo settings; :func:`run_stages` runs
the list and echoes only at the entry the config names. A pipeline's echo points are
read off its list (:func:`echo_points`), so adding a stage or an echo point is one line,
and a config naming a point the pipeline lacks is an error at construction
(:class:`PipelineConfig`), before any data is read.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Callable, ClassVar, Optional, Sequence

import numpy as np
import tensorflow as tf

import echoing
from echoing.echo import check_echo_settings
from echoing.points import EchoPoint
from pipelines.slow_storage import RateLimiter

# The echo points are echoing's values (echoing.EchoPoint); these names are kept for
# pipelines' users, and compare equal to the plain strings too.
NONE = EchoPoint.NONE
EXAMPLE = EchoPoint.EXAMPLE
BEFORE_AUGMENT = EchoPoint.BEFORE_AUGMENT
AFTER_AUGMENT = EchoPoint.AFTER_AUGMENT
AFTER_BATCH = EchoPoint.AFTER_BATCH
PLACEMENTS = tuple(EchoPoint)


@dataclasses.dataclass(frozen=True)
class EchoConfig:
    """Where and how much a training pipeline echoes; no echo by default.

    Example:

    >>> EchoConfig(placement="after_batch", factor=2).echoes
    True
    >>> EchoConfig().echoes
    False

    Attributes:
      placement: the echo point: ``"none"``, ``"before_augment"`` (example echoing, each
        copy augmented independently), ``"after_augment"`` (example echoing of identical
        copies), ``"example"`` (example echoing in a pipeline without augmentation) or
        ``"after_batch"`` (batch echoing).
      factor: the echo factor ``e`` (>= 1; fractional allowed), see :func:`echoing.echo`.
      shuffle_buffer_size: the echo shuffle buffer after the echo stage, in elements of
        that stage (examples, or batches for ``after_batch``); 0 for none.
      seed: seed of the fractional draws and the echo shuffle buffer; ``None`` for the
        pipeline's own seed.
    """

    placement: EchoPoint = NONE
    factor: float = 1.0
    shuffle_buffer_size: int = 0
    seed: Optional[int] = None

    def __post_init__(self):
        # A name given as a plain string becomes the EchoPoint it names.
        object.__setattr__(self, "placement", EchoPoint.parse(self.placement))
        # The same checks echoing.echo makes, with the same argument names.
        check_echo_settings(self.factor, shuffle_buffer_size=self.shuffle_buffer_size, seed=self.seed)

    @property
    def echoes(self) -> bool:
        """Whether this config inserts an echo stage at all."""
        return self.placement != NONE

    def check_placement(self, available: Sequence[str], pipeline: str) -> None:
        """Raises ``ValueError`` unless the placement is one the named pipeline has."""
        if self.placement != NONE and self.placement not in available:
            raise ValueError(
                f"placement: the {pipeline} pipeline has no echo point {self.placement!r}; "
                f"its echo points are {tuple(available)}"
            )


def echo_point(
    dataset: tf.data.Dataset,
    point: str,
    config: EchoConfig,
    *,
    seed: Optional[int] = None,
    stats: Optional[echoing.EchoStats] = None,
) -> tf.data.Dataset:
    """Echoes ``dataset`` if ``config`` places echoing at ``point``; else returns it as is.

    Example:

    >>> ds = tf.data.Dataset.range(3)
    >>> config = EchoConfig(placement="after_batch", factor=2)
    >>> echo_point(ds, "before_augment", config) is ds
    True
    >>> [int(x) for x in echo_point(ds, "after_batch", config)]
    [0, 0, 1, 1, 2, 2]

    Args:
      dataset: the stream at this point of the pipeline.
      point: this point's name (one of :data:`PLACEMENTS` other than ``"none"``).
      config: the pipeline's echo configuration.
      seed: the pipeline's seed; when ``config.seed`` is ``None`` the echo stage draws from
        its own stream derived from it (:func:`stream_seed`).
      stats: counts fresh and emitted elements of the echo stage, if it is here.
    """
    if point not in PLACEMENTS or point == NONE:
        raise ValueError(f"point: expected one of {tuple(p.value for p in PLACEMENTS[1:])}, got {point!r}")
    if config.placement != point:
        return dataset
    echo_seed = config.seed if config.seed is not None else stream_seed(seed, "echo")
    return dataset.apply(
        echoing.echo(config.factor, shuffle_buffer_size=config.shuffle_buffer_size, seed=echo_seed, stats=stats)
    )


# The random streams of a pipeline that draw from the user's one seed. Each derives its own
# seed, so that, say, the echo stage's fractional draws and the augmentation's crops are
# not one sequence read twice (tf.data's random ops given the same seed draw the same).
RANDOM_STREAMS = ("echo", "augmentation")


def stream_seed(seed: Optional[int], stream: str) -> Optional[int]:
    """The seed of one random ``stream`` of a pipeline, derived from the pipeline's ``seed``.

    A ``numpy.random.SeedSequence`` of the seed, spawned by the stream's index: distinct
    and reproducible per stream. ``None`` (nondeterministic) stays ``None``.

    >>> stream_seed(0, "echo") != stream_seed(0, "augmentation") != 0
    True
    >>> stream_seed(0, "echo") == stream_seed(0, "echo"), stream_seed(None, "echo")
    (True, None)
    """
    if stream not in RANDOM_STREAMS:
        raise ValueError(f"stream: expected one of {RANDOM_STREAMS}, got {stream!r}")
    if seed is None:
        return None
    sequence = np.random.SeedSequence(seed, spawn_key=(RANDOM_STREAMS.index(stream),))
    return int(sequence.generate_state(1)[0])


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """The settings every training pipeline has; each pipeline's config adds its own.

    Attributes:
      source: where the data comes from (each pipeline names its sources).
      batch_size: examples per batch.
      echo: where and how much to echo (no echo by default).
      seed: seeds the shuffles; augmentation and echo each draw from their own stream
        derived from it (:func:`stream_seed`); ``None`` for random.
      shuffle_buffer_size: the input shuffle buffer, in examples.
      cache_dir: cache of the embedded data; default ``$ECHOING_CACHE_DIR`` or ``~/.cache/echoing``.
      data_dir: tensorflow-datasets data directory for the tfds sources.
      read_rate: if set, the read step is throttled to this rate (records or bytes per
        second, as the pipeline says; :func:`pipelines.slow_storage.throttle`), modelling
        slow storage; with ``service``, every worker reads at this rate (graph ops that
        travel: :func:`pipelines.slow_storage.sleep_per_record`). Without ``service``,
        also a :class:`pipelines.slow_storage.RateLimiter`, to change or lift it while the
        dataset runs.
      repeat: whether the training pipeline repeats forever (for step-budgeted training).
      service: a tf.data service dispatcher address (``"grpc://host:port"``): the stages
        before the first echo point then run on its workers, and the rest on the
        trainer. ``None`` (the default) runs everything here.
    """

    source: str = ""
    batch_size: int = 1
    echo: EchoConfig = EchoConfig()
    seed: Optional[int] = None
    shuffle_buffer_size: int = 10_000
    cache_dir: Optional[str] = None
    data_dir: Optional[str] = None
    read_rate: Optional[float] = None
    repeat: bool = False
    service: Optional[str] = None

    # Each pipeline's config sets these: its name, sources, stages and own positive ints.
    PIPELINE: ClassVar[str] = ""
    SOURCES: ClassVar[tuple] = ()
    STAGES: ClassVar[tuple] = ()
    POSITIVE_INTS: ClassVar[tuple] = ()

    def __post_init__(self):
        if self.source not in self.SOURCES:
            raise ValueError(f"source: expected one of {tuple(self.SOURCES)}, got {self.source!r}")
        for name in ("batch_size", "shuffle_buffer_size") + tuple(self.POSITIVE_INTS):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        rate = self.read_rate
        if rate is not None and not isinstance(rate, RateLimiter) and (
                isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not math.isfinite(rate) or rate <= 0):
            raise ValueError(f"read_rate: expected a positive finite number, a pipelines.slow_storage.RateLimiter or "
                             f"None, got {rate!r}")
        if not isinstance(self.echo, EchoConfig):
            raise TypeError(f"echo: expected a pipelines.staged.EchoConfig, got {self.echo!r}")
        self.echo.check_placement(echo_points(self.STAGES), self.PIPELINE)
        service = self.service
        if service is not None and (not isinstance(service, str) or "://" not in service):
            raise ValueError(f"service: expected a tf.data service dispatcher address such as 'grpc://localhost:5050' "
                             f"or None, got {service!r}")
        if service is not None and isinstance(rate, RateLimiter):
            raise ValueError(f"read_rate: a RateLimiter is a Python clock that reaches no tf.data service worker in "
                             f"another process; with service={service!r} give a number (each worker then reads at "
                             f"that rate), got {rate!r}")


@dataclasses.dataclass(frozen=True)
class Stage:
    """One step of a pipeline: ``apply(dataset, config)`` is the dataset after it."""

    name: str
    apply: Callable[[tf.data.Dataset, PipelineConfig], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class EchoHere:
    """A place in a pipeline's list of stages where an echo stage may go (as seqio's
    ``CacheDatasetPlaceholder`` marks where caching may go): the pipeline's echo points
    are these entries, in order."""

    point: EchoPoint


# The stages every training pipeline has, shared so that each pipeline's list names them.
REPEAT = Stage("repeat", lambda ds, config: ds.repeat() if config.repeat else ds)
SHUFFLE = Stage("shuffle", lambda ds, config: ds.shuffle(config.shuffle_buffer_size, seed=config.seed,
                                                         reshuffle_each_iteration=True))
SERVICE = Stage("service", lambda ds, config: on_service(ds, config.service))
BATCH = Stage("batch", lambda ds, config: ds.batch(config.batch_size, drop_remainder=True))
PREFETCH = Stage("prefetch", lambda ds, config: ds.prefetch(tf.data.AUTOTUNE))


def echo_points(stages: Sequence) -> tuple:
    """The echo points of a list of stages, in order.

    >>> echo_points([Stage("batch", lambda ds, c: ds.batch(2)), EchoHere(AFTER_BATCH)])
    ('after_batch',)
    """
    return tuple(stage.point for stage in stages if isinstance(stage, EchoHere))


def run_stages(dataset: tf.data.Dataset, config: PipelineConfig,
               stats: Optional[echoing.EchoStats] = None) -> tf.data.Dataset:
    """``dataset`` through ``config.STAGES`` in order, echoing at the entry ``config.echo`` names.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Numbers(PipelineConfig):
    ...     PIPELINE, SOURCES = "numbers", ("range",)
    ...     STAGES = (Stage("batch", lambda ds, c: ds.batch(c.batch_size)), EchoHere(AFTER_BATCH))
    >>> config = Numbers(source="range", batch_size=2, echo=EchoConfig("after_batch", factor=2))
    >>> [x.numpy().tolist() for x in run_stages(tf.data.Dataset.range(4), config)]
    [[0, 1], [0, 1], [2, 3], [2, 3]]
    """
    for stage in config.STAGES:
        if isinstance(stage, EchoHere):
            dataset = echo_point(dataset, stage.point, config.echo, seed=config.seed, stats=stats)
        else:
            dataset = stage.apply(dataset, config)
    return dataset


def on_service(dataset: tf.data.Dataset, service: Optional[str]) -> tf.data.Dataset:
    """The steps so far run on tf.data service workers when ``service`` is an address.

    ``distributed_epoch`` mode: the workers share one pass over the data, so each element
    arrives once (at most once if a worker fails). The echo stage must come after this,
    on the trainer, where a ``tf.Variable`` factor stays live (see
    :mod:`echoing.service`). With a service, ``read_rate`` is paced by graph ops
    (:func:`pipelines.slow_storage.sleep_per_record`), which run on every worker.
    """
    if service is None:
        return dataset
    return dataset.apply(echoing.service.distribute("distributed_epoch", service))
