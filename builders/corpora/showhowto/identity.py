"""The key of a video's (or transcript's) file without reading it whole (docs/corpora/showhowto.md, "Shards,
batching and caching"): its size and the sha256 of its first and last MiB, remembered under the file's cheap identity
(size, mtime, inode), and the full sha256 read only when that identity changes while size and edges stay the same.

At paper scale a video is tens of MB: hashing 1.24M of them in full reads the corpus once more before any step runs.
A key here reads 2 MiB of a file once, then a ``stat`` a build while the file is unchanged:

* first sight: ``e:`` + sha256(size, edges). For a file of at most 2 MiB (a transcript) the edges are the whole file,
  so the key is its content's;
* identity unchanged (and the file was not written within ``RACY_NS`` of being read, as git's racily-clean rule):
  the remembered key;
* identity changed: the edges are read again. Other size or edges: a new ``e:`` key. Same size and edges (a
  ``touch``, a copy, or an edit inside the file): the full sha256 decides; the key stays when it equals the one
  remembered, else it becomes ``f:`` + sha256, so a large file touched once after its first build reruns once and
  never again.

The memo is one SQLite file beside the build's fingerprint memo, each entry with the sha256 of its values: a damaged
entry is forgotten (its file gets an ``f:`` key, read in full), a file that is not a database is replaced, and every
large file is then read in full once: never a key taken from a damaged memo. Like git, it cannot see an edit that
keeps size, inode and edges and sets the mtime back (``touch -r``).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from pathlib import Path

from ...core.fingerprint import RACY_NS

EDGE = 1024 * 1024
#: the memo's file name, in the folder of the build's fingerprint memo
MEMO_FILE = "file_identity.sqlite"


def _edges(path: str, size: int) -> str:
    """sha256 of the first and last MiB (the whole file when it is at most 2 MiB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= 2 * EDGE:
            h.update(f.read())
        else:
            h.update(f.read(EDGE))
            f.seek(size - EDGE)
            h.update(f.read(EDGE))
    return h.hexdigest()


def _full(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _entry_sha(values: tuple) -> str:
    return hashlib.sha256(repr(values).encode("utf-8")).hexdigest()


class IdentityMemo:
    """path -> (size, mtime_ns, inode, read_ns, edges, key, full) in one SQLite file (WAL; several processes may
    share it; a process opens its own connection, also after a ``fork``)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.recovered = False  # the file was damaged and replaced: every large file is read in full once
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def _db(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid != os.getpid():  # inherited through fork: never used nor closed
            _abandoned.append(self._conn)
            self._conn = None
        if self._conn is None:
            self._conn, self._pid = self._open(), os.getpid()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in (0, 1):
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # an entry lost in a crash is only read again
                conn.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INT, mtime_ns INT, "
                             "inode INT, read_ns INT, edges TEXT, key TEXT, full TEXT, sha TEXT)")
                conn.execute("SELECT count(*) FROM files WHERE rowid < 2").fetchone()
                return conn
            except sqlite3.DatabaseError:  # not a database (damaged): replaced, never trusted
                conn.close()
                if attempt:
                    raise
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                self.recovered = True
        raise AssertionError("unreachable")

    def get(self, path: str) -> tuple | None | bool:
        """The entry's values, None when there is none, False when it is damaged (its sha does not match)."""
        with self._lock:
            row = self._db().execute("SELECT size, mtime_ns, inode, read_ns, edges, key, full, sha FROM files "
                                     "WHERE path = ?", (path,)).fetchone()
        if row is None:
            return None
        values, sha = tuple(row[:7]), row[7]
        return values if sha == _entry_sha(values) else False

    def put(self, path: str, values: tuple) -> None:
        with self._lock:
            self._db().execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               (path, *values, _entry_sha(values)))

    def key(self, path: str, st: os.stat_result) -> str:
        """The key of the regular file ``path`` whose ``stat`` is ``st`` (module docstring)."""
        path = os.path.abspath(path)
        size, mtime, inode = st.st_size, st.st_mtime_ns, st.st_ino % (1 << 63)
        entry = self.get(path)
        if entry and entry[:3] == (size, mtime, inode) and mtime < entry[3] - RACY_NS:
            return entry[5]  # unchanged since it was read: a stat, no read
        now = time.time_ns()
        edges = _edges(path, size)
        small = size <= 2 * EDGE
        sampled = "e:" + hashlib.sha256(f"{size}:{edges}".encode()).hexdigest()
        full = None
        if small:
            key = sampled  # the edges are the whole file: an exact content key
        elif entry is False or (entry is None and self.recovered):
            full = _full(path)  # a damaged memo tells nothing: the content decides
            key = "f:" + full
        elif entry is None or (entry[0], entry[4]) != (size, edges):
            key = sampled  # first sight, or other size or edges: other content
            if mtime >= now - RACY_NS:  # written just now: a rewrite within the mtime's tick would go unseen
                full = _full(path)
        else:  # same size and edges under another identity (or racily read): the full hash decides
            full = _full(path)
            key = entry[5] if entry[6] == full else "f:" + full
        self.put(path, (size, mtime, inode, now, edges, key, full))
        return key


_OPEN: dict[str, IdentityMemo] = {}
_abandoned: list[sqlite3.Connection] = []  # connections inherited through fork (as builders.core.fingerprint)


def identity_memo(folder: str | os.PathLike[str]) -> IdentityMemo:
    """One :class:`IdentityMemo` per folder and process."""
    p = os.path.abspath(Path(folder) / MEMO_FILE)
    memo = _OPEN.get(p)
    if memo is None:
        memo = _OPEN[p] = IdentityMemo(p)
    return memo
