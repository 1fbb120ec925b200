"""The modelled-accelerator replay: wall-clock time to target as a host with an accelerator sees it.

Training is deterministic per seed, so the number of steps a configuration needs to reach
its target comes from its sample-mode run (:mod:`benchmarks.lib.training`). The replay then
runs the *real* input pipeline (throttled read, decode, augment, echo, batch) for that many
steps against a training step that sleeps ``step_seconds``. A sleeping step releases the
CPU, as a host does while its accelerator computes, so the pipeline has the host to itself
and the time measured is what that host would wait: the slower of the pipeline and the
step at every moment, with buffers, start-up and echo all real.

The read is throttled to ``batch_size / (R * step_seconds)`` examples per second, so that
reading one batch takes ``R`` steps. R is then measured (:func:`measure_pipeline`) and
recorded beside the nominal value. Seconds run from the first batch delivered, matching
the fresh-example count, which leaves the fills out too. The buffers fill with the read
unthrottled (:func:`benchmarks.lib.lifecycles.fill_unthrottled`), timed apart as
``startup_seconds``; the replays recorded before that change filled them at the throttled
rate. Either way the clock starts at the first batch; unthrottled, the prefetch buffers may
also pull some elements ahead in the moment before the link closes (not measured).

Because the replay's duration is proportional to ``step_seconds``, its speedups hold for
any host with the same R, whatever its step time, as long as the pipeline's own CPU work
per batch at the highest e stays well below ``step_seconds`` (checked and recorded by
:func:`measure_pipeline`).

Example (a few steps of a tiny pipeline):

>>> import tempfile
>>> from benchmarks.lib.tasks import TASKS, DataOptions, fixed_run
>>> task = TASKS["resnet"].with_settings(batch_size=8)
>>> data = DataOptions(source=None, cache_dir=tempfile.mkdtemp(), num_train_examples=300)
>>> spec = fixed_run(task, data, "before_augment", 2.0, mode=Mode.REPLAY, read_rate=8 / (2 * 0.01))
>>> config = spec.pipeline_config()
>>> timeline = replay(task, config, steps=6, step_seconds=0.01)
>>> len(timeline.seconds), timeline.seconds[-1] > 6 * 0.01
(6, True)
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional

import tensorflow as tf

import echoing
from benchmarks.lib.lifecycles import fill_unthrottled, release_in_background
from benchmarks.lib.run_records import Mode, PipelineMeasure
from benchmarks.lib.timelines import Decision, Timeline
from benchmarks.lib.tasks import DataOptions, Task, fixed_run


def replay(task: Task, config, *, steps: int, step_seconds: Optional[float] = None,
           train_step: Optional[Callable] = None, controller: Optional[echoing.EchoController] = None,
           factor: Optional[tf.Variable] = None) -> Timeline:
    """Pulls ``steps`` batches from the pipeline, sleeping ``step_seconds`` for every step.

    Args:
      task: the task whose pipeline runs.
      config: its pipeline config (throttled with ``read_rate``).
      steps: training steps to replay.
      step_seconds: the modelled accelerator's step.
      train_step: instead of ``step_seconds``, a real step called with each batch (the
        wallclock mode, :mod:`benchmarks.lib.wallclock`: training on this CPU).
      controller: an :class:`echoing.EchoController` to drive ``factor`` (the variable the
        config's echo stage reads), as :class:`echoing.AutoEcho` would, given the echo
        stage's fresh count at every step.
      factor: that variable.

    Returns:
      A :class:`benchmarks.lib.timelines.Timeline`: ``seconds``, for every step, seconds from the first batch to the step's end;
      ``factors``: the factor set when each step's batch was pulled; ``startup_seconds``;
      ``decisions``: the controller's decisions (:class:`~benchmarks.lib.timelines.Decision` records); ``fresh``: the echo stage's
      fresh count after every step (with a controller), else ``None``.
    """
    if (controller is None) != (factor is None):
        raise ValueError("controller and factor: give both or neither")
    if (step_seconds is None) == (train_step is None):
        raise ValueError(f"step_seconds and train_step: give exactly one, got {step_seconds!r} and {train_step!r}")
    stats = echoing.EchoStats()
    start = time.perf_counter()
    source = [iter(task.train_dataset(config, stats=stats))]  # Its only reference: released at the end.
    with fill_unthrottled(config):
        batch = next(source[0])  # The buffers fill here; the first step trains on this batch.
    origin = time.perf_counter()
    seconds, factors, fresh = [], [], []
    read_fresh = controller is not None
    counted = None
    # The variable's value, kept here as the loop assigns it rather than read at every
    # step: a read from Python while the pipeline reads the variable too slowed AutoEcho's
    # replays (ResNet at R = 2: 1.061-1.068 step times a step over the first 550 steps,
    # 1.055-1.061 without it: docs/decisions/0004-figures-from-earlier-runs.md), which a
    # Keras callback does not pay: it assigns the factor and reads only the count.
    current = float(factor.numpy()) if factor is not None else float(config.echo.factor)
    for step in range(steps):
        if step:
            batch = next(source[0])
        factors.append(current)
        if train_step is not None:
            train_step(batch)
        else:
            time.sleep(step_seconds)  # The accelerator's step: the host's CPU is free meanwhile.
        now = time.perf_counter()
        seconds.append(now - origin)
        if read_fresh:
            counted = int(stats.fresh.numpy())
            fresh.append(counted)
        if controller is not None and controller.observe(step, now, fresh=counted) is not None:
            factor.assign(controller.factor)
            current = controller.factor
    del batch
    release_in_background(source)
    return Timeline(seconds=tuple(seconds), factors=tuple(factors), startup_seconds=origin - start,
                    decisions=tuple(Decision.of(d) for d in controller.decisions) if controller is not None else (),
                    fresh=tuple(fresh) if read_fresh else None)


def auto_echo_controller(task: Task, placement: str, max_factor: float) -> echoing.EchoController:
    """AutoEcho's controller as a user sets it up: given the echo stage's fresh count."""
    return echoing.EchoController(max_factor=max_factor, elements_per_step=task.echo_elements_per_step(placement))


def seconds_per_batch(task: Task, config, *, batches: int = 40, warmup: int = 5) -> float:
    """Mean seconds between batches of a pipeline pulled as fast as it goes (no step)."""
    source = [iter(task.train_dataset(config))]  # Its only reference: released at the end.
    with fill_unthrottled(config):
        next(source[0])
    for _ in range(warmup):
        next(source[0])
    gaps, last = [], time.perf_counter()
    for _ in range(batches):
        next(source[0])
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    release_in_background(source)
    # Batches arrive in bursts from the buffers; the mean over a run is the rate.
    return sum(gaps) / len(gaps)


def measure_pipeline(task: Task, *, ratio: float, step_seconds: float, seed: int, max_factor: float,
                     echo_shuffle: int, data: DataOptions, batches: int = 200) -> PipelineMeasure:
    """The throttle for a nominal R, the R it gives, and the pipeline's own CPU work.

    Returns a :class:`benchmarks.lib.run_records.PipelineMeasure`: ``read_rate`` (examples per second), ``measured_ratio`` (seconds per batch of
    the throttled baseline pipeline over ``step_seconds``) and ``cpu_seconds_per_batch``
    of the unthrottled pipeline echoing at ``max_factor`` at the default point, which must
    stay well below ``step_seconds`` for the step to be the bottleneck at that e.
    ``batches``: the throttled pipeline's batches timed for ``measured_ratio``.
    """
    batch = task.settings.batch_size
    read_rate = batch / (ratio * step_seconds)
    echoed = fixed_run(task, data, task.default_point, max_factor, echo_shuffle, seed, mode=Mode.REPLAY)
    throttled = echoed.baseline().throttled(read_rate).pipeline_config()
    # By default a longer window than the 40 batches the ResNet records were measured over
    # (they read the nominal R): the text pipeline admits whole documents, so its rate is
    # lumpy. Even 200 batches swing for it (1.30-1.66 at a nominal 2, `pipelines` in
    # benchmarks/results/time_to_target.json); reporting.replay_table also gives the R of
    # the baseline's whole run.
    upstream = seconds_per_batch(task, throttled, batches=batches, warmup=20)
    cpu = statistics.median(seconds_per_batch(task, echoed.pipeline_config()) for _ in range(3))
    return PipelineMeasure(ratio=ratio, step_seconds=step_seconds, read_rate=read_rate,
                           upstream_seconds_per_batch=upstream, measured_ratio=upstream / step_seconds,
                           cpu_seconds_per_batch=cpu, cpu_share_of_step=cpu / step_seconds,
                           cpu_checked_at_factor=max_factor)
