"""The plain JAX loop on an echoed grain pipeline with mp_prefetch workers (examples/grain_jax_loop.py)."""

import importlib.util
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None or importlib.util.find_spec("grain") is None,
    reason="jax and grain are not installed; pip install -e '.[jax,grain]' runs this test")


@pytest.mark.slow  # About 22 s (grain's worker processes, 600 paced steps): run with python -m pytest -m slow.
@pytest.mark.timing
def test_the_grain_jax_loop_holds_a_factor_for_its_input_and_counts_what_it_trained_on():
    # Its own process: grain's workers are started from a __main__ that parses absl's flags.
    done = subprocess.run([sys.executable, "-m", "examples.grain_jax_loop", "--steps", "600", "--workers", "2",
                           "--input-seconds", "0.08", "--step-seconds", "0.01"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    # Two workers making a batch every 80 ms each against a step of 10-15 ms: R is 3-6 as
    # measured (the hand-over from the workers costs time of its own).
    assert summary["held_factor"] is not None and 2.0 <= summary["held_factor"] <= 8.0, summary
    assert summary["consumed_examples"] == 600 * 32
    # Echo and batching run two batches ahead of the step (and one being made).
    assert 0 <= summary["emitted_examples"] - summary["consumed_examples"] <= 3 * 32 + 4 * 32
    assert summary["fresh_examples"] * 2 <= summary["emitted_examples"]
    assert summary["last_loss"] < summary["first_loss"]
