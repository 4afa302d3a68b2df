"""Protocols ``densevid`` and ``soda``: dense video captioning on YouCook2 and Tasty (docs/evaluation.md).

The downstream evaluation of the Sieve & Swap paper (Batra et al., ECCV 2024, Tables 3-5:
SODA-c, METEOR, CIDEr, BLEU-4, SODA-d). Defaults reproduce the 2018 ActivityNet evaluator as PDVC reports it, and the
SODA reference's single-reference, missing-keys-dropped behaviour.
"""

from __future__ import annotations

from typing import Any

from eval.benchmarks.dense_captions import (
    GroundTruth,
    Predictions,
    read_ground_truth,
    read_predictions,
)
from eval.metrics.dense_captioning import TIOUS, densevid
from eval.metrics.soda import soda
from eval.metrics.text_scorers import default_scorer
from eval.registry import EvalError, EvalInputs, EvalResult, Protocol, Variant, register


def _parse_tious(text: str) -> tuple[float, ...]:
    values = tuple(float(x) for x in text.replace(" ", "").split(",") if x)
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError("expected comma-separated thresholds in [0, 1]")
    return values


def _parse_seed(text: str) -> int | None:
    return None if text.strip().lower() in {"none", "null"} else int(text)


def _load(inputs: EvalInputs) -> tuple[GroundTruth, Predictions]:
    gt = read_ground_truth(inputs.gt, inputs.subset, inputs.video_list, inputs.warnings)
    assert inputs.pred is not None
    preds = read_predictions(inputs.pred, gt, inputs.warnings)
    return gt, preds


def _resolved(gt: GroundTruth) -> dict[str, Any]:
    out: dict[str, Any] = {"gt_format": gt.format, "reference_files": len(gt.refs)}
    if gt.subset is not None:
        out["subset"] = gt.subset
    out["video_list"] = gt.video_list
    return out


def _plain(gt: GroundTruth, preds: Predictions):
    refs = [{v: (c.timestamps, c.sentences) for v, c in ref.items()} for ref in gt.refs]
    by_video = {v: [(p.timestamp, p.sentence) for p in ps] for v, ps in preds.by_video.items()}
    return refs, by_video


def _scorer(inputs: EvalInputs):
    return inputs.scorer if inputs.scorer is not None else default_scorer()


def _evaluate_densevid(inputs: EvalInputs) -> EvalResult:
    settings = inputs.variant
    gt, preds = _load(inputs)
    refs, by_video = _plain(gt, preds)
    truncated = sum(max(0, len(p) - settings["max_proposals"]) for p in by_video.values())
    if truncated:
        inputs.warnings.add("truncated_proposals",
                            f"{truncated} predictions beyond the first {settings['max_proposals']} of their video "
                            "are not scored")
    scorer = _scorer(inputs)
    try:
        result = densevid(refs, by_video, scorer, tious=settings["tious"], garbage=settings["garbage"],
                          garbage_seed=settings["garbage_seed"], max_proposals=settings["max_proposals"],
                          video_ids=gt.video_ids, tokenize=settings["tokenize"])
    finally:
        if inputs.scorer is None:
            scorer.close()
    metrics: dict[str, Any] = dict(result.means)
    metrics["per_tiou"] = {f"{t:g}": v for t, v in result.per_tiou.items()}
    skipped = dict(preds.skipped)
    if truncated:
        skipped["truncated_proposals"] = truncated
    return EvalResult(metrics=metrics, items=result.videos, skipped=sum(skipped.values()), skip_reasons=skipped,
                      resolved=_resolved(gt))


def _evaluate_soda(inputs: EvalInputs) -> EvalResult:
    settings = inputs.variant
    gt, preds = _load(inputs)
    refs, by_video = _plain(gt, preds)
    kinds = {"both": ("c", "d"), "c": ("c",), "d": ("d",)}[settings["kinds"]]
    scorer = _scorer(inputs) if "c" in kinds else None
    try:
        scores, n_videos = soda(refs, by_video, scorer, kinds=kinds, missing=settings["missing"],
                                multi_reference=settings["multi_reference"], video_ids=gt.video_ids,
                                tokenize=settings["tokenize"])
    finally:
        if scorer is not None and inputs.scorer is None:
            scorer.close()
    if n_videos == 0:
        raise EvalError(f"no ground-truth video has a prediction in {inputs.pred} (nothing to score)")
    skipped = dict(preds.skipped)
    if settings["missing"] == "drop":
        absent = sum(1 for v in gt.video_ids if v not in by_video)
        if absent:
            skipped["gt_video_without_prediction"] = absent
    metrics = {f"soda_{k}": {"precision": s.precision, "recall": s.recall, "f1": s.f1} for k, s in scores.items()}
    return EvalResult(metrics=metrics, items=n_videos, skipped=sum(skipped.values()), skip_reasons=skipped,
                      resolved=_resolved(gt))


DENSEVID = register(Protocol(
    name="densevid",
    summary="dense captioning (ActivityNet evaluator): METEOR, CIDEr, BLEU-4, precision/recall over tIoU",
    evaluate=_evaluate_densevid,
    variants=(
        Variant("garbage", "2018", "reference sentence of unmatched predictions: 2018 'abc123!@#', 2021 random "
                "letters (changes METEOR only)", choices=("2018", "2021")),
        Variant("garbage_seed", 0, "seed of the 2021 garbage strings (none = unseeded)", parse=_parse_seed),
        Variant("tious", TIOUS, "tIoU thresholds averaged over", parse=_parse_tious),
        Variant("max_proposals", 1000, "predictions kept per video, in file order"),
        Variant("tokenize", "video", "PTB tokenization context: video (each video's lines as the reference batches "
                "them, a neutral line after each video: deterministic) or sentence (every sentence alone)",
                choices=("video", "sentence")),
    ),
    options=frozenset({"video_list", "subset"}),
    multi_gt=True,
    table_keys=("meteor", "cider", "bleu4", "precision", "recall"),
))

SODA = register(Protocol(
    name="soda",
    summary="dense captioning story scores: SODA-c and SODA-d (order-preserving one-to-one matching)",
    evaluate=_evaluate_soda,
    variants=(
        Variant("missing", "drop", "GT videos without a prediction key: drop (reference) or score 0",
                choices=("drop", "zero")),
        Variant("multi_reference", False, "score each reference file on its own and keep the best F per video "
                "(default: merge the files into a single reference)"),
        Variant("kinds", "both", "which scores to compute", choices=("both", "c", "d")),
        Variant("tokenize", "video", "PTB tokenization context: video (each video's lines as the reference batches "
                "them, a neutral line after each video: deterministic) or sentence (every sentence alone)",
                choices=("video", "sentence")),
    ),
    options=frozenset({"video_list", "subset"}),
    multi_gt=True,
))
