"""The build's work directory: a marker that says the toolkit made it, a lock that keeps two builds apart, and a
``--fresh`` that only ever deletes what the toolkit made.

* ``.procvid-work-dir`` is written when the toolkit creates the folder (or finds it empty); ``--fresh`` refuses to
  touch a folder without it, or one that holds the current directory or the release folder;
* ``.lock`` (``fcntl.flock``) is held for the whole build: a second build on the same work directory exits with a
  clear message, or waits for the first with ``--wait``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path
from typing import IO

MARKER = ".procvid-work-dir"
LOCK = ".lock"


class WorkDirError(RuntimeError):
    """The work directory cannot be used as asked (not ours to delete, locked by another build)."""


def _is_within(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
        return True
    except ValueError:
        return False


def prepare(work_dir: Path, corpus: str) -> None:
    """Create ``work_dir`` if needed and mark it as the toolkit's when it is new or empty."""
    work_dir = Path(work_dir)
    existed = work_dir.exists()
    if existed and not work_dir.is_dir():
        raise WorkDirError(f"--work-dir {work_dir} exists and is not a directory")
    work_dir.mkdir(parents=True, exist_ok=True)
    if not (work_dir / MARKER).exists() and not any(p.name != LOCK for p in work_dir.iterdir()):
        (work_dir / MARKER).write_text(json.dumps({"corpus": corpus, "created": time.time()}), encoding="utf-8")


class WorkDirLock:
    """An exclusive ``flock`` on ``<work_dir>/.lock`` (released when the process ends, even if it is killed)."""

    def __init__(self, work_dir: Path, wait: bool = False, poll_s: float = 1.0):
        self.path = Path(work_dir) / LOCK
        self.wait, self.poll_s = wait, poll_s
        self._f: IO[str] | None = None

    def __enter__(self) -> WorkDirLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+", encoding="utf-8")
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not self.wait:
                    f.seek(0)
                    holder = f.read().strip() or "another process"
                    f.close()
                    raise WorkDirError(
                        f"another build is using the work directory {self.path.parent} ({holder}); wait for it to "
                        "finish, pass --wait to queue behind it, or use another --work-dir") from None
                time.sleep(self.poll_s)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}")
        f.flush()
        self._f = f
        return self

    def __exit__(self, *exc) -> None:
        if self._f is not None:
            self._f.seek(0)
            self._f.truncate()
            fcntl.flock(self._f, fcntl.LOCK_UN)
            self._f.close()
            self._f = None


def fresh(work_dir: Path, protect: list[Path]) -> None:
    """Empty ``work_dir`` for ``--fresh``, only if the toolkit marked it and it holds none of ``protect`` (the current
    directory, the release folder). The marker and the lock file stay."""
    work_dir = Path(work_dir).resolve()
    if not work_dir.exists():
        return
    if not (work_dir / MARKER).is_file():
        raise WorkDirError(f"--fresh: refusing to delete {work_dir}: it is not a work directory made by this toolkit "
                           f"(no {MARKER} file); delete it yourself or choose another --work-dir")
    for p in protect:
        p = Path(p).resolve()
        if _is_within(p, work_dir):
            raise WorkDirError(f"--fresh: refusing to delete {work_dir}: it contains {p}")
    for child in work_dir.iterdir():
        if child.name in (MARKER, LOCK):
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
