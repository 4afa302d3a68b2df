"""On-disk cache of sentence embeddings (docs/architecture.md, "Caching and resume").

One SQLite file per work directory; several processes may read and write it (WAL mode). Changing a threshold
downstream never re-embeds; changing the model changes the key.

Vectors are cached per *set* of texts (a work shard's distinct ASR segments), keyed by
(model id, sha1 of the sorted distinct texts), not per text: a transformer's float output for a
text depends in its last bits on the padded batch it was computed in, so per-text reuse across shards would make the
result depend on which shard happened to embed a repeated line first (parallel runners) or on what an earlier build
left in the cache. Per-set keys keep every build bit-identical whatever the runner, and a rerun (resume, a changed
threshold) still finds every vector.

The recipe-step pool of Sieve & Swap (a few million steps) is not cached here but in content-keyed blocks on disk
(``PoolBlocks``, ``encode_pool``): its sorted distinct texts are cut where the content says (after a text whose hash is
0 modulo ``chunk_size``), so one added or removed step changes the one block it falls in and a rerun embeds that block
only; each block is one encoder call (the same argument as above keeps it bit-identical whatever was cached before),
stored as an ``.npy`` with its sha256 beside it, and the pool matrix is assembled block by block into one ``.npy``
that every worker of a machine memory-maps (``open_pool``): the operating system's page cache holds it once.

Every vector is checked when read: the ``sha`` column holds the sha256 of its bytes as written, and a
vector whose bytes differ is a miss (one warning line), encoded again and written again. Rows of an earlier build
(``sha`` NULL) are read unchecked. A file SQLite no longer reads (cut short) is moved aside to ``<name>.damaged``
with one warning line and the cache starts empty (``builders.models.request_cache``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..core.atomic import atomic_path, atomic_write_text
from ..core.errors import DamagedCache
from .request_cache import add_sha_column, is_damaged_db, set_aside_damaged_db
from .text_encoder import TextEncoder

log = logging.getLogger(__name__)


class EmbeddingCache:
    """``get``/``put`` float32 vectors by (model_id, sha1(text))."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Ray actors call from a thread other than the one that built the object: share one connection under a lock
        self._lock = threading.Lock()
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            if not is_damaged_db(exc):
                raise
            self._db = None
            self._set_aside(exc)

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None, check_same_thread=False)
        try:
            # two workers opening the file at once: switching to WAL can answer "database is locked" at once, without
            # waiting on the busy timeout; it is transient, so it is retried (at most about 30 s)
            for attempt in range(300):
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("CREATE TABLE IF NOT EXISTS emb (model TEXT, key TEXT, vec BLOB, sha TEXT, "
                               "PRIMARY KEY (model, key))")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 299:
                        raise
                    time.sleep(0.1)
            add_sha_column(db, "emb")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _set_aside(self, exc: BaseException) -> None:
        """The file is damaged: moved aside, the cache starts empty (one warning line)."""
        log.warning("damaged embedding cache %s (%s): moved aside to %s.damaged, its vectors are encoded again",
                    self.path, exc, self.path.name)
        if self._db is not None:
            self._db.close()
        set_aside_damaged_db(self.path)
        self._db = self._open()

    def get(self, model_id: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of the ``keys`` present whose bytes are those written (others are missing: one warning line)."""
        out: dict[str, np.ndarray] = {}
        damaged: list[str] = []
        with self._lock:
            try:
                self._get_into(out, model_id, keys, damaged)
            except sqlite3.DatabaseError as exc:
                if not is_damaged_db(exc):
                    raise
                self._set_aside(exc)
                return {}
        if damaged:
            log.warning("damaged embedding cache %s: %d vector%s of %s whose bytes differ from those written (%s%s): "
                        "encoded again", self.path, len(damaged), "" if len(damaged) == 1 else "s", model_id,
                        ", ".join(damaged[:3]), ", ..." if len(damaged) > 3 else "")
        return out

    def _get_into(self, out: dict[str, np.ndarray], model_id: str, keys: Sequence[str], damaged: list[str]) -> None:
        for i in range(0, len(keys), 500):
            chunk = list(keys[i:i + 500])
            q = f"SELECT key, vec, sha FROM emb WHERE model = ? AND key IN ({','.join('?' * len(chunk))})"
            for k, blob, sha in self._db.execute(q, [model_id, *chunk]):
                if not isinstance(blob, bytes) or len(blob) % 4 or (
                        sha is not None and hashlib.sha256(blob).hexdigest() != sha):
                    damaged.append(k)
                    continue
                out[k] = np.frombuffer(blob, dtype=np.float32)

    def put(self, model_id: str, keys: Sequence[str], vecs: np.ndarray) -> None:
        blobs = [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vecs)]
        rows = [(model_id, k, b, hashlib.sha256(b).hexdigest()) for k, b in blobs]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO emb (model, key, vec, sha) VALUES (?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()


def _set_key(unique: Sequence[str]) -> str:
    """Cache key of one set of sorted distinct texts (encoded together in one call)."""
    return "set:" + hashlib.sha1("\n".join(unique).encode("utf-8")).hexdigest()


def encode_set_cached(encoder: TextEncoder, texts: Sequence[str], cache: EmbeddingCache | None) -> np.ndarray:
    """Embed ``texts`` (one row per input, repeats allowed) by encoding their sorted distinct strings in one call,
    reusing and filling ``cache`` under the key of that set."""
    unique = sorted(set(texts))
    if not unique:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    key = _set_key(unique)
    vecs = (cache.get(encoder.model_id, [key]) if cache is not None else {}).get(key)
    if vecs is not None:
        if vecs.size % len(unique):
            raise RuntimeError(f"embedding cache {cache.path} holds a corrupt entry for {key}: delete the file "
                               "or rebuild with --fresh")
        table = vecs.reshape(len(unique), -1)
    else:
        table = encoder.encode(unique)
        if cache is not None:
            cache.put(encoder.model_id, [key], table.reshape(1, -1))
    index = {t: i for i, t in enumerate(unique)}
    return table[[index[t] for t in texts]]


# ------------------------------------------------------------------------------------------ the swap pool on disk
#: a block is cut after at most this many times ``chunk_size`` texts even where no text's hash says so
MAX_BLOCK_FACTOR = 4
_READ = 1 << 20
_SCATTER = 1 << 15  # pool rows written through one mapping


def content_blocks(unique: Sequence[str], chunk_size: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each block of the sorted distinct texts ``unique``, cut where the content says: after every
    text whose sha1 is 0 modulo ``chunk_size`` (about ``chunk_size`` texts a block), or after
    ``MAX_BLOCK_FACTOR * chunk_size`` texts. A text added or removed changes the block it falls in (or splits or
    joins two), never the blocks before or after it, as a positional cut would."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    blocks, start, cap = [], 0, MAX_BLOCK_FACTOR * chunk_size
    for i, text in enumerate(unique):
        h = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")
        if h % chunk_size == 0 or i + 1 - start >= cap:
            blocks.append((start, i + 1))
            start = i + 1
    if start < len(unique):
        blocks.append((start, len(unique)))
    return blocks


def _sha256_file(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB pieces (through the page cache: never a second copy in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(_READ), b""):
            h.update(piece)
    return h.hexdigest()


def _allocate(path: Path) -> None:
    """Give the (sparse) file its disk blocks now: a full disk is then an ``OSError`` (ENOSPC) here, not a SIGBUS
    when a page of the memory map is written."""
    if hasattr(os, "posix_fallocate"):
        with open(path, "r+b") as f:
            try:
                os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size)
            except OSError as err:
                raise OSError(err.errno, err.strerror, str(path)) from err


def _map_checked(path: Path, sha256: str, rows: int | None = None) -> np.memmap:
    """``path`` (an ``.npy`` of float32 rows) memory-mapped read-only after its bytes were hashed against ``sha256``;
    :class:`DamagedCache` when they differ or it does not map as ``rows`` float32 rows."""
    got = _sha256_file(path)
    if got != sha256:
        raise DamagedCache(path, f"sha256 {got[:12]}... differs from the {sha256[:12]}... recorded when it was "
                                 f"written ({path.stat().st_size} bytes)")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as err:  # the digest matched: not the disk's doing, but not usable either
        raise DamagedCache(path, f"not a readable .npy ({err})") from err
    if arr.dtype != np.float32 or arr.ndim != 2 or (rows is not None and arr.shape[0] != rows):
        raise DamagedCache(path, f"holds {arr.dtype} {arr.shape}, not {rows} float32 rows")
    return arr


class PoolBlocks:
    """Embedding blocks of the swap pool, keyed by content: ``<root>/<model>/<key[:2]>/<key>.npy`` holds the vectors
    of one block of sorted distinct texts (its key: the sha1 of those texts, as ``_set_key``), ``<key>.sha256`` the
    digest of the ``.npy`` as written. A block is checked when read: a damaged one (bytes that differ, a file cut
    short, no digest) is a miss (one warning line), encoded again and written again, never used."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, model_id: str, key: str) -> Path:
        model = hashlib.sha1(model_id.encode("utf-8")).hexdigest()[:16]
        name = key.removeprefix("set:")
        return self.root / model / name[:2] / f"{name}.npy"

    def load(self, model_id: str, key: str, rows: int) -> np.memmap | None:
        """The block's ``rows`` vectors memory-mapped, or None when it is missing or damaged (warned)."""
        path = self.path(model_id, key)
        digest = path.with_suffix(".sha256")
        if not path.exists():
            return None
        try:
            return _map_checked(path, digest.read_text(encoding="ascii").strip(), rows)
        except (DamagedCache, FileNotFoundError, OSError, UnicodeDecodeError) as err:
            log.warning("damaged embedding block %s (%s): encoded again", path, getattr(err, "why", err))
            return None

    def save(self, model_id: str, key: str, vecs: np.ndarray) -> None:
        path = self.path(model_id, key)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:  # a file object: np.save would add ".npy" to the temp name
                np.save(f, np.ascontiguousarray(vecs, dtype=np.float32), allow_pickle=False)
            digest = _sha256_file(tmp)
        atomic_write_text(path.with_suffix(".sha256"), digest + "\n")


def encode_pool(encoder: TextEncoder, texts: Sequence[str], blocks: PoolBlocks, out: str | Path, *,
                chunk_size: int) -> str:
    """Embed ``texts`` (one row per pool row, repeats allowed) into the ``.npy`` ``out`` (float32, rows in input
    order); returns its sha256.

    The sorted distinct texts are cut into content blocks (``content_blocks``); each block is read from ``blocks``
    or encoded in one call and stored there the moment it is done (a killed run keeps its finished blocks), then
    read back memory-mapped and scattered into ``out`` through a memory map that is flushed and let go every
    ``_SCATTER`` rows: the pool is never held in memory, the encoder's output for one block is, while it is
    stored. ``out`` is replaced atomically."""
    unique = sorted(set(texts))
    where = {t: i for i, t in enumerate(unique)}
    distinct = np.fromiter((where[t] for t in texts), dtype=np.int64, count=len(texts))
    del where
    order = np.argsort(distinct, kind="stable")  # the pool rows grouped by distinct text, so by block
    by_text = distinct[order]
    del distinct
    out = Path(out)
    with atomic_path(out) as tmp:
        dim = None
        for start, end in content_blocks(unique, chunk_size) if unique else []:
            block = unique[start:end]
            key = _set_key(block)
            vecs = blocks.load(encoder.model_id, key, len(block))
            if vecs is None:  # encoded, stored, then read back mapped: the encoder's copy is let go at once
                blocks.save(encoder.model_id, key, np.ascontiguousarray(encoder.encode(block), dtype=np.float32))
                vecs = blocks.load(encoder.model_id, key, len(block))
                if vecs is None:
                    raise RuntimeError(f"embedding block {blocks.path(encoder.model_id, key)} is damaged right after "
                                       "it was written: check the disk")
            if dim is None:
                dim = vecs.shape[1]
                np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(texts), dim)).flush()
                _allocate(tmp)
            elif vecs.shape[1] != dim:
                raise RuntimeError(f"embedding blocks of {encoder.model_id} under {blocks.root} have different "
                                   f"widths ({dim}, {vecs.shape[1]}): delete that folder")
            lo, hi = np.searchsorted(by_text, [start, end])
            for a in range(lo, hi, _SCATTER):  # a piece at a time, mapped then let go: bounded resident pages
                b = min(a + _SCATTER, hi)
                pool = np.load(tmp, mmap_mode="r+")
                pool[order[a:b]] = vecs[by_text[a:b] - start]
                pool.flush()
                del pool
            del vecs
        if dim is None:
            with open(tmp, "wb") as f:
                np.save(f, np.zeros((0, encoder.dim), dtype=np.float32), allow_pickle=False)
        digest = _sha256_file(tmp)
    return digest


def open_pool(path: str | Path, sha256: str, rows: int) -> np.memmap:
    """The pool written by ``encode_pool``, memory-mapped read-only (every worker of a machine shares the operating
    system's one copy) after its bytes were hashed as read, in pieces; :class:`DamagedCache` when they are not those
    written (``FileNotFoundError`` when it is missing)."""
    return _map_checked(Path(path), sha256, rows)
