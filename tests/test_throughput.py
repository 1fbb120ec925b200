"""The throughput benchmark end to end on tiny settings, and the baselines it compares with."""

import json

import pytest
import tensorflow as tf

from benchmarks import readme_tables, throughput


def test_throughput_benchmark_runs_end_to_end_and_fills_the_readme_table(tmp_path):
    config = throughput.ThroughputConfig(
        factors=[1, 1.5, 2], one_liner_factors=[1, 2], seconds=0.05, repeats=1,
        upstream_rate=2000, throttled_seconds=0.2, buffer_sizes=[0, 500], shape_factors=[2],
    )
    throughput.run(config, tmp_path / "throughput.json")
    document = json.loads((tmp_path / "throughput.json").read_text())
    assert {"machine", "versions", "settings", "results", "command", "created"} <= set(document)
    results = document["results"]
    names = [row["name"] for row in results["echo_stage"]["rows"]]
    assert names == ["no echo", "echo e=1", "echo e=1.5", "echo e=2", "echo e=1 with stats"] + [
        f"{name} e={e}" for name in throughput.BASELINES for e in (1, 2)]
    paired = results["echo_stage"]["paired_ratios"]
    assert set(paired) == {"echo e=1 / no echo", "echo e=1 with stats / no echo"} | {
        f"echo / {name} at e=2" for name in throughput.BASELINES}
    assert all(r["min"] <= r["median"] <= r["max"] for r in paired.values())
    assert all(row["median"] > 0 for row in results["echo_stage"]["rows"])
    assert [row["factor"] for row in results["throttled"]["rows"]] == [1, 1.5, 2]
    assert [row["buffer_size"] for row in results["memory"]] == [0, 500]
    assert set(results["shapes"]) == set(throughput.SHAPE_CASES)
    for measured in results["shapes"].values():
        assert [row["name"] for row in measured["rows"]] == ["no echo", "consumer alone", "echo e=2", "one-liner e=2"]
        assert set(measured["paired_ratios"]) == {"echo / one-liner at e=2",
                                                  "zero-cost echo stage (bound) / one-liner at e=2"}

    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- table:throughput -->\n<!-- /table:throughput -->\nafter\n")
    assert readme_tables.update_readme(readme, tmp_path) == ["throughput"]
    text = readme.read_text()
    assert "| echo e=1.5 |" in text and text.endswith("<!-- /table:throughput -->\nafter\n")
    readme_tables.update_readme(readme, tmp_path)  # Twice: the table is replaced, not appended.
    assert readme.read_text() == text


@pytest.mark.parametrize("name", sorted(throughput.BASELINES))
def test_every_throughput_baseline_echoes_like_the_stage(name):
    # A baseline that dropped or reordered copies would be an unfair comparison.
    ds = tf.data.Dataset.range(70).map(lambda i: (i, -i))
    echoed = [(int(a), int(b)) for a, b in ds.apply(throughput.BASELINES[name](3))]
    assert echoed == [(i, -i) for i in range(70) for _ in range(3)]
