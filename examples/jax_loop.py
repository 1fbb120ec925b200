"""A plain JAX training loop (no Keras) fed by an echoed ``tf.data`` pipeline, with ``EchoController`` choosing e.

The pipeline is what a JAX user already has: a slow ``tf.data`` upstream, then
:func:`echoing.echo` with a ``tf.Variable`` factor, then batching and prefetch, read with
``as_numpy_iterator()``. The step is a jitted function of the weights and a batch. After
each step the loop hands the step's end time to :class:`echoing.EchoController` and, when
the controller decides, assigns its factor to the variable (the echo stage reads it live).

**Block before timestamping.** JAX dispatches a jitted call asynchronously: the call
returns as soon as the work is queued, long before it has run. A loop that timestamps
right after the call measures how fast it can queue work, which is about how fast the
pipeline hands over batches, not the step. So this loop waits for the step's result
(``jax.block_until_ready``) before it reads the clock. The wait costs nothing a training
loop would not pay anyway: the next step needs those weights. Without it the controller
sees steps that keep pace with any factor it tries; it says so in its decision log
("implausible") and keeps the factor instead of raising it on noise.

**What training consumed.** The loop counts the examples of the batches it trained on,
exactly. ``EchoStats`` counts what the echo stage produced, which runs ahead by what sits
in the pipeline's buffers (see docs/guide.md, "What the counters count").

Run it (the input makes a batch every ``--input-seconds``, the step takes about
``--step-seconds``; R is their ratio)::

    python -m examples.jax_loop --steps 300 --input-seconds 0.02 --step-seconds 0.005

It prints the controller's decisions and one summary line as JSON (``first_loss`` and
``last_loss`` are means over the first and last tenth of the steps); ``tests/test_jax_loop.py``
runs it under JAX and checks the factor it settles on.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import tensorflow as tf

import echoing
from echoing import testing

FEATURES = 16
CLASSES = 4


def make_pipeline(factor: tf.Variable, stats: echoing.EchoStats, *, batch_size: int, input_seconds: float,
                  seed: int = 0) -> tf.data.Dataset:
    """Examples from a source that makes one batch every ``input_seconds``, echoed by ``factor``, batched."""
    def example(i):
        # A fixed linear rule with noise, so that the loss falls as the model learns.
        x = tf.random.stateless_normal([FEATURES], seed=tf.stack([i, tf.constant(seed, tf.int64)]))
        label = tf.math.floormod(tf.cast(tf.reduce_sum(x[:4]) > 0, tf.int64) + 2 * tf.cast(x[4] > 0, tf.int64), CLASSES)
        return {"x": x, "label": label}

    upstream = testing.throttled_range(batch_size / input_seconds).map(example)
    return (upstream.apply(echoing.echo(factor, shuffle_buffer_size=4 * batch_size, seed=seed, stats=stats))
            .batch(batch_size, drop_remainder=True).prefetch(2))


def make_step(depth: int):
    """A jitted SGD step of an MLP with ``depth`` residual hidden layers of 64 (more layers: a longer step)."""
    import jax
    import jax.numpy as jnp

    def forward(params, x):
        h = jnp.tanh(x @ params["w1"])
        for _ in range(depth):
            h = h + jnp.tanh(h @ params["w2"]) / depth  # Residual and scaled, so that a deep stack still learns.
        return h @ params["w3"]

    def loss_fn(params, batch):
        logits = forward(params, batch["x"])
        labels = jax.nn.one_hot(batch["label"], CLASSES)
        return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1))

    @jax.jit
    def step(params, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), loss

    return step


def init_params(width: int = 64) -> dict:
    import jax

    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    return {"w1": jax.random.normal(keys[0], (FEATURES, width)) / np.sqrt(FEATURES),
            "w2": jax.random.normal(keys[1], (width, width)) / np.sqrt(width),
            "w3": jax.random.normal(keys[2], (width, CLASSES)) / np.sqrt(width)}


def sized_step(batch_size: int, step_seconds: float):
    """A step that takes about ``step_seconds`` on this machine (its depth found by timing), and its seconds alone."""
    import jax

    batch = {"x": np.zeros((batch_size, FEATURES), np.float32), "label": np.zeros((batch_size,), np.int64)}
    depth = 1
    while True:
        step, params = make_step(depth), init_params()
        jax.block_until_ready(step(params, batch))  # Compile.
        start = time.perf_counter()
        for _ in range(5):
            params, loss = step(params, batch)
        jax.block_until_ready(loss)
        seconds = (time.perf_counter() - start) / 5
        if seconds >= step_seconds or depth >= 4096:
            return step, seconds
        depth = max(depth + 1, int(depth * step_seconds / max(seconds, 1e-6)))


def train(steps: int, *, batch_size: int = 32, input_seconds: float = 0.02, step_seconds: float = 0.005,
          max_factor: float = 8.0, block: bool = True, verbose: int = 1) -> dict:
    """Trains for ``steps`` steps; returns the summary (factor, decisions, counts, losses)."""
    import jax

    step, measured_step_seconds = sized_step(batch_size, step_seconds)
    params = init_params()
    factor = tf.Variable(1.0, dtype=tf.float64)
    stats = echoing.EchoStats()
    controller = echoing.EchoController(max_factor=max_factor, elements_per_step=batch_size, verbose=verbose)
    factor.assign(controller.factor)
    batches = make_pipeline(factor, stats, batch_size=batch_size, input_seconds=input_seconds).as_numpy_iterator()

    consumed = 0
    losses = []
    start = time.perf_counter()
    for i in range(steps):
        batch = next(batches)
        params, loss = step(params, batch)
        if block:
            # The step has run only when its result is ready; timestamp then, not at dispatch.
            jax.block_until_ready(loss)
        consumed += len(batch["label"])  # Exactly what this step trained on.
        if controller.observe(i, time.perf_counter(), fresh=int(stats.fresh)) is not None:
            factor.assign(controller.factor)
        losses.append(loss)  # Read after the loop: reading now would block an unblocked loop.
    seconds = time.perf_counter() - start
    losses = [float(loss) for loss in losses]
    tenth = max(1, steps // 10)
    return {
        "backend": "jax", "jax": jax.__version__, "steps": steps, "seconds": seconds,
        "steps_per_second": steps / seconds, "step_seconds": measured_step_seconds,
        "input_seconds_per_batch": input_seconds, "ratio": input_seconds / measured_step_seconds,
        "factor": controller.factor, "blocked": block,
        "implausible": controller.implausible,
        "consumed_examples": consumed, "emitted_examples": int(stats.emitted), "fresh_examples": int(stats.fresh),
        "first_loss": float(np.mean(losses[:tenth])), "last_loss": float(np.mean(losses[-tenth:])),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--input-seconds", type=float, default=0.02, help="seconds the input takes per fresh batch")
    parser.add_argument("--step-seconds", type=float, default=0.005, help="seconds a training step should take")
    parser.add_argument("--max-factor", type=float, default=8.0)
    parser.add_argument("--no-block", dest="block", action="store_false",
                        help="timestamp at dispatch, without waiting for the step (to see what the controller says)")
    args = parser.parse_args(argv)
    summary = train(args.steps, batch_size=args.batch_size, input_seconds=args.input_seconds,
                    step_seconds=args.step_seconds, max_factor=args.max_factor, block=args.block)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
