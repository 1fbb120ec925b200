"""tf.data service's dispatcher and worker as processes of their own: ``python -m echoing.service``.

TensorFlow's ``DispatchServer`` and ``WorkerServer``, started with the settings a
deployment needs, their address printed on one line, and stopped cleanly on SIGTERM or
SIGINT::

    python -m echoing.service dispatcher --port 5050 --work-dir /shared/dispatcher
    python -m echoing.service worker --dispatcher dispatcher-host:5050 --port 5051 \\
        --worker-address worker-host:%port%

``--work-dir`` turns on the dispatcher's fault-tolerant journal: a dispatcher restarted
on the same port and directory takes up the jobs it had. **tf.data service has no
authentication and listens on every interface** (TensorFlow offers no bind address):
run it on a private network only. The tests (``tests/test_service_processes.py``) talk
to loopback only.

>>> import tensorflow as tf
>>> dispatcher = dispatcher_server(port=0)
>>> worker = worker_server(dispatcher.target.split("://")[1], port=0)
>>> dispatcher.target.startswith("grpc://localhost:"), worker_address(worker).startswith("localhost:")
(True, True)
>>> worker.stop(); dispatcher.stop()
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Optional

import tensorflow as tf

from echoing._checks import check_int

# The dispatcher takes a worker for lost after this long without a heartbeat, and hands
# its share of a distributed_epoch to the others. TensorFlow's default is 1 minute; a
# deployment whose workers are preempted wants a shorter one (the fault tests use 2 s).
DEFAULT_WORKER_TIMEOUT_MS = 10_000


def dispatcher_server(port: int, work_dir: Optional[str] = None,
                      worker_timeout_ms: int = DEFAULT_WORKER_TIMEOUT_MS) -> "tf.data.experimental.service.DispatchServer":
    """A started dispatcher on ``port`` (0: any free port); with ``work_dir``, fault tolerant."""
    check_int("port", port, low=0)
    check_int("worker_timeout_ms", worker_timeout_ms, low=1)
    service = tf.data.experimental.service
    return service.DispatchServer(service.DispatcherConfig(
        port=port, work_dir=work_dir, fault_tolerant_mode=work_dir is not None, worker_timeout_ms=worker_timeout_ms))


def worker_server(dispatcher: str, port: int, worker_address: Optional[str] = None,
                  heartbeat_interval_ms: int = 1000) -> "tf.data.experimental.service.WorkerServer":
    """A started worker registered with ``dispatcher`` (``host:port``), serving on ``port``.

    ``worker_address`` is what the dispatcher tells trainers to dial (``%port%`` stands
    for the port); by default ``localhost:%port%``, right for one host only.
    """
    if not isinstance(dispatcher, str) or ":" not in dispatcher or "://" in dispatcher:
        raise ValueError(f"dispatcher: expected the dispatcher's host:port (no grpc://), got {dispatcher!r}")
    check_int("port", port, low=0)
    check_int("heartbeat_interval_ms", heartbeat_interval_ms, low=1)
    service = tf.data.experimental.service
    return service.WorkerServer(service.WorkerConfig(
        dispatcher_address=dispatcher, worker_address=worker_address or "localhost:%port%", port=port,
        heartbeat_interval_ms=heartbeat_interval_ms))


def worker_address(worker) -> str:
    """The ``host:port`` a started worker serves on."""
    return worker._address  # TensorFlow keeps it private; its own tests read it so.


def serve(server, line: str) -> int:
    """Prints ``line``, then waits for SIGTERM or SIGINT and stops ``server``; returns the exit code (0)."""
    stopping = threading.Event()

    def stop(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(line, flush=True)
    while not stopping.wait(0.2):  # server.join() would hold the main thread where no signal handler runs.
        pass
    server.stop()
    print("stopped", flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m echoing.service",
        description="tf.data service's dispatcher or worker as a process. tf.data service has no authentication "
                    "and listens on every interface: run it on a private network only.")
    commands = parser.add_subparsers(dest="command", required=True)
    dispatcher = commands.add_parser("dispatcher", help="run a dispatcher; prints 'dispatcher grpc://host:port'")
    dispatcher.add_argument("--port", type=int, required=True, help="the port to serve on (0: any free one)")
    dispatcher.add_argument("--work-dir", default=None,
                            help="a directory for the fault-tolerant journal (restart on the same port and directory "
                                 "to take up the jobs)")
    dispatcher.add_argument("--worker-timeout-ms", type=int, default=DEFAULT_WORKER_TIMEOUT_MS,
                            help=f"a worker silent this long is lost (default {DEFAULT_WORKER_TIMEOUT_MS})")
    worker = commands.add_parser("worker", help="run a worker; prints 'worker host:port'")
    worker.add_argument("--dispatcher", required=True, help="the dispatcher's host:port")
    worker.add_argument("--port", type=int, required=True, help="the port to serve on (0: any free one)")
    worker.add_argument("--worker-address", default=None,
                        help="the address trainers dial, '%%port%%' for the port (default localhost:%%port%%)")
    args = parser.parse_args(argv)
    if args.command == "dispatcher":
        server = dispatcher_server(args.port, args.work_dir, args.worker_timeout_ms)
        return serve(server, f"dispatcher {server.target}")
    server = worker_server(args.dispatcher, args.port, args.worker_address)
    return serve(server, f"worker {worker_address(server)}")


if __name__ == "__main__":
    sys.exit(main())
