"""NaSVA's sentence features (docs/evaluation.md): the repo's sentence encoders
(``builders.models.text_encoder.get_encoder``: ``minilm``, ``mpnet``), cached per (encoder id, sha1 of the sentence)
in the repo's SQLite :class:`~builders.models.embedding_cache.EmbeddingCache`, stored as the encoder returns them.
``hash[:DIM]`` is a model-free bag-of-words encoder for tests and smoke runs."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from builders.models.text_encoder import TextEncoder

from .errors import NasvaInputError

#: the text-encoder interface NaSVA uses (:class:`builders.models.text_encoder.TextEncoder`), under its former name
TextEncoderLike = TextEncoder


class HashTextEncoder:
    """Deterministic bag-of-words vectors without a model (sum of per-word Gaussian vectors seeded by sha1 of the
    word, L2-normalised). For tests and smoke runs only: it knows no semantics.

    Word vectors are drawn once per encoder into a table (up to :attr:`CACHE_BYTES`, then the table starts again) and
    a batch is summed with one ``np.add.at`` in word order, so the vectors are bit-identical to adding them word by
    word (issue 19: drawing a NumPy generator per word occurrence made this "model-free" encoder 97 % of Stage 1)."""

    CACHE_BYTES = 64 << 20
    _WORD_RE = re.compile(r"[a-z0-9']+")

    def __init__(self, dim: int = 64):
        self._dim = int(dim)
        self.model_id = f"hash-bow-{self._dim}"
        self.name = f"hash:{self._dim}"
        self._row: dict[str, int] = {}
        self._table = np.zeros((0, self._dim), dtype=np.float64)

    @property
    def dim(self) -> int:
        return self._dim

    def _draw(self, w: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha1(w.encode("utf-8")).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self._dim)

    def _rows(self, words: list[str]) -> list[int]:
        """Table rows of ``words``, drawing the vectors of new words."""
        row = self._row
        new = [w for w in dict.fromkeys(words) if w not in row]
        if new:
            for w in new:
                row[w] = len(row)
            grown = np.empty((len(row), self._dim), dtype=np.float64)
            grown[:len(self._table)] = self._table
            grown[len(self._table):] = [self._draw(w) for w in new]
            self._table = grown
        return [row[w] for w in words]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._table.nbytes >= self.CACHE_BYTES:
            self._row, self._table = {}, np.zeros((0, self._dim), dtype=np.float64)
        out = np.zeros((len(texts), self._dim), dtype=np.float64)
        owners: list[int] = []
        words: list[str] = []
        for i, t in enumerate(texts):
            ws = self._WORD_RE.findall(t.lower()) or [""]
            words += ws
            owners += [i] * len(ws)
        if words:  # in order: the same sums as adding word by word
            rows = self._rows(words)  # (may grow the table)
            np.add.at(out, np.asarray(owners, dtype=np.intp), self._table[rows])
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)


def get_text_encoder(name: str, device: str = "cpu") -> TextEncoder:
    """``minilm`` / ``mpnet`` / a local model folder (the repo's :func:`get_encoder`), or ``hash[:DIM]``."""
    if name == "hash" or name.startswith("hash:"):
        return HashTextEncoder(int(name.split(":", 1)[1]) if ":" in name else 64)
    from builders.models.text_encoder import get_encoder

    return get_encoder(name, device=device)


def default_text_cache() -> Path:
    """``$PROCVID_NASVA_TEXT_CACHE`` or ``~/.cache/procvid-corpora/nasva-text-features.sqlite``."""
    env = os.environ.get("PROCVID_NASVA_TEXT_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "procvid-corpora" / "nasva-text-features.sqlite"


def text_key(sentence: str) -> str:
    return "sha1:" + hashlib.sha1(sentence.encode("utf-8")).hexdigest()


def encode_texts(encoder: TextEncoder, texts: Iterable[str], cache_path: str | Path | None
                 ) -> tuple[np.ndarray, dict[str, int]]:
    """Embed the distinct ``texts`` once, per (encoder id, sha1(sentence)) through the SQLite cache.

    Returns (table ``[U, C_t]`` float32, text -> row). Missing sentences are encoded in sorted order.
    """
    unique = sorted(set(texts))
    row = {t: i for i, t in enumerate(unique)}
    if not unique:
        return np.zeros((0, encoder.dim), dtype=np.float32), row
    cache = None
    if cache_path is not None:
        from builders.models.embedding_cache import EmbeddingCache

        cache = EmbeddingCache(cache_path)
    try:
        keys = [text_key(t) for t in unique]
        found = cache.get(encoder.model_id, keys) if cache is not None else {}
        missing = [t for t, k in zip(unique, keys) if k not in found]
        if missing:
            vecs = np.asarray(encoder.encode(missing), dtype=np.float32)
            if cache is not None:
                cache.put(encoder.model_id, [text_key(t) for t in missing], vecs)
            found.update({text_key(t): v for t, v in zip(missing, vecs)})
        dims = {found[k].shape[0] for k in keys}
        if len(dims) != 1:
            raise NasvaInputError(f"text feature cache {cache_path} holds vectors of several sizes {sorted(dims)} for "
                                  f"{encoder.model_id}: delete it")
        table = np.stack([found[k] for k in keys]).astype(np.float32)
    finally:
        if cache is not None:
            cache.close()
    return table, row
