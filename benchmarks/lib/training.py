"""Training to a target: the loop, the crossing rule and the fresh-example count.

**Crossing rule.** A run is evaluated every ``eval_every`` steps. It reaches the target at
the first evaluation that meets the target *and is followed by another that meets it*, so
that one lucky evaluation on a noisy curve does not decide. Steps, fresh examples and
seconds are those of the first of the two.

**Fresh examples.** Counted from what training consumed: every step consumes
``echo_elements_per_step`` elements of the echo stage, each a copy of ``1 / e`` fresh
ones. No buffer fill is counted, neither the input shuffle's nor the echo shuffle's:
both are read ahead of training and are the same start-up cost whatever the run does
later. Exact for an integer factor, exact in expectation for a fractional one. For a
factor that changes during the run (``factor_schedule``), the sum runs step by step.

**Seconds.** Training seconds from the first batch delivered (after the buffers filled)
to the crossing, evaluation excluded. In sample mode the pipeline is not throttled and
shares the CPU with training, so these seconds are not a wall-clock result; the replay
(:mod:`benchmarks.lib.replay`) and the wallclock mode give those.

Example (a tiny run; the target is met at once):

>>> import tempfile
>>> from benchmarks.lib.tasks import TASKS, DataOptions, fixed_run
>>> task = TASKS["resnet"].with_settings(batch_size=8, budget_steps=6, eval_every=2, eval_examples=16,
...                                      target=0.0, model={"depth": 8, "width": 4}, jit_compile=False,
...                                      pipeline={"shuffle_buffer_size": 64})
>>> data = DataOptions(source=None, cache_dir=tempfile.mkdtemp(), num_train_examples=300)
>>> record = train_to_target(fixed_run(task, data, "before_augment", 2.0),
...                          log=lambda line: None)
>>> record.reached, record.steps, record.fresh_examples
(True, 2, 8.0)
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import keras
import tensorflow as tf

import echoing
from benchmarks.lib.lifecycles import release_in_background
from benchmarks.lib.run_records import CurvePoint, Trained
from benchmarks.lib.tasks import RunSpec, Task


def fresh_examples(task: Task, placement: str, steps: int, factor: float) -> float:
    """Fresh examples behind ``steps`` training steps at a constant realised factor."""
    return steps * task.echo_elements_per_step(placement) * task.examples_per_echo_element(placement) / factor


def scheduled_fresh_examples(task: Task, placement: str, schedule: Sequence[float], steps: int) -> float:
    """Fresh examples behind the first ``steps`` steps when step ``i`` ran at ``schedule[i]``."""
    per_step = task.echo_elements_per_step(placement) * task.examples_per_echo_element(placement)
    return float(sum(per_step / schedule[min(i, len(schedule) - 1)] for i in range(steps)))


def crossing(curve: Sequence[CurvePoint], task: Task) -> Optional[CurvePoint]:
    """The first evaluation that meets the target and whose successor does too, else ``None``."""
    for point, following in zip(curve, curve[1:]):
        if task.reached(point.metric) and task.reached(following.metric):
            return point
    return None


def train_to_target(spec: RunSpec, *, factor_schedule: Optional[Sequence[float]] = None,
                    before_step: Optional[Callable[[keras.Model, int, tuple], None]] = None,
                    log: Callable[[str], None] = print) -> Trained:
    """Trains one run until the target is confirmed or the budget runs out.

    Args:
      spec: the run (its factor is ignored with ``factor_schedule``).
      factor_schedule: the factor to run at step ``i`` (a run replayed from AutoEcho's
        choices); the echo stage then reads a variable set before every step.
      before_step: called as ``before_step(model, step, (inputs, targets))`` before each
        training step, on the weights that step is about to update (a measurement such as
        the gradient noise scale; its time counts as training time).

    Returns:
      The :class:`benchmarks.lib.run_records.Trained` record: ``reached``, ``steps``,
      ``fresh_examples``, ``seconds`` (at the crossing, ``None`` if not reached),
      ``realised_factor`` and the evaluation ``curve``.
    """
    task, placement = spec.task, spec.placement
    settings = task.settings
    keras.utils.set_random_seed(spec.seed)
    model = task.build_model()
    variable = None
    if factor_schedule is not None:
        variable = tf.Variable(float(factor_schedule[0]), dtype=tf.float64)
        spec = spec.with_factor(variable)
    config = spec.pipeline_config()
    eval_batches = task.eval_batches(config)
    stats = echoing.EchoStats()
    source = [iter(task.train_dataset(config, stats=stats))]  # Its only reference: released below.
    pending = next(source[0])  # The buffers fill here; the clock starts after (see the module docstring).

    curve, seconds, step = [], 0.0, 0
    while step < settings.budget_steps:
        start = time.perf_counter()
        for _ in range(min(settings.eval_every, settings.budget_steps - step)):
            if variable is not None:
                variable.assign(float(factor_schedule[min(step, len(factor_schedule) - 1)]))
            inputs, targets = pending if pending is not None else next(source[0])
            pending = None
            if before_step is not None:
                before_step(model, step, (inputs, targets))
            model.train_on_batch(inputs, targets)
            step += 1
        seconds += time.perf_counter() - start  # Evaluation time is not training time.
        metric = task.evaluate(model, eval_batches)
        if factor_schedule is not None:
            fresh = scheduled_fresh_examples(task, placement, factor_schedule, step)
        else:
            realised = stats.factor if placement != "none" and int(stats.fresh) else 1.0
            fresh = fresh_examples(task, placement, step, realised)
        curve.append(CurvePoint(step=step, fresh_examples=fresh, seconds=seconds, metric=metric))
        eta = seconds / step * (settings.budget_steps - step)
        log(f"  step {step:5d}  {task.metric_name} {metric:.4f}  fresh {fresh:9.0f}  {seconds:6.0f}s"
            f"  (at most {eta:.0f}s to budget)")
        if len(curve) >= 2 and crossing(curve[-2:], task) is not None:
            break
    # The input iterator goes before the model: left to the frame, which frees the model
    # first, its deletion blocked for 9 s after 50 ResNet steps and up to 32 s after 275
    # (timed around `del` on each, from `python -m benchmarks.demo`'s log). Even first it
    # may wait 7-8 s, idle (release_in_background says how often): a thread does the waiting.
    del pending
    release_in_background(source)
    point = crossing(curve, task)
    return Trained(reached=point is not None, steps=point.step if point else None,
                   fresh_examples=point.fresh_examples if point else None, seconds=point.seconds if point else None,
                   realised_factor=stats.factor, curve=tuple(curve))
