"""``htstep_r1`` (HT-Step step grounding R@1, docs/evaluation.md) and ``htstep_map`` (HT-Step
article grounding, the official activity-grouped mAP over tIoU 0.3-0.7; docs/evaluation.md).

``htstep_r1`` is the micro average over annotated (video, step) pairs; a ground-truth video without a prediction
counts its annotated steps as misses (``missing_video`` warning); a step whose segments all fall outside ``[0, T)``
has no target slot and is not counted (``skip_reasons.step_without_slot``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.benchmarks.common import match_ids
from eval.benchmarks.htstep import (
    Taxonomy,
    read_detection_csv,
    read_map_ground_truth,
    read_step_ground_truth,
    read_taxonomy,
)
from eval.benchmarks.predictions import load_per_video_predictions, match_predictions
from eval.benchmarks.step_grounding import StepPrediction, StepVideo, resolve_step_prediction
from eval.metrics.grounding import END_RULES, step_hits, step_targets
from eval.metrics.htstep_map import (
    TIOU_THRESHOLDS,
    activity_grouped_map,
    filter_predictions,
    remove_duplicate_annotations,
)
from eval.registry import (
    EvalError,
    EvalInputs,
    EvalResult,
    Protocol,
    Variant,
    Warnings,
    register,
)

# --------------------------------------------------------------------------------------------------------------------
# step grounding R@1 (shared with CrossTask)


@dataclass(frozen=True)
class VideoScore:
    """One video's step-grounding counts: annotated (scored) steps, hits, and steps left without a target slot."""

    annotated: int
    hits: int
    no_slot: int


def score_step_video(
    video: StepVideo, pred: StepPrediction | None, end_rule: str, warnings: Warnings, where: str
) -> VideoScore:
    """Y[T, K] of the video against one predicted slot per step (docs/evaluation.md).

    ``pred=None`` (no prediction for the video): every annotated step is a miss. With ``slots_by_id`` the scored units
    are the video's annotated global steps (no text lookup). T is the matrix rows, else ``ceil(duration)``;
    when both are unknown (CrossTask release layout with times), Y is made long enough that nothing is cut.
    """
    if pred is not None and pred.slots_by_id is not None:
        units, cols = np.unique(video.step_ids, return_inverse=True)
        n_cols = int(units.size)
        slots = np.asarray([pred.slots_by_id.get(int(u), -1) for u in units], dtype=np.int64)
        missing = [int(u) for u, t in zip(units, slots) if t < 0]
        if missing:
            warnings.add("missing_step", f"{where}: no prediction for annotated step(s) {missing[:5]} (misses)",
                         n=len(missing))
    else:
        n_cols = len(video.steps)
        cols = video.cols
        slots = pred.slots if pred is not None and pred.slots is not None else np.full(n_cols, -1, dtype=np.int64)
    n_slots = pred.n_slots if pred is not None else video.n_slots
    if n_slots is None:  # duration unknown: nothing is cut
        ends = np.ceil(video.ends) + 2 if video.ends.size else np.zeros(1)
        n_slots = int(max(1, ends.max(), (slots.max() + 1) if slots.size else 1))
    targets = step_targets(n_slots, n_cols, cols, video.starts, video.ends, end_rule)
    annotated, hit = step_hits(targets, slots)
    has_segment = np.zeros(n_cols, dtype=bool)
    has_segment[np.asarray(cols, dtype=np.int64)] = True
    return VideoScore(int(annotated.sum()), int(hit.sum()), int((has_segment & ~annotated).sum()))


def score_step_grounding(
    videos: list[StepVideo],
    pred_path: Path,
    end_rule: str,
    warnings: Warnings,
    *,
    allow_step_ids: bool = False,
    reject_multi_one: bool = False,
    article_steps: dict[str, frozenset[int]] | None = None,
) -> list[VideoScore]:
    """Read the predictions and score every ground-truth video in order."""
    raw = load_per_video_predictions(pred_path)
    preds = match_predictions([v.video_id for v in videos], raw, warnings)
    scores: list[VideoScore] = []
    for v in videos:
        where = f"predictions file {pred_path}, video {v.video_id}"
        value = preds.get(v.video_id)
        if value is None:
            n_ann = int(np.unique(v.cols).size)
            warnings.add("missing_video", f"no prediction for video {v.video_id}: its {n_ann} annotated step(s) "
                         "count as misses")
            scores.append(score_step_video(v, None, end_rule, warnings, where))
            continue
        pred = resolve_step_prediction(
            v, value, where, warnings, allow_step_ids=allow_step_ids, reject_multi_one=reject_multi_one
        )
        if pred.slots_by_id is not None and article_steps is not None and v.video_id in article_steps:
            unknown = sorted(set(pred.slots_by_id) - article_steps[v.video_id])
            if unknown:
                warnings.add("unknown_step", f"{where}: step(s) {unknown[:5]} are not steps of the video's article; "
                             "ignored", n=len(unknown))
        scores.append(score_step_video(v, pred, end_rule, warnings, where))
    return scores


def _article_steps_for(videos: list[StepVideo], taxonomy: Taxonomy) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for v in videos:
        steps = taxonomy.article_steps.get((v.group, v.variation or "none"))
        if steps is not None:
            out[v.video_id] = steps
    return out


def _evaluate_r1(inputs: EvalInputs) -> EvalResult:
    """HT-Step R@1, micro average over annotated (video, step) pairs (docs/evaluation.md)."""
    if inputs.pred is None:
        raise EvalError("htstep_r1 needs --pred")
    gt_path = inputs.gt[0]
    videos = read_step_ground_truth(gt_path)
    article_steps = None
    taxonomy_path = Path(gt_path).parent / "taxonomy.csv"
    if taxonomy_path.is_file():  # only used to name unknown global step indices (never changes the score)
        try:
            article_steps = _article_steps_for(videos, read_taxonomy(taxonomy_path))
        except EvalError as exc:
            inputs.warnings.add("taxonomy_unreadable", f"{exc}; unknown steps are not reported")
    scores = score_step_grounding(
        videos, inputs.pred, inputs.variant["end"], inputs.warnings, allow_step_ids=True, article_steps=article_steps
    )
    n = sum(s.annotated for s in scores)
    hits = sum(s.hits for s in scores)
    no_slot = sum(s.no_slot for s in scores)
    r1 = hits / n if n else math.nan
    if not n:
        inputs.warnings.add("no_annotated_step", "no annotated (video, step) pair: R@1 is undefined (null)")
    return EvalResult(
        metrics={"r1": r1},
        items=n,
        skipped=no_slot,
        skip_reasons={"step_without_slot": no_slot} if no_slot else {},
    )


register(
    Protocol(
        name="htstep_r1",
        summary="HT-Step step grounding: R@1 over annotated (video, step) pairs",
        evaluate=_evaluate_r1,
        variants=(
            Variant(
                "end",
                "inclusive",
                "segment end rule: inclusive Y[floor(s):ceil(e)+1], exclusive Y[floor(s):ceil(e)]",
                choices=END_RULES,
            ),
        ),
        table_keys=("r1",),
    )
)


# --------------------------------------------------------------------------------------------------------------------
# article grounding mAP


def _evaluate_map(inputs: EvalInputs) -> EvalResult:
    """The official activity-grouped mAP (docs/evaluation.md); predictions in the official CSV layout."""
    if inputs.pred is None:
        raise EvalError("htstep_map needs --pred")
    w = inputs.warnings
    gt_path = Path(inputs.gt[0])
    tax_setting = str(inputs.variant.get("taxonomy") or "")
    tax_path = Path(tax_setting) if tax_setting else gt_path.parent / "taxonomy.csv"
    if not tax_path.is_file():
        raise EvalError(
            f"taxonomy file not found: {tax_path}"
            + ("" if tax_setting else " (looked beside the ground truth; pass --variant taxonomy=PATH)")
        )
    taxonomy = read_taxonomy(tax_path)
    subset = inputs.subset or "val_seen"
    all_videos = read_map_ground_truth(gt_path)
    if all(v.subset is None for v in all_videos):  # the R@1 record list: one split, no subset field
        if inputs.subset is not None:
            w.add("subset_ignored", f"ground-truth file {gt_path} has no subset field: --subset {subset} ignored")
        subset = "all"
    videos = [v for v in all_videos if v.subset is None or v.subset == subset]
    if not videos:
        raise EvalError(f"ground-truth file {gt_path}: no video of subset {subset!r}")

    gt_vid: list[str] = []
    gt_seg: list[np.ndarray] = []
    gt_label: list[int] = []
    article_steps: dict[str, frozenset[int]] = {}
    for v in videos:
        where = f"ground-truth file {gt_path}, video {v.video_id}"
        unknown = sorted({i for i in v.ids if i not in taxonomy.activity})
        if unknown:
            raise EvalError(f"{where}: step id(s) {unknown[:5]} are not in the taxonomy {tax_path}")
        variations = {taxonomy.variation[i] for i in v.ids}
        if len(variations) > 1:
            raise EvalError(f"{where}: segments of several variations {sorted(variations)} (the official scorer "
                            "asserts one variation per video)")
        variation = next(iter(variations)) if variations else (v.variation or "none")
        steps = taxonomy.article_steps.get((v.activity, variation))
        if steps is None:
            raise EvalError(f"{where}: article ({v.activity!r}, variation {variation!r}) is not in the taxonomy")
        article_steps[v.video_id] = steps
        keep = remove_duplicate_annotations(v.segments[:, 0], v.segments[:, 1], v.ids)
        n_drop = int((~keep).sum())
        if n_drop:
            w.add("gt_segment_dropped", f"{where}: {n_drop} segment(s) shorter than 1e-3 s or duplicated dropped",
                  n=n_drop)
        gt_vid.extend([v.video_id] * int(keep.sum()))
        gt_seg.append(v.segments[keep])
        gt_label.extend(i for i, k in zip(v.ids, keep) if k)
    gt_segments = np.concatenate(gt_seg) if gt_seg else np.zeros((0, 2))

    rows = read_detection_csv(inputs.pred, w)
    mapping = match_ids(article_steps.keys(), dict.fromkeys(rows.video))
    pred_vid = [mapping.get(vid, vid) for vid in rows.video]
    flt = filter_predictions(pred_vid, rows.label, article_steps, set(gt_label))
    n_unknown = int(flt.unknown_video.sum())
    if n_unknown:
        names = sorted({rows.video[i] for i in np.flatnonzero(flt.unknown_video)})
        w.add("unknown_video", f"{n_unknown} prediction row(s) for video(s) not in the {subset} ground truth "
              f"(e.g. {names[:3]}); dropped", n=n_unknown)
    keep = np.flatnonzero(flt.keep)
    result = activity_grouped_map(
        gt_vid,
        gt_segments,
        [taxonomy.activity[i] for i in gt_label],
        [pred_vid[i] for i in keep],
        np.stack([rows.start[keep], rows.end[keep]], axis=1) if keep.size else np.zeros((0, 2)),
        [taxonomy.activity[rows.label[i]] for i in keep],
        rows.score[keep],
        TIOU_THRESHOLDS,
    )
    skip_reasons = {
        "unknown_video": n_unknown,
        "not_in_article": int(flt.not_in_article.sum()),
        "label_not_in_gt": int(flt.label_not_in_gt.sum()),
    }
    skip_reasons = {k: n for k, n in skip_reasons.items() if n}
    return EvalResult(
        metrics={
            "map": result.average,
            "map_per_tiou": {f"{t:.1f}": float(m) for t, m in zip(TIOU_THRESHOLDS, result.per_threshold)},
        },
        items=int(keep.size),
        skipped=sum(skip_reasons.values()),
        skip_reasons=skip_reasons,
        resolved={"taxonomy": str(tax_path), "subset": subset},
    )


register(
    Protocol(
        name="htstep_map",
        summary="HT-Step article grounding: official activity-grouped mAP, tIoU 0.3-0.7",
        evaluate=_evaluate_map,
        variants=(Variant("taxonomy", "", "taxonomy.csv path (default: beside the ground-truth file)"),),
        options=frozenset({"subset"}),
        table_keys=("map",),
    )
)
