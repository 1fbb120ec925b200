"""The data-echoing transformation: repeat each element of a dataset ``factor`` times."""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Callable, Optional, Union

import tensorflow as tf

from echoing import external_state
from echoing._checks import check_int
from echoing.stats import EchoStats

Factor = Union[int, float, tf.Variable]

# Small fixed-shape elements are echoed a micro-batch at a time: one gather over up to
# _MAX_MICRO_BATCH elements costs far less than a dataset per element. The paper's
# one-liner, flat_map of from_tensors(...).repeat(e), ran 4.2-4.8x slower than this stage
# on 32x32x3 images, and behind a throttled read this stage emits 0.998-1.002 of e times
# the read rate (benchmarks/results/throughput.json, `python -m benchmarks.throughput`).
# The sizes are a choice, not a sweep: a micro-batch is one gather's copy, and a larger
# one adds latency and lag for a tf.Variable factor (each element of it already carries
# its number of copies), so it stays small.
# Other elements go one at a time. Two ways around that were tried and were slower than
# flat_map: ragged micro-batches for elements whose first dimension varies (ragged
# batching, gathering and unbatching cost more per element than a nested dataset), and a
# gather over large elements (it copies every copy; a repeated dataset does not).
_MAX_MICRO_BATCH = 64
_INT64_MAX = 2**63 - 1  # A cardinality times the factor beyond this is left unknown.
_MICRO_BATCH_BYTES = 256 * 1024
# A string's size is unknown until run time; assume a short one when sizing a micro-batch.
_ASSUMED_STRING_BYTES = 64

_stage_ids = itertools.count()

# The attributes an echo stage leaves on the dataset it returns: every stage, and a stage
# with a tf.Variable factor. They describe the stage; whoever deploys a dataset reads them
# (echoing.service.distribute refuses what would break on tf.data service workers).
ECHO_MARK = "_echoing_factor"
VARIABLE_ECHO_MARK = "_echoing_variable_factor"


def echo(
    factor: Factor,
    *,
    shuffle_buffer_size: int = 0,
    seed: Optional[int] = None,
    stats: Optional[EchoStats] = None,
) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """Repeats every element of a dataset ``factor`` times (data echoing).

    Insert it where the input pipeline is slower than training: after decoding (example
    echoing, before or after augmentation) or after batching (batch echoing; a batch is
    just an element). Returns a function for ``Dataset.apply``.

    Semantics:

    * Integer ``factor``: every element is emitted exactly ``factor`` times. Without a
      shuffle buffer the copies are adjacent and the input order is kept.
    * Non-integer ``factor``: each element is emitted ``floor(factor)`` times, plus once
      more with probability ``factor - floor(factor)``, drawn per element from ``seed``.
      With a seed (and ``deterministic=True`` options, the default) the draws reproduce
      across runs and processes; different seeds draw differently; every iteration of
      the dataset (each epoch, whether the input is ``repeat()``-ed or the echoed dataset
      is iterated again) draws afresh.
    * ``tf.Variable`` ``factor`` (floating dtype, scalar): read as the dataset runs, so
      a training loop can change it with ``assign``. The new value applies to elements
      the stage pulls after the assignment; what already sits in the stage's micro-batch
      (up to 64 elements), the echo shuffle buffer and any prefetch downstream (tf.data's
      own at the end of a pipeline too, unless ``Options().experimental_optimization.inject_prefetch``
      is ``False``) still carries the old one. A value below 1 or not finite stops iteration with
      ``tf.errors.InvalidArgumentError`` naming the value; it is never clamped.
    * ``shuffle_buffer_size > 0``: the echoed stream passes through a shuffle buffer of
      that many elements, seeded from ``seed``, so copies of one element spread apart.
      The buffer reshuffles on every iteration (``reshuffle_each_iteration=True``),
      reproducibly for a given seed.
    * Elements may be any structure ``tf.data`` carries: tensors of any dtype and shape,
      tuples, dicts, nested structures, ``tf.RaggedTensor``, ``tf.SparseTensor``.
      Elements whose components are all dense with fully known shapes and at most
      128 KiB take the fast path (a gather over a micro-batch). Others (varying shapes,
      larger elements, ragged and sparse tensors) are echoed one at a time with
      ``flat_map``, as the paper's one-liner does and about as fast; for them the
      consumer's own work per element (padding, copying into a batch) is of the same
      order, so a faster stage has little to gain (docs/results/throughput.md).
    * Cardinality: an integer factor on a dataset of known cardinality ``n`` gives
      ``factor * n`` (if that fits in an int64); an infinite dataset stays infinite;
      otherwise it is unknown.
    * ``factor == 1`` without a shuffle buffer or stats returns the dataset unchanged.

    Example:

    >>> import tensorflow as tf, echoing
    >>> ds = tf.data.Dataset.range(3).apply(echoing.echo(2))
    >>> [int(x) for x in ds]
    [0, 0, 1, 1, 2, 2]
    >>> stats = echoing.EchoStats()
    >>> ds = tf.data.Dataset.range(1000).apply(echoing.echo(2.5, seed=7, stats=stats))
    >>> n = sum(1 for _ in ds)
    >>> n == int(stats.emitted) and int(stats.fresh) == 1000 and 2300 < n < 2700
    True

    Args:
      factor: the echo factor ``e``: a Python int or float, finite and >= 1, or a scalar
        ``tf.Variable`` of floating dtype holding such a value.
      shuffle_buffer_size: elements in the echo shuffle buffer after the echo stage;
        0 (the default) for none.
      seed: an int seeding the fractional draws and the shuffle buffer; ``None`` for
        non-reproducible randomness.
      stats: an :class:`echoing.EchoStats` to count fresh and emitted elements.

    Returns:
      A function from ``tf.data.Dataset`` to the echoed ``tf.data.Dataset``.

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.
    """
    check_echo_settings(factor, shuffle_buffer_size=shuffle_buffer_size, seed=seed)
    if stats is not None and not isinstance(stats, EchoStats):
        raise TypeError(f"stats: expected an echoing.EchoStats or None, got {stats!r}")
    if stats is not None:
        stats._bind(f"echo(factor={_describe(factor)}) #{next(_stage_ids)}")

    def _apply_fn(dataset: tf.data.Dataset) -> tf.data.Dataset:
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(
                "echo(...) must be applied to a tf.data.Dataset (use dataset.apply(echo(...))), "
                f"got {type(dataset).__name__}: {dataset!r:.200}"
            )
        echoed = _echo_elements(dataset, factor, seed, stats)
        if shuffle_buffer_size > 0:
            # After the echo stage, so that the copies of one element land apart (paper §3.5).
            echoed = echoed.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
        if stats is not None or isinstance(factor, tf.Variable):
            # Its variable reads and writes would block iterator checkpoints; their state
            # is saved elsewhere (see echoing/external_state.py).
            echoed = external_state.ignore_echo_state(echoed, dataset)
        # What the stage is, for whoever deploys the dataset (see ECHO_MARK).
        setattr(echoed, ECHO_MARK, _describe(factor))
        if isinstance(factor, tf.Variable):
            setattr(echoed, VARIABLE_ECHO_MARK, factor.name)
        return echoed

    return _apply_fn


def echo_stages(dataset: tf.data.Dataset, mark: str = VARIABLE_ECHO_MARK) -> list[str]:
    """The echo stages inside ``dataset`` that carry ``mark``: by default, their variable factors' names.

    Example:

    >>> import tensorflow as tf, echoing
    >>> factor = tf.Variable(2.0, dtype=tf.float64, name="factor")
    >>> echo_stages(tf.data.Dataset.range(3).apply(echoing.echo(factor)).batch(2))
    ['factor:0']
    >>> echo_stages(tf.data.Dataset.range(3).apply(echoing.echo(2)))
    []
    >>> echo_stages(tf.data.Dataset.range(3).apply(echoing.echo(2)), mark=ECHO_MARK)
    ['2']
    """
    found, seen, stack = [], set(), [dataset]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        value = getattr(current, mark, None)
        if value is not None:
            found.append(value)
        stack.extend(current._inputs())  # The datasets this one was built from.
    return sorted(found)


def check_echo_settings(factor, *, shuffle_buffer_size=0, seed=None) -> None:
    """Raises unless :func:`echo` accepts these settings; builds nothing.

    For configurations that validate when they are made, long before a pipeline is built
    (``pipelines.EchoConfig``). Errors name the argument and show the value.

    Example:

    >>> check_echo_settings(2.5, shuffle_buffer_size=64, seed=0)
    >>> check_echo_settings(0.5)
    Traceback (most recent call last):
    ...
    ValueError: factor: the echo factor must be finite and >= 1, got 0.5

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.
    """
    _check_factor(factor)
    check_int("shuffle_buffer_size", shuffle_buffer_size, low=0)
    _check_seed(seed)


def _echo_elements(dataset, factor, seed, stats):
    """The echo stage proper, before any shuffle buffer."""
    is_variable = isinstance(factor, tf.Variable)
    static_int = None if is_variable or factor != int(factor) else int(factor)
    if static_int == 1 and stats is None:
        return dataset

    # Small fixed-shape elements are grouped into micro-batches (see the module comment).
    micro_batch = _micro_batch_size(dataset.element_spec)
    grouped = dataset.batch(micro_batch) if micro_batch > 1 else dataset  # Keeps the remainder.

    # The number of copies of each element: a constant for an integer factor, else
    # Bernoulli draws seeded per group by a random stream zipped alongside the groups.
    # Dataset.random with rerandomize_each_iteration gives fresh, reproducible seeds on
    # every iteration, so repeated epochs do not echo the same elements more. Zipping a
    # 1-tuple in the integer case makes every function below receive (group[, seed])
    # with the element's own structure intact, whatever that structure is.
    if static_int is not None:
        source = tf.data.Dataset.zip((grouped,))
    else:
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        source = tf.data.Dataset.zip((grouped, seeds))

    def copies(group_seed, n):
        """int64 copies for each of ``n`` elements, drawn from ``group_seed`` unless static."""
        if static_int is not None:
            return tf.fill([n], tf.constant(static_int, tf.int64))
        uniform = tf.random.stateless_uniform([n], seed=tf.stack([group_seed, 0]), dtype=tf.float64)
        value = _read_factor(factor)
        whole = tf.floor(value)
        return tf.cast(whole, tf.int64) + tf.cast(uniform < value - whole, tf.int64)

    if micro_batch > 1:
        echoed = _echo_in_micro_batches(source, copies, stats)
    elif static_int is not None and stats is None:
        # Nothing to draw or count: each element's dataset repeats it directly, as the
        # paper's one-liner does, without a map per element to attach its count.
        echoed = source.flat_map(lambda element: tf.data.Dataset.from_tensors(element).repeat(static_int))
    else:
        echoed = _echo_one_at_a_time(source, copies, stats)

    n = dataset.cardinality()
    if static_int is not None and n == tf.data.INFINITE_CARDINALITY:
        echoed = echoed.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    elif static_int is not None and 0 < n <= _INT64_MAX // static_int:
        # Not for 0: tf.data reports 0 where its own count overflowed (unbatch of a huge range).
        echoed = echoed.apply(tf.data.experimental.assert_cardinality(n * static_int))
    return echoed


def _echo_in_micro_batches(source, copies, stats):
    """Gathers each micro-batched element's copies, then unbatches."""

    def repeat_batch(batch, group_seed=None):
        n = tf.shape(tf.nest.flatten(batch)[0], out_type=tf.int64)[0]
        counts = copies(group_seed, n)
        # tf.repeat of the indices keeps each element's copies adjacent and in order.
        indices = tf.repeat(tf.range(n), counts)
        gathered = tf.nest.map_structure(lambda t: tf.gather(t, indices), batch)
        return gathered, n, tf.reduce_sum(counts), tf.nest.flatten(gathered)[0]

    return _counted(source, repeat_batch, stats).unbatch()


def _echo_one_at_a_time(source, copies, stats):
    """Echoes each element through its own repeated single-element dataset."""

    def draw_count(element, element_seed=None):
        count = copies(element_seed, 1)[0]
        return (element, count), tf.constant(1, tf.int64), count, count

    counted = _counted(source, draw_count, stats)
    return counted.flat_map(lambda element, count: tf.data.Dataset.from_tensors(element).repeat(count))


def _counted(source, stage, stats):
    """``stage`` over ``source``; with ``stats``, a ``scan`` that carries the running count.

    ``stage(*element)`` returns ``(output, fresh, emitted, anchor)``, where ``anchor`` is a
    dense tensor of ``output`` through which the count is published before the output
    leaves. The count is the scan's state, so an iterator checkpoint saves it and a
    restored iterator republishes exactly the uninterrupted run's counts.
    """
    if stats is None:
        return source.map(lambda *element: stage(*element)[0])

    def count_and_echo(state, element):
        output, fresh, emitted, anchor = stage(*element)
        state, publish = stats._advance(state, fresh, emitted)
        with tf.control_dependencies([publish]):
            anchored = tf.identity(anchor)
        flat = tf.nest.flatten(output, expand_composites=True)
        # Replace the anchor by its published copy, so the count is in every output's past.
        index = next(i for i, t in enumerate(flat) if t is anchor)
        flat[index] = anchored
        return state, tf.nest.pack_sequence_as(output, flat, expand_composites=True)

    return source.scan(stats._initial_state(), count_and_echo)


def _read_factor(factor):
    """The echo factor as a float64 tensor, checked at run time when it is a variable."""
    if not isinstance(factor, tf.Variable):
        return tf.constant(float(factor), tf.float64)
    value = tf.cast(factor.read_value(), tf.float64)
    check = tf.debugging.Assert(
        tf.logical_and(tf.math.is_finite(value), value >= 1.0),
        [f"echo factor: the tf.Variable {factor.name!r} must hold a finite value >= 1, got", value],
    )
    with tf.control_dependencies([check]):
        return tf.identity(value)


def _micro_batch_size(element_spec) -> int:
    """How many elements to echo per gather; 1 means one at a time (see module comment)."""
    specs = tf.nest.flatten(element_spec)
    total_bytes = 0
    for spec in specs:
        if type(spec) is not tf.TensorSpec or not spec.shape.is_fully_defined():
            return 1
        per_value = _ASSUMED_STRING_BYTES if spec.dtype == tf.string else spec.dtype.size
        total_bytes += spec.shape.num_elements() * per_value
    return max(1, min(_MAX_MICRO_BATCH, _MICRO_BATCH_BYTES // max(total_bytes, 1)))


def _check_factor(factor) -> None:
    if isinstance(factor, tf.Variable):
        if not factor.dtype.is_floating:
            raise TypeError(
                f"factor: a tf.Variable echo factor must have a floating dtype, got {factor.dtype.name} "
                f"({factor!r:.200}); create it as tf.Variable(2.0)"
            )
        if factor.shape.rank != 0:
            raise ValueError(f"factor: a tf.Variable echo factor must be a scalar, got shape {factor.shape}")
        _check_factor_value(float(factor.numpy()), "factor (current value of the tf.Variable)")
        return
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        raise TypeError(
            f"factor: expected a Python int or float >= 1, or a floating tf.Variable, got "
            f"{type(factor).__name__}: {factor!r:.200}"
        )
    _check_factor_value(float(factor), "factor")


def _check_factor_value(value: float, name: str) -> None:
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{name}: the echo factor must be finite and >= 1, got {value!r}")


def _check_seed(seed) -> None:
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed: expected an int or None, got {type(seed).__name__}: {seed!r:.200}")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed: expected an int in [0, 2**63), got {seed!r}")


def _describe(factor) -> str:
    return f"tf.Variable {factor.name!r}" if isinstance(factor, tf.Variable) else repr(factor)
