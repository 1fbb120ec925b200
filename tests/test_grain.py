"""echoing.grain beyond the shared contract (tests/test_echo_contract.py): checkpoints at every position, workers, the extra."""

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

grain = pytest.importorskip("grain", reason="grain is not installed; pip install -e '.[grain]' runs these tests")
from echoing import grain as echo_grain  # noqa: E402

SETTINGS = [
    pytest.param(dict(factor=2), id="integer"),
    pytest.param(dict(factor=2.5, seed=7), id="fractional"),
    pytest.param(dict(factor=1.7, shuffle_buffer_size=8, seed=3), id="fractional-shuffled"),
    pytest.param(dict(factor=3, shuffle_buffer_size=5, seed=1), id="integer-shuffled"),
    pytest.param(dict(factor="live", seed=2), id="live"),
    pytest.param(dict(factor="live", shuffle_buffer_size=6, seed=2), id="live-shuffled"),
    pytest.param(dict(factor=2.5), id="unseeded"),
]


def build(settings, n=25, stats=None):
    settings = dict(settings)
    if settings["factor"] == "live":
        settings["factor"] = echo_grain.Factor(2.4)
    return echo_grain.echo(grain.MapDataset.range(n).map(lambda i: {"id": i, "x": np.full([3], i)}),
                           stats=stats, **settings)


@pytest.mark.parametrize("settings", SETTINGS)
def test_grains_own_checkpoint_check_passes(settings):
    grain.experimental.assert_equal_output_after_checkpoint(build(settings, stats=echo_grain.EchoStats()))


@pytest.mark.parametrize("settings", SETTINGS)
def test_an_iterator_restored_at_any_step_continues_exactly_with_its_counts(settings):
    stats = echo_grain.EchoStats()
    iterator = iter(build(settings, stats=stats))
    states, outputs, counts = [iterator.get_state()], [], [(0, 0)]
    for element in iterator:
        outputs.append(int(element["id"]))
        states.append(iterator.get_state())
        counts.append((stats.fresh, stats.emitted))
    for step, state in enumerate(states):
        restored_stats = echo_grain.EchoStats()
        restored = iter(build(settings, stats=restored_stats))
        restored.set_state(state)
        assert (restored_stats.fresh, restored_stats.emitted) == counts[step]
        assert [int(e["id"]) for e in restored] == outputs[step:], f"restored at step {step}"
        assert (restored_stats.fresh, restored_stats.emitted) == counts[-1]


def test_a_live_factor_set_after_a_checkpoint_applies_after_the_restore_and_not_before():
    factor = echo_grain.Factor(1.0)
    iterator = iter(echo_grain.echo(grain.MapDataset.range(100), factor, seed=0))
    [next(iterator) for _ in range(10)]
    state = iterator.get_state()
    factor.assign(3.0)
    restored = iter(echo_grain.echo(grain.MapDataset.range(100), factor, seed=0))
    restored.set_state(state)
    assert [int(next(restored)) for _ in range(6)] == [10, 10, 10, 11, 11, 11]


class Held:
    """An element the test can watch being freed (a weak reference to it dies)."""

    def __init__(self, i):
        self.i = i


def test_close_lets_go_of_the_copies_held_keeps_the_counts_and_refuses_next():
    # After mp_prefetch the copies are grain's shared memory: close() must free them, even
    # while the stage's EchoStats (which holds its latest iterator) is alive.
    import gc
    import weakref

    stats = echo_grain.EchoStats()
    dataset = echo_grain.echo(grain.MapDataset.range(50).map(Held), 2, shuffle_buffer_size=8, seed=0, stats=stats)
    iterator = iter(dataset)
    first = [next(iterator) for _ in range(5)]
    held = weakref.ref(first[0])
    counts = (stats.fresh, stats.emitted)
    del first
    gc.collect()
    assert held() is not None  # The window still holds its copies.
    iterator.close()
    gc.collect()
    assert held() is None
    assert (stats.fresh, stats.emitted) == counts == (4, 5)
    with pytest.raises(ValueError, match="closed"):
        next(iterator)
    iterator.close()  # Again: nothing more to do.
    fresh_start = iter(dataset)  # A new iterator starts afresh: the first window, ids 0-3 twice each.
    assert sorted(next(fresh_start).i for _ in range(8)) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_bad_live_value_stops_iteration_naming_it_and_assign_refuses_it():
    factor = echo_grain.Factor(2.0)
    with pytest.raises(ValueError, match=r"value: .*>= 1, got 0.5"):
        factor.assign(0.5)
    with pytest.raises(TypeError, match=r"value: .*got str"):
        echo_grain.Factor("2")
    iterator = iter(echo_grain.echo(grain.MapDataset.range(10), factor))
    assert [int(next(iterator)) for _ in range(2)] == [0, 0]
    factor._value = float("nan")  # Set around assign(): the stage still refuses it.
    with pytest.raises(ValueError, match=r"factor \(current value of the echoing.grain.Factor\): .*got nan"):
        next(iterator)


def test_a_dataset_that_is_not_grains_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"dataset: expected a grain.IterDataset or grain.MapDataset, got list"):
        echo_grain.echo([1, 2, 3], 2)


def test_a_live_factor_or_counts_cannot_go_to_worker_processes_but_a_fixed_factor_can():
    with pytest.raises(TypeError, match="factor: .*after mp_prefetch"):
        pickle.dumps(echo_grain.echo(grain.MapDataset.range(10), echo_grain.Factor(2.0)))
    with pytest.raises(TypeError, match="stats: .*after mp_prefetch"):
        pickle.dumps(echo_grain.echo(grain.MapDataset.range(10), 2, stats=echo_grain.EchoStats()))
    fixed = pickle.loads(pickle.dumps(echo_grain.echo(grain.MapDataset.range(3), 2)))
    assert [int(x) for x in fixed] == [0, 0, 1, 1, 2, 2]


def test_mp_prefetch_workers_echo_a_fixed_factor_and_refuse_a_live_one():
    code = textwrap.dedent("""
        import grain
        from absl import flags
        from echoing import grain as echo_grain

        if __name__ == "__main__":
            flags.FLAGS.mark_as_parsed()  # grain's workers read an absl flag (google/grain#1355).
            options = grain.MultiprocessingOptions(num_workers=2)
            ds = echo_grain.echo(grain.MapDataset.range(20), 2, seed=1).mp_prefetch(options)
            print(sorted(int(x) for x in ds) == sorted(list(range(20)) * 2))
            ds = echo_grain.echo(grain.MapDataset.range(20), echo_grain.Factor(2.0)).mp_prefetch(options)
            try:
                list(ds)
            except TypeError as error:
                print("refused:", "after mp_prefetch" in str(error))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.split()[-3:] == ["True", "refused:", "True"], done.stderr[-2000:]


def test_without_grain_the_import_names_the_extra():
    code = "import sys; sys.modules['grain'] = None\ntry:\n import echoing.grain\nexcept ImportError as e: print(e)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert ".[grain]" in done.stdout, done.stderr[-2000:]


def test_auto_echo_takes_a_grain_factor_with_grain_stats_and_refuses_tf_stats_with_it():
    import echoing

    auto = echoing.AutoEcho(echo_grain.Factor(1.0), stats=echo_grain.EchoStats(), elements_per_step=8, verbose=0)
    assert auto.controller.settings.elements_per_step == 8
    with pytest.raises(TypeError, match=r"stats: with an echoing.grain.Factor, expected .*echoing.grain.EchoStats"):
        echoing.AutoEcho(echo_grain.Factor(1.0), stats=echoing.EchoStats(), elements_per_step=8, verbose=0)
