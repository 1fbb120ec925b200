"""The records of training runs and their measurements, as the time-to-target and main-job results files hold them.

A run trains to a target (:class:`Trained`, from :mod:`benchmarks.lib.training`), is
timed on a throttled pipeline (:class:`benchmarks.lib.timelines.Timeline`, from :mod:`benchmarks.lib.replay`), and
is written as one of three records by its mode: :class:`SampleRun` (trained, not timed),
:class:`TimedRun` (a fixed factor timed for the steps its sample run needed) and
:class:`AutoEchoRun` (AutoEcho timed, then trained on its choices). :func:`read_run` reads
any of them. The measurements several runs share (a throttled pipeline's R, a rate
calibrated under load, AutoEcho's timed replay) are :class:`Measured` entries found by
their ``of`` fields.

>>> point = CurvePoint(step=25, fresh_examples=3200.0, seconds=14.2, metric=0.11)
>>> CurvePoint.from_record(point.record()) == point
True
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional, Union

from echoing import EchoPoint
from benchmarks.lib.results_io import Record, fields_of
from benchmarks.lib.timelines import AutoEchoTimeline


class _Named(str, enum.Enum):
    """An enum whose members print as their values ("replay", not "Mode.REPLAY")."""

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


class Mode(_Named):
    """How a run is measured: trained without a throttle, replayed on the modelled host, or trained on this CPU."""

    SAMPLE = "sample"
    REPLAY = "replay"
    WALLCLOCK = "wallclock"


class TaskName(_Named):
    """The tasks of :data:`benchmarks.lib.tasks.TASKS`, by name."""

    RESNET = "resnet"
    TRANSFORMER = "transformer"


MODES = tuple(mode.value for mode in Mode)


@dataclasses.dataclass(frozen=True)
class RunConfig(Record):
    """One run's settings.

    Attributes:
      mode: the :class:`Mode`.
      task: the :class:`TaskName`, a key of :data:`benchmarks.lib.tasks.TASKS`.
      placement: the :class:`echoing.EchoPoint` (``NONE`` for the baseline).
      factor: the fixed echo factor; ``None`` with ``auto_echo``.
      echo_shuffle: echo shuffle buffer size (elements of the echo stage).
      seed: seeds data order, augmentation, echo and initial weights.
      ratio: the R the read is throttled to (replay and wallclock modes), else ``None``.
      auto_echo: whether an :class:`echoing.EchoController` chooses the factor.
      max_factor: with ``auto_echo``, the largest factor the controller may set; else ``None``.
    """

    mode: Mode
    task: TaskName
    placement: EchoPoint
    factor: Optional[float]
    echo_shuffle: int
    seed: int
    ratio: Optional[float] = None
    auto_echo: bool = False
    max_factor: Optional[float] = None

    def __post_init__(self):
        # Names given as strings (a command line's, say) become the enums, or fail naming the setting.
        for name, kind in (("mode", Mode), ("task", TaskName), ("placement", EchoPoint)):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, kind(value))
            except ValueError:
                raise ValueError(f"{name}: expected one of {[k.value for k in kind]}, got {value!r}") from None
        if self.factor is not None and not (isinstance(self.factor, (int, float)) and self.factor >= 1):
            raise ValueError(f"factor: expected a number >= 1 or None (AutoEcho), got {self.factor!r}")
        if isinstance(self.echo_shuffle, bool) or not isinstance(self.echo_shuffle, int) or self.echo_shuffle < 0:
            raise ValueError(f"echo_shuffle: expected an int >= 0, got {self.echo_shuffle!r}")
        if self.ratio is not None and not (isinstance(self.ratio, (int, float)) and self.ratio > 0):
            raise ValueError(f"ratio: expected a positive number or None, got {self.ratio!r}")
        if self.auto_echo and (self.factor is not None or self.max_factor is None):
            raise ValueError(f"factor, max_factor: AutoEcho sets the factor up to max_factor; expected factor=None and "
                             f"a max_factor, got factor={self.factor!r}, max_factor={self.max_factor!r}")
        if not self.auto_echo and (self.factor is None or self.max_factor is not None):
            raise ValueError(f"factor, max_factor: a fixed run needs a factor and no max_factor, got "
                             f"factor={self.factor!r}, max_factor={self.max_factor!r}")

    @property
    def is_baseline(self) -> bool:
        return self.placement == EchoPoint.NONE

    def baseline(self) -> "RunConfig":
        """The same seed, mode, task and R without echo."""
        return dataclasses.replace(self, placement=EchoPoint.NONE, factor=1.0, echo_shuffle=0, auto_echo=False, max_factor=None)

    def without_seed(self) -> "RunConfig":
        """The configuration the seeds of one setting share (seed 0 stands for all)."""
        return dataclasses.replace(self, seed=0)

    def describe(self) -> str:
        factor = f"auto(<={self.max_factor:g})" if self.auto_echo else f"{self.factor:g}"
        ratio = f" R={self.ratio:g}" if self.ratio is not None else ""
        return f"{self.mode} {self.task} {self.placement} e={factor} shuffle={self.echo_shuffle}{ratio} seed={self.seed}"


@dataclasses.dataclass(frozen=True)
class CurvePoint(Record):
    """One evaluation: the step, the fresh examples and training seconds behind it, and the metric."""

    step: int
    fresh_examples: float
    seconds: float
    metric: float


@dataclasses.dataclass(frozen=True)
class Trained(Record):
    """A training run to the target (:func:`benchmarks.lib.training.train_to_target`).

    Attributes:
      reached: whether the target was met (and confirmed by the next evaluation).
      steps, fresh_examples, seconds: at the crossing; ``None`` if not reached.
      realised_factor: the echo stage's steps over fresh elements.
      curve: every evaluation.
    """

    reached: bool
    steps: Optional[int]
    fresh_examples: Optional[float]
    seconds: Optional[float]
    realised_factor: float
    curve: tuple[CurvePoint, ...]


class HoldsTrained:
    """What a run record that holds its training (``trained``, a :class:`Trained`) reads from it."""

    trained: Trained

    @property
    def reached(self) -> bool:
        return self.trained.reached

    @property
    def steps(self) -> Optional[int]:
        return self.trained.steps

    @property
    def fresh_examples(self) -> Optional[float]:
        return self.trained.fresh_examples

    @property
    def curve(self) -> tuple[CurvePoint, ...]:
        return self.trained.curve


@dataclasses.dataclass(frozen=True)
class PipelineMeasure(Record):
    """A pipeline throttled for R, measured (:func:`benchmarks.lib.replay.measure_pipeline`).

    Attributes:
      ratio: the nominal R; step_seconds: the modelled step.
      read_rate: the throttle, in examples per second.
      upstream_seconds_per_batch, measured_ratio: the throttled baseline's seconds per
        batch, and that over ``step_seconds``.
      cpu_seconds_per_batch, cpu_share_of_step: the unthrottled pipeline's own CPU work
        echoing at ``cpu_checked_at_factor``, and its share of the step.
    """

    ratio: float
    step_seconds: float
    read_rate: float
    upstream_seconds_per_batch: float
    measured_ratio: float
    cpu_seconds_per_batch: float
    cpu_share_of_step: float
    cpu_checked_at_factor: float


@dataclasses.dataclass(frozen=True)
class PipelineRate(Record):
    """Steps per second of a pipeline read by ``workers`` workers, in one repeat, and the controller's factor at its end.

    ``held_factor`` is ``None`` at a fixed factor. The benchmarks that time one pipeline at
    fixed factors and with the controller (``benchmarks.service_processes``,
    ``benchmarks.grain_echo``) derive their records from it, each adding its factor.
    """

    workers: int
    repeat: int
    steps_per_second: float
    held_factor: Optional[float]


@dataclasses.dataclass(frozen=True)
class RateRound(Record):
    """One round of calibrating the throttle under load (:func:`benchmarks.lib.wallclock.calibrate`)."""

    read_rate: float
    step_seconds_at_e1: float
    step_seconds_saturated: float
    measured_ratio: float


@dataclasses.dataclass(frozen=True)
class Rates(Record):
    """The throttle for R under load: the rate set, the R it gave, the step alone, and every round."""

    ratio: float
    read_rate: float
    measured_ratio: float
    step_seconds_alone: float
    max_factor: float
    rounds: tuple[RateRound, ...]


@dataclasses.dataclass(frozen=True)
class SampleRun(Trained):
    """A run trained to the target without a throttle (sample mode): its :class:`Trained`, and which run it is.

    ``machine`` is the host it ran on (absent in records written before hosts were stamped).
    """

    OMITTED_WHEN_NONE = ("machine",)

    config: RunConfig
    target: float
    command: str
    machine: Optional[dict] = None

    @classmethod
    def of(cls, trained: Trained, config: RunConfig, target: float, command: str) -> "SampleRun":
        return cls(**fields_of(trained), config=config, target=target, command=command)


@dataclasses.dataclass(frozen=True)
class TimedRun(Record):
    """A fixed factor timed, on the modelled host (``pipeline``) or this CPU (``rates``), for its sample run's steps.

    Attributes:
      sample_steps, reached, fresh_examples, steps: the same seed's sample run's.
      pipeline: the replay's :class:`PipelineMeasure` (replay mode), else ``None``.
      rates: the throttle under load (wallclock mode), else ``None``.
      seconds: time to target (``None`` if the sample run did not reach it).
      startup_seconds: until the first batch; seconds_in_steps: ``seconds`` in step times.
    """

    OMITTED_WHEN_NONE = ("machine", "pipeline", "rates", "startup_seconds", "seconds_in_steps")

    config: RunConfig
    target: float
    sample_steps: Optional[int]
    reached: bool
    fresh_examples: Optional[float]
    steps: Optional[int]
    seconds: Optional[float]
    command: str
    pipeline: Optional[PipelineMeasure] = None
    rates: Optional[Rates] = None
    startup_seconds: Optional[float] = None
    seconds_in_steps: Optional[float] = None
    machine: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class AutoEchoRun(HoldsTrained, Record):
    """AutoEcho timed, then trained on the factors it chose.

    What the controller chose is its saved timeline's (``auto_echo_timelines`` in the
    results, found by the run's config: :meth:`TimeToTargetResults.timeline_of`).

    Attributes:
      trained: its training on the factors of the timeline (``trained.seconds`` is training's own clock).
      seconds, seconds_in_steps: its time to target in the replay (``None`` if the
        crossing came after the replayed steps).
    """

    OMITTED_WHEN_NONE = ("machine", "pipeline", "rates", "seconds_in_steps")

    config: RunConfig
    target: float
    trained: Trained
    seconds: Optional[float]
    command: str
    pipeline: Optional[PipelineMeasure] = None
    rates: Optional[Rates] = None
    seconds_in_steps: Optional[float] = None
    machine: Optional[dict] = None



Run = Union[SampleRun, TimedRun, AutoEchoRun]


def read_run(record: dict) -> Run:
    """A run record of a results file, as the record class of its mode.

    >>> config = {"mode": "sample", "task": "resnet", "placement": "none", "factor": 1.0, "echo_shuffle": 0,
    ...           "seed": 0, "ratio": None, "auto_echo": False, "max_factor": None}
    >>> run = read_run({"config": config, "target": 0.8, "reached": False, "steps": None, "fresh_examples": None,
    ...                 "seconds": None, "realised_factor": 1.0, "curve": [], "command": "python -m ..."})
    >>> type(run).__name__, run.config.is_baseline
    ('SampleRun', True)
    """
    config = RunConfig.from_record(record["config"])
    kind = SampleRun if config.mode == Mode.SAMPLE else AutoEchoRun if config.auto_echo else TimedRun
    return kind.from_record(record)


@dataclasses.dataclass(frozen=True)
class PipelineOf(Record):
    """Which pipeline a :class:`PipelineMeasure` is of."""

    task: str
    ratio: float
    seed: int
    step_seconds: float


@dataclasses.dataclass(frozen=True)
class RatesOf(Record):
    """Which task and R a :class:`Rates` is of."""

    task: str
    ratio: float


@dataclasses.dataclass(frozen=True)
class MeasuredPipeline(Record):
    of: PipelineOf
    value: PipelineMeasure


@dataclasses.dataclass(frozen=True)
class MeasuredRates(Record):
    of: RatesOf
    value: Rates


@dataclasses.dataclass(frozen=True)
class SavedTimeline(Record):
    of: RunConfig
    value: AutoEchoTimeline


@dataclasses.dataclass(frozen=True)
class TimeToTargetResults(Record):
    """A time-to-target results file's results: its runs and the measurements they share.

    ``rates`` is absent from a file without wallclock runs.
    """

    OMITTED_WHEN_NONE = ("pipelines", "rates", "auto_echo_timelines")

    runs: tuple[Run, ...]
    pipelines: Optional[tuple[MeasuredPipeline, ...]] = None
    rates: Optional[tuple[MeasuredRates, ...]] = None
    auto_echo_timelines: Optional[tuple[SavedTimeline, ...]] = None

    @classmethod
    def from_record(cls, record: dict) -> "TimeToTargetResults":
        rest = super().from_record({**record, "runs": []})
        return dataclasses.replace(rest, runs=tuple(read_run(run) for run in record["runs"]))

    def timeline_of(self, config: RunConfig) -> Optional[AutoEchoTimeline]:
        """AutoEcho's saved timeline for one run (``None`` if the file has none)."""
        return next((saved.value for saved in self.auto_echo_timelines or () if saved.of == config), None)


@dataclasses.dataclass(frozen=True)
class TaskSettings(Record):
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
      jit_compile: whether the training step is compiled with XLA.
      pipeline: keyword arguments of the training pipeline's config beyond those every
        run sets (the text pipeline's ``max_record_bytes``, say); none by default.
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
    jit_compile: bool = True
    pipeline: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TimeToTargetSettings(Record):
    """A time-to-target results file's settings: every task's."""

    tasks: dict[str, TaskSettings]


def time_to_target(document: dict) -> tuple[TimeToTargetSettings, TimeToTargetResults]:
    """A time-to-target results document's settings and results, typed."""
    from benchmarks.lib.results_io import typed

    return typed(document, TimeToTargetSettings, TimeToTargetResults)
