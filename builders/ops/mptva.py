"""MPTVA pseudo-labelling: fusion of three step→video alignment pathways (docs/corpora/howtostep.md).

Paper: Chen et al., ECCV 2024, §3.2.2 "Multi-Pathway Text-Video
Alignment": A_SN = Softmax(E_t(S)·E_t(N)ᵀ/τ) (Eq. 4, L2-normalised embeddings), A_SNV = A_SN·Y_NV; A_mult =
mean-pooling of A_SNV, A_SV^long, A_SV^short; the pseudo-label of step i is the best segment k and every segment with
|j − k| ≤ W; steps whose highest A_mult score falls below γ are excluded. §4.2: τ = 0.07. §4.3.3 / Table 3:
W = 2 and γ = 0.65 are best (γ = 0.65 keeps ≈15 % of the LLM steps).

Conventions as ``step_timestamps``: first index on ties, inclusive frame windows, ``k_star`` int64,
``start``/``end``/``score`` float64, ``keep`` bool. Pure numpy; loops over videos are the caller's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from builders.ops.step_timestamps import l2_normalise, softmax_rows

__all__ = [
    "GAMMA",
    "KEEP_RATIO",
    "MPTVA",
    "PATHWAYS",
    "TAU",
    "WINDOW_W",
    "keep_top_share",
    "mptva_fuse",
    "snv_matrix",
]

TAU = 0.07  # softmax temperature of A_SN (Chen et al., ECCV 2024, §4.2)
WINDOW_W = 2  # |t − k*| ≤ W positive frames (Chen et al., ECCV 2024, Table 3 best)
GAMMA = 0.65  # keep threshold on A_mult[i, k*] (Chen et al., ECCV 2024, Table 3 best)
KEEP_RATIO = 0.15  # share kept by gamma_mode="keep_ratio" (the paper's ≈15 % at γ = 0.65; toolkit addition)
PATHWAYS = ("snv", "long", "short")
GAMMA_MODES = ("absolute", "keep_ratio")


@dataclass
class MPTVA:
    """MPTVA labels per step (Chen et al., ECCV 2024, §3.2.2): ``k_star`` = argmax_t A_mult, window [start, end] =
    [k*−W, k*+W] clipped, ``score`` = A_mult[i, k*], ``pathway_scores`` [L, 3] = (snv, long, short) at k* (NaN for a
    missing pathway), ``keep`` (γ rule); ``pathways`` = the names of the pathways that were averaged (for
    provenance)."""

    k_star: np.ndarray
    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    pathway_scores: np.ndarray
    keep: np.ndarray
    pathways: tuple[str, ...]


def snv_matrix(step_emb: np.ndarray, narr_emb: np.ndarray, Y_NV: np.ndarray, tau: float = TAU) -> np.ndarray:
    """A_SNV = softmax_n(Ê(S)·Ê(N)ᵀ/τ)·Y_NV (Chen et al., ECCV 2024, Eq. 4-5), embeddings L2-normalised here.
    Returns float32 [L, T]; with no narrations every row is 0."""
    S = np.asarray(step_emb, dtype=np.float32)
    N = np.asarray(narr_emb, dtype=np.float32)
    Y = np.asarray(Y_NV, dtype=np.float32)
    if S.ndim != 2 or N.ndim != 2 or Y.ndim != 2:
        raise ValueError("step_emb, narr_emb and Y_NV must be 2-D")
    if N.shape[0] != Y.shape[0]:
        raise ValueError(f"{N.shape[0]} narration embeddings but Y_NV has {Y.shape[0]} rows")
    for name, x in (("step_emb", S), ("narr_emb", N), ("Y_NV", Y)):
        if x.size and not np.isfinite(x).all():
            raise ValueError(f"{name} contains NaN or Inf")
    if S.shape[0] == 0 or N.shape[0] == 0:
        return np.zeros((S.shape[0], Y.shape[1]), dtype=np.float32)
    if S.shape[1] != N.shape[1]:
        raise ValueError(f"embedding dims differ: steps {S.shape[1]}, narrations {N.shape[1]}")
    return softmax_rows(l2_normalise(S) @ l2_normalise(N).T, tau) @ Y


def keep_top_share(scores: np.ndarray, keep_ratio: float = KEEP_RATIO) -> np.ndarray:
    """Mask of the top ``ceil(keep_ratio · n)`` scores (ties broken towards the lower index; so ≥ 1 kept whenever
    n > 0 and keep_ratio > 0). Works per video (as ``mptva_fuse`` uses it) or on a whole corpus's concatenated
    scores (the paper's 15 % is a corpus share)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not 0.0 <= keep_ratio <= 1.0:
        raise ValueError(f"keep_ratio must lie in [0, 1], got {keep_ratio}")
    if s.size and not np.isfinite(s).all():
        raise ValueError("scores contain NaN or Inf")
    n_keep = min(s.size, math.ceil(keep_ratio * s.size - 1e-9))
    keep = np.zeros(s.size, dtype=bool)
    keep[np.argsort(-s, kind="stable")[:n_keep]] = True
    return keep


def mptva_fuse(
    a_snv: np.ndarray | None,
    a_long: np.ndarray | None,
    a_short: np.ndarray | None,
    W: int = WINDOW_W,
    gamma: float = GAMMA,
    gamma_mode: str = "absolute",
    keep_ratio: float = KEEP_RATIO,
    allow_missing: bool = False,
) -> MPTVA:
    """Fuse the pathways and label every step (Chen et al., ECCV 2024, §3.2.2).

    A_mult = plain mean of the available pathways [L, T] (no rescaling: A_SNV ∈ [0,1], cosines ∈ [−1,1]); k* =
    first argmax per row; start = max(0, k*−W), end = min(T−1, k*+W); score = A_mult[i, k*]. ``gamma_mode``:
    ``absolute`` keeps score ≥ γ (drop reason ``mptva_below_gamma``); ``keep_ratio`` keeps the top
    ``ceil(keep_ratio·L)`` steps of this call (see ``keep_top_share``). A pathway given as None is missing: a
    ValueError unless ``allow_missing`` (``mptva.allow_missing``, a toolkit option), then the others are averaged and
    its ``pathway_scores`` column is NaN. At least one pathway is required.
    """
    if gamma_mode not in GAMMA_MODES:
        raise ValueError(f"gamma_mode must be one of {GAMMA_MODES}, got {gamma_mode!r}")
    if int(W) != W or W < 0:
        raise ValueError(f"W must be a non-negative integer, got {W!r}")
    given = dict(zip(PATHWAYS, (a_snv, a_long, a_short), strict=True))
    missing = [name for name, a in given.items() if a is None]
    if missing and not allow_missing:
        raise ValueError(f"MPTVA pathway(s) {missing} missing; set mptva.allow_missing=true to average the others "
                         "(docs/corpora/howtostep.md, MPTVA option)")
    mats: dict[str, np.ndarray] = {}
    for name, a in given.items():
        if a is None:
            continue
        arr = np.asarray(a, dtype=np.float64)
        if arr.ndim != 2:
            raise ValueError(f"pathway {name!r} must be 2-D (L, T), got shape {arr.shape}")
        if arr.size and not np.isfinite(arr).all():
            raise ValueError(f"pathway {name!r} contains NaN or Inf")
        mats[name] = arr
    if not mats:
        raise ValueError("no MPTVA pathway given")
    shapes = {a.shape for a in mats.values()}
    if len(shapes) != 1:
        raise ValueError(f"pathway shapes differ: { {n: a.shape for n, a in mats.items()} }")
    L, T = shapes.pop()
    names = tuple(mats)
    if L == 0:
        e = np.zeros(0, dtype=np.float64)
        return MPTVA(np.zeros(0, dtype=np.int64), e, e.copy(), e.copy(), np.zeros((0, 3)), np.zeros(0, dtype=bool),
                     names)
    if T < 1:
        raise ValueError("T must be >= 1 frame (T=0 is bad_features, docs/reason-codes.md)")
    stack = np.stack([mats[n] for n in names])  # [P, L, T]
    a_mult = stack.sum(axis=0) / len(names)
    k_star = np.argmax(a_mult, axis=1).astype(np.int64)
    rows = np.arange(L)
    score = a_mult[rows, k_star]
    pathway_scores = np.full((L, 3), np.nan)
    for j, name in enumerate(PATHWAYS):
        if name in mats:
            pathway_scores[:, j] = mats[name][rows, k_star]
    start = np.maximum(0, k_star - int(W)).astype(np.float64)
    end = np.minimum(T - 1, k_star + int(W)).astype(np.float64)
    keep = score >= gamma if gamma_mode == "absolute" else keep_top_share(score, keep_ratio)
    return MPTVA(k_star, start, end, score, pathway_scores, keep, names)
