"""tf.data service with echoing on the trainer: the upstream on the workers, echo after ``distribute``.

An input pipeline too slow for one host can run its read and decode (and augment) on
tf.data service workers. Echo on the *trainer*, after ``distribute``: a ``tf.Variable``
factor captured inside a distributed dataset is frozen at the value it has when
``distribute`` is called, because the workers run a serialised copy of the graph, so
``AutoEcho`` (or any ``factor.assign``) would silently stop working.

:func:`distribute` is ``tf.data.experimental.service.distribute`` with that check: it
refuses a dataset that holds an echo stage with a ``tf.Variable`` factor. (TensorFlow's
own ``distribute`` cannot be intercepted; with it, nothing warns.)

Example, with an in-process dispatcher and worker on localhost:

>>> import tensorflow as tf, echoing
>>> service = tf.data.experimental.service
>>> dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
>>> worker = service.WorkerServer(service.WorkerConfig(
...     dispatcher_address=dispatcher.target.split("://")[1], worker_address="localhost:%port%", port=0))
>>> factor, stats = tf.Variable(2.0, dtype=tf.float64), echoing.EchoStats()
>>> ds = tf.data.Dataset.range(5).map(lambda i: i * 10)  # Read and decode: on the workers.
>>> ds = ds.apply(echoing.service.distribute("distributed_epoch", dispatcher.target))
>>> ds = ds.apply(echoing.echo(factor, stats=stats))  # Echo: on the trainer.
>>> sorted(int(x) for x in ds)
[0, 0, 10, 10, 20, 20, 30, 30, 40, 40]
>>> int(stats.fresh)
5
>>> worker.stop(); dispatcher.stop()
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from echoing.echo import ECHO_MARK, VARIABLE_ECHO_MARK, echo_stages
from echoing.service.watchdog import DispatcherWatchdog, StallWatchdog  # noqa: F401  (echoing.service.*)

def distribute(processing_mode: str, service: str, **kwargs) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """``tf.data.experimental.service.distribute``, refusing a variable-factor echo stage inside.

    Args:
      processing_mode: ``"parallel_epochs"`` (every worker produces the whole dataset, so
        each element arrives once per worker) or ``"distributed_epoch"`` (the workers share
        one epoch: each element arrives once, unless a worker fails mid-way).
      service: the dispatcher's address, ``"grpc://host:port"``.
      **kwargs: passed to ``tf.data.experimental.service.distribute`` (``job_name``,
        ``consumer_index``, ...).

    Returns:
      A function for ``Dataset.apply``.

    Raises:
      ValueError: when applied to a dataset holding an echo stage whose factor is a
        ``tf.Variable`` (the workers would freeze it), or any echo stage in
        ``"distributed_epoch"`` mode (the workers split its input); echo after
        ``distribute`` instead.
    """
    if processing_mode not in ("parallel_epochs", "distributed_epoch"):
        raise ValueError(f"processing_mode: expected 'parallel_epochs' or 'distributed_epoch', got {processing_mode!r}")
    if not isinstance(service, str) or not service:
        raise TypeError(f"service: expected a dispatcher address such as 'grpc://localhost:5050', got {service!r}")

    def _apply_fn(dataset: tf.data.Dataset) -> tf.data.Dataset:
        frozen = echo_stages(dataset)
        if frozen:
            raise ValueError(
                f"dataset: it echoes with the tf.Variable factor(s) {frozen} before distribute; tf.data service "
                "workers would freeze the factor at its current value and ignore later assignments (AutoEcho "
                "included). Apply echoing.echo after distribute, on the trainer."
            )
        split = echo_stages(dataset, ECHO_MARK)
        if split and processing_mode == "distributed_epoch":
            raise ValueError(
                f"dataset: it echoes (factor {split}) before distribute in 'distributed_epoch' mode, where the "
                "workers split the source between them: each would echo a part, and an integer factor's "
                "cardinality check fails. Apply echoing.echo after distribute, on the trainer."
            )
        return dataset.apply(tf.data.experimental.service.distribute(processing_mode, service, **kwargs))

    return _apply_fn
