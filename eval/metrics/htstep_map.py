"""HT-Step article grounding: the official activity-grouped mAP, tIoU 0.3-0.7 (docs/evaluation.md).

A re-implementation from the documented definition (docs/evaluation.md, ``htstep_map``) of the official scorer
(facebookresearch/htstep ``evaluation/eval_article_grounding.py``): ActivityNet-style detection AP, but every step of
one activity forms one class, so inside an activity the step label is never compared. Pure numpy over parsed arrays (no
file reading).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "TIOU_THRESHOLDS",
    "ArticleFilter",
    "GroupedMAP",
    "activity_grouped_map",
    "average_precision_detection",
    "filter_predictions",
    "interpolated_prec_rec",
    "remove_duplicate_annotations",
    "segment_iou",
]

#: the official thresholds, computed exactly as the reference does (``np.linspace(0.3, 0.7, 5)``; with numpy 2 its
#: second value is one ulp below 0.4), since a tIoU equal to a threshold is a TP (``>=``)
TIOU_THRESHOLDS = np.linspace(0.3, 0.7, 5)


def remove_duplicate_annotations(
    starts: Sequence[float] | np.ndarray, ends: Sequence[float] | np.ndarray, ids: Sequence[int], tol: float = 1e-3
) -> np.ndarray:
    """Keep-mask over one video's GT segments: drop segments shorter than ``tol`` and duplicates of an earlier kept
    segment (same id, both ends within ``tol``) (docs/evaluation.md)."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    keep = np.zeros(s.size, dtype=bool)
    kept: list[int] = []
    for i in range(s.size):
        if not (e[i] - s[i]) >= tol:
            continue
        if any(ids[j] == ids[i] and abs(s[i] - s[j]) <= tol and abs(e[i] - e[j]) <= tol for j in kept):
            continue
        keep[i] = True
        kept.append(i)
    return keep


def segment_iou(target: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """tIoU of one ``[start, end]`` against ``[N, 2]`` candidates: ``inter / (len_a + len_b - inter)``, no epsilon."""
    tt1 = np.maximum(target[0], candidates[:, 0])
    tt2 = np.minimum(target[1], candidates[:, 1])
    inter = np.clip(tt2 - tt1, 0, None)
    union = (candidates[:, 1] - candidates[:, 0]) + (target[1] - target[0]) - inter
    return inter / union


def interpolated_prec_rec(prec: np.ndarray, rec: np.ndarray) -> float:
    """VOC-2011 interpolated AP: precision made non-increasing from the right, summed over recall changes."""
    mprec = np.concatenate([[0.0], np.asarray(prec, dtype=np.float64), [0.0]])
    mrec = np.concatenate([[0.0], np.asarray(rec, dtype=np.float64), [1.0]])
    mprec = np.maximum.accumulate(mprec[::-1])[::-1]
    idx = np.flatnonzero(mrec[1:] != mrec[:-1]) + 1
    return float(np.sum((mrec[idx] - mrec[idx - 1]) * mprec[idx]))


def average_precision_detection(
    gt_video: np.ndarray,
    gt_segments: np.ndarray,
    pred_video: np.ndarray,
    pred_segments: np.ndarray,
    pred_scores: np.ndarray,
    thresholds: np.ndarray = TIOU_THRESHOLDS,
) -> np.ndarray:
    """AP per threshold of one class (docs/evaluation.md).

    Predictions are taken by decreasing score (equal scores: later rows first, ``argsort()[::-1]`` as the reference);
    each takes, among the still unlocked GT segments of its video, the one with the highest tIoU (equal: later GT row
    first) and is a TP (locking it) iff that tIoU ``>=`` the threshold, else an FP; a video without GT here: FP.
    No predictions -> AP 0. Rows are in input order; videos are any hashable ids (ints are fastest).
    """
    thr = np.asarray(thresholds, dtype=np.float64)
    n_thr = thr.size
    ap = np.zeros(n_thr)
    n_pred = len(pred_scores)
    n_gt = len(gt_video)
    if n_pred == 0:
        return ap
    gt_seg = np.asarray(gt_segments, dtype=np.float64).reshape(-1, 2)
    pr_seg = np.asarray(pred_segments, dtype=np.float64).reshape(-1, 2)
    order = np.asarray(pred_scores, dtype=np.float64).argsort()[::-1]

    rows_of: dict[object, list[int]] = {}
    for j, vid in enumerate(gt_video):
        rows_of.setdefault(vid, []).append(j)
    by_video = {vid: np.asarray(js, dtype=np.int64) for vid, js in rows_of.items()}

    lock = np.zeros((n_thr, n_gt), dtype=bool)
    tp = np.zeros((n_thr, n_pred))
    fp = np.zeros((n_thr, n_pred))
    rows = np.arange(n_thr)
    for rank, i in enumerate(order):
        gidx = by_video.get(pred_video[i])
        if gidx is None:
            fp[:, rank] = 1
            continue
        tiou = segment_iou(pr_seg[i], gt_seg[gidx])
        ranked = tiou.argsort()[::-1]
        free = ~lock[:, gidx[ranked]]  # [n_thr, m] in decreasing-tIoU order
        has_free = free.any(axis=1)
        first = free.argmax(axis=1)
        ok = has_free & (tiou[ranked][first] >= thr)
        tp[ok, rank] = 1
        fp[~ok, rank] = 1
        lock[rows[ok], gidx[ranked[first[ok]]]] = True

    tp_c = np.cumsum(tp, axis=1)
    fp_c = np.cumsum(fp, axis=1)
    rec = tp_c / float(n_gt) if n_gt else np.full_like(tp_c, np.nan)
    prec = tp_c / (tp_c + fp_c)
    for k in range(n_thr):
        ap[k] = interpolated_prec_rec(prec[k], rec[k])
    return ap


@dataclass(frozen=True)
class ArticleFilter:
    """Which prediction rows the official scorer keeps (docs/evaluation.md): ``keep`` plus the reason of each drop."""

    keep: np.ndarray
    unknown_video: np.ndarray
    not_in_article: np.ndarray
    label_not_in_gt: np.ndarray


def filter_predictions(
    pred_video: Sequence[str],
    pred_label: Sequence[int],
    article_steps: Mapping[str, frozenset[int] | set[int]],
    gt_labels: set[int] | frozenset[int],
) -> ArticleFilter:
    """The article filter (label among the steps of the video's (activity, variation)) and the GT-label filter
    (label annotated somewhere in the split) of the official scorer (docs/evaluation.md).

    ``article_steps`` maps each GT video to its article's step ids; a prediction video absent from it is dropped
    (``unknown_video``; the reference raises a lookup error there).
    """
    n = len(pred_video)
    unknown = np.zeros(n, dtype=bool)
    not_article = np.zeros(n, dtype=bool)
    not_gt = np.zeros(n, dtype=bool)
    for i, (vid, lab) in enumerate(zip(pred_video, pred_label)):
        steps = article_steps.get(vid)
        if steps is None:
            unknown[i] = True
        elif lab not in steps:
            not_article[i] = True
        elif lab not in gt_labels:
            not_gt[i] = True
    keep = ~(unknown | not_article | not_gt)
    return ArticleFilter(keep=keep, unknown_video=unknown, not_in_article=not_article, label_not_in_gt=not_gt)


@dataclass(frozen=True)
class GroupedMAP:
    """Result of :func:`activity_grouped_map`: mean mAP, mAP per threshold, AP ``[n_thr, n_groups]`` and group ids."""

    average: float
    per_threshold: np.ndarray
    ap: np.ndarray
    groups: list[object]


def activity_grouped_map(
    gt_video: Sequence[object],
    gt_segments: np.ndarray,
    gt_group: Sequence[object],
    pred_video: Sequence[object],
    pred_segments: np.ndarray,
    pred_group: Sequence[object],
    pred_scores: np.ndarray,
    thresholds: np.ndarray = TIOU_THRESHOLDS,
) -> GroupedMAP:
    """mAP over the groups (activities) present in the GT, per threshold, and its mean over thresholds.

    Inputs are the GT rows (after :func:`remove_duplicate_annotations`) and the kept prediction rows (after
    :func:`filter_predictions`), each in file order; ``*_group`` is the activity of each row's step label.
    """
    gt_seg = np.asarray(gt_segments, dtype=np.float64).reshape(-1, 2)
    pr_seg = np.asarray(pred_segments, dtype=np.float64).reshape(-1, 2)
    scores = np.asarray(pred_scores, dtype=np.float64).reshape(-1)
    gt_group_arr = list(gt_group)
    pr_group_arr = list(pred_group)
    groups = list(dict.fromkeys(gt_group_arr))
    thr = np.asarray(thresholds, dtype=np.float64)
    ap = np.zeros((thr.size, len(groups)))
    gt_rows: dict[object, list[int]] = {g: [] for g in groups}
    for j, g in enumerate(gt_group_arr):
        gt_rows[g].append(j)
    pr_rows: dict[object, list[int]] = {g: [] for g in groups}
    for i, g in enumerate(pr_group_arr):
        if g in pr_rows:
            pr_rows[g].append(i)
    gvid = list(gt_video)
    pvid = list(pred_video)
    for c, g in enumerate(groups):
        gi = np.asarray(gt_rows[g], dtype=np.int64)
        pi = np.asarray(pr_rows[g], dtype=np.int64)
        ap[:, c] = average_precision_detection(
            [gvid[j] for j in gi], gt_seg[gi], [pvid[i] for i in pi], pr_seg[pi], scores[pi], thr
        )
    per_thr = ap.mean(axis=1) if groups else np.zeros(thr.size)
    return GroupedMAP(average=float(per_thr.mean()), per_threshold=per_thr, ap=ap, groups=groups)
