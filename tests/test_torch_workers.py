"""echoing.torch.EchoedDataset: echo inside DataLoader workers, and what a factor set on the trainer reaches."""

import collections

import pytest

torch = pytest.importorskip("torch")

from echoing import torch as echo_torch  # noqa: E402


def counts(values):
    return collections.Counter(int(v) for v in values)


def test_each_element_comes_out_floor_or_ceil_of_e_times_and_the_draws_follow_seed_and_epoch():
    dataset = echo_torch.EchoedDataset(list(range(200)), 2.5, shuffle_buffer_size=16, seed=3)
    first = [int(x) for x in torch.utils.data.DataLoader(dataset, batch_size=None)]
    seen = counts(first)
    assert set(seen) == set(range(200)) and set(seen.values()) == {2, 3}
    assert 450 < len(first) < 550
    assert first == [int(x) for x in torch.utils.data.DataLoader(dataset, batch_size=None)]  # Same epoch, same draws.
    dataset.set_epoch(1)
    assert first != [int(x) for x in torch.utils.data.DataLoader(dataset, batch_size=None)]
    # The shuffle buffer spreads an element's copies: few of them side by side.
    assert sum(a == b for a, b in zip(first, first[1:])) < len(first) / 10


def test_two_workers_split_a_map_style_dataset_and_augment_each_copy_on_its_own():
    def jitter(x):  # The augmentation, in the worker: each copy its own.
        return x + torch.rand(()) / 10

    dataset = echo_torch.EchoedDataset(torch.arange(40.0), 3, transform=jitter, shuffle_buffer_size=0, seed=0)
    out = torch.cat(list(torch.utils.data.DataLoader(dataset, batch_size=6, num_workers=2)))
    assert counts(out.floor()) == {i: 3 for i in range(40)}  # Each element 3 times, none lost or doubled.
    assert len(set(out.tolist())) == 120  # Every copy augmented on its own.


def test_a_factor_set_on_the_trainer_reaches_the_workers_at_the_next_epoch():
    dataset = echo_torch.EchoedDataset(list(range(20)), 1, shuffle_buffer_size=0, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=1)  # persistent_workers=False
    assert len(list(loader)) == 20
    dataset.factor = 2
    assert len(list(loader)) == 40


@pytest.mark.parametrize("kwargs, error, message", [
    ({"dataset": 5}, TypeError, r"dataset: expected a map-style dataset .* got int: 5"),
    ({"factor": echo_torch.Factor(2.0)}, TypeError, r"factor: a live Factor cannot reach DataLoader workers"),
    ({"factor": 0.5}, ValueError, r"factor"),
    ({"transform": "flip"}, TypeError, r"transform: expected a function of one element, or None, got str: 'flip'"),
    ({"shuffle_buffer_size": -1}, ValueError, r"shuffle_buffer_size: expected an int >= 0, got -1"),
    ({"seed": None}, TypeError, r"seed: expected an int in \[0, 2\*\*63\), got None"),
])
def test_bad_arguments_are_refused_by_name(kwargs, error, message):
    arguments = {"dataset": list(range(4)), "factor": 2, **kwargs}
    with pytest.raises(error, match=message):
        echo_torch.EchoedDataset(arguments.pop("dataset"), arguments.pop("factor"), **arguments)
    with pytest.raises(ValueError, match=r"epoch: expected an int >= 0, got -1"):
        echo_torch.EchoedDataset(list(range(4)), 2).set_epoch(-1)
