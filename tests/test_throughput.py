"""The throughput benchmark end to end on tiny settings, and the baselines it compares with."""

import json

import pytest
import tensorflow as tf

from benchmarks import readme_tables, throughput


def test_throughput_benchmark_runs_end_to_end_and_fills_the_readme_table(tmp_path):
    config = throughput.ThroughputConfig(
        factors=(1, 1.5, 2), one_liner_factors=(1, 2), seconds=0.05, repeats=1,
        upstream_rate=2000, throttled_seconds=0.2, buffer_sizes=(0, 500), shape_factors=(2,),
    )
    throughput.run(config, tmp_path / "throughput.json")
    document = json.loads((tmp_path / "throughput.json").read_text())
    assert {"machine", "versions", "settings", "results", "command", "created"} <= set(document)
    settings, results = throughput.typed(document)
    assert settings == config
    Stage = throughput.Stage
    stages = [row.stage for row in results.echo_stage.rows]
    assert stages == [Stage("no echo"), Stage("echo", 1.0), Stage("echo", 1.5), Stage("echo", 2.0),
                      Stage("echo", 1.0, stats=True)] + [Stage(name, float(e)) for name in throughput.BASELINES
                                                         for e in (1, 2)]
    paired = results.echo_stage.paired_ratios
    assert [(p.of, p.over) for p in paired] == [(Stage("echo", 1.0), Stage("no echo")),
                                                (Stage("echo", 1.0, stats=True), Stage("no echo"))] + [
        (Stage("echo", 2.0), Stage(name, 2.0)) for name in throughput.BASELINES]
    assert all(r.min <= r.median <= r.max for r in paired)
    assert all(row.median > 0 for row in results.echo_stage.rows)
    assert [row.factor for row in results.throttled.rows] == [1, 1.5, 2]
    assert [row.buffer_size for row in results.memory] == [0, 500]
    assert set(results.shapes) == set(throughput.SHAPE_CASES)
    for measured in results.shapes.values():
        assert [row.stage for row in measured.rows] == [
            Stage("no echo"), Stage("consumer alone"), Stage("echo", 2.0), Stage("one-liner", 2.0)]
        assert [(p.of.name, p.over.name, p.of.factor) for p in measured.paired_ratios] == [
            ("echo", "one-liner", 2.0), ("zero-cost echo stage (bound)", "one-liner", 2.0)]

    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- table:throughput -->\n<!-- /table:throughput -->\nafter\n")
    assert readme_tables.update_readme(readme, tmp_path) == ["throughput"]
    text = readme.read_text()
    assert "| echo e=1.5 |" in text and "| echo e=2 / one-liner e=2 |" in text and text.endswith("<!-- /table:throughput -->\nafter\n")
    readme_tables.update_readme(readme, tmp_path)  # Twice: the table is replaced, not appended.
    assert readme.read_text() == text


@pytest.mark.parametrize("name", sorted(throughput.BASELINES))
def test_every_throughput_baseline_echoes_like_the_stage(name):
    # A baseline that dropped or reordered copies would be an unfair comparison.
    ds = tf.data.Dataset.range(70).map(lambda i: (i, -i))
    echoed = [(int(a), int(b)) for a, b in ds.apply(throughput.BASELINES[name](3))]
    assert echoed == [(i, -i) for i in range(70) for _ in range(3)]
