"""Per-request cache of model outputs (LLM, ASR) — docs/corpora/howtostep.md ("every step is cached (ASR and LLM per
request, keyed by input hash, model id, decoding parameters, code version), so changing a threshold never re-runs ASR
or the LLM").

One SQLite file, one table ``requests(key TEXT PRIMARY KEY, value TEXT)``; values are JSON text (never pickle). WAL
journal and a 60 s busy timeout let several processes (process pools, Ray actors) read and write the same file at
once; every :meth:`RequestCache.put_many` is one ``BEGIN IMMEDIATE`` transaction. A connection is never shared across
``fork``: a child process (or an unpickled copy) opens its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

BUSY_TIMEOUT_S = 60.0  # PLAN.md interfaces: "sqlite (WAL, busy_timeout 60 s)"
_CHUNK = 500  # keys per SELECT (SQLite's default limit on host parameters is 999 in old builds)


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
        db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:  # switching to WAL needs a moment's exclusive lock: processes opening the file together retry
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("CREATE TABLE IF NOT EXISTS requests (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    db.close()
                    raise
                time.sleep(0.05)
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
        """The decoded values of the ``keys`` present (absent keys are simply missing from the result)."""
        wanted = list(dict.fromkeys(keys))
        out: dict[str, Any] = {}
        with self._lock:
            db = self._connect()
            for i in range(0, len(wanted), _CHUNK):
                chunk = wanted[i:i + _CHUNK]
                q = f"SELECT key, value FROM requests WHERE key IN ({','.join('?' * len(chunk))})"
                for k, v in db.execute(q, chunk):
                    out[k] = json.loads(v)
        return out

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Store (or replace) every ``key -> value`` in one transaction; values are JSON-encoded."""
        rows = [(str(k), json.dumps(v, sort_keys=True, ensure_ascii=False, allow_nan=False)) for k, v in items.items()]
        if not rows:
            return
        with self._lock:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")  # take the write lock now: no deadlock upgrading a read transaction
            try:
                db.executemany("INSERT OR REPLACE INTO requests (key, value) VALUES (?, ?)", rows)
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
