"""A plain PyTorch training loop over a slow ``DataLoader``, echoed by ``echoing.torch``, with ``EchoController`` choosing e.

The loader is what a PyTorch user already has: a ``Dataset`` whose reads are slow (here
each example sleeps, as a read from slow storage waits), read by a worker process. The
echo stage wraps the loader on the trainer: ``echoing.torch.echo(loader, factor)`` with
a live :class:`echoing.torch.Factor`. After each step the loop hands the step's end time
and the stage's fresh count to :class:`echoing.EchoController`, and when the controller
decides, assigns its factor. The echo stage counts fresh *batches*, so the controller
is told that a step's worth of fresh input is one batch (``elements_per_step=1``).

The step is a small MLP's SGD update on the CPU, padded with a sleep to ``--step-seconds``:
the sleep releases the CPU as a step on an accelerator does.

Run it (the input makes a batch every ``--input-seconds``, the step takes
``--step-seconds``; R is their ratio)::

    python -m examples.torch_loop --steps 300 --input-seconds 0.04 --step-seconds 0.01

It prints the controller's decisions and one summary line as JSON; ``tests/test_torch_loop.py``
runs it.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.utils.data

import echoing
from echoing import torch as echo_torch

FEATURES = 16
CLASSES = 4


class SlowExamples(torch.utils.data.Dataset):
    """Examples of a fixed linear rule, each read taking ``seconds`` (slow storage)."""

    def __init__(self, n: int, seconds: float, seed: int = 0) -> None:
        self.n, self.seconds = n, seconds
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, FEATURES, generator=generator)
        self.labels = ((self.x[:, :4].sum(1) > 0).long() + 2 * (self.x[:, 4] > 0).long()) % CLASSES

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int):
        time.sleep(self.seconds)
        return {"x": self.x[index], "label": self.labels[index]}


def train(steps: int, *, batch_size: int = 32, input_seconds: float = 0.04, step_seconds: float = 0.01,
          max_factor: float = 8.0, num_workers: int = 1, verbose: int = 1) -> dict:
    """Trains for ``steps`` steps; returns the summary (factor, decisions, counts, losses)."""
    torch.manual_seed(0)
    examples = SlowExamples(100_000, input_seconds / batch_size)
    loader = torch.utils.data.DataLoader(examples, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                                         drop_last=True, persistent_workers=num_workers > 0)
    # echoing.torch.echo pulls from the DataLoader inside the loop's next(): the law reads what that costs a step.
    controller = echoing.EchoController(max_factor=max_factor, elements_per_step=1, pulls_on_loop_thread=True,
                                        verbose=verbose)
    factor = echo_torch.Factor(controller.factor)
    stats = echo_torch.EchoStats()
    echoed = echo_torch.echo(loader, factor, shuffle_buffer_size=4, seed=0, stats=stats)

    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.Tanh(), torch.nn.Linear(64, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    consumed, losses, step = 0, [], 0
    start = time.perf_counter()
    while step < steps:
        for batch in echoed:  # An epoch of the loader, echoed; the loop goes on into the next.
            began = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(max(0.0, step_seconds - (time.perf_counter() - began)))  # The modelled accelerator.
            consumed += len(batch["label"])  # Exactly what this step trained on.
            losses.append(loss.item())
            if controller.observe(step, time.perf_counter(), fresh=stats.fresh) is not None:
                factor.assign(controller.factor)  # The echo stage takes it from its next group of copies.
            step += 1
            if step == steps:
                break
    seconds = time.perf_counter() - start
    tenth = max(1, steps // 10)
    return {
        "torch": torch.__version__, "steps": steps, "seconds": seconds, "steps_per_second": steps / seconds,
        "input_seconds_per_batch": input_seconds, "step_seconds": step_seconds,
        "ratio": input_seconds / step_seconds if step_seconds > 0 else None, "factor": controller.factor,
        "decisions": [str(d) for d in controller.decisions],
        "consumed_examples": consumed, "emitted_batches": stats.emitted, "fresh_batches": stats.fresh,
        "first_loss": sum(losses[:tenth]) / tenth, "last_loss": sum(losses[-tenth:]) / tenth,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--input-seconds", type=float, default=0.04, help="seconds the input takes per fresh batch")
    parser.add_argument("--step-seconds", type=float, default=0.01, help="seconds a training step takes")
    parser.add_argument("--max-factor", type=float, default=8.0)
    parser.add_argument("--workers", type=int, default=1, help="DataLoader worker processes")
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    summary = train(args.steps, batch_size=args.batch_size, input_seconds=args.input_seconds,
                    step_seconds=args.step_seconds, max_factor=args.max_factor, num_workers=args.workers)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
