"""The image and text pipelines: shapes, echo points, determinism, embedded data, tfds sources."""

import dataclasses
import hashlib
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import echoing
import pipelines
from pipelines import cache, image, shapes_data, staged, stdlib_text, text
from pipelines.staged import PLACEMENTS, EchoConfig, echo_point

NUM_TRAIN = 600  # Small embedded splits keep the tests fast; the default is 100k.
NUM_EVAL = 100


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


def image_config(cache_dir, **kwargs):
    settings = dict(num_train_examples=NUM_TRAIN, num_eval_examples=NUM_EVAL, batch_size=8, seed=1,
                    shuffle_buffer_size=100, cache_dir=cache_dir)
    settings.update(kwargs)
    return image.ImagePipelineConfig(**settings)


def text_config(cache_dir, **kwargs):
    settings = dict(sequence_length=32, batch_size=4, seed=1, shuffle_buffer_size=100, cache_dir=cache_dir)
    settings.update(kwargs)
    return text.TextPipelineConfig(**settings)


def first_batches(dataset, n=2):
    return [tf.nest.map_structure(np.asarray, batch) for batch in dataset.take(n)]


# --- the shared staged notion -------------------------------------------------------------


def test_no_echo_is_the_default():
    assert EchoConfig().placement == "none" and not EchoConfig().echoes


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"placement": "before_batch"}, ValueError, "placement: expected one of .*got 'before_batch'"),
        ({"placement": "after_batch", "factor": 0.5}, ValueError, "factor: .*got 0.5"),
        ({"placement": "after_batch", "shuffle_buffer_size": -3}, ValueError, "shuffle_buffer_size: .*got -3"),
    ],
)
def test_bad_echo_config_is_rejected(kwargs, error, message):
    with pytest.raises(error, match=message):
        EchoConfig(**kwargs)


def test_echo_config_validates_without_building_an_echo_stage(monkeypatch):
    def no_stage(*args, **kwargs):
        raise AssertionError("EchoConfig built an echo stage")

    monkeypatch.setattr(echoing, "echo", no_stage)
    assert EchoConfig("before_augment", 2.5, shuffle_buffer_size=8, seed=1).factor == 2.5
    with pytest.raises(TypeError, match="seed: expected an int or None, got str: 'x'"):
        EchoConfig("before_augment", 2, seed="x")


def test_pipelines_exports_what_a_user_needs():
    import pipelines

    for name in pipelines.__all__:
        assert getattr(pipelines, name) is not None, name
    assert pipelines.image_train_dataset is image.train_dataset and pipelines.text_eval_dataset is text.eval_dataset
    assert pipelines.EchoConfig is EchoConfig and pipelines.IMAGE_ECHO_POINTS == image.ECHO_POINTS


def test_text_pipeline_has_no_augmentation_echo_points(cache_dir):
    for point in ("before_augment", "after_augment"):
        with pytest.raises(ValueError, match=f"placement: the text pipeline has no echo point '{point}'"):
            text_config(cache_dir, echo=EchoConfig(point, 2))


def test_image_pipeline_has_no_plain_example_echo_point(cache_dir):
    with pytest.raises(ValueError, match="placement: the image pipeline has no echo point 'example'.*before_augment"):
        image_config(cache_dir, echo=EchoConfig("example", 2))


def test_echo_point_echoes_only_where_placed():
    ds = tf.data.Dataset.range(2)
    config = EchoConfig("after_augment", 3)
    assert echo_point(ds, "before_augment", config) is ds
    assert [int(x) for x in echo_point(ds, "after_augment", config)] == [0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="point: .*got 'middle'"):
        echo_point(ds, "middle", config)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"source": "mnist"}, "source: expected one of .*got 'mnist'"),
        ({"batch_size": 0}, "batch_size: .*got 0"),
        ({"num_train_examples": -5}, "num_train_examples: .*got -5"),
        ({"read_rate": 0.0}, "read_rate: .*got 0.0"),
        ({"shuffle_buffer_size": 2.5}, "shuffle_buffer_size: .*got 2.5"),
    ],
)
def test_bad_image_config_is_rejected(cache_dir, kwargs, message):
    with pytest.raises(ValueError, match=message):
        image_config(cache_dir, **kwargs)


def test_unknown_text_source_is_rejected(cache_dir):
    with pytest.raises(ValueError, match="source: expected one of .*got 'wikipedia'"):
        text_config(cache_dir, source="wikipedia")


# --- image pipeline ----------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["none", "before_augment", "after_augment", "after_batch"])
def test_image_train_batches_have_expected_shapes_and_dtypes(cache_dir, placement):
    stats = echoing.EchoStats()
    config = image_config(cache_dir, echo=EchoConfig(placement, 2))
    images, labels = first_batches(image.train_dataset(config, stats=stats if placement != "none" else None), 1)[0]
    assert images.shape == (8, 32, 32, 3) and images.dtype == np.float32
    assert labels.shape == (8,) and labels.dtype == np.int64
    assert set(labels.tolist()) <= set(range(10))
    assert np.isfinite(images).all() and -3 < images.mean() < 3


def test_echo_before_augment_gives_differently_augmented_copies(cache_dir):
    config = image_config(cache_dir, echo=EchoConfig("before_augment", 2))
    images, labels = first_batches(image.train_dataset(config), 1)[0]
    assert (labels[0::2] == labels[1::2]).all()
    assert all(not np.array_equal(images[i], images[i + 1]) for i in range(0, 8, 2))


def test_echo_after_augment_gives_identical_copies(cache_dir):
    config = image_config(cache_dir, echo=EchoConfig("after_augment", 2))
    images, labels = first_batches(image.train_dataset(config), 1)[0]
    assert all(np.array_equal(images[i], images[i + 1]) for i in range(0, 8, 2))
    assert not np.array_equal(images[0], images[2])


def test_batch_echo_repeats_whole_batches(cache_dir):
    config = image_config(cache_dir, echo=EchoConfig("after_batch", 2))
    (first, first_labels), (second, second_labels), (third, _) = first_batches(image.train_dataset(config), 3)
    assert np.array_equal(first, second) and np.array_equal(first_labels, second_labels)
    assert not np.array_equal(first, third)


def test_image_stats_count_fresh_examples_exactly(cache_dir):
    stats = echoing.EchoStats()
    config = image_config(cache_dir, echo=EchoConfig("before_augment", 1.5, shuffle_buffer_size=32))
    batches = sum(1 for _ in image.train_dataset(config, stats=stats))
    assert int(stats.fresh) == NUM_TRAIN
    assert batches == int(stats.emitted) // 8


def test_image_pipeline_is_deterministic_under_a_seed(cache_dir):
    def run(seed):
        config = image_config(cache_dir, seed=seed, echo=EchoConfig("before_augment", 1.5, shuffle_buffer_size=16))
        return first_batches(image.train_dataset(config), 3)

    first, again, other = run(5), run(5), run(6)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(first[0][0], other[0][0])


def test_echo_and_augmentation_draw_from_their_own_streams_of_the_one_seed(cache_dir, monkeypatch):
    seeds = {}
    real_echo, real_random = staged.echoing.echo, tf.data.Dataset.random

    def echo(*args, seed=None, **kwargs):
        seeds["echo"] = seed
        return real_echo(*args, seed=seed, **kwargs)

    def random(seed=None, **kwargs):
        seeds["augmentation"] = seed
        return real_random(seed=seed, **kwargs)

    monkeypatch.setattr(staged.echoing, "echo", echo)
    monkeypatch.setattr(tf.data.Dataset, "random", random)
    image.train_dataset(image_config(cache_dir, seed=5, echo=EchoConfig("before_augment", 1.5, shuffle_buffer_size=16)))
    assert seeds == {"echo": staged.stream_seed(5, "echo"), "augmentation": staged.stream_seed(5, "augmentation")}
    assert len({5, *seeds.values()}) == 3
    # A seed the user gives the echo stage itself is used as given.
    image.train_dataset(image_config(cache_dir, seed=5, echo=EchoConfig("before_augment", 1.5, seed=9)))
    assert seeds["echo"] == 9


def test_a_stream_seed_names_its_stream():
    with pytest.raises(ValueError, match=r"stream: expected one of \('echo', 'augmentation'\), got 'crop'"):
        staged.stream_seed(0, "crop")


def test_image_eval_sees_every_example_once_without_augmentation(cache_dir):
    config = image_config(cache_dir, echo=EchoConfig("before_augment", 2))
    batches = first_batches(image.eval_dataset(config), 100)
    labels = np.concatenate([b[1] for b in batches])
    _, expected = shapes_data.generate_split("eval", NUM_EVAL)
    np.testing.assert_array_equal(labels, expected)
    again = first_batches(image.eval_dataset(config), 1)[0][0]
    np.testing.assert_array_equal(batches[0][0], again)


@pytest.mark.timing
def test_throttled_image_read_is_rate_limited(cache_dir):
    import time

    config = image_config(cache_dir, read_rate=400.0, shuffle_buffer_size=1)
    iterator = iter(image.train_dataset(config))
    # Past the start, where the buffers (augmentation groups of 64, prefetch) fill at once.
    for _ in range(24):
        next(iterator)
    start = time.perf_counter()
    for _ in range(40):
        next(iterator)
    rate = 40 * 8 / (time.perf_counter() - start)
    assert rate == pytest.approx(400, rel=0.1)


# --- embedded data -----------------------------------------------------------------------


def test_linear_model_on_raw_pixels_stays_near_chance():
    import keras

    x, y = shapes_data.generate_split("train", 5000)
    x_eval, y_eval = shapes_data.generate_split("eval", 1000)
    flat = lambda a: a.reshape(len(a), -1).astype(np.float32) / 255 - 0.5  # noqa: E731
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32 * 32 * 3,)), keras.layers.Dense(10)])
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    model.fit(flat(x), y, epochs=5, batch_size=128, verbose=0)
    _, accuracy = model.evaluate(flat(x_eval), y_eval, verbose=0)
    assert accuracy < 0.25  # Chance is 0.10; the shape, not colour or a pixel, carries the class.


def test_embedded_images_are_balanced_and_varied():
    images, labels = shapes_data.generate_split("train", 5000)
    assert np.bincount(labels, minlength=10).tolist() == [500] * 10
    means = np.array([images[labels == c].mean(axis=(0, 1, 2)) for c in range(10)])
    assert means.std(axis=0).max() < 8  # No class has its own colour (pixel values 0-255).


def _digest(paths):
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def test_embedded_data_is_the_same_in_another_process(cache_dir, tmp_path):
    code = textwrap.dedent(
        f"""
        import hashlib
        from pathlib import Path
        from pipelines import shapes_data, stdlib_text
        files = shapes_data.tfrecord_files("eval", {NUM_EVAL}, cache_dir={str(tmp_path)!r})
        files.append(stdlib_text.tfrecord_file("eval", cache_dir={str(tmp_path)!r}))
        digest = hashlib.sha256()
        for path in files:
            digest.update(Path(path).read_bytes())
        print(digest.hexdigest())
        """
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = shapes_data.tfrecord_files("eval", NUM_EVAL, cache_dir=cache_dir) + [stdlib_text.tfrecord_file("eval", cache_dir=cache_dir)]
    assert other.stdout.strip().splitlines()[-1] == _digest(here)


def test_concurrent_first_use_of_the_cache_gives_one_complete_copy(tmp_path):
    code = f"from pipelines import shapes_data; print(shapes_data.tfrecord_files('eval', 3000, cache_dir={str(tmp_path)!r}))"
    processes = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate()[0].strip().splitlines()[-1] for p in processes]
    assert all(p.returncode == 0 for p in processes)
    assert outputs[0] == outputs[1]
    entries = sorted(path.name for path in tmp_path.iterdir())
    assert entries == ["shapes32-v1-eval-3000"]  # No temporary directory is left behind.
    records = sum(1 for _ in tf.data.TFRecordDataset(eval(outputs[0])))
    assert records == 3000


def test_cache_dir_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    assert cache.cache_root() == tmp_path
    assert cache.cache_root("/elsewhere") == Path("/elsewhere")


def test_unusable_cache_dir_gives_a_clear_error(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("x")
    with pytest.raises(OSError, match="cache_dir: cannot create the cache directory"):
        shapes_data.tfrecord_files("eval", 10, cache_dir=not_a_directory / "cache")


def test_incomplete_cache_entry_gives_a_clear_error(tmp_path):
    (tmp_path / "shapes32-v1-eval-10").mkdir()
    with pytest.raises(OSError, match="cache_dir: .*incomplete or unreadable; delete it"):
        shapes_data.tfrecord_files("eval", 10, cache_dir=tmp_path)


def test_bad_split_and_size_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="split: .*got 'validation'"):
        shapes_data.tfrecord_files("validation", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="num_examples: .*got 0"):
        shapes_data.tfrecord_files("train", 0, cache_dir=tmp_path)


def test_stdlib_text_excludes_tests_and_splits_stably():
    train, held_out = stdlib_text.source_files("train"), stdlib_text.source_files("eval")
    root = stdlib_text.stdlib_root()
    assert not set(train) & set(held_out)
    assert len(held_out) > 10 and len(train) > 10 * len(held_out)
    for path in train + held_out:
        assert not {"test", "tests", "site-packages"} & set(path.relative_to(root).parts[:-1])


@pytest.mark.parametrize("limit", [1, 7, 64, 4096])
def test_split_document_cuts_after_line_ends_and_loses_nothing(limit):
    document = stdlib_text.source_files("train")[0].read_bytes() + b"x" * 100 + b"\nlast line without an end"
    records = stdlib_text.split_document(document, limit)
    assert b"".join(records) == document
    assert all(0 < len(record) <= limit for record in records)
    # Every cut follows a line end, unless a line is longer than the limit.
    for record in records[:-1]:
        assert record.endswith(b"\n") or (b"\n" not in record and len(record) == limit)


def test_split_document_without_a_limit_keeps_the_file_whole():
    assert stdlib_text.split_document(b"a\nb\n", None) == [b"a\nb\n"]
    assert stdlib_text.split_document(b"", 8) == [b""]


@pytest.mark.parametrize("bad", [0, -1, 2.5, "64", True])
def test_bad_max_record_bytes_is_rejected_naming_it(cache_dir, bad):
    with pytest.raises(ValueError, match=f"max_record_bytes: expected None or an int >= 1, got {bad!r}"):
        text_config(cache_dir, max_record_bytes=bad)
    with pytest.raises(ValueError, match="max_record_bytes"):
        stdlib_text.tfrecord_file("train", cache_dir=cache_dir, max_record_bytes=bad)


def test_max_record_bytes_is_only_for_the_embedded_text(cache_dir):
    with pytest.raises(ValueError, match="max_record_bytes: only the embedded 'stdlib' source .*source='lm1b'"):
        text_config(cache_dir, source="lm1b", max_record_bytes=4096)


def test_split_training_records_hold_the_same_text(cache_dir):
    whole = stdlib_text.record_sizes("train")
    split = stdlib_text.record_sizes("train", 16384)
    assert sum(split) == sum(whole) and max(split) <= 16384 < max(whole) and len(split) > len(whole)
    path = stdlib_text.tfrecord_file("train", cache_dir=cache_dir, max_record_bytes=16384)
    assert path != stdlib_text.tfrecord_file("train", cache_dir=cache_dir)
    assert [len(r.numpy()) for r in tf.data.TFRecordDataset(path)] == split


def test_max_record_bytes_splits_the_training_read_only(cache_dir):
    config = text_config(cache_dir, max_record_bytes=1024)
    longest = max(len(document.numpy()) for document in text.read(config, "train"))
    assert longest <= 1024
    assert max(len(document.numpy()) for document in text.read(config, "eval")) > 1024
    inputs, targets = first_batches(text.train_dataset(config), 1)[0]
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])


# --- text pipeline -----------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["none", "example", "after_batch"])
def test_text_targets_are_inputs_shifted_by_one(cache_dir, placement):
    config = text_config(cache_dir, echo=EchoConfig(placement, 2))
    for inputs, targets in first_batches(text.train_dataset(config), 3):
        assert inputs.shape == targets.shape == (4, 32)
        assert inputs.dtype == targets.dtype == np.int32
        np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
        assert inputs.min() >= 0 and inputs.max() < text.VOCAB_SIZE


def test_packing_keeps_every_token_in_order():
    documents = tf.data.Dataset.from_tensor_slices(["abc", "defghij", "k"]).map(text.tokenize)
    rows = [(x.numpy().tolist(), y.numpy().tolist()) for x, y in text.pack(documents, 4)]
    stream = sum((text.tokenize(tf.constant(d)).numpy().tolist() for d in ["abc", "defghij", "k"]), [])
    assert len(stream) == 14  # Rows of 4 + 1 overlapping tokens: 3 rows, the last token left over.
    assert [x for x, _ in rows] == [stream[0:4], stream[4:8], stream[8:12]]
    assert [y for _, y in rows] == [stream[1:5], stream[5:9], stream[9:13]]
    assert text.detokenize(stream) == b"abcdefghijk"


def test_text_example_echo_gives_adjacent_identical_examples(cache_dir):
    config = text_config(cache_dir, echo=EchoConfig("example", 2))
    inputs, _ = first_batches(text.train_dataset(config), 1)[0]
    np.testing.assert_array_equal(inputs[0], inputs[1])
    assert not np.array_equal(inputs[0], inputs[2])


def test_text_batch_echo_repeats_whole_batches(cache_dir):
    config = text_config(cache_dir, echo=EchoConfig("after_batch", 2))
    (a, _), (b, _), (c, _) = first_batches(text.train_dataset(config), 3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_text_pipeline_is_deterministic_under_a_seed(cache_dir):
    def run(seed):
        config = text_config(cache_dir, seed=seed, echo=EchoConfig("example", 1.5, shuffle_buffer_size=20))
        return np.concatenate([b[0] for b in first_batches(text.train_dataset(config), 3)])

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def test_text_eval_is_unshuffled_and_unechoed(cache_dir):
    config = text_config(cache_dir, echo=EchoConfig("example", 2))
    first = np.concatenate([b[0] for b in first_batches(text.eval_dataset(config), 5)])
    again = np.concatenate([b[0] for b in first_batches(text.eval_dataset(config), 5)])
    np.testing.assert_array_equal(first, again)
    assert not any(np.array_equal(first[i], first[i + 1]) for i in range(len(first) - 1))


# --- tensorflow-datasets sources, offline under mock_data -------------------------------


@pytest.mark.parametrize("source, size", [("cifar10", 32), ("imagenet2012", 224), ("imagenette", 224)])
def test_tfds_image_sources_under_mock_data(cache_dir, source, size):
    with tfds.testing.mock_data(num_examples=16):
        config = image_config(cache_dir, source=source, echo=EchoConfig("before_augment", 2), shuffle_buffer_size=4)
        images, labels = first_batches(image.train_dataset(config), 1)[0]
        eval_images, _ = first_batches(image.eval_dataset(config), 1)[0]
    assert images.shape == (8, size, size, 3) and eval_images.shape[1:] == (size, size, 3)
    assert (labels[0::2] == labels[1::2]).all()


def test_tfds_lm1b_under_mock_data(cache_dir):
    with tfds.testing.mock_data(num_examples=64):
        config = text_config(cache_dir, source="lm1b", sequence_length=8, echo=EchoConfig("after_batch", 2))
        (a, ta), (b, _) = first_batches(text.train_dataset(config), 2)
        eval_inputs, _ = first_batches(text.eval_dataset(config), 1)[0]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[:, 1:], ta[:, :-1])
    assert eval_inputs.shape[1] == 8


def test_placements_are_named_in_one_place():
    assert PLACEMENTS == ("none", "example", "before_augment", "after_augment", "after_batch")


def test_a_pipelines_echo_points_are_the_entries_of_its_list_of_stages():
    from pipelines import image, text
    from pipelines.staged import EchoHere, Stage

    for module in (image, text):
        stages = module.TRAIN_STAGES
        assert all(isinstance(s, (Stage, EchoHere)) for s in stages)
        assert module.ECHO_POINTS == tuple(s.point for s in stages if isinstance(s, EchoHere))
    assert image.ECHO_POINTS == ("before_augment", "after_augment", "after_batch")
    assert text.ECHO_POINTS == ("example", "after_batch")
    # The stages in order, as the docs draw them.
    assert [getattr(s, "name", None) or s.point.value for s in image.TRAIN_STAGES] == [
        "repeat", "shuffle", "decode", "service", "before_augment", "augment", "after_augment", "batch", "after_batch",
        "prefetch"]


def test_the_shared_settings_live_in_one_base_and_are_checked_there():
    from pipelines.staged import PipelineConfig

    shared = {f.name for f in dataclasses.fields(PipelineConfig)}
    for config in (pipelines.ImagePipelineConfig, pipelines.TextPipelineConfig):
        assert issubclass(config, PipelineConfig) and shared <= {f.name for f in dataclasses.fields(config)}
    with pytest.raises(ValueError, match="sequence_length: expected a positive int, got 0"):
        pipelines.TextPipelineConfig(sequence_length=0)
    with pytest.raises(ValueError, match="num_train_examples: expected a positive int, got -1"):
        pipelines.ImagePipelineConfig(num_train_examples=-1)
    with pytest.raises(ValueError, match="placement: the text pipeline has no echo point 'after_augment'"):
        pipelines.TextPipelineConfig(echo=pipelines.EchoConfig("after_augment", factor=2))


def _counted_range(pulled: list):
    """tf.data elements 0, 1, ... whose source counts, in ``pulled[0]``, the elements read from it."""

    def elements():
        value = 0
        while True:
            pulled[0] += 1
            yield value
            value += 1

    return tf.data.Dataset.from_generator(elements, output_signature=tf.TensorSpec([], tf.int64))


def test_a_full_shuffle_buffer_reads_nothing_ahead_while_its_consumer_idles_as_a_prefetch_does():
    # The Transformer's 10,000-sequence shuffle is no stock a consumer can draw faster than the
    # read (benchmarks/lib/deep_stock.py): tf.data refills the buffer before each element it emits.
    # Without the prefetch that tf.data's autotuning injects after an asynchronous source
    # (with it, 174 read by then and 179 after the idle): the shuffle's own reads alone.
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    pulled = [0]
    shuffled = iter(_counted_range(pulled).shuffle(64, seed=0).with_options(options))
    [next(shuffled) for _ in range(100)]
    before = pulled[0]
    time.sleep(0.5)
    assert pulled[0] == before <= 64 + 100
    pulled_ahead = [0]
    prefetched = iter(_counted_range(pulled_ahead).prefetch(64))
    [next(prefetched) for _ in range(100)]
    for _ in range(300):  # a prefetch fills on its own thread; wait up to 30 s for it to
        if pulled_ahead[0] >= 100 + 64:
            break
        time.sleep(0.1)
    assert pulled_ahead[0] >= 100 + 64
