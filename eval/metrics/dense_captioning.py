"""ActivityNet dense-captioning metrics (docs/evaluation.md): METEOR, CIDEr-D, BLEU-4 per tIoU,
and the proposal precision / recall, reimplemented from the definition of the 2018 evaluator
(ranjaykrishna/densevid_eval @deba7d7, ``ANETcaptions.evaluate_tiou`` / ``evaluate_detection``) with its 2021 garbage
variant (@9d4045a). Used by the Sieve & Swap paper (Batra et al., ECCV 2024, Tables 3-5).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from eval.metrics.text_scorers import SentenceScorer, bleu4, cider_d, remove_nonascii
from eval.metrics.text_scorers import tokenize_blocks as scorer_tokenize_blocks

#: tIoU thresholds of the evaluator (``--tious`` default)
TIOUS = (0.3, 0.5, 0.7, 0.9)
#: the 2018 evaluator's reference sentence for a prediction that overlaps no ground truth
GARBAGE_2018 = "abc123!@#"
#: the epsilon of the evaluator's tIoU denominator: an IoU exactly at a threshold fails both >= and > (as in the
#: ActivityNet evaluator)
IOU_EPS = 1e-8


def tiou_densevid(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """``[P, G]`` tIoU as ``ANETcaptions.iou(pred, gt)``: the union is the smaller of the hull and the summed lengths,
    computed in the reference's order ``((e_g - s_g) + e_p) - s_p``; non-finite values become 0."""
    ps, pe = pred[:, :1], pred[:, 1:2]
    gs, ge = gt[None, :, 0], gt[None, :, 1]
    with np.errstate(invalid="ignore"):
        inter = np.maximum(0.0, np.minimum(ge, pe) - np.maximum(gs, ps))
        union = np.minimum(np.maximum(ge, pe) - np.minimum(gs, ps), ((ge - gs) + pe) - ps)
        iou = inter / (union + IOU_EPS)
    return np.nan_to_num(iou, nan=0.0, posinf=0.0, neginf=0.0)


def _as_array(stamps: Sequence[tuple[float, float]]) -> np.ndarray:
    return np.asarray(stamps, dtype=np.float64).reshape(-1, 2)


def garbage_2021(rng: random.Random) -> str:
    """The 2021 evaluator's garbage reference: 10-20 random lower-case letters (``random_string(randint(10, 20))``)."""
    length = rng.randint(10, 20)
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(length))


@dataclass
class DensevidResult:
    per_tiou: dict[float, dict[str, float]]
    means: dict[str, float]
    videos: int


def densevid(
    refs: Sequence[dict[str, tuple[list[tuple[float, float]], list[str]]]],
    preds: dict[str, list[tuple[tuple[float, float], str]]],
    scorer: SentenceScorer,
    tious: Sequence[float] = TIOUS,
    garbage: str = "2018",
    garbage_seed: int | None = 0,
    max_proposals: int = 1000,
    video_ids: Sequence[str] | None = None,
    tokenize: str = "video",
) -> DensevidResult:
    """Dense-captioning metrics per threshold and their means over the thresholds (docs/evaluation.md, ``densevid``).

    ``refs``: one dict per reference file, ``vid -> (timestamps, sentences)``; ``preds``: ``vid -> [(timestamp,
    sentence)]`` in file order (only the first ``max_proposals`` count); ``video_ids``: the GT videos averaged over
    (default: the union of the reference files). Captions: every prediction is paired with every GT segment of every
    reference file with ``tIoU >= thr`` (one-to-many), or with the garbage sentence; each video is scored on its own
    pairs (0 without pairs) and the metric is the mean over ALL GT videos. Precision / recall use ``tIoU > thr``
    (strict), best reference file, precision 0 for a video without (or with an empty list of) predictions.

    ``tokenize="video"`` tokenizes the prediction side and the reference side of each video's pairs as one block
    each, as the reference batches them (a line's PTB tokens may depend on the next line of its own video), with a
    neutral line after each block so that nothing depends on the order of the videos; ``"sentence"`` tokenizes every
    sentence alone (see ``eval/metrics/text_scorers.py``).
    """
    if video_ids is None:
        video_ids = list(dict.fromkeys(v for ref in refs for v in ref))
    if not video_ids:
        raise ValueError("no ground-truth video")
    if garbage not in ("2018", "2021"):
        raise ValueError(f"garbage must be 2018 or 2021, got {garbage!r}")
    rng = random.Random(garbage_seed)
    make_garbage: Callable[[], str] = (lambda: GARBAGE_2018) if garbage == "2018" else (lambda: garbage_2021(rng))

    preds = {v: p[:max_proposals] for v, p in preds.items()}
    # tIoU matrices per (video, reference file), computed once
    ious: dict[tuple[str, int], np.ndarray] = {}
    for v in video_ids:
        if v not in preds:
            continue
        p_arr = _as_array([t for t, _ in preds[v]])
        for r, ref in enumerate(refs):
            if v in ref:
                ious[(v, r)] = tiou_densevid(p_arr, _as_array(ref[v][0]))

    # caption pairs (raw text) per threshold and video, garbage drawn in the reference's loop order
    pairs: dict[float, dict[str, list[tuple[str, str]]]] = {}
    for thr in tious:
        per_video: dict[str, list[tuple[str, str]]] = {}
        for v in video_ids:
            vp: list[tuple[str, str]] = []
            for i, (_, sentence) in enumerate(preds.get(v, [])):
                added = False
                for r, ref in enumerate(refs):
                    if (v, r) not in ious:
                        continue
                    for j in np.flatnonzero(ious[(v, r)][i] >= thr):
                        vp.append((sentence, ref[v][1][j]))
                        added = True
                if not added:
                    vp.append((sentence, make_garbage()))
            per_video[v] = vp
        pairs[thr] = per_video

    tokenized = _tokenize_pairs(scorer, [pairs[thr][v] for thr in tious for v in video_ids], tokenize)
    tok_pairs = {thr: {} for thr in tious}
    k = 0
    for thr in tious:
        for v in video_ids:
            tok_pairs[thr][v] = tokenized[k]
            k += 1

    per_tiou: dict[float, dict[str, float]] = {}
    for thr in tious:
        groups = [tok_pairs[thr][v] for v in video_ids]
        meteor = scorer.meteor_aggregate(groups)
        bleu = [bleu4(g) if g else 0.0 for g in groups]
        cider = [cider_d(g) if g else 0.0 for g in groups]
        precision, recall = _detection(refs, preds, ious, video_ids, thr)
        per_tiou[thr] = {
            "meteor": float(np.mean(meteor)),
            "cider": float(np.mean(cider)),
            "bleu4": float(np.mean(bleu)),
            "precision": precision,
            "recall": recall,
        }
    keys = ("meteor", "cider", "bleu4", "precision", "recall")
    means = {k: float(np.mean([per_tiou[t][k] for t in tious])) for k in keys}
    return DensevidResult(per_tiou, means, len(video_ids))


def _tokenize_pairs(scorer: SentenceScorer, groups: Sequence[Sequence[tuple[str, str]]],
                    mode: str) -> list[list[tuple[str, str]]]:
    """Tokenize (hypothesis, reference) pairs per group after ``remove_nonascii``; ``mode`` as :func:`densevid`."""
    if mode not in ("video", "sentence"):
        raise ValueError(f"tokenize must be video or sentence, got {mode!r}")
    if mode == "sentence":
        texts = list(dict.fromkeys(remove_nonascii(t) for g in groups for pair in g for t in pair))
        tokens = dict(zip(texts, scorer_tokenize_blocks(scorer, [[t] for t in texts])))
        return [[(tokens[remove_nonascii(h)][0], tokens[remove_nonascii(r)][0]) for h, r in g] for g in groups]
    blocks = []
    for g in groups:
        blocks.append([remove_nonascii(h) for h, _ in g])
        blocks.append([remove_nonascii(r) for _, r in g])
    out = scorer_tokenize_blocks(scorer, blocks)
    return [list(zip(out[2 * i], out[2 * i + 1])) for i in range(len(groups))]


def _detection(refs, preds, ious, video_ids, thr: float) -> tuple[float, float]:
    """Mean over GT videos of the best-reference precision and recall at ``tIoU > thr`` (``evaluate_detection``)."""
    precision = np.zeros(len(video_ids))
    recall = np.zeros(len(video_ids))
    for k, v in enumerate(video_ids):
        best_p = best_r = 0.0
        for r, ref in enumerate(refs):
            if v not in ref:
                continue
            n_gt = len(ref[v][0])
            if (v, r) in ious and ious[(v, r)].shape[0] > 0:
                hit = ious[(v, r)] > thr
                best_p = max(best_p, float(hit.any(axis=1).sum()) / hit.shape[0])
                covered = float(hit.any(axis=0).sum())
            else:
                covered = 0.0
            best_r = max(best_r, covered / n_gt)
        precision[k], recall[k] = best_p, best_r
    return float(precision.mean()), float(recall.mean())
