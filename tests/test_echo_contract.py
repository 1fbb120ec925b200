"""The echo contract, run on every implementation from one suite: ``echoing.echo`` (tf.data), ``echoing.grain.echo`` and ``echoing.torch.echo`` (plain, and with a per-copy ``transform``).

Counts, adjacency within the shuffle window, order, determinism, fresh draws per
element, exact stats, a live factor and bad input: one test, three stages, so that they
cannot drift. What only one has (tf.data's cardinality, grain's and torch's checkpoints)
is tested beside it, in ``tests/test_echo.py``, ``tests/test_grain.py`` and
``tests/test_torch.py``. The torch stage echoes whatever its loader yields, so here its
loader yields single elements (``batch_size=None``), as the others' datasets do.
"""

import collections
import math

import numpy as np
import pytest
import tensorflow as tf

import echoing


class TfData:
    """``echoing.echo`` on ``tf.data.Dataset.range``."""

    name = "tf.data"

    def dataset(self, n, element=None):
        ds = tf.data.Dataset.range(n)
        return ds if element is None else ds.map(element)

    def echo(self, dataset, factor, **kwargs):
        return dataset.apply(echoing.echo(factor, **kwargs))

    def elements(self, dataset):
        return list(dataset.as_numpy_iterator())

    def iterator(self, dataset):
        return dataset.as_numpy_iterator()

    def pulled_on_demand(self, dataset):
        """The dataset with no prefetch injected: it makes only what the loop asks for, however busy the machine."""
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        return dataset.with_options(options)

    def stats(self):
        return echoing.EchoStats()

    def counts(self, stats):
        return int(stats.fresh.numpy()), int(stats.emitted.numpy())

    def live_factor(self, value):
        return tf.Variable(float(value), dtype=tf.float64)

    def dict_element(self):
        return lambda i: {"id": i, "image": tf.fill([2, 3, 4], tf.cast(i, tf.float32)), "pair": (i, -i)}


class Grain:
    """``echoing.grain.echo`` on ``grain.MapDataset.range``."""

    name = "grain"

    def __init__(self):
        import grain
        from echoing import grain as echo_grain
        self.grain, self.module = grain, echo_grain

    def dataset(self, n, element=None):
        ds = self.grain.MapDataset.range(n)
        return ds if element is None else ds.map(element)

    def echo(self, dataset, factor, **kwargs):
        return self.module.echo(dataset, factor, **kwargs)

    def elements(self, dataset):
        return list(dataset)

    def iterator(self, dataset):
        return iter(dataset)

    def pulled_on_demand(self, dataset):
        return dataset  # A MapDataset's iterator makes nothing ahead.

    def stats(self):
        return self.module.EchoStats()

    def counts(self, stats):
        return int(stats.fresh), int(stats.emitted)

    def live_factor(self, value):
        return self.module.Factor(value)

    def dict_element(self):
        return lambda i: {"id": np.int64(i), "image": np.full([2, 3, 4], i, np.float32), "pair": (i, -i)}


class TorchLoader:
    """A ``torch.utils.data.DataLoader`` over ``n`` ids (``batch_size=None``: one element a step), passed ``passes`` times."""

    def __init__(self, n, element=None, passes=1):
        self.n, self.element, self.passes = n, element, passes

    def __iter__(self):
        import torch.utils.data

        items = [i if self.element is None else self.element(i) for i in range(self.n)]
        for _ in range(self.passes):
            yield from torch.utils.data.DataLoader(items, batch_size=None)

    def repeat(self, passes):
        return TorchLoader(self.n, self.element, passes)


class Torch:
    """``echoing.torch.echo`` on a ``DataLoader``."""

    name = "torch"

    def __init__(self):
        import torch
        from echoing import torch as echo_torch
        self.torch, self.module = torch, echo_torch

    def dataset(self, n, element=None):
        return TorchLoader(n, element)

    def echo(self, dataset, factor, **kwargs):
        return self.module.echo(dataset, factor, **kwargs)

    def elements(self, dataset):
        return list(dataset)

    def iterator(self, dataset):
        return iter(dataset)

    def pulled_on_demand(self, dataset):
        return dataset  # The stage pulls a batch only when a copy is asked for and none is left.

    def stats(self):
        return self.module.EchoStats()

    def counts(self, stats):
        return stats.fresh, stats.emitted

    def live_factor(self, value):
        return self.module.Factor(value)

    def dict_element(self):
        torch = self.torch
        return lambda i: {"id": torch.tensor(i), "image": torch.full([2, 3, 4], float(i)), "pair": (i, -i)}


class TorchTransform(Torch):
    """``echoing.torch.echo`` with a per-copy ``transform`` (echo before augmentation): each copy goes through it on its own.

    The transform here builds a new structure of new tensors with the same values, so the
    contract reads through it; that each copy is transformed apart is tested in
    ``tests/test_torch_workers.py``.
    """

    name = "torch, transform"

    def echo(self, dataset, factor, **kwargs):
        return self.module.echo(dataset, factor, transform=self._copy, **kwargs)

    def _copy(self, batch):
        if isinstance(batch, dict):
            return {key: self._copy(value) for key, value in batch.items()}
        if isinstance(batch, (tuple, list)):
            return type(batch)(self._copy(value) for value in batch)
        return batch.clone() if isinstance(batch, self.torch.Tensor) else batch


def _grain_or_skip():
    try:
        return Grain()
    except ImportError:
        pytest.skip("grain is not installed; pip install -e '.[grain]' runs the grain half of this suite")


def _torch_or_skip():
    try:
        return Torch()
    except ImportError:
        pytest.skip("torch is not installed; pip install torch==2.13.0 -e '.[torch]' runs the torch third of this suite")


def _torch_transform_or_skip():
    _torch_or_skip()
    return TorchTransform()


@pytest.fixture(params=["tf.data", "grain", "torch", "torch, transform"])
def stage(request):
    return {"tf.data": TfData, "grain": _grain_or_skip, "torch": _torch_or_skip,
            "torch, transform": _torch_transform_or_skip}[request.param]()


def ids(elements):
    return [int(np.asarray(x["id"] if isinstance(x, dict) else x).flat[0]) for x in elements]


@pytest.mark.parametrize("factor", [1, 2, 3])
def test_an_integer_factor_emits_adjacent_copies_in_input_order(stage, factor):
    out = stage.elements(stage.echo(stage.dataset(20), factor))
    assert ids(out) == [i for i in range(20) for _ in range(factor)]


def test_any_structure_is_echoed_whole(stage):
    out = stage.elements(stage.echo(stage.dataset(5, stage.dict_element()), 2))
    assert ids(out) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    for first, second in zip(out[::2], out[1::2]):
        np.testing.assert_array_equal(first["image"], second["image"])
        assert first["image"].shape == (2, 3, 4)
        np.testing.assert_array_equal(np.asarray(first["pair"]), np.asarray(second["pair"]))


@pytest.mark.parametrize("factor", [1.25, 2.7])
def test_a_fractional_factor_draws_floor_or_floor_plus_one_per_element(stage, factor):
    n = 2000
    counted = collections.Counter(ids(stage.elements(stage.echo(stage.dataset(n), factor, seed=3))))
    assert sorted(counted) == list(range(n))
    assert set(counted.values()) == {math.floor(factor), math.floor(factor) + 1}
    p = factor - math.floor(factor)
    extra = sum(counted.values()) - n * math.floor(factor)
    assert abs(extra - n * p) <= 5 * math.sqrt(n * p * (1 - p))  # Binomial: fails about 1e-6 of the time.


def test_without_a_buffer_copies_stay_adjacent_and_in_order(stage):
    out = ids(stage.elements(stage.echo(stage.dataset(500), 1.5, seed=0)))
    assert out == sorted(out)


def test_the_same_seed_gives_the_same_output_and_another_seed_another(stage):
    def run(seed):
        return ids(stage.elements(stage.echo(stage.dataset(300), 2.5, shuffle_buffer_size=50, seed=seed)))

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_a_repeated_input_gets_fresh_draws_each_epoch(stage):
    n = 400
    out = ids(stage.elements(stage.echo(stage.dataset(n).repeat(2), 1.5, seed=2)))
    # Split at the epoch boundary: the second epoch starts where the ids go back to 0.
    boundary = next(k for k in range(1, len(out)) if out[k] < out[k - 1])
    first, second = collections.Counter(out[:boundary]), collections.Counter(out[boundary:])
    assert sorted(first) == sorted(second) == list(range(n))
    assert [first[i] for i in range(n)] != [second[i] for i in range(n)]


@pytest.mark.parametrize("factor", [2, 2.5])
def test_a_shuffle_buffer_spreads_copies_and_loses_nothing(stage, factor):
    stats = stage.stats()
    out = ids(stage.elements(stage.echo(stage.dataset(1000), factor, shuffle_buffer_size=200, seed=4, stats=stats)))
    adjacent = sum(a == b for a, b in zip(out, out[1:]))
    assert adjacent < len(out) / 20
    unshuffled = ids(stage.elements(stage.echo(stage.dataset(1000), factor, seed=4)))
    assert collections.Counter(out) == collections.Counter(unshuffled)
    assert stage.counts(stats) == (1000, len(out))


def test_copies_spread_over_about_the_buffers_size(stage):
    # The span from an element's first copy to its last: of the order of the buffer, not
    # 0 (side by side) and not the whole run. tf.data's streaming buffer has a long tail
    # (a copy may wait), grain's windows none, so the median is compared.
    out = ids(stage.elements(stage.echo(stage.dataset(600), 3, shuffle_buffer_size=60, seed=1)))
    first, last = {}, {}
    for position, i in enumerate(out):
        first.setdefault(i, position)
        last[i] = position
    spans = sorted(last[i] - first[i] for i in first)
    assert 60 / 10 <= spans[len(spans) // 2] <= 2 * 60


@pytest.mark.parametrize("factor", [1, 2, 2.5])
def test_stats_count_fresh_and_emitted_exactly(stage, factor):
    stats = stage.stats()
    out = stage.elements(stage.echo(stage.dataset(100), factor, seed=5, stats=stats))
    assert stage.counts(stats) == (100, len(out))


def test_a_live_factor_is_followed_from_the_next_micro_batch(stage):
    factor = stage.live_factor(1.0)
    iterator = stage.iterator(stage.pulled_on_demand(stage.echo(stage.dataset(10_000), factor, seed=0)))
    before = ids(next(iterator) for _ in range(200))
    factor.assign(3.0)
    after = ids(next(iterator) for _ in range(600))
    assert before == list(range(200))
    # What the stage made at the old factor comes out first: the rest of its micro-batch
    # (up to 64 elements). Pulled on demand, nothing runs ahead of the loop, so the new
    # factor takes over within 64 elements on any machine, and holds from then on. (With
    # a prefetch downstream, what it holds comes out at the old factor too.)
    counted = collections.Counter(after)
    order = list(dict.fromkeys(after))
    first = next(k for k, i in enumerate(order) if counted[i] == 3)
    assert after.index(order[first]) < 64
    assert all(counted[i] == 1 for i in order[:first])
    complete = [counted[i] for i in order[first:-1]]  # The last may be cut short.
    assert complete and set(complete) == {3}


@pytest.mark.parametrize("factor, error, message", [
    (0.5, ValueError, r"factor: .*>= 1, got 0.5"),
    (float("nan"), ValueError, r"factor: .*got nan"),
    (float("inf"), ValueError, r"factor: .*got inf"),
    ("2", TypeError, r"factor: .*got str: '2'"),
    (True, TypeError, r"factor: .*got bool: True"),
])
def test_a_bad_factor_is_refused_naming_it(stage, factor, error, message):
    with pytest.raises(error, match=message):
        stage.elements(stage.echo(stage.dataset(3), factor))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"shuffle_buffer_size": -1}, ValueError, r"shuffle_buffer_size: .*got -1"),
    ({"shuffle_buffer_size": 2.5}, TypeError, r"shuffle_buffer_size: .*got float: 2.5"),
    ({"seed": -1}, ValueError, r"seed: .*got -1"),
    ({"seed": "7"}, TypeError, r"seed: .*got str"),
    ({"stats": {}}, TypeError, r"stats: expected an echoing(\.grain|\.torch)?\.EchoStats"),
])
def test_a_bad_setting_is_refused_naming_it(stage, kwargs, error, message):
    with pytest.raises(error, match=message):
        stage.echo(stage.dataset(3), 2, **kwargs)
