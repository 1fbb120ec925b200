"""One trainer of several in step (``MultiWorkerMirroredStrategy``), each echoing its own input with its own controller.

Run one process per trainer, on each host, with the same ``--hosts`` and its own
``--index`` (here two on loopback; the second reads twice as slowly)::

    python -m examples.two_trainers --hosts localhost:23456,localhost:23457 --index 0 --read-ratio 2 &
    python -m examples.two_trainers --hosts localhost:23456,localhost:23457 --index 1 --read-ratio 4

Each trainer reads its own shard (``distribute_datasets_from_function``: the ids
``index, index + n, index + 2n, ...`` of a source that makes a batch every
``read_ratio * step_seconds``), echoes it with :func:`echoing.echo` at its own
``tf.Variable`` factor (created outside the strategy's scope: a plain local variable, not
a mirrored one) and counts it with its own :class:`echoing.EchoStats`. The step is a
linear model's SGD step whose gradients are averaged across the trainers
(``strategy.run``: every trainer waits for the slowest), then a sleep of
``--step-seconds`` that stands for the accelerator's work.

**Each trainer's own count and own wait.** Each trainer's
:class:`echoing.EchoController` is given that trainer's fresh count, as on one host, and
the time its loop has spent in ``next(iterator)`` (``input_wait``). In step, every
trainer's steps run at the slowest input's pace, so a trainer whose input is faster sees
its production fall with everyone's; only its own wait tells whether its own input is the
one behind. Where the steps ran slow and its loop waited under half as long as its own
input alone would have made it, the controller keeps the factor (``Cause.HELD_BACK``)
instead of raising it. On 100 simulated pairs of trainers (``python -m
benchmarks.controller_sweep``, docs/results/controller.md) every trainer held a factor
within [0.85, 1.5] x its own R (with the count alone, 194 of 200, and one held 2.8 x).

With ``--service grpc://host:port`` each trainer reads through tf.data service workers
(``python -m echoing.service``), its own job on shared workers, paced there by graph ops
(``pipelines.slow_storage.sleep_per_record``), and echoes on its own host after
``distribute``.

**Why a custom loop, not ``fit`` with ``AutoEcho``.** Keras 3's ``fit`` does not run
under ``MultiWorkerMirroredStrategy``: it fails converting a ``PerReplica`` batch to a
tensor (keras-team/keras#20585; so it did here, with Keras 3.15 and TensorFlow 2.21), so
this loop drives :class:`echoing.EchoController` itself, as ``AutoEcho`` does in ``fit``.

It prints one line of JSON: the factors it held, its step rate, its fresh count and the
ids it trained on (``tests/test_two_trainers.py`` checks them across both trainers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

FEATURES = 8


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m examples.two_trainers", description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", required=True, help="every trainer's host:port, comma-separated, in index order")
    parser.add_argument("--index", type=int, required=True, help="this trainer's index in --hosts")
    parser.add_argument("--read-ratio", type=float, required=True,
                        help="R of this trainer's input: it makes a batch every read_ratio * step_seconds")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--step-seconds", type=float, default=0.02)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-factor", type=float, default=8.0)
    parser.add_argument("--service", default="",
                        help="read on this tf.data service (grpc://host:port), each trainer its own job; echo here")
    args = parser.parse_args(argv)
    hosts = args.hosts.split(",")
    for host in hosts:
        name, _, port = host.rpartition(":")
        if not name or not port.isdigit() or not 0 < int(port) < 65536:
            parser.error(f"--hosts: expected host:port entries, got {host!r} in {args.hosts!r}")
    if not 0 <= args.index < len(hosts):
        parser.error(f"--index: expected 0 to {len(hosts) - 1} (one per entry of --hosts), got {args.index}")
    for name in ("read_ratio", "step_seconds"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')}: expected a number > 0, got {getattr(args, name)}")
    for name in ("steps", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected an int >= 1, got {getattr(args, name)}")
    if args.max_factor < 1:
        parser.error(f"--max-factor: expected a number >= 1, got {args.max_factor}")
    args.hosts = hosts
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    # The cluster must be known before TensorFlow makes the strategy.
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": args.hosts},
                                          "task": {"type": "worker", "index": args.index}})
    import tensorflow as tf

    import echoing
    from echoing import testing
    from pipelines import slow_storage

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    trainers = len(args.hosts)
    # Local to this trainer: created outside strategy.scope(), so neither is mirrored.
    factor = tf.Variable(1.0, dtype=tf.float64, trainable=False)
    stats = echoing.EchoStats()

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        shard, shards, size = context.input_pipeline_id, context.num_input_pipelines, args.batch_size
        # A batch's worth of examples every read_ratio * step_seconds, read whole (a record).
        records_per_second = 1 / (args.read_ratio * args.step_seconds)
        if args.service:
            # Read on the service's workers, paced by graph ops that travel there; each
            # trainer its own job (its own shard), the echo stage here, after distribute.
            records = tf.data.Dataset.range(10**9).apply(slow_storage.sleep_per_record(records_per_second))
        else:
            records = testing.throttled_range(records_per_second)
        # One element per record (its ids), so that a service sends records, not examples.
        ids = records.map(lambda r: tf.range(r * size, (r + 1) * size, dtype=tf.int64) * shards + shard)
        if args.service:
            ids = ids.apply(echoing.service.distribute("distributed_epoch", args.service, job_name=f"trainer-{shard}"))
        ids = ids.unbatch()

        def example(i):
            x = tf.random.stateless_normal([FEATURES], seed=tf.stack([i, tf.constant(0, tf.int64)]))
            return {"id": i, "x": x, "y": tf.reduce_sum(x[:2])}

        batches = (ids.map(example).apply(echoing.echo(factor, shuffle_buffer_size=4 * args.batch_size,
                                                       seed=args.index, stats=stats))
                   .batch(args.batch_size, drop_remainder=True))
        return batches.prefetch(2)

    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    with strategy.scope():
        weights = tf.Variable(tf.zeros([FEATURES]))

    @tf.function
    def train_step(batch):
        def replica_step(batch):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.linalg.matvec(batch["x"], weights) - batch["y"]) ** 2)
            gradient = tape.gradient(loss, weights)
            # The mean across trainers: every trainer waits here for the slowest.
            gradient = tf.distribute.get_replica_context().all_reduce("mean", gradient)
            weights.assign_sub(0.05 * gradient)
            return loss
        return strategy.run(replica_step, args=(batch,))

    controller = echoing.EchoController(max_factor=args.max_factor, elements_per_step=args.batch_size)
    iterator = iter(dataset)
    ids, factors, ends = [], [], []
    waited = 0.0  # seconds spent waiting for this trainer's own input
    for step in range(args.steps):
        start = time.perf_counter()
        batch = next(iterator)
        waited += time.perf_counter() - start
        train_step(batch)  # The all-reduce inside waits for the other trainers' inputs.
        time.sleep(args.step_seconds)  # The accelerator's share of the step.
        ends.append(time.perf_counter())
        ids.extend(int(i) for i in strategy.experimental_local_results(batch["id"])[0].numpy())
        factors.append(float(factor.numpy()))
        if controller.observe(step, ends[-1], fresh=int(stats.fresh), input_wait=waited):
            factor.assign(controller.factor)
    half = len(ends) // 2
    opening = next((d for d in controller.decisions if d.cause == echoing.Cause.OWN_RATE), None)
    summary = {
        "index": args.index,
        "trainers": trainers,
        "read_ratio": args.read_ratio,
        "steps": args.steps,
        "own_rate": opening.own_rate if opening is not None else None,
        "second_half_step_rate": (len(ends) - half - 1) / (ends[-1] - ends[half]),
        "second_half_mean_factor": statistics.fmean(factors[half:]),
        "ratio": controller.ratio,
        "fresh": int(stats.fresh),
        "emitted": int(stats.emitted),
        "trained_ids": ids,
        "decisions": [str(d) for d in controller.decisions],
    }
    print(json.dumps(summary), flush=True)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
