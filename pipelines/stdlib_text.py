"""Embedded text data: the Python standard library's own source, which every machine has.

The ``.py`` files under the running interpreter's standard library (test packages and
installed third-party packages excluded) are split into train and evaluation by a stable
hash of each file's path relative to the library root, and written once to the cache as
TFRecord files of one document (a file's bytes) per record. Different Python versions
hold different text; one interpreter always gives the same data.
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


def tfrecord_file(split: str, cache_dir: Optional[str | os.PathLike] = None) -> str:
    """The TFRecord file of ``split``'s documents, written to the cache on first use."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    version = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    name = f"stdlib-text-v{_VERSION}-py{version}-{split}"

    def build(directory: Path) -> None:
        with tf.io.TFRecordWriter(str(directory / f"{split}.tfrecord")) as writer:
            for path in source_files(split):
                writer.write(path.read_bytes())

    return str(cache.cached_directory(cache.cache_root(cache_dir), name, build) / f"{split}.tfrecord")
