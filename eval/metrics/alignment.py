"""MARC pairwise alignment metric: support-weighted P / R / F1 per recipe pair, averaged over pairs.

docs/evaluation.md (example D), docs/corpora/marc.md; Lin et al., ACL 2020, §4.4 and footnote 16 ("we
compute precision, recall and F1 per label, average them weighted by the number of true instances per label, then
average over recipe pairs"). Per pair this equals ``sklearn.metrics.precision_recall_fscore_support(gold, pred,
average="weighted", zero_division=0)``, implemented here with numpy (the tests cross-check against sklearn):

- labels are the union of gold and predicted labels; a label's weight is its gold support, so a label that is only
  predicted has weight 0 (it still lowers the precision of nothing but itself) and a gold label never predicted has
  precision 0 (``zero_division=0``);
- weighted recall equals the pair's accuracy; the pair's F is the support-weighted mean of per-label F, not 2PR/(P+R);
- ``none="label"`` keeps NONE (-1) as an ordinary label, ``none="ignore_gold"`` first removes the items whose gold is
  NONE (the paper's label space has no NONE; docs/corpora/marc.md makes it the primary score).

Pooling every pair before scoring is a different metric (example D: 0.5556 / 0.6667 / 0.6 pooled).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["NONE", "AlignmentScores", "any_accuracy", "pair_prf", "score_pairs"]

NONE = -1
NONE_MODES = ("label", "ignore_gold")


def pair_prf(gold: Sequence[int] | np.ndarray, pred: Sequence[int] | np.ndarray) -> tuple[float, float, float]:
    """Support-weighted (P, R, F1) of one pair over the union of labels, ``zero_division=0`` (docs/evaluation.md).

    ``gold`` and ``pred`` must have the same non-zero length.
    """
    g = np.asarray(gold, dtype=np.int64)
    p = np.asarray(pred, dtype=np.int64)
    if g.shape != p.shape or g.ndim != 1:
        raise ValueError(f"gold and pred must be 1-d of equal length, got {g.shape} and {p.shape}")
    if g.size == 0:
        raise ValueError("empty pair")
    labels, inv = np.unique(np.concatenate([g, p]), return_inverse=True)
    gi, pi = inv[: g.size], inv[g.size:]
    L = labels.size
    support = np.bincount(gi, minlength=L).astype(float)
    predicted = np.bincount(pi, minlength=L).astype(float)
    tp = np.bincount(gi[gi == pi], minlength=L).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(predicted > 0, tp / predicted, 0.0)
        rec = np.where(support > 0, tp / support, 0.0)
        f1 = np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0)
    total = support.sum()
    weights = support / total
    return float(weights @ prec), float(weights @ rec), float(weights @ f1)


@dataclass
class AlignmentScores:
    """Mean over scored pairs of the per-pair weighted P / R / F1, with the pairs skipped and why."""

    precision: float
    recall: float
    f1: float
    pairs: int
    items: int
    skip_reasons: dict[str, int] = field(default_factory=dict)
    per_pair: list[tuple[float, float, float]] = field(default_factory=list)

    def as_dict(self) -> dict[str, float]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1}


def score_pairs(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], none: str = "label") -> AlignmentScores:
    """Mean of :func:`pair_prf` over pairs (docs/corpora/marc.md: averaged over pairs, not pooled).

    Pairs with unequal lengths (``length_mismatch``), no items (``empty_pair``) or, under ``none="ignore_gold"``, only
    NONE gold (``all_gold_none``) are skipped and counted. With no scored pair the means are NaN.
    """
    if none not in NONE_MODES:
        raise ValueError(f"none must be one of {NONE_MODES}, got {none!r}")
    skips: dict[str, int] = {}
    per_pair: list[tuple[float, float, float]] = []
    items = 0
    for gold, pred in pairs:
        g = np.asarray(gold, dtype=np.int64).ravel()
        p = np.asarray(pred, dtype=np.int64).ravel()
        if g.size != p.size:
            skips["length_mismatch"] = skips.get("length_mismatch", 0) + 1
            continue
        if g.size == 0:
            skips["empty_pair"] = skips.get("empty_pair", 0) + 1
            continue
        if none == "ignore_gold":
            keep = g != NONE
            g, p = g[keep], p[keep]
            if g.size == 0:
                skips["all_gold_none"] = skips.get("all_gold_none", 0) + 1
                continue
        per_pair.append(pair_prf(g, p))
        items += int(g.size)
    if per_pair:
        arr = np.asarray(per_pair)
        prec, rec, f1 = (float(x) for x in arr.mean(axis=0))
    else:
        prec = rec = f1 = float("nan")
    return AlignmentScores(prec, rec, f1, len(per_pair), items, skips, per_pair)


def any_accuracy(hits: Iterable[Sequence[Sequence[int]]], preds: Iterable[Sequence[int]]) -> float:
    """Lenient accuracy (docs/corpora/marc.md "any"): a prediction is right when it is one of the targets hit by the source
    instruction's actions; instructions with no hit are not scored; mean over pairs of the per-pair accuracy."""
    accs = []
    for pair_hits, pred in zip(hits, preds):
        scored = [(h, q) for h, q in zip(pair_hits, pred) if len(h)]
        if scored:
            accs.append(sum(1 for h, q in scored if q in h) / len(scored))
    return float(np.mean(accs)) if accs else float("nan")
