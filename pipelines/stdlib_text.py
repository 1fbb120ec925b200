"""Embedded text data: the Python standard library's own source, which every machine has.

The ``.py`` files under the running interpreter's standard library (test packages and
installed third-party packages excluded) are split into train and evaluation by a stable
hash of each file's path relative to the library root, and written once to the cache as
TFRecord files of one document (a file's bytes) per record. Different Python versions
hold different text; one interpreter always gives the same data.

A throttled read (:mod:`pipelines.slow_storage`) admits a record once all its bytes are
read, so one long record holds the whole stream up while it is read. The files range
from a few bytes to hundreds of kB: on Python 3.11 the training split's median file is
8 kB and its largest, ``pydoc_data/topics.py``, 757 kB, 6.6% of the split's 11.5 MB on
its own (:func:`record_sizes`). ``max_record_bytes`` splits the files into records of at
most that many bytes, at line ends, as sharded text corpora store long documents; each
record is then a document of its own to the text pipeline.
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from pathlib import Path
from typing import Optional

import tensorflow as tf

from pipelines import cache

_EXCLUDED_DIRECTORIES = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
EVAL_PERCENT = 5  # Share of files (by path hash) held out for evaluation.
_VERSION = 1
SPLITS = ("train", "eval")


def stdlib_root() -> Path:
    """The directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def source_files(split: str, root: Optional[Path] = None) -> list[Path]:
    """The standard-library ``.py`` files of ``split``, sorted by path.

    Example:

    >>> any(path.name == "os.py" for path in source_files("train") + source_files("eval"))
    True
    """
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    root = root or stdlib_root()
    chosen = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if _EXCLUDED_DIRECTORIES.intersection(relative.parts[:-1]):
            continue
        held_out = int.from_bytes(hashlib.sha256(relative.as_posix().encode()).digest()[:4], "big") % 100 < EVAL_PERCENT
        if held_out == (split == "eval"):
            chosen.append(path)
    return chosen


def split_document(document: bytes, max_record_bytes: Optional[int]) -> list[bytes]:
    """``document`` as records of at most ``max_record_bytes``, cut after a line end where one fits.

    A line longer than the limit is cut inside it. Joined, the records are the document.
    ``None`` keeps the document whole.

    Example:

    >>> split_document(b"a = 1\\nb = 2\\n", 8)
    [b'a = 1\\n', b'b = 2\\n']
    >>> split_document(b"0123456789", 4)
    [b'0123', b'4567', b'89']
    """
    check_max_record_bytes(max_record_bytes)
    if max_record_bytes is None or len(document) <= max_record_bytes:
        return [document]
    records, start = [], 0
    while start < len(document):
        end = min(start + max_record_bytes, len(document))
        if end < len(document):
            line_end = document.rfind(b"\n", start, end)
            if line_end >= start:
                end = line_end + 1
        records.append(document[start:end])
        start = end
    return records


def check_max_record_bytes(max_record_bytes) -> None:
    """Raises naming ``max_record_bytes`` unless it is ``None`` or an int >= 1."""
    if max_record_bytes is None:
        return
    if isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int) or max_record_bytes < 1:
        raise ValueError(f"max_record_bytes: expected None or an int >= 1, got {max_record_bytes!r}")


def record_sizes(split: str, max_record_bytes: Optional[int] = None) -> list[int]:
    """The bytes of each record of ``split``, in file order, without writing anything.

    >>> max(record_sizes("train", 65536)) <= 65536
    True
    """
    return [len(record) for path in source_files(split)
            for record in split_document(path.read_bytes(), max_record_bytes)]


def tfrecord_file(split: str, cache_dir: Optional[str | os.PathLike] = None,
                  max_record_bytes: Optional[int] = None) -> str:
    """The TFRecord file of ``split``'s documents, written to the cache on first use.

    With ``max_record_bytes``, files longer than that are split (:func:`split_document`).
    """
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    check_max_record_bytes(max_record_bytes)
    version = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    name = f"stdlib-text-v{_VERSION}-py{version}-{split}"
    if max_record_bytes is not None:
        name += f"-max{max_record_bytes}"

    def build(directory: Path) -> None:
        with tf.io.TFRecordWriter(str(directory / f"{split}.tfrecord")) as writer:
            for path in source_files(split):
                for record in split_document(path.read_bytes(), max_record_bytes):
                    writer.write(record)

    return str(cache.cached_directory(cache.cache_root(cache_dir), name, build) / f"{split}.tfrecord")
