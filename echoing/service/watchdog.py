"""Stop a trainer whose input has stalled, instead of letting it wait forever.

Two ways a tf.data service trainer blocks for good, inside TensorFlow where no Python
exception reaches (``tests/test_service_processes.py`` shows both):

* its dispatcher dies and never comes back: the next read never returns;
* a worker is lost during a *finite* ``distributed_epoch`` pass: the pass never ends, the
  trainer waits for the lost worker's part.

A watchdog runs in a thread of its own. :class:`DispatcherWatchdog` probes the
dispatcher's port; :class:`StallWatchdog` is told of every batch training takes (a
heartbeat) and knows nothing of the service, so it covers any input that stops
delivering. When the one has not answered, or the other has not heard a beat, for
``timeout_seconds``, the watchdog says so on stderr and ends the process with exit code
:data:`EXIT_CODE` (75, "try again later"), so that a cluster manager restarts the
trainer from its checkpoint.

>>> import tensorflow as tf
>>> dispatcher = tf.data.experimental.service.DispatchServer()
>>> with DispatcherWatchdog(dispatcher.target, timeout_seconds=30) as watchdog:
...     watchdog.reachable()
True
>>> dispatcher.stop()
>>> with StallWatchdog(timeout_seconds=600) as watchdog:
...     [int(x) for x in watchdog.watch(tf.data.Dataset.range(3))]
[0, 1, 2]
"""

from __future__ import annotations

import abc
import os
import socket
import sys
import threading
import time
from typing import Callable, Iterable, Iterator, Optional, TypeVar

from echoing._checks import check_number

# sysexits.h's EX_TEMPFAIL: a temporary failure, worth a restart.
EXIT_CODE = 75

T = TypeVar("T")


def _exit(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    os._exit(EXIT_CODE)  # The main thread is blocked inside TensorFlow: nothing else ends it.


class _Watchdog(abc.ABC):
    """A thread that asks :meth:`_overdue` every ``poll_seconds`` and calls ``on_timeout`` once when it answers."""

    _thread_name = "echoing-watchdog"

    def __init__(self, timeout_seconds: float, poll_seconds: float,
                 on_timeout: Optional[Callable[[str], None]]) -> None:
        self.timeout_seconds = check_number("timeout_seconds", timeout_seconds, low=0, low_open=True)
        self.poll_seconds = check_number("poll_seconds", poll_seconds, low=0, low_open=True)
        if on_timeout is not None and not callable(on_timeout):
            raise TypeError(f"on_timeout: expected a function of the message, or None, got {on_timeout!r}")
        self.on_timeout = on_timeout or _exit
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self):
        """Starts watching (again); returns the watchdog."""
        self.stop()
        self._stop.clear()
        self._started()
        self._thread = threading.Thread(target=self._watch, name=self._thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops watching; the watchdog can be started again."""
        self._stop.set()
        if self._thread is not None:
            if self._thread is not threading.current_thread():  # on_timeout may call stop().
                self._thread.join()
            self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _started(self) -> None:
        """Resets what the watchdog measures from; called by :meth:`start`."""

    @abc.abstractmethod
    def _overdue(self) -> Optional[str]:
        """The message to give when the wait is over, or None (each watchdog says what it waits for)."""

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            message = self._overdue()
            if message is not None:
                self.on_timeout(message)
                return


class DispatcherWatchdog(_Watchdog):
    """Probes a dispatcher's port; after ``timeout_seconds`` without an answer, ends the process.

    A dispatcher restarted within the timeout (with its ``--work-dir``) is simply found again.

    Args:
      target: the dispatcher's address, ``"grpc://host:port"`` (or ``"host:port"``).
      timeout_seconds: how long the dispatcher may be unreachable (> 0). Longer than a
        restart of it takes.
      poll_seconds: how often to probe (> 0).
      on_timeout: called with the message instead of ending the process (for tests, or a
        loop that can stop itself).

    Use it as a context manager around training, or call :meth:`start` and :meth:`stop`.
    """

    _thread_name = "echoing-dispatcher-watchdog"

    def __init__(self, target: str, timeout_seconds: float = 60.0, poll_seconds: float = 1.0,
                 on_timeout: Optional[Callable[[str], None]] = None) -> None:
        if not isinstance(target, str) or ":" not in target:
            raise ValueError(f"target: expected the dispatcher's address, 'grpc://host:port', got {target!r}")
        address = target.split("://", 1)[-1]
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"target: expected a port after the last ':', got {target!r}")
        super().__init__(timeout_seconds, poll_seconds, on_timeout)
        self.target = target
        self._address = (host or "localhost", int(port))
        self._last_seen = time.monotonic()

    def reachable(self) -> bool:
        """Whether the dispatcher's port accepts a connection now."""
        try:
            with socket.create_connection(self._address, timeout=self.poll_seconds):
                return True
        except OSError:
            return False

    def _started(self) -> None:
        self._last_seen = time.monotonic()

    def _overdue(self) -> Optional[str]:
        if self.reachable():
            self._last_seen = time.monotonic()
        elif time.monotonic() - self._last_seen > self.timeout_seconds:
            return (f"echoing.service: the tf.data service dispatcher at {self.target} has not answered for "
                    f"{self.timeout_seconds:g} s; stopping this trainer (exit code {EXIT_CODE}) rather than wait for "
                    "it forever. Restart the dispatcher (with its --work-dir) and the trainer from its checkpoint.")
        return None


class StallWatchdog(_Watchdog):
    """Ends the process when training has taken no batch for ``timeout_seconds``.

    Training tells it of each batch: iterate through :meth:`watch`, call :meth:`beat`
    after each step of a custom loop, or pass :meth:`keras_callback` to ``fit``. The wait
    counts from :meth:`start` and from each beat, so the timeout must cover the longest
    honest gap: the first batch (tracing, compiling, filling shuffle buffers), a
    validation pass or a checkpoint that beats nothing. It covers every cause of a stall
    alike (a lost worker under a finite ``distributed_epoch`` pass, a dispatcher gone, a
    file system that stopped answering), and it is no substitute for a step count: a
    pass over ``repeat()``-ed input with ``steps_per_epoch`` never has to end at all.

    Args:
      timeout_seconds: how long training may go without a batch (> 0).
      poll_seconds: how often to look (> 0); an exit comes at most this late.
      on_timeout: called with the message instead of ending the process (for tests, or a
        loop that can stop itself).

    Example, a loop that stalls after two batches, with ``on_timeout`` in place of the exit:

    >>> import threading
    >>> said, stalled = [], threading.Event()
    >>> def two_then_stall():
    ...     yield from (1, 2)
    ...     stalled.wait(60)  # What a finite pass does after a worker is lost, but forever.
    >>> def tell(message):
    ...     said.append(message); stalled.set()
    >>> with StallWatchdog(timeout_seconds=0.2, poll_seconds=0.05, on_timeout=tell) as watchdog:
    ...     batches = list(watchdog.watch(two_then_stall()))
    >>> batches, said[0][:61]
    ([1, 2], 'echoing.service: training has taken no batch for 0.2 s (after')
    """

    _thread_name = "echoing-stall-watchdog"

    def __init__(self, timeout_seconds: float = 600.0, poll_seconds: float = 1.0,
                 on_timeout: Optional[Callable[[str], None]] = None) -> None:
        super().__init__(timeout_seconds, poll_seconds, on_timeout)
        self.beats = 0
        self._last_beat = time.monotonic()

    def beat(self) -> None:
        """Says that training took a batch: the wait starts again."""
        self.beats += 1
        self._last_beat = time.monotonic()

    def watch(self, batches: Iterable[T]) -> Iterator[T]:
        """Yields ``batches``, beating after each one arrives."""
        for batch in batches:
            self.beat()
            yield batch

    def keras_callback(self):
        """A Keras callback that beats after every training, validation and prediction batch."""
        import keras  # Only where it is asked for: the watchdog itself needs no Keras.

        beat = lambda *args, **kwargs: self.beat()  # noqa: E731
        return keras.callbacks.LambdaCallback(on_train_batch_end=beat, on_test_batch_end=beat,
                                              on_predict_batch_end=beat, on_epoch_end=beat)

    def _started(self) -> None:
        self._last_beat = time.monotonic()

    def _overdue(self) -> Optional[str]:
        if time.monotonic() - self._last_beat <= self.timeout_seconds:
            return None
        return (f"echoing.service: training has taken no batch for {self.timeout_seconds:g} s (after "
                f"{self.beats} batches); its input has stalled. Stopping this trainer (exit code {EXIT_CODE}) rather "
                "than wait for it forever: restart it from its checkpoint. Under tf.data service, a finite "
                "distributed_epoch pass never ends once a worker is lost; train on repeat() with a step count.")
