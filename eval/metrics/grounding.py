"""Grounding metrics on 1-second slots: HTM-Align R@1 / ROC-AUC and HT-Step / CrossTask step hits.

Pure numpy functions over parsed arrays (no file reading). Conventions of docs/evaluation.md:
slot ``t`` = second ``t``; a time ``p`` maps to slot ``floor(p)`` clamped to ``[0, T-1]``; argmax ties go to the lowest
index; NaN cells are "not scored" and never win an argmax.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "END_RULES",
    "HTM_RULES",
    "htm_align_hits",
    "nan_argmax",
    "nan_max",
    "recall_at_1",
    "roc_auc",
    "step_hits",
    "step_targets",
    "times_to_slots",
]

#: window rules of HTM-Align R@1 (docs/evaluation.md)
HTM_RULES = ("tan", "nsva")
#: end rules of the step-grounding targets (docs/evaluation.md)
END_RULES = ("inclusive", "exclusive")


def nan_argmax(scores: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """NaN-aware argmax along ``axis`` (docs/evaluation.md).

    Returns ``(index, all_nan)``: ties go to the lowest index, a NaN cell never wins (not even over ``-inf``), and a
    slice that is entirely NaN gets index 0 with ``all_nan`` set (TAN behaviour; callers decide what it means).
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.shape[axis] == 0:
        raise ValueError("argmax over an empty axis")
    nan = np.isnan(x)
    idx = np.argmax(np.where(nan, -np.inf, x), axis=axis)
    all_nan = nan.all(axis=axis)
    # a NaN cell can only have won when the slice's best real value is -inf: take the first non-NaN cell instead
    picked_nan = np.take_along_axis(nan, np.expand_dims(idx, axis), axis=axis).squeeze(axis)
    fix = picked_nan & ~all_nan
    if np.any(fix):
        first_real = np.argmax(~nan, axis=axis)
        idx = np.where(fix, first_real, idx)
    return idx.astype(np.int64), all_nan


def nan_max(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Max along ``axis`` ignoring NaN cells; an all-NaN slice gives NaN (no numpy warning)."""
    x = np.asarray(scores, dtype=np.float64)
    nan = np.isnan(x)
    out = np.max(np.where(nan, -np.inf, x), axis=axis)
    return np.where(nan.all(axis=axis), np.nan, out)


def times_to_slots(times: Sequence[float] | np.ndarray, n_slots: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    """Predicted seconds -> slot ``floor(p)`` clamped to ``[0, T-1]`` (docs/evaluation.md).

    ``n_slots=None`` (T unknown) clamps below only. Returns ``(slots, valid, n_clamped)``: non-finite times are invalid
    (slot -1, "no prediction"); ``n_clamped`` counts the finite times moved by the clamp.
    """
    p = np.asarray(times, dtype=np.float64).reshape(-1)
    valid = np.isfinite(p)
    slots = np.full(p.shape, -1, dtype=np.int64)
    raw = np.floor(p[valid])
    hi = np.inf if n_slots is None else float(n_slots - 1)
    clamped = np.clip(raw, 0.0, hi)
    n_clamped = int(np.count_nonzero(clamped != raw))
    slots[valid] = clamped.astype(np.int64)
    return slots, valid, n_clamped


def htm_align_hits(slots: np.ndarray, starts: np.ndarray, ends: np.ndarray, rule: str = "tan") -> np.ndarray:
    """Per alignable sentence: does its predicted slot lie in its own window? (docs/evaluation.md)

    ``rule="tan"``: ``floor(start) <= t <= ceil(end)``; ``rule="nsva"``: ``start <= t <= end`` on the raw float
    seconds. A slot of -1 (no prediction) is a miss.
    """
    t = np.asarray(slots, dtype=np.int64)
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    if rule == "tan":
        inside = (np.floor(s) <= t) & (t <= np.ceil(e))
    elif rule == "nsva":
        inside = (s <= t) & (t <= e)
    else:
        raise ValueError(f"unknown HTM-Align rule {rule!r} (expected one of {HTM_RULES})")
    return inside & (t >= 0)


def recall_at_1(hits: np.ndarray) -> float:
    """Micro R@1: the mean of pooled hits (docs/evaluation.md); NaN when nothing was scored."""
    h = np.asarray(hits, dtype=bool)
    return float(h.mean()) if h.size else math.nan


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with tied values sharing their average rank."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    n = values.size
    # boundaries of runs of equal values
    starts = np.flatnonzero(np.r_[True, sorted_vals[1:] != sorted_vals[:-1]])
    ends = np.r_[starts[1:], n]
    avg = (starts + ends + 1) / 2.0  # mean of the 1-based ranks starts+1 .. ends
    ranks_sorted = np.repeat(avg, ends - starts)
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = ranks_sorted
    return ranks


def roc_auc(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float | None:
    """ROC-AUC from ranks (Mann-Whitney U), tied scores averaged (docs/evaluation.md).

    Equal to ``sklearn.metrics.roc_auc_score``. ``None`` when only one class is present (undefined). Scores must
    not be NaN (callers drop NaN scores with a warning); ``±inf`` rank as lowest / highest.
    """
    y = np.asarray(labels).reshape(-1).astype(bool)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"{y.size} labels but {s.size} scores")
    if np.isnan(s).any():
        raise ValueError("ROC-AUC scores must not be NaN")
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = _average_ranks(s)
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def step_targets(
    n_slots: int,
    n_cols: int,
    cols: Sequence[int] | np.ndarray,
    starts: Sequence[float] | np.ndarray,
    ends: Sequence[float] | np.ndarray,
    end_rule: str = "inclusive",
) -> np.ndarray:
    """The boolean target matrix ``Y[T, K]`` of step grounding (docs/evaluation.md).

    Each segment ``(col, start, end)`` sets ``Y[floor(start) : ceil(end) + 1, col]`` ("inclusive") or
    ``Y[floor(start) : ceil(end), col]`` ("exclusive"); the slice is cut at ``T`` like a numpy slice, so a segment
    starting at or after ``T`` sets nothing; a negative start is taken as 0.
    """
    if end_rule not in END_RULES:
        raise ValueError(f"unknown end rule {end_rule!r} (expected one of {END_RULES})")
    c = np.asarray(cols, dtype=np.int64).reshape(-1)
    lo = np.floor(np.asarray(starts, dtype=np.float64).reshape(-1))
    hi = np.ceil(np.asarray(ends, dtype=np.float64).reshape(-1)) + (1 if end_rule == "inclusive" else 0)
    lo = np.clip(lo, 0, n_slots).astype(np.int64)
    hi = np.clip(hi, 0, n_slots).astype(np.int64)
    keep = hi > lo
    diff = np.zeros((n_slots + 1, n_cols), dtype=np.int64)
    np.add.at(diff, (lo[keep], c[keep]), 1)
    np.add.at(diff, (hi[keep], c[keep]), -1)
    return np.cumsum(diff[:-1], axis=0) > 0


def step_hits(targets: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hits of the annotated columns of ``Y[T, K]`` given one predicted slot per column (docs/evaluation.md).

    Returns ``(annotated, hit)``, both ``[K]`` booleans: a column is scored iff it has at least one target slot; a
    slot of -1 (no prediction) or outside ``[0, T)`` is a miss.
    """
    y = np.asarray(targets, dtype=bool)
    t = np.asarray(slots, dtype=np.int64).reshape(-1)
    n_slots, n_cols = y.shape
    if t.size != n_cols:
        raise ValueError(f"{t.size} predicted slots for {n_cols} columns")
    annotated = y.any(axis=0)
    ok = (t >= 0) & (t < n_slots)
    hit = np.zeros(n_cols, dtype=bool)
    cols = np.flatnonzero(ok)
    hit[cols] = y[t[cols], cols]
    return annotated, hit & annotated
