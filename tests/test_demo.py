"""The main job on tiny settings: it trains, replays, reports and draws, and refuses bad options."""

import json

import pytest

from benchmarks import demo, results_io

@pytest.fixture(scope="module")
def document(tmp_path_factory):
    """``python -m benchmarks.demo --quick``, run as a user would, into a temporary folder."""
    directory = tmp_path_factory.mktemp("demo")
    lines = []
    original = demo.run
    demo.run = lambda config, **kw: original(config, log=lines.append, **kw)  # Keep its progress lines.
    try:
        demo.main(["--quick", "--output-dir", str(directory)])
    finally:
        demo.run = original
    return results_io.read_results(directory / "demo_quick.json"), directory, lines


def test_every_run_reaches_the_tiny_target_and_is_timed(document):
    document, *_ = document
    runs = document["results"]["runs"]
    assert list(runs) == ["baseline", "AutoEcho", "e=2"]
    for record in runs.values():
        assert record["reached"] and record["steps"] == 2  # Two evaluations in a row; the first counts.
        assert record["seconds"] >= 2 * 0.01
    assert runs["e=2"]["fresh_examples"] == runs["baseline"]["fresh_examples"] / 2
    assert document["results"]["auto_echo"]["decisions"]


def test_table_and_plot(document):
    document, directory, lines = document
    table = demo.table(document)
    assert table.splitlines()[2].startswith("| baseline | 1 | 2 | 32 | 1.00 |")
    assert "| e=2 | 2 | 2 | 16 | 0.50 |" in table
    assert "measured" in table and "one seed" in table
    results = document["results"]
    assert 0 < results["data_seconds"] < results["job_seconds"]
    assert f"The job took {results['job_seconds'] / 60:.1f} minutes" in table
    assert (directory / "demo_quick.png").read_bytes()[:4] == b"\x89PNG"
    assert any("measured R" in line for line in lines)


def test_command_line_refuses_a_factor_below_one(capsys):
    with pytest.raises(SystemExit):
        demo.main(["--fixed-factor", "0.5"])
    assert "--fixed-factor" in capsys.readouterr().err


def test_the_fixed_factor_runs_by_default_and_can_be_left_out():
    assert demo.parse_config([])[0].fixed_factor == 4.0  # e = R, the best fixed e at R=4 in the full runs.
    assert demo.parse_config(["--quick"])[0] == demo.QUICK
    assert demo.parse_config(["--quick", "--fixed-factor", "3"])[0].fixed_factor == 3.0
    assert demo.parse_config(["--fixed-factor", "6"])[0].fixed_factor == 6.0
    assert demo.parse_config(["--no-fixed-factor"])[0].fixed_factor is None


def test_a_fixed_factor_and_none_together_are_refused(capsys):
    with pytest.raises(SystemExit):
        demo.parse_config(["--fixed-factor", "6", "--no-fixed-factor"])
    assert "--no-fixed-factor" in capsys.readouterr().err


def test_the_verdict_says_what_it_can_compare():
    auto = {"seconds": 10.0, "steps": 100}
    alone = {"results": {"runs": {"AutoEcho": auto, "baseline": {"seconds": None}}}}
    assert "nothing to compare" in demo.verdict(alone)
    without_fixed = {"results": {"runs": {"AutoEcho": auto, "baseline": {"seconds": 40.0, "steps": 80}}}}
    assert demo.verdict(without_fixed) == "AutoEcho took 0.25x the baseline time to target."
    missed = {"results": {"runs": {"AutoEcho": {"seconds": None}}}}
    assert demo.verdict(missed) == "AutoEcho did not reach the target within its replay."
