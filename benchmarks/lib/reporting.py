"""Tables of time-to-target results: medians and ranges over seeds, ratios against the same seed's baseline.

Every ratio is taken per seed (a run against the baseline of the same seed, mode, task and
R) and then summarised as the median and the min-max over seeds. A difference between two
configurations is only worth stating when it is larger than those ranges.

Run ``python -m benchmarks.lib.reporting RESULTS.json`` to print the tables.

Example:

>>> runs = [{"config": {"mode": "sample", "task": "resnet", "placement": p, "factor": e, "echo_shuffle": 0,
...                     "seed": s, "ratio": None}, "reached": True, "steps": n, "fresh_examples": f}
...         for p, e, s, n, f in [("none", 1.0, 0, 500, 64000), ("none", 1.0, 1, 600, 76800),
...                               ("before_augment", 2.0, 0, 600, 38400), ("before_augment", 2.0, 1, 600, 38400)]]
>>> row = [r for r in sample_rows({"results": {"runs": runs}}) if r["factor"] == 2][0]
>>> row["fresh_examples_vs_baseline"]
{'median': 0.55, 'min': 0.5, 'max': 0.6, 'values': [0.6, 0.5]}
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

import numpy as np


def modelled_steps(record: dict, ratio: float, batch_size: int) -> float:
    """A run's time to target in step times when reading a batch takes R steps: the slower of the two."""
    return max(record["steps"], record["fresh_examples"] / batch_size * ratio)


def spread(values: list) -> Optional[dict]:
    """Median, min and max of the values that exist; ``None`` if none do."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"median": float(np.median(present)), "min": float(min(present)), "max": float(max(present)),
            "values": [float(v) for v in present]}


def _group_key(config: dict) -> tuple:
    """A configuration without its seed, as a value: the seeds of one configuration share it."""
    return tuple(sorted((k, v) for k, v in config.items() if k != "seed"))


def _baseline_of(config: dict) -> dict:
    return {**config, "placement": "none", "factor": 1.0, "echo_shuffle": 0, "auto_echo": False, "max_factor": None}


def _same(config: dict, other: dict) -> bool:
    fields = set(config) | set(other)
    return all(config.get(f, False if f == "auto_echo" else None) == other.get(f, False if f == "auto_echo" else None)
               for f in fields)


def rows(document: dict, mode: str, fields: tuple) -> list[dict]:
    """One row per configuration of ``mode``: spreads of ``fields`` and of their same-seed ratios to the baseline."""
    records = [r for r in document["results"]["runs"] if r["config"]["mode"] == mode]
    groups: dict = {}
    for record in records:
        groups.setdefault(_group_key(record["config"]), []).append(record)
    out = []
    for key, members in groups.items():
        row = {**dict(key), "runs": len(members), "reached": sum(bool(r["reached"]) for r in members)}
        for field in fields:
            row[field] = spread([r.get(field) if r["reached"] else None for r in members])
            ratios = []
            for record in members:
                base = next((b for b in records if _same(b["config"], _baseline_of(record["config"]))
                             ), None)
                if base is not None and record["reached"] and base["reached"] and base.get(field) and record.get(field):
                    ratios.append(record[field] / base[field])
            row[f"{field}_vs_baseline"] = spread(ratios)
        out.append(row)
    return sorted(out, key=lambda r: (r["task"], r.get("ratio") or 0, r["placement"] != "none", r["placement"],
                                      bool(r.get("auto_echo")), r["factor"], r["echo_shuffle"]))


def sample_rows(document: dict) -> list[dict]:
    return rows(document, "sample", ("fresh_examples", "steps"))


def replay_rows(document: dict) -> list[dict]:
    return rows(document, "replay", ("seconds_in_steps", "fresh_examples", "steps", "held_factor"))


def wallclock_rows(document: dict) -> list[dict]:
    return rows(document, "wallclock", ("seconds", "seconds_in_steps", "fresh_examples", "steps", "held_factor"))


def _fmt(value: Optional[dict], spec: str, ratio: bool = False) -> str:
    if value is None:
        return "-"
    suffix = "x" if ratio else ""
    if len(value["values"]) == 1:
        return f"{format(value['median'], spec)}{suffix}"
    return f"{format(value['median'], spec)}{suffix} ({format(value['min'], spec)}-{format(value['max'], spec)})"


def _factor_label(row: dict) -> str:
    """The e column: the fixed factor, or the factor AutoEcho held."""
    return f"AutoEcho (held {_fmt(row.get('held_factor'), '.1f')})" if row.get("auto_echo") else f"{row['factor']:g}"


def _inverse(value: Optional[dict]) -> Optional[dict]:
    """Speedups from time ratios: 1 / ratio, with min and max swapped."""
    if value is None:
        return None
    return {"median": float(np.median([1 / v for v in value["values"]])), "min": 1 / value["max"], "max": 1 / value["min"],
            "values": [1 / v for v in value["values"]]}


def sample_table(document: dict) -> str:
    """Markdown: fresh examples and steps to target per configuration, medians (min-max) over seeds."""
    lines = ["| task | placement | e | echo shuffle | reached | fresh examples | fresh vs baseline (same seed) | steps | steps vs baseline |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sample_rows(document):
        if r.get("auto_echo"):
            continue
        lines.append(f"| {r['task']} | {r['placement']} | {r['factor']:g} | {r['echo_shuffle']} | {r['reached']}/{r['runs']} | "
                     f"{_fmt(r['fresh_examples'], ',.0f')} | {_fmt(r['fresh_examples_vs_baseline'], '.2f')} | "
                     f"{_fmt(r['steps'], ',.0f')} | {_fmt(r['steps_vs_baseline'], '.2f')} |")
    return "\n".join(lines)


def replay_table(document: dict) -> str:
    """Markdown: modelled-accelerator time to target per R and e, and the speedup over the same seed's baseline.

    R appears twice: as measured before the runs (the throttled pipeline's seconds per batch
    over 200 batches, over ``t_step``) and as the baseline's whole run gives it (its step
    times over its steps, :func:`runs_ratio`). They differ where the read is lumpy: the text pipeline throttles
    whole documents, so a short window can hold one long document or none.
    """
    measured = {}
    for m in document["results"].get("pipelines", []):
        measured.setdefault((m["of"]["task"], m["of"]["ratio"]), []).append(m["value"]["measured_ratio"])
    realised = runs_ratio(document, "replay")
    lines = ["| task | R | measured R | R over the baseline's run | e | echo shuffle | reached | time to target (step times) | "
             "speedup over baseline (same seed) | fresh examples | steps |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in replay_rows(document):
        factor = _factor_label(r)
        key = (r["task"], r["ratio"])
        ratios, over_run = measured.get(key), realised.get(key)
        lines.append(f"| {r['task']} | {r['ratio']:g} | {_fmt(spread(ratios), '.2f') if ratios else '-'} | "
                     f"{_fmt(spread(over_run), '.2f') if over_run else '-'} | {factor} | "
                     f"{r['echo_shuffle']} | {r['reached']}/{r['runs']} | {_fmt(r['seconds_in_steps'], ',.0f')} | "
                     f"{_fmt(_inverse(r['seconds_in_steps_vs_baseline']), '.2f', ratio=True)} | "
                     f"{_fmt(r['fresh_examples'], ',.0f')} | {_fmt(r['steps'], ',.0f')} |")
    return "\n".join(lines)


def runs_ratio(document: dict, mode: str) -> dict:
    """R over whole runs, per task and R: each seed's baseline time per step over the training step's own.

    ``mode`` is ``"replay"`` or ``"wallclock"``; they differ only in where the step's own
    time comes from. In the replay it is ``t_step``, the unit of ``seconds_in_steps``, so R
    is the baseline's step times over its steps. On this CPU it is the step under load,
    taken from the same seed's largest fixed e (above R, so the step and not the read sets
    its pace). Neither involves a calibration window.

    >>> def run(factor, seconds, steps):
    ...     config = {"mode": "wallclock", "task": "resnet", "placement": "none" if factor == 1 else "before_augment",
    ...               "factor": factor, "echo_shuffle": 0 if factor == 1 else 1024, "seed": 0, "ratio": 4.0}
    ...     return {"config": config, "seconds": seconds, "seconds_in_steps": seconds / 0.1, "steps": steps}
    >>> runs_ratio({"results": {"runs": [run(1.0, 200.0, 500), run(8.0, 70.0, 700)]}}, "wallclock")
    {('resnet', 4.0): [4.0]}
    """
    if mode not in ("replay", "wallclock"):
        raise ValueError(f"mode: expected 'replay' or 'wallclock', got {mode!r}")
    runs = [r for r in document["results"]["runs"] if r["config"]["mode"] == mode and r.get("seconds_in_steps")]
    ratios: dict = {}
    for base in runs:
        config = base["config"]
        if not _same(config, _baseline_of(config)):
            continue
        if mode == "replay":
            step_seconds, base_seconds = 1.0, base["seconds_in_steps"]
        else:
            echoed = [r for r in runs if _same(_baseline_of(r["config"]), config) and not r["config"].get("auto_echo")
                      and not _same(r["config"], config)]
            if not echoed:
                continue
            top = max(echoed, key=lambda r: r["config"]["factor"])
            step_seconds, base_seconds = top["seconds"] / top["steps"], base["seconds"]
        ratios.setdefault((config["task"], config["ratio"]), []).append(base_seconds / base["steps"] / step_seconds)
    return ratios


def wallclock_table(document: dict) -> str:
    """Markdown: real training on this CPU, time to target per R and e, and the speedup over the same seed's baseline.

    R appears twice: as calibrated before the runs (``rates`` in the results file) and over
    the runs (:func:`runs_ratio`).
    """
    measured = {(m["of"]["task"], m["of"]["ratio"]): m["value"] for m in document["results"].get("rates", [])}
    over_runs = runs_ratio(document, "wallclock")
    lines = ["| task | R | R under load | R over the runs | e | echo shuffle | reached | time to target (s) | "
             "(loaded step times) | speedup over baseline (same seed) | fresh examples | steps |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in wallclock_rows(document):
        factor = _factor_label(r)
        key = (r["task"], r["ratio"])
        rates, over_run = measured.get(key), over_runs.get(key)
        under_load = f"{rates['measured_ratio']:.2f}" if rates else "-"
        lines.append(f"| {r['task']} | {r['ratio']:g} | {under_load} | {_fmt(spread(over_run), '.2f') if over_run else '-'} | "
                     f"{factor} | {r['echo_shuffle']} | {r['reached']}/{r['runs']} | {_fmt(r['seconds'], ',.0f')} | "
                     f"{_fmt(r['seconds_in_steps'], ',.0f')} | {_fmt(_inverse(r['seconds_vs_baseline']), '.2f', ratio=True)} | "
                     f"{_fmt(r['fresh_examples'], ',.0f')} | {_fmt(r['steps'], ',.0f')} |")
    return "\n".join(lines)


def best_rows(document: dict, mode: str = "replay") -> list[dict]:
    """Per task and R (``mode`` is replay or wallclock): the best fixed e by median speedup, and AutoEcho against it, seed by seed."""
    rows_by_key: dict = {}
    for row in rows(document, mode, ("seconds_in_steps", "held_factor")):
        rows_by_key.setdefault((row["task"], row["ratio"]), []).append(row)
    runs = [r for r in document["results"]["runs"] if r["config"]["mode"] == mode and r.get("seconds")]
    out = []
    for (task, ratio), group in sorted(rows_by_key.items()):
        fixed = [r for r in group if not r.get("auto_echo") and r["seconds_in_steps_vs_baseline"] is not None]
        if not fixed:
            continue
        best = max(fixed, key=lambda r: _inverse(r["seconds_in_steps_vs_baseline"])["median"])
        auto = next((r for r in group if r.get("auto_echo")), None)
        # AutoEcho's time over the best fixed e's, each seed against itself, and its two
        # factors: time per step (what the controller's choices cost on the host) times
        # steps to target (what training on its factors needed, crossing noise included).
        pairs = _auto_echo_pairs(runs, task, ratio, best)
        versus = [pair["time"] for pair in pairs]
        per_step = [pair["time_per_step"] for pair in pairs]
        steps = [pair["steps"] for pair in pairs]
        out.append({"task": task, "ratio": ratio, "best_factor": best["factor"], "best_echo_shuffle": best["echo_shuffle"],
                    "best_placement": best["placement"], "best_speedup": _inverse(best["seconds_in_steps_vs_baseline"]),
                    "auto_speedup": _inverse(auto["seconds_in_steps_vs_baseline"]) if auto else None,
                    "auto_held_factor": auto.get("held_factor") if auto else None,
                    "auto_reached": auto["reached"] if auto else None, "auto_runs": auto["runs"] if auto else None,
                    "auto_time_vs_best": spread(versus), "auto_time_per_step_vs_best": spread(per_step),
                    "auto_steps_vs_best": spread(steps)})
    return out


def _auto_echo_pairs(runs: list, task: str, ratio: float, fixed: dict) -> list[dict]:
    """Each seed's AutoEcho run at ``task`` and ``ratio`` against the same seed's run of the ``fixed`` configuration.

    ``fixed`` names the configuration by its ``factor``, ``echo_shuffle`` and ``placement``;
    a seed without both runs is left out. Each pair holds the seed, both runs' steps, and
    AutoEcho's time to target, time per step and steps over the fixed run's.
    """
    pairs = []
    for record in runs:
        config = record["config"]
        if config["task"] != task or config["ratio"] != ratio or not config.get("auto_echo"):
            continue
        twin = next((r for r in runs if r["config"]["task"] == task and r["config"]["ratio"] == ratio
                     and not r["config"].get("auto_echo") and r["config"]["seed"] == config["seed"]
                     and r["config"]["factor"] == fixed["factor"] and r["config"]["echo_shuffle"] == fixed["echo_shuffle"]
                     and r["config"]["placement"] == fixed["placement"]), None)
        if twin is not None:
            pairs.append({"seed": config["seed"], "auto_steps": record["steps"], "fixed_steps": twin["steps"],
                          "time": record["seconds"] / twin["seconds"],
                          "time_per_step": (record["seconds"] / record["steps"]) / (twin["seconds"] / twin["steps"]),
                          "steps": record["steps"] / twin["steps"]})
    return sorted(pairs, key=lambda pair: pair["seed"])


def paired_table(document: dict, mode: str = "replay") -> str:
    """Markdown: AutoEcho against each fixed configuration of the same task and R, seed by seed, then the median.

    For a results file that times AutoEcho beside one fixed factor over many seeds (no
    baseline needed): every AutoEcho run with a same-seed run of that factor is a pair.
    """
    runs = [r for r in document["results"]["runs"] if r["config"]["mode"] == mode and r.get("seconds")]
    fixed_configs = sorted({(r["config"]["task"], r["config"]["ratio"], r["config"]["factor"], r["config"]["echo_shuffle"],
                             r["config"]["placement"]) for r in runs if not r["config"].get("auto_echo")})
    lines = ["| task | R | seed | fixed e (echo shuffle) | AutoEcho steps | fixed e's steps | AutoEcho time / fixed e's | "
             "= time per step / fixed e's | x steps / fixed e's |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for task, ratio, factor, echo_shuffle, placement in fixed_configs:
        pairs = _auto_echo_pairs(runs, task, ratio, {"factor": factor, "echo_shuffle": echo_shuffle,
                                                      "placement": placement})
        fixed = f"{factor:g} ({echo_shuffle})"
        for pair in pairs:
            lines.append(f"| {task} | {ratio:g} | {pair['seed']} | {fixed} | {pair['auto_steps']:,} | "
                         f"{pair['fixed_steps']:,} | {pair['time']:.2f} | {pair['time_per_step']:.2f} | "
                         f"{pair['steps']:.2f} |")
        if pairs:
            summary = [_fmt(spread([pair[key] for pair in pairs]), ".2f") for key in ("time", "time_per_step", "steps")]
            lines.append(f"| {task} | {ratio:g} | median of {len(pairs)} | {fixed} | | | {summary[0]} | {summary[1]} | "
                         f"{summary[2]} |")
    return "\n".join(lines)


def fixed_steps_table(document: dict) -> str:
    """Markdown: each fixed factor's steps to target seed by seed, and its steps over the lowest factor's.

    For a results file with sample runs of nearby factors over many seeds: how far apart
    two configurations that train almost alike land is the noise a comparison of steps
    to target carries on that task.

    >>> run = lambda factor, seed, steps: {"config": {"mode": "sample", "task": "t", "placement": "p", "echo_shuffle": 8,
    ...     "factor": factor, "seed": seed, "auto_echo": False}, "steps": steps, "reached": True}
    >>> print(fixed_steps_table({"results": {"runs": [run(2.0, 0, 100), run(2.5, 0, 120), run(2.0, 1, 100), run(2.5, 1, 90)]}}))
    | task | placement (echo shuffle) | seed | e = 2 | e = 2.5 |
    |---|---|---:|---:|---:|
    | t | p (8) | 0 | 100 | 120 |
    | t | p (8) | 1 | 100 | 90 |
    | t | p (8) | median over e = 2 | | 1.05 (0.90-1.20) |
    """
    runs = [r for r in document["results"]["runs"] if r["config"]["mode"] == "sample" and not r["config"].get("auto_echo")
            and r.get("reached")]
    groups = sorted({(r["config"]["task"], r["config"]["placement"], r["config"]["echo_shuffle"]) for r in runs})
    factors = sorted({r["config"]["factor"] for r in runs})
    lines = ["| task | placement (echo shuffle) | seed | " + " | ".join(f"e = {f:g}" for f in factors) + " |",
             "|---|---|---:|" + "---:|" * len(factors)]
    for task, placement, echo_shuffle in groups:
        steps = {(r["config"]["factor"], r["config"]["seed"]): r["steps"] for r in runs
                 if (r["config"]["task"], r["config"]["placement"], r["config"]["echo_shuffle"]) == (task, placement, echo_shuffle)}
        label = f"| {task} | {placement} ({echo_shuffle}) |"
        seeds = sorted({seed for _, seed in steps})
        for seed in seeds:
            lines.append(f"{label} {seed} | " + " | ".join(f"{steps[f, seed]:,}" if (f, seed) in steps else "-"
                                                            for f in factors) + " |")
        low = factors[0]
        ratios = [spread([steps[f, seed] / steps[low, seed] for seed in seeds if (f, seed) in steps and (low, seed) in steps])
                  for f in factors[1:]]
        lines.append(f"{label} median over e = {low:g} | | " + " | ".join(_fmt(r, ".2f") for r in ratios) + " |")
    return "\n".join(lines)


def best_table(document: dict, mode: str = "replay") -> str:
    """Markdown: per R, the best fixed e's speedup, AutoEcho's, and AutoEcho's time over the best's (same seed)."""
    lines = ["| task | R | best fixed e (echo shuffle) | its speedup | AutoEcho reached | AutoEcho speedup | "
             "e AutoEcho held | AutoEcho time / best fixed e's | = time per step / best's | x steps / best's |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in best_rows(document, mode):
        reached = "-" if r["auto_runs"] is None else f"{r['auto_reached']}/{r['auto_runs']}"
        lines.append(f"| {r['task']} | {r['ratio']:g} | {r['best_factor']:g} ({r['best_echo_shuffle']}) | "
                     f"{_fmt(r['best_speedup'], '.2f', ratio=True)} | {reached} | "
                     f"{_fmt(r['auto_speedup'], '.2f', ratio=True)} | "
                     f"{_fmt(r['auto_held_factor'], '.1f')} | {_fmt(r['auto_time_vs_best'], '.2f')} | "
                     f"{_fmt(r.get('auto_time_per_step_vs_best'), '.2f')} | {_fmt(r.get('auto_steps_vs_best'), '.2f')} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a time_to_target results JSON")
    args = parser.parse_args(argv)
    if not args.results.exists():
        parser.error(f"results: no such file: {args.results}")
    document = json.loads(args.results.read_text())
    print(sample_table(document))
    print()
    print(replay_table(document))
    print()
    print(best_table(document))
    print()
    print(wallclock_table(document))
    print()
    print(best_table(document, "wallclock"))


if __name__ == "__main__":
    main()
