"""Stop a trainer whose tf.data service dispatcher is gone, instead of waiting for it forever.

A tf.data service client whose dispatcher dies and never comes back blocks in its next
read for good (``tests/test_service_processes.py`` shows it: the read after a SIGKILL of
the dispatcher never returns). The block is inside TensorFlow, where no Python exception
reaches. :class:`DispatcherWatchdog` probes the dispatcher's port from a thread of its
own; when it has not answered for ``timeout_seconds``, it says so on stderr and ends
the process with exit code :data:`EXIT_CODE` (75, "try again later"), so that a cluster
manager restarts the trainer from its checkpoint. A dispatcher restarted within the
timeout (with its ``--work-dir``) is simply found again.

>>> import tensorflow as tf
>>> dispatcher = tf.data.experimental.service.DispatchServer()
>>> with DispatcherWatchdog(dispatcher.target, timeout_seconds=30) as watchdog:
...     watchdog.reachable()
True
>>> dispatcher.stop()
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Callable, Optional

from echoing._checks import check_number

# sysexits.h's EX_TEMPFAIL: a temporary failure, worth a restart.
EXIT_CODE = 75


def _exit(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    os._exit(EXIT_CODE)  # The main thread is blocked inside TensorFlow: nothing else ends it.


class DispatcherWatchdog:
    """Probes a dispatcher's port; after ``timeout_seconds`` without an answer, ends the process.

    Args:
      target: the dispatcher's address, ``"grpc://host:port"`` (or ``"host:port"``).
      timeout_seconds: how long the dispatcher may be unreachable (> 0). Longer than a
        restart of it takes.
      poll_seconds: how often to probe (> 0).
      on_timeout: called with the message instead of ending the process (for tests, or a
        loop that can stop itself).

    Use it as a context manager around training, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, target: str, timeout_seconds: float = 60.0, poll_seconds: float = 1.0,
                 on_timeout: Optional[Callable[[str], None]] = None) -> None:
        if not isinstance(target, str) or ":" not in target:
            raise ValueError(f"target: expected the dispatcher's address, 'grpc://host:port', got {target!r}")
        self.target = target
        address = target.split("://", 1)[-1]
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"target: expected a port after the last ':', got {target!r}")
        self._address = (host or "localhost", int(port))
        self.timeout_seconds = check_number("timeout_seconds", timeout_seconds, low=0, low_open=True)
        self.poll_seconds = check_number("poll_seconds", poll_seconds, low=0, low_open=True)
        self.on_timeout = on_timeout or _exit
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def reachable(self) -> bool:
        """Whether the dispatcher's port accepts a connection now."""
        try:
            with socket.create_connection(self._address, timeout=self.poll_seconds):
                return True
        except OSError:
            return False

    def start(self) -> "DispatcherWatchdog":
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="echoing-dispatcher-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "DispatcherWatchdog":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _watch(self) -> None:
        last_seen = time.monotonic()
        while not self._stop.wait(self.poll_seconds):
            if self.reachable():
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen > self.timeout_seconds:
                self.on_timeout(
                    f"echoing.service: the tf.data service dispatcher at {self.target} has not answered for "
                    f"{self.timeout_seconds:g} s; stopping this trainer (exit code {EXIT_CODE}) rather than wait for "
                    "it forever. Restart the dispatcher (with its --work-dir) and the trainer from its checkpoint.")
                return
