"""``htm_align``: HTM-Align narration grounding, R@1 and ROC-AUC (docs/evaluation.md).

R@1 is the micro average over every alignable sentence of every ground-truth video: a video without a prediction
counts its alignable sentences as misses (``missing_video`` warning). ROC-AUC pools every sentence (alignable = 1) with
its ``align_score``, or ``max_t`` of its score-matrix row; it is ``null`` with a warning when a predicted video has no
scores (``pred_time`` without ``align_score``) or only one class is present. NaN scores leave the AUC (``nan_score``).
A ``pred_time`` maps to slot ``floor(p)``; HTM-Align gives no durations, so times are clamped below (at 0) only.
"""

from __future__ import annotations

import numpy as np

from eval.benchmarks.htm_align import parse_htm_prediction, read_htm_align
from eval.benchmarks.predictions import load_per_video_predictions, match_predictions
from eval.metrics.grounding import (
    HTM_RULES,
    htm_align_hits,
    nan_argmax,
    nan_max,
    recall_at_1,
    roc_auc,
    times_to_slots,
)
from eval.registry import EvalError, EvalInputs, EvalResult, Protocol, Variant, register

#: TAN's evaluator replaces exact zeros of the stitched matrix by this value
TAN_ZERO_FILL = -6e4


def _evaluate(inputs: EvalInputs) -> EvalResult:
    """Score one prediction file (docs/evaluation.md)."""
    if inputs.pred is None:
        raise EvalError("htm_align needs --pred")
    rule = inputs.variant["rule"]
    zero_mask = bool(inputs.variant["tan_zero_mask"])
    w = inputs.warnings
    videos = read_htm_align(inputs.gt[0])
    preds = match_predictions([v.video_id for v in videos], load_per_video_predictions(inputs.pred), w)

    hits: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    unscored_videos = 0
    for v in videos:
        al = v.alignable
        value = preds.get(v.video_id)
        if value is None:
            w.add(
                "missing_video",
                f"no prediction for video {v.video_id}: its {int(al.sum())} alignable sentences count as misses "
                "and its sentences leave the AUC",
            )
            hits.append(np.zeros(int(al.sum()), dtype=bool))
            continue
        where = f"predictions file {inputs.pred}, video {v.video_id}"
        p = parse_htm_prediction(value, v.n_text, where)
        if p.matrix is not None:
            m = p.matrix
            if zero_mask:
                m = np.where(m == 0, TAN_ZERO_FILL, m)
            slots, all_nan = nan_argmax(m, axis=1) if v.n_text else (np.zeros(0, np.int64), np.zeros(0, bool))
            if all_nan.any():
                w.add("all_nan_row", f"{where}: {int(all_nan.sum())} all-NaN row(s) predict slot 0 (TAN behaviour)",
                      n=int(all_nan.sum()))
            row_scores: np.ndarray | None = nan_max(m, axis=1) if v.n_text else np.zeros(0)
        else:
            assert p.times is not None
            slots, valid, n_clamped = times_to_slots(p.times, None)
            if n_clamped:
                w.add("time_clamped", f"{where}: {n_clamped} negative time(s) clamped to slot 0", n=n_clamped)
            bad = int((~valid & al).sum())
            if bad:
                w.add("missing_time", f"{where}: {bad} alignable sentence(s) without a finite pred_time (misses)",
                      n=bad)
            row_scores = p.scores
        hits.append(htm_align_hits(slots[al], v.starts[al], v.ends[al], rule))
        if row_scores is None:
            unscored_videos += 1
        else:
            labels.append(al)
            scores.append(row_scores)

    all_hits = np.concatenate(hits) if hits else np.zeros(0, dtype=bool)
    r1 = recall_at_1(all_hits)
    if not all_hits.size:
        w.add("no_alignable", "the ground truth has no alignable sentence: R@1 is undefined (null)")

    auc: float | None = None
    if unscored_videos:
        w.add("no_align_score", f"{unscored_videos} predicted video(s) give pred_time without align_score: "
              "ROC-AUC is not computed (null)")
    else:
        y = np.concatenate(labels) if labels else np.zeros(0, dtype=bool)
        s = np.concatenate(scores) if scores else np.zeros(0)
        scored = ~np.isnan(s)
        if not scored.all():
            n_bad = int((~scored).sum())
            w.add("nan_score", f"{n_bad} sentence(s) with a NaN score left out of the ROC-AUC", n=n_bad)
        auc = roc_auc(y[scored], s[scored])
        if auc is None:
            w.add("auc_single_class", "ROC-AUC is undefined with a single class present (null)")
    return EvalResult(
        metrics={"r1": r1, "roc_auc": auc},
        items=int(all_hits.size),
        skipped=0,
    )


PROTOCOL = register(
    Protocol(
        name="htm_align",
        summary="HTM-Align narration grounding: R@1 and ROC-AUC",
        evaluate=_evaluate,
        variants=(
            Variant("rule", "tan", "window rule: tan floor(s)<=t<=ceil(e); nsva s<=t<=e on raw seconds",
                    choices=HTM_RULES),
            Variant("tan_zero_mask", False, "replace exact zeros of score matrices by -6e4 (TAN's stitched matrix)"),
        ),
        table_keys=("r1", "roc_auc"),
    )
)
