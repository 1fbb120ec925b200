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

from benchmarks import backends, controller_sweep, critical_batch, demo, grain_echo, service, service_processes, throughput, xla_check
from benchmarks.lib import reporting, results_io


def shapes_baselines_table(document: dict) -> str:
    results = document["results"]
    lines = ["| model (same pipeline and steps) | steps | eval accuracy | train seconds |", "|---|---:|---:|---:|"]
    for key in ("linear", "resnet"):
        row = results[key]
        lines.append(f"| {row['model']} | {row['steps']} | {row['eval_accuracy']:.3f} | {row['train_seconds']:.0f} |")
    return "\n".join(lines)

README = Path(__file__).resolve().parent.parent / "README.md"

RENDERERS: dict[str, Callable[[dict], str]] = {
    "throughput": throughput.table,
    "shapes_baselines": shapes_baselines_table,
    "demo": demo.table,
    "time_to_target": lambda document: reporting.sample_table(reporting.results_of(document)),
    "time_to_target_replay": lambda document: reporting.replay_table(reporting.results_of(document)),
    "time_to_target_best": lambda document: reporting.best_table(reporting.results_of(document)),
    "time_to_target_wallclock": lambda document: reporting.wallclock_table(reporting.results_of(document)),
    "time_to_target_wallclock_best": lambda document: reporting.best_table(reporting.results_of(document), "wallclock"),
    "time_to_target_seeds": lambda document: reporting.paired_table(reporting.results_of(document)),
    "time_to_target_seeds_fixed": lambda document: reporting.fixed_steps_table(reporting.results_of(document)),
    "critical_batch": critical_batch.table,
    "controller_sweep": controller_sweep.document_table,
    "controller_in_step": controller_sweep.document_pair_table,
    "grain_echo": grain_echo.document_table,
    "xla_check": xla_check.document_table,
    "backends": backends.document_table,
    "service": service.document_table,
    "service_processes": service_processes.document_table,
}


# Tables drawn from another table's results file.
SOURCES = {name: "time_to_target" for name in ("time_to_target_replay", "time_to_target_best", "time_to_target_wallclock",
                                                "time_to_target_wallclock_best", "time_to_target_commands")}
SOURCES["time_to_target_seeds_commands"] = "time_to_target_seeds"
SOURCES["controller_in_step"] = "controller_sweep"
SOURCES["time_to_target_seeds_fixed"] = "time_to_target_seeds"


def commands_block(document: dict) -> str:
    """The distinct commands that filled a results file, once, as a shell block."""
    return "```bash\n" + "\n".join(_commands(document)) + "\n```"


def _commands(document: dict) -> list[str]:
    runs = document["results"].get("runs", [])
    return sorted({r["command"] for r in runs if isinstance(r, dict) and r.get("command")}) or [document["command"]]


RENDERERS["time_to_target_commands"] = commands_block
RENDERERS["time_to_target_seeds_commands"] = commands_block


def machines(document: dict) -> str:
    """Where the results ran: the header's machine, or each stamped record's, with counts.

    >>> machines({"machine": {"cores": 2, "cpu": "A"}, "results": {"runs": [{"machine": {"cores": 2, "cpu": "B"}}, {}]}})
    '2 cores (B: 1 run; not recorded: 1 run, written before runs were stamped)'
    """
    runs = [r for r in document["results"].get("runs", []) if isinstance(r, dict)]
    if not any("machine" in r for r in runs):
        return f"{document['machine']['cores']} cores ({document['machine']['cpu']})"
    counts = collections.Counter(r["machine"]["cpu"] if "machine" in r else None for r in runs)
    cores = sorted({r["machine"]["cores"] for r in runs if "machine" in r})
    plural = lambda n: f"{n} run" + ("s" if n != 1 else "")  # noqa: E731
    parts = [f"{cpu}: {plural(n)}" for cpu, n in sorted(counts.items(), key=lambda item: str(item[0])) if cpu is not None]
    if counts[None]:
        parts.append(f"not recorded: {plural(counts[None])}, written before runs were stamped")
    return f"{'/'.join(map(str, cores))} cores ({'; '.join(parts)})"


def render(name: str, document: dict) -> str:
    """The table for one results document, with the command and machine it came from."""
    if name.endswith("_commands"):
        return RENDERERS[name](document)
    commands = _commands(document)
    # A file many invocations filled lists their commands once, on its page, not under every table.
    by = f"`{commands[0]}`" if len(commands) == 1 else f"the {len(commands)} commands listed on this page"
    source = (f"_From `benchmarks/results/{SOURCES.get(name, name)}.json`: {by}, on {machines(document)}, "
              f"TensorFlow {document['versions']['tensorflow']}, {document['created']}._")
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
