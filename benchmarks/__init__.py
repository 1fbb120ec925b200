"""Benchmarks of data echoing: throughput, and (later) time to target."""

import os

# TensorFlow's C++ start-up chatter (CUDA probes, CPU feature notes) buries the tables
# these benchmarks print; a user who wants it sets TF_CPP_MIN_LOG_LEVEL themselves.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
