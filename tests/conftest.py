"""Shared test set-up: quiet TensorFlow, and a private cache for embedded data."""

import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests (and the README examples they run) generate small embedded data sets; keep them
# out of the user's cache. A cache set explicitly in the environment is respected.
os.environ.setdefault("ECHOING_CACHE_DIR", tempfile.mkdtemp(prefix="echoing-test-cache-"))

import pytest

# Seconds before a test fails as a hang, by its marks (the default, 300 s, is setup.cfg's
# --timeout). A test's own @pytest.mark.timeout wins.
TIMEOUTS = {"slow": 3600, "timing": 900}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        for mark, seconds in TIMEOUTS.items():
            if item.get_closest_marker(mark) is not None:
                item.add_marker(pytest.mark.timeout(seconds))
                break
