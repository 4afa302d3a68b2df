"""Per-request cache of model outputs (LLM, ASR) — docs/corpora/howtostep.md ("every step is cached (ASR and LLM per
request, keyed by input hash, model id, decoding parameters, code version), so changing a threshold never re-runs ASR
or the LLM").

One SQLite file, one table ``requests(key TEXT PRIMARY KEY, value TEXT)``; values are JSON text (never pickle). WAL
journal and a 60 s busy timeout let several processes (process pools, Ray actors) read and write the same file at
once; every :meth:`RequestCache.put_many` is one ``BEGIN IMMEDIATE`` transaction. A connection is never shared across
``fork``: a child process (or an unpickled copy) opens its own.

Every value is checked when read: the ``sha`` column holds the sha256 of the value's JSON text as
written, and a value whose text differs (a byte changed on disk) is a miss, with one warning line, so the model is
asked again and the answer written again. Rows written before the column existed (``sha`` NULL) are read unchecked. A
file SQLite no longer reads (cut short: "database disk image is malformed", "file is not a database") is moved aside
to ``<name>.damaged`` with one warning line and the cache starts empty.

:class:`ModelOutputCache` keeps the same requests under the same keys in a folder that the builds of every corpus
share (``--model-outputs``, docs/architecture.md "Caching and resume"): ShowHowTo and HowToStep transcribe the same
HowTo100M videos with the same ASR model, and the second corpus's build finds the first one's transcripts there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

BUSY_TIMEOUT_S = 60.0  # PLAN.md interfaces: "sqlite (WAL, busy_timeout 60 s)"
_CHUNK = 500  # keys per SELECT (SQLite's default limit on host parameters is 999 in old builds)

log = logging.getLogger(__name__)


def is_damaged_db(exc: BaseException) -> bool:
    """Whether an sqlite3 error says the file itself is damaged (not locked, busy or unopenable)."""
    return type(exc) is sqlite3.DatabaseError or (isinstance(exc, sqlite3.DatabaseError) and any(
        w in str(exc) for w in ("malformed", "not a database")))


def set_aside_damaged_db(path: Path) -> None:
    """Move a damaged SQLite file (and its WAL files) aside to ``<name>.damaged``: the cache starts again empty."""
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{path}{suffix}")
        if src.exists():
            os.replace(src, Path(f"{path}.damaged{suffix}"))


def add_sha_column(db: sqlite3.Connection, table: str) -> None:
    """Add the ``sha`` column to a table of an earlier build (two processes may race: the loser's error is fine)."""
    if "sha" not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
        try:
            db.execute(f"ALTER TABLE {table} ADD COLUMN sha TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise


class RequestCache:
    """``get_many``/``put_many`` JSON values by string key (see :meth:`key`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # Ray actors call from a thread other than the one that built the object
        self._db: sqlite3.Connection | None = None
        self._pid = -1
        self._connect()

    # ------------------------------------------------------------------------------------------------ connection

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None and self._pid == os.getpid():
            return self._db
        try:
            return self._open()
        except sqlite3.DatabaseError as exc:
            if not is_damaged_db(exc):
                raise
            self._set_aside(exc)
            return self._open()

    def _set_aside(self, exc: BaseException) -> None:
        log.warning("damaged request cache %s (%s): moved aside to %s.damaged, its requests are made again",
                    self.path, exc, self.path.name)
        if self._db is not None and self._pid == os.getpid():
            self._db.close()
        self._db = None
        set_aside_damaged_db(self.path)

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:  # switching to WAL needs a moment's exclusive lock: processes opening the file together retry
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("CREATE TABLE IF NOT EXISTS requests (key TEXT PRIMARY KEY, value TEXT NOT NULL, sha TEXT)")
                add_sha_column(db, "requests")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    db.close()
                    raise
                time.sleep(0.05)
            except sqlite3.DatabaseError:
                db.close()
                raise
        self._db, self._pid = db, os.getpid()
        return db

    def __getstate__(self) -> dict[str, Any]:  # picklable for process pools / Ray: the copy opens its own connection
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ API

    @staticmethod
    def key(**parts: Any) -> str:
        """sha256 (hex) of the canonical JSON of ``parts`` (sorted keys, no spaces, UTF-8); parts must be JSON."""
        blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The decoded values of the ``keys`` present (absent keys are simply missing from the result, as are values
        whose text is not the one written: one warning line names them)."""
        wanted = list(dict.fromkeys(keys))
        out: dict[str, Any] = {}
        damaged: list[str] = []
        with self._lock:
            try:
                db = self._connect()
                for i in range(0, len(wanted), _CHUNK):
                    chunk = wanted[i:i + _CHUNK]
                    q = f"SELECT key, value, sha FROM requests WHERE key IN ({','.join('?' * len(chunk))})"
                    for k, v, sha in db.execute(q, chunk):
                        try:
                            text = v.encode("utf-8", "surrogatepass")
                            if sha is not None and hashlib.sha256(text).hexdigest() != sha:
                                raise ValueError("sha256 differs")
                            out[k] = json.loads(v)
                        except (ValueError, AttributeError, UnicodeError):
                            damaged.append(k)
            except sqlite3.DatabaseError as exc:
                if not is_damaged_db(exc):
                    raise
                self._set_aside(exc)
                return {}
        if damaged:
            log.warning("damaged request cache %s: %d entr%s whose bytes differ from those written (%s%s): asked "
                        "again", self.path, len(damaged), "y" if len(damaged) == 1 else "ies", ", ".join(damaged[:3]),
                        ", ..." if len(damaged) > 3 else "")
        return out

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Store (or replace) every ``key -> value`` in one transaction; values are JSON-encoded."""
        texts = [(str(k), json.dumps(v, sort_keys=True, ensure_ascii=False, allow_nan=False)) for k, v in items.items()]
        rows = [(k, t, hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest()) for k, t in texts]
        if not rows:
            return
        with self._lock:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")  # take the write lock now: no deadlock upgrading a read transaction
            try:
                db.executemany("INSERT OR REPLACE INTO requests (key, value, sha) VALUES (?, ?, ?)", rows)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM requests").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None


_KEY = re.compile(r"[0-9a-f]{64}")
#: entries are created with the permissions of an ordinary file (``mkstemp`` would make them private to the user)
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class ModelOutputCache:
    """Model outputs that builds of different corpora share (``--model-outputs``): :class:`RequestCache`'s
    ``key``/``get_many``/``put_many`` over a folder of one checked JSON file a request, ``<root>/<key[:2]>/<key>.json``.

    Keys are :meth:`RequestCache.key` digests (a request keyed as in a build's own cache hits here). A file holds
    ``builders.core.checked.checked_json`` of the value's canonical JSON (sorted keys, as the request cache stores it)
    and is read checked: a file whose text is not what was written is a miss (one warning line, counted in
    :attr:`damaged`), so the model is asked again and the file written again. A write goes to a private temp file in
    the entry's folder, renamed onto the entry (``os.replace``): a reader sees the whole file or none, builds and
    workers (processes, Ray actors, threads) that write one key at once each write a whole answer, no lock is held
    and the folder may be on a shared file system. A damaged file costs its own request only.

    ``fallback``: a build's own :class:`RequestCache`, read for the keys missing here (the answers builds kept there
    before the shared cache existed); what it answers is copied here, for the other corpora's builds."""

    key = staticmethod(RequestCache.key)

    def __init__(self, root: str | Path, fallback: RequestCache | None = None):
        self.root = Path(root)
        self.fallback = fallback
        self.damaged = 0  # entries read that were not what was written (asked again)

    def path(self, key: str) -> Path:
        """The file of ``key`` (a :meth:`key` digest: nothing else may name a path)."""
        if not _KEY.fullmatch(key):
            raise ValueError(f"not a request key (64 hex digits): {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The values of the ``keys`` present here or in the fallback (missing and damaged entries are absent)."""
        from ..core.checked import DamagedCache, read_checked_json

        out: dict[str, Any] = {}
        damaged: list[str] = []
        for k in dict.fromkeys(keys):
            try:
                out[k] = read_checked_json(self.path(k))
            except FileNotFoundError:
                continue
            except DamagedCache as exc:
                damaged.append(f"{k[:12]}... ({exc.why})")
        if damaged:
            self.damaged += len(damaged)
            log.warning("damaged model-output cache %s: %d entr%s not what was written (%s%s): asked again",
                        self.root, len(damaged), "y" if len(damaged) == 1 else "ies", ", ".join(damaged[:3]),
                        ", ..." if len(damaged) > 3 else "")
        missing = [k for k in dict.fromkeys(keys) if k not in out]
        if self.fallback is not None and missing:
            older = self.fallback.get_many(missing)
            self.put_many(older)
            out.update(older)
        return out

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Write every ``key -> value`` (JSON; ``ValueError``/``TypeError`` as ``json.dumps``), each atomically."""
        from ..core.checked import checked_json

        for k, v in items.items():
            target = self.path(str(k))
            canonical = json.loads(json.dumps(v, sort_keys=True, ensure_ascii=False, allow_nan=False))
            data = checked_json(canonical).encode("utf-8")
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            try:
                os.fchmod(fd, 0o666 & ~_UMASK)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("??/*.json"))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fallback is not None:
            self.fallback.close()
