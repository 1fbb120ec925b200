"""The watchdogs in-process: a stall is told once, a loop that keeps taking batches never is, and bad settings are refused.

The tests rest on wide margins only (a 30 s timeout never reached by a loop that beats,
a 0.2 s one that must fire within a minute); the end-to-end cases, a real worker and a
real dispatcher SIGKILLed, are in ``tests/test_service_processes.py``.
"""

import threading

import pytest

from echoing.service import watchdog as watchdogs


def test_a_stalled_input_is_told_once_with_the_batches_taken_and_what_to_do():
    told, stalled = [], threading.Event()

    def two_then_stall():
        yield from ("a", "b")
        assert stalled.wait(60), "the watchdog never fired"

    def on_timeout(message):
        told.append(message)
        stalled.set()

    with watchdogs.StallWatchdog(timeout_seconds=0.2, poll_seconds=0.02, on_timeout=on_timeout) as watchdog:
        assert list(watchdog.watch(two_then_stall())) == ["a", "b"]
    assert len(told) == 1 and watchdog.beats == 2
    assert "no batch for 0.2 s (after 2 batches)" in told[0]
    assert f"exit code {watchdogs.EXIT_CODE}" in told[0] and "restart it from its checkpoint" in told[0]


def test_a_loop_that_keeps_taking_batches_is_never_stopped():
    told = []
    with watchdogs.StallWatchdog(timeout_seconds=30, poll_seconds=0.01, on_timeout=told.append) as watchdog:
        for _ in range(20):
            watchdog.beat()
            threading.Event().wait(0.01)
    assert told == [] and watchdog.beats == 20


def test_the_keras_callback_beats_on_every_batch():
    import keras
    import numpy as np

    watchdog = watchdogs.StallWatchdog(timeout_seconds=600)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.zeros((12, 2), "float32"), np.zeros((12, 1), "float32")
    model.fit(x, y, batch_size=4, epochs=1, validation_data=(x, y), verbose=0, callbacks=[watchdog.keras_callback()])
    assert watchdog.beats == 3 + 3 + 1  # Three training batches, three validation batches, the epoch's end.


def test_a_watchdog_restarts_with_a_fresh_wait():
    told = []
    watchdog = watchdogs.StallWatchdog(timeout_seconds=30, poll_seconds=0.01, on_timeout=told.append)
    for _ in range(2):
        watchdog.start()
        watchdog.beat()
        watchdog.stop()
    assert told == [] and watchdog.beats == 2


def test_an_unreachable_dispatcher_is_told_after_its_timeout():
    told, done = [], threading.Event()

    def on_timeout(message):
        told.append(message)
        done.set()

    # Port 1 on loopback: nothing listens there, so every probe is refused at once.
    with watchdogs.DispatcherWatchdog("grpc://localhost:1", timeout_seconds=0.2, poll_seconds=0.02,
                                      on_timeout=on_timeout):
        assert done.wait(60), "the watchdog never fired"
    assert told and "grpc://localhost:1 has not answered for 0.2 s" in told[0]


@pytest.mark.parametrize("make, error, message", [
    (lambda: watchdogs.StallWatchdog(timeout_seconds=0), ValueError, r"timeout_seconds: .* > 0, got 0"),
    (lambda: watchdogs.StallWatchdog(timeout_seconds="60"), TypeError, r"timeout_seconds: .*got str: '60'"),
    (lambda: watchdogs.StallWatchdog(poll_seconds=float("nan")), ValueError, r"poll_seconds: .*got nan"),
    (lambda: watchdogs.StallWatchdog(on_timeout="exit"), TypeError, r"on_timeout: .*got 'exit'"),
    (lambda: watchdogs.DispatcherWatchdog("localhost"), ValueError, r"target: .*got 'localhost'"),
    (lambda: watchdogs.DispatcherWatchdog("grpc://localhost:x"), ValueError, r"target: .*got 'grpc://localhost:x'"),
    (lambda: watchdogs.DispatcherWatchdog("grpc://localhost:5050", timeout_seconds=-1), ValueError,
     r"timeout_seconds: .*got -1"),
])
def test_bad_settings_are_refused_naming_them(make, error, message):
    with pytest.raises(error, match=message):
        make()
