"""SODA-c and SODA-d: story-oriented dense-captioning scores (docs/evaluation.md).

Reimplemented from the definition (Fujita et al., ECCV 2020; the algorithm as docs/evaluation.md, ``soda``, states it).
The upstream ``fujiso/SODA`` code is under an evaluation-only licence and is never copied here; it was run side by side
only to cross-check the numbers. Per video, ground-truth segments G and predictions P (both sorted by start time) are
matched one-to-one and order-preserving by dynamic programming on a score matrix ``M[g, p]``:

- SODA-d: ``M = tIoU`` (no threshold);
- SODA-c: ``M = tIoU * METEOR(hypothesis = G[g].sentence, reference = P[p].sentence)`` (roles as the reference).

``P_v = best / |P|``, ``R_v = best / |G|``, ``F_v`` their harmonic mean; the reported P, R and F are macro means over
the videos (F is the mean of per-video F, not F of the means). Used by the Sieve & Swap paper (Table 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from eval.metrics.dense_captioning import IOU_EPS
from eval.metrics.text_scorers import SentenceScorer, remove_nonascii
from eval.metrics.text_scorers import tokenize_blocks as scorer_tokenize_blocks

Segments = tuple[list[tuple[float, float]], list[str]]


def tiou_soda(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """``[G, P]`` tIoU as SODA's ``iou(pred, gt)``: union ``min(hull, ((e_p - s_p) + e_g) - s_g)``, same epsilon as
    the ActivityNet evaluator; non-finite values become 0."""
    ps, pe = pred[None, :, 0], pred[None, :, 1]
    gs, ge = gt[:, :1], gt[:, 1:2]
    with np.errstate(invalid="ignore"):
        inter = np.maximum(0.0, np.minimum(pe, ge) - np.maximum(ps, gs))
        union = np.minimum(np.maximum(pe, ge) - np.minimum(ps, gs), ((pe - ps) + ge) - gs)
        iou = inter / (union + IOU_EPS)
    return np.nan_to_num(iou, nan=0.0, posinf=0.0, neginf=0.0)


def monotone_matching_score(scores: np.ndarray) -> float:
    """Best total score of an order-preserving one-to-one matching of rows to columns:
    ``dp[i][j] = max(dp[i-1][j], dp[i][j-1], dp[i-1][j-1] + M[i][j])`` with ``dp[-1][*] = dp[*][-1] = 0``.

    Row by row, vectorised over columns: ``a = max(dp[i-1], shift(dp[i-1]) + M[i])`` then ``dp[i] = cummax(a)``.
    Scores must be non-negative. An empty matrix scores 0.
    """
    m = np.asarray(scores, dtype=np.float64)
    if m.ndim != 2 or m.size == 0:
        return 0.0
    prev = np.zeros(m.shape[1])
    for i in range(m.shape[0]):
        diagonal = np.concatenate(([0.0], prev[:-1])) + m[i]
        prev = np.maximum.accumulate(np.maximum(prev, diagonal))
    return float(prev[-1])


def _tokenize_videos(scorer: SentenceScorer, videos: Sequence[str], ref_sets: Sequence[dict[str, Segments]],
                     preds: dict[str, list[tuple[tuple[float, float], str]]], mode: str):
    """Tokenized GT sentences per (video, reference set) and tokenized sorted predictions per video."""
    if mode not in ("video", "sentence"):
        raise ValueError(f"tokenize must be video or sentence, got {mode!r}")
    keys: list[tuple[str, object]] = []
    blocks: list[list[str]] = []
    for v in videos:
        keys.append((v, None))
        blocks.append([remove_nonascii(p[1]) for p in preds[v]])
        for r, ref in enumerate(ref_sets):
            if v in ref:
                keys.append((v, r))
                blocks.append([remove_nonascii(g) for g in ref[v][1]])
    if mode == "sentence":
        flat = [s for b in blocks for s in b]
        unique = list(dict.fromkeys(flat))
        tokens = dict(zip(unique, (b[0] for b in scorer_tokenize_blocks(scorer, [[t] for t in unique]))))
        out = [[tokens[s] for s in b] for b in blocks]
    else:
        out = scorer_tokenize_blocks(scorer, blocks)
    tok_gt: dict[tuple[str, int], list[str]] = {}
    tok_pred: dict[str, list[str]] = {}
    for (v, r), toks in zip(keys, out):
        if r is None:
            tok_pred[v] = toks
        else:
            tok_gt[(v, r)] = toks
    return tok_gt, tok_pred


@dataclass
class SodaScores:
    precision: float
    recall: float
    f1: float


def _prf(best: float, n_gt: int, n_pred: int) -> tuple[float, float, float]:
    if n_gt == 0 or n_pred == 0:
        return 0.0, 0.0, 0.0
    p, r = best / n_pred, best / n_gt
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def merge_references(refs: Sequence[dict[str, Segments]]) -> dict[str, Segments]:
    """"Single reference": per video, every reference file's segments concatenated (file order) and stably sorted by
    start time, as SODA's ``load_ground_truth(multi_reference=False)``."""
    merged: dict[str, Segments] = {}
    for vid in dict.fromkeys(v for ref in refs for v in ref):
        stamps: list[tuple[float, float]] = []
        sents: list[str] = []
        for ref in refs:
            if vid in ref:
                stamps += list(ref[vid][0])
                sents += list(ref[vid][1])
        order = sorted(range(len(stamps)), key=lambda k: stamps[k][0])
        merged[vid] = ([stamps[k] for k in order], [sents[k] for k in order])
    return merged


def soda(
    refs: Sequence[dict[str, Segments]],
    preds: dict[str, list[tuple[tuple[float, float], str]]],
    scorer: SentenceScorer | None,
    kinds: Sequence[str] = ("c", "d"),
    missing: str = "drop",
    multi_reference: bool = False,
    video_ids: Sequence[str] | None = None,
    sentence_score: Callable[[list[str], list[str]], np.ndarray] | None = None,
    tokenize: str = "video",
) -> tuple[dict[str, SodaScores], int]:
    """SODA per kind (``"c"``, ``"d"``) and the number of videos averaged over.

    ``missing="drop"`` averages over GT videos that have a prediction key (the reference); ``"zero"`` also scores
    absent keys 0. A key with an empty list scores 0 either way. ``sentence_score(gt_sentences, pred_sentences)``
    may replace the METEOR matrix (``[G, P]``, raw sentences) in tests; otherwise ``scorer`` tokenizes and scores.
    ``tokenize="video"``: each video's sorted predictions and each video's ground truth are tokenized as one block,
    as the reference batches them, with a neutral line after every block; ``"sentence"``: every sentence alone.
    """
    if missing not in ("drop", "zero"):
        raise ValueError(f"missing must be drop or zero, got {missing!r}")
    if video_ids is None:
        video_ids = list(dict.fromkeys(v for ref in refs for v in ref))
    ref_sets = list(refs) if multi_reference else [merge_references(refs)]
    videos = [v for v in video_ids if v in preds or missing == "zero"]
    # predictions sorted by start (stable), as the reference's loader
    sorted_preds = {v: sorted(preds.get(v, []), key=lambda x: x[0][0]) for v in videos}

    meteor: dict[tuple[str, str], float] = {}
    if "c" in kinds and sentence_score is None:
        if scorer is None:
            raise ValueError("SODA-c needs a sentence scorer")
        tok_gt, tok_pred = _tokenize_videos(scorer, videos, ref_sets, sorted_preds, tokenize)
        needed = list(dict.fromkeys(
            (g, p) for v in videos for r in range(len(ref_sets)) if (v, r) in tok_gt and tok_pred[v]
            for g in tok_gt[(v, r)] for p in tok_pred[v]))
        meteor = dict(zip(needed, scorer.meteor_single(needed)))

    def meteor_matrix(v: str, r: int, gt_sents: list[str], pred_sents: list[str]) -> np.ndarray:
        if sentence_score is not None:
            return np.asarray(sentence_score(gt_sents, pred_sents), dtype=np.float64).reshape(len(gt_sents),
                                                                                             len(pred_sents))
        return np.array([[meteor[(g, p)] for p in tok_pred[v]] for g in tok_gt[(v, r)]],
                        dtype=np.float64).reshape(len(gt_sents), len(pred_sents))

    per_kind: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
    for v in videos:
        pv = sorted_preds[v]
        best: dict[str, tuple[float, float, float] | None] = {k: None for k in kinds}
        for r, ref in enumerate(ref_sets):
            if v not in ref:
                continue
            stamps, sents = ref[v]
            if not pv:
                for k in kinds:
                    best[k] = best[k] or (0.0, 0.0, 0.0)
                continue
            iou = tiou_soda(np.asarray([p[0] for p in pv], dtype=np.float64).reshape(-1, 2),
                            np.asarray(stamps, dtype=np.float64).reshape(-1, 2))
            for k in kinds:
                m = iou * meteor_matrix(v, r, list(sents), [p[1] for p in pv]) if k == "c" else iou
                prf = _prf(monotone_matching_score(m), len(stamps), len(pv))
                if best[k] is None or prf[2] > best[k][2]:  # highest F, first reference file on ties
                    best[k] = prf
        for k in kinds:
            per_kind[k].append(best[k] or (0.0, 0.0, 0.0))
    out = {}
    for k in kinds:
        arr = np.asarray(per_kind[k], dtype=np.float64).reshape(-1, 3)
        means = arr.mean(axis=0) if len(arr) else np.zeros(3)
        out[k] = SodaScores(float(means[0]), float(means[1]), float(means[2]))
    return out, len(videos)
