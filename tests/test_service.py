"""tf.data service with echo on the trainer: in-process dispatcher and workers on localhost.

The servers are TensorFlow's; they bind their port on every interface (TensorFlow offers
no bind address), and the tests talk to them through localhost only and stop them all.
"""

import collections
import socket

import pytest
import tensorflow as tf

import echoing

service = tf.data.experimental.service


def free_localhost_port():
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def worker_on(dispatcher, port):
    return service.WorkerServer(service.WorkerConfig(
        dispatcher_address=dispatcher.target.split("://")[1], worker_address="localhost:%port%", port=port,
        heartbeat_interval_ms=100))


def start_cluster(workers=2):
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    return dispatcher, [worker_on(dispatcher, 0) for _ in range(workers)]


def stop(dispatcher, workers):
    for worker in workers:
        worker.stop()
    dispatcher.stop()


@pytest.fixture(scope="module")
def cluster():
    dispatcher, workers = start_cluster()
    yield dispatcher
    stop(dispatcher, workers)


def echoed_after_distribute(target, mode, factor, n=100, stats=None, job_name=None):
    ds = tf.data.Dataset.range(n).map(lambda i: i * 1)  # The upstream: runs on the workers.
    ds = ds.apply(echoing.service.distribute(mode, target, job_name=job_name))
    return ds.apply(echoing.echo(factor, stats=stats))  # The echo stage: on the trainer.


def test_parallel_epochs_every_worker_sends_the_epoch_and_each_arrival_is_echoed(cluster):
    stats = echoing.EchoStats()
    counts = collections.Counter(int(x) for x in echoed_after_distribute(cluster.target, "parallel_epochs", 2, stats=stats))
    # Two workers, each the whole epoch, each arrival echoed twice: exactly 4 of each.
    assert set(counts) == set(range(100)) and set(counts.values()) == {4}
    assert (int(stats.fresh), int(stats.emitted)) == (200, 400)


def test_distributed_epoch_shares_one_epoch_and_counts_are_exact(cluster):
    stats = echoing.EchoStats()
    counts = collections.Counter(int(x) for x in echoed_after_distribute(cluster.target, "distributed_epoch", 3, stats=stats))
    assert set(counts) == set(range(100)) and set(counts.values()) == {3}
    assert (int(stats.fresh), int(stats.emitted)) == (100, 300)


def test_a_variable_factor_after_distribute_follows_assignments(cluster):
    factor, stats = tf.Variable(1.0, dtype=tf.float64), echoing.EchoStats()
    ds = echoed_after_distribute(cluster.target, "distributed_epoch", factor, n=1000, stats=stats)
    # tf.data injects a prefetch at the end of a pipeline, the one asynchronous step after
    # the stage; its autotuned buffer is the likely reason 120 elements, not 56, went out at
    # e = 1 in one run of the whole suite on a loaded machine (never reproduced alone). Left
    # out here, only the stage's own micro-batch is ahead of the assignment.
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    iterator = iter(ds.with_options(options))
    for _ in range(200):
        next(iterator)
    factor.assign(3.0)
    rest = sum(1 for _ in iterator)
    # Elements 200-255, the rest of the micro-batch of 64 pulled at e = 1, stay single.
    assert rest == (256 - 200) + 3 * (1000 - 256)
    assert int(stats.fresh) == 1000 and int(stats.emitted) == 200 + rest


def test_an_echo_stage_with_a_variable_inside_distribute_is_refused(cluster):
    factor = tf.Variable(2.0, dtype=tf.float64, name="my_factor")
    inside = tf.data.Dataset.range(10).apply(echoing.echo(factor)).map(lambda x: x + 1)
    with pytest.raises(ValueError, match=r"dataset: it echoes with the tf.Variable factor\(s\) \['my_factor:0'\].*after distribute"):
        inside.apply(echoing.service.distribute("parallel_epochs", cluster.target))
    # A constant factor inside, every worker running the whole epoch: nothing to freeze or split.
    constant = tf.data.Dataset.range(10).apply(echoing.echo(2))
    assert sum(1 for _ in constant.apply(echoing.service.distribute("parallel_epochs", cluster.target))) == 40


def test_any_echo_stage_inside_a_distributed_epoch_is_refused(cluster):
    # The workers split the source: each would echo a part (and TensorFlow fails an integer
    # factor's cardinality check, "expected to contain 20 elements but contained only 8").
    constant = tf.data.Dataset.range(10).apply(echoing.echo(2))
    with pytest.raises(ValueError, match=r"echoes \(factor \['2'\]\) before distribute in 'distributed_epoch' mode"):
        constant.apply(echoing.service.distribute("distributed_epoch", cluster.target))


@pytest.mark.parametrize("mode, error", [("sharded", ValueError), (None, ValueError)])
def test_bad_processing_mode_is_rejected(mode, error):
    with pytest.raises(error, match="processing_mode: expected"):
        echoing.service.distribute(mode, "grpc://localhost:1")


@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
def test_a_worker_stopped_and_restarted_mid_run_does_not_stop_training(mode):
    # A cluster manager restarts a failed worker at its address; training carries on.
    # (A worker that never comes back makes the trainer wait for it: TensorFlow's
    # behaviour, seen here as a hang of over 90 s, so it is not tested.)
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    port = free_localhost_port()
    workers = [worker_on(dispatcher, 0), worker_on(dispatcher, port)]
    try:
        stats = echoing.EchoStats()
        ds = tf.data.Dataset.range(400).map(lambda i: i * 1)
        ds = ds.apply(echoing.service.distribute(mode, dispatcher.target)).apply(echoing.echo(2, stats=stats))
        iterator = iter(ds)
        arrived = [int(next(iterator)) for _ in range(100)]
        workers[1].stop()
        workers[1] = worker_on(dispatcher, port)
        arrived += [int(x) for x in iterator]
        counts = collections.Counter(arrived)
        copies = collections.Counter(counts.values())
        if mode == "distributed_epoch":
            # At most once per element: what the stopped worker held may be lost, never repeated.
            assert set(copies) == {2} and len(counts) >= 300
        else:
            # Every worker sends the whole epoch; the restarted one starts it over, so an
            # element arrives two or three times, never more, and every element arrives.
            assert set(counts) == set(range(400)) and set(copies) <= {4, 6}
        # The echo stage counts what actually arrived.
        assert (int(stats.fresh), int(stats.emitted)) == (len(arrived) // 2, len(arrived))
    finally:
        stop(dispatcher, workers)


def test_the_image_pipeline_runs_its_upstream_on_the_service_and_echoes_here(cluster, tmp_path):
    import pipelines

    stats = echoing.EchoStats()
    config = pipelines.ImagePipelineConfig(
        num_train_examples=64, num_eval_examples=16, batch_size=8, seed=1, shuffle_buffer_size=16,
        cache_dir=str(tmp_path), service=cluster.target,
        echo=pipelines.EchoConfig(pipelines.BEFORE_AUGMENT, factor=2))
    batches = list(pipelines.image_train_dataset(config, stats=stats))
    assert len(batches) == 64 * 2 // 8 and batches[0][0].shape == (8, 32, 32, 3)
    assert (int(stats.fresh), int(stats.emitted)) == (64, 128)


def test_the_text_pipeline_takes_a_service_address_too(cluster, tmp_path):
    import pipelines

    config = pipelines.TextPipelineConfig(sequence_length=32, batch_size=4, seed=1, shuffle_buffer_size=16,
                                          cache_dir=str(tmp_path), service=cluster.target,
                                          echo=pipelines.EchoConfig(pipelines.AFTER_BATCH, 2))
    inputs, targets = next(iter(pipelines.text_train_dataset(config)))
    assert inputs.shape == (4, 32) and targets.shape == (4, 32)


@pytest.mark.parametrize("address", ["localhost:5050", 5050, ""])
def test_a_bad_service_address_is_rejected_naming_it(address):
    import pipelines

    with pytest.raises(ValueError, match="service: expected a tf.data service dispatcher address"):
        pipelines.ImagePipelineConfig(service=address)


def test_an_iterator_over_a_distributed_dataset_cannot_be_checkpointed_as_documented(cluster, tmp_path):
    ds = tf.data.Dataset.range(10).apply(echoing.service.distribute("distributed_epoch", cluster.target))
    iterator = iter(ds.apply(echoing.echo(2)))
    next(iterator)
    # TF 2.21 writes a checkpoint, then fails on the way back ("SaveInternal is not yet supported").
    path = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "ckpt"))
    fresh = iter(tf.data.Dataset.range(10).apply(echoing.service.distribute("distributed_epoch", cluster.target)))
    with pytest.raises(tf.errors.UnimplementedError, match="SaveInternal is not yet supported"):
        tf.train.Checkpoint(iterator=fresh).read(path)


def test_the_service_benchmark_records_a_row_per_worker_count_and_factor(tmp_path):
    from benchmarks import service as bench

    config = bench.ServiceSettings(worker_counts=(1,), factors=(1, 2.0), warmup_seconds=0.2, seconds=0.5,
                                          repeats=1)
    results = bench.run(config, tmp_path / "service.json")
    assert [(r.workers, r.factor) for r in results.rows] == [(1, 1), (1, 2.0)]
    assert all(len(r.rates) == 1 and r.median > 0 for r in results.rows)
    assert results.steps_per_second_per_worker_at_e1 == results.rows[0].median
    # The file reads back to the same records.
    from benchmarks.lib import results_io
    document = results_io.read_results(tmp_path / "service.json")
    assert results_io.typed(document, bench.ServiceSettings, bench.ServiceResults) == (config, results)
