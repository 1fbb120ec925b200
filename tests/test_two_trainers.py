"""Two trainer processes in step (MultiWorkerMirroredStrategy on loopback), each echoing its own input.

``examples/two_trainers.py`` is the trainer; here two run side by side, one reading twice
as slowly as the other, each with its own EchoController given its own fresh count and
its own wait for input (the time its loop spent in ``next``).
"""

import collections
import json
import os
import signal
import socket
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def run_trainers(read_ratios, steps, timeout=300, extra=()):
    hosts = ",".join(f"localhost:{port}" for port in free_ports(len(read_ratios)))
    processes = []
    try:
        for index, ratio in enumerate(read_ratios):
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "examples.two_trainers", "--hosts", hosts, "--index", str(index),
                 "--read-ratio", str(ratio), "--steps", str(steps), *extra],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=timeout) for p in processes]
    finally:
        for p in processes:  # Every process stopped, by its id, even when the test fails.
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    for p, (out, err) in zip(processes, outputs):
        assert p.returncode == 0, err[-3000:]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


# 31-93 s (1,000 steps in step, at least 20 ms each, and the two processes' start): slow,
# so the timing step stays within 5 minutes; run with python -m pytest -m slow.
@pytest.mark.slow
@pytest.mark.timing
def test_two_trainers_in_step_each_echo_their_own_input_and_the_counts_are_exact():
    check_trainers(*run_trainers([2.0, 4.0], steps=1000))


@pytest.mark.slow  # About 90 s: run with python -m pytest -m slow.
@pytest.mark.timing
def test_two_trainers_reading_through_tf_data_service_worker_processes():
    dispatcher = subprocess.Popen([sys.executable, "-m", "echoing.service", "dispatcher", "--port", "0"],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    processes = [dispatcher]
    try:
        target = dispatcher.stdout.readline().split()[1]
        for _ in range(1):  # One worker: each trainer's job reads at its own rate there.
            processes.append(subprocess.Popen([sys.executable, "-m", "echoing.service", "worker", "--dispatcher",
                                               target.split("://")[1], "--port", "0"], cwd=ROOT,
                                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
            assert processes[-1].stdout.readline().startswith("worker ")
        check_trainers(*run_trainers([2.0, 4.0], steps=1500, extra=("--service", target)))
    finally:
        for p in processes:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait()


def check_trainers(fast, slow):
    batch = 64
    for trainer in (fast, slow):
        ids = trainer["trained_ids"]
        assert len(ids) == trainer["steps"] * batch
        # Each trainer reads its own shard: id % 2 is its index.
        assert {i % 2 for i in ids} == {trainer["index"]}
        # The echo stage's count is exact: every id trained on was counted once, and the
        # count runs ahead only by what sits in the buffers (a few batches of copies).
        distinct = len(set(ids))
        assert distinct <= trainer["fresh"] <= distinct + 16 * batch
        # No example arrives more often than the largest factor allows.
        assert max(collections.Counter(ids).values()) <= 8
        assert trainer["emitted"] >= len(ids)
    assert not set(fast["trained_ids"]) & set(slow["trained_ids"])
    # The step's own rate, measured by each controller's opening (the input outrun), is
    # the same step; R of each input is that rate over its batches per second.
    own_rate = fast["own_rate"]
    ratio = {t["index"]: own_rate * t["read_ratio"] * 0.02 for t in (fast, slow)}
    # The slower reader echoes more, each near its own R.
    assert slow["second_half_mean_factor"] > fast["second_half_mean_factor"]
    for trainer in (fast, slow):
        held = trainer["second_half_mean_factor"] / ratio[trainer["index"]]
        assert 0.75 <= held <= 1.8, (trainer["index"], trainer["second_half_mean_factor"], ratio, trainer["decisions"])
    # One slow reader does not hold the step back: within 15% of the step's own rate.
    assert slow["second_half_step_rate"] >= 0.85 * own_rate, (slow["second_half_step_rate"], own_rate)


def test_the_trainer_names_a_bad_argument():
    result = subprocess.run([sys.executable, "-m", "examples.two_trainers", "--hosts", "localhost", "--index", "0",
                             "--read-ratio", "2"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--hosts" in result.stderr and "'localhost'" in result.stderr
    result = subprocess.run([sys.executable, "-m", "examples.two_trainers", "--hosts", "localhost:1,localhost:2",
                             "--index", "2", "--read-ratio", "2"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--index" in result.stderr
