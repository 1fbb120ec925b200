"""Time to target for PyTorch: the embedded images through ``DataLoader`` workers, read at R = 4, a small CNN.

The pipeline is :mod:`pipelines.torch_images`: JPEG bytes decoded with PIL, a random crop
and flip in torch, in one ``DataLoader`` worker, the read paced so that a batch takes
:data:`RATIO` modelled steps. Each :class:`Arm` runs on 3 seeds:

* no echo; batch echo at e = 2 and 4 (:func:`echoing.torch.echo`, copies adjacent);
  example echo at e = 2 and 4 (``mix_rows=True`` over a window of 8 batches: rows of
  several fresh batches mixed, an example's copies in different batches);
* the controller (:class:`echoing.EchoController` on a live :class:`echoing.torch.Factor`,
  example echo as above: adjacent copies of whole batches did not reach the target at e = 4);
* MONAI's ``ThreadDataLoader(repeats=4)``, the one repeat PyTorch users have: each batch
  handed out 4 times, side by side.

As on the TensorFlow side (:mod:`benchmarks.lib.replay`), time to target has two parts:

1. **Steps**, from training on the CPU: training is deterministic per seed, so the steps
   an arm needs to reach :data:`TARGET` held-out accuracy do not depend on the clock. The
   controller's arm trains on the factors its replay chose, at the steps it chose them.
2. **Seconds**, from the replay on a modelled accelerator host: the real loader (worker,
   paced read, decode, augment, echo) runs against a step that sleeps
   :data:`STEP_SECONDS`, which leaves the host's CPU to the input as an accelerator
   does. Time to target is the replay's time at the step that reached the target.

The echo stage's own cost per batch is timed apart, over batches already in memory,
against no echo and against MONAI's repeats (:func:`stage_cost`).

Run alone on the machine (the replays and the stage cost read the clock), resumable:
records already in the results file are kept::

    python -m benchmarks.torch_time_to_target --output-dir benchmarks/results

Example (the arms' names):

>>> [arm.value for arm in Arm][:3]
['no echo', 'batch echo, e = 2', 'batch echo, e = 4']
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import statistics
import time
from typing import Iterator, Optional

import echoing
from benchmarks.lib.tables import markdown_table
from benchmarks.lib.timelines import Decision
from benchmarks.lib.results_io import Record, add_output_dir_argument, read_results, typed, write_results

try:
    import torch
    from torch import nn

    from echoing import torch as echo_torch
    from pipelines import torch_images
except ImportError:  # The records and tables read without torch (python -m benchmarks.readme_tables).
    torch = nn = echo_torch = torch_images = None

SEEDS = (0, 1, 2)
RATIO = 4.0  # Reading a batch takes this many modelled steps: the read is paced to batch / (R * STEP_SECONDS).
STEP_SECONDS = 0.01  # The modelled accelerator's step.
TARGET = 0.70  # Held-out accuracy: a probe of seed 1 at e = 3.1 first passed it at step 1,050.
EVAL_EVERY = 50
MAX_STEPS = 4_000
MAX_FACTOR = 8.0  # The controller's.
BATCH_SIZE = 64
LEARNING_RATE = 2e-3
MIX_WINDOW = 8  # Batches whose rows example echo mixes.
RESULTS = "torch_time_to_target.json"


class Arm(str, enum.Enum):
    """One way to feed the CNN (a ``str``, as results files hold it)."""

    NONE = "no echo"
    BATCH_2 = "batch echo, e = 2"
    BATCH_4 = "batch echo, e = 4"
    EXAMPLE_2 = "example echo, e = 2"
    EXAMPLE_4 = "example echo, e = 4"
    CONTROLLER = "controller, example echo"
    MONAI_4 = "MONAI ThreadDataLoader(repeats=4)"

    @property
    def factor(self) -> Optional[float]:
        """The fixed echo factor (``None``: the controller's)."""
        return {Arm.NONE: 1.0, Arm.BATCH_2: 2.0, Arm.BATCH_4: 4.0, Arm.EXAMPLE_2: 2.0, Arm.EXAMPLE_4: 4.0,
                Arm.CONTROLLER: None, Arm.MONAI_4: 4.0}[self]


@dataclasses.dataclass(frozen=True)
class ArmRun(Record):
    """One arm on one seed: its steps to target from training, its seconds from the replay.

    Attributes:
      arm, seed: what ran.
      steps_to_target: training steps until the held-out accuracy reached ``TARGET`` (``None``: not in ``MAX_STEPS``).
      fresh_batches: fresh batches those steps read.
      replay_seconds: the replay's time at the end of every ``EVAL_EVERY``-th step (index ``i``: step ``(i + 1) * EVAL_EVERY``).
      decisions: the controller's :class:`~benchmarks.lib.timelines.Decision` s (its arm only; intervals left
        out of its measurement are not listed).
    """

    arm: Arm
    seed: int
    steps_to_target: Optional[int] = None
    fresh_batches: Optional[int] = None
    replay_seconds: Optional[tuple] = None
    decisions: Optional[tuple[Decision, ...]] = None

    @property
    def seconds_to_target(self) -> Optional[float]:
        if self.steps_to_target is None or not self.replay_seconds:
            return None
        index = self.steps_to_target // EVAL_EVERY - 1
        return self.replay_seconds[index] if index < len(self.replay_seconds) else None


@dataclasses.dataclass(frozen=True)
class ArmSummary(Record):
    """An arm over its seeds: ``(median, lowest, highest)`` of each figure; seconds against no echo on the same seed."""

    seeds: int
    seconds: tuple
    steps: tuple
    fresh_batches: tuple
    over_no_echo: tuple


@dataclasses.dataclass(frozen=True)
class StageCost(Record):
    """Microseconds per batch handed to the loop: median, lowest and highest over the repeats."""

    median_us: float
    min_us: float
    max_us: float


@dataclasses.dataclass(frozen=True)
class StudySettings(Record):
    OMITTED_WHEN_NONE = ("law", "pulls_on_loop_thread")

    ratio: float
    step_seconds: float
    target_accuracy: float
    eval_every: int
    batch_size: int
    learning_rate: float
    max_factor: float
    mix_window: int
    seeds: tuple
    law: Optional[str] = None  # the controller's (echoing.controller.LAW)
    pulls_on_loop_thread: Optional[bool] = None  # the controller's setting (absent before it existed: False)


@dataclasses.dataclass(frozen=True)
class StudyResults(Record):
    OMITTED_WHEN_NONE = ("stage_cost",)  # timed last, after every arm

    runs: tuple[ArmRun, ...]
    summary: dict[str, ArmSummary]
    stage_cost: Optional[dict[str, StageCost]] = None


def settings() -> StudySettings:
    return StudySettings(RATIO, STEP_SECONDS, TARGET, EVAL_EVERY, BATCH_SIZE, LEARNING_RATE, MAX_FACTOR, MIX_WINDOW,
                         SEEDS, echoing.controller.LAW, True)


def cnn() -> nn.Module:
    """Three 3x3 convolutions (32, 64, 64 channels), each with batch normalization, and a linear layer.

    Without batch normalization, Adam at this rate left some seeds at chance for thousands of
    steps (all ReLUs dead), whatever the arm: steps to target measured the escape, not echo.
    """
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(64, 10))


def pipeline_config(seed: int, throttled: bool) -> torch_images.TorchImageConfig:
    rate = BATCH_SIZE / (RATIO * STEP_SECONDS) if throttled else None
    return torch_images.TorchImageConfig(batch_size=BATCH_SIZE, read_rate=rate, num_workers=1, seed=seed)


def batches(arm: Arm, config: torch_images.TorchImageConfig, factor: echo_torch.Factor,
            stats: echo_torch.EchoStats) -> Iterator:
    """The arm's training batches, epoch after epoch."""
    if arm == Arm.MONAI_4:
        from monai.data import ThreadDataLoader

        return torch_images.endless(ThreadDataLoader(torch_images.train_dataset(config), repeats=4,
                                                     **torch_images.loader_settings(config)))
    loader = torch_images.train_loader(config)
    if arm == Arm.NONE:
        return torch_images.endless(loader)
    mixed = arm in (Arm.EXAMPLE_2, Arm.EXAMPLE_4, Arm.CONTROLLER)
    echoed = echo_torch.echo(loader, factor, seed=config.seed, stats=stats, mix_rows=mixed,
                             shuffle_buffer_size=MIX_WINDOW if mixed else 0)
    return torch_images.endless(echoed)


def train(arm: Arm, seed: int, schedule: Optional[dict] = None,
          config: Optional[torch_images.TorchImageConfig] = None) -> ArmRun:
    """Trains the CNN on the arm's batches until ``TARGET``; ``schedule`` maps a step to the factor set after it."""
    torch.manual_seed(seed)
    config = config or pipeline_config(seed, throttled=False)
    model = cnn()
    optimizer = torch.optim.Adam(model.parameters(), LEARNING_RATE)
    held_out = torch_images.eval_batches(config)
    factor = echo_torch.Factor(arm.factor or MAX_FACTOR)  # The controller opens at max_factor, as in its replay.
    stats = echo_torch.EchoStats()
    stream = batches(arm, config, factor, stats)
    reached = None
    for step in range(1, MAX_STEPS + 1):
        images, labels = next(stream)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if schedule and step - 1 in schedule:
            factor.assign(schedule[step - 1])
        if step % EVAL_EVERY == 0 and accuracy(model, held_out) >= TARGET:
            reached = step
            break
    # No echo and MONAI's repeats have no echo stage to count: one fresh batch a step, and one every 4.
    fresh = {Arm.NONE: step, Arm.MONAI_4: -(-step // 4)}.get(arm, stats.fresh)
    return ArmRun(arm, seed, steps_to_target=reached, fresh_batches=fresh)


def accuracy(model: nn.Module, held_out: list) -> float:
    model.eval()
    with torch.no_grad():
        right = sum(int((model(images).argmax(1) == labels).sum()) for images, labels in held_out)
    model.train()
    return right / sum(len(labels) for _, labels in held_out)


def replay(arm: Arm, seed: int, steps: int, config: Optional[torch_images.TorchImageConfig] = None) -> ArmRun:
    """Runs the arm's loader for ``steps`` steps against a step that sleeps ``STEP_SECONDS``; the clock starts at the first batch."""
    config = config or pipeline_config(seed, throttled=True)
    factor = echo_torch.Factor(arm.factor or MAX_FACTOR)
    stats = echo_torch.EchoStats()
    controller = (echoing.EchoController(max_factor=MAX_FACTOR, elements_per_step=1, pulls_on_loop_thread=True)
                  if arm == Arm.CONTROLLER else None)
    stream = batches(arm, config, factor, stats)
    next(stream)  # Workers started, the first batch read: the clock starts here, as on the TF side.
    start = time.perf_counter()
    seconds, decisions = [], []
    for step in range(steps):
        next(stream)
        time.sleep(STEP_SECONDS)
        now = time.perf_counter()
        if controller is not None:
            decision = controller.observe(step, now, fresh=stats.fresh)
            if decision is not None and decision.cause != echoing.Cause.LEFT_OUT:
                factor.assign(decision.factor)
                decisions.append(Decision.of(decision))
        if (step + 1) % EVAL_EVERY == 0:
            seconds.append(round(now - start, 4))
    return ArmRun(arm, seed, replay_seconds=tuple(seconds), decisions=tuple(decisions) if controller is not None else None)


def stage_cost(batches_per_repeat: int = 200, repeats: int = 7) -> dict[str, StageCost]:
    """Microseconds per batch handed to the loop, over batches in memory: the echo stage's own cost at e = 4.

    Each way reads the same ``DataLoader`` over a ``TensorDataset`` (no workers) and hands
    out every batch 4 times, except "no echo" (once). Medians over ``repeats``.
    """
    from monai.data import ThreadDataLoader

    images = torch.randn(BATCH_SIZE * batches_per_repeat, 3, 32, 32)
    dataset = torch.utils.data.TensorDataset(images, torch.zeros(len(images), dtype=torch.int64))

    def plain():
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE)

    def repeated_by_hand():
        for batch in plain():
            for _ in range(4):
                yield batch

    ways = {
        "no echo (DataLoader)": (plain, 1),
        "repeated in a for loop": (repeated_by_hand, 4),
        "echoing.torch.echo, e = 4": (lambda: echo_torch.echo(plain(), 4.0, seed=0), 4),
        "echoing.torch.echo, e = 4, mix_rows": (lambda: echo_torch.echo(plain(), 4.0, seed=0, mix_rows=True,
                                                                        shuffle_buffer_size=MIX_WINDOW), 4),
        "MONAI ThreadDataLoader(repeats=4)": (lambda: ThreadDataLoader(dataset, batch_size=BATCH_SIZE, repeats=4), 4),
    }
    out = {}
    for name, (make, copies) in ways.items():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            count = sum(1 for _ in make())
            times.append((time.perf_counter() - start) / count * 1e6)
            assert count == batches_per_repeat * copies, (name, count)
        out[name] = StageCost(round(statistics.median(times), 1), round(min(times), 1), round(max(times), 1))
    return out


def spread(values: list) -> tuple:
    """``(median, lowest, highest)`` of ``values``, rounded; ``()`` for none."""
    return (round(statistics.median(values), 3), round(min(values), 3), round(max(values), 3)) if values else ()


def summary(runs: list[ArmRun]) -> dict[str, ArmSummary]:
    """Per arm that reached the target: median and range over seeds of its figures, and of its seconds over no echo's."""
    none = {r.seed: r.seconds_to_target for r in runs if r.arm == Arm.NONE}
    out = {}
    for arm in Arm:
        mine = [r for r in runs if r.arm == arm and r.seconds_to_target is not None]
        if not mine:
            continue
        out[arm.value] = ArmSummary(len(mine), spread([r.seconds_to_target for r in mine]),
                                    spread([r.steps_to_target for r in mine]), spread([r.fresh_batches for r in mine]),
                                    spread([r.seconds_to_target / none[r.seed] for r in mine if none.get(r.seed)]))
    return out


def _spread(figures: list, form: str) -> str:
    """A median and its range over seeds: ``1.23 (1.10-1.31)``."""
    median, low, high = figures
    return f"{median:{form}} ({low:{form}}-{high:{form}})" if low != high else f"{median:{form}}"


def document_table(document: dict) -> str:
    """Time to target per arm on the modelled accelerator host: median (range) over seeds."""
    study, results = typed(document, StudySettings, StudyResults)
    rows = [[name, figures.seeds, _spread(figures.seconds, ".1f"), _spread(figures.over_no_echo, ".2f") + "x",
             _spread(figures.steps, ".0f"), _spread(figures.fresh_batches, ".0f")]
            for name, figures in results.summary.items()]
    return (markdown_table(["arm", "seeds", "seconds to target", "over no echo", "steps", "fresh batches"], rows,
                           align="lrrrrr")
            + f"\n\n_Held-out accuracy {study.target_accuracy:g}, evaluated every {study.eval_every} steps; R = "
              f"{study.ratio:g} over a modelled step of {study.step_seconds * 1000:g} ms; batches of "
              f"{study.batch_size}; the controller's max_factor {study.max_factor:g}. Medians (ranges) over seeds "
              f"{', '.join(str(seed) for seed in study.seeds)}._")


def document_stage_table(document: dict) -> str:
    """The echo stage's own cost per batch handed out, over batches in memory."""
    _, results = typed(document, StudySettings, StudyResults)
    rows = [[name, f"{cost.median_us:.0f}", f"{cost.min_us:.0f}-{cost.max_us:.0f}"]
            for name, cost in (results.stage_cost or {}).items()]
    return markdown_table(["way", "microseconds per batch (median)", "range"], rows, align="lrr")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    if torch is None:
        parser.error("PyTorch is not installed: pip install torch==2.13.0 -e '.[torch,bench,monai]'")
    path = args.output_dir / RESULTS
    done = typed(read_results(path), StudySettings, StudyResults)[1] if path.exists() else StudyResults((), {})
    runs = {(run.arm, run.seed): run for run in done.runs}
    stage = done.stage_cost

    def save(run: ArmRun) -> ArmRun:
        runs[run.arm, run.seed] = run
        ordered = [runs[key] for key in sorted(runs, key=lambda key: (key[1], list(Arm).index(key[0])))]
        write_results(RESULTS.removesuffix(".json"), settings().record(),
                      StudyResults(tuple(ordered), summary(ordered), stage).record(), args.output_dir)
        return run

    for seed in SEEDS:
        for arm in Arm:
            run = runs.get((arm, seed), ArmRun(arm, seed))
            if arm == Arm.CONTROLLER and run.replay_seconds is None:
                # The controller's factors come from its replay, so the replay runs first, long
                # enough for the most steps a fixed arm needed.
                longest = max([r.steps_to_target or MAX_STEPS for (a, s), r in runs.items() if s == seed and a != arm]
                              + [EVAL_EVERY])
                timed = replay(arm, seed, int(1.5 * longest))
                run = save(dataclasses.replace(run, replay_seconds=timed.replay_seconds, decisions=timed.decisions))
            if run.steps_to_target is None and run.fresh_batches is None:
                schedule = {d.step: d.factor for d in run.decisions} if run.decisions else None
                trained = train(arm, seed, schedule)
                run = save(dataclasses.replace(run, steps_to_target=trained.steps_to_target,
                                               fresh_batches=trained.fresh_batches))
            if run.replay_seconds is None and run.steps_to_target is not None:
                run = save(dataclasses.replace(run, replay_seconds=replay(arm, seed, run.steps_to_target).replay_seconds))
            print(f"{arm.value}, seed {seed}: {run.steps_to_target} steps, {run.seconds_to_target} s", flush=True)
    if stage is None:
        stage = stage_cost()
        save(runs[Arm.NONE, SEEDS[0]])
    print(path)


if __name__ == "__main__":
    main()
