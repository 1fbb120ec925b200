"""The PyTorch time-to-target study's parts on a tiny split: the pipeline, each arm's batches, training, the replay, the tables.

Nothing here reads the clock for a figure: the replay runs a few steps and only its
shape is checked. The figures come from ``python -m benchmarks.torch_time_to_target``.
"""

import dataclasses
import importlib.util

import pytest

torch = pytest.importorskip("torch")

from benchmarks import torch_time_to_target as study  # noqa: E402
from benchmarks.torch_time_to_target import Arm, ArmRun  # noqa: E402
from echoing import Cause  # noqa: E402
from echoing import torch as echo_torch  # noqa: E402
from pipelines import torch_images  # noqa: E402


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return torch_images.TorchImageConfig(num_train_examples=64, num_eval_examples=32, batch_size=8, num_workers=0,
                                         cache_dir=str(tmp_path_factory.mktemp("cache")))


def _has_monai():
    return importlib.util.find_spec("monai") is not None


def test_the_pipeline_gives_normalized_augmented_images_deterministically_per_seed(config):
    first = next(iter(torch_images.train_loader(config)))
    again = next(iter(torch_images.train_loader(config)))
    other = next(iter(torch_images.train_loader(dataclasses.replace(config, seed=1))))
    images, labels = first
    assert images.shape == (8, 3, 32, 32) and images.dtype == torch.float32 and labels.dtype == torch.int64
    assert torch.equal(images, again[0]) and torch.equal(labels, again[1])
    assert not torch.equal(images, other[0])


def test_decoding_reads_the_embedded_images_back_from_jpeg(config):
    encoded, labels = torch_images.encoded_split("train", 64, config.cache_dir)
    image = torch_images.decode(encoded[0])
    assert image.shape == (3, 32, 32) and image.dtype == torch.uint8 and len(labels) == 64


@pytest.mark.parametrize("name, value", [("batch_size", 0), ("num_train_examples", 1.5), ("num_workers", -1),
                                         ("read_rate", 0), ("read_rate", "fast")])
def test_a_bad_pipeline_setting_is_refused_naming_it(name, value):
    with pytest.raises(ValueError, match=f"{name}: expected"):
        torch_images.TorchImageConfig(**{name: value})


@pytest.mark.parametrize("arm", [Arm.BATCH_2, Arm.BATCH_4])
def test_batch_echo_hands_each_batch_out_factor_times_side_by_side(config, arm):
    stats = echo_torch.EchoStats()
    stream = study.batches(arm, config, echo_torch.Factor(arm.factor), stats)
    got = [next(stream) for _ in range(3 * int(arm.factor))]
    for group in range(3):
        copies = got[group * int(arm.factor):(group + 1) * int(arm.factor)]
        assert all(copy is copies[0] for copy in copies)
    assert stats.fresh == 3 and stats.emitted == 3 * arm.factor


def test_example_echo_mixes_rows_of_several_fresh_batches_and_keeps_every_copy(config):
    stats = echo_torch.EchoStats()
    stream = study.batches(Arm.EXAMPLE_2, config, echo_torch.Factor(2.0), stats)
    per_epoch = config.num_train_examples // config.batch_size
    labels = torch.cat([next(stream)[1] for _ in range(2 * per_epoch)])
    fresh = torch.cat([b[1] for b in torch_images.train_loader(config)])
    # Every example of the epoch twice: the rows are those of the fresh batches, twice each.
    assert sorted(labels.tolist()) == sorted(fresh.tolist() * 2)
    assert stats.fresh == per_epoch


@pytest.mark.skipif(not _has_monai(), reason="MONAI is not installed; pip install -e '.[monai]' runs the anchor")
def test_monai_hands_each_batch_out_four_times(config):
    stream = study.batches(Arm.MONAI_4, config, echo_torch.Factor(4.0), echo_torch.EchoStats())
    got = [next(stream) for _ in range(8)]
    assert all(torch.equal(got[i][0], got[0][0]) for i in range(4))
    assert not torch.equal(got[4][0], got[0][0])


def test_training_stops_at_the_first_evaluation_that_reaches_the_target(config, monkeypatch):
    monkeypatch.setattr(study, "TARGET", 0.0)
    run = study.train(Arm.BATCH_2, 0, config=config)
    assert run.steps_to_target == study.EVAL_EVERY
    assert run.fresh_batches == study.EVAL_EVERY // 2


def test_training_follows_the_controllers_schedule(config, monkeypatch):
    monkeypatch.setattr(study, "TARGET", 0.0)
    held = study.train(Arm.CONTROLLER, 0, schedule={0: 8.0}, config=config)
    lowered = study.train(Arm.CONTROLLER, 0, schedule={0: 8.0, 9: 1.0}, config=config)
    # At e = 8 the 50 steps read about 50 / 8 fresh batches; lowered to 1 after step 10, about one a step
    # (the factor is read as a window of 8 batches' copies begins).
    assert held.steps_to_target == lowered.steps_to_target == study.EVAL_EVERY
    assert held.fresh_batches <= study.EVAL_EVERY / 8 + 2 and lowered.fresh_batches >= study.EVAL_EVERY - 16


def test_the_replay_times_every_evaluation_interval_and_records_the_controllers_decisions(config, monkeypatch):
    monkeypatch.setattr(study, "EVAL_EVERY", 2)
    monkeypatch.setattr(study, "STEP_SECONDS", 0.001)
    run = study.replay(Arm.CONTROLLER, 0, 6, config=config)
    assert len(run.replay_seconds) == 3 and list(run.replay_seconds) == sorted(run.replay_seconds)
    first = run.decisions[0]
    assert (first.step, first.factor, first.cause) == (0, study.MAX_FACTOR, Cause.START)
    assert study.replay(Arm.NONE, 0, 4, config=config).decisions is None


def test_seconds_to_target_reads_the_replay_at_the_step_that_reached_it():
    run = ArmRun(Arm.NONE, 0, steps_to_target=2 * study.EVAL_EVERY, replay_seconds=[1.0, 2.5, 4.0])
    assert run.seconds_to_target == 2.5
    assert ArmRun(Arm.NONE, 0, steps_to_target=None, replay_seconds=[1.0]).seconds_to_target is None
    assert ArmRun(Arm.NONE, 0, steps_to_target=9 * study.EVAL_EVERY, replay_seconds=[1.0]).seconds_to_target is None


def test_the_summary_and_tables_give_medians_and_ranges_over_seeds_against_no_echo():
    runs = [ArmRun(Arm.NONE, seed, study.EVAL_EVERY, 50, [10.0 + seed]) for seed in range(3)]
    runs += [ArmRun(Arm.BATCH_4, seed, study.EVAL_EVERY, 13, [4.0 + seed]) for seed in range(3)]
    summary = study.summary(runs)
    assert summary[Arm.BATCH_4.value].seconds == (5.0, 4.0, 6.0)
    assert summary[Arm.BATCH_4.value].over_no_echo == (0.455, 0.4, 0.5)
    document = {"settings": study.settings().record(),
                "results": study.StudyResults(tuple(runs), summary).record()}
    table = study.document_table(document)
    assert "| batch echo, e = 4 | 3 | 5.0 (4.0-6.0) | 0.46 (0.40-0.50)x | 50 | 13 |" in table
    assert Arm.CONTROLLER.value not in table


@pytest.mark.skipif(not _has_monai(), reason="MONAI is not installed; pip install -e '.[monai]' runs the anchor")
def test_the_stage_cost_times_every_way_over_the_same_batches():
    cost = study.stage_cost(batches_per_repeat=4, repeats=1)
    assert set(cost) == {"no echo (DataLoader)", "repeated in a for loop", "echoing.torch.echo, e = 4",
                         "echoing.torch.echo, e = 4, mix_rows", "MONAI ThreadDataLoader(repeats=4)"}
    document = {"settings": study.settings().record(),
                "results": study.StudyResults((), {}, cost).record()}
    table = study.document_stage_table(document)
    assert table.count("\n") == len(cost) + 1
