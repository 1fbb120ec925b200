"""Kill and resume: examples/resume_training.py killed with SIGKILL mid-run trains as if it never was."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
STEPS, EVERY = 40, 5


def command(directory, wait_after_step=0):
    return [sys.executable, "-m", "examples.resume_training", "--dir", str(directory), "--steps", str(STEPS),
            "--every", str(EVERY), "--wait-after-step", str(wait_after_step)]


def records(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def environment():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def test_a_job_killed_with_sigkill_resumes_on_exactly_the_batches_of_an_uninterrupted_run(tmp_path, run_until_waiting):
    uninterrupted = records(subprocess.run(command(tmp_path / "a"), cwd=ROOT, env=environment(), capture_output=True,
                                           text=True, timeout=300, check=True).stdout)

    # Killed after step 23, three steps past its last checkpoint (20): the job waits there
    # for the kill, so where it stops does not depend on how fast the machine runs.
    first = run_until_waiting(command(tmp_path / "b", wait_after_step=23), cwd=ROOT, env=environment())
    assert {"waiting": 23} in first

    second = records(subprocess.run(command(tmp_path / "b"), cwd=ROOT, env=environment(), capture_output=True,
                                    text=True, timeout=300, check=True).stdout)
    restored_at = second[0]["step"]
    assert "restored" in second[0] and restored_at == 20

    # The batches training saw: the first run's up to the checkpoint, then the second run's.
    spliced = [r["ids"] for r in first if "ids" in r and r["step"] <= restored_at]
    spliced += [r["ids"] for r in second if "ids" in r]
    assert spliced == [r["ids"] for r in uninterrupted if "ids" in r]
    # Steps the first run took after its last checkpoint were trained again, on the same batches.
    redone = [r for r in first if "ids" in r and r["step"] > restored_at]
    assert [r["step"] for r in redone] == [21, 22, 23]
    assert all(r["ids"] == uninterrupted[r["step"] - 1]["ids"] for r in redone)

    done, expected = second[-1], uninterrupted[-1]
    assert (done["fresh"], done["emitted"]) == (expected["fresh"], expected["emitted"])
    for got, want in zip(done["weights"], expected["weights"]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
