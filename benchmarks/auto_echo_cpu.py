"""AutoEcho on this machine's CPU: R measured apart against R under load, with a real training step.

What the modelled step of :mod:`benchmarks.auto_echo` hides: here the training step (the
ResNet-8 task of :mod:`benchmarks.tasks`, echoing before augmentation) runs on the same two
cores as the pipeline. The read is throttled so that :func:`echoing.measure_ratio` gives
``R = cpu_ratio`` with the pipeline and the step measured apart; then AutoEcho trains, and a
run at the fixed ``e = R measured apart`` beside it, per seed.

Run ``python -m benchmarks.auto_echo_cpu`` (about 20 minutes, alone on the machine); results
go to ``runs/auto_echo_cpu.json`` (``--output-dir benchmarks/results`` regenerates the
committed file).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import keras
import tensorflow as tf

import echoing
from benchmarks import results_io
from benchmarks.step_times import StepTimes, rate_between


@dataclass(frozen=True)
class CpuConfig:
    """Settings of the run.

    Attributes:
      cpu_ratio: the R that :func:`echoing.measure_ratio` should report once the read is
        throttled.
      steps: training steps of each run.
      repeats: repeats (seeds 0, 1, ...) of the whole measurement.
      max_factor: AutoEcho's ``max_factor``.
      echo_shuffle: echo shuffle buffer (examples).
    """

    cpu_ratio: float = 4.0
    steps: int = 600
    repeats: int = 3
    max_factor: float = 8.0
    echo_shuffle: int = 1024


def cpu_under_load(config: CpuConfig, seed: int) -> dict:
    """R apart against R under load, with the ResNet-8 step on this machine's CPU."""
    from benchmarks.tasks import TASKS  # Heavy (models, pipelines): only this mode needs it.

    # Without XLA, as when benchmarks/results/auto_echo_cpu.json ran.
    task = TASKS["resnet"].with_settings(jit_compile=False)
    batch_size = task.settings.batch_size
    variable = tf.Variable(1.0, dtype=tf.float64)

    def measure(read_rate=None) -> echoing.RatioMeasurement:
        keras.utils.set_random_seed(seed)
        baseline = task.train_dataset(task.pipeline_config("none", 1.0, 0, seed, read_rate=read_rate))
        return echoing.measure_ratio(baseline, task.build_model(), batches=10, warmup=3, repeats=3)

    free = measure()
    read_rate = batch_size / (config.cpu_ratio * free.downstream_seconds)
    throttled_seconds = batch_size / read_rate  # = cpu_ratio * step seconds
    if free.upstream_seconds > 0.5 * throttled_seconds:
        # Then decoding and augmenting, not the read, would set the upstream's pace.
        print(f"warning: the unthrottled pipeline ({free.upstream_seconds * 1e3:.0f} ms/batch) is not well below the "
              f"throttled read ({throttled_seconds * 1e3:.0f} ms/batch)")
    apart = measure(read_rate)

    def train(factor_value, with_auto):
        keras.utils.set_random_seed(seed)
        variable.assign(factor_value)
        model = task.build_model()
        stats = echoing.EchoStats()
        dataset = task.train_dataset(task.pipeline_config("before_augment", variable, config.echo_shuffle, seed,
                                                          read_rate=read_rate), stats=stats)
        times = StepTimes()
        auto = echoing.AutoEcho(variable, max_factor=config.max_factor, stats=stats, verbose=0) if with_auto else None
        model.fit(dataset, steps_per_epoch=config.steps, epochs=1, verbose=0, callbacks=[times] + ([auto] if auto else []))
        return auto, times, stats

    auto, auto_times, auto_stats = train(1.0, True)
    holds = [d for d in auto.decisions if d.phase == "hold"]
    settled = holds[0].step if holds else None
    # The step's own rate: the decision that ends the probe at max_factor carries it.
    probe = next((d for d in auto.decisions if d.rate_at(config.max_factor) is not None), None)
    fixed_factor = round(apart.ratio, 2)
    _, fixed_times, fixed_stats = train(fixed_factor, False)
    first = settled if settled is not None else config.steps // 2
    return {
        "seed": seed,
        "ratio_apart": apart.ratio,
        "step_seconds_alone": apart.downstream_seconds,
        "upstream_seconds_per_batch": apart.upstream_seconds,
        "read_rate": read_rate,
        "ratio_under_load": holds[0].ratio if holds else None,
        "step_seconds_under_load": None if probe is None else 1 / probe.rate_at(config.max_factor),
        "auto_factor": holds[0].factor if holds else None,
        "auto_settled_step": settled,
        "auto_rate": rate_between(auto_times.times, first - 1),
        # The whole run, from the end of the first step (after tracing), probing included.
        "auto_seconds": auto_times.times[-1] - auto_times.times[0],
        "fixed_seconds": fixed_times.times[-1] - fixed_times.times[0],
        "fixed_factor": fixed_factor,
        "fixed_rate": rate_between(fixed_times.times, first - 1),
        "fixed_realised_factor": fixed_stats.factor,
        "auto_realised_factor": auto_stats.factor,
        "decisions": [dataclasses.asdict(d) for d in auto.decisions],
    }


def run(config: CpuConfig, output: Optional[Path]) -> dict:
    rows = []
    for seed in range(config.repeats):
        row = cpu_under_load(config, seed)
        rows.append(row)
        print(f"seed {seed}: R apart {row['ratio_apart']:.2f} (step alone {row['step_seconds_alone'] * 1e3:.0f} ms), "
              f"R under load {row['ratio_under_load']} (step {row['step_seconds_under_load']}); "
              f"AutoEcho e={row['auto_factor']} {row['auto_rate']:.2f} steps/s, fixed e={row['fixed_factor']} {row['fixed_rate']:.2f} steps/s")
    results = {"runs": rows}
    if output is not None:
        results_io.write_results(output.stem, asdict(config), results, output.parent)
    return {"settings": asdict(config), "results": results}


def table(document: dict) -> str:
    """The results table: R apart against R under load, per seed."""
    lines = ["| seed | R apart (measure_ratio) | step alone, ms | R under load (AutoEcho) | step under load, ms "
             "| AutoEcho e | its steady steps/s | fixed e = R apart | its steps/s | run seconds, AutoEcho / fixed |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    fmt = lambda v, f: "n/a" if v is None else f.format(v)  # noqa: E731
    for r in document["results"]["runs"]:
        lines.append(f"| {r['seed']} | {r['ratio_apart']:.2f} | {r['step_seconds_alone'] * 1e3:.0f} | "
                     f"{fmt(r['ratio_under_load'], '{:.2f}')} | {fmt(r['step_seconds_under_load'] and r['step_seconds_under_load'] * 1e3, '{:.0f}')} | "
                     f"{fmt(r['auto_factor'], '{:.2f}')} | {r['auto_rate']:.2f} | {r['fixed_factor']:.2f} | {r['fixed_rate']:.2f} | "
                     f"{r['auto_seconds']:.0f} / {r['fixed_seconds']:.0f} |")
    steps = document["settings"]["steps"]
    return "\n".join(lines) + (
        f"\n\nEach run trains {steps} steps. Steady rates run from the step where AutoEcho first held a factor to the end, "
        "for both runs; run seconds cover every step after the first (tracing), AutoEcho's probes included. "
        "Step under load: the step time at e = max_factor, where the step is the bottleneck.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    output = args.output_dir / "auto_echo_cpu.json"
    print(table(run(CpuConfig(), output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
