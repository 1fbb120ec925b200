"""A plain JAX loop fed by an echoed grain pipeline whose slow reads run in ``mp_prefetch`` worker processes.

The pipeline is what a JAX user on grain has: a source read slowly (here each example
sleeps ``--input-seconds`` / batch size, as slow storage or decoding would), in worker
processes (``mp_prefetch``), then :func:`echoing.grain.echo` with a live
:class:`echoing.grain.Factor`, then batching. The echo stage runs in the training
process, after ``mp_prefetch``: a live factor and its counts must be where the trainer
can reach them. :class:`echoing.EchoController` reads the step times and the stage's
fresh count and sets the factor; the loop blocks on each step before it timestamps it
(see ``examples/jax_loop.py`` for why).

Run it (each worker makes a batch every ``--input-seconds``; the step takes about
``--step-seconds``; R is about their ratio over the number of workers)::

    python -m examples.grain_jax_loop --steps 400 --workers 2 --input-seconds 0.08 --step-seconds 0.01

The workers' hand-over to the training process costs time of its own, so the R the
controller measures is above the nominal one (``measured_ratio`` against
``nominal_ratio`` in the summary). It prints the controller's decisions and one summary line as JSON;
``tests/test_grain_jax_loop.py`` runs it and checks the factor and the counts.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import echoing
from examples.jax_loop import CLASSES, FEATURES, init_params, sized_step


class SlowExample:
    """Example ``i``, made slowly (``seconds`` each): a picklable transform for grain's workers."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, i):
        time.sleep(self.seconds)
        rng = np.random.default_rng(int(i))
        x = rng.normal(size=FEATURES).astype(np.float32)
        label = (int(x[:4].sum() > 0) + 2 * int(x[4] > 0)) % CLASSES
        return {"x": x, "label": np.int64(label)}


def make_pipeline(factor, stats, *, batch_size: int, input_seconds: float, workers: int, seed: int = 0):
    """Examples read slowly in ``workers`` processes, echoed by ``factor`` in this one, batched."""
    import grain
    from echoing import grain as echo_grain

    upstream = (grain.MapDataset.range(10**9).map(SlowExample(input_seconds / batch_size))
                .to_iter_dataset(grain.ReadOptions(num_threads=1, prefetch_buffer_size=batch_size)))
    if workers:
        upstream = upstream.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    echoed = echo_grain.echo(upstream, factor, shuffle_buffer_size=4 * batch_size, seed=seed, stats=stats)
    # Echo and batch on a thread of their own, two batches ahead of the step.
    return grain.experimental.ThreadPrefetchIterDataset(echoed.batch(batch_size, drop_remainder=True),
                                                        prefetch_buffer_size=2)


def train(steps: int, *, batch_size: int = 32, input_seconds: float = 0.08, step_seconds: float = 0.01,
          workers: int = 2, max_factor: float = 8.0, verbose: int = 1) -> dict:
    """Trains for ``steps`` steps; returns the summary (factor, counts, losses)."""
    import jax
    from echoing import grain as echo_grain

    step, measured_step_seconds = sized_step(batch_size, step_seconds)
    params = init_params()
    factor, stats = echo_grain.Factor(1.0), echo_grain.EchoStats()
    controller = echoing.EchoController(max_factor=max_factor, elements_per_step=batch_size, verbose=verbose)
    factor.assign(controller.factor)
    batches = iter(make_pipeline(factor, stats, batch_size=batch_size, input_seconds=input_seconds, workers=workers))

    consumed, losses = 0, []
    start = time.perf_counter()
    for i in range(steps):
        batch = next(batches)
        params, loss = step(params, batch)
        jax.block_until_ready(loss)  # Timestamp when the step has run, not when it was queued.
        consumed += len(batch["label"])
        if controller.observe(i, time.perf_counter(), stats.fresh) is not None:
            factor.assign(controller.factor)
        losses.append(loss)
    seconds = time.perf_counter() - start
    batches.close()  # Stops the workers and frees their shared memory.
    losses = [float(loss) for loss in losses]
    tenth = max(1, steps // 10)
    holds = [d.factor for d in controller.decisions if d.phase == echoing.Phase.HOLD]
    return {
        "steps": steps, "seconds": seconds, "steps_per_second": steps / seconds, "workers": workers,
        "step_seconds": measured_step_seconds, "input_seconds_per_batch": input_seconds,
        "nominal_ratio": input_seconds / max(workers, 1) / measured_step_seconds,
        "measured_ratio": controller.ratio, "factor": controller.factor, "held_factor": holds[-1] if holds else None,
        "consumed_examples": consumed, "emitted_examples": stats.emitted, "fresh_examples": stats.fresh,
        "first_loss": float(np.mean(losses[:tenth])), "last_loss": float(np.mean(losses[-tenth:])),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--input-seconds", type=float, default=0.08, help="seconds one worker takes per fresh batch")
    parser.add_argument("--step-seconds", type=float, default=0.01, help="seconds a training step should take")
    parser.add_argument("--workers", type=int, default=2, help="mp_prefetch worker processes (0: read in this one)")
    parser.add_argument("--max-factor", type=float, default=8.0)
    args = parser.parse_args(argv)
    summary = train(args.steps, batch_size=args.batch_size, input_seconds=args.input_seconds,
                    step_seconds=args.step_seconds, workers=args.workers, max_factor=args.max_factor)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # grain's workers read an absl flag (google/grain#1355).
    main()
