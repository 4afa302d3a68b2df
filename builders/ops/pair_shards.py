"""Training pairs of the HMM+IBM1 aligner as shards of packed integer arrays (Lin et al., ACL 2020, §3.1, A.2;
docs/corpora/marc.md, "EM in bounded memory").

EM runs over every train pair of a model, five times. Held as token lists the pairs of a paper-scale build take tens
of GB; as shards they take a few bytes per token, and :meth:`HmmIbm1.fit_streamed
<builders.ops.hmm_ibm1.HmmIbm1.fit_streamed>` holds one shard at a time. A shard (:class:`EncodedPairs`) holds its
distinct recipes once (word ids of each instruction, out-of-vocabulary words removed) and, per pair, its source and
target recipe.

:class:`PairShardWriter` cuts the shards where the in-memory aligner cuts its chunks (contiguous pairs of at most
``chunk_entries`` packed entries, ``HmmIbm1Config.chunk_entries``), so that the expected counts are added chunk by
chunk in the same order as in memory. :class:`MemoryPairShards` keeps the shards in a list (tests, small data); a
store on disk lives with the pipeline that writes it (``builders/corpora/marc/pair_shards.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["MAX_CHUNK_PAIRS", "EncodedPairs", "MemoryPairShards", "PairShardWriter", "PairShards"]

#: pairs in one chunk of the aligner (and one shard) at most, whatever their entries: bounds the cells of a shard
MAX_CHUNK_PAIRS = 1 << 16


@dataclass(eq=False)
class EncodedPairs:
    """The recipe pairs of one shard: distinct recipes as flat word ids, pairs as indices into them."""

    n_instr: np.ndarray  # (R,) instructions of each distinct recipe
    instr_len: np.ndarray  # (I,) in-vocabulary tokens of each instruction (repeats counted)
    tok: np.ndarray  # (T,) word ids, recipe- then instruction-major
    src: np.ndarray  # (P,) source recipe of each pair
    tgt: np.ndarray  # (P,) target recipe of each pair

    FIELDS = ("n_instr", "instr_len", "tok", "src", "tgt")

    @property
    def pairs(self) -> int:
        return int(self.src.size)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in self.FIELDS}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> EncodedPairs:
        out = cls(**{k: np.asarray(arrays[k]) for k in cls.FIELDS})
        if (out.src.shape != out.tgt.shape or int(out.n_instr.sum()) != out.instr_len.size
                or int(out.instr_len.sum()) != out.tok.size
                or (out.src.size and max(int(out.src.max()), int(out.tgt.max())) >= out.n_instr.size)):
            raise ValueError("inconsistent pair shard: the offsets do not add up")
        return out


class PairShards(Protocol):
    """What :meth:`HmmIbm1.fit_streamed` reads: ``len()`` shards, each loaded on its own, and a place for the packed
    chunks of each shard (written once the co-occurring word pairs are known, read at every EM iteration)."""

    def __len__(self) -> int: ...

    def load(self, i: int) -> EncodedPairs: ...

    def save_packed(self, i: int, arrays: Mapping[str, np.ndarray]) -> None: ...

    def load_packed(self, i: int) -> Mapping[str, np.ndarray]: ...


class MemoryPairShards:
    """:class:`PairShards` in a list (tests and small data: everything stays in memory)."""

    def __init__(self) -> None:
        self.shards: list[EncodedPairs] = []
        self.packed: dict[int, dict[str, np.ndarray]] = {}

    def append(self, shard: EncodedPairs) -> None:
        self.shards.append(shard)

    def __len__(self) -> int:
        return len(self.shards)

    def load(self, i: int) -> EncodedPairs:
        return self.shards[i]

    def save_packed(self, i: int, arrays: Mapping[str, np.ndarray]) -> None:
        self.packed[i] = dict(arrays)

    def load_packed(self, i: int) -> Mapping[str, np.ndarray]:
        return self.packed[i]


_Recipe = Sequence[Sequence[str]]


class PairShardWriter:
    """Encodes ``(source, target)`` recipes (token lists per instruction) with a vocabulary and hands a shard to
    ``sink`` whenever the next pair would take it over ``chunk_entries`` packed entries (or ``max_pairs`` pairs: the
    aligner's ``MAX_CHUNK_PAIRS``).

    A pair's packed entries are (distinct words per source instruction, summed) × (the same for the target), 0 when
    either recipe has no instruction: the chunk rule of the in-memory aligner. ``flatten``: every recipe is one
    instruction (the IBM1-only mode, ``HmmIbm1Config.hmm = False``).
    """

    def __init__(self, vocabulary: Mapping[str, int], sink: Callable[[EncodedPairs], None], chunk_entries: int,
                 flatten: bool = False, max_pairs: int = MAX_CHUNK_PAIRS) -> None:
        if chunk_entries < 1 or max_pairs < 1:
            raise ValueError("chunk_entries and max_pairs must be >= 1")
        self.vocabulary = vocabulary
        self.sink = sink
        self.chunk_entries = chunk_entries
        self.flatten = flatten
        self.max_pairs = max_pairs
        self.dtype = np.int32 if len(vocabulary) < np.iinfo(np.int32).max else np.int64
        self.pairs = 0  # pairs written, all shards
        self.shards = 0
        self._reset()

    def _reset(self) -> None:
        self._index: dict[tuple[tuple[int, ...], ...], tuple[int, int]] = {}  # recipe -> (id, distinct words)
        self._recipes: list[tuple[tuple[int, ...], ...]] = []
        self._src: list[int] = []
        self._tgt: list[int] = []
        self._entries = 0

    def _encode(self, recipe: _Recipe) -> tuple[tuple[int, ...], ...]:
        vocab = self.vocabulary
        if self.flatten:
            recipe = [[w for ins in recipe for w in ins]]
        return tuple(tuple(vocab[w] for w in ins if w in vocab) for ins in recipe)

    def _distinct(self, key: tuple[tuple[int, ...], ...]) -> int:
        found = self._index.get(key)
        return found[1] if found is not None else sum(len(set(ins)) for ins in key)

    def _id(self, key: tuple[tuple[int, ...], ...], distinct: int) -> int:
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = (len(self._recipes), distinct)
            self._recipes.append(key)
        return found[0]

    def add(self, source: _Recipe, target: _Recipe) -> None:
        """Encode one directed pair (the shard is handed on first when this pair would take it over its bound)."""
        s, t = self._encode(source), self._encode(target)
        ds, dt = self._distinct(s), self._distinct(t)
        entries = ds * dt if s and t else 0
        if self._src and (self._entries + entries > self.chunk_entries or len(self._src) >= self.max_pairs):
            self.flush()
        self._src.append(self._id(s, ds))
        self._tgt.append(self._id(t, dt))
        self._entries += entries
        self.pairs += 1

    def flush(self) -> None:
        """Hand the current shard (if it holds a pair) to the sink."""
        if not self._src:
            return
        n_instr = np.array([len(r) for r in self._recipes], dtype=np.int64)
        instr_len = np.array([len(ins) for r in self._recipes for ins in r], dtype=np.int64)
        tok = np.fromiter((w for r in self._recipes for ins in r for w in ins), dtype=self.dtype,
                          count=int(instr_len.sum()))
        self.sink(EncodedPairs(n_instr=n_instr.astype(np.int32), instr_len=instr_len.astype(np.int32), tok=tok,
                               src=np.array(self._src, dtype=np.int32), tgt=np.array(self._tgt, dtype=np.int32)))
        self.shards += 1
        self._reset()

    def close(self) -> None:
        self.flush()
