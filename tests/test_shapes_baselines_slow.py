"""Slow: on the embedded images a small ResNet clearly beats a linear model on pixels."""

import pytest

from benchmarks import shapes_baselines


@pytest.mark.slow
def test_resnet_clearly_beats_a_linear_model_on_embedded_images(tmp_path):
    config = shapes_baselines.BaselineConfig(
        steps=500, num_train_examples=20_000, num_eval_examples=1_000, cache_dir=str(tmp_path / "cache")
    )
    results = shapes_baselines.run(config, tmp_path / "shapes_baselines.json")
    assert results.linear.eval_accuracy < 0.25
    assert results.resnet.eval_accuracy > results.linear.eval_accuracy + 0.3
    assert (tmp_path / "shapes_baselines.json").exists()
