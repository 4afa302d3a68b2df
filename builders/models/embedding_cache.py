"""On-disk cache of sentence embeddings (docs/architecture.md, "Caching and resume").

One SQLite file per work directory; several processes may read and write it (WAL mode). Changing a threshold
downstream never re-embeds; changing the model changes the key.

Vectors are cached per *set* of texts (a work shard's distinct ASR segments, the recipe-step pool), keyed by
(model id, sha1 of the sorted distinct texts), not per text: a transformer's float output for a
text depends in its last bits on the padded batch it was computed in, so per-text reuse across shards would make the
result depend on which shard happened to embed a repeated line first (parallel runners) or on what an earlier build
left in the cache. Per-set keys keep every build bit-identical whatever the runner, and a rerun (resume, a changed
threshold) still finds every vector.

Chunked sets (``encode_set_cached(..., chunk_size=k)``): one key for a whole set means that a run killed while
encoding a big set (the recipe-step pool: a few million steps, hours on a CPU) loses all its work. With ``chunk_size``
the sorted distinct texts are cut into consecutive blocks of ``k`` and every block is encoded in its own call and
cached under its own set key, the moment it is done, so a rerun encodes only the blocks that are missing. The same
argument keeps this bit-identical: a block is a set of texts encoded in one call, its vectors depend only on that set,
and its key is that set's key (so a block may even be shared with an equal set embedded elsewhere). The vectors do
depend, in their last bits, on the cut: ``chunk_size`` is a parameter of the result (a step that sets it must put it
in its fingerprint), and it must not change between a killed run and its resume if the result is to equal an
uninterrupted run. ``chunk_size=None`` or ``>= len(distinct texts)`` is exactly the unchunked path (one call, the
single set key, the same vectors), so builds that do not set it, or whose sets fit in one block, are unchanged.

Every vector is checked when read: the ``sha`` column holds the sha256 of its bytes as written, and a
vector whose bytes differ is a miss (one warning line), encoded again and written again. Rows of an earlier build
(``sha`` NULL) are read unchecked. A file SQLite no longer reads (cut short) is moved aside to ``<name>.damaged``
with one warning line and the cache starts empty (``builders.models.request_cache``).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

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
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS emb (model TEXT, key TEXT, vec BLOB, sha TEXT, "
                       "PRIMARY KEY (model, key))")
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


def encode_set_cached(encoder: TextEncoder, texts: Sequence[str], cache: EmbeddingCache | None, *,
                      chunk_size: int | None = None) -> np.ndarray:
    """Embed ``texts`` (one row per input, repeats allowed) by encoding their sorted distinct strings, reusing and
    filling ``cache`` under the key of that set.

    ``chunk_size=None`` (or at least the number of distinct texts): one encoder call and one key for the whole set.
    Otherwise the sorted distinct texts are encoded in consecutive blocks of ``chunk_size``, one call and one key per
    block, each block cached as soon as it is encoded (a killed run keeps its finished blocks; see the module note).
    """
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 or None, got {chunk_size}")
    unique = sorted(set(texts))
    if not unique:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    size = len(unique) if chunk_size is None else min(int(chunk_size), len(unique))
    blocks = [unique[i:i + size] for i in range(0, len(unique), size)]
    keys = [_set_key(block) for block in blocks]
    found = cache.get(encoder.model_id, keys) if cache is not None else {}
    tables = []
    for block, key in zip(blocks, keys):
        vecs = found.pop(key, None)
        if vecs is not None:
            if vecs.size % len(block):
                raise RuntimeError(f"embedding cache {cache.path} holds a corrupt entry for {key}: delete the file "
                                   "or rebuild with --fresh")
            tables.append(vecs.reshape(len(block), -1))
        else:
            table = encoder.encode(block)
            if cache is not None:
                cache.put(encoder.model_id, [key], table.reshape(1, -1))
            tables.append(table)
    if len({t.shape[1] for t in tables}) > 1:
        raise RuntimeError(f"embedding cache {cache.path} holds blocks of different widths for one set of texts: "
                           "delete the file or rebuild with --fresh")
    table = tables[0] if len(tables) == 1 else np.concatenate(tables)
    index = {t: i for i, t in enumerate(unique)}
    return table[[index[t] for t in texts]]
