"""Atomic file writes: write to a hidden temp name in the target's folder, then ``os.replace`` it into place
(docs/architecture.md, "Caching and resume"). A reader sees either the old file or the complete new one, never a half-written file.

The temp name is ``.<name>.tmp.<pid>``: hidden (``data_files`` globs such as ``<config>/<split>-*`` and most
listings skip dot files), in the same folder (so the rename stays on one filesystem and is atomic), and per process
(two processes writing the same target do not clobber each other's temp file). The temp file is removed when the
write fails.

This module imports only the standard library, so any part of the toolkit can use it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "temp_name"]


def temp_name(path: str | os.PathLike) -> Path:
    """The hidden temp sibling ``.<name>.tmp.<pid>`` used while ``path`` is being written."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp.{os.getpid()}")


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Persist a rename in ``folder``; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _discard(tmp: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temp ``Path`` to write ``path``'s new content to (e.g. ``pq.write_table(table, tmp)``).

    When the block ends normally the temp file is renamed onto ``path`` (creating the parent folder first); when it
    raises, the temp file is removed, ``path`` is left as it was and the exception propagates. With ``fsync=True`` the
    file and then the folder are flushed to disk.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    _discard(tmp)  # a leftover of a crashed run of a process that had the same pid
    try:
        yield tmp
        if fsync:
            _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise
    if fsync:
        _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path`` as a ``Path``."""
    path = Path(path)
    with atomic_path(path, fsync=fsync) as tmp, open(tmp, "wb") as f:
        f.write(data)
    return path


def atomic_write_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8", fsync: bool = False) -> Path:
    """Write ``text`` (encoded with ``encoding``, newlines kept as given) to ``path`` atomically; returns the path."""
    return atomic_write_bytes(path, text.encode(encoding), fsync=fsync)


def atomic_write_json(path: str | os.PathLike, obj: Any, *, fsync: bool = False, **json_kwargs: Any) -> Path:
    """Write ``json.dumps(obj, **json_kwargs)`` plus a final newline to ``path`` (UTF-8) atomically.

    ``obj`` is serialised before anything touches the disk, so an unserialisable object leaves ``path`` untouched.
    """
    text = json.dumps(obj, **json_kwargs) + "\n"
    return atomic_write_text(path, text, fsync=fsync)
