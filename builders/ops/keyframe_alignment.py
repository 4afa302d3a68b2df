"""ShowHowTo keyframe alignment: windows, candidates and the order-preserving DP (docs/corpora/showhowto.md).

Paper: Souček et al., CVPR 2025 Sec. 3 "Cross-modal frame alignment" and App. A ("We formulate this as
a dynamic programming problem to find optimal frame-text pairs while preserving temporal order and maximizing
alignment scores"; ε = 15 s) [paper]. The recurrence, the tie rule, the 5-fps grid, the middle-frame fallback and the
``start_sec``/``frame_idx`` re-extraction pair are [toolkit] (the upstream frame-selection code is not released).

Conventions: frame ``g`` (0-based, int64) of the decoded ``fps`` grid has time ``g / fps`` seconds; ``N`` = number of
decoded frames, ``t_last = (N-1)/fps``; windows ``[a_k, b_k]`` are float64 seconds; a candidate mask is bool
``[K, N]``. :func:`align_keyframes` takes scores over the full grid ``[K, N]`` (cells outside the mask are ignored,
NaN allowed there) or, with ``columns=U``, over the sorted union of candidate frames only (``[K, len(U)]``, the
layout a CLIP aligner produces when it embeds only the frames of :func:`union_frames`). The DP is vectorised per
step over that step's candidate cells (prefix maxima with ``np.maximum.accumulate``, predecessors located with
``np.searchsorted``); the only Python loops run over the K steps.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "EPSILON_SEC",
    "FPS",
    "MASK_TOL",
    "Alignment",
    "align_keyframes",
    "candidate_mask",
    "frame_time_from_upstream",
    "frame_windows",
    "middle_scores",
    "start_sec_frame_idx",
    "union_frames",
]

EPSILON_SEC = 15.0  # window expansion ε (Souček et al., CVPR 2025, Sec. 3 and App. A)
FPS = 5.0  # frame grid of the release ([toolkit], matches the release)
MASK_TOL = 1e-6  # candidate rule a_k − 1e-6 ≤ g/fps ≤ b_k + 1e-6 (toolkit)
_NEG_INF = np.array([-np.inf])


class Alignment(NamedTuple):
    """Result of :func:`align_keyframes`: ``frames`` int64 ``[K]`` grid indices (``None`` when infeasible, i.e.
    ``alignment_infeasible``, docs/reason-codes.md) and ``total`` = Σ_k S[k, g*_k] in float64 (``-inf`` when
    infeasible)."""

    frames: np.ndarray | None
    total: float


def _vec(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def frame_windows(starts, ends, t_last: float, epsilon: float = EPSILON_SEC,
                  fps: float = FPS) -> tuple[np.ndarray, np.ndarray]:
    """Search windows ``a_k = max(0, s_k − ε)``, ``b_k = min(t_last, e_k + ε)`` in seconds (Souček et al., CVPR 2025,
    App. A).

    ``fps`` does not enter the bounds (they are seconds); it is accepted so that every function of this module takes
    the grid the same way. A window may be empty (``b_k < a_k``) when a step starts after ``t_last + ε``.
    """
    s, e = _vec(starts, "starts"), _vec(ends, "ends")
    if s.shape != e.shape:
        raise ValueError(f"starts {s.shape} and ends {e.shape} differ")
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    a = np.maximum(0.0, s - float(epsilon))
    b = np.minimum(float(t_last), e + float(epsilon))
    return a, b


def candidate_mask(a, b, n_frames: int, fps: float = FPS) -> np.ndarray:
    """Bool ``[K, n_frames]``: ``C_k = {g : a_k − 1e-6 ≤ g/fps ≤ b_k + 1e-6}`` (Souček et al., CVPR 2025, App. A
    windows)."""
    a, b = _vec(a, "a"), _vec(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a {a.shape} and b {b.shape} differ")
    t = np.arange(int(n_frames), dtype=np.float64) / float(fps)
    return (t[None, :] >= (a - MASK_TOL)[:, None]) & (t[None, :] <= (b + MASK_TOL)[:, None])


def union_frames(mask: np.ndarray) -> np.ndarray:
    """The sorted union ``U`` of all candidate sets (int64 grid indices): the only frames that need embedding."""
    return np.flatnonzero(np.asarray(mask, dtype=bool).any(axis=0))


def middle_scores(starts, ends, n_frames: int, fps: float = FPS) -> np.ndarray:
    """Middle-frame fallback scores ``S[k, g] = −|g − fps·(s_k+e_k)/2|`` (float64 ``[K, n_frames]``;
    fallback without CLIP weights [toolkit], HowToStep-style middle frame of Souček et al., CVPR 2025, Table 3)."""
    s, e = _vec(starts, "starts"), _vec(ends, "ends")
    if s.shape != e.shape:
        raise ValueError(f"starts {s.shape} and ends {e.shape} differ")
    mid = float(fps) * (s + e) / 2.0
    g = np.arange(int(n_frames), dtype=np.float64)
    return -np.abs(g[None, :] - mid[:, None])


def align_keyframes(scores: np.ndarray, mask: np.ndarray, *, columns=None) -> Alignment:
    """One frame per step, strictly increasing, maximising Σ_k S[k, g_k] (Souček et al., CVPR 2025, App. A;
    recurrence [toolkit]).

    ``scores`` and ``mask`` have the same shape ``[K, C]``: the full grid (``C = N``, ``columns=None``) or, with
    ``columns`` = the strictly increasing grid indices of the ``C`` columns (e.g. :func:`union_frames`), any subset of
    the grid that holds every candidate. Returned frames are grid indices. Recurrence (float64, exact comparisons):
    ``V[0][g] = S[0][g]`` on ``C_0``; ``V[k][g] = S[k][g] + max_{g' < g} V[k-1][g']`` on ``C_k``; else ``-inf``.
    Since ``V[k-1]`` is ``-inf`` off ``C_{k-1}``, the prefix maximum over ``U`` equals the one over ``C_{k-1}``: each
    step keeps only its candidate cells (running maximum by ``np.maximum.accumulate``, ``g' < g`` by index
    arithmetic when ``C_{k-1}`` is one run of columns, as windows are, else ``np.searchsorted``), O(Σ_k |C_k| log) instead of O(K·|U|), same result. Ties: the predecessor is the earliest
    ``g'`` attaining the prefix maximum (the running maximum moves only on a strictly greater value) and the last
    frame is the earliest argmax, so among optimal solutions the one with the earliest last frame, then the earliest
    predecessor, recursively, is returned. ``K = 0`` gives ``([], 0.0)``;
    no feasible assignment gives ``(None, -inf)`` (reason ``alignment_infeasible``). Scores inside the mask must be
    finite (ValueError otherwise); outside it they are ignored.
    """
    S = np.asarray(scores, dtype=np.float64)
    m = np.asarray(mask, dtype=bool)
    if S.ndim != 2 or S.shape != m.shape:
        raise ValueError(f"scores {S.shape} and mask {m.shape} must be the same 2-D shape [K, C]")
    K, C = S.shape
    if columns is None:
        grid = None
    else:
        grid = np.asarray(columns, dtype=np.int64)
        if grid.shape != (C,):
            raise ValueError(f"columns must have shape ({C},), got {grid.shape}")
        if C > 1 and not np.all(np.diff(grid) > 0):
            raise ValueError("columns must be strictly increasing grid indices")
    if K == 0:
        return Alignment(np.zeros(0, dtype=np.int64), 0.0)
    count = m.sum(axis=1)
    if not count.all():
        return Alignment(None, float("-inf"))
    lo = m.argmax(axis=1)
    dense = C - 1 - m[:, ::-1].argmax(axis=1) - lo + 1 == count  # C_k is one run of columns (a window)
    cand: list[np.ndarray] = []  # C_k as sorted column indices
    score: list[np.ndarray] = []  # S[k, C_k]
    for k in range(K):
        cols = np.arange(lo[k], lo[k] + count[k]) if dense[k] else np.flatnonzero(m[k])
        vals = S[k, lo[k]: lo[k] + count[k]] if dense[k] else S[k, cols]
        if not np.isfinite(vals).all():
            raise ValueError(f"scores must be finite on every candidate cell (step {k})")
        cand.append(cols)
        score.append(vals)
    back: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]  # back[k][i]: index in C_{k-1} of the predecessor of C_k[i]
    v = score[0]  # V[0] on C_0 (V is -inf off C_k, so only the candidate cells are kept)
    for k in range(1, K):
        run = np.maximum.accumulate(v)  # run[i] = max V[k-1] over the first i+1 cells of C_{k-1}
        new = v > np.concatenate((_NEG_INF, run[:-1]))  # strictly greater than every earlier value: argmax moves
        arg = np.maximum.accumulate(np.where(new, np.arange(v.size), 0))  # earliest argmax of that prefix
        if dense[k - 1]:  # last cell of C_{k-1} with g' < g (-1: none)
            last = np.minimum(cand[k] - lo[k - 1], count[k - 1]) - 1
        else:
            last = np.searchsorted(cand[k - 1], cand[k], side="left") - 1
        ok = last >= 0
        safe = np.where(ok, last, 0)
        prefix = np.where(ok, run[safe], -np.inf)  # max_{g' < g} V[k-1][g']  (-inf when none)
        back.append(arg[safe])
        v = score[k] + prefix
        if not np.isfinite(v).any():  # no feasible cell for step k: every later step is infeasible too
            return Alignment(None, float("-inf"))
    i = int(np.argmax(v))  # earliest argmax (-inf cells never win over a finite one)
    total = float(v[i])
    path = np.empty(K, dtype=np.int64)
    for k in range(K - 1, -1, -1):
        path[k] = cand[k][i]
        if k:
            i = int(back[k][i])
    if grid is not None:
        path = grid[path]
    return Alignment(path, total)


def start_sec_frame_idx(a, frames, fps: float = FPS) -> tuple[np.ndarray, np.ndarray]:
    """Re-extraction pair per step ([toolkit], docs/corpora/showhowto.md): ``start_sec = floor(a_k)`` (int64) and
    ``frame_idx`` = ``g − ceil(fps·start_sec − 1e-6)`` (int64), i.e. ``g − 5·start_sec`` on the default 5-fps grid: the
    index among the frames that ``select=gte(t\\,START_SEC)`` passes, so ``frame_time = start_sec + frame_idx/5``."""
    a = _vec(a, "a")
    g = np.asarray(frames, dtype=np.int64)
    if g.shape != a.shape:
        raise ValueError(f"a {a.shape} and frames {g.shape} differ")
    start_sec = np.floor(a).astype(np.int64)
    first = np.ceil(float(fps) * start_sec - MASK_TOL).astype(np.int64)
    return start_sec, g - first


def frame_time_from_upstream(start_sec, frame_idx, fps: float = FPS):
    """Frame time of an upstream ``keyframes.json`` pair whose ``start_sec`` may be fractional:
    ``ceil(fps·start_sec − 1e-6)/fps + frame_idx/fps`` (scalars in, float out; arrays in, float64 array out)."""
    s = np.asarray(start_sec, dtype=np.float64)
    i = np.asarray(frame_idx, dtype=np.float64)
    out = np.ceil(float(fps) * s - MASK_TOL) / float(fps) + i / float(fps)
    return float(out) if out.ndim == 0 else out
