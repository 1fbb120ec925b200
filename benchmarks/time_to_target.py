"""Time to target: fresh examples, steps and wall-clock time to reach a target, across R, e and placement.

Two modes, on the embedded data by default (``--source`` for tfds data where present):

* ``sample``: no throttle; for every task, placement, echo factor, echo shuffle buffer
  and seed, train until the evaluation target is reached or the step budget runs out,
  recording fresh examples read (from :class:`echoing.EchoStats`), steps, training
  wall-clock time and the evaluation curve.
* ``wallclock``: the read step is throttled so that the measured R
  (:func:`echoing.measure_ratio`) is each of the requested values; wall-clock time to
  target for echo factors around R, beside the time predicted from the fresh-example
  count and the measured rates, ``fresh batches * max(t_upstream, e * t_downstream)``.

Every finished configuration is appended to the results file at once, and a rerun skips
the configurations already there, so a long run can be stopped and resumed (``--fresh``
starts over). ``--quick`` runs a few ResNet configurations in under 10 minutes, always
from scratch, and prints a table. Results and figures go to ``runs/`` unless given
``--output-dir`` (``--output-dir benchmarks/results`` regenerates the committed ones);
``python -m benchmarks.plots`` draws the figures from the results file.

Hyperparameters are fixed per task (:data:`TASKS`), not tuned per configuration: a
constant learning rate after a short warm-up, so that "steps to target" does not depend on
a schedule length chosen in advance. How they were chosen is written beside each.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import math
import time
from pathlib import Path
from typing import Optional

import keras
import numpy as np

import echoing
from benchmarks import models, results_io
from pipelines import image, text
from pipelines.staged import EchoConfig

RESNET_PLACEMENTS = ("none", "before_augment", "after_augment", "after_batch")
TEXT_PLACEMENTS = ("none", "example", "after_batch")


@dataclasses.dataclass(frozen=True)
class TaskSettings:
    """Fixed hyperparameters and target of one task.

    Attributes:
      name: ``"resnet"`` or ``"transformer"``.
      batch_size: examples per step.
      learning_rate: peak learning rate, reached linearly over ``warmup_steps``.
      warmup_steps: learning-rate warm-up steps.
      budget_steps: steps after which a run stops if it has not reached the target.
      eval_every: steps between evaluations.
      eval_examples: held-out examples (resnet) or sequences (transformer) per evaluation.
      target: validation accuracy (resnet, higher is better) or validation bits per byte
        (transformer, lower is better).
      model: keyword arguments of the model builder.
    """

    name: str
    batch_size: int
    learning_rate: float
    warmup_steps: int
    budget_steps: int
    eval_every: int
    eval_examples: int
    target: float
    model: dict


# ResNet: SGD with Nesterov-free momentum 0.9 at 0.1 is the CIFAR ResNet recipe (He et al.);
# a ResNet-8 at width 16 reached 0.85 validation accuracy on the embedded shapes in 600
# steps of batch 128 (benchmarks/results/shapes_baselines.json), so 0.80 within 1,500 steps
# is reliable and slightly below what the baseline reaches.
# Transformer: Adam at 1e-3 with warm-up is the usual small-LM recipe. The baseline (seed 0)
# met the 2.5 bits-per-byte target at step 1,800 of the 3,000 budgeted (its curve is in
# benchmarks/results/time_to_target.json): slightly below what the baseline reaches, with
# room for echoed runs that need more steps. Other seeds are not yet checked.
TASKS = {
    "resnet": TaskSettings("resnet", 128, 0.1, 50, 1500, 50, 2000, 0.80, {"depth": 8, "width": 16}),
    "transformer": TaskSettings(
        "transformer", 32, 1e-3, 100, 3000, 100, 256, 2.5,
        {"sequence_length": 128, "layers_count": 2, "width": 128, "heads": 4},
    ),
}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One training run to target.

    Attributes:
      mode: ``"sample"`` or ``"wallclock"``.
      task: a key of :data:`TASKS`.
      placement: echo point (``"none"`` for the baseline).
      factor: echo factor.
      echo_shuffle: echo shuffle buffer size (elements of the echo stage).
      seed: seeds data order, augmentation, echo and initial weights.
      ratio: the R the upstream is throttled to (wallclock mode), else ``None``.
    """

    mode: str
    task: str
    placement: str
    factor: float
    echo_shuffle: int
    seed: int
    ratio: Optional[float] = None

    def key(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


class _Warmup(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to a constant learning rate."""

    def __init__(self, peak, steps):
        self.peak, self.steps = peak, steps

    def __call__(self, step):
        return self.peak * keras.ops.minimum(1.0, (keras.ops.cast(step, "float32") + 1) / self.steps)

    def get_config(self):
        return {"peak": self.peak, "steps": self.steps}


# XLA on the CPU, per task. On TF 2.21 it sped up both steps on batches in memory
# (ResNet 1.26x, Transformer 1.32x: benchmarks/results/xla_check.json, `python -m
# benchmarks.xla_check`). The ResNet stays without it so that new runs compare with the
# committed time-to-target results, which ran without it; turn it on when those are rerun.
JIT_COMPILE = {"resnet": False, "transformer": True}


def build_model(settings: TaskSettings, jit_compile: Optional[bool] = None) -> keras.Model:
    """The task's compiled model; ``jit_compile`` defaults to :data:`JIT_COMPILE`."""
    if settings.name == "resnet":
        model = models.resnet_cifar(**settings.model)
        optimizer = keras.optimizers.SGD(_Warmup(settings.learning_rate, settings.warmup_steps), momentum=0.9)
        metrics = ["accuracy"]
    else:
        model = models.transformer_lm(text.VOCAB_SIZE, **settings.model)
        optimizer = keras.optimizers.Adam(_Warmup(settings.learning_rate, settings.warmup_steps))
        metrics = []
    jit = JIT_COMPILE[settings.name] if jit_compile is None else jit_compile
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=metrics, jit_compile=jit)
    return model


def pipeline_config(run: RunConfig, settings: TaskSettings, *, source: Optional[str], cache_dir: Optional[str],
                    read_rate: Optional[float], num_train_examples: Optional[int] = None):
    """The training pipeline's config for a run; the baseline counts fresh examples with an e=1 stage."""
    if run.placement == "none":
        point = "before_augment" if run.task == "resnet" else "example"
        echo = EchoConfig(point, 1.0)
    else:
        echo = EchoConfig(run.placement, run.factor, run.echo_shuffle)
    common = dict(batch_size=settings.batch_size, echo=echo, seed=run.seed, repeat=True, cache_dir=cache_dir, read_rate=read_rate)
    if run.task == "resnet":
        extra = {"num_train_examples": num_train_examples} if num_train_examples else {}
        eval_count = {"num_eval_examples": settings.eval_examples}
        return image.ImagePipelineConfig(source=source or "shapes", **common, **extra, **eval_count)
    if read_rate is not None:
        common["read_rate"] = read_rate * settings.model["sequence_length"]  # Text throttles bytes.
    return text.TextPipelineConfig(source=source or "stdlib", sequence_length=settings.model["sequence_length"], **common)


def _pipelines(run):
    module = image if run.task == "resnet" else text
    return module.train_dataset, module.eval_dataset


def evaluate(model: keras.Model, batches: list, task: str) -> float:
    """Validation accuracy (resnet) or bits per byte (transformer) over in-memory batches."""
    loss, correct, count = 0.0, 0, 0
    for inputs, targets in batches:
        logits = model(inputs, training=False)
        if task == "resnet":
            correct += int(np.sum(np.argmax(logits, axis=-1) == targets.numpy()))
            count += len(targets)
        else:
            losses = keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
            loss += float(keras.ops.sum(losses))
            count += int(np.prod(targets.shape))
    return correct / count if task == "resnet" else loss / count / math.log(2)


def reached(task: str, metric: float, target: float) -> bool:
    return metric >= target if task == "resnet" else metric <= target


def train_to_target(run: RunConfig, settings: TaskSettings, *, source=None, cache_dir=None, read_rate=None,
                    num_train_examples=None, log=print) -> dict:
    """Trains one configuration until the target or the budget; returns its record."""
    keras.utils.set_random_seed(run.seed)
    model = build_model(settings)
    config = pipeline_config(run, settings, source=source, cache_dir=cache_dir, read_rate=read_rate,
                             num_train_examples=num_train_examples)
    train_dataset, eval_dataset = _pipelines(run)
    eval_batches = list(eval_dataset(dataclasses.replace(config, read_rate=None)).take(
        math.ceil(settings.eval_examples / settings.batch_size)))
    stats = echoing.EchoStats()
    iterator = iter(train_dataset(config, stats=stats))
    # The first batch waits for the shuffle buffers to fill, a start-up cost that is the
    # same for every configuration (and long behind a throttle); the clock starts after it.
    pending = next(iterator)
    per_step = 1 if run.placement == "after_batch" else settings.batch_size  # Echo-stage elements per step.

    curve, train_seconds, step, done = [], 0.0, 0, False
    while step < settings.budget_steps and not done:
        start = time.perf_counter()
        for _ in range(min(settings.eval_every, settings.budget_steps - step)):
            inputs, targets = pending if pending is not None else next(iterator)
            pending = None
            model.train_on_batch(inputs, targets)
            step += 1
        train_seconds += time.perf_counter() - start  # Evaluation time is not training time.
        metric = evaluate(model, eval_batches, run.task)
        fresh = fresh_examples_consumed(step, per_step, settings.batch_size, stats, run.echo_shuffle)
        curve.append({"step": step, "fresh_examples": fresh, "seconds": train_seconds, "metric": metric})
        done = reached(run.task, metric, settings.target)
        eta = train_seconds / step * (settings.budget_steps - step)
        log(f"  step {step:5d}  metric {metric:.4f}  fresh {fresh:9.0f}  {train_seconds:6.0f}s  (at most {eta:.0f}s to budget)")
    last = curve[-1]
    return {
        "config": dataclasses.asdict(run),
        "target": settings.target,
        "reached": done,
        "steps": last["step"] if done else None,
        "fresh_examples": last["fresh_examples"] if done else None,
        "seconds": last["seconds"] if done else None,
        "realised_factor": stats.factor,
        "curve": curve,
    }


def fresh_examples_consumed(steps: int, per_step: int, batch_size: int, stats: echoing.EchoStats,
                            echo_shuffle: int = 0) -> float:
    """Fresh examples read to produce the batches training has consumed.

    ``stats.fresh`` counts what the echo stage has pulled, which runs ahead of training by
    the buffers after it (batch, prefetch: up to hundreds of batches at the start of a
    run). Training consumed ``steps * per_step`` echo-stage elements, each a copy of
    ``1 / realised factor`` fresh ones. An echo shuffle buffer of ``echo_shuffle``
    elements is part of the method, not of the plumbing: it is full before it emits and
    stays full, so ``echo_shuffle`` more echo-stage elements were read for those consumed,
    and they count. Exact for an integer factor, exact in expectation for a fractional
    one; batch echoing's elements (and its buffer's) are batches.
    """
    realised = stats.factor if int(stats.fresh) else 1.0
    examples_per_element = batch_size if per_step == 1 else 1
    return (steps * per_step + echo_shuffle) * examples_per_element / realised


def measure_rates(settings: TaskSettings, run: RunConfig, *, source=None, cache_dir=None, read_rate=None,
                  num_train_examples=None) -> echoing.RatioMeasurement:
    """R of a task's un-echoed pipeline (throttled to ``read_rate``) against its training step."""
    keras.utils.set_random_seed(run.seed)
    model = build_model(settings)
    baseline = dataclasses.replace(run, placement="none", factor=1.0, echo_shuffle=0)
    config = pipeline_config(baseline, settings, source=source, cache_dir=cache_dir, read_rate=read_rate,
                             num_train_examples=num_train_examples)
    train_dataset, _ = _pipelines(run)
    return echoing.measure_ratio(train_dataset(config), model, batches=10, warmup=3, repeats=3)


class ResultsFile:
    """A results file that grows one finished configuration at a time (resumable).

    Several processes may run different plans into the same file at once (say, one task
    each): every addition re-reads the file under an exclusive lock and merges, so no
    process overwrites another's records.
    """

    def __init__(self, path: Path, settings: dict):
        self.path = Path(path)
        self.settings = settings
        self.runs: list[dict] = []
        self.extra: dict = {}
        self._reload()

    def _reload(self) -> None:
        if not self.path.exists():
            return
        document = results_io.read_results(self.path)
        self.runs = document["results"]["runs"]
        mine, self.extra = self.extra, {k: v for k, v in document["results"].items() if k != "runs"}
        for key, value in mine.items():
            if isinstance(value, dict) and isinstance(self.extra.get(key), dict):
                self.extra[key] = {**self.extra[key], **value}  # e.g. measured rates: both processes'.
            else:
                self.extra[key] = value

    def done(self, run: RunConfig) -> bool:
        return any(RunConfig(**r["config"]).key() == run.key() for r in self.runs)

    def add(self, record: dict) -> None:
        with self._locked():
            self._reload()
            self.runs = [r for r in self.runs if RunConfig(**r["config"]).key() != RunConfig(**record["config"]).key()]
            self.runs.append(record)
            self.save()

    def save(self) -> None:
        results_io.write_results(self.path.stem, self.settings, {"runs": self.runs, **self.extra}, self.path.parent)

    @contextlib.contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


@dataclasses.dataclass
class BenchmarkPlan:
    """What a benchmark invocation runs.

    Attributes:
      tasks: task names.
      factors: echo factors for sample mode.
      echo_shuffles: echo shuffle buffer sizes for sample mode.
      seeds: seeds; each configuration runs once per seed.
      ratios: R values for wallclock mode.
      wallclock_factors: for each R, echo factors at most this many times R are run.
      placements: placements per task (defaults: all the task has).
      modes: ``"sample"`` and/or ``"wallclock"``.
      num_train_examples: embedded training examples (resnet); ``None`` for the default 100k.
    """

    tasks: list = dataclasses.field(default_factory=lambda: ["resnet", "transformer"])
    factors: list = dataclasses.field(default_factory=lambda: [1.5, 2, 4, 8])
    echo_shuffles: list = dataclasses.field(default_factory=lambda: [0, 1000])
    seeds: list = dataclasses.field(default_factory=lambda: [0, 1, 2])
    ratios: list = dataclasses.field(default_factory=lambda: [1, 2, 4, 6])
    wallclock_factors: list = dataclasses.field(default_factory=lambda: [1, 1.5, 2, 4, 6, 8])
    placements: Optional[dict] = None
    modes: list = dataclasses.field(default_factory=lambda: ["sample", "wallclock"])
    num_train_examples: Optional[int] = None


QUICK_PLAN = BenchmarkPlan(
    tasks=["resnet"], factors=[2], echo_shuffles=[0], seeds=[0], ratios=[2], wallclock_factors=[1, 2],
    placements={"resnet": ["none", "before_augment", "after_batch"]},
)
QUICK_TASK = dataclasses.replace(TASKS["resnet"], target=0.6, budget_steps=800, eval_examples=1000)


def planned_runs(plan: BenchmarkPlan) -> list[RunConfig]:
    runs = []
    for task in plan.tasks:
        placements = (plan.placements or {}).get(task, RESNET_PLACEMENTS if task == "resnet" else TEXT_PLACEMENTS)
        for seed in plan.seeds:
            if "sample" in plan.modes:
                for placement in placements:
                    if placement == "none":
                        runs.append(RunConfig("sample", task, "none", 1.0, 0, seed))
                        continue
                    for factor in plan.factors:
                        for shuffle in plan.echo_shuffles:
                            runs.append(RunConfig("sample", task, placement, float(factor), shuffle, seed))
            if "wallclock" in plan.modes:
                echo_point = "before_augment" if task == "resnet" else "example"
                for ratio in plan.ratios:
                    for factor in plan.wallclock_factors:
                        if factor <= 2 * ratio:
                            placement = "none" if factor == 1 else echo_point
                            runs.append(RunConfig("wallclock", task, placement, float(factor), 0, seed, float(ratio)))
    return runs


def run_plan(plan: BenchmarkPlan, output: Path, tasks: dict, *, source=None, cache_dir=None, log=print) -> ResultsFile:
    """Runs every planned configuration not already in ``output``; returns the results."""
    # The plan is not a file-wide setting: several plans may fill one file. Each record
    # carries the command that produced it instead.
    results = ResultsFile(output, {"tasks": {k: dataclasses.asdict(v) for k, v in tasks.items()}})
    runs = planned_runs(plan)
    started = time.perf_counter()
    for index, run in enumerate(runs, 1):
        rates = results.extra.setdefault("rates", {})  # Fresh each time: add() merges in other processes' rates.
        if results.done(run):
            continue
        settings = tasks[run.task]
        read_rate = None
        key = f"{run.task}/R={run.ratio:g}/seed={run.seed}" if run.mode == "wallclock" else None
        if key is not None:
            if key not in rates:
                free = measure_rates(settings, run, source=source, cache_dir=cache_dir, num_train_examples=plan.num_train_examples)
                # Examples per second so that one batch takes R training steps to read.
                rate = settings.batch_size / (run.ratio * free.downstream_seconds)
                throttled = measure_rates(settings, run, source=source, cache_dir=cache_dir, read_rate=rate,
                                          num_train_examples=plan.num_train_examples)
                rates[key] = {"read_rate": rate, "unthrottled": dataclasses.asdict(free), "measured": dataclasses.asdict(throttled),
                              "measured_ratio": throttled.ratio}
                log(f"{key}: {throttled}")
            read_rate = rates[key]["read_rate"]
        log(f"[{index}/{len(runs)}] {run.mode} {run.task} {run.placement} e={run.factor:g} shuffle={run.echo_shuffle}"
            + (f" R={run.ratio:g}" if run.ratio else "") + f" seed={run.seed}"
            + f"  ({(time.perf_counter() - started) / 60:.0f} min so far)")
        record = train_to_target(run, settings, source=source, cache_dir=cache_dir, read_rate=read_rate,
                                 num_train_examples=plan.num_train_examples, log=log)
        if key is not None:
            record["rates"] = rates[key]  # The measurement behind its throttle.
            if record["reached"]:
                measured = rates[key]["measured"]
                t_up, t_down = measured["upstream_seconds"], measured["downstream_seconds"]
                fresh_batches = record["fresh_examples"] / settings.batch_size
                record["predicted_seconds"] = fresh_batches * max(t_up, run.factor * t_down)
        record["command"] = results_io.command_line()
        results.add(record)
    return results


def summary_rows(document: dict) -> list[dict]:
    """Medians over seeds per configuration, with ratios to the baseline of the same mode, task and R."""
    groups: dict = {}
    for record in document["results"]["runs"]:
        config = {k: v for k, v in record["config"].items() if k != "seed"}
        groups.setdefault(json.dumps(config, sort_keys=True), []).append(record)

    def median(records, field):
        values = [r[field] for r in records if r["reached"] and r.get(field) is not None]
        return float(np.median(values)) if values else None

    rows = []
    for key, records in groups.items():
        rows.append({**json.loads(key), "runs": len(records), "reached": sum(r["reached"] for r in records),
                     "fresh_examples": median(records, "fresh_examples"), "steps": median(records, "steps"),
                     "seconds": median(records, "seconds"), "predicted_seconds": median(records, "predicted_seconds")})
    for row in rows:
        base = next((b for b in rows if b["placement"] == "none" and b["mode"] == row["mode"] and b["task"] == row["task"]
                     and b["ratio"] == row["ratio"]), None)
        for field in ("fresh_examples", "seconds"):
            ok = base is not None and base[field] and row[field]
            row[f"{field}_vs_baseline"] = row[field] / base[field] if ok else None
    return sorted(rows, key=lambda r: (r["mode"], r["task"], r["ratio"] or 0, r["placement"] != "none", r["placement"], r["factor"], r["echo_shuffle"]))


def table(document: dict) -> str:
    """Markdown table of a time-to-target results document."""
    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    lines = ["| mode | task | R | placement | e | echo shuffle | reached | fresh examples | vs baseline | steps | seconds | predicted s | time vs baseline |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in summary_rows(document):
        lines.append(
            f"| {r['mode']} | {r['task']} | {fmt(r['ratio'], 'g')} | {r['placement']} | {r['factor']:g} | {r['echo_shuffle']} | "
            f"{r['reached']}/{r['runs']} | {fmt(r['fresh_examples'], ',.0f')} | {fmt(r['fresh_examples_vs_baseline'], '.2f')} | "
            f"{fmt(r['steps'], ',.0f')} | {fmt(r['seconds'], '.0f')} | {fmt(r['predicted_seconds'], '.0f')} | {fmt(r['seconds_vs_baseline'], '.2f')} |"
        )
    return "\n".join(lines)


def parse_arguments(argv=None) -> tuple[argparse.Namespace, BenchmarkPlan]:
    """The command line and the plan it asks for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few ResNet configurations, under 10 minutes")
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS))
    parser.add_argument("--modes", nargs="+", choices=["sample", "wallclock"])
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--placements", nargs="+", help="placements to run (applied to every task that has them)")
    parser.add_argument("--factors", nargs="+", type=float, help="echo factors for sample mode")
    parser.add_argument("--echo-shuffles", nargs="+", type=int, help="echo shuffle buffer sizes for sample mode")
    parser.add_argument("--ratios", nargs="+", type=float, help="R values for wallclock mode")
    parser.add_argument("--wallclock-factors", nargs="+", type=float, help="echo factors for wallclock mode")
    parser.add_argument("--source", default=None, help="tfds source instead of the embedded data (cifar10, imagenet2012, imagenette, lm1b)")
    results_io.add_output_dir_argument(parser)
    parser.add_argument("--output", type=Path, default=None, metavar="FILE",
                        help="results JSON, to fill one file from several invocations (default: OUTPUT_DIR/time_to_target[_quick].json)")
    parser.add_argument("--fresh", action="store_true", help="discard the results file instead of resuming it (always so with --quick)")
    args = parser.parse_args(argv)
    plan = QUICK_PLAN if args.quick else BenchmarkPlan()
    chosen = {name: getattr(args, name) for name in ("tasks", "modes", "seeds", "factors", "echo_shuffles", "ratios", "wallclock_factors")}
    plan = dataclasses.replace(plan, **{k: v for k, v in chosen.items() if v})
    if args.placements:
        placements = {"resnet": RESNET_PLACEMENTS, "transformer": TEXT_PLACEMENTS}
        unknown = sorted(set(args.placements) - set(RESNET_PLACEMENTS) - set(TEXT_PLACEMENTS))
        if unknown:
            parser.error(f"--placements: unknown {unknown}; known: {sorted(set(RESNET_PLACEMENTS) | set(TEXT_PLACEMENTS))}")
        plan = dataclasses.replace(plan, placements={task: [p for p in names if p in args.placements] for task, names in placements.items()})
    return args, plan


def best_factors(document: dict) -> list[dict]:
    """Per task and R (wallclock mode): the baseline's time, the fastest e, and its speedup, measured and predicted."""
    rows = [r for r in summary_rows(document) if r["mode"] == "wallclock"]
    best = []
    for task, ratio in sorted({(r["task"], r["ratio"]) for r in rows}):
        attempted = [r for r in rows if r["task"] == task and r["ratio"] == ratio]
        group = [r for r in attempted if r["seconds"] is not None]
        base = next((r for r in group if r["placement"] == "none"), None)
        measured = [v["measured_ratio"] for k, v in document["results"].get("rates", {}).items()
                    if k.startswith(f"{task}/R={ratio:g}/")]
        if base is None or not group:
            continue
        fastest = min(group, key=lambda r: r["seconds"])
        predicted = [r for r in group if r["predicted_seconds"] is not None]
        fastest_predicted = min(predicted, key=lambda r: r["predicted_seconds"]) if predicted else None
        best.append({
            "task": task, "ratio": ratio, "baseline_seconds": base["seconds"], "best_factor": fastest["factor"],
            "best_seconds": fastest["seconds"], "speedup": base["seconds"] / fastest["seconds"],
            "measured_ratio": float(np.median(measured)) if measured else None,
            "factors_run": sorted(r["factor"] for r in attempted),
            "factors_not_reached": sorted(r["factor"] for r in attempted if r["seconds"] is None),
            "predicted_best_factor": fastest_predicted["factor"] if fastest_predicted else None,
            "predicted_speedup": (base["predicted_seconds"] / fastest_predicted["predicted_seconds"])
            if fastest_predicted and base["predicted_seconds"] else None,
        })
    return best


def best_factor_table(document: dict) -> str:
    """Markdown table of :func:`best_factors`."""
    lines = ["| task | R | measured R | e run (* target not reached) | baseline s | best e (measured) | speedup | best e (predicted) | predicted speedup |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for b in best_factors(document):
        predicted = "-" if b["predicted_speedup"] is None else f"{b['predicted_speedup']:.2f}x"
        measured = "-" if b["measured_ratio"] is None else f"{b['measured_ratio']:.2f}"
        predicted_factor = "-" if b["predicted_best_factor"] is None else f"{b['predicted_best_factor']:g}"
        run = ", ".join(f"{f:g}" + ("*" if f in b["factors_not_reached"] else "") for f in b["factors_run"])
        lines.append(f"| {b['task']} | {b['ratio']:g} | {measured} | {run} | {b['baseline_seconds']:.0f} | "
                     f"{b['best_factor']:g} | {b['speedup']:.2f}x | {predicted_factor} | {predicted} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    args, plan = parse_arguments(argv)
    tasks = {"resnet": QUICK_TASK} if args.quick else TASKS
    output = args.output or args.output_dir / ("time_to_target_quick.json" if args.quick else "time_to_target.json")
    if (args.fresh or args.quick) and output.exists():
        output.unlink()  # --quick is a demonstration: it always trains, never resumes.
    run_plan(plan, output, tasks, source=args.source)
    document = results_io.read_results(output)
    print(table(document))
    from benchmarks import plots

    for path in plots.plot_all(output):
        print(f"plot: {path}")
    print(f"results: {output}")


if __name__ == "__main__":
    main()
