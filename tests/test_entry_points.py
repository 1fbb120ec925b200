"""The benchmark commands: an index, --help everywhere, quiet start-up, outputs git ignores."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as index
from benchmarks import time_to_target
from benchmarks.lib import results_io

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [name for name, _ in index.entry_points()]


def test_the_index_finds_every_command_and_no_helper():
    assert {"demo", "throughput", "time_to_target", "controller_sweep", "critical_batch", "shapes_baselines",
            "lib.plots", "readme_tables", "xla_check"} <= set(COMMANDS)
    assert not {"models", "results_io", "tasks", "training", "replay"} & set(COMMANDS)
    assert all(line for _, line in index.entry_points()), "every command needs a one-line docstring"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_takes_help(name, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out


def run_quietly(*args, **env):
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env)
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)


def test_python_m_benchmarks_lists_the_commands_without_tensorflow_chatter():
    result = run_quietly("benchmarks")
    assert result.returncode == 0, result.stderr
    for name in COMMANDS:
        assert f"  {name} " in result.stdout
    assert "cuda" not in result.stderr.lower() and "absl" not in result.stderr, result.stderr


def test_a_user_who_sets_the_log_level_keeps_tensorflows_lines():
    # With the variable set, the package neither imports TensorFlow aside nor touches stderr.
    probe = "import sys, benchmarks; print('tensorflow' in sys.modules)"
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    for level, imported_aside in ((None, "True"), ("0", "False")):
        env = dict(environment, **({} if level is None else {"TF_CPP_MIN_LOG_LEVEL": level}))
        result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert result.stdout.strip() == imported_aside, (level, result.stdout, result.stderr)


def test_runs_go_to_a_git_ignored_folder_unless_told_otherwise():
    args, _ = time_to_target.parse_arguments([])
    assert args.output_dir == results_io.RUNS_DIR == Path("runs")
    assert "runs/" in (ROOT / ".gitignore").read_text().splitlines()
    args, _ = time_to_target.parse_arguments(["--output-dir", "benchmarks/results"])
    assert args.output_dir == Path("benchmarks/results")
