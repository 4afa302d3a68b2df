"""densevid metrics (``../shared/specs/evaluation.md`` §6) without Java: tIoU, precision/recall and CIDEr of example F
with an injected plain tokenizer; the fixture precision/recall against an independent loop."""

from __future__ import annotations

import json

import numpy as np
import pytest
from dvc_perturb import perturb_predictions
from dvc_toy import GT_F, PRED_E, as_preds, as_refs, toy_sentence_score

from eval.metrics.dense_captioning import (
    GARBAGE_2018,
    densevid,
    garbage_2021,
    tiou_densevid,
)
from eval.metrics.text_scorers import FunctionScorer, PlainTokenizer


def scorer() -> FunctionScorer:
    return FunctionScorer(toy_sentence_score, PlainTokenizer())


def test_tiou_formula_and_epsilon():
    pred = np.array([[6.0, 9.0], [0.0, 10.0], [12.0, 20.0], [25.0, 40.0], [10.0, 5.0], [np.nan, 3.0]])
    gt = np.array([[0.0, 10.0], [10.0, 20.0], [20.0, 30.0]])
    iou = tiou_densevid(pred, gt)
    # [6,9] vs [0,10] is 0.3 on paper but 3/(10 + 1e-8) < 0.3: fails the 0.3 threshold (spec §6(c))
    assert iou[0, 0] == pytest.approx(0.3, abs=1e-8) and iou[0, 0] < 0.3
    assert iou[1, 0] == pytest.approx(1.0, abs=1e-8) and iou[1, 1] == 0.0
    assert iou[2, 1] == pytest.approx(0.8, abs=1e-8)
    assert iou[3, 2] == pytest.approx(0.25, abs=1e-8)
    # union is min(hull, summed lengths): disjoint segments give 0, reversed and NaN never overlap
    assert iou[3, 0] == 0.0 and (iou[4] == 0).all() and (iou[5] == 0).all()


def test_example_f_precision_recall_and_cider():
    res = densevid(as_refs(GT_F), as_preds(PRED_E), scorer())
    p = [res.per_tiou[t]["precision"] for t in (0.3, 0.5, 0.7, 0.9)]
    r = [res.per_tiou[t]["recall"] for t in (0.3, 0.5, 0.7, 0.9)]
    assert p == pytest.approx([0.541667, 0.166667, 0.166667, 0.083333], abs=1e-6)
    assert r == pytest.approx([0.541667, 0.166667, 0.166667, 0.083333], abs=1e-6)
    assert res.means["precision"] == pytest.approx(0.239583, abs=1e-6)
    cider = [res.per_tiou[t]["cider"] for t in (0.3, 0.5, 0.7, 0.9)]
    # at 0.3: v1 10/3, v2 (7.5 + 0)/2, v3 (5 + 0)/2, v4 0 -> 2.395833 (spec §6(e))
    assert cider == pytest.approx([2.395833, 0.833333, 0.833333, 0.833333], abs=1e-6)
    assert res.means["cider"] == pytest.approx(1.223958, abs=1e-6)
    assert res.videos == 4


def test_example_f_pairs_one_to_many_and_garbage():
    seen: list[tuple[str, str]] = []

    def recording(hyp: str, ref: str) -> float:
        seen.append((hyp, ref))
        return toy_sentence_score(hyp, ref)

    densevid(as_refs(GT_F), as_preds(PRED_E), FunctionScorer(recording), tious=(0.3,))
    # v2's one prediction overlaps both GT segments at 0.5 >= 0.3: paired with both (one-to-many)
    assert ("slice the bread", "slice the bread") in seen and ("slice the bread", "toast the bread") in seen
    # v3's [6,9] fails >= 0.3 by the epsilon: paired with the garbage sentence
    assert ("chop onions", GARBAGE_2018) in seen
    # v4 has no prediction: no pair at all
    assert not any("serve" in h or "serve" in r for h, r in seen)


def test_garbage_2021_is_seeded_random_letters():
    import random

    a = [garbage_2021(random.Random(0)) for _ in range(3)]
    assert len(set(a)) == 1 and 10 <= len(a[0]) <= 20 and a[0].isalpha() and a[0].islower()
    res18 = densevid(as_refs(GT_F), as_preds(PRED_E), scorer(), garbage="2018")
    res21 = densevid(as_refs(GT_F), as_preds(PRED_E), scorer(), garbage="2021")
    for key in ("cider", "bleu4", "precision", "recall"):  # 2021 changes METEOR only
        assert res18.means[key] == pytest.approx(res21.means[key], abs=1e-12)


def test_max_proposals_truncates_in_file_order():
    preds = as_preds(PRED_E)
    res = densevid(as_refs(GT_F), preds, scorer(), max_proposals=1)
    # v1 keeps only [0,10] (exact): precision at 0.9 = (1/1 + 0 + 0 + 0)/4 with v3 keeping [5,30]
    assert res.per_tiou[0.9]["precision"] == pytest.approx(0.25, abs=1e-9)


def test_empty_prediction_list_scores_zero_precision():
    preds = as_preds(PRED_E)
    preds["v4"] = []
    res = densevid(as_refs(GT_F), preds, scorer())
    base = densevid(as_refs(GT_F), as_preds(PRED_E), scorer())
    assert res.means == pytest.approx(base.means)


def _independent_precision_recall(gt: dict, results: dict, thr: float) -> tuple[float, float]:
    """A plain-Python re-derivation of the detection scores (one reference file), for the fixture check."""
    ps, rs = [], []
    for vid, entry in gt.items():
        refs = entry["timestamps"]
        preds = results.get(vid)
        covered_gt, covered_pred = set(), set()
        for i, p in enumerate(preds or []):
            for j, g in enumerate(refs):
                inter = max(0.0, min(p["timestamp"][1], g[1]) - max(p["timestamp"][0], g[0]))
                union = min(max(p["timestamp"][1], g[1]) - min(p["timestamp"][0], g[0]),
                            (g[1] - g[0]) + p["timestamp"][1] - p["timestamp"][0])
                if inter / (union + 1e-8) > thr:
                    covered_gt.add(j)
                    covered_pred.add(i)
        ps.append(len(covered_pred) / len(preds) if preds else 0.0)
        rs.append(len(covered_gt) / len(refs))
    return sum(ps) / len(ps), sum(rs) / len(rs)


@pytest.mark.parametrize("fixture", ["youcook2/yc2_val_pdvc_format.json", "tasty/tasty_val_anet_format.json"])
def test_fixture_precision_recall_against_independent_loop(shared_data, fixture):
    gt = json.loads((shared_data / fixture).read_text())
    results = perturb_predictions(gt, seed=0)["results"]
    preds = {v: [(tuple(p["timestamp"]), p["sentence"]) for p in ps] for v, ps in results.items() if v in gt}
    refs = [{v: ([tuple(t) for t in e["timestamps"]], e["sentences"]) for v, e in gt.items()}]
    res = densevid(refs, preds, FunctionScorer(lambda h, r: float(h == r)), video_ids=list(gt))
    for thr in (0.3, 0.5, 0.7, 0.9):
        p, r = _independent_precision_recall(gt, results, thr)
        assert res.per_tiou[thr]["precision"] == pytest.approx(p, abs=1e-12)
        assert res.per_tiou[thr]["recall"] == pytest.approx(r, abs=1e-12)
    assert 0.05 < res.means["precision"] < 0.95  # the perturbation leaves room on both sides


def test_fixture_ground_truth_against_itself_is_perfect_detection(shared_data):
    gt = json.loads((shared_data / "youcook2/yc2_val_pdvc_format.json").read_text())
    refs = [{v: ([tuple(t) for t in e["timestamps"]], e["sentences"]) for v, e in gt.items()}]
    preds = {v: list(zip([tuple(t) for t in e["timestamps"]], e["sentences"])) for v, e in gt.items()}
    res = densevid(refs, preds, FunctionScorer(lambda h, r: float(h == r)))
    for thr in (0.3, 0.5, 0.7, 0.9):
        assert res.per_tiou[thr]["precision"] == 1.0 and res.per_tiou[thr]["recall"] == 1.0
