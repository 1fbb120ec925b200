"""The examples in docstrings run and print what they say.

The modules are found, not listed: every module of ``echoing`` and ``pipelines`` must
carry at least one example, so a new module's examples are tested from its first commit.
Benchmark modules are included where they have examples (commands need not).
"""

import doctest
import importlib
import pkgutil

import pytest

import benchmarks
import echoing
import pipelines


def modules_of(package) -> list[str]:
    names = [package.__name__]
    names += [m.name for m in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")]
    return sorted(name for name in names if not name.endswith(".__main__"))


LIBRARY_MODULES = modules_of(echoing) + modules_of(pipelines)
BENCHMARK_MODULES = modules_of(benchmarks)


def test_discovery_finds_the_modules():
    assert {"echoing.echo", "echoing.auto_echo", "pipelines.image", "pipelines.staged"} <= set(LIBRARY_MODULES)
    assert "benchmarks.auto_echo" in BENCHMARK_MODULES


def run_examples(name):
    module = importlib.import_module(name)
    return doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)


@pytest.mark.parametrize("name", LIBRARY_MODULES)
def test_every_library_module_has_examples_and_they_run(name):
    result = run_examples(name)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0


@pytest.mark.parametrize("name", BENCHMARK_MODULES)
def test_benchmark_examples_run(name):
    assert run_examples(name).failed == 0
