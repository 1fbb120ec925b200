"""Shared test set-up: quiet TensorFlow, and the `slow` marker's default."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
