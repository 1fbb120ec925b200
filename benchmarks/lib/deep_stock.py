"""A second family of simulated loops: lumpy reads into a deep upstream stock, drawn after the Transformer replay's text pipeline.

The controller sweep's family (:mod:`benchmarks.lib.loops`) holds an upstream prefetch of
1-32 fresh batches. The stock of this family, 64-512, was drawn from the size of the
Transformer's shuffle of 10,000 packed sequences before its echo stage (about 310 batches
of 32; ``benchmarks/lib/tasks.py``, ``pipelines/text.py``). That shuffle banks nothing
itself (``tf.data`` refills its buffer before each element it emits), yet the pipeline
runs up to 128-207 batches ahead of its read, with its buffers filled at the read's rate
or not (``python -m benchmarks.text_reservoir``): a stock of the order of this family's
low end, but, from the code, one whose level wanders with the lengths of the documents its
shuffle of 256 emits, not one that fills only while a hold outruns the read, as this family's does
(docs/decisions/0031-a-deep-stock-family.md, "Correction"). On that
pipeline AutoEcho takes 1.32-1.33x the best fixed factor's time
at R = 4 (``docs/results/time_to_target.md``), and the sweep's loops do not show why. This
family draws loops like it, so that a change of the law can be designed against that miss
in seconds, with no TensorFlow:

* R log-uniform in 2-8, constant (the replays' R = 2 and 4, and a little beyond);
  ``max_factor`` 8, the replays';
* an upstream prefetch of 64-512 fresh batches and an output buffer of 8-64 (the echo
  shuffle of 256 elements and the ``prefetch`` after ``batch``), log-uniform;
* reads in lumps of 4-32 batches, log-normal sizes (sigma 0.5-1.2): documents of many
  lengths;
* steps of 10-50 ms (the Transformer's about 17 ms), step jitter 0-30%, read jitter
  20-60%; no pauses, one step a call, cold starts;
* runs to :data:`DEEP_STOCK_PROGRESS` fresh steps: at e = 4 and c = 0.19 that is
  2,500 x 1.57, about the replays' 4,000 steps.

Seeds follow the sweep's rule: the law may be chosen on seeds 1000 and up (1000-1099 to
design, 1200-1299 held out), and seeds 0-99 report. The draw's stream is its own: seed
1000 here is not the sweep's loop 1000.

>>> case = draw_deep_stock_case(1000)
>>> case == draw_deep_stock_case(1000), 2 <= case.ratio <= 8, 64 <= case.upstream_batches <= 512
(True, True, True)
"""

from __future__ import annotations

import math
import random

from benchmarks.lib.loops import Case, Change

# The training progress every run of this family reaches, in fresh steps.
DEEP_STOCK_PROGRESS = 2500.0


def draw_deep_stock_case(seed: int) -> Case:
    """The loop of seed ``seed`` in the deep-stock family (see the module docstring)."""
    rng = random.Random(f"deep-stock-{seed}")

    def log_uniform(low: float, high: float) -> float:
        return math.exp(rng.uniform(math.log(low), math.log(high)))

    ratio = round(log_uniform(2, 8), 3)
    return Case(
        seed=seed, ratio=ratio, ratio_after=ratio, change=Change.NONE, change_step=0, change_steps=1,
        max_factor=8.0, step_seconds=round(log_uniform(0.01, 0.05), 4), step_jitter=round(rng.uniform(0, 0.3), 3),
        upstream_jitter=round(rng.uniform(0.2, 0.6), 3), buffer_batches=round(log_uniform(8, 64)),
        upstream_batches=round(log_uniform(64, 512)), lump_batches=round(log_uniform(4, 32)),
        lump_sigma=round(rng.uniform(0.5, 1.2), 2), pause_seconds=0.0, pause_every_steps=100,
        steps_per_execution=1, warm=False)
