"""Is the embedded image data a real task? A linear model on pixels against a small ResNet.

Both train through the same image pipeline (:mod:`pipelines.image`, no echo) for the same
number of steps and are evaluated on the held-out split. The embedded data is meant to
carry its class in shape only, so the linear model should stay near chance (0.10) while
the ResNet learns it.

Run: ``python -m benchmarks.shapes_baselines`` (about 3 minutes on 2 cores); it writes
``runs/shapes_baselines.json``, or the committed file with ``--output-dir benchmarks/results``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Optional

import keras

from benchmarks.lib import models, results_io
from benchmarks.lib.tables import markdown_table
from pipelines import image


@dataclasses.dataclass(frozen=True)
class BaselineConfig(results_io.Record):
    """Settings of the baseline comparison.

    Attributes:
      steps: training steps for each model.
      batch_size: examples per step.
      num_train_examples: embedded training examples (the default 100k split).
      num_eval_examples: held-out examples evaluated.
      resnet_depth: depth of the CIFAR ResNet (6n + 2).
      resnet_width: width of its first stage.
      seed: seeds the pipeline and the initial weights.
      cache_dir: embedded data cache (default: the pipelines' default).
    """

    steps: int = 600
    batch_size: int = 128
    num_train_examples: int = 100_000
    num_eval_examples: int = 2_000
    resnet_depth: int = 8
    resnet_width: int = 16
    seed: int = 0
    cache_dir: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class ModelResult(results_io.Record):
    """One model trained ``steps`` steps: held-out accuracy and loss, and its training seconds."""

    model: str
    eval_accuracy: float
    eval_loss: float
    train_seconds: float
    steps: int


@dataclasses.dataclass(frozen=True)
class BaselineResults(results_io.Record):
    """The linear model and the ResNet, and the accuracy of chance."""

    linear: ModelResult
    resnet: ModelResult
    chance: float


def train_and_evaluate(model: keras.Model, optimizer, config: BaselineConfig) -> ModelResult:
    pipeline = image.ImagePipelineConfig(
        batch_size=config.batch_size, seed=config.seed, repeat=True, cache_dir=config.cache_dir,
        num_train_examples=config.num_train_examples, num_eval_examples=config.num_eval_examples,
    )
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    start = time.perf_counter()
    model.fit(image.train_dataset(pipeline), steps_per_epoch=config.steps, epochs=1, verbose=0)
    seconds = time.perf_counter() - start
    loss, accuracy = model.evaluate(image.eval_dataset(pipeline), verbose=0)
    return ModelResult(model=model.name, eval_accuracy=accuracy, eval_loss=loss, train_seconds=seconds, steps=config.steps)


def run(config: BaselineConfig, output: Optional[Path]) -> BaselineResults:
    keras.utils.set_random_seed(config.seed)
    # Adam suits the convex linear problem; SGD with momentum 0.9 at 0.1 is the usual ResNet recipe.
    linear = train_and_evaluate(models.linear_classifier(), keras.optimizers.Adam(1e-3), config)
    keras.utils.set_random_seed(config.seed)
    resnet = train_and_evaluate(
        models.resnet_cifar(config.resnet_depth, config.resnet_width), keras.optimizers.SGD(0.1, momentum=0.9), config
    )
    results = BaselineResults(linear=linear, resnet=resnet, chance=0.1)
    if output is not None:
        results_io.write_results(output.stem, config.record(), results.record(), output.parent)
    return results


def table(document: dict) -> str:
    """Markdown: each model's steps, held-out accuracy and training seconds (``python -m benchmarks.readme_tables``)."""
    _, results = results_io.typed(document, BaselineConfig, BaselineResults)
    return markdown_table(["model (same pipeline and steps)", "steps", "eval accuracy", "train seconds"],
                          [[row.model, row.steps, f"{row.eval_accuracy:.3f}", f"{row.train_seconds:.0f}"]
                           for row in (results.linear, results.resnet)], align="lrrr")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=BaselineConfig.steps)
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    output = args.output_dir / "shapes_baselines.json"
    run(BaselineConfig(steps=args.steps), output)
    print(table(results_io.read_results(output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
