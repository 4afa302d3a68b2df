"""SODA-c / SODA-d (``../shared/specs/evaluation.md`` §7): example E with an injected sentence score, the DP against
brute force, and the fixture ground truth against itself."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from dvc_toy import GT_E, GT_F, PRED_E, as_preds, as_refs, toy_sentence_score

from eval.metrics.soda import merge_references, monotone_matching_score, soda, tiou_soda


def score_matrix(gt_sents: list[str], pred_sents: list[str]) -> np.ndarray:
    return np.array([[toy_sentence_score(g, p) for p in pred_sents] for g in gt_sents])


def brute_force(m: np.ndarray) -> float:
    """Best sum over every order-preserving one-to-one matching (independent of the DP)."""
    g, p = m.shape
    best = 0.0
    for k in range(min(g, p) + 1):
        for rows in itertools.combinations(range(g), k):
            for cols in itertools.combinations(range(p), k):
                best = max(best, float(sum(m[r, c] for r, c in zip(rows, cols))))
    return best


def test_dp_equals_brute_force_on_random_matrices():
    rng = np.random.default_rng(0)
    for _ in range(200):
        g, p = rng.integers(1, 6, size=2)
        m = rng.random((g, p)) * (rng.random((g, p)) < 0.6)
        assert monotone_matching_score(m) == pytest.approx(brute_force(m), abs=1e-12)
    assert monotone_matching_score(np.zeros((0, 3))) == 0.0


def test_crossing_matches_are_not_counted():
    # v3 of example E: GT [0,10], [20,30]; predictions by start [5,30], [6,9]
    iou = tiou_soda(np.array([[5.0, 30.0], [6.0, 9.0]]), np.array([[0.0, 10.0], [20.0, 30.0]]))
    assert iou == pytest.approx(np.array([[1 / 6, 0.3], [0.4, 0.0]]), abs=1e-8)
    assert monotone_matching_score(iou) == pytest.approx(0.4, abs=1e-8)  # Hungarian would give 0.7


def test_example_e_soda_d():
    scores, n = soda(as_refs(GT_E), as_preds(PRED_E), None, kinds=("d",))
    assert n == 3
    assert (scores["d"].precision, scores["d"].recall, scores["d"].f1) == pytest.approx(
        (0.461111, 0.377778, 0.405556), abs=1e-6)


def test_example_e_soda_c_with_injected_scores():
    scores, _ = soda(as_refs(GT_E), as_preds(PRED_E), None, kinds=("c",), sentence_score=score_matrix)
    assert (scores["c"].precision, scores["c"].recall, scores["c"].f1) == pytest.approx(
        (0.372222, 0.288889, 0.316667), abs=1e-6)


def test_missing_prediction_key_drop_and_zero():
    dropped, n = soda(as_refs(GT_F), as_preds(PRED_E), None, kinds=("d",))
    assert n == 3 and dropped["d"].f1 == pytest.approx(0.405556, abs=1e-6)  # v4 leaves SODA-d unchanged
    zero, n = soda(as_refs(GT_F), as_preds(PRED_E), None, kinds=("d",), missing="zero")
    # hand: per-video P (0.683333, 0.5, 0.2, 0), R (0.683333, 0.25, 0.2, 0), F (0.683333, 0.333333, 0.2, 0)
    assert n == 4
    assert (zero["d"].precision, zero["d"].recall, zero["d"].f1) == pytest.approx(
        (1.383333 / 4, 1.133333 / 4, 1.216667 / 4), abs=1e-6)


def test_empty_prediction_list_scores_zero():
    preds = as_preds(PRED_E)
    preds["v4"] = []
    scores, n = soda(as_refs(GT_F), preds, None, kinds=("d",))
    assert n == 4 and scores["d"].f1 == pytest.approx(1.216667 / 4, abs=1e-6)


def test_merge_references_sorts_by_start_stably():
    a = {"v": ([(10, 20), (0, 5)], ["b", "a"])}
    b = {"v": ([(0, 3), (30, 40)], ["a2", "c"])}
    merged = merge_references([a, b])
    assert merged["v"] == ([(0, 5), (0, 3), (10, 20), (30, 40)], ["a", "a2", "b", "c"])


def test_multi_reference_keeps_best_file():
    good = {"v1": ([(0, 10)], ["x"])}
    bad = {"v1": ([(50, 60), (70, 80)], ["y", "z"])}
    preds = {"v1": [((0, 10), "x")]}
    scores, _ = soda([good, bad], preds, None, kinds=("d",), multi_reference=True)
    assert scores["d"].f1 == pytest.approx(1.0, abs=1e-6)
    merged, _ = soda([good, bad], preds, None, kinds=("d",))
    assert merged["d"].recall == pytest.approx(1 / 3, abs=1e-6)


def test_fixture_ground_truth_against_itself_is_perfect(shared_data):
    gt = json.loads((shared_data / "tasty/tasty_val_anet_format.json").read_text())
    refs = [{v: ([tuple(t) for t in e["timestamps"]], e["sentences"]) for v, e in gt.items()}]
    preds = {v: list(zip([tuple(t) for t in e["timestamps"]], e["sentences"])) for v, e in gt.items()}
    scores, n = soda(refs, preds, None, kinds=("c", "d"), sentence_score=lambda g, p: np.array(
        [[float(a == b) for b in p] for a in g]))
    assert n == 400
    for k in ("c", "d"):
        assert scores[k].f1 == pytest.approx(1.0, abs=1e-6)
        assert scores[k].precision == pytest.approx(1.0, abs=1e-6)
