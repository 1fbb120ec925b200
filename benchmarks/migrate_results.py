"""Rewrites results files written in an older schema in the current one (``results_io.SCHEMA_VERSION``).

Each older form is read here, once, and nowhere else:

* Schema 1 had no ``schema_version`` and kept the measurements that ``time_to_target``'s
  records share in dicts keyed by strings: ``pipelines`` by ``"resnet/R=4/seed=0/step=0.03"``,
  ``rates`` by ``"resnet/R=4"`` and ``auto_echo_timelines`` by a run's settings as JSON.
  Schema 2 keeps each as a list of ``{"of": {fields}, "value": ...}``.
* Schema 2 gave an AutoEcho run's largest factor as its ``factor``; schema 3 gives
  ``factor: None`` and ``max_factor``. It named throughput configurations by labels
  (``"echo e=2"``, ``"echo / one-liner at e=2"``); schema 3 gives their fields (``name``,
  ``factor``, ``stats``) and paired ratios as a list with ``of`` and ``over``. It named
  the controller simulation's scenarios and references by labels (``"R=4 jitter 35% seed
  0"``, ``"best fixed e=5"``); schema 3 gives ``ratio``, ``ratio_after``, ``seed``,
  ``reference_factor`` and ``reference_is_best``.
* Schema 3 kept the main job's runs (``demo``) in a dict keyed by name (``"baseline"``,
  ``"AutoEcho"``, ``"e=4"``), AutoEcho's largest factor as its ``factor``; schema 4
  keeps a list of records, each with its ``name``, ``factor`` (``None`` for AutoEcho)
  and ``max_factor`` (``benchmarks.demo.DemoRun``).

Every other part of a document is kept as it is.

Run ``python -m benchmarks.migrate_results`` (every file under ``benchmarks/results/``) or
name the files; a file already current is left untouched.

Example:

>>> old = {"benchmark": "time_to_target", "results": {"runs": [], "rates": {"resnet/R=4": {"read_rate": 1.0}}}}
>>> migrate(old)["results"]["rates"]
[{'of': {'task': 'resnet', 'ratio': 4.0}, 'value': {'read_rate': 1.0}}]
>>> migrate(old)["schema_version"]
4
>>> migrate({"schema_version": 2, "benchmark": "throughput", "results": {"echo_stage": {
...     "rows": [{"name": "echo e=1 with stats", "median": 5.0}], "paired_ratios": {}}}})["results"]["echo_stage"]
{'rows': [{'name': 'echo', 'factor': 1.0, 'stats': True, 'median': 5.0}], 'paired_ratios': []}
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


def _from_1(document: dict) -> dict:
    results = dict(document["results"])
    for name, fields_of in _KEYED.items():
        if isinstance(results.get(name), dict):
            results[name] = [{"of": fields_of(key), "value": value} for key, value in results[name].items()]
    return {**document, "schema_version": 2, "results": results}


def _run_config(config: dict) -> dict:
    """A schema-2 ``time_to_target`` run's settings: AutoEcho's ``factor`` was its largest."""
    if "mode" not in config or "max_factor" in config:
        return config
    if config.get("auto_echo"):
        return {**config, "factor": None, "max_factor": config["factor"]}
    return {**config, "max_factor": None}


def _stage(label: str) -> dict:
    """``"no echo"``, ``"echo e=1 with stats"``, ``"one-liner e=2"`` as fields."""
    stats = label.endswith(" with stats")
    label = label.removesuffix(" with stats")
    name, _, factor = label.rpartition(" e=")
    if not name:
        return {"name": label, "factor": None, "stats": stats}
    return {"name": name, "factor": float(factor), "stats": stats}


def _pair(label: str, value: dict) -> dict:
    """``"echo e=1 / no echo"`` or ``"echo / one-liner at e=2"`` as ``of`` and ``over``."""
    of, over = label.split(" / ")
    if " at e=" in over:
        over, factor = over.split(" at e=")
        of, over = f"{of} e={factor}", f"{over} e={factor}"
    return {"of": _stage(of), "over": _stage(over), **value}


def _stages(measured: dict) -> dict:
    rows = [{**_stage(row["name"]), **{k: v for k, v in row.items() if k != "name"}} for row in measured["rows"]]
    paired = measured["paired_ratios"]
    if isinstance(paired, dict):
        paired = [_pair(label, value) for label, value in paired.items()]
    return {**measured, "rows": rows, "paired_ratios": paired}


def _scenario(record: dict) -> dict:
    """A schema-2 controller-simulation record: its ``name`` and ``reference`` as fields."""
    if "name" not in record:
        return record
    name, reference = record["name"], record["reference"]
    words = name.replace("->", " ").replace("=", " ").replace("±", " ").split()
    fields = {"ratio": float(words[1]), "ratio_after": float(words[2]) if record["kind"] == "step" else None,
              "seed": int(words[-1]) if " seed " in name else None}
    best = reference.startswith("best fixed e=")
    factor = float(reference.removeprefix("best fixed e=").removeprefix("e=").removesuffix(" from the start"))
    kept = {k: v for k, v in record.items() if k not in ("name", "reference", "time_ratio")}
    return {**kept, **fields, "reference_factor": factor, "reference_is_best": best}


def _from_2(document: dict) -> dict:
    results = dict(document["results"])
    if document.get("benchmark") == "time_to_target":
        results["runs"] = [{**run, "config": _run_config(run["config"])} for run in results.get("runs", [])]
        results["auto_echo_timelines"] = [{**m, "of": _run_config(m["of"])}
                                          for m in results.get("auto_echo_timelines", [])]
    if document.get("benchmark") == "throughput":
        results["echo_stage"] = _stages(results["echo_stage"])
        results["shapes"] = {case: _stages(measured) for case, measured in results.get("shapes", {}).items()}
    if document.get("benchmark") == "controller_simulation":
        results["scenarios"] = [_scenario(record) for record in results["scenarios"]]
    return {**document, "schema_version": 3, "results": results}


def _from_3(document: dict) -> dict:
    results = dict(document["results"])
    if document.get("benchmark") in ("demo", "demo_quick") and isinstance(results.get("runs"), dict):
        runs = []
        for name, record in results["runs"].items():
            auto = name == "AutoEcho"  # Schema 3 told AutoEcho's run by its name alone.
            runs.append({"name": name, **record, "factor": None if auto else record["factor"],
                         "max_factor": record["factor"] if auto else None})
        results["runs"] = runs
    return {**document, "schema_version": 4, "results": results}


_STEPS = {1: _from_1, 2: _from_2, 3: _from_3}


def migrate(document: dict) -> dict:
    """The document in the current schema (a new dict; the argument is not changed)."""
    version = document.get("schema_version", 1)
    if version == SCHEMA_VERSION:
        return document
    if version not in _STEPS:
        raise ValueError(f"schema_version: no migration from {version!r} to {SCHEMA_VERSION}")
    while document.get("schema_version", 1) != SCHEMA_VERSION:
        document = _STEPS[document.get("schema_version", 1)](document)
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in document.items() if k != "schema_version"}}


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
