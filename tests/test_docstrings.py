"""The examples in docstrings run and print what they say."""

import doctest
import importlib

import pytest

MODULES = [
    "echoing", "echoing.echo", "echoing.stats", "echoing.measure",
    "echoing.controller", "echoing.auto_echo", "echoing.recommend",
    "echoing.noise_scale", "echoing.gradient_norms", "echoing.noise_scale_callback",
    "pipelines.slow_storage", "pipelines.staged", "pipelines.cache", "pipelines.shapes_data",
    "pipelines.stdlib_text", "pipelines.image", "pipelines.text", "benchmarks.models", "benchmarks.critical_batch", "benchmarks.auto_echo",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
