"""Fingerprints that key the caches: inputs (file contents), step name + version + config, and the chain.

docs/architecture.md, "Caching and resume": datasets' own fingerprints ignore file contents, so every cache key here includes a hash of the
input files. Files up to ``FULL_HASH_LIMIT`` bytes are hashed whole; larger ones by size, mtime and their first
and last MiB (docs/corpora/sieve_swap.md allows sizes + mtimes).

**Directories.** A directory's fingerprint is the sha256 of, for every regular file below it in ``os.walk`` order
(a folder's files sorted by name, then its sub-folders sorted by name, depth first), the file's path relative to the
directory (UTF-8) followed by the hex sha256 of the file. These are the values of the first implementation, so
caches keyed by them stay valid. Walking follows ``os.walk(followlinks=False)``: a symbolic link to a *file* is
followed (the target's content counts, under the link's name); a symbolic link to a *directory* is not descended
and does not count, so link cycles cannot loop (a bind-mounted folder that contains itself is skipped the same
way). Sockets, FIFOs and device files are skipped (never opened). The directory given itself may be a link; if it
cannot be listed, an ``OSError`` names it.

**Bad entries.** An entry below the directory that cannot be fingerprinted (a dangling link, a loop of links, a
file or sub-folder that cannot be read) does not stop the fingerprint: it counts as its relative path followed by
``!`` and the name of its problem (:func:`error_problem`, e.g. ``!dangling symbolic link``) instead of a content
hash, and is listed under ``"unreadable"`` in the result. A directory of good entries only keeps the value above;
adding, fixing or removing a bad entry changes it. The readers of input directories drop such entries, and special
files, by name (``unreadable_input_entry``, docs/reason-codes.md). A file given directly that cannot be read, or
the directory given when it cannot be listed, still raises.

**Memo.** :class:`FingerprintMemo` (one SQLite file, WAL, several processes may share it) remembers each file's
hash under its absolute path with the (size, mtime_ns, inode) it had when read. With a memo, a directory is walked
with :func:`os.scandir` (one ``stat`` a file, no ``open``) and only the files whose (size, mtime_ns, inode) changed
are read again. A remembered hash is trusted only if the file's mtime was at least ``RACY_NS`` older than the moment
it was read ("racily clean" files, as git calls them): a file rewritten with the same size within the filesystem's
timestamp granularity of the previous read keeps its mtime, so a recent mtime proves nothing and such a file is read
again until it is old enough. Like git and make, the memo cannot see an edit that keeps the size and inode and
then sets the mtime back to its old value (``touch -r``, ``rsync -t`` onto the same inode); hash without a memo if
inputs are edited that way.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import stat as stat_mod
import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Self

FULL_HASH_LIMIT = 256 * 1024 * 1024
_EDGE = 1024 * 1024
_CHUNK = 1 << 20
#: a memo entry is trusted only if the file's mtime is this much older than the moment it was read (2 s covers
#: coarse timestamps: ext3/HFS+ 1 s, FAT 2 s; ext4/xfs/btrfs tick-granular, a few ms)
RACY_NS = 2_000_000_000

_SCHEMA_VERSION = 1
_SEP = os.sep.encode()
_abandoned: list[sqlite3.Connection] = []  # connections inherited through fork: never used nor closed in the child


def stable_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def hash_obj(*parts: Any) -> str:
    return hashlib.sha256(stable_json(parts).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------------------------ memo


def _i64(n: int) -> int:
    """An unsigned 64-bit number (an inode) as SQLite's signed INTEGER."""
    return n - (1 << 64) if n >= (1 << 63) else n


class FingerprintMemo:
    """Content hashes of files by (absolute path, size, mtime_ns, inode), kept in a SQLite file.

    Several processes may open the same file at once (WAL journal, writes in short ``BEGIN IMMEDIATE``
    transactions, a busy timeout of ``timeout`` seconds). One object may be shared by threads (a lock guards the
    connection), used across ``fork`` (the child opens its own connection) and pickled (only the path travels).
    ``hits`` / ``misses`` count the files answered from the memo / read, in this process.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 60.0):
        self.path = Path(path)
        self.timeout = timeout
        self.hits = 0
        self.misses = 0
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._closed = False
        self._db()  # open now: a bad memo path fails here, not in the middle of a build

    # -- connection
    def _db(self) -> sqlite3.Connection:
        if self._closed:
            raise ValueError(f"fingerprint memo {self.path} is closed")
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:  # inherited through fork: SQLite forbids using (or closing) it in the child
            _abandoned.append(self._conn)
            self._conn = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")  # stays 'delete' where WAL is impossible (NFS): still correct
            conn.execute("PRAGMA synchronous=NORMAL")
            if conn.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA_VERSION:
                conn.execute("DROP TABLE IF EXISTS files")  # another layout (or none yet): start again
                conn.execute("DROP TABLE IF EXISTS memo")  # a draft's table (path TEXT), never released
            conn.execute("CREATE TABLE IF NOT EXISTS files (dir BLOB NOT NULL, name BLOB NOT NULL, "
                         "size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, inode INTEGER NOT NULL, "
                         "mode TEXT NOT NULL, sha256 TEXT NOT NULL, read_ns INTEGER NOT NULL, "
                         "PRIMARY KEY (dir, name)) WITHOUT ROWID")
            if conn.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        except sqlite3.DatabaseError as e:
            raise OSError(f"cannot open the fingerprint memo {self.path}: {e} (it is only a cache: if it is "
                          "damaged, delete it and rerun)") from e
        self._conn, self._pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
            self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], timeout=state["timeout"])

    def __len__(self) -> int:
        with self._lock:
            return self._db().execute("SELECT COUNT(*) FROM files").fetchone()[0]

    def __repr__(self) -> str:
        return f"FingerprintMemo({str(self.path)!r})"

    # -- rows: (name, size, mtime_ns, inode, mode, sha256, read_ns) of one directory (absolute, bytes)
    def _entries(self, d: bytes) -> dict[bytes, tuple[int, int, int, str, str, int]]:
        with self._lock:
            rows = self._db().execute("SELECT name, size, mtime_ns, inode, mode, sha256, read_ns FROM files "
                                      "WHERE dir = ?", (d,)).fetchall()
        return {r[0]: r[1:] for r in rows}

    def _entry(self, d: bytes, name: bytes) -> tuple[int, int, int, str, str, int] | None:
        with self._lock:
            return self._db().execute("SELECT size, mtime_ns, inode, mode, sha256, read_ns FROM files "
                                      "WHERE dir = ? AND name = ?", (d, name)).fetchone()

    def _dirs_under(self, top: bytes) -> list[bytes]:
        """The folders strictly below ``top`` that have rows."""
        lo = top.rstrip(_SEP) + _SEP
        hi = top.rstrip(_SEP) + bytes([_SEP[0] + 1])
        with self._lock:
            rows = self._db().execute("SELECT DISTINCT dir FROM files WHERE dir >= ? AND dir < ?",
                                      (lo, hi)).fetchall()
        return [r[0] for r in rows]

    def _update(self, put: list[tuple], drop: list[tuple[bytes, bytes]], drop_dirs: list[bytes]) -> None:
        """Write the rows of one fingerprint in one transaction. Best effort: the fingerprint is right whether or
        not it is remembered, so a failed write (database locked past the timeout, disk full) only warns."""
        if not (put or drop or drop_dirs):
            return
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    if drop:
                        db.executemany("DELETE FROM files WHERE dir = ? AND name = ?", drop)
                    if drop_dirs:
                        db.executemany("DELETE FROM files WHERE dir = ?", [(d,) for d in drop_dirs])
                    if put:
                        db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)", put)
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as e:
                warnings.warn(f"fingerprint memo {self.path}: {len(put)} hash(es) not remembered ({e}); they "
                              "will be computed again next time", RuntimeWarning, stacklevel=4)


# --------------------------------------------------------------------------------------------------------- hashing


def _os_error(e: OSError, what: str, path: bytes | str, why: str = "") -> OSError:
    """``e`` again (same errno, so the same ``OSError`` subclass) with a message naming the input."""
    reason = f"{why}: {e.strerror or e}" if why else (e.strerror or str(e))
    message = f"cannot fingerprint {what} {os.fsdecode(path)}: {reason}"
    return OSError(e.errno, message) if e.errno is not None else OSError(message)


def _read_n(fd: int, n: int) -> bytes:
    parts = []
    while n > 0:
        b = os.read(fd, n)
        if not b:
            break
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


#: O_NONBLOCK: a file swapped for a FIFO between the stat and the open cannot block the build
_O_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)


def _read_hash(path: bytes, st: os.stat_result) -> tuple[str, str, os.stat_result, bool]:
    """(sha256, mode, fstat after reading, whether it is still the file ``st`` describes) of one regular file;
    ``st`` is its ``stat`` taken before (it picks the mode and, for big files, goes into the hash)."""
    h = hashlib.sha256()
    try:
        fd = os.open(path, _O_FLAGS)
        try:
            if st.st_size <= FULL_HASH_LIMIT:
                while True:
                    chunk = os.read(fd, _CHUNK)
                    if not chunk:
                        break
                    h.update(chunk)
                mode = "content"
            else:
                h.update(_read_n(fd, _EDGE))
                os.lseek(fd, max(0, st.st_size - _EDGE), os.SEEK_SET)
                h.update(_read_n(fd, _EDGE))
                h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
                mode = "size+mtime+edges"
            after = os.fstat(fd)
        finally:
            os.close(fd)
    except OSError as e:
        if os.path.islink(path) and not os.path.exists(path):
            raise _os_error(e, "input", path, "dangling symbolic link") from e
        raise _os_error(e, "input file", path) from e
    # same inode, size and mtime after the read as in the stat before: nothing replaced or wrote it meanwhile
    stable = (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    return h.hexdigest(), mode, after, stable


def _mode_for(size: int) -> str:
    return "content" if size <= FULL_HASH_LIMIT else "size+mtime+edges"


class _Hasher:
    """Hashes the files of one ``file_fingerprint`` call, through the memo when there is one."""

    def __init__(self, memo: FingerprintMemo | None):
        self.memo = memo
        self.t0 = time.time_ns()  # every read below happens after this moment
        self.put: list[tuple] = []
        self.drop: list[tuple[bytes, bytes]] = []

    def file(self, d: bytes, name: bytes, path: bytes, st: os.stat_result,
             known: tuple | None) -> tuple[str, str, int]:
        """(sha256, mode, size); ``st`` is the stat already taken (by the walk), ``known`` the memo's row."""
        if known is not None:
            size, mtime_ns, inode, mode, sha, read_ns = known
            if (size == st.st_size and mtime_ns == st.st_mtime_ns and inode == _i64(st.st_ino)
                    and mode == _mode_for(size) and mtime_ns < read_ns - RACY_NS):
                self.memo.hits += 1  # type: ignore[union-attr]
                return sha, mode, size
        sha, mode, after, stable = _read_hash(path, st)
        if self.memo is not None:
            self.memo.misses += 1
            if stable:
                self.put.append((d, name, st.st_size, st.st_mtime_ns, _i64(st.st_ino), mode, sha, self.t0))
            elif known is not None:
                self.drop.append((d, name))
        return sha, mode, st.st_size if stable else after.st_size

    def flush(self, drop_dirs: list[bytes] = ()) -> None:
        if self.memo is not None:
            self.memo._update(self.put, self.drop, list(drop_dirs))
        self.put, self.drop = [], []


def _scan(d: bytes) -> list[os.DirEntry[bytes]]:
    try:
        with os.scandir(d) as it:
            return list(it)
    except OSError as e:
        raise _os_error(e, "input folder", d) from e


_FILE_TYPES = ((stat_mod.S_ISFIFO, "FIFO"), (stat_mod.S_ISSOCK, "socket"), (stat_mod.S_ISCHR, "character device"),
               (stat_mod.S_ISBLK, "block device"), (stat_mod.S_ISDIR, "directory"))


def kind_of(mode: int) -> str:
    """The name of a file type that is not a regular file (``"FIFO"``, ``"directory"``, ...)."""
    for test, name in _FILE_TYPES:
        if test(mode):
            return name
    return f"special file {stat_mod.S_IFMT(mode):o}"


def error_problem(err: OSError, path: str | bytes | os.PathLike) -> str:
    """A short, deterministic name of why ``path`` could not be read (no locale-dependent text)."""
    if err.errno == errno.ELOOP:
        return "loop of symbolic links"
    if isinstance(err, FileNotFoundError) and os.path.islink(path):
        return "dangling symbolic link"
    if isinstance(err, PermissionError):
        return "permission denied"
    return f"unreadable ({errno.errorcode.get(err.errno, err.errno) if err.errno else type(err).__name__})"


def entry_problem(path: str | bytes | os.PathLike, *, directory_ok: bool = False) -> str | None:
    """Why a directory entry cannot be read as an input file, or ``None`` for a regular file this process may read
    (a link to one included). ``directory_ok``: a directory is not a problem (a reader that descends into it)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return error_problem(e, path)
    if stat_mod.S_ISREG(st.st_mode):
        return None if os.access(path, os.R_OK) else "permission denied"
    if directory_ok and stat_mod.S_ISDIR(st.st_mode):
        return None
    return kind_of(st.st_mode)


def _dir_fingerprint(top: bytes, hasher: _Hasher) -> tuple[int, str, list[dict[str, str]]]:
    """(number of files, sha256, bad entries) of the directory ``top`` (absolute, normalised, bytes); each bad entry
    is ``{"path": relative path, "problem": ...}``, in walk order."""
    memo = hasher.memo
    h = hashlib.sha256()
    n = 0
    seen_dirs: set[bytes] = set()
    bad: list[dict[str, str]] = []

    def bad_entry(rel_name: bytes, problem: str) -> None:
        h.update(rel_name)
        h.update(b"!" + problem.encode())
        bad.append({"path": os.fsdecode(rel_name), "problem": problem})

    try:
        top_st = os.stat(top)
    except OSError as e:
        raise _os_error(e, "input folder", top) from e
    # stack of (absolute dir, relative prefix, (st_dev, st_ino) of it and its ancestors); popped in os.walk order
    stack: list[tuple[bytes, bytes, frozenset[tuple[int, int]]]] = [
        (top, b"", frozenset({(top_st.st_dev, top_st.st_ino)}))]
    while stack:
        d, rel, ancestors = stack.pop()
        try:
            entries = _scan(d)
        except OSError as err:
            if d == top:
                raise
            bad_entry(rel.rstrip(_SEP), error_problem(err.__cause__ or err, d))  # type: ignore[arg-type]
            continue
        seen_dirs.add(d)
        files: list[os.DirEntry[bytes]] = []
        dirs: list[os.DirEntry[bytes]] = []
        for e in entries:
            try:
                is_dir = e.is_dir()  # follows links, as os.walk
            except OSError:
                is_dir = False
            if is_dir:
                if not e.is_symlink():
                    dirs.append(e)
            else:
                files.append(e)
        known = memo._entries(d) if memo is not None else {}
        files.sort(key=lambda e: e.name)
        for e in files:
            row = known.pop(e.name, None)  # a bad entry's old row is forgotten with the rows of files gone
            try:
                st = e.stat()  # follows links; cached by the DirEntry
            except OSError as err:
                bad_entry(rel + e.name, error_problem(err, e.path))
                continue
            if not stat_mod.S_ISREG(st.st_mode):
                continue  # socket, FIFO, device: skipped, as always (never opened); the readers drop them by name
            try:
                sha, _, _ = hasher.file(d, e.name, e.path, st, row)
            except OSError as err:
                bad_entry(rel + e.name, error_problem(err.__cause__ or err, e.path))  # type: ignore[arg-type]
                if row is not None:
                    hasher.drop.append((d, e.name))
                continue
            h.update(rel + e.name)
            h.update(sha.encode())
            n += 1
        hasher.drop.extend((d, name) for name in known)  # files gone since the last run
        dirs.sort(key=lambda e: e.name)
        for e in reversed(dirs):
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as err:  # gone or unreadable since the listing: pushed anyway, its scan names it
                stack.append((e.path, rel + e.name + _SEP, ancestors))
                continue
            ident = (st.st_dev, st.st_ino)
            if ident in ancestors:
                continue  # a folder that contains itself (bind mount): a cycle
            stack.append((e.path, rel + e.name + _SEP, ancestors | {ident}))
    if memo is not None:
        gone = [x for x in memo._dirs_under(top) if x not in seen_dirs]
        hasher.flush(gone)
    return n, h.hexdigest(), bad


def file_fingerprint(path: str | os.PathLike[str], memo: FingerprintMemo | None = None) -> dict[str, Any]:
    """Content fingerprint of a file or of a directory (every regular file below it, sorted).

    Returns ``{"path", "kind": "file", "bytes", "mode", "sha256"}`` or ``{"path", "kind": "dir", "files",
    "sha256"}`` (plus ``"unreadable"``, the bad entries of the module docstring, when there are any); ``path`` is the
    path as given (normalised as :class:`pathlib.Path` does). With a ``memo``, only the files whose (size, mtime_ns, inode) changed since they were last read are read; the values are the same.
    """
    p = Path(path)
    absolute = os.path.abspath(os.fsencode(p))
    hasher = _Hasher(memo)
    try:
        st = os.stat(absolute)
    except OSError as e:
        why = "dangling symbolic link" if os.path.islink(absolute) else ""
        raise _os_error(e, "input", absolute, why) from e
    if stat_mod.S_ISDIR(st.st_mode):
        n, sha, bad = _dir_fingerprint(absolute, hasher)
        fp: dict[str, Any] = {"path": str(p), "kind": "dir", "files": n, "sha256": sha}
        if bad:
            fp["unreadable"] = bad
        return fp
    if not stat_mod.S_ISREG(st.st_mode):
        raise OSError(f"cannot fingerprint input {p}: not a regular file or directory")
    d, name = os.path.split(absolute)
    row = memo._entry(d, name) if memo is not None else None
    sha, mode, size = hasher.file(d, name, absolute, st, row)
    hasher.flush()
    return {"path": str(p), "kind": "file", "bytes": size, "mode": mode, "sha256": sha}


def fingerprints(paths: Iterable[str | os.PathLike[str]], memo: FingerprintMemo | None = None) -> list[dict[str, Any]]:
    """:func:`file_fingerprint` of each path, in order, sharing one memo."""
    return [file_fingerprint(p, memo) for p in paths]


# --------------------------------------------------------------------------------------------------- manifests


def relative_paths(paths: Iterable[str]) -> dict[str, str]:
    """Each path relative to the common root of all of them, so that a release manifest holds no absolute path (nor
    the user name in it).

    The root is ``os.path.commonpath`` of the absolute paths; when that root is itself one of the inputs (a single
    input, or a folder holding the others) its parent is taken, so every input keeps at least its own name: a
    single file gives its name, ``/data/feats`` with ``/data/feats/x.npy`` give ``feats`` and ``feats/x.npy``.
    Paths use ``/``; no ``..`` can appear.
    """
    absolute = {p: os.path.abspath(p) for p in paths}
    rel: dict[str, str] = {}
    if absolute:
        values = sorted(set(absolute.values()))
        try:
            root = os.path.commonpath(values)
        except ValueError:  # different drives (Windows): nothing in common
            root = None
        if root is not None and root in values:
            root = os.path.dirname(root)
        for p, a in absolute.items():
            r = os.path.basename(a) if root is None else os.path.relpath(a, root)
            rel[p] = Path(r).as_posix()
    return rel


def relative_inputs(fps: Mapping[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``fps`` (stage -> fingerprints) with every ``"path"`` made relative by :func:`relative_paths`. The input is
    not modified; entries without a ``"path"`` are copied."""
    rel = relative_paths(f["path"] for items in fps.values() for f in items if "path" in f)
    return {stage: [{**f, "path": rel[f["path"]]} if "path" in f else dict(f) for f in items]
            for stage, items in fps.items()}


# ------------------------------------------------------------------------------------------------ per-item inputs


def item_file_sha(path: str | os.PathLike[str] | None, memo: FingerprintMemo | None) -> str:
    """The content sha256 of one item's input file (a video's WhisperX json, media or feature file) through the
    memo (a ``stat`` and a look-up when unchanged), ``"-"`` when there is no such file: the building block of
    :meth:`builders.core.step.Step.item_digest`.

    A path that is not a regular file (a FIFO, a device, a directory) or a loop of symlinks is never opened: its
    digest names what it is (``"special:<file type>"``, ``"symlink-loop"``), so the shard is keyed and its step's
    reader drops the item by name (docs/reason-codes.md). Other OS errors (a permission, an I/O error) raise."""
    if path is None:
        return "-"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "-"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "symlink-loop"
        raise _os_error(e, "input", os.fsencode(path)) from e
    if not stat_mod.S_ISREG(st.st_mode):
        return f"special:{stat_mod.S_IFMT(st.st_mode):o}"
    return file_fingerprint(path, memo)["sha256"]


_OPEN_MEMOS: dict[str, FingerprintMemo] = {}


def shared_memo(path: str | os.PathLike[str]) -> FingerprintMemo:
    """One open :class:`FingerprintMemo` per path and process (runners call ``item_digest`` once a shard)."""
    key = os.path.abspath(path)
    memo = _OPEN_MEMOS.get(key)
    if memo is None or memo._closed:
        memo = _OPEN_MEMOS[key] = FingerprintMemo(key)
    return memo
