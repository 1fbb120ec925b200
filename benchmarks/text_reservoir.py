"""How far the Transformer's text pipeline runs ahead of its read, and falls behind it, with the consumer flat out.

The replay of ``benchmarks/time_to_target.py`` throttles the text pipeline's read to a
rate of bytes (``pipelines/slow_storage.py``), and one batch of 32 x 128 tokens is 4,096
bytes of text, so the read alone makes ``read_rate / 4096`` batches a second. The
pipeline shuffles 256 documents before it tokenizes and packs them
(``pipelines/text.py``). A shuffle reads one element for each it emits (``tf.data``
refills its buffer first: ``tests/test_pipelines.py``), so the count of documents it
holds stays put; their bytes do not: where it emits long documents the batches can run
ahead of the read, and where it holds short ones fall behind. This measures by how much,
with nothing else in the way: the replay's pipeline for the task's baseline run
(:func:`benchmarks.lib.tasks.fixed_run`: its records, batch and sequence length, e = 1),
the buffers filled unthrottled as the replay fills them (or at the read's rate, to tell
what that fill reads ahead from what the documents' lengths do), then ``batches``
batches taken as fast as they come. For each seed it gives
the most batches ahead of the read's own count at any batch (``n - rate x t``), and the
most behind. A controller's reading over a window of that pipeline sees the input's rate
move by as much, whatever factor it holds.

Run ``python -m benchmarks.text_reservoir`` (about 12 minutes, alone on the machine);
results go to ``runs/text_reservoir.json`` (``--output-dir benchmarks/results`` writes the
committed file).

>>> TextReservoirConfig().batch_rate
9.765625
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time

from benchmarks.lib import results_io
from benchmarks.lib.tables import markdown_table
from benchmarks.lib.lifecycles import fill_unthrottled
from benchmarks.lib.tasks import EMBEDDED, TASKS, fixed_run

# The Transformer's batch, sequence length and records; a token is a byte of text (pipelines/text.py).
_TRANSFORMER = TASKS["transformer"]
_TASK = _TRANSFORMER.settings


FILLS = ("unthrottled", "throttled")


@dataclasses.dataclass(frozen=True)
class TextReservoirConfig(results_io.Record):
    """Settings of the measurement.

    Attributes:
      read_rate: the read's bytes per second.
      batches: batches taken flat out after the fill.
      seeds: the pipeline's seeds (the shuffles' order), one run each.
      fills: how the buffers fill before the first batch, a run of each per seed:
        ``"unthrottled"`` (as the replay fills them) or ``"throttled"`` (at the read's
        rate, so that nothing is read ahead for free).
    """

    read_rate: float = 40_000.0
    batches: int = 700
    seeds: tuple[int, ...] = (0, 1, 2)
    fills: tuple[str, ...] = FILLS

    def __post_init__(self):
        if isinstance(self.read_rate, bool) or not isinstance(self.read_rate, (int, float)) or not self.read_rate > 0:
            raise ValueError(f"read_rate: expected a positive number of bytes per second, got {self.read_rate!r}")
        if isinstance(self.batches, bool) or not isinstance(self.batches, int) or self.batches < 1:
            raise ValueError(f"batches: expected a positive int, got {self.batches!r}")
        for fill in self.fills:
            if fill not in FILLS:
                raise ValueError(f"fills: expected each of {FILLS}, got {fill!r}")

    @property
    def batch_rate(self) -> float:
        """Batches a second the read alone makes."""
        return self.read_rate / (_TASK.batch_size * _TASK.model["sequence_length"])


@dataclasses.dataclass(frozen=True)
class ReservoirRun(results_io.Record):
    """One seed and fill: the most batches ahead of the read and behind it, and the batches' mean rate over the read's."""

    seed: int
    fill: str
    seconds: float
    most_ahead: float
    most_behind: float
    rate_over_read: float


@dataclasses.dataclass(frozen=True)
class ReservoirResults(results_io.Record):
    """Every seed's run."""

    runs: tuple[ReservoirRun, ...]


def lead_over_read(arrivals: list[float], batch_rate: float) -> tuple[float, float]:
    """The most batches ahead of ``batch_rate x t`` at any arrival, and the most behind it.

    >>> lead_over_read([0.1, 0.2, 0.3, 1.0], batch_rate=2.0)
    (2.4, 0.0)
    """
    leads = [count - batch_rate * t for count, t in enumerate(arrivals, start=1)]
    return round(max(leads), 6), round(max(0.0, -min(leads)), 6)


def measure(config: TextReservoirConfig, seed: int, fill: str) -> ReservoirRun:
    # The replay's own run of the task (its baseline, e = 1), its read in sequences a second.
    spec = fixed_run(_TRANSFORMER, EMBEDDED, seed=seed, read_rate=config.read_rate / _TASK.model["sequence_length"])
    pipeline = spec.pipeline_config()
    batches = iter(_TRANSFORMER.train_dataset(pipeline))
    with fill_unthrottled(pipeline) if fill == "unthrottled" else contextlib.nullcontext():
        next(batches)
    start, arrivals = time.monotonic(), []
    for _ in range(config.batches):
        next(batches)
        arrivals.append(time.monotonic() - start)
    ahead, behind = lead_over_read(arrivals, config.batch_rate)
    return ReservoirRun(seed, fill, arrivals[-1], ahead, behind, config.batches / arrivals[-1] / config.batch_rate)


def run(config: TextReservoirConfig, output) -> list[ReservoirRun]:
    runs = []
    for seed in config.seeds:
        for fill in config.fills:
            runs.append(measure(config, seed, fill))
            print(runs[-1])
    results_io.write_results(output.stem, config.record(), ReservoirResults(tuple(runs)).record(), output.parent)
    return runs


def document_table(document: dict) -> str:
    """The table from a results document (``python -m benchmarks.readme_tables``)."""
    config, results = results_io.typed(document, TextReservoirConfig, ReservoirResults)
    return table(config, list(results.runs))


def table(config: TextReservoirConfig, runs: list[ReservoirRun]) -> str:
    rows = [[r.fill, r.seed, f"{r.seconds:.1f}", f"{r.rate_over_read:.2f}", f"{r.most_ahead:.0f}", f"{r.most_behind:.0f}"]
            for r in runs]
    return (markdown_table(["fill before the first batch", "seed", "seconds", "batches a second over the read's", "most batches ahead of the read",
                            "most behind"], sorted(rows), align="lrrrrr")
            + f"\n\n{config.batches} batches taken flat out, the read at {config.read_rate:,.0f} bytes a second "
              f"({config.batch_rate:.2f} batches).")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=TextReservoirConfig.batches, help="batches taken per seed")
    results_io.add_output_dir_argument(parser)
    args = parser.parse_args(argv)
    config = TextReservoirConfig(batches=args.batches)
    output = args.output_dir / "text_reservoir.json"
    print(table(config, run(config, output)))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
