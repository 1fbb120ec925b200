"""Training that survives being killed: a custom loop that checkpoints everything every N steps.

Keras 3 ``fit`` cannot save the position of its dataset iterator (``BackupAndRestore``
restores the epoch only), so exact resumption needs a loop that owns the iterator. This
one checkpoints the model, the optimizer, the iterator, the ``EchoStats`` and the echo
factor together with ``tf.train.CheckpointManager``, and on start restores the latest
checkpoint if there is one. Killed at any moment (even ``kill -9``) and started again with
the same arguments, it trains on exactly the batches an uninterrupted run would, from the
last checkpoint on, and ends with the same fresh-example count.

Run it::

    python -m examples.resume_training --dir /tmp/resume-demo --steps 60 --every 10

It prints one line per step (``step``, the ids of the batch's examples, ``fresh``), so a
run can be compared with another: ``tests/test_resume.py`` kills it and compares.

**With tf.data service** (``--service grpc://host:port``: the reading runs on the
service's workers, the echo stage on this trainer), TensorFlow cannot checkpoint the
iterator of a distributed dataset. The checkpoint then holds the model, the optimizer,
``EchoStats``, the factor and the step, and a resumed run reads through a new job, which
starts a new pass over the data from its beginning: the counts and the model go on
exactly from the checkpoint, the position in the data does not
(``tests/test_service_processes.py`` kills and resumes one).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import keras
import tensorflow as tf

import echoing

FEATURES = 4


def make_dataset(factor: tf.Variable, stats: echoing.EchoStats, seed: int, service: str = "") -> tf.data.Dataset:
    """An example pipeline: ids with features (read on ``service``'s workers if given), echoed by a variable factor, batched."""
    ds = tf.data.Dataset.range(10**6)
    ds = ds.map(lambda i: {"id": i, "x": tf.fill([FEATURES], tf.cast(i % 97, tf.float32) / 97.0)})
    if service:
        ds = ds.apply(echoing.service.distribute("distributed_epoch", service))
    # Every stage after the echo stage is stateless (see echoing/external_state.py).
    ds = ds.apply(echoing.echo(factor, shuffle_buffer_size=64, seed=seed, stats=stats))
    ds = ds.batch(8)
    # No prefetch, injected or not, so that the stage reads only what training asks for
    # and the printed counts compare run to run. Real training adds .prefetch(...); the
    # counts then run ahead of training by what is prefetched, and resume exactly still.
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return ds.with_options(options)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="checkpoint folder (kept between runs)")
    parser.add_argument("--steps", type=int, default=60, help="train until this step")
    parser.add_argument("--every", type=int, default=10, help="checkpoint every this many steps")
    parser.add_argument("--factor", type=float, default=1.5, help="the echo factor (a tf.Variable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step")
    parser.add_argument("--wait-after-step", type=int, default=0,
                        help="after this step (and its checkpoint), wait to be killed: a test kills it there")
    parser.add_argument("--service", default="", help="a tf.data service dispatcher (grpc://host:port) to read through")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.every < 1:
        parser.error(f"--steps and --every must be positive, got {args.steps} and {args.every}")

    keras.utils.set_random_seed(args.seed)  # Fix the global seed too: op seeds combine with it.
    factor = tf.Variable(args.factor, dtype=tf.float64, trainable=False)
    stats = echoing.EchoStats()
    iterator = iter(make_dataset(factor, stats, args.seed, args.service))
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.01)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)

    # One checkpoint holds everything the run's future depends on (a distributed
    # dataset's iterator cannot be saved: with a service, a resumed run starts a new pass).
    saved = dict(model=model, optimizer=optimizer, stats=stats, factor=factor, step=step)
    checkpoint = tf.train.Checkpoint(**saved) if args.service else tf.train.Checkpoint(iterator=iterator, **saved)
    manager = tf.train.CheckpointManager(checkpoint, args.dir, max_to_keep=2)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        print(json.dumps({"restored": manager.latest_checkpoint, "step": int(step)}), flush=True)

    @tf.function
    def train_step(batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(batch["x"])[:, 0] - batch["x"][:, 0]) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    while int(step) < args.steps:
        batch = next(iterator)
        train_step(batch)
        step.assign_add(1)
        print(json.dumps({"step": int(step), "ids": batch["id"].numpy().tolist(), "fresh": int(stats.fresh)}), flush=True)
        if int(step) % args.every == 0:
            manager.save(checkpoint_number=int(step))
        if int(step) == args.wait_after_step:
            print(json.dumps({"waiting": int(step)}), flush=True)
            while True:  # Until killed: where it stops no longer depends on how fast the machine is.
                time.sleep(60)
        time.sleep(args.step_seconds)
    weights = [w.tolist() for w in model.get_weights()]
    print(json.dumps({"done": int(step), "fresh": int(stats.fresh), "emitted": int(stats.emitted), "weights": weights}), flush=True)


if __name__ == "__main__":
    main()
