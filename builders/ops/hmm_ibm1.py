"""Pairwise instruction alignment: an HMM whose emissions are IBM Model 1 probabilities (MARC, Lin et al., ACL 2020, §3.1).

Paper: Lin et al., ACL 2020, §3.1 (Eq. 1), A.2 (vocabulary cut-offs,
EM schedule); docs/corpora/marc.md (the model, "Which aligner") and docs/evaluation.md (the ARA fixture protocol).

Model (docs/corpora/marc.md). A source recipe has instructions f^(1..M), a target recipe e^(1..N); the hidden state a_m is the
target instruction that generates source instruction m.

- Emission, Eq. 1 with the inner bound read as I: ``P(f^(m) | e^(n)) = 1 / I^J · Π_j Σ_i t(f_j | e_i)``
  (ε cancels); J = 0 gives 1 for every n; I = 0 < J gives ``(1e-12)^J``; with ``null_word`` every target
  instruction also holds a NULL word (``I + 1`` in the denominator, and an empty target emits through NULL only).
- Transitions: a jump distribution p(d) on d ∈ [-w, w], renormalised over the jumps that stay inside the target
  (``P(a_m = n | a_{m-1} = n') = p(n - n') / Σ_{d: 0 ≤ n'+d < N} p(d)``); the initial state is uniform.
- EM: exact posteriors γ[m, n] and ξ_m[n', n] by a log-space forward-backward on the band (never an N × N matrix);
  expected counts ``c(d) += Σ ξ``, ``c(f_j, e_i) += γ[m, n] · t(f_j|e_i) / Σ_i' t(f_j|e_i')``; the M-step
  normalises t over f per e (floored at ``min_prob`` like NLTK) and p over d.
- Initialisation: t uniform over the source vocabulary (``1 / |V_f|``), or the identity prior
  ``t ∝ 1 + κ·[f = e]``; p uniform on the first window. Paper schedule (A.2): 3 iterations with w = 1, then 2 with
  w = 2; jumps entering the window start at the smallest current p, then p is renormalised.
- Tokens: NFKC-casefolded ``\\w+`` minus spaCy's ``STOP_WORDS``; words below the vocabulary cut-off are removed.

Vectorisation (docs/corpora/marc.md). Distinct recipes are encoded once; each instruction is read as its distinct words with
multiplicities. Every (distinct source word of an instruction, distinct target word of an instruction) pair of every
recipe pair is an *entry*, packed once into flat arrays in chunks that bound memory; t lives on the sorted keys
``f·|V| + e`` of the co-occurring word pairs and each entry holds its slot (``np.searchsorted`` on sorted queries).
One EM iteration per chunk is: gather t, ``np.add.reduceat`` per (source word, target instruction) segment,
``np.bincount`` of the logs per (m, n) cell, a batched banded forward-backward over buckets of pairs of equal M, and
a ``np.bincount`` scatter of the expected counts into the slots (segments laid out by source word, so the gathers and
scatters walk t nearly in order). No Python loop runs over words; loops run over chunks, buckets and source positions.

State (a global stage's artefact folder, docs/architecture.md, "Caching and resume"): :meth:`HmmIbm1.to_state` gives the fitted
model as plain numeric arrays + JSON-serialisable metadata (no pickles, no file I/O here); :meth:`HmmIbm1.from_state`
rebuilds a model whose ``align()`` is bit-identical.

IBM1-only mode (``hmm=False``): every recipe is one sentence (its instructions concatenated), so the model is IBM
Model 1 on recipe pairs; with ``null_word=True`` and ``nltk_compat=True`` it reproduces
``nltk.translate.IBMModel1`` (``AlignedSent(words=source tokens, mots=target tokens)``) on the same bitext.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .pair_shards import MAX_CHUNK_PAIRS, PairShards

__all__ = [  # also STOP_WORDS, loaded on first access
    "HmmIbm1",
    "HmmIbm1Config",
    "PairAlignment",
    "Recipe",
    "build_vocabulary",
    "stop_words",
    "tokenize",
    "tokenize_recipe",
]

#: one recipe as token lists, one list per instruction
Recipe = Sequence[Sequence[str]]
_TOKEN = re.compile(r"\w+")


def _load_stop_words() -> frozenset[str]:
    """spaCy's English ``STOP_WORDS`` (326 words), read from spaCy's source file without importing spaCy (~3 s)."""
    spec = importlib.util.find_spec("spacy")
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "lang" / "en" / "stop_words.py"
        if path.is_file():  # a plain data module: load that one file, not the spacy package
            file_spec = importlib.util.spec_from_file_location("_procvid_spacy_en_stop_words", path)
            if file_spec is not None and file_spec.loader is not None:
                module = importlib.util.module_from_spec(file_spec)
                file_spec.loader.exec_module(module)
                words = getattr(module, "STOP_WORDS", None)
                if isinstance(words, (set, frozenset)) and words:
                    return frozenset(words)
    try:
        from spacy.lang.en.stop_words import STOP_WORDS as words
    except ImportError as exc:  # pragma: no cover - spaCy is a dependency of the [nlp] extra
        raise ImportError("spaCy is needed for its English stop-word list: install the [nlp] extra") from exc
    return frozenset(words)


_STOP_WORDS: frozenset[str] | None = None


def stop_words() -> frozenset[str]:
    """spaCy's English stop words (docs/corpora/marc.md: the offline stand-in for the paper's unnamed stop list), loaded once."""
    global _STOP_WORDS
    if _STOP_WORDS is None:
        _STOP_WORDS = _load_stop_words()
    return _STOP_WORDS


def __getattr__(name: str) -> Any:  # ``STOP_WORDS`` is loaded on first use, so importing needs no spaCy
    if name == "STOP_WORDS":
        return stop_words()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tokenize(text: str, stop: frozenset[str] | set[str] | None = None) -> list[str]:
    """Tokens of docs/corpora/marc.md: NFKC, casefold, ``\\w+``, stop words removed (``"Preheat the oven!"`` -> preheat, oven).

    ``stop`` defaults to spaCy's ``STOP_WORDS``.
    """
    stop = stop_words() if stop is None else stop
    return [w for w in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()) if w not in stop]


def tokenize_recipe(instructions: Iterable[str], stop: frozenset[str] | set[str] | None = None) -> list[list[str]]:
    """:func:`tokenize` of every instruction of a recipe."""
    stop = stop_words() if stop is None else stop
    return [tokenize(text, stop) for text in instructions]


def build_vocabulary(recipes: Iterable[Recipe], min_count: int = 1) -> dict[str, int]:
    """Word -> id over ``recipes`` (each counted once), keeping words seen at least ``min_count`` times.

    The paper's cut-offs (A.2): ``min_count = 5`` over train-split text instructions, 15 over transcripts. Ids follow
    the sorted words, so a vocabulary never depends on input order.
    """
    counts: Counter[str] = Counter()
    for recipe in recipes:
        for tokens in recipe:
            counts.update(tokens)
    return {w: i for i, w in enumerate(sorted(w for w, c in counts.items() if c >= min_count))}


# ------------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class HmmIbm1Config:
    """Settings of the HMM+IBM1 aligner; defaults are the paper's text-text model (Lin et al., ACL 2020, A.2, docs/corpora/marc.md).

    ``schedule``: ``((window, iterations), ...)`` run in order (paper: 3 iterations with w = 1, then 2 with w = 2).
    ``min_count``: vocabulary cut-off (5 text, 15 video). ``identity_prior``: κ of the initial table
    ``t ∝ 1 + κ·[f = e]`` (0 = uniform, the paper's unstated default). ``identity_map``: keep κ as Dirichlet
    pseudo-counts in every M-step (MAP-EM, ``t ∝ c + κ·[f = e] + smoothing``) instead of at initialisation only.
    ``null_word``: a NULL word in every target instruction. ``hmm=False``: IBM1-only (recipes as single sentences).
    ``nltk_compat``: count a word repeated k times in a source sentence with weight 1/k, as NLTK's IBMModel1 does.
    """

    schedule: tuple[tuple[int, int], ...] = ((1, 3), (2, 2))
    min_count: int = 5
    identity_prior: float = 0.0
    identity_map: bool = False
    smoothing: float = 0.0
    null_word: bool = False
    hmm: bool = True
    nltk_compat: bool = False
    empty_target_prob: float = 1e-12
    min_prob: float = 1e-12
    top_k: int = 3
    #: packed (source token, target token) entries per chunk (memory bound, ~40 bytes per entry while packing)
    chunk_entries: int = 1 << 22
    #: padded cells per forward-backward bucket
    bucket_cells: int = 1 << 18
    #: keep the gathered t values between the emission and count passes up to this many entries (8 bytes each)
    cache_entries: int = 1 << 25

    def __post_init__(self) -> None:
        if not self.schedule or any(w < 0 or it < 0 for w, it in self.schedule):
            raise ValueError(f"schedule must be ((window >= 0, iterations >= 0), ...), got {self.schedule}")
        if self.min_count < 1:
            raise ValueError("min_count must be >= 1")
        if self.identity_prior < 0 or self.smoothing < 0:
            raise ValueError("identity_prior and smoothing must be >= 0")
        if not 0 < self.min_prob < 1 or not 0 < self.empty_target_prob <= 1:
            raise ValueError("min_prob and empty_target_prob must lie in (0, 1)")

    @property
    def iterations(self) -> int:
        return sum(it for _, it in self.schedule)

    @classmethod
    def paper(cls, **overrides: Any) -> HmmIbm1Config:
        """The paper's configuration (A.2): uniform t, cut-off 5, 3 iterations at w = 1 then 2 at w = 2, no NULL."""
        return replace(cls(), **overrides)

    @classmethod
    def ibm1(cls, iterations: int = 5, **overrides: Any) -> HmmIbm1Config:
        """IBM Model 1 on whole recipes with a NULL word (NLTK's IBMModel1 setting, docs/corpora/marc.md)."""
        base = cls(schedule=((0, iterations),), min_count=1, null_word=True, hmm=False)
        return replace(base, **overrides)

    @classmethod
    def best(cls, **overrides: Any) -> HmmIbm1Config:
        """The configuration that aligns best on the real ARA recipes (docs/corpora/marc.md); chosen in BEST_NOTE."""
        base = cls(**BEST_SETTINGS)
        return replace(base, **overrides)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["schedule"] = [list(s) for s in self.schedule]
        return out


#: The "best" preset (:meth:`HmmIbm1Config.best`): the paper's model with four principled changes for small data.
BEST_SETTINGS: dict[str, Any] = {
    "schedule": ((5, 5),),  # the paper's 5 EM iterations, all at its widest useful window ±5 (no w=1 warm start)
    "min_count": 1,  # the cut-off scaled to corpus size: 5 per ~390K instructions is < 1 per 631
    "identity_prior": 100.0,  # κ of docs/corpora/marc.md (the toolkit's value) ...
    "identity_map": True,  # ... kept as a Dirichlet prior in every M-step (MAP-EM), so no early stopping is needed
}
BEST_NOTE = """How the best preset was found (docs/corpora/marc.md fixture, 60 gold pairs, primary F1 = none=ignore_gold).

Diagnosis of the paper configuration (15.6 F1): from a uniform table, 660 pairs cannot identify IBM1 (the
κ = 0 collapse; learned p(0) = 0.71). With κ = 30 the learned table alone (each source instruction decoded on its own)
reaches 62.7, but the HMM with the paper's window drops it to 58.2: ARA sources are the longer recipe and skip or
reorder steps, so jumps beyond ±2 are needed; and the w = 1 warm start drives p(±1) to ~0.5 / 0.1 before the ±2
offsets are added at the smallest current p (~0.01), from which they never recover on small data. A flat ±4 window
with the same table gives 63.3.

Changes: the grid below showed which knobs matter (window and identity prior); the values are the paper's or the
toolkit's, not the grid's argmax. Start at w = 5 (the paper: "beyond 5 decreases performance"; 5 iterations as the
paper). κ = 100 (the toolkit's value) as a MAP Dirichlet prior: init-only κ decays with iterations (65.2 after 1, 62.5
after 20) while MAP stays at 64.9-65.5 from 2 to 20 iterations, so no early stopping is needed. min_count = 1: a
cut-off of 5 was set for 48K recipes (~390K instructions); on 66 recipes it removes most content words (~2 F1
lower). NULL word off as in the paper (no consistent effect, ±0.5). Result: 65.5 F1 (paper 15.6, BM25 60.9).

Overfitting check: a grid of 560 variants (window 2-8, iterations 3-10, κ 10-300, init or MAP, min_count 1/2/5,
NULL, smoothing) is flat around 63-66 once w >= 3 and κ >= 30. Selecting the grid's best on 5 dishes and scoring the
held-out dish (leave-one-dish-out) gives 62.5-65.0, so a grid-picked configuration is worth ~63-65 on new dishes;
the preset was not the grid's argmax (66.1). Stemming (Porter) and symmetrised posteriors changed F1 by < 1.5 and
were left out (the decision rule stays argmax γ, docs/corpora/marc.md).
"""


# ------------------------------------------------------------------------------------------------- packing


@dataclass
class _Recipes:
    """Distinct recipes as flat arrays (each recipe is encoded once, however many pairs use it).

    Instructions have global ids ``instr_off[r] .. instr_off[r+1]-1``; tokens are recipe- then instruction-major.
    Both sides are read through the *distinct* words of each instruction with their multiplicities (``d_*``): a word
    repeated k times in a source instruction contributes k × the same log-term, one repeated in a target instruction
    k × its t in the sum Σ_i t(f_j | e_i).
    """

    n_instr: np.ndarray  # (R,)
    instr_off: np.ndarray  # (R + 1,)
    instr_len: np.ndarray  # (I,) tokens per instruction (repeats counted)
    tok: np.ndarray  # (T,) word ids
    tok_off: np.ndarray  # (R + 1,)
    d_word: np.ndarray  # (D,) distinct word of an instruction
    d_cnt: np.ndarray  # (D,) its multiplicity in the instruction
    d_instr: np.ndarray  # (D,) global instruction id
    d_local: np.ndarray  # (D,) instruction index inside its recipe
    d_off: np.ndarray  # (R + 1,)
    ne_start: np.ndarray  # (E,) first distinct-word entry of a non-empty instruction, relative to its recipe
    ne_len: np.ndarray  # (E,) distinct words of the instruction
    ne_local: np.ndarray  # (E,) instruction index inside its recipe
    ne_off: np.ndarray  # (R + 1,)
    r_word: np.ndarray  # distinct words of each recipe (sorted) ...
    r_off: np.ndarray  # (R + 1,) ... and their offsets

    @classmethod
    def build(cls, recipes: list[list[np.ndarray]], V: int) -> _Recipes:
        n_instr = np.array([len(r) for r in recipes], dtype=np.int64)
        flat = [ins for r in recipes for ins in r]
        instr_len = np.array([x.size for x in flat], dtype=np.int64)
        tok = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
        return cls.from_flat(n_instr, instr_len, tok, V)

    @classmethod
    def from_flat(cls, n_instr: np.ndarray, instr_len: np.ndarray, tok: np.ndarray, V: int) -> _Recipes:
        """The recipes given flat: instructions per recipe, tokens per instruction, the word ids in order."""
        n_instr = np.asarray(n_instr, dtype=np.int64)
        instr_len = np.asarray(instr_len, dtype=np.int64)
        tok = np.asarray(tok, dtype=np.int64)
        R = n_instr.size
        instr_off = np.zeros(R + 1, dtype=np.int64)
        np.cumsum(n_instr, out=instr_off[1:])
        instr_tok_off = np.zeros(instr_len.size + 1, dtype=np.int64)
        np.cumsum(instr_len, out=instr_tok_off[1:])
        tok_off = instr_tok_off[instr_off]
        tok_instr = np.repeat(np.arange(instr_len.size, dtype=np.int64), instr_len)
        uniq, cnt = _unique(tok_instr * max(V, 1) + tok)
        d_instr = uniq // max(V, 1)
        d_word = uniq - d_instr * max(V, 1)
        d_off = np.searchsorted(d_instr, instr_off)
        instr_recipe = np.repeat(np.arange(R, dtype=np.int64), n_instr)
        d_local = d_instr - instr_off[instr_recipe[d_instr]] if d_instr.size else d_instr
        d_instr_off = np.searchsorted(d_instr, np.arange(instr_len.size + 1))
        nonempty = np.flatnonzero(instr_len > 0)
        ne_recipe = instr_recipe[nonempty]
        r_keys = _unique(instr_recipe[d_instr] * max(V, 1) + d_word)[0] if d_instr.size else d_instr
        r_of = r_keys // max(V, 1)
        return cls(n_instr=n_instr, instr_off=instr_off, instr_len=instr_len, tok=tok, tok_off=tok_off,
                   d_word=d_word, d_cnt=cnt.astype(np.float64), d_instr=d_instr, d_local=d_local, d_off=d_off,
                   ne_start=d_instr_off[nonempty] - d_off[ne_recipe],
                   ne_len=d_instr_off[nonempty + 1] - d_instr_off[nonempty],
                   ne_local=nonempty - instr_off[ne_recipe], ne_off=np.searchsorted(nonempty, instr_off),
                   r_word=r_keys - r_of * max(V, 1), r_off=np.searchsorted(r_of, np.arange(R + 1)))


@dataclass
class _Chunk:
    """Packed entries (distinct source word of an instruction × distinct target word of an instruction) of a
    contiguous range of pairs, grouped in segments (source word, non-empty target instruction) laid out by source
    word."""

    slots: np.ndarray  # (L,) slot of t(f|e) per entry (nnz = word pair never seen in training)
    seg_start: np.ndarray  # (G,) first entry of each (source word, non-empty target instruction) segment
    seg_len: np.ndarray  # (G,) distinct words of the segment's target instruction
    seg_cell: np.ndarray  # (G,) cell of the segment, relative to cell_lo
    seg_f: np.ndarray  # (G,) source word id
    seg_mult: np.ndarray  # (G,) multiplicity of the source word in its instruction (float)
    rep_pos: np.ndarray  # entries whose target word is repeated in its instruction ...
    rep_w: np.ndarray  # ... and that multiplicity
    cell_lo: int
    cell_hi: int


@dataclass
class _Bucket:
    """A batch of pairs for the forward-backward, padded to (B, Mx, Nx)."""

    pairs: np.ndarray  # (B,) pair indices
    M: np.ndarray  # (B,)
    N: np.ndarray  # (B,)
    idx: np.ndarray  # (B, Mx, Nx) global cell index, -1 = padding


@dataclass
class _Packed:
    """Recipe pairs as flat integer arrays (docs/corpora/marc.md)."""

    recipes: _Recipes
    src_r: np.ndarray  # (P,) source recipe of each pair
    tgt_r: np.ndarray  # (P,)
    M: np.ndarray  # (P,) source instructions per pair
    N: np.ndarray  # (P,) target instructions per pair
    cell_offset: np.ndarray  # (P + 1,) cells of pair p: cell_offset[p] + m * N[p] + n
    cell_J: np.ndarray  # (C,) J of the cell's source instruction
    cell_I: np.ndarray  # (C,) I of the cell's target instruction
    cell_src: np.ndarray  # (C,) global id of the cell's source instruction
    chunks: list[_Chunk] = field(default_factory=list)
    buckets: list[_Bucket] = field(default_factory=list)
    word_pairs: int = 0  # Σ_p (source tokens × target tokens): the work one iteration represents
    entries: int = 0  # packed entries (words deduplicated per instruction on both sides)
    ranges: list[tuple[int, int]] = field(default_factory=list)  # the pair range of each chunk
    buffers: list[np.ndarray] = field(default_factory=list)  # gather buffers kept per chunk (reused every iteration)
    shared: np.ndarray | None = None  # one gather buffer for all chunks when the values are not kept
    shard: Any = None  # the pair shard it was laid out from (alive as long as it: a reader counts what is resident)


@dataclass
class PairAlignment:
    """Posteriors of one directed pair (docs/corpora/marc.md): γ and, per source instruction, argmax / probability / top-k."""

    gamma: np.ndarray  # (M, N)
    target_index: np.ndarray  # (M,) argmax γ, lowest index on ties
    probability: np.ndarray  # (M,)
    top_indices: np.ndarray  # (M, k)
    top_probabilities: np.ndarray  # (M, k)
    log_likelihood: float = float("nan")

    def rows(self) -> list[dict[str, Any]]:
        """The ``ALIGN`` feature of docs/corpora/marc.md: one dict per source instruction."""
        return [{"target_index": int(self.target_index[m]), "probability": float(self.probability[m]),
                 "top_indices": [int(x) for x in self.top_indices[m]],
                 "top_probabilities": [float(x) for x in self.top_probabilities[m]]}
                for m in range(len(self.target_index))]


#: ``meta["format"]`` of :meth:`HmmIbm1.to_state` (bump when the arrays or meta change meaning)
_STATE_FORMAT = "procvid.hmm_ibm1/1"


def _flatten_recipe(recipe: Recipe) -> list[list[str]]:
    return [[w for tokens in recipe for w in tokens]]


def _unique(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique values and their counts (a plain sort: numpy 2's hash-based ``np.unique`` is far slower here)."""
    if x.size == 0:
        return x.copy(), np.zeros(0, dtype=np.int64)
    s = np.sort(x)
    first = np.empty(s.size, dtype=bool)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return s[starts], np.diff(np.append(starts, s.size))


def _ragged_arange(lengths: np.ndarray) -> np.ndarray:
    """``concat(arange(n) for n in lengths)`` without a Python loop or a division."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    starts = np.zeros(lengths.size, dtype=np.int64)
    if lengths.size > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    out = np.arange(total, dtype=np.int64)
    out -= np.repeat(starts, lengths)
    return out


def _argsort_small(values: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative integers: value and position packed into one int64 and sorted at once."""
    n = values.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    bits = max(1, int(n - 1).bit_length())
    if int(values.max()) < (1 << (62 - bits)):
        packed = values.astype(np.int64) << bits
        packed |= np.arange(n, dtype=np.int64)
        packed.sort()
        return packed & ((1 << bits) - 1)
    return np.argsort(values, kind="stable")


_POS_BITS = 26  # positions of a chunk's entries packed under the key for one fast sort (chunks < 2^26 entries)


def _searchsorted_slots(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Slot of every query key in the sorted ``keys``; absent keys get ``keys.size`` (the missing-pair slot).

    Binary search of unsorted queries misses the cache at every step; the queries are sorted first (key and
    position packed into one int64 when they fit, so a single ``np.sort`` does it) and the slots scattered back.
    """
    n = query.size
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    top = int(max(int(query.max()), int(keys[-1]) if keys.size else 0))
    if top < (1 << (62 - _POS_BITS)) and n < (1 << _POS_BITS):
        packed = query << _POS_BITS
        packed |= np.arange(n, dtype=np.int64)
        packed.sort()
        pos = packed & ((1 << _POS_BITS) - 1)
        packed >>= _POS_BITS
        order, sorted_q = pos, packed
    else:
        order = np.argsort(query, kind="stable")
        sorted_q = query[order]
    found_at = np.searchsorted(keys, sorted_q)
    if keys.size:
        np.minimum(found_at, keys.size - 1, out=found_at)
        miss = keys[found_at] != sorted_q
        found_at[miss] = keys.size
    else:
        found_at[:] = 0
    dtype = np.int32 if keys.size < np.iinfo(np.int32).max else np.int64
    slots = np.empty(n, dtype=dtype)
    slots[order] = found_at
    return slots


_CHUNK_FIELDS = ("slots", "seg_start", "seg_len", "seg_cell", "seg_f", "seg_mult", "rep_pos", "rep_w")


def _chunk_arrays(chunks: list[_Chunk]) -> dict[str, np.ndarray]:
    """The chunks of a shard as plain arrays (``c<k>.<field>``, ``bounds``: their cell ranges)."""
    out = {f"c{k}.{name}": getattr(ch, name) for k, ch in enumerate(chunks) for name in _CHUNK_FIELDS}
    out["bounds"] = np.array([[ch.cell_lo, ch.cell_hi] for ch in chunks], dtype=np.int64).reshape(-1, 2)
    return out


def _chunks_from_arrays(arrays: Mapping[str, np.ndarray]) -> list[_Chunk]:
    bounds = np.asarray(arrays["bounds"])
    return [_Chunk(**{name: np.asarray(arrays[f"c{k}.{name}"]) for name in _CHUNK_FIELDS},
                   cell_lo=int(lo), cell_hi=int(hi)) for k, (lo, hi) in enumerate(bounds.tolist())]


class HmmIbm1:
    """The HMM+IBM1 pairwise aligner (Lin et al., ACL 2020, §3.1, A.2; docs/corpora/marc.md).

    >>> model = HmmIbm1(HmmIbm1Config.paper(min_count=1)).fit(pairs)        # doctest: +SKIP
    >>> model.align(pairs)[0].target_index                                   # doctest: +SKIP

    ``pairs`` are ``(source, target)`` recipes, each a list of instructions given as token lists (see
    :func:`tokenize_recipe`). Training on both directions of every pair is the caller's choice (docs/corpora/marc.md does).
    """

    def __init__(self, config: HmmIbm1Config | None = None) -> None:
        self.config = config or HmmIbm1Config()
        self.vocabulary: dict[str, int] = {}
        self.keys: np.ndarray = np.zeros(0, dtype=np.int64)  # sorted f * V + e of co-occurring pairs
        self.t: np.ndarray = np.zeros(1)  # (nnz + 1,) t(f|e) per key; last entry = missing pair
        self.t_null: np.ndarray = np.zeros(0)  # (V,) t(f|NULL)
        self.jump: dict[int, float] = {}
        self.window = 0
        self.history: list[dict[str, float]] = []
        self.source_vocabulary_size = 0
        self._source_present = np.zeros(0, dtype=bool)
        #: (target word, f == e) of every key: derived from ``keys`` when EM needs them, never by ``align`` (so a
        #: worker that maps the fitted tables holds no copy of their size)
        self._key_cache: tuple[np.ndarray, np.ndarray] | None = None
        self.word_pairs_per_iteration = 0
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ public API

    def fit(self, pairs: Sequence[tuple[Recipe, Recipe]], vocabulary: Mapping[str, int] | None = None,
            recipes: Iterable[Recipe] | None = None) -> HmmIbm1:
        """Train by EM on ``pairs`` (docs/corpora/marc.md schedule).

        The vocabulary is ``vocabulary`` when given, else :func:`build_vocabulary` with ``config.min_count`` over
        ``recipes`` (default: the distinct recipes of ``pairs``, each counted once).
        """
        cfg = self.config
        start = time.perf_counter()
        pairs = self._prepare(pairs)
        if vocabulary is None:
            if recipes is None:
                seen: dict[tuple[tuple[str, ...], ...], Recipe] = {}
                for src, tgt in pairs:
                    for r in (src, tgt):
                        seen.setdefault(tuple(tuple(ins) for ins in r), r)
                recipes = list(seen.values())
            vocabulary = build_vocabulary(recipes, cfg.min_count)
        self.vocabulary = dict(vocabulary)
        V = len(self.vocabulary)
        packed = self._pack(pairs, V, train=True)
        self.word_pairs_per_iteration = packed.word_pairs
        self._init_params(packed, V)
        self.timings = {"pack": time.perf_counter() - start}
        start = time.perf_counter()
        self.history = []
        first = True
        for window, iterations in cfg.schedule:
            self._set_window(window, first=first)
            first = False
            for _ in range(iterations):
                tick = time.perf_counter()
                stats = self._em_iteration(packed, V)
                stats["seconds"] = time.perf_counter() - tick
                self.history.append(stats)
        self.timings["em"] = time.perf_counter() - start
        return self

    def fit_streamed(self, shards: PairShards, vocabulary: Mapping[str, int]) -> HmmIbm1:
        """Train by EM on pairs read shard by shard (docs/corpora/marc.md, "EM in bounded memory").

        ``shards`` holds the pairs encoded with ``vocabulary`` (:class:`~builders.ops.pair_shards.PairShardWriter`);
        at most one shard is loaded at a time. A first pass gathers the co-occurring word pairs (the keys of t) and
        the source words; a second packs each shard against them and saves its chunks in ``shards``; every EM
        iteration then reads the shards in order and adds their expected counts chunk by chunk, as :meth:`fit`
        does over its chunks. With the shards cut where :meth:`fit` cuts its chunks (the writer's rule) every count
        is added in the same order as in :meth:`fit` (whose forward-backward batches never span two chunks either),
        so the parameters are :meth:`fit`'s bit for bit; with a NULL word, the NULL counts of empty target
        instructions are added per shard instead of once at the end (equal to 1e-9).
        """
        cfg = self.config
        start = time.perf_counter()
        self.vocabulary = dict(vocabulary)
        V = len(self.vocabulary)
        present = np.zeros(V, dtype=bool)
        keys, parts, pending, word_pairs = np.zeros(0, dtype=np.int64), [], 0, 0
        for i in range(len(shards)):
            packed = self._shard(shards, i, V)
            self._source_words(packed, present)
            word_pairs += packed.word_pairs
            for lo, hi in packed.ranges:
                parts.append(_unique(self._pair_keys(packed, lo, hi, V))[0])
                pending += parts[-1].size
            del packed
            if pending > max(keys.size, 1 << 20):  # merged when the parts outgrow the keys: memory ~ the table
                keys, parts, pending = _unique(np.concatenate([keys, *parts]))[0], [], 0
        self.keys = _unique(np.concatenate([keys, *parts]))[0] if parts else keys
        del keys, parts
        self.word_pairs_per_iteration = word_pairs
        self._init_params(None, V, present)
        for i in range(len(shards)):
            packed = self._shard(shards, i, V, chunks=None)
            shards.save_packed(i, _chunk_arrays(packed.chunks))
            del packed
        self.timings = {"pack": time.perf_counter() - start}
        start = time.perf_counter()
        self.history = []
        first = True
        for window, iterations in cfg.schedule:
            self._set_window(window, first=first)
            first = False
            for _ in range(iterations):
                tick = time.perf_counter()
                counts, null_counts = np.zeros(self.keys.size + 1), np.zeros(V)
                xi_counts, loglik = np.zeros(2 * self.window + 1), 0.0
                for i in range(len(shards)):
                    packed = self._shard(shards, i, V, chunks=shards.load_packed(i))
                    ll = self._e_step(packed, V, counts, null_counts, xi_counts)[4]
                    loglik += float(ll.sum())
                    del packed, ll
                self._m_step(counts[:-1], null_counts, xi_counts, V)
                self.history.append({"log_likelihood": loglik, "window": float(self.window),
                                     "seconds": time.perf_counter() - tick})
        self.timings["em"] = time.perf_counter() - start
        return self

    def _shard(self, shards: PairShards, i: int, V: int, chunks: Mapping[str, np.ndarray] | None | bool = False
               ) -> _Packed:
        """Shard ``i`` laid out: its cells and buckets; its chunks packed now (``chunks=None``), read from their
        saved arrays (a mapping) or left out (``False``)."""
        enc = shards.load(i)
        rt = _Recipes.from_flat(enc.n_instr, enc.instr_len, enc.tok, V)
        packed = self._layout(rt, np.asarray(enc.src, dtype=np.int64), np.asarray(enc.tgt, dtype=np.int64), V,
                              chunks=chunks is None)
        packed.shard = enc
        if chunks is not None and chunks is not False:
            packed.chunks = _chunks_from_arrays(chunks)
            if [(ch.cell_lo, ch.cell_hi) for ch in packed.chunks] != \
                    [(int(packed.cell_offset[lo]), int(packed.cell_offset[hi])) for lo, hi in packed.ranges]:
                raise ValueError(f"the packed chunks of pair shard {i} do not match its pairs")
        return packed

    def posteriors(self, pairs: Sequence[tuple[Recipe, Recipe]]) -> list[np.ndarray]:
        """γ (M × N) of every pair under the current parameters."""
        return [a.gamma for a in self.align(pairs)]

    def align(self, pairs: Sequence[tuple[Recipe, Recipe]]) -> list[PairAlignment]:
        """Posteriors and per-source-instruction decisions (argmax with lowest-index ties, top-k) of every pair.

        In IBM1-only mode the pairs are still aligned instruction by instruction, each source instruction on its own
        (γ[m, n] ∝ P(f^(m) | e^(n)) under the trained table: no order model).
        """
        pairs = [(list(s), list(t)) for s, t in pairs]
        V = len(self.vocabulary)
        packed = self._pack(pairs, V, train=False)
        logE = self._log_emissions(packed, V)[0]
        if self.config.hmm:
            gamma_flat, _, loglik = self._forward_backward(packed, logE, want_xi=False)
        else:
            gamma_flat, loglik = _independent_posteriors(packed, logE)
        k = self.config.top_k
        return [_decide(self._cells(gamma_flat, packed, p), k, float(loglik[p])) for p in range(len(pairs))]

    def translation_table(self) -> dict[tuple[str, str | None], float]:
        """t(f | e) of every co-occurring word pair (e = ``None`` for NULL), keyed by words (tests, inspection)."""
        V = len(self.vocabulary)
        words = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        out: dict[tuple[str, str | None], float] = {}
        for key, value in zip(self.keys.tolist(), self.t[:-1].tolist()):
            out[(words[key // V], words[key % V])] = value
        if self.config.null_word:
            for f, value in enumerate(self.t_null.tolist()):
                out[(words[f], None)] = value
        return out

    def log_emissions(self, pairs: Sequence[tuple[Recipe, Recipe]]) -> list[np.ndarray]:
        """log P(f^(m) | e^(n)) (Eq. 1) of every pair under the current table: one (M × N) array per pair."""
        packed = self._pack(self._prepare(pairs), len(self.vocabulary), train=False)
        logE = self._log_emissions(packed, len(self.vocabulary))[0]
        return [self._cells(logE, packed, p) for p in range(len(pairs))]

    def e_step(self, pairs: Sequence[tuple[Recipe, Recipe]]) -> dict[str, Any]:
        """One E-step under the current parameters (no update): the exact expectations EM would use.

        Returns ``gamma`` (one M × N array per pair), ``jump_counts`` {d: c(d)}, ``word_counts`` {(f, e): c(f, e)}
        over co-occurring word pairs, ``null_counts`` {f: c(f, NULL)} and ``log_likelihood`` per pair.
        """
        V = len(self.vocabulary)
        packed = self._pack(self._prepare(pairs), V, train=False)
        gamma, counts, null_counts, xi_counts, loglik = self._e_step(packed, V)
        words = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        word_counts = {(words[k // V], words[k % V]): c for k, c in zip(self.keys.tolist(), counts[:-1].tolist())}
        d, _ = self._jump_arrays()
        return {
            "gamma": [self._cells(gamma, packed, p) for p in range(len(pairs))],
            "jump_counts": {int(x): float(c) for x, c in zip(d, xi_counts)},
            "word_counts": word_counts,
            "null_counts": {words[f]: float(c) for f, c in enumerate(null_counts.tolist()) if c},
            "log_likelihood": loglik,
        }

    # ------------------------------------------------------------------ state (artefact folders)

    def to_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The fitted model as plain arrays and JSON-serialisable metadata; :meth:`from_state` inverts it exactly.

        A global stage writes them (``np.savez`` + ``json.dump``) and workers load them by path
        (``np.load(allow_pickle=False)``): no array has an object dtype. The arrays are the model's own (no copy):
        copy them before mutating.

        arrays: ``keys`` (int64, sorted ``f·V + e``), ``t`` (float64, one per key + the missing-pair value),
        ``t_null`` (float64, (V,) or empty before fit), ``jump_offsets`` (int64) / ``jump_probs`` (float64) the
        jump distribution in its dict order, ``source_present`` (bool, (V,): source-side words, for the MAP M-step).
        meta: ``format``, ``config`` (:meth:`HmmIbm1Config.to_dict`), ``vocabulary`` (words ordered by id: ids are
        ``0..V-1``), ``window``, ``source_vocabulary_size``, ``word_pairs_per_iteration``, ``history``, ``timings``.
        Floats in meta round-trip exactly through ``json`` (``repr``); the ones that decide ``align()`` are arrays.
        """
        words = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        if [self.vocabulary[w] for w in words] != list(range(len(words))):
            raise ValueError("vocabulary ids must be 0..V-1 to be saved")
        arrays = {
            "keys": np.asarray(self.keys, dtype=np.int64),
            "t": np.asarray(self.t, dtype=np.float64),
            "t_null": np.asarray(self.t_null, dtype=np.float64),
            "jump_offsets": np.fromiter(self.jump.keys(), dtype=np.int64, count=len(self.jump)),
            "jump_probs": np.fromiter(self.jump.values(), dtype=np.float64, count=len(self.jump)),
            "source_present": np.asarray(self._source_present, dtype=bool),
        }
        meta = {
            "format": _STATE_FORMAT,
            "config": self.config.to_dict(),
            "vocabulary": words,
            "window": int(self.window),
            "source_vocabulary_size": int(self.source_vocabulary_size),
            "word_pairs_per_iteration": int(self.word_pairs_per_iteration),
            "history": [{str(k): float(v) for k, v in h.items()} for h in self.history],
            "timings": {str(k): float(v) for k, v in self.timings.items()},
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> HmmIbm1:
        """The model saved by :meth:`to_state` (``arrays`` may be an ``np.load`` result or memory-mapped arrays).

        ``align()``, ``posteriors()``, ``log_emissions()``, ``e_step()`` and ``translation_table()`` give
        bit-identical results to the saved model's.
        """
        if meta.get("format") != _STATE_FORMAT:
            raise ValueError(f"not an HmmIbm1 state: format {meta.get('format')!r}, expected {_STATE_FORMAT!r}")
        raw = dict(meta["config"])
        raw["schedule"] = tuple((int(w), int(it)) for w, it in raw["schedule"])
        model = cls(HmmIbm1Config(**raw))
        words = list(meta["vocabulary"])
        model.vocabulary = {w: i for i, w in enumerate(words)}
        V = len(words)
        if len(model.vocabulary) != V:
            raise ValueError("the saved vocabulary repeats a word")
        model.keys = np.asarray(arrays["keys"], dtype=np.int64)
        model.t = np.asarray(arrays["t"], dtype=np.float64)
        model.t_null = np.asarray(arrays["t_null"], dtype=np.float64)
        model._source_present = np.asarray(arrays["source_present"], dtype=bool)
        offsets, probs = np.asarray(arrays["jump_offsets"]), np.asarray(arrays["jump_probs"])
        if model.t.shape != (model.keys.size + 1,) or model.t_null.size not in (0, V) or offsets.shape != probs.shape:
            raise ValueError("inconsistent HmmIbm1 state: t must hold one value per key + 1, t_null 0 or V values, "
                             "jump_offsets and jump_probs the same count")
        if model.keys.size and not (0 <= int(model.keys[0]) and int(model.keys[-1]) < V * V):
            raise ValueError("inconsistent HmmIbm1 state: keys outside [0, V²)")
        model.jump = {int(d): float(p) for d, p in zip(offsets.tolist(), probs.tolist())}
        model.window = int(meta["window"])
        model.source_vocabulary_size = int(meta["source_vocabulary_size"])
        model.word_pairs_per_iteration = int(meta["word_pairs_per_iteration"])
        model.history = [dict(h) for h in meta.get("history", [])]
        model.timings = dict(meta.get("timings", {}))
        return model

    # ------------------------------------------------------------------ encoding and packing

    @staticmethod
    def _cells(flat: np.ndarray, packed: _Packed, p: int) -> np.ndarray:
        M, N = int(packed.M[p]), int(packed.N[p])
        lo, hi = packed.cell_offset[p], packed.cell_offset[p + 1]
        return flat[lo:hi].reshape(M, N) if hi > lo else np.zeros((M, N))

    def _prepare(self, pairs: Sequence[tuple[Recipe, Recipe]]) -> list[tuple[Recipe, Recipe]]:
        if self.config.hmm:
            return [(list(s), list(t)) for s, t in pairs]
        return [(_flatten_recipe(s), _flatten_recipe(t)) for s, t in pairs]

    def _pack(self, pairs: Sequence[tuple[Recipe, Recipe]], V: int, train: bool) -> _Packed:
        """Encode the distinct recipes once, lay out the cells, chunks (and, when training, the co-occurring keys)."""
        vocab = self.vocabulary
        index: dict[Any, int] = {}
        by_id: dict[int, int] = {}
        encoded: list[list[np.ndarray]] = []
        keep_alive = []

        def recipe_id(recipe: Recipe) -> int:
            i = by_id.get(id(recipe))
            if i is not None:
                return i
            key = tuple(tuple(ins) for ins in recipe)
            i = index.get(key)
            if i is None:
                i = index[key] = len(encoded)
                encoded.append([np.fromiter((vocab[w] for w in ins if w in vocab), dtype=np.int64) for ins in recipe])
            by_id[id(recipe)] = i
            keep_alive.append(recipe)  # ids stay unique while the recipe objects live
            return i

        src_r = np.array([recipe_id(s) for s, _ in pairs], dtype=np.int64)
        tgt_r = np.array([recipe_id(t) for _, t in pairs], dtype=np.int64)
        return self._layout(_Recipes.build(encoded, V), src_r, tgt_r, V, keys=train)

    def _layout(self, rt: _Recipes, src_r: np.ndarray, tgt_r: np.ndarray, V: int, keys: bool = False,
                chunks: bool = True) -> _Packed:
        """Cells, chunks and buckets of the pairs ``(src_r[p], tgt_r[p])`` of the recipes ``rt``; with ``keys`` the
        co-occurring word pairs of these pairs become ``self.keys`` first; without ``chunks`` only the cells and
        buckets are laid out (``packed.ranges`` says where the chunks would be)."""
        cfg = self.config
        P = src_r.size
        M = rt.n_instr[src_r] if P else np.zeros(0, np.int64)
        N = rt.n_instr[tgt_r] if P else np.zeros(0, np.int64)
        active = (M > 0) & (N > 0)
        MN = np.where(active, M * N, 0)
        cell_offset = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(MN, out=cell_offset[1:])
        C = int(cell_offset[-1])
        cell_pair = np.repeat(np.arange(P, dtype=np.int64), MN)
        local = np.arange(C, dtype=np.int64) - cell_offset[cell_pair]
        Nc = N[cell_pair]
        cell_m = local // np.maximum(Nc, 1)
        cell_n = local - cell_m * Nc
        cell_src = rt.instr_off[src_r][cell_pair] + cell_m if C else np.zeros(0, np.int64)
        cell_tgt = rt.instr_off[tgt_r][cell_pair] + cell_n if C else np.zeros(0, np.int64)
        packed = _Packed(recipes=rt, src_r=src_r, tgt_r=tgt_r, M=M, N=N, cell_offset=cell_offset,
                         cell_J=rt.instr_len[cell_src], cell_I=rt.instr_len[cell_tgt], cell_src=cell_src)
        Ts = np.diff(rt.tok_off)[src_r] if P else np.zeros(0, np.int64)
        Tt = np.diff(rt.tok_off)[tgt_r] if P else np.zeros(0, np.int64)
        Fd = np.diff(rt.d_off)[src_r] if P else np.zeros(0, np.int64)
        Td = np.diff(rt.d_off)[tgt_r] if P else np.zeros(0, np.int64)
        L = np.where(active, Fd * Td, 0)
        packed.word_pairs = int(np.where(active, Ts * Tt, 0).sum())
        packed.entries = int(L.sum())
        # chunk boundaries: contiguous pair ranges of at most chunk_entries entries (one pair may exceed it) and
        # MAX_CHUNK_PAIRS pairs; the pair shards of fit_streamed end at the same boundaries (PairShardWriter)
        bounds = [0]
        csum = np.cumsum(L)
        while bounds[-1] < P:
            lo = bounds[-1]
            base = csum[lo - 1] if lo else 0
            hi = int(np.searchsorted(csum, base + cfg.chunk_entries, side="right"))
            bounds.append(min(max(hi, lo + 1), lo + MAX_CHUNK_PAIRS))
        packed.ranges = [(lo, hi) for lo, hi in itertools.pairwise(bounds) if L[lo:hi].sum() > 0]
        if keys:
            parts = [_unique(self._pair_keys(packed, lo, hi, V))[0] for lo, hi in packed.ranges]
            self.keys = _unique(np.concatenate(parts))[0] if parts else np.zeros(0, np.int64)
        if chunks:
            for lo, hi in packed.ranges:
                packed.chunks.append(self._chunk(packed, lo, hi, V))
        # forward-backward buckets within each chunk's pair range, never across: a shard of fit_streamed (one range)
        # then batches its pairs exactly as fit does
        packed.buckets = [b for lo, hi in itertools.pairwise(bounds)
                          for b in _buckets(M, N, cell_offset, lo + np.flatnonzero(active[lo:hi]), cfg.bucket_cells)]
        return packed

    @staticmethod
    def _outer(packed: _Packed, lo: int, hi: int, off: np.ndarray) -> tuple[np.ndarray, ...]:
        """The source items of pairs lo..hi-1 (one per distinct source word of each instruction, or per distinct word
        of the recipe with ``off = r_off``): their pair (relative to lo) and index inside the pair."""
        sr = packed.src_r[lo:hi]
        active = (packed.M[lo:hi] > 0) & (packed.N[lo:hi] > 0)
        F = np.where(active, off[sr + 1] - off[sr], 0)
        pair_of = np.repeat(np.arange(F.size, dtype=np.int64), F)
        return pair_of, _ragged_arange(F)

    @staticmethod
    def _pair_keys(packed: _Packed, lo: int, hi: int, V: int) -> np.ndarray:
        """``f·V + e`` for every distinct source word × distinct target word of pairs lo..hi-1 (with repeats across
        pairs): the co-occurring word pairs."""
        rt = packed.recipes
        sr, tr = packed.src_r[lo:hi], packed.tgt_r[lo:hi]
        pair_of, i = HmmIbm1._outer(packed, lo, hi, rt.r_off)
        inner = (rt.r_off[tr + 1] - rt.r_off[tr])[pair_of]
        f = rt.r_word[rt.r_off[sr][pair_of] + i] * V
        keys = np.repeat(f, inner)
        keys += rt.r_word[np.repeat(rt.r_off[tr][pair_of], inner) + _ragged_arange(inner)]
        return keys

    @staticmethod
    def _chunk_keys(packed: _Packed, lo: int, hi: int, V: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keys ``f·V + e`` of every entry of pairs lo..hi-1 (each distinct source word of an instruction × each
        distinct target word of each target instruction, source-major), the target word's multiplicity, and the
        number of entries of each source item."""
        rt = packed.recipes
        sr, tr = packed.src_r[lo:hi], packed.tgt_r[lo:hi]
        pair_of, s = HmmIbm1._outer(packed, lo, hi, rt.d_off)
        inner = (rt.d_off[tr + 1] - rt.d_off[tr])[pair_of]
        keys = np.repeat(rt.d_word[rt.d_off[sr][pair_of] + s] * V, inner)
        eidx = np.repeat(rt.d_off[tr][pair_of], inner)
        eidx += _ragged_arange(inner)
        keys += rt.d_word[eidx]
        return keys, rt.d_cnt[eidx], inner

    def _chunk(self, packed: _Packed, lo: int, hi: int, V: int) -> _Chunk:
        """Slots and segments of pairs lo..hi-1 (docs/corpora/marc.md: packed once, gathered every iteration).

        A segment is (distinct source word of instruction m, non-empty target instruction n); its entries are the
        distinct words of n. Segments are laid out by source word: the slots of t(f|·) are contiguous in the sorted
        keys, so the per-iteration gather and scatter walk t almost sequentially (about 2x faster than pair order).
        """
        rt = packed.recipes
        chunk_keys, e_cnt, inner = self._chunk_keys(packed, lo, hi, V)
        slots = _searchsorted_slots(self.keys, chunk_keys)
        del chunk_keys
        rep_pos = np.flatnonzero(e_cnt > 1)
        rep_w = e_cnt[rep_pos]
        del e_cnt
        sr, tr = packed.src_r[lo:hi], packed.tgt_r[lo:hi]
        pair_of, s = self._outer(packed, lo, hi, rt.d_off)
        outer_start = np.zeros(inner.size, dtype=np.int64)
        np.cumsum(inner[:-1], out=outer_start[1:])
        NE = (rt.ne_off[tr + 1] - rt.ne_off[tr])[pair_of]
        d_outer = rt.d_off[sr][pair_of] + s
        cell_lo, cell_hi = int(packed.cell_offset[lo]), int(packed.cell_offset[hi])
        cell_outer = (packed.cell_offset[lo:hi] - cell_lo)[pair_of] + rt.d_local[d_outer] * packed.N[lo:hi][pair_of]
        ne = np.repeat(rt.ne_off[tr][pair_of], NE)
        ne += _ragged_arange(NE)
        seg_start = np.repeat(outer_start, NE) + rt.ne_start[ne]
        seg_len = rt.ne_len[ne]
        seg_cell = np.repeat(cell_outer, NE) + rt.ne_local[ne]
        seg_d = np.repeat(d_outer, NE)
        seg_f = rt.d_word[seg_d]
        order = _argsort_small(seg_f)
        new_len = seg_len[order]
        new_start = np.zeros(order.size, dtype=np.int64)
        np.cumsum(new_len[:-1], out=new_start[1:])
        old_pos = np.repeat(seg_start[order], new_len)
        old_pos += _ragged_arange(new_len)
        slots = slots[old_pos]
        if rep_pos.size:
            inverse = np.empty(old_pos.size, dtype=np.int64)
            inverse[old_pos] = np.arange(old_pos.size)
            rep_pos = inverse[rep_pos]
            by = np.argsort(rep_pos)
            rep_pos, rep_w = rep_pos[by], rep_w[by]
        small = np.int32 if max(int(old_pos.size), cell_hi - cell_lo, V) < np.iinfo(np.int32).max else np.int64
        return _Chunk(slots=slots, seg_start=new_start.astype(small), seg_len=new_len.astype(small),
                      seg_cell=seg_cell[order].astype(small), seg_f=seg_f[order].astype(small),
                      seg_mult=rt.d_cnt[seg_d[order]], rep_pos=rep_pos.astype(small), rep_w=rep_w,
                      cell_lo=cell_lo, cell_hi=cell_hi)

    # ------------------------------------------------------------------ parameters

    @staticmethod
    def _source_words(packed: _Packed, present: np.ndarray) -> None:
        """Mark in ``present`` the words of the recipes used as a source by the pairs of ``packed``."""
        rt = packed.recipes
        is_src = np.zeros(rt.n_instr.size, dtype=bool)
        is_src[packed.src_r] = True
        d_recipe = np.repeat(np.arange(rt.n_instr.size), np.diff(rt.d_off))
        present[rt.d_word[is_src[d_recipe]]] = True

    def _init_params(self, packed: _Packed | None, V: int, present: np.ndarray | None = None) -> None:
        """Initial t (uniform over the source vocabulary, or the identity prior), t(.|NULL) and the source-word
        mask, from the source words of ``packed`` (or the mask ``present`` gathered shard by shard)."""
        cfg = self.config
        if present is None:
            present = np.zeros(V, dtype=bool)
            self._source_words(packed, present)
        Vf = max(int(present.sum()), 1)
        self.source_vocabulary_size = Vf
        self._source_present = present
        kappa = cfg.identity_prior
        e, same = self._set_key_arrays(V)
        denom = Vf + kappa * present[e] if kappa else np.full(self.keys.size, float(Vf))
        t = np.where(same, 1.0 + kappa, 1.0) / denom
        self.t = np.append(t, cfg.min_prob)
        self.t_null = np.full(V, 1.0 / Vf)

    def _set_key_arrays(self, V: int) -> tuple[np.ndarray, np.ndarray]:
        """Target word ``e`` of every key ``f·V + e`` and whether ``f = e`` (derived from ``keys``, never stored)."""
        f = self.keys // max(V, 1)
        e = self.keys - f * V
        same = f == e
        self._key_cache = (e.astype(np.int32 if V < np.iinfo(np.int32).max else np.int64), same)
        return e, same

    @property
    def _key_e(self) -> np.ndarray:
        if self._key_cache is None:
            self._set_key_arrays(len(self.vocabulary))
        return self._key_cache[0]

    @property
    def _key_same(self) -> np.ndarray:
        if self._key_cache is None:
            self._set_key_arrays(len(self.vocabulary))
        return self._key_cache[1]

    def _set_window(self, window: int, first: bool) -> None:
        """Start or widen the jump window: new offsets get the smallest current p, then p is renormalised."""
        if first or not self.jump:
            self.jump = {d: 1.0 / (2 * window + 1) for d in range(-window, window + 1)}
        else:
            low = min(self.jump.values())
            jump = {d: self.jump.get(d, low) for d in range(-window, window + 1)}
            total = sum(jump.values())
            self.jump = {d: p / total for d, p in jump.items()}
        self.window = window

    # ------------------------------------------------------------------ EM

    def _gather(self, chunk: _Chunk, out: np.ndarray) -> np.ndarray:
        """t(f|e) × (multiplicity of e in its instruction) for every entry of a chunk, into ``out``."""
        tv = np.take(self.t, chunk.slots, out=out[: chunk.slots.size], mode="clip")  # slots are always in range
        if chunk.rep_pos.size:
            tv[chunk.rep_pos] *= chunk.rep_w
        return tv

    def _buffer(self, packed: _Packed, c: int, keep: bool) -> np.ndarray:
        """The gather buffer of chunk ``c``: its own when the gathered values are kept, else one shared buffer."""
        if keep:
            while len(packed.buffers) <= c:
                packed.buffers.append(np.empty(packed.chunks[len(packed.buffers)].slots.size))
            return packed.buffers[c]
        if packed.shared is None:
            packed.shared = np.empty(max(ch.slots.size for ch in packed.chunks))
        return packed.shared

    def _log_emissions(self, packed: _Packed, V: int, keep: bool = False
                       ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray] | None]:
        """log P(f^(m) | e^(n)) for every cell (Eq. 1); per chunk the sums S = Σ_i t(f_j|e_i) (+ NULL) and, with
        ``keep`` and at most ``cache_entries`` entries, the gathered t values (reused by the count step)."""
        cfg = self.config
        C = int(packed.cell_offset[-1])
        logE = np.zeros(C)
        sums: list[np.ndarray] = []
        keep = keep and packed.entries <= cfg.cache_entries
        gathered: list[np.ndarray] | None = [] if keep else None
        for c, chunk in enumerate(packed.chunks):
            tv = self._gather(chunk, self._buffer(packed, c, keep))
            S = np.add.reduceat(tv, chunk.seg_start)
            if gathered is not None:
                gathered.append(tv)
            if cfg.null_word:
                S += self.t_null[chunk.seg_f]
            sums.append(S)
            logS = np.log(S)
            logS *= chunk.seg_mult
            logE[chunk.cell_lo:chunk.cell_hi] += np.bincount(chunk.seg_cell, weights=logS,
                                                             minlength=chunk.cell_hi - chunk.cell_lo)
        J, I = packed.cell_J, packed.cell_I
        nonempty = I > 0
        logE[nonempty] -= J[nonempty] * np.log(I[nonempty] + (1.0 if cfg.null_word else 0.0))
        empty = ~nonempty & (J > 0)
        if empty.any():
            if cfg.null_word:  # only NULL emits: Σ_j log t(f_j | NULL), denominator 1
                rt = packed.recipes
                per_src = np.bincount(rt.d_instr, weights=rt.d_cnt * np.log(self.t_null[rt.d_word]),
                                      minlength=rt.instr_len.size)
                logE[empty] = per_src[packed.cell_src[empty]]
            else:
                logE[empty] = J[empty] * math.log(cfg.empty_target_prob)
        return logE, sums, gathered

    def _jump_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        w = self.window
        d = np.arange(-w, w + 1)
        p = np.array([self.jump.get(int(x), 0.0) for x in d])
        return d, p

    def _forward_backward(self, packed: _Packed, logE: np.ndarray, want_xi: bool, xi_counts: np.ndarray | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact posteriors γ (flat, per cell), expected jump counts c(d) (added bucket by bucket to ``xi_counts``
        when given) and log-likelihood per pair."""
        C = logE.size
        gamma = np.zeros(C)
        d, p = self._jump_arrays()
        xi_counts = np.zeros(d.size) if xi_counts is None else xi_counts
        loglik = np.zeros(packed.M.size)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            logp = np.log(np.maximum(p, 0.0))
            for bucket in packed.buckets:
                g, xc, ll = _fb_bucket(logE, bucket, d, p, logp, want_xi)
                valid = bucket.idx >= 0
                gamma[bucket.idx[valid]] = g[valid]
                xi_counts += xc
                loglik[bucket.pairs] = ll
        return gamma, xi_counts, loglik

    def _e_step(self, packed: _Packed, V: int, counts: np.ndarray | None = None, null_counts: np.ndarray | None = None,
                xi_counts: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One E-step: γ per cell, expected word-pair counts per slot (last = missing pairs), NULL counts per
        source word, expected jump counts per offset of the window, log-likelihood per pair. ``counts``,
        ``null_counts`` and ``xi_counts``, when given, are added to in place, chunk by chunk and bucket by bucket
        (the shards of :meth:`fit_streamed`)."""
        cfg = self.config
        logE, sums, gathered = self._log_emissions(packed, V, keep=True)
        if cfg.hmm:
            gamma, xi_counts, loglik = self._forward_backward(packed, logE, want_xi=True, xi_counts=xi_counts)
        else:  # IBM1-only training: one cell per pair, γ = 1
            gamma, loglik = _independent_posteriors(packed, logE)
            xi_counts = np.zeros(2 * self.window + 1) if xi_counts is None else xi_counts
        nnz = self.keys.size
        counts = np.zeros(nnz + 1) if counts is None else counts
        null_counts = np.zeros(V) if null_counts is None else null_counts
        for c, (chunk, S) in enumerate(zip(packed.chunks, sums)):
            w_seg = gamma[chunk.cell_lo:chunk.cell_hi][chunk.seg_cell]
            w_seg /= S
            if not cfg.nltk_compat:  # NLTK counts a word repeated k times in a sentence once (docs/corpora/marc.md)
                w_seg *= chunk.seg_mult
            weights = np.repeat(w_seg, chunk.seg_len)
            weights *= gathered[c] if gathered is not None else self._gather(chunk, self._buffer(packed, c, False))
            counts += np.bincount(chunk.slots, weights=weights, minlength=nnz + 1)
            if cfg.null_word:
                null_counts += np.bincount(chunk.seg_f, weights=w_seg * self.t_null[chunk.seg_f], minlength=V)
        if cfg.null_word:  # an empty target instruction emits through NULL alone: c(f_j, NULL) += γ[m, n]
            empty = (packed.cell_I == 0) & (packed.cell_J > 0)
            if empty.any():
                rt = packed.recipes
                mass = np.bincount(packed.cell_src[empty], weights=gamma[empty], minlength=rt.instr_len.size)
                mult = np.ones_like(rt.d_cnt) if cfg.nltk_compat else rt.d_cnt
                null_counts += np.bincount(rt.d_word, weights=mass[rt.d_instr] * mult, minlength=V)
        return gamma, counts, null_counts, xi_counts, loglik

    def _em_iteration(self, packed: _Packed, V: int) -> dict[str, float]:
        _, counts, null_counts, xi_counts, loglik = self._e_step(packed, V)
        self._m_step(counts[:-1], null_counts, xi_counts, V)
        return {"log_likelihood": float(loglik.sum()), "window": float(self.window)}

    def _m_step(self, counts: np.ndarray, null_counts: np.ndarray, xi_counts: np.ndarray, V: int) -> None:
        """t(f|e) = c(f, e) / Σ_f c(f, e) (floored at ``min_prob``); p(d) = c(d) / Σ c; t(f|NULL) likewise.

        With ``smoothing`` α and ``identity_map`` κ the counts get Dirichlet pseudo-counts ``α + κ·[f = e]`` over
        the whole source vocabulary (MAP-EM); word pairs that never co-occur keep their share in the normaliser.
        """
        cfg = self.config
        e = self._key_e
        totals = np.bincount(e, weights=counts, minlength=V)
        kappa = cfg.identity_prior if cfg.identity_map else 0.0
        if kappa > 0 or cfg.smoothing > 0:
            counts = counts + cfg.smoothing + kappa * self._key_same
            totals = totals + cfg.smoothing * self.source_vocabulary_size + kappa * self._source_present
        denom = totals[e]
        t = self.t[:-1]  # in place: the last entry stays the missing-pair value
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(counts, denom, out=t)
        t[~(denom > 0)] = 0.0
        np.maximum(t, cfg.min_prob, out=t)
        if cfg.null_word:
            total = null_counts.sum()
            t_null = null_counts / total if total > 0 else np.full(V, 1.0 / max(V, 1))
            self.t_null = np.maximum(t_null, cfg.min_prob)
        if cfg.hmm:
            d, _ = self._jump_arrays()
            total = xi_counts.sum()
            if total > 0:
                p = np.maximum(xi_counts / total, cfg.min_prob)
                self.jump = {int(x): float(v) for x, v in zip(d, p / p.sum())}


def _buckets(M: np.ndarray, N: np.ndarray, cell_offset: np.ndarray, idx_active: np.ndarray, bucket_cells: int
             ) -> list[_Bucket]:
    """The pairs ``idx_active`` grouped by M (no padding along the source), sorted by N inside a group, cut into
    buckets of at most ``bucket_cells`` padded cells."""
    buckets: list[_Bucket] = []
    if idx_active.size == 0:
        return buckets
    order = idx_active[np.lexsort((idx_active, N[idx_active], M[idx_active]))]
    Ms = M[order]
    cuts = np.flatnonzero(np.diff(Ms)) + 1
    for group in np.split(order, cuts):
        mx = int(M[group[0]])
        i = 0
        while i < group.size:
            # sorted by N: the bucket's Nx is its last pair's N
            n_max = N[group[i:]]
            size = (np.arange(1, n_max.size + 1)) * mx * n_max
            j = i + max(1, int(np.searchsorted(size, bucket_cells, side="right")))
            sel = group[i:j]
            Mb, Nb = M[sel], N[sel]
            nx = int(Nb.max())
            mm = np.arange(mx)[None, :, None]
            nn = np.arange(nx)[None, None, :]
            idx = cell_offset[sel][:, None, None] + mm * Nb[:, None, None] + nn
            valid = nn < Nb[:, None, None]
            buckets.append(_Bucket(pairs=sel, M=Mb, N=Nb, idx=np.where(valid, idx, -1)))
            i = j
    return buckets


def _lse(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log Σ exp along ``axis``; all -inf gives -inf."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


def _fb_bucket(logE_flat: np.ndarray, bucket: _Bucket, d: np.ndarray, p: np.ndarray, logp: np.ndarray,
               want_xi: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log-space forward-backward on the band for one padded batch (docs/corpora/marc.md transitions, uniform start)."""
    idx = bucket.idx
    B, Mx, Nx = idx.shape
    K = d.size
    w = (K - 1) // 2
    Mb, Nb = bucket.M, bucket.N
    logE = np.where(idx >= 0, logE_flat[np.maximum(idx, 0)], -np.inf)
    n = np.arange(Nx)
    dest = n[None, :, None] + d[None, None, :]  # (1, Nx, K): target of the jump from n' by d_k
    valid = (dest >= 0) & (dest < Nb[:, None, None]) & (n[None, :, None] < Nb[:, None, None])
    Z = np.where(valid, p[None, None, :], 0.0).sum(-1)  # (B, Nx)
    logA = np.where(valid, logp[None, None, :] - np.log(Z)[:, :, None], -np.inf)  # from n' with jump d_k
    # gather helpers: into-n predecessor n - d_k, and successor n' + d_k, on arrays padded by w on both sides
    src_of = (n[:, None] - d[None, :]) + w  # (Nx, K) index into a w-padded axis
    dst_of = (n[:, None] + d[None, :]) + w
    kk = np.arange(K)[None, :]
    pad = np.full((B, w), -np.inf)
    alpha = np.empty((B, Mx, Nx))
    alpha[:, 0] = np.where(n[None, :] < Nb[:, None], logE[:, 0] - np.log(Nb)[:, None], -np.inf)
    for m in range(1, Mx):
        P = alpha[:, m - 1][:, :, None] + logA  # (B, Nx, K) indexed by (n', k)
        Ppad = np.concatenate([np.full((B, w, K), -np.inf), P, np.full((B, w, K), -np.inf)], axis=1)
        cand = Ppad[:, src_of, kk]  # (B, Nx, K): from n - d_k with jump d_k
        new = _lse(cand) + logE[:, m]
        alpha[:, m] = np.where((m < Mb)[:, None], new, alpha[:, m - 1])
    ll = _lse(alpha[:, Mx - 1])
    beta = np.zeros((B, Mx, Nx))
    beta[:, :, :] = np.where(n[None, None, :] < Nb[:, None, None], 0.0, -np.inf)
    for m in range(Mx - 2, -1, -1):
        nxt = logE[:, m + 1] + beta[:, m + 1]  # (B, Nx)
        npad = np.concatenate([pad, nxt, pad], axis=1)
        cand = npad[:, dst_of] + logA  # (B, Nx, K)
        new = _lse(cand)
        beta[:, m] = np.where((m + 1 < Mb)[:, None], new, beta[:, m])
    gamma = np.exp(alpha + beta - ll[:, None, None])
    xi_counts = np.zeros(K)
    if want_xi and Mx > 1:
        nxt_all = logE[:, 1:] + beta[:, 1:]  # (B, Mx-1, Nx)
        padm = np.full((B, Mx - 1, w), -np.inf)
        npad = np.concatenate([padm, nxt_all, padm], axis=2)
        X = alpha[:, :-1, :, None] + logA[:, None, :, :] + npad[:, :, dst_of] - ll[:, None, None, None]
        live = (np.arange(1, Mx)[None, :] < Mb[:, None])[:, :, None, None]
        xi_counts = np.where(live, np.exp(X), 0.0).sum(axis=(0, 1, 2))
    return gamma, xi_counts, ll


def _independent_posteriors(packed: _Packed, logE: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """γ[m, n] ∝ P(f^(m) | e^(n)) per source instruction (IBM1-only mode: no transitions), and log-likelihoods."""
    P = packed.M.size
    active = packed.cell_offset[1:] > packed.cell_offset[:-1]
    rows_per_pair = np.where(active, packed.M, 0)
    row_pair = np.repeat(np.arange(P), rows_per_pair)
    row_m = np.arange(row_pair.size) - np.repeat(np.cumsum(rows_per_pair) - rows_per_pair, rows_per_pair)
    row_len = packed.N[row_pair]
    row_start = packed.cell_offset[row_pair] + row_m * row_len
    gamma = np.zeros(logE.size)
    loglik = np.zeros(P)
    if row_start.size:
        mx = np.maximum.reduceat(logE, row_start)
        ex = np.exp(logE - np.repeat(mx, row_len))
        sums = np.add.reduceat(ex, row_start)
        gamma = ex / np.repeat(sums, row_len)
        loglik = np.bincount(row_pair, weights=np.log(sums) + mx - np.log(row_len), minlength=P)
    return gamma, loglik


def _decide(gamma: np.ndarray, k: int, loglik: float = float("nan")) -> PairAlignment:
    """Argmax target (lowest index on ties), its probability and the top-k of every source instruction."""
    M, N = gamma.shape
    if N == 0:
        empty_i = np.zeros((M, 0), dtype=np.int64)
        return PairAlignment(gamma, np.full(M, -1), np.zeros(M), empty_i, np.zeros((M, 0)), loglik)
    order = np.argsort(-gamma, axis=1, kind="stable")[:, :k]
    top_p = np.take_along_axis(gamma, order, axis=1)
    target = order[:, 0] if M else np.zeros(0, dtype=np.int64)
    return PairAlignment(gamma, target, top_p[:, 0] if M else np.zeros(0), order, top_p, loglik)
