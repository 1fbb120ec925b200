"""Shared test set-up: quiet TensorFlow, and a private cache for embedded data."""

import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests (and the README examples they run) generate small embedded data sets; keep them
# out of the user's cache. A cache set explicitly in the environment is respected.
os.environ.setdefault("ECHOING_CACHE_DIR", tempfile.mkdtemp(prefix="echoing-test-cache-"))
