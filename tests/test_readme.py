"""The README's example runs, and its tables are generated from results files."""

import json
import re
from pathlib import Path

from benchmarks import readme_tables, throughput

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    fresh, emitted = capsys.readouterr().out.split()[:2]
    assert int(fresh) == 10 and 20 <= int(emitted) <= 30


def test_readme_gives_the_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[test,bench]" && python -m benchmarks.time_to_target --quick' in text
    assert "python -m pytest" in text
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_throughput_benchmark_runs_end_to_end_and_fills_the_readme_table(tmp_path):
    config = throughput.ThroughputConfig(
        factors=[1, 1.5, 2], one_liner_factors=[1, 2], seconds=0.05, repeats=1,
        upstream_rate=2000, throttled_seconds=0.2, buffer_sizes=[0, 500],
    )
    throughput.run(config, tmp_path / "throughput.json")
    document = json.loads((tmp_path / "throughput.json").read_text())
    assert {"machine", "versions", "settings", "results", "command", "created"} <= set(document)
    results = document["results"]
    names = [row["name"] for row in results["echo_stage"]["rows"]]
    assert names == ["no echo", "echo e=1", "echo e=1.5", "echo e=2", "one-liner e=1", "one-liner e=2"]
    assert all(row["median"] > 0 for row in results["echo_stage"]["rows"])
    assert [row["factor"] for row in results["throttled"]["rows"]] == [1, 1.5, 2]
    assert [row["buffer_size"] for row in results["memory"]] == [0, 500]

    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- table:throughput -->\n<!-- /table:throughput -->\nafter\n")
    assert readme_tables.update_readme(readme, tmp_path) == ["throughput"]
    text = readme.read_text()
    assert "| echo e=1.5 |" in text and text.endswith("<!-- /table:throughput -->\nafter\n")
    readme_tables.update_readme(readme, tmp_path)  # Twice: the table is replaced, not appended.
    assert readme.read_text() == text
