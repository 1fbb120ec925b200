"""Shared test set-up: quiet TensorFlow, a private cache for embedded data, a timeout on every test, and a job killed where it waits."""

import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests (and the README examples they run) generate small embedded data sets; keep them
# out of the user's cache. A cache set explicitly in the environment is respected.
os.environ.setdefault("ECHOING_CACHE_DIR", tempfile.mkdtemp(prefix="echoing-test-cache-"))

# Seconds before a test fails as a hang, by its marks (the default, 300 s, is setup.cfg's
# --timeout). A test's own @pytest.mark.timeout wins.
TIMEOUTS = {"slow": 3600, "timing": 900}


# The default run hands whole files to two processes (setup.cfg: -n 2 --dist loadfile), in
# the order collected: the longest files go first, so that neither process is left with
# one at the end while the other waits (their times from `python -m pytest --durations=0`).
LONGEST_FIRST = ["test_time_to_target.py", "test_backends.py", "test_pipelines.py", "test_docstrings.py",
                 "test_checkpoint.py", "test_critical_batch.py", "test_demo.py", "test_service.py",
                 "test_noise_scale.py", "test_echo.py", "test_resume.py", "test_grain.py"]


def pytest_collection_modifyitems(config, items):
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # Stable: each file keeps its own order.
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        for mark, seconds in TIMEOUTS.items():
            if item.get_closest_marker(mark) is not None:
                item.add_marker(pytest.mark.timeout(seconds))
                break


@pytest.fixture
def run_until_waiting():
    """Runs a job that prints ``{"waiting": step}`` and waits there (``examples.resume_training --wait-after-step``),
    SIGKILLs its process group once it waits, and returns the JSON records it printed.

    Where the job stops is its own choice, not a race against its sleeps, so the test
    passes on a busy machine; the deadline only bounds a hang.
    """
    def run(command, deadline_seconds=240, **popen):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "stdout")
            # The job writes through its own descriptor and this process reads through
            # another: one shared descriptor shares its offset, so a seek(0) to read moved
            # where the job wrote next, and a CI run read step 12's record over steps 1 and 2.
            with open(path, "w") as out:
                job = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, start_new_session=True, **popen)
            try:
                deadline = time.monotonic() + deadline_seconds
                while time.monotonic() < deadline and job.poll() is None:
                    with open(path) as printed:
                        if '"waiting"' in printed.read():
                            break
                    time.sleep(0.1)
            finally:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(timeout=60)
            with open(path) as printed:
                records = [json.loads(line) for line in printed.read().splitlines() if line.startswith("{")]
        assert job.returncode == -signal.SIGKILL and any("waiting" in r for r in records), "the job was not killed mid-run"
        return records

    return run
