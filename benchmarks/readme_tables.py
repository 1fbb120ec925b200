"""Regenerates every result table in the README and docs/ from the results files, between marker comments.

A table sits between ``<!-- table:NAME -->`` and ``<!-- /table:NAME -->`` in any Markdown
file of the README or ``docs/`` (the results pages are ``docs/results/*.md``);
``python -m benchmarks.readme_tables`` rewrites each from ``benchmarks/results/NAME.json``
with the renderer registered below, so no figure in the documentation is typed by hand.
``tests/test_readme.py`` fails when a committed table differs from what its results file
renders (:func:`stale_tables`).
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path
from typing import Callable

from benchmarks import (backends, controller_sweep, critical_batch, demo, grain_echo, service, service_processes,
                        shapes_baselines, text_reservoir, throughput, xla_check)
from benchmarks.lib import plans, readings, reporting, results_io
from benchmarks.lib.run_records import Mode


README = Path(__file__).resolve().parent.parent / "README.md"

RENDERERS: dict[str, Callable[[dict], str]] = {
    "throughput": throughput.table,
    "shapes_baselines": shapes_baselines.table,
    "demo": demo.table,
    "time_to_target": lambda document: reporting.sample_table(reporting.results_of(document)),
    # Seeds 0-2 run at every R; seeds 3-5 only at Transformer R = 4, held out from every law's choice.
    "time_to_target_replay": lambda document: reporting.replay_table(
        reporting.of_seeds(reporting.results_of(document), (0, 1, 2))),
    "time_to_target_best": lambda document: reporting.best_table(
        reporting.of_seeds(reporting.results_of(document), (0, 1, 2))),
    "time_to_target_best_held_out": lambda document: reporting.best_table(
        reporting.of_seeds(reporting.results_of(document), (3, 4, 5))),
    # What AutoEcho read in the replays, from the saved timelines' decisions.
    "time_to_target_reads": lambda document: readings.reads_table(reporting.results_of(document)),
    "time_to_target_wallclock": lambda document: reporting.wallclock_table(reporting.results_of(document)),
    "time_to_target_wallclock_best": lambda document: reporting.best_table(reporting.results_of(document), Mode.WALLCLOCK),
    "time_to_target_seeds": lambda document: reporting.paired_table(reporting.results_of(document),
                                                                    factor_at_ratio=True),
    "time_to_target_seeds_fixed": lambda document: reporting.fixed_steps_table(reporting.results_of(document)),
    "critical_batch": critical_batch.table,
    "controller_sweep": controller_sweep.document_table,
    "controller_targets": controller_sweep.document_target_table,
    "controller_in_step": controller_sweep.document_pair_table,
    "controller_reads": controller_sweep.document_reads_table,
    "controller_changes": controller_sweep.document_changes_table,
    "controller_frontier": controller_sweep.document_frontier_table,
    "controller_frontier_after_search": lambda document: controller_sweep.document_frontier_table(document, True),
    "grain_echo": grain_echo.document_table,
    "xla_check": xla_check.document_table,
    "text_reservoir": text_reservoir.document_table,
    "backends": backends.document_table,
    "service": service.document_table,
    "service_processes": service_processes.document_table,
    # Imported when rendered: the PyTorch study imports torch.
    "torch_time_to_target": lambda document: _torch_study().document_table(document),
    "torch_stage_cost": lambda document: _torch_study().document_stage_table(document),
}


def _torch_study():
    from benchmarks import torch_time_to_target

    return torch_time_to_target


def _commands(document: dict) -> list[str]:
    return sorted({stamp.command for stamp in results_io.stamps(document) if stamp.command}) or \
        [results_io.header(document).command]


def _plans_table(results_file: str) -> Callable[[dict], str]:
    return lambda document: plans.plans_table(results_file, list(reporting.results_of(document).runs))


RENDERERS.update({"time_to_target_plans": _plans_table("time_to_target"),
                  "time_to_target_seeds_plans": _plans_table("time_to_target_seeds")})

# Tables drawn from another table's results file.
SOURCES = {
    **{name: "time_to_target" for name in ("time_to_target_replay", "time_to_target_best",
                                           "time_to_target_best_held_out", "time_to_target_reads",
                                           "time_to_target_wallclock", "time_to_target_wallclock_best",
                                           "time_to_target_plans")},
    "time_to_target_seeds_plans": "time_to_target_seeds",
    "time_to_target_seeds_fixed": "time_to_target_seeds",
    "controller_in_step": "controller_sweep",
    "controller_targets": "controller_sweep",
    "controller_reads": "controller_sweep",
    "controller_changes": "controller_sweep",
    "controller_frontier": "controller_sweep",
    "controller_frontier_after_search": "controller_sweep",
    "torch_stage_cost": "torch_time_to_target",
}


def machines(document: dict) -> str:
    """Where the results ran: the header's machine, or each stamped record's, with counts.

    >>> host = {"cpu": "B", "cores": 2, "memory_gib": 23.5, "os": "Linux", "python": "3.11.7"}
    >>> machines({"results": {"runs": [{"machine": host}, {}]}})
    '2 cores (B: 1 run; not recorded: 1 run, written before runs were stamped)'
    """
    hosts = [stamp.machine for stamp in results_io.stamps(document)]
    if not any(hosts):
        machine = results_io.header(document).machine
        return f"{machine.cores} cores ({machine.cpu})"
    counts = collections.Counter(host.cpu if host else None for host in hosts)
    cores = sorted({host.cores for host in hosts if host})
    plural = lambda n: f"{n} run" + ("s" if n != 1 else "")  # noqa: E731
    parts = [f"{cpu}: {plural(n)}" for cpu, n in sorted(counts.items(), key=lambda item: str(item[0])) if cpu is not None]
    if counts[None]:
        parts.append(f"not recorded: {plural(counts[None])}, written before runs were stamped")
    return f"{'/'.join(map(str, cores))} cores ({'; '.join(parts)})"


def render(name: str, document: dict) -> str:
    """The table for one results document, with the command and machine it came from."""
    if name.endswith("_plans"):
        return RENDERERS[name](document)
    commands = _commands(document)
    # A file many invocations filled lists their plans once, on its page, not under every table.
    if plans.plans_of(SOURCES.get(name, name)):
        by = "the plans listed on this page"
    else:
        by = f"`{commands[0]}`" if len(commands) == 1 else f"the {len(commands)} commands listed on this page"
    written = results_io.header(document)
    source = (f"_From `benchmarks/results/{SOURCES.get(name, name)}.json`: {by}, on {machines(document)}, "
              f"TensorFlow {written.versions.tensorflow}, {written.created}._")
    return RENDERERS[name](document) + "\n\n" + source


ROOT = README.parent


def pages(root: Path = ROOT) -> list[Path]:
    """The Markdown files whose tables are generated: the README and everything under docs/."""
    return [root / "README.md"] + sorted((root / "docs").rglob("*.md"))


def _pattern(name: str):
    return re.compile(rf"(<!-- table:{name} -->\n)(?:.*?\n)?(<!-- /table:{name} -->)", re.DOTALL)


def stale_tables(paths=None, results_dir: Path = results_io.RESULTS_DIR) -> list[str]:
    """``file: table`` for every marked table that differs from what its results file renders."""
    stale = []
    for path in pages() if paths is None else paths:
        text = path.read_text()
        for name in RENDERERS:
            match = _pattern(name).search(text)
            source = results_dir / f"{SOURCES.get(name, name)}.json"
            if match and source.exists():
                expected = match.group(1) + render(name, results_io.read_results(source)) + "\n" + match.group(2)
                if match.group(0) != expected:
                    stale.append(f"{path.name}: {name}")
    return stale


def update_readme(readme: Path = README, results_dir: Path = results_io.RESULTS_DIR) -> list[str]:
    """Rewrites every marked table of one Markdown file whose results file exists; returns the names rewritten."""
    text = readme.read_text()
    done = []
    for name in RENDERERS:
        path = results_dir / f"{SOURCES.get(name, name)}.json"
        pattern = _pattern(name)
        if not path.exists() or not pattern.search(text):
            continue
        table = render(name, results_io.read_results(path))
        text = pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)
        done.append(name)
    readme.write_text(text)
    return done


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=results_io.RESULTS_DIR,
                        help="where the results files are (default: the committed benchmarks/results/)")
    parser.add_argument("--readme", type=Path, default=None,
                        help="one Markdown file to rewrite (default: the README and every page under docs/)")
    args = parser.parse_args(argv)
    for page in [args.readme] if args.readme else pages():
        done = update_readme(page, args.results_dir)
        if done:
            print(f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}: {', '.join(done)}")


if __name__ == "__main__":
    main()
