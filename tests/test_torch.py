"""What only the torch stage has: checkpoints at every position, loaders with and without torchdata, ranks in step, in-place changes refused.

The contract it shares with tf.data and grain (counts, order, shuffle, seeds, a live
factor, bad settings) is in ``tests/test_echo_contract.py``.
"""

import copy
import importlib.util

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch==2.13.0 -e '.[torch]'")

from echoing import torch as echo_torch  # noqa: E402


class PositionLoader:
    """A loader with a state of its own, as ``StatefulDataLoader`` has, without torchdata: batches of 4 ids.

    Its state is how many batches it has yielded; loaded, the next pass goes on from there
    (and a state at the end begins a new pass).
    """

    def __init__(self, batches=10):
        self.batches, self.position, self._resume = batches, 0, None

    def __iter__(self):
        start, self._resume = self._resume or 0, None
        if start >= self.batches:
            start = 0
        self.position = start
        for k in range(start, self.batches):
            self.position = k + 1
            yield {"ids": torch.arange(4 * k, 4 * k + 4), "x": torch.full((4, 2), float(k))}

    def __len__(self):
        return self.batches

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self._resume = state["position"]


def ids(batches):
    return [batch["ids"].tolist() for batch in batches]


def stateful_data_loader(batches=10, num_workers=0):
    from torchdata.stateful_dataloader import StatefulDataLoader

    items = [{"ids": torch.tensor(i), "x": torch.full((2,), float(i))} for i in range(4 * batches)]
    return StatefulDataLoader(items, batch_size=4, num_workers=num_workers)


needs_torchdata = pytest.mark.skipif(importlib.util.find_spec("torchdata") is None,
                                     reason="torchdata is not installed; pip install torchdata==0.11.0")

# Each loader with the positions to restore at (None: after every batch). With workers,
# a few: each loader left mid-epoch waits for its worker processes to stop.
LOADERS = {
    "own state": (PositionLoader, None),
    "StatefulDataLoader": pytest.param((stateful_data_loader, None), marks=needs_torchdata),
    "StatefulDataLoader, 2 workers": pytest.param((lambda: stateful_data_loader(num_workers=2), (0, 3, 12)),
                                                  marks=needs_torchdata),
}

SETTINGS = {
    "integer": dict(factor=2),
    "fraction, shuffle": dict(factor=2.5, shuffle_buffer_size=5, seed=7),
    "live": dict(factor="live", seed=3),
    "rows mixed": dict(factor=2.5, shuffle_buffer_size=4, seed=5, mix_rows=True),
}


def make(make_loader, settings):
    settings = dict(settings)
    factor = settings.pop("factor")
    live = echo_torch.Factor(1.5) if factor == "live" else None
    stats = echo_torch.EchoStats()
    echoed = echo_torch.echo(make_loader(), live if live is not None else factor, stats=stats, **settings)
    return echoed, stats, live


def run(echoed, live, steps, start=0):
    """Takes ``steps`` batches from a fresh ``for`` over ``echoed``, as a loop does; a live factor is set to 3 after step 6."""
    taken = []
    if steps == 0:
        return taken
    for step, batch in enumerate(echoed, start=start):
        taken.append(batch)
        if live is not None and step == 6:
            live.assign(3.0)  # What a controller does, at the same step in every run.
        if len(taken) == steps:
            break
    return taken


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
@pytest.mark.parametrize("loader", LOADERS.values(), ids=LOADERS.keys())
def test_a_loader_restored_from_the_state_after_any_batch_continues_exactly(loader, settings):
    make_loader, positions = loader
    echoed, stats, live = make(make_loader, settings)
    reference = run(echoed, live, steps=10**6)
    total = (stats.fresh, stats.emitted)
    assert total[0] == 10 and total[1] == len(reference)
    for position in range(len(reference) + 1) if positions is None else positions:
        echoed, stats, live = make(make_loader, settings)
        first = run(echoed, live, steps=position)
        counts = (stats.fresh, stats.emitted)
        state = copy.deepcopy(echoed.state_dict())
        # A new process's objects: a new loader, stage, stats and factor, the state loaded.
        restored, restored_stats, restored_live = make(make_loader, settings)
        restored.load_state_dict(state)
        assert (restored_stats.fresh, restored_stats.emitted) == counts, position
        rest = run(restored, restored_live, steps=10**6, start=position)
        assert ids(first + rest) == ids(reference), position
        assert (restored_stats.fresh, restored_stats.emitted) == total, position


def test_a_state_taken_at_the_end_of_an_epoch_begins_the_next_one_and_the_counts_run_on():
    echoed, stats, _ = make(PositionLoader, dict(factor=2.5, seed=1))
    first_epoch = list(echoed)
    state = echoed.state_dict()
    second_epoch = list(echoed)
    restored, restored_stats, _ = make(PositionLoader, dict(factor=2.5, seed=1))
    restored.load_state_dict(state)
    assert ids(list(restored)) == ids(second_epoch)
    assert (restored_stats.fresh, restored_stats.emitted) == (stats.fresh, stats.emitted) == (20, len(first_epoch) +
                                                                                               len(second_epoch))
    # Each epoch draws afresh: the copies of the same batches differ from one to the next.
    assert ids(first_epoch) != ids(second_epoch)


def test_every_rank_of_a_data_parallel_job_draws_the_same_copies_and_runs_the_same_steps():
    # Two ranks read different shards of the same length; with the same seed each draws
    # the same number of copies at each position, so their steps stay in step.
    def shard(rank):
        return [{"ids": torch.arange(8 * k + 4 * rank, 8 * k + 4 * rank + 4)} for k in range(50)]

    copies = []
    for rank in (0, 1):
        batches = list(echo_torch.echo(shard(rank), 1.7, seed=11))
        runs = [sum(1 for _ in group) for group in _runs(ids(batches))]
        copies.append(runs)
    assert copies[0] == copies[1] and set(copies[0]) == {1, 2}


def _runs(values):
    """Consecutive equal values, grouped."""
    import itertools

    return [list(group) for _, group in itertools.groupby(values)]


def test_copies_are_the_same_object_and_a_batch_changed_in_place_is_refused_naming_the_tensor():
    batches = [{"ids": torch.arange(4), "x": torch.zeros(4)}]
    first, second = list(echo_torch.echo(batches, 2))
    assert first is second  # A reference, not a copy of the tensors.
    iterator = iter(echo_torch.echo(batches, 2))
    batch = next(iterator)
    batch["x"].add_(1)  # The loop changes the batch it was given.
    with pytest.raises(RuntimeError, match=r"batch: the tensor at \['x'\] was changed in place"):
        next(iterator)


def test_a_per_copy_transform_augments_each_copy_on_its_own_and_leaves_the_batch_alone():
    # Echo before augmentation: each copy of a decoded batch gets its own random flip of its rows.
    batches = [{"ids": torch.arange(8) + 8 * i, "x": torch.arange(8.0) + 8 * i} for i in range(5)]
    generator = torch.Generator().manual_seed(0)

    def flip_some(batch):
        flip = torch.rand(8, generator=generator) < 0.5
        return {"ids": batch["ids"], "x": torch.where(flip, -batch["x"], batch["x"])}

    stats = echo_torch.EchoStats()
    copies = list(echo_torch.echo(batches, 3, seed=0, stats=stats, transform=flip_some))
    assert (stats.fresh, stats.emitted, len(copies)) == (5, 15, 15)
    assert [int(c["ids"][0]) for c in copies] == [8 * i for i in range(5) for _ in range(3)]
    for i in range(5):
        group = [c["x"] for c in copies[3 * i:3 * i + 3]]
        assert all(torch.equal(g.abs(), batches[i]["x"].abs()) for g in group)  # The same rows, flipped or not.
        assert not torch.equal(group[0], group[1]) or not torch.equal(group[1], group[2])  # Each copy its own flips.
        assert torch.equal(batches[i]["x"], torch.arange(8.0) + 8 * i)  # The loader's batch is untouched.


def test_a_transform_that_changes_the_batch_in_place_is_refused_and_a_bad_one_named():
    def in_place(batch):
        return batch.mul_(2)

    iterator = iter(echo_torch.echo([torch.ones(3)], 2, transform=in_place))
    next(iterator)
    with pytest.raises(RuntimeError, match=r"batch: the tensor at the batch was changed in place .*\(or the transform\)"):
        next(iterator)
    with pytest.raises(TypeError, match=r"transform: expected a function of one batch, or None, got str: 'flip'"):
        echo_torch.echo([torch.ones(3)], 2, transform="flip")


def test_mixed_rows_echo_each_example_as_batch_echo_would_across_batches_of_the_same_sizes():
    import collections

    def rows(mix_rows):
        stats = echo_torch.EchoStats()
        out = list(echo_torch.echo(PositionLoader(10), 2.5, shuffle_buffer_size=4, seed=5, stats=stats,
                                   mix_rows=mix_rows))
        return out, (stats.fresh, stats.emitted)

    mixed, mixed_counts = rows(True)
    whole, whole_counts = rows(False)
    assert mixed_counts == whole_counts and len(mixed) == len(whole)
    ids_of = lambda batches: collections.Counter(i for b in batches for i in b["ids"].tolist())  # noqa: E731
    assert ids_of(mixed) == ids_of(whole)  # Every example as often as batch echo sends it.
    assert all(len(b["ids"]) == 4 and b["x"].shape == (4, 2) for b in mixed)
    # A row keeps its own features (x is its batch's index) and a batch mixes rows of several fresh batches.
    assert all(torch.equal(b["x"][:, 0], (b["ids"] // 4).float()) for b in mixed)
    assert sum(len(set((b["ids"] // 4).tolist())) > 1 for b in mixed) > len(mixed) / 2


@pytest.mark.parametrize("batch, error, message", [
    ({"ids": torch.arange(4), "x": torch.zeros(3)}, ValueError,
     r"batch: mix_rows needs every tensor of a batch to have the same rows; the tensor at \['ids'\] has 4 and the "
     r"one at \['x'\] has 3"),
    ({"ids": torch.arange(4), "name": "a"}, TypeError, r"batch: mix_rows needs a structure of tensors; at \['name'\] "
                                                        r"it found str: 'a'"),
    (torch.tensor(3), TypeError, r"the tensor at the batch is a scalar"),
])
def test_mixed_rows_refuse_a_batch_without_rows_naming_the_path(batch, error, message):
    with pytest.raises(error, match=message):
        list(echo_torch.echo([batch, batch], 2, shuffle_buffer_size=2, seed=0, mix_rows=True))
    with pytest.raises(TypeError, match=r"mix_rows: expected True or False, got int: 1"):
        echo_torch.echo([batch], 2, mix_rows=1)


def test_a_fixed_integer_factor_gives_the_length():
    assert len(echo_torch.echo(PositionLoader(10), 3)) == 30
    with pytest.raises(TypeError, match=r"len: .*fixed integer factor, not 2.5"):
        len(echo_torch.echo(PositionLoader(10), 2.5))


@pytest.mark.parametrize("saved, now, message", [
    (dict(factor=2), dict(factor=3), r"factor: the state was saved with factor=2.0, this stage has 3.0"),
    (dict(factor=2), dict(factor=2, shuffle_buffer_size=4), r"shuffle_buffer_size: the state was saved with "
                                                             r"shuffle_buffer_size=0, this stage has 4"),
    (dict(factor=2, seed=1), dict(factor=2, seed=2), r"seed: the state was saved with seed=1, this stage has 2"),
])
def test_a_state_saved_with_other_settings_is_refused_naming_the_setting(saved, now, message):
    echoed = echo_torch.echo(PositionLoader(), **saved)
    next(iter(echoed))
    with pytest.raises(ValueError, match=message):
        echo_torch.echo(PositionLoader(), **now).load_state_dict(echoed.state_dict())
    with pytest.raises(ValueError, match=r"state: expected a state_dict\(\) of echoing.torch.EchoedLoader"):
        echo_torch.echo(PositionLoader(), 2).load_state_dict({"epoch": 3})


def test_over_a_loader_without_state_the_counts_resume_and_the_position_is_said_to_restart():
    batches = [{"ids": torch.arange(4 * k, 4 * k + 4)} for k in range(5)]
    stats = echo_torch.EchoStats()
    echoed = echo_torch.echo(batches, 2, stats=stats)
    iterator = iter(echoed)
    for _ in range(3):
        next(iterator)
    state = echoed.state_dict()
    restored_stats = echo_torch.EchoStats()
    restored = echo_torch.echo(batches, 2, stats=restored_stats)
    with pytest.warns(UserWarning, match="list has no state_dict"):
        restored.load_state_dict(state)
    assert (restored_stats.fresh, restored_stats.emitted) == (2, 3)
    assert ids(list(restored))[:2] == [[0, 1, 2, 3]] * 2  # A new pass, from the beginning.
    assert restored_stats.emitted == 3 + 10


def test_the_state_restores_a_live_factor_and_refuses_a_bad_one():
    factor = echo_torch.Factor(2.0)
    echoed = echo_torch.echo(PositionLoader(), factor, seed=0)
    next(iter(echoed))
    factor.assign(4.0)
    restored_factor = echo_torch.Factor(1.0)
    echo_torch.echo(PositionLoader(), restored_factor, seed=0).load_state_dict(echoed.state_dict())
    assert float(restored_factor) == 4.0
    for bad, error in ((0.5, ValueError), (float("nan"), ValueError), ("2", TypeError)):
        with pytest.raises(error, match="value: "):
            factor.assign(bad)


def test_a_live_factor_and_the_stats_refuse_to_go_to_worker_processes():
    import pickle

    with pytest.raises(TypeError, match="factor: a live echoing.torch.Factor"):
        pickle.dumps(echo_torch.Factor(2.0))
    with pytest.raises(TypeError, match="stats: echoing.torch.EchoStats cannot be sent"):
        pickle.dumps(echo_torch.EchoStats())


@pytest.mark.parametrize("loader, error, message", [
    ("abc", TypeError, r"loader: expected an iterable of batches .* got str: 'abc'"),
    (3, TypeError, r"loader: expected an iterable of batches .* got int: 3"),
])
def test_a_bad_loader_is_refused_naming_it(loader, error, message):
    with pytest.raises(error, match=message):
        echo_torch.echo(loader, 2)


def test_under_torch_distributed_a_seed_is_required(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="seed: None under torch.distributed"):
            echo_torch.echo(PositionLoader(), 1.5)
        assert len(list(echo_torch.echo(PositionLoader(), 2, seed=0))) == 20
    finally:
        dist.destroy_process_group()
