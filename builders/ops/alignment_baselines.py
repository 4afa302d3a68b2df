"""Baselines of MARC's pairwise alignment evaluation (Lin et al., ACL 2020, §4.2; docs/corpora/marc.md).

Each baseline maps every source instruction of a recipe pair to one target instruction. Lexical baselines work on
the tokens of docs/corpora/marc.md (NFKC-casefolded ``\\w+`` minus stop words) *without* the vocabulary cut-off; every
argmax breaks ties towards the lowest target index (so an all-zero row maps to target 0).

- random: a uniform target per source instruction (the protocol averages the scores of seeds 0-9);
- uniform: source i of M (0-based) -> target ``floor(i·N/M)`` (the paper's example S1,S2 -> T1, S3,S4 -> T2);
- exact word match: ``|common word types| / |word types of the longer instruction|``;
- TF-IDF cosine: raw term counts × ``idf = ln((1 + n) / (1 + df)) + 1`` fitted on training instructions, L2;
- BM25: corpus = the target recipe's instructions, query = the source instruction, k1 = 1.5, b = 0.75,
  ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` (never negative; not rank_bm25's floored Okapi idf);
- sentence embeddings: cosine of given (L2-normalised) vectors.

Pure functions over token lists and arrays; nothing here loads a model.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "argmax_alignment",
    "bm25_scores",
    "embedding_scores",
    "exact_match_scores",
    "fit_idf",
    "random_alignment",
    "tfidf_scores",
    "uniform_alignment",
]

Recipe = Sequence[Sequence[str]]


def argmax_alignment(scores: np.ndarray) -> np.ndarray:
    """Best target per source row, lowest index on ties (``np.argmax``); an (M, 0) matrix gives -1s."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2:
        raise ValueError("scores must be an (M, N) matrix")
    if scores.shape[1] == 0:
        return np.full(scores.shape[0], -1, dtype=np.int64)
    return np.argmax(scores, axis=1).astype(np.int64)


def random_alignment(M: int, N: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random target for each of ``M`` source instructions (``rng.integers(0, N, M)``)."""
    if N <= 0:
        return np.full(M, -1, dtype=np.int64)
    return rng.integers(0, N, size=M).astype(np.int64)


def uniform_alignment(M: int, N: int) -> np.ndarray:
    """Source i (0-based) of M -> target ``floor(i·N/M)`` (Lin et al., ACL 2020, §4.2; docs/corpora/marc.md reading)."""
    if N <= 0:
        return np.full(M, -1, dtype=np.int64)
    return (np.arange(M, dtype=np.int64) * N) // max(M, 1)


def _count_matrices(source: Recipe, target: Recipe) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Term-count matrices (M × V, N × V) over the words of the pair (sorted, so results never depend on order)."""
    words = sorted({w for ins in list(source) + list(target) for w in ins})
    index = {w: i for i, w in enumerate(words)}

    def matrix(recipe: Recipe) -> np.ndarray:
        out = np.zeros((len(recipe), len(words)))
        for r, tokens in enumerate(recipe):
            for w, c in Counter(tokens).items():
                out[r, index[w]] = c
        return out

    return matrix(source), matrix(target), words


def exact_match_scores(source: Recipe, target: Recipe) -> np.ndarray:
    """``|types(f_m) ∩ types(e_n)| / max(|types(f_m)|, |types(e_n)|)`` (0 when both are empty), docs/corpora/marc.md."""
    A, B, _ = _count_matrices(source, target)
    A, B = (A > 0).astype(float), (B > 0).astype(float)
    common = A @ B.T
    longer = np.maximum(A.sum(1)[:, None], B.sum(1)[None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(longer > 0, common / longer, 0.0)


def fit_idf(documents: Iterable[Sequence[str]]) -> tuple[dict[str, float], float]:
    """Smoothed idf ``ln((1 + n) / (1 + df)) + 1`` over training instructions; returns (idf, idf of unseen words)."""
    df: Counter[str] = Counter()
    n = 0
    for tokens in documents:
        n += 1
        df.update(set(tokens))
    idf = {w: math.log((1 + n) / (1 + c)) + 1.0 for w, c in df.items()}
    return idf, math.log(1 + n) + 1.0


def tfidf_scores(source: Recipe, target: Recipe, idf: Mapping[str, float], unseen_idf: float) -> np.ndarray:
    """Cosine of L2-normalised tf·idf vectors (raw counts; sklearn's ``TfidfVectorizer(smooth_idf=True)`` weighting)."""
    A, B, words = _count_matrices(source, target)
    weights = np.array([idf.get(w, unseen_idf) for w in words])
    A, B = A * weights, B * weights

    def l2(x: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)

    return l2(A) @ l2(B).T


def bm25_scores(source: Recipe, target: Recipe, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 of every source instruction (query) against the target recipe's instructions (corpus), docs/corpora/marc.md.

    ``score(q, d) = Σ_{t in q} idf(t) · tf(t, d)·(k1 + 1) / (tf(t, d) + k1·(1 - b + b·|d| / avgdl))`` over the query's
    token occurrences, ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` with N = number of target instructions.
    """
    Q, D, _ = _count_matrices(source, target)
    N = D.shape[0]
    if N == 0:
        return np.zeros((Q.shape[0], 0))
    df = (D > 0).sum(0)
    idf = np.log(1.0 + (N - df + 0.5) / (df + 0.5))
    dl = D.sum(1)
    avgdl = dl.mean()
    norm = k1 * (1.0 - b + b * dl / avgdl) if avgdl > 0 else np.full(N, k1)
    tf_part = D * (k1 + 1.0) / (D + norm[:, None])  # (N, V)
    return Q @ (tf_part * idf[None, :]).T


def embedding_scores(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Cosine similarity of sentence embeddings (rows re-normalised; zero rows score 0)."""
    def l2(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        norm = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)

    return l2(source) @ l2(target).T
