"""Echo points: where in an input pipeline the echo stage sits, as values.

A staged pipeline runs ``read -> decode -> [before_augment] -> augment ->
[after_augment] -> batch -> [after_batch] -> prefetch``; a pipeline without augmentation
(text) has one example point, ``example``, instead of the first two. :class:`EchoPoint`
names them once for the whole project: the pipelines declare which points they have,
:func:`echoing.recommend` advises only among the points a pipeline has, and the
benchmarks and their command lines take the same values.

An ``EchoPoint`` is a ``str``, so it compares equal to its name, goes into JSON as it,
and prints as it:

>>> from echoing import EchoPoint
>>> EchoPoint.parse("after_batch") == "after_batch", EchoPoint.AFTER_BATCH.echoes_batches
(True, True)
>>> EchoPoint.parse("before_augmentation")
Traceback (most recent call last):
ValueError: placement: expected one of 'none', 'example', 'before_augment', 'after_augment', 'after_batch', got 'before_augmentation'
"""

from __future__ import annotations

import enum


class EchoPoint(str, enum.Enum):
    """Where the echo stage sits; ``NONE`` for no echo stage."""

    NONE = "none"
    EXAMPLE = "example"  # Example echoing in a pipeline without augmentation.
    BEFORE_AUGMENT = "before_augment"  # Example echoing; each copy augmented on its own.
    AFTER_AUGMENT = "after_augment"  # Example echoing of identical copies.
    AFTER_BATCH = "after_batch"  # Batch echoing.

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)

    @classmethod
    def parse(cls, value, name: str = "placement") -> "EchoPoint":
        """``value`` as an ``EchoPoint``; a ``ValueError`` naming ``name`` and the choices otherwise."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(point.value) for point in cls)
            raise ValueError(f"{name}: expected one of {choices}, got {value!r}") from None

    @property
    def echoes(self) -> bool:
        """Whether there is an echo stage at all."""
        return self is not EchoPoint.NONE

    @property
    def echoes_batches(self) -> bool:
        """Whether the echo stage repeats whole batches (its elements are batches)."""
        return self is EchoPoint.AFTER_BATCH

    @property
    def words(self) -> str:
        """The advice to echo here, in words."""
        return _WORDS[self]


_WORDS = {
    EchoPoint.NONE: "Do not echo",
    EchoPoint.EXAMPLE: "Echo examples (the pipeline has no augmentation)",
    EchoPoint.BEFORE_AUGMENT: "Echo before augmentation",
    EchoPoint.AFTER_AUGMENT: "Echo after augmentation",
    EchoPoint.AFTER_BATCH: "Echo after batching (batch echoing)",
}

# The example points, best first: where a recommendation to echo examples goes.
EXAMPLE_POINTS = (EchoPoint.BEFORE_AUGMENT, EchoPoint.EXAMPLE, EchoPoint.AFTER_AUGMENT)
