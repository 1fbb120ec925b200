"""Where echoing goes in a staged input pipeline: the echo points and their configuration.

Every training pipeline in this package (and a user's own) is the same straight list of
steps, with echo points in between::

    read -> decode/parse -> [before_augment] -> augment -> [after_augment]
         -> (echo shuffle) -> batch -> [after_batch] -> prefetch

A pipeline without augmentation (text: read -> tokenize -> pack) has a single example
echo point, named ``example``.

:class:`EchoConfig` names one echo point and the echo settings; :func:`echo_point` is
called at each point and echoes only where the config says. A pipeline declares which
points it has (text has no augmentation, so no ``after_augment``), and a config naming a
point the pipeline lacks is an error at construction, before any data is read.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Optional, Sequence

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


def check_pipeline_config(config, sources: Sequence[str], echo_points: Sequence[str], pipeline: str) -> None:
    """Validation shared by the pipelines' config dataclasses; errors name the field.

    Checks ``source``, the positive-int fields ``batch_size`` (and ``sequence_length``,
    ``num_train_examples``, ``num_eval_examples`` where present), ``read_rate``, ``echo``
    and that the echo placement is one of ``echo_points``.
    """
    if config.source not in sources:
        raise ValueError(f"source: expected one of {tuple(sources)}, got {config.source!r}")
    for name in ("batch_size", "sequence_length", "num_train_examples", "num_eval_examples", "shuffle_buffer_size"):
        value = getattr(config, name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    rate = config.read_rate
    if rate is not None and not isinstance(rate, RateLimiter) and (isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not math.isfinite(rate) or rate <= 0):
        raise ValueError(f"read_rate: expected a positive finite number, a pipelines.slow_storage.RateLimiter or None, got {rate!r}")
    if not isinstance(config.echo, EchoConfig):
        raise TypeError(f"echo: expected a pipelines.staged.EchoConfig, got {config.echo!r}")
    config.echo.check_placement(echo_points, pipeline)
    service = getattr(config, "service", None)
    if service is not None and (not isinstance(service, str) or "://" not in service):
        raise ValueError(f"service: expected a tf.data service dispatcher address such as 'grpc://localhost:5050' or None, got {service!r}")
    if service is not None and isinstance(rate, RateLimiter):
        raise ValueError(f"read_rate: a RateLimiter is a Python clock that reaches no tf.data service worker in another "
                         f"process; with service={service!r} give a number (each worker then reads at that rate), "
                         f"got {rate!r}")


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
