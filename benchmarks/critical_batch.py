"""Critical batch size at small scale: steps and examples to a target across batch sizes, against B_simple.

The central experiment of McCandlish, Kaplan et al. (2018), on the ResNet task and the
embedded images: train to a fixed validation accuracy at several batch sizes, with the
learning rate scaled linearly with the batch size (Goyal et al., 2017: 0.1 at 128, the
time-to-target benchmark's recipe, and warm-up over a fixed number of examples), and
record the steps S and examples E = S * B each needed, with the shared training loop
and its crossing rule (:mod:`benchmarks.lib.training`: the target met at two evaluations in a
row; S is the first). The paper's model
``(S/S_min - 1)(E/E_min - 1) = 1`` is the same as ``S = S_min + E_min / B``, a straight line
in ``1/B``, fitted by least squares; its ``B_crit = E_min / S_min``. Each run also
measures the simple noise scale ``B_simple`` every 10 steps, as a custom loop does
(:class:`NoiseScaleMeter`: :func:`echoing.microbatch_gradient_norms` before the step), to
compare with ``B_crit``.

A second measurement times :class:`echoing.NoiseScaleCallback`'s overhead at a measurement every 10 steps:
steps per second with and without it, alternated on one model over batches held in memory
(so that only the training step is timed), medians over repeats.

Run ``python -m benchmarks.critical_batch``; results go to ``runs/critical_batch.json``
(resumable: finished batch sizes are kept) and the figure to ``critical_batch.png`` beside
it; ``--output-dir benchmarks/results`` regenerates the committed ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
from pathlib import Path
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

import echoing
from benchmarks.lib import results_io
from benchmarks.lib.step_times import StepTimes
from benchmarks.lib.tasks import DataOptions, Task, TaskSettings, fixed_run, task_for
from benchmarks.lib.run_records import CurvePoint
from benchmarks.lib.training import train_to_target
from benchmarks.lib.tables import markdown_table
from benchmarks.lib.tradeoff import Summary, summarise
from pipelines import image


@dataclasses.dataclass(frozen=True)
class CriticalBatchSettings(results_io.Record):
    """What the experiment runs.

    Attributes:
      batch_sizes: batch sizes to train at.
      seeds: seeds; each batch size runs once per seed.
      base_batch_size: the batch size ``base_learning_rate`` belongs to.
      base_learning_rate: SGD (momentum 0.9) learning rate at ``base_batch_size``; scaled
        linearly with the batch size.
      warmup_examples: learning-rate warm-up length, in examples (steps = this / B).
      target: validation accuracy to reach.
      budget_examples: examples after which a run stops if it has not reached the target.
      eval_every_examples: examples between evaluations (steps = this / B, at least 1), so
        every batch size resolves E equally finely.
      eval_examples: held-out examples per evaluation.
      noise_every_steps: steps between noise-scale measurements.
      num_microbatches: micro-batches per measured batch.
      model: ResNet builder arguments.
      num_train_examples: embedded training examples (``None``: the default 100k).
    """

    batch_sizes: tuple[int, ...] = (32, 64, 128, 256, 512)
    seeds: tuple[int, ...] = (0,)
    base_batch_size: int = 128
    base_learning_rate: float = 0.1
    warmup_examples: int = 6400
    target: float = 0.75
    budget_examples: int = 320_000
    eval_every_examples: int = 2560
    eval_examples: int = 2000
    noise_every_steps: int = 10
    num_microbatches: int = 4
    model: dict = dataclasses.field(default_factory=lambda: {"depth": 8, "width": 16})
    num_train_examples: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class NoiseMeasure(results_io.Record):
    """One measurement of the noise scale (:class:`echoing.NoiseScaleEstimate`'s figures) before ``step``."""

    step: int
    b_simple: float
    b_simple_smoothed: float
    smoothed_gradient_sq_norm: float
    smoothed_trace_sigma: float


@dataclasses.dataclass(frozen=True)
class BatchRun(results_io.Record):
    """One batch size and seed trained to the target.

    Attributes:
      learning_rate: scaled linearly with the batch size.
      steps, examples: to the target (``None`` if not reached).
      seconds: training seconds to the target, or to the budget.
      curve: every evaluation; noise_scale: every measurement of ``B_simple``.
      b_simple_median, b_simple_final: the smoothed ``B_simple`` over the run and at its end.
      machine: the host it ran on (stamped by the results file).
    """

    OMITTED_WHEN_NONE = ("machine",)

    batch_size: int
    seed: int
    learning_rate: float
    reached: bool
    steps: Optional[int]
    examples: Optional[int]
    seconds: float
    curve: tuple[CurvePoint, ...]
    noise_scale: tuple[NoiseMeasure, ...]
    b_simple_median: Optional[float]
    b_simple_final: Optional[float]
    machine: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class Overhead(results_io.Record):
    """Seconds per step with and without :class:`echoing.NoiseScaleCallback`, medians over repeats.

    ``per_repeat`` holds every repeat's, as ``{"without": [...], "with": [...]}``.
    """

    batch_size: int
    steps_per_repeat: int
    repeats: int
    every_n_steps: int
    num_microbatches: int
    seconds_per_step_without: float
    seconds_per_step_with: float
    overhead: float
    per_repeat: dict


@dataclasses.dataclass(frozen=True)
class ExperimentSettings(results_io.Record):
    experiment: CriticalBatchSettings


@dataclasses.dataclass(frozen=True)
class CriticalBatchResults(results_io.Record):
    """Every run, and the callback's overhead (absent until measured); their summary is derived, not stored."""

    OMITTED_WHEN_NONE = ("overhead",)

    runs: tuple[BatchRun, ...]
    overhead: Optional[Overhead] = None

    @property
    def summary(self) -> Summary:
        """The medians per batch size and the fit (:func:`benchmarks.lib.tradeoff.summarise`)."""
        return summarise(list(self.runs))


def task_at(settings: CriticalBatchSettings, batch_size: int) -> Task:
    """The ResNet task at one batch size (learning rate scaled linearly).

    Without XLA, as when the committed results (benchmarks/results/critical_batch.json) ran.
    """
    return task_for(TaskSettings(
        name="resnet", batch_size=batch_size,
        learning_rate=settings.base_learning_rate * batch_size / settings.base_batch_size,
        warmup_steps=max(1, math.ceil(settings.warmup_examples / batch_size)),
        budget_steps=math.ceil(settings.budget_examples / batch_size),
        eval_every=max(1, settings.eval_every_examples // batch_size),
        eval_examples=settings.eval_examples, target=settings.target, model=dict(settings.model), jit_compile=False,
    ))


def data_of(settings: CriticalBatchSettings, cache_dir: Optional[str]) -> DataOptions:
    """The embedded data every run of the experiment reads."""
    return DataOptions(source=None, cache_dir=cache_dir, num_train_examples=settings.num_train_examples)


class NoiseScaleMeter:
    """Measures ``B_simple`` every N steps of a custom loop, before the step updates the weights.

    What :class:`echoing.NoiseScaleCallback` does inside ``fit``, done as its docstring says a
    custom loop should: :func:`echoing.microbatch_gradient_norms` on the step's batch (in a
    ``tf.function``, traced once per batch shape), fed to an
    :class:`echoing.NoiseScaleEstimator`. Pass it as ``before_step`` to
    :func:`benchmarks.lib.training.train_to_target`.
    """

    def __init__(self, every_n_steps: int, num_microbatches: int):
        self.every_n_steps, self.num_microbatches = every_n_steps, num_microbatches
        self.estimator = echoing.NoiseScaleEstimator()
        self.measurements: list[NoiseMeasure] = []
        self._measure = None

    def __call__(self, model: keras.Model, step: int, batch: tuple) -> None:
        if step % self.every_n_steps:
            return
        if self._measure is None:
            k = self.num_microbatches
            self._measure = tf.function(lambda data: echoing.microbatch_gradient_norms(model, data, k, drop_remainder=True))
        norms = echoing.GradientNorms(*(float(value) for value in self._measure(batch)))
        estimate = self.estimator.update(norms)
        self.measurements.append(NoiseMeasure(step=step, b_simple=estimate.b_simple,
                                              b_simple_smoothed=estimate.b_simple_smoothed,
                                              smoothed_gradient_sq_norm=estimate.smoothed_gradient_sq_norm,
                                              smoothed_trace_sigma=estimate.smoothed_trace_sigma))


def train_at_batch_size(settings: CriticalBatchSettings, batch_size: int, seed: int, *, cache_dir=None,
                        log=print) -> BatchRun:
    """Trains to the target at one batch size with the shared loop, measuring the noise scale; returns the record.

    The loop and its crossing rule (the target met at two evaluations in a row) are
    :func:`benchmarks.lib.training.train_to_target`'s; steps and examples are those of the
    first of the two.
    """
    task = task_at(settings, batch_size)
    meter = NoiseScaleMeter(settings.noise_every_steps, settings.num_microbatches)
    spec = fixed_run(task, data_of(settings, cache_dir), seed=seed)
    trained = train_to_target(spec, before_step=meter, log=lambda line: None)
    reached = trained.reached
    smoothed = [m.b_simple_smoothed for m in meter.measurements if not math.isnan(m.b_simple_smoothed)]
    seconds = trained.seconds if reached else trained.curve[-1].seconds
    log(f"  B={batch_size} seed={seed}: " + (f"reached at step {trained.steps} ({trained.fresh_examples:,.0f} examples, "
                                             if reached else f"not reached in {trained.curve[-1].step} steps (")
        + f"{seconds:.0f}s), B_simple at the end {smoothed[-1] if smoothed else float('nan'):.0f}")
    return BatchRun(batch_size=batch_size, seed=seed, learning_rate=task.settings.learning_rate, reached=reached,
                    steps=trained.steps, examples=round(trained.fresh_examples) if reached else None, seconds=seconds,
                    curve=trained.curve, noise_scale=tuple(meter.measurements),
                    b_simple_median=statistics.median(smoothed) if smoothed else None,
                    b_simple_final=smoothed[-1] if smoothed else None)


def measure_overhead(settings: CriticalBatchSettings, *, batch_size: int = 128, steps: int = 100, repeats: int = 5,
                     skip: int = 10, cache_dir=None) -> Overhead:
    """Seconds per step with and without the callback, alternated on one model, in-memory batches."""
    task = task_at(settings, batch_size)
    keras.utils.set_random_seed(0)
    model = task.build_model()
    config = fixed_run(task, data_of(settings, cache_dir)).pipeline_config()
    in_memory = image.train_dataset(config).take(16).cache().repeat()
    list(in_memory.take(16))  # Fill the cache before timing.
    callback = echoing.NoiseScaleCallback(every_n_steps=settings.noise_every_steps,
                                          num_microbatches=settings.num_microbatches, verbose=0)
    per_step_without, per_step_with = [], []
    for repeat in range(repeats + 1):  # The first round warms up (tracing) and is not kept.
        for kept, extra in ((per_step_without, []), (per_step_with, [callback])):
            timer = StepTimes()
            model.fit(in_memory, steps_per_epoch=steps, epochs=1, callbacks=[timer, *extra], shuffle=False, verbose=0)
            if repeat:
                times = timer.times[skip:]
                kept.append((times[-1] - times[0]) / (len(times) - 1))
    without, with_callback = statistics.median(per_step_without), statistics.median(per_step_with)
    per_step = {"without": per_step_without, "with": per_step_with}
    return Overhead(batch_size=batch_size, steps_per_repeat=steps, repeats=repeats,
                    every_n_steps=settings.noise_every_steps, num_microbatches=settings.num_microbatches,
                    seconds_per_step_without=without, seconds_per_step_with=with_callback,
                    overhead=with_callback / without - 1, per_repeat=per_step)


def run(settings: CriticalBatchSettings, output: Path, *, overhead: bool = True, cache_dir=None,
        log=print) -> CriticalBatchResults:
    """Runs every batch size and seed not already in ``output``, then the overhead; returns the results.

    Each run is written as it ends (:class:`benchmarks.lib.results_io.ResultsFile`), so an
    interrupted sweep resumes where it stopped.
    """
    results = results_io.ResultsFile(output, ExperimentSettings(settings).record(), key=_run_key)

    def runs() -> list[BatchRun]:
        return [BatchRun.from_record(record) for record in results.runs]

    for seed in settings.seeds:
        for batch_size in settings.batch_sizes:
            if results.done((batch_size, seed)):
                continue
            log(f"B={batch_size} seed={seed} (learning rate {task_at(settings, batch_size).settings.learning_rate:g})")
            results.add(train_at_batch_size(settings, batch_size, seed, cache_dir=cache_dir, log=log).record())
    measured = results.extra.get("overhead")
    if overhead and measured is None:
        measured = measure_overhead(settings, cache_dir=cache_dir).record()
        results.save_extra("overhead", measured)
        log(f"callback overhead at every {settings.noise_every_steps} steps: {Overhead.from_record(measured).overhead:+.1%}")
    return CriticalBatchResults(runs=tuple(runs()), overhead=Overhead.from_record(measured) if measured is not None else None)


def _run_key(record: dict) -> tuple[int, int]:
    run = BatchRun.from_record(record)
    return run.batch_size, run.seed


def typed(document: dict) -> tuple[ExperimentSettings, CriticalBatchResults]:
    """A critical-batch results document's settings and results."""
    return results_io.typed(document, ExperimentSettings, CriticalBatchResults)


def table(document: dict) -> str:
    """Markdown table: steps and examples to target per batch size, B_simple, and the fit."""
    settings, results = typed(document)
    summary = results.summary

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    base = settings.experiment
    rows = [[row.batch_size, f"{base.base_learning_rate * row.batch_size / base.base_batch_size:g}",
             f"{row.reached}/{row.runs}", fmt(row.steps, ",.0f"), fmt(row.examples, ",.0f"),
             fmt(row.b_simple_median, ",.0f"), fmt(row.b_simple_final, ",.0f")] for row in summary.rows]
    lines = [markdown_table(["batch size", "learning rate", "reached", "steps", "examples", "B_simple (median over run)",
                             "B_simple (at the end)"], rows, align="rrrrrrr")]
    fit = summary.fit
    if fit:
        lines.append("")
        lines.append(f"Fit of `S = S_min + E_min / B`: S_min = {fit.s_min:,.0f} steps, E_min = {fit.e_min:,.0f} examples, "
                     f"**B_crit = E_min / S_min = {fmt(fit.b_crit, ',.0f')}**.")
    if results.overhead is not None:
        o = results.overhead
        lines.append("")
        lines.append(f"Callback overhead at a measurement every {o.every_n_steps} steps (k = {o.num_microbatches}, B = "
                     f"{o.batch_size}): {o.seconds_per_step_without * 1e3:.0f} ms/step without, "
                     f"{o.seconds_per_step_with * 1e3:.0f} ms/step with, **{o.overhead:+.0%}** (medians of {o.repeats}).")
    return "\n".join(lines)


def plot(results_path: Path) -> Path:
    """Steps against examples with the fitted hyperbola, and B_simple over training; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 (matplotlib.ticker below)

    _, results = typed(results_io.read_results(results_path))
    summary = results.summary
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    rows = [r for r in summary.rows if r.steps is not None]
    left.scatter([r.examples for r in rows], [r.steps for r in rows], color="C0", zorder=3)
    for r in rows:
        left.annotate(f"B={r.batch_size}", (r.examples, r.steps), textcoords="offset points", xytext=(5, 4), fontsize=8)
    fit = summary.fit
    if fit and fit.b_crit:
        batch = np.geomspace(min(r.batch_size for r in rows) / 4, max(r.batch_size for r in rows) * 4, 200)
        left.plot(fit.e_min * (1 + batch / fit.b_crit), fit.s_min * (1 + fit.b_crit / batch), color="C1",
                  label=f"fit: S_min={fit.s_min:,.0f}, E_min={fit.e_min:,.0f}, B_crit={fit.b_crit:,.0f}")
        left.legend(fontsize=8)
    left.set(xscale="log", yscale="log", xlabel="examples to target (E)", ylabel="steps to target (S)",
             title="Steps vs examples to target")
    thousands = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value / 1000:g}k")
    for axis in (left.xaxis, left.yaxis):
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # Minor log labels overlap.
    left.xaxis.set_major_formatter(thousands)
    left.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    for index, run in enumerate(sorted(results.runs, key=lambda r: (r.batch_size, r.seed))):
        points = [(m.step * run.batch_size, m.b_simple_smoothed) for m in run.noise_scale
                  if m.b_simple_smoothed is not None and not math.isnan(m.b_simple_smoothed)]
        if points:
            right.plot(*zip(*points), color=f"C{index % 10}", label=f"B={run.batch_size} seed={run.seed}")
    if fit and fit.b_crit:
        right.axhline(fit.b_crit, color="k", linestyle="--", label="fitted B_crit")
    right.xaxis.set_major_formatter(thousands)
    right.set(yscale="log", xlabel="examples seen", ylabel="B_simple (smoothed)", title="Noise scale during training")
    right.legend(fontsize=7)
    path = Path(results_path).with_suffix(".png")
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", nargs="+", type=int)
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--no-overhead", action="store_true", help="skip the callback-overhead measurement")
    results_io.add_output_dir_argument(parser)
    parser.add_argument("--fresh", action="store_true", help="discard the results file instead of resuming it")
    args = parser.parse_args(argv)
    settings = CriticalBatchSettings()
    if args.batch_sizes:
        settings = dataclasses.replace(settings, batch_sizes=tuple(args.batch_sizes))
    if args.seeds:
        settings = dataclasses.replace(settings, seeds=tuple(args.seeds))
    output = args.output_dir / "critical_batch.json"
    if args.fresh and output.exists():
        output.unlink()
    run(settings, output, overhead=not args.no_overhead)
    print(table(results_io.read_results(output)))
    print(f"plot: {plot(output)}")
    print(f"results: {output}")


if __name__ == "__main__":
    main()
