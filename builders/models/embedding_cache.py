"""On-disk cache of sentence embeddings — specs/sieve_swap.md §3.7.

One SQLite file per work directory; several processes may read and write it (WAL mode). Changing a threshold
downstream never re-embeds; changing the model changes the key.

Vectors are cached per *set* of texts (a work shard's distinct ASR segments, the recipe-step pool), keyed by
(model id, sha1 of the sorted distinct texts), not per text as the spec suggests: a transformer's float output for a
text depends in its last bits on the padded batch it was computed in, so per-text reuse across shards would make the
result depend on which shard happened to embed a repeated line first (parallel runners) or on what an earlier build
left in the cache. Per-set keys keep every build bit-identical whatever the runner, and a rerun (resume, a changed
threshold) still finds every vector.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .text_encoder import SentenceEncoder


class EmbeddingCache:
    """``get``/``put`` float32 vectors by (model_id, sha1(text))."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Ray actors call from a thread other than the one that built the object: share one connection under a lock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (model TEXT, key TEXT, vec BLOB, PRIMARY KEY (model, key))")

    def get(self, model_id: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            self._get_into(out, model_id, keys)
        return out

    def _get_into(self, out: dict[str, np.ndarray], model_id: str, keys: Sequence[str]) -> None:
        for i in range(0, len(keys), 500):
            chunk = list(keys[i:i + 500])
            q = f"SELECT key, vec FROM emb WHERE model = ? AND key IN ({','.join('?' * len(chunk))})"
            for k, blob in self._db.execute(q, [model_id, *chunk]):
                out[k] = np.frombuffer(blob, dtype=np.float32)

    def put(self, model_id: str, keys: Sequence[str], vecs: np.ndarray) -> None:
        rows = [(model_id, k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vecs)]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()


def encode_set_cached(encoder: SentenceEncoder, texts: Sequence[str], cache: EmbeddingCache | None) -> np.ndarray:
    """Embed ``texts`` (one row per input, repeats allowed) by encoding their sorted distinct strings in one call,
    reusing and filling ``cache`` under the key of that set."""
    unique = sorted(set(texts))
    if not unique:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    key = "set:" + hashlib.sha1("\n".join(unique).encode("utf-8")).hexdigest()
    found = cache.get(encoder.model_id, [key]).get(key) if cache is not None else None
    if found is not None:
        if found.size % len(unique):
            raise RuntimeError(f"embedding cache {cache.path} holds a corrupt entry for {key}: delete the file "
                               "or rebuild with --fresh")
        table = found.reshape(len(unique), -1)
    else:
        table = encoder.encode(unique)
        if cache is not None:
            cache.put(encoder.model_id, [key], table.reshape(1, -1))
    index = {t: i for i, t in enumerate(unique)}
    return table[[index[t] for t in texts]]
