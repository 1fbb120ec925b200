"""Rewrites results files written in an older schema in the current one (``results_io.SCHEMA_VERSION``).

Schema 1 had no ``schema_version`` and kept the measurements that ``time_to_target``'s
records share in dicts keyed by strings: ``pipelines`` by ``"resnet/R=4/seed=0/step=0.03"``,
``rates`` by ``"resnet/R=4"`` and ``auto_echo_timelines`` by a run's settings as JSON.
Schema 2 keeps each as a list of ``{"of": {fields}, "value": ...}``; those keys are read
here, once, and nowhere else. Every other part of a document is kept as it is.

Run ``python -m benchmarks.migrate_results`` (every file under ``benchmarks/results/``) or
name the files; a file already current is left untouched.

Example:

>>> old = {"benchmark": "time_to_target", "results": {"runs": [], "rates": {"resnet/R=4": {"read_rate": 1.0}}}}
>>> migrate(old)["results"]["rates"]
[{'of': {'task': 'resnet', 'ratio': 4.0}, 'value': {'read_rate': 1.0}}]
>>> migrate(old)["schema_version"]
2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.results_io import RESULTS_DIR, SCHEMA_VERSION


def _task_and_ratio(part_task: str, part_ratio: str) -> dict:
    if not part_ratio.startswith("R="):
        raise ValueError(f"expected 'R=<number>' in a schema-1 key, got {part_ratio!r}")
    return {"task": part_task, "ratio": float(part_ratio[2:])}


def _pipeline_of(key: str) -> dict:
    """``"resnet/R=4/seed=0/step=0.03"`` as fields."""
    task, ratio, seed, step = key.split("/")
    return {**_task_and_ratio(task, ratio), "seed": int(seed.removeprefix("seed=")),
            "step_seconds": float(step.removeprefix("step="))}


def _rates_of(key: str) -> dict:
    """``"resnet/R=4"`` as fields."""
    return _task_and_ratio(*key.split("/"))


# The schema-1 measurements and how their keys read as fields.
_KEYED = {"pipelines": _pipeline_of, "rates": _rates_of, "auto_echo_timelines": json.loads}


def migrate(document: dict) -> dict:
    """The document in the current schema (a new dict; the argument is not changed)."""
    version = document.get("schema_version", 1)
    if version == SCHEMA_VERSION:
        return document
    if version != 1:
        raise ValueError(f"schema_version: no migration from {version!r} to {SCHEMA_VERSION}")
    results = dict(document["results"])
    for name, fields_of in _KEYED.items():
        if isinstance(results.get(name), dict):
            results[name] = [{"of": fields_of(key), "value": value} for key, value in results[name].items()]
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in document.items() if k != "schema_version"},
            "results": results}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="results files (default: every one under benchmarks/results/)")
    args = parser.parse_args(argv)
    for path in args.paths or sorted(RESULTS_DIR.glob("*.json")):
        document = json.loads(path.read_text())
        migrated = migrate(document)
        if migrated is document:
            print(f"{path}: already schema {SCHEMA_VERSION}")
            continue
        path.write_text(json.dumps(migrated, indent=2) + "\n")
        print(f"{path}: schema {document.get('schema_version', 1)} -> {SCHEMA_VERSION}")


if __name__ == "__main__":
    main()
