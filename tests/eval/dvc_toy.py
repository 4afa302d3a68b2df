"""The worked examples E and F of ``../shared/specs/evaluation.md`` §6(e) and §7(e) as files and as plain data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

requires_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs `java` for pycocoevalcap's scorers")

GT_E = {
    "v1": {"duration": 40, "timestamps": [[0, 10], [10, 20], [20, 30]],
           "sentences": ["crack eggs into bowl", "whisk batter quickly", "pour mixture onto pan"]},
    "v2": {"duration": 10, "timestamps": [[0, 5], [5, 10]], "sentences": ["slice the bread", "toast the bread"]},
    "v3": {"duration": 30, "timestamps": [[0, 10], [20, 30]], "sentences": ["chop onions", "fry garlic"]},
}
#: example F adds a ground-truth video without any prediction
GT_F = {**GT_E, "v4": {"duration": 10, "timestamps": [[0, 10]], "sentences": ["serve the dish"]}}
PRED_E = {
    "v1": [{"sentence": "crack eggs into bowl", "timestamp": [0, 10]},
           {"sentence": "season with salt", "timestamp": [12, 20]},
           {"sentence": "pour mixture onto pan", "timestamp": [25, 40]}],
    "v2": [{"sentence": "slice the bread", "timestamp": [0, 10]}],
    "v3": [{"sentence": "fry garlic", "timestamp": [5, 30]}, {"sentence": "chop onions", "timestamp": [6, 9]}],
}


def submission(results: dict) -> dict:
    return {"version": "VERSION 1.0", "results": results, "external_data": {"used": False}}


def write_toy(tmp: Path, gt: dict = GT_F, results: dict = PRED_E) -> tuple[Path, Path]:
    gt_path, pred_path = tmp / "gt.json", tmp / "pred.json"
    gt_path.write_text(json.dumps(gt))
    pred_path.write_text(json.dumps(submission(results)))
    return gt_path, pred_path


def as_refs(gt: dict) -> list[dict]:
    return [{v: ([tuple(t) for t in e["timestamps"]], list(e["sentences"])) for v, e in gt.items()}]


def as_preds(results: dict) -> dict:
    return {v: [(tuple(p["timestamp"]), p["sentence"]) for p in ps] for v, ps in results.items()}


def toy_sentence_score(hyp: str, ref: str) -> float:
    """Spec §7(e): 1 for identical sentences, 0.2730 for (hyp "toast the bread", ref "slice the bread"), else 0."""
    if hyp == ref:
        return 1.0
    if (hyp, ref) == ("toast the bread", "slice the bread"):
        return 0.2730
    return 0.0
