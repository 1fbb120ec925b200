"""The cache directory for embedded data, written once and safely under concurrent use."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Callable, Optional

CACHE_ENV = "ECHOING_CACHE_DIR"
_READY = "READY"  # Written last into a finished entry; an entry without it is not used.


def cache_root(cache_dir: Optional[str | os.PathLike] = None) -> Path:
    """The cache directory: the argument, else ``$ECHOING_CACHE_DIR``, else ``~/.cache/echoing``.

    Example:

    >>> str(cache_root("/tmp/some-cache"))
    '/tmp/some-cache'
    """
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path.home() / ".cache" / "echoing"


def cached_directory(root: Path, name: str, build: Callable[[Path], None]) -> Path:
    """Returns ``root/name``, building it first with ``build(directory)`` if it is not there.

    Two processes may build the same entry at once: each builds into a private temporary
    directory and renames it into place; the rename is atomic, the first one wins, and the
    loser discards its copy. A reader therefore sees a complete entry or none.

    Raises:
      PermissionError, OSError: when the cache directory cannot be created or written,
        with the path in the message.
    """
    final = root / name
    if (final / _READY).exists():
        return final
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise type(error)(f"cache_dir: cannot create the cache directory {str(root)!r}: {error}") from error
    if not os.access(root, os.W_OK | os.X_OK):
        raise PermissionError(f"cache_dir: the cache directory {str(root)!r} is not writable; set {CACHE_ENV} or pass cache_dir")
    if final.exists() and not (final / _READY).exists():
        raise OSError(f"cache_dir: {str(final)!r} exists but is incomplete or unreadable; delete it to rebuild")
    temporary = root / f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex}"
    temporary.mkdir()
    try:
        build(temporary)
        (temporary / _READY).write_text("complete\n")
        try:
            os.rename(temporary, final)
        except OSError:
            if not (final / _READY).exists():  # Not a lost race: a real failure.
                raise
    finally:
        if temporary.exists():
            shutil.rmtree(temporary, ignore_errors=True)
    return final
