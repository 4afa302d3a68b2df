"""HowToStep's two-stage grounding of LLM steps, as pure vectorised numpy (docs/corpora/howtostep.md).

Paper: Li et al., ECCV 2024, §3.1 "Estimating Timestamp For Procedural Steps" (Stage 1:
T_SN = softmax(g(S)·g(N)ᵀ/ν), Y_SV = T_SN·Y_NV, centre = argmax, grow while ≥ ζ·centre score, drop below ε1),
§3.3 "Updating the Timestamps" (Stage 2: start = argmax of A, constant duration Δ, drop below ε2), supplementary
Table 8 (anchor/Δ ablation) and Table 9 (rounds). Hyper-parameters ζ = 0.7, ε1 = 0.20, ε2 = 0.8 are the paper's
(garbled line read as ζ = 0.7, ε1 = 0.20, ε2 = 0.8); ν = 0.07 is a toolkit choice (docs/corpora/howtostep.md,
Departures from the paper); Δ = 8 s (Table 8/9).

Conventions: frames are the per-second feature rows ``0..T-1`` (the caller passes T = T_eff = min(T, 1200));
every argmax takes the first index on ties (``np.argmax``); windows are inclusive frame indices. Index outputs
(``centre``, ``t_star``) are int64; ``start``/``end``/``score`` are float64 (seconds; a fractional Δ is allowed);
``keep`` is bool. No loop runs over frames, narrations or steps: loops over videos are the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = [
    "DELTA_SEC",
    "EPS1",
    "EPS2",
    "NU",
    "STEP_VIDEO_TEMPERATURE",
    "ZETA",
    "RoundSettings",
    "Stage1",
    "Stage2",
    "grow_windows",
    "l2_normalise",
    "narration_frame_matrix",
    "round_settings",
    "softmax_rows",
    "stage1_from_similarity",
    "stage1_step_video",
    "stage1_timestamps",
    "stage2_timestamps",
]

NU = 0.07  # Stage-1 temperature: not given by the paper; MPTVA's τ (docs/corpora/howtostep.md)
ZETA = 0.7  # window growth ratio (Li et al., ECCV 2024, §3.1)
EPS1 = 0.20  # Stage-1 keep threshold (Li et al., ECCV 2024, §3.1, Table 3 best)
EPS2 = 0.8  # Stage-2 keep threshold on the raw cosine (Li et al., ECCV 2024, §3.3, Table 3/8)
DELTA_SEC = 8.0  # Stage-2 constant duration (Li et al., ECCV 2024, §3.3, Table 8 best)
STEP_VIDEO_TEMPERATURE = 0.01  # stage1_method=step_video (Table 3 "Step-Video"; released code's baseline)

ANCHORS = ("start", "centre", "grown")


@dataclass
class Stage1:
    """Stage-1 result per step (Li et al., ECCV 2024, §3.1): ``centre`` c_k (int64), window ``start``/``end`` (inclusive
    frames, float64), ``score`` = Y_SV[k, c_k], ``keep`` = score ≥ ε1; ``beyond`` = narrations starting at ≥ T."""

    centre: np.ndarray
    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    keep: np.ndarray
    beyond: int = 0


@dataclass
class Stage2:
    """Stage-2 result per step (Li et al., ECCV 2024, §3.3): ``t_star`` (int64), ``start``/``end`` (float64), ``score``
    = A[k, t*], ``keep`` = score ≥ ε2."""

    t_star: np.ndarray
    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    keep: np.ndarray


class RoundSettings(NamedTuple):
    """Per-round labelling settings (Li et al., ECCV 2024, Table 9): threshold, anchor, Δ (None = no fixed Δ)."""

    eps: float
    anchor: str
    delta: float | None


def round_settings(r: int) -> RoundSettings:
    """Table 9's best settings per self-training round (Li et al., ECCV 2024, §3.3).

    - r=0: Stage-1 labels only (Table 9 "X, 0.2, center, X"): ε1 = 0.20, window grown from the centre with ζ;
    - r=1: ε2 = 0.8, anchor ``start``, Δ = 8 s (the default; Table 8's best);
    - r=2: ε = 0.7, ``grown`` (centre t*, window grown with ζ = 0.7 on A, no fixed Δ);
    - r=3: ε = 0.8, ``grown``. Reading: Table 9 writes "center, Δ = X" for rounds 2 and 3, and Table 8's caption
      defines X as "do not fix the duration ... find the start-end timestamp from the center point as we do in the
      approximate estimation stage", i.e. the ζ-grown window, the reading docs/corpora/howtostep.md takes for round 2.
    Rounds above 3 have no setting in the paper: ValueError.
    """
    table = {
        0: RoundSettings(EPS1, "grown", None),
        1: RoundSettings(EPS2, "start", DELTA_SEC),
        2: RoundSettings(0.7, "grown", None),
        3: RoundSettings(0.8, "grown", None),
    }
    if r not in table:
        raise ValueError(f"no Table 9 setting for round {r!r} (rounds 0-3 exist; Li et al., ECCV 2024, Table 9)")
    return table[r]


# ---------------------------------------------------------------------------------------------------------- helpers


def _check_finite(x: np.ndarray, name: str) -> None:
    if x.size and not np.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or Inf")


def _as_2d(x: np.ndarray, name: str, dtype: type | None = None, check: bool = True) -> np.ndarray:
    arr = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    if arr.ndim == 1 and arr.size == 0:  # an empty list: no rows
        arr = arr.reshape(0, 0)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if check:
        _check_finite(arr, name)
    return arr


def _check_T(T: int) -> int:
    T = int(T)
    if T < 1:
        raise ValueError(f"T must be >= 1 frame, got {T} (T=0 is bad_features, docs/reason-codes.md)")
    return T


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm; all-zero rows stay zero."""
    return x / _row_norms(x)[:, None]


def _row_norms(x: np.ndarray) -> np.ndarray:
    n = np.sqrt(np.einsum("ij,ij->i", x, x))
    n[n == 0] = 1.0
    return n


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine matrix [len(a), len(b)] (zero rows give 0): one matmul, then the L×K outer product of norms."""
    g = a @ b.T
    g /= _row_norms(a)[:, None]
    g /= _row_norms(b)[None, :]
    return g


def softmax_rows(x: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax of ``x / temperature`` over the last axis (max subtracted first)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = np.asarray(x) / temperature
    if z.shape[-1] == 0:
        return z.copy()
    z = z - z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


# ---------------------------------------------------------------------------------------------------------- Y_NV


def narration_frame_matrix(starts: np.ndarray, ends: np.ndarray, T: int) -> tuple[np.ndarray, int]:
    """Y_NV ∈ {0,1}^{K×T} (toolkit rule, docs/corpora/howtostep.md): Y[n,t] = 1 iff ``floor(s_n) ≤ t ≤ max(floor(s_n),
    ceil(e_n) − 1)``, clipped to [0, T−1] (every narration covers ≥ 1 frame). Narrations starting at ≥ T are all-zero
    and counted in the returned ``beyond`` (counter ``narration_beyond_video``). Returns (Y float32, beyond)."""
    s = np.asarray(starts, dtype=np.float64).reshape(-1)
    e = np.asarray(ends, dtype=np.float64).reshape(-1)
    if s.shape != e.shape:
        raise ValueError(f"starts and ends differ in length ({s.size} vs {e.size})")
    _check_finite(s, "starts")
    _check_finite(e, "ends")
    T = int(T)
    if T < 0:
        raise ValueError(f"T must be >= 0, got {T}")
    lo = np.floor(s)
    hi = np.maximum(lo, np.ceil(e) - 1.0)
    beyond = int(np.count_nonzero(lo >= T))
    lo = np.maximum(lo, 0.0)
    hi = np.minimum(hi, T - 1.0)
    empty = lo > hi  # starts at or after T (or ends before 0): an all-zero row
    lo = np.where(empty, float(T), lo)
    span = np.where(empty, 0.0, hi - lo).astype(np.uint32)
    # t - lo as unsigned: negative offsets wrap to huge values, so one comparison tests lo <= t <= hi
    offset = np.arange(T, dtype=np.int32)[None, :] - lo.astype(np.int32)[:, None]
    return (offset.view(np.uint32) <= span[:, None]).astype(np.float32), beyond


# ---------------------------------------------------------------------------------------------------------- windows


def grow_windows(scores: np.ndarray, centres: np.ndarray, zeta: float = ZETA) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive contiguous windows around each row's centre (Li et al., ECCV 2024, §3.1; inclusive run with ``≥``):
    grow left/right while the next frame's score is ≥ ``zeta · scores[k, c_k]``. Vectorised over all rows at once: the
    window ends just inside the nearest failing frame on each side (an argmax over the masked frames). The centre is
    always inside; a non-positive centre score with ζ < 1 gives a one-frame window unless neighbours tie it. Returns
    int64 arrays."""
    S = np.asarray(scores)
    if S.ndim != 2:
        raise ValueError(f"scores must be 2-D (L, T), got shape {S.shape}")
    L, T = S.shape
    c = np.asarray(centres, dtype=np.int64).reshape(-1)
    if c.size != L:
        raise ValueError(f"{c.size} centres for {L} rows")
    if L == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if T == 0 or (c < 0).any() or (c >= T).any():
        raise ValueError("centres must lie in [0, T-1]")
    _check_finite(S, "scores")
    return _grow(S, c, zeta)


def _grow(S: np.ndarray, c: np.ndarray, zeta: float) -> tuple[np.ndarray, np.ndarray]:
    """``grow_windows`` on validated input (L ≥ 1, T ≥ 1, finite scores, centres in range)."""
    if not 0.0 <= zeta <= 1.0:
        raise ValueError(f"zeta must lie in [0, 1], got {zeta}")
    L, T = S.shape
    rows = np.arange(L)
    threshold = zeta * S[rows, c]
    bad = S < threshold[:, None]  # frames that stop the growth
    idx = np.arange(T, dtype=np.int64)
    left = bad & (idx < c[:, None])
    right = bad & (idx > c[:, None])
    # nearest failing frame left of the centre (last True) and right of it (first True); none: the video's edge
    start = np.where(left.any(axis=1), T - np.argmax(left[:, ::-1], axis=1), 0)
    end = np.where(right.any(axis=1), np.argmax(right, axis=1) - 1, T - 1)
    return start, end


# ---------------------------------------------------------------------------------------------------------- Stage 1


def _stage1_from_scores(Y_SV: np.ndarray, zeta: float, eps1: float, beyond: int = 0) -> Stage1:
    L = Y_SV.shape[0]
    if L == 0:
        empty_i = np.zeros(0, dtype=np.int64)
        empty_f = np.zeros(0, dtype=np.float64)
        return Stage1(empty_i, empty_f, empty_f.copy(), empty_f.copy(), np.zeros(0, dtype=bool), beyond)
    centre = np.argmax(Y_SV, axis=1).astype(np.int64)
    start, end = _grow(Y_SV, centre, zeta)
    score = Y_SV[np.arange(L), centre].astype(np.float64)
    return Stage1(centre, start.astype(np.float64), end.astype(np.float64), score, score >= eps1, beyond)


def stage1_from_similarity(T_SN: np.ndarray, Y_NV: np.ndarray, zeta: float = ZETA, eps1: float = EPS1) -> Stage1:
    """Stage 1 from a given step→narration matrix T_SN [L,K] and Y_NV [K,T] (Li et al., ECCV 2024, §3.1): Y_SV =
    T_SN·Y_NV, centre = first argmax, ζ-grown window, keep iff Y_SV[k,c_k] ≥ ε1. With K = 0 every Y_SV row is 0 (score
    0, whole-video window, not kept)."""
    A = _as_2d(T_SN, "T_SN")
    Y = _as_2d(Y_NV, "Y_NV")
    if A.shape[1] != Y.shape[0]:
        raise ValueError(f"T_SN has {A.shape[1]} narrations, Y_NV {Y.shape[0]}")
    _check_T(Y.shape[1])
    # matmul against a 0/1 matrix: a frame covered by one narration gets exactly T_SN[k, n] (plateaus are exact)
    Y_SV = A @ Y.astype(A.dtype, copy=False)
    return _stage1_from_scores(Y_SV, zeta, eps1)


def stage1_timestamps(
    step_emb: np.ndarray,
    narr_emb: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    T: int,
    nu: float = NU,
    zeta: float = ZETA,
    eps1: float = EPS1,
) -> Stage1:
    """Stage 1, step→narration→time (Li et al., ECCV 2024, §3.1): T_SN = softmax_n(ĝ(S)·ĝ(N)ᵀ/ν) with the
    embeddings L2-normalised here, Y_SV = T_SN·Y_NV, centre = first argmax, window grown with ζ, keep iff
    score ≥ ε1. Computes in float32 (embeddings as given by the text encoder)."""
    T = _check_T(T)
    # finiteness is checked on the L×K cosine matrix (a NaN/Inf in any input row reaches it) instead of on the
    # L×D and K×D inputs; the degenerate L = 0 / K = 0 cases check the inputs themselves
    S = _as_2d(step_emb, "step_emb", np.float32, check=False)
    N = _as_2d(narr_emb, "narr_emb", np.float32, check=False)
    if S.shape[1] != N.shape[1] and S.shape[0] and N.shape[0]:
        raise ValueError(f"embedding dims differ: steps {S.shape[1]}, narrations {N.shape[1]}")
    Y_NV, beyond = narration_frame_matrix(starts, ends, T)
    if Y_NV.shape[0] != N.shape[0]:
        raise ValueError(f"{N.shape[0]} narration embeddings but {Y_NV.shape[0]} narration times")
    if S.shape[0] == 0 or N.shape[0] == 0:
        _check_finite(S, "step_emb")
        _check_finite(N, "narr_emb")
        return _stage1_from_scores(np.zeros((S.shape[0], T), dtype=np.float32), zeta, eps1, beyond)
    with np.errstate(invalid="ignore", over="ignore"):
        cos = _cosine(S, N)
    _check_finite(cos, "step_emb or narr_emb")
    return _stage1_from_scores(softmax_rows(cos, nu) @ Y_NV, zeta, eps1, beyond)


def stage1_step_video(
    text_emb: np.ndarray,
    frame_emb: np.ndarray,
    temperature: float = STEP_VIDEO_TEMPERATURE,
    zeta: float = ZETA,
    eps1: float = EPS1,
) -> Stage1:
    """``stage1_method=step_video`` (Li et al., ECCV 2024, Table 3 "Step-Video"): Y_SV = softmax_t(cos(text,
    frame)/0.01) with a text tower paired to the visual features [T, C]; same centre/ζ/ε1 rules."""
    X = _as_2d(text_emb, "text_emb", np.float32)
    V = _as_2d(frame_emb, "frame_emb", np.float32)
    T = _check_T(V.shape[0])
    if X.shape[0] == 0:
        return _stage1_from_scores(np.zeros((0, T), dtype=np.float32), zeta, eps1)
    if X.shape[1] != V.shape[1]:
        raise ValueError(f"text dim {X.shape[1]} != frame dim {V.shape[1]}")
    return _stage1_from_scores(softmax_rows(_cosine(X, V), temperature), zeta, eps1)


# ---------------------------------------------------------------------------------------------------------- Stage 2


def stage2_timestamps(
    A: np.ndarray,
    eps2: float = EPS2,
    anchor: str = "start",
    delta: float | None = DELTA_SEC,
    zeta: float = ZETA,
) -> Stage2:
    """Stage 2 from the labeler's alignment matrix A [L, T] (last-layer cosines; Li et al., ECCV 2024, §3.3, Tables
    8-9): t* = first argmax per row, score = A[k, t*], keep iff score ≥ ε2 (raw cosine: the paper's A ∈ [0,1] is read as
    the cosine). Anchors:

    - ``start`` (default, Table 8 best): start = t*, end = min(t* + Δ, T−1);
    - ``centre`` (Table 8 "center, Δ"): start = max(0, t* − Δ/2), end = min(T−1, t* + Δ/2);
    - ``grown`` (Table 8/9 "center, Δ = X"; rounds 2-3): the ζ-grown window around t* on A (Δ ignored).
    """
    A = _as_2d(A, "A")
    L, T = A.shape
    if anchor not in ANCHORS:
        raise ValueError(f"anchor must be one of {ANCHORS}, got {anchor!r}")
    if anchor != "grown" and (delta is None or delta < 0):
        raise ValueError(f"anchor {anchor!r} needs a duration delta >= 0, got {delta!r}")
    if L == 0:
        e = np.zeros(0, dtype=np.float64)
        return Stage2(np.zeros(0, dtype=np.int64), e, e.copy(), e.copy(), np.zeros(0, dtype=bool))
    _check_T(T)
    t_star = np.argmax(A, axis=1).astype(np.int64)
    score = A[np.arange(L), t_star].astype(np.float64)
    tf = t_star.astype(np.float64)
    if anchor == "start":
        start, end = tf, np.minimum(tf + float(delta), T - 1.0)
    elif anchor == "centre":
        half = float(delta) / 2.0
        start, end = np.maximum(0.0, tf - half), np.minimum(T - 1.0, tf + half)
    else:
        s, e = _grow(A, t_star, zeta)
        start, end = s.astype(np.float64), e.astype(np.float64)
    return Stage2(t_star, start, end, score, score >= eps2)
