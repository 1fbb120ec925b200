"""Lightning's ``fit`` over an echoed PyTorch loader, with :class:`echoing.torch.lightning.AutoEcho` choosing e.

The loader reads a slow dataset (each batch takes ``--input-seconds`` to make, in the
main process) and is echoed on the trainer by :func:`echoing.torch.echo`; the callback
sets its :class:`echoing.torch.Factor` from the step times and the stage's fresh count.
With ``--devices 2`` Lightning runs two CPU processes under DDP (``gloo``): each reads its
own half of the data, rank 0 decides the factor and every rank assigns it at the same
step, so both run exactly ``--steps`` steps and neither waits forever at a collective.

It prints one line of JSON per rank: its steps, its fresh and emitted counts, the factor
it held at each step and rank 0's decisions; ``--summary-dir`` also writes each rank's line
to ``rank-N.json`` there (the ranks share one stdout, where two lines can run together).
A checkpoint is saved at the end (``--checkpoint``) with the callback's state;
``--resume`` continues from it.

Run it: ``python -m examples.lightning_loop --steps 200 --devices 2``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import lightning as L
import torch

from echoing import torch as echo_torch
from echoing.torch.lightning import AutoEcho


class SlowBatches(torch.utils.data.IterableDataset):
    """Batches of ``batch_size`` rows whose making takes ``seconds`` each: this rank's half of an endless stream."""

    def __init__(self, batch_size: int, seconds: float, rank: int, world_size: int) -> None:
        self.batch_size, self.seconds, self.rank, self.world_size = batch_size, seconds, rank, world_size

    def __iter__(self):
        index = self.rank
        while True:
            time.sleep(self.seconds)
            generator = torch.Generator().manual_seed(index)
            x = torch.randn(self.batch_size, 8, generator=generator)
            yield x, (x.sum(dim=1, keepdim=True) > 0).float()
            index += self.world_size


class Regression(L.LightningModule):
    """A small model whose step sleeps ``step_seconds`` (a modelled accelerator's step)."""

    def __init__(self, step_seconds: float) -> None:
        super().__init__()
        self.step_seconds = step_seconds
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        time.sleep(self.step_seconds)
        x, y = batch
        return torch.nn.functional.binary_cross_entropy_with_logits(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Held(L.Callback):
    """The factor each step ran at and the steps this rank took."""

    def __init__(self, factor: echo_torch.Factor) -> None:
        self.factor, self.factors = factor, []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.factors.append(float(self.factor))


def train(steps: int, *, devices: int = 1, batch_size: int = 16, input_seconds: float = 0.02,
          step_seconds: float = 0.005, max_factor: float = 8.0, checkpoint: str | None = None,
          resume: str | None = None, verbose: int = 0) -> dict:
    """Fits ``steps`` steps on ``devices`` CPU processes; returns this rank's summary."""
    factor, stats = echo_torch.Factor(1.0), echo_torch.EchoStats()
    auto = AutoEcho(factor, stats, max_factor=max_factor, verbose=verbose)
    held = Held(factor)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=devices,
                        strategy="ddp" if devices > 1 else "auto", callbacks=[auto, held], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    rank, world = trainer.global_rank, trainer.world_size
    source = torch.utils.data.DataLoader(SlowBatches(batch_size, input_seconds, rank, world), batch_size=None)
    loader = echo_torch.echo(source, factor, seed=0, stats=stats)
    trainer.fit(Regression(step_seconds), loader, ckpt_path=resume)
    if checkpoint:
        trainer.save_checkpoint(checkpoint)
    return {"rank": rank, "steps": len(held.factors), "global_step": trainer.global_step, "fresh": stats.fresh,
            "emitted": stats.emitted, "factors": held.factors, "last_factor": float(factor),
            "decisions": [str(d) for d in auto.decisions] if rank == 0 else []}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--input-seconds", type=float, default=0.02)
    parser.add_argument("--step-seconds", type=float, default=0.005)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--summary-dir", type=pathlib.Path, default=None,
                        help="a directory to write each rank's summary to, as rank-N.json")
    args = parser.parse_args(argv)
    for name in ("steps", "devices"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected a whole number >= 1, got {getattr(args, name)!r}")
    summary = train(args.steps, devices=args.devices, input_seconds=args.input_seconds,
                    step_seconds=args.step_seconds, checkpoint=args.checkpoint, resume=args.resume)
    if args.summary_dir is not None:
        args.summary_dir.mkdir(parents=True, exist_ok=True)
        (args.summary_dir / f"rank-{summary['rank']}.json").write_text(json.dumps(summary) + "\n")
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
