"""The examples in docstrings run and print what they say.

The modules are found, not listed: every module of ``echoing`` and ``pipelines`` must
carry at least one example, so a new module's examples are tested from its first commit.
The benchmarks' shared parts (every module that is not a command) must carry one too;
commands' examples run where they have them.
"""

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import benchmarks
import echoing
import pipelines


def modules_of(package) -> list[str]:
    names = [package.__name__]
    names += [m.name for m in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")]
    return sorted(name for name in names if not name.endswith(".__main__"))


def is_command(name: str) -> bool:
    """A benchmark module that runs as ``python -m``; the others are the benchmarks' shared parts."""
    source = importlib.util.find_spec(name).origin
    return 'if __name__ == "__main__":' in Path(source).read_text()


LIBRARY_MODULES = modules_of(echoing) + modules_of(pipelines)
BENCHMARK_MODULES = modules_of(benchmarks)
# The shared parts are libraries too: each carries an example. The package's __init__ only
# names it.
BENCHMARK_PARTS = [name for name in BENCHMARK_MODULES if name not in ("benchmarks", "benchmarks.lib") and not is_command(name)]
BENCHMARK_COMMANDS = [name for name in BENCHMARK_MODULES if name not in ("benchmarks", "benchmarks.lib") and is_command(name)]


def test_discovery_finds_the_modules():
    assert {"echoing.echo", "echoing.auto_echo", "pipelines.image", "pipelines.staged"} <= set(LIBRARY_MODULES)
    assert "benchmarks.lib.step_times" in BENCHMARK_MODULES


# Modules of an optional extra: their examples run where the extra is installed.
EXTRAS = {"echoing.grain": "grain", "echoing.torch": "torch", "pipelines.torch_images": "torch"}


def run_examples(name):
    if name in EXTRAS and importlib.util.find_spec(EXTRAS[name]) is None:
        pytest.skip(f"{EXTRAS[name]} is not installed; pip install -e '.[{EXTRAS[name]}]' runs {name}'s examples")
    module = importlib.import_module(name)
    return doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)


# Examples that read the clock: a sleep-paced loop and what a controller decided on it,
# and a read throttled to a rate.
TIMED_EXAMPLES = {"echoing.auto_echo", "pipelines.slow_storage"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.timing) if name in TIMED_EXAMPLES else name
                                  for name in LIBRARY_MODULES])
def test_every_library_module_has_examples_and_they_run(name):
    result = run_examples(name)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0


@pytest.mark.parametrize("name", BENCHMARK_PARTS)
def test_every_shared_benchmark_part_has_examples_and_they_run(name):
    result = run_examples(name)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0


@pytest.mark.parametrize("name", BENCHMARK_COMMANDS)
def test_benchmark_commands_examples_run(name):
    assert run_examples(name).failed == 0


def test_the_benchmarks_split_into_shared_parts_and_commands():
    assert {"benchmarks.lib.replay", "benchmarks.lib.results_io", "benchmarks.lib.tasks", "benchmarks.lib.training"} <= set(BENCHMARK_PARTS)
    assert {"benchmarks.demo", "benchmarks.time_to_target", "benchmarks.controller_sweep"} <= set(BENCHMARK_COMMANDS)
