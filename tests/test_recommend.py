"""The rules of echoing.recommend, and the echo shuffle buffer rule checked on a real buffer."""

import collections
import math

import pytest
import tensorflow as tf

import echoing
import pipelines
from echoing.noise_scale import NoiseScale


def test_factor_is_r_capped_at_max_factor():
    assert echoing.recommend(3.2).factor == 3.2
    capped = echoing.recommend(20.0, max_factor=6.0)
    assert capped.factor == 6.0 and "capped at max_factor = 6" in capped.reasons[0]


@pytest.mark.parametrize("ratio", [0.3, 0.99, 1.0])
def test_at_r_of_one_or_less_it_says_do_not_echo(ratio):
    advice = echoing.recommend(ratio, batch_size=128, noise_scale=50.0)
    assert (advice.factor, advice.placement, advice.shuffle_buffer_size) == (1.0, "none", 0)
    assert str(advice).startswith("Do not echo (e = 1).")
    assert "bottleneck" in advice.reasons[0]


def test_a_ratio_measurement_is_used_and_said_to_be_measured_apart():
    measurement = echoing.RatioMeasurement(0.04, 0.01, (0.04,), (0.01,))
    advice = echoing.recommend(measurement, batch_size=32)
    assert advice.factor == pytest.approx(4.0) and advice.ratio == pytest.approx(4.0)
    assert "measured apart" in advice.reasons[0]


@pytest.mark.parametrize("batch_size, b_simple, placement, words", [
    (1024, 100.0, "after_batch", "curvature-dominated"),
    (256, 100.0, "after_batch", "curvature-dominated"),
    (128, 100.0, "before_augment", "near the critical batch size"),
    (32, 100.0, "before_augment", "noise-dominated"),
    (128, math.nan, "before_augment", "not known yet"),
])
def test_the_noise_scale_chooses_batch_or_example_echoing(batch_size, b_simple, placement, words):
    advice = echoing.recommend(4.0, batch_size=batch_size, noise_scale=b_simple)
    assert advice.placement == placement
    assert words in advice.reasons[1]


def test_without_a_noise_scale_it_echoes_before_augmentation_and_says_why():
    advice = echoing.recommend(4.0, batch_size=128)
    assert advice.placement == "before_augment"
    assert "§3.3" in advice.reasons[1] and "noise_scale" in advice.reasons[1]


def test_a_noise_scale_object_gives_its_smoothed_value():
    estimate = NoiseScale(1.0, 50.0, 50.0, 1.0, 400.0, 400.0, 3)
    assert echoing.recommend(4.0, batch_size=1024, noise_scale=estimate).placement == "after_batch"
    assert echoing.recommend(4.0, batch_size=512, noise_scale=estimate).placement == "before_augment"


def test_buffer_sizes_follow_the_rules_and_the_memory_budget():
    assert echoing.recommend(3.0, batch_size=128).shuffle_buffer_size == 5 * 2 * 128
    assumed = echoing.recommend(3.0)
    assert assumed.shuffle_buffer_size == 5 * 2 * 32 and "a batch of 32 is assumed" in assumed.reasons[-1]
    batch_echo = echoing.recommend(3.5, batch_size=1024, noise_scale=64.0)
    assert batch_echo.shuffle_buffer_size == 7 and "7 batches" in str(batch_echo)
    within = echoing.recommend(3.0, batch_size=128, element_bytes=3072)
    assert within.shuffle_buffer_size == 1280 and "3.8 MiB" in within.reasons[-1]
    capped = echoing.recommend(3.0, batch_size=128, element_bytes=3072, memory_budget_bytes=1_000_000)
    assert capped.shuffle_buffer_size == 1_000_000 // 3072 and "Capped from 1280 to 325" in capped.reasons[-1]


def share_meeting_a_copy(factor, batch_size, buffer_size, examples=3000):
    """Share of emitted examples whose batch holds another copy of the same example."""
    ds = tf.data.Dataset.range(examples).apply(echoing.echo(factor, shuffle_buffer_size=buffer_size, seed=1))
    meeting = total = 0
    for batch in ds.batch(batch_size, drop_remainder=True):
        counts = collections.Counter(batch.numpy().tolist())
        meeting += sum(n for n in counts.values() if n > 1)
        total += batch_size
    return meeting / total


def test_the_recommended_buffer_keeps_copies_apart_about_as_the_rule_says():
    size = echoing.recommend(3.0, batch_size=16).shuffle_buffer_size
    assert size == 160
    assert share_meeting_a_copy(3, 16, 0) > 0.9  # Without a buffer copies share a batch unless split by its edge.
    assert 0.03 <= share_meeting_a_copy(3, 16, size) <= 0.2  # The rule aims at about 10%.
    assert share_meeting_a_copy(3, 16, size // 8) > 0.3  # A much smaller buffer does much worse.


def test_str_reads_as_advice():
    text = str(echoing.recommend(2.0, batch_size=64))
    assert text.splitlines()[0] == "Echo before augmentation with e = 2 and an echo shuffle buffer of 320 elements."
    assert all(line.startswith("- ") for line in text.splitlines()[1:])
    assert str(echoing.recommend(4.0, batch_size=1024, noise_scale=64.0)).startswith(
        "Echo after batching (batch echoing) with e = 4 and an echo shuffle buffer of 8 batches.")


@pytest.mark.parametrize("kwargs, error, message", [
    ({"ratio": "3"}, TypeError, r"ratio: expected a float R or an echoing.RatioMeasurement, got str: '3'"),
    ({"ratio": -1.0}, ValueError, r"ratio: expected a positive finite R, got -1.0"),
    ({"ratio": math.inf}, ValueError, r"ratio: expected a positive finite R, got inf"),
    ({"batch_size": 0}, ValueError, r"batch_size: expected an int >= 1 or None, got 0"),
    ({"batch_size": 12.5}, TypeError, r"batch_size: expected an int >= 1 or None, got float: 12.5"),
    ({"noise_scale": -5.0, "batch_size": 8}, ValueError, r"noise_scale: expected a positive finite B_simple .* got -5.0"),
    ({"noise_scale": "big", "batch_size": 8}, TypeError, r"noise_scale: .* got str: 'big'"),
    ({"noise_scale": 100.0}, ValueError, r"batch_size: needed to compare the batch with noise_scale=100.0"),
    ({"max_factor": 0.5}, ValueError, r"max_factor: expected a finite number >= 1, got 0.5"),
    ({"element_bytes": 0}, ValueError, r"element_bytes: expected an int >= 1 or None, got 0"),
    ({"memory_budget_bytes": 10}, ValueError, r"element_bytes: needed to apply memory_budget_bytes=10"),
])
def test_bad_arguments_raise_naming_the_argument_and_the_value(kwargs, error, message):
    arguments = {"ratio": 3.0, **kwargs}
    with pytest.raises(error, match=message):
        echoing.recommend(arguments.pop("ratio"), **arguments)


def test_it_advises_only_an_echo_point_the_pipeline_has():
    # A text pipeline has no augmentation: its example point is "example".
    text = echoing.recommend(3.0, batch_size=64, points=pipelines.TEXT_ECHO_POINTS)
    assert text.placement is echoing.EchoPoint.EXAMPLE and "no point before augmentation" in str(text)
    assert echoing.recommend(3.0, points=pipelines.IMAGE_ECHO_POINTS).placement == "before_augment"
    # Well above the noise scale, batch echoing; only where the pipeline has the point.
    assert echoing.recommend(3.0, batch_size=4096, noise_scale=100.0, points=["example", "after_batch"]).placement == "after_batch"
    no_batch_point = echoing.recommend(3.0, batch_size=4096, noise_scale=100.0, points=["before_augment"])
    assert no_batch_point.placement == "before_augment" and "no after_batch point" in str(no_batch_point)
    only_batches = echoing.recommend(3.0, batch_size=64, points=["after_batch"])
    assert only_batches.placement == "after_batch" and only_batches.shuffle_buffer_size == 6  # ceil(2e) batches


@pytest.mark.parametrize("points, error, message", [
    (["before_batch"], ValueError, "points: expected one of 'none', 'example', .*got 'before_batch'"),
    (["none"], ValueError, "points: the pipeline has no echo point to advise"),
    ("example", TypeError, "points: expected a sequence of echo points, got str"),
])
def test_bad_points_are_named(points, error, message):
    with pytest.raises(error, match=message):
        echoing.recommend(3.0, points=points)
