"""builders.ops.chat_content: the MARC chat/content labels, split and features (marc.md §3.5)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from builders.ops import chat_content as cc


def test_merge_intervals():
    assert cc.merge_intervals([(5, 7), (0, 2), (1, 3), (9, 8), (float("nan"), 1)]) == [(0, 3), (5, 7)]


def test_content_labels_half_duration_rule():
    segments = [(10, 20), (18, 30)]
    sentences = [(8, 12),    # 2 of 4 s inside -> exactly half -> content
                 (6, 11),    # 1 of 5 s -> chat
                 (25, 40),   # 5 of 15 s -> chat
                 (15, 15),   # zero length, midpoint inside -> content
                 (31, 31),   # zero length outside -> chat
                 (19, 29)]   # inside the union of two overlapping segments -> content
    assert cc.content_labels(sentences, segments).tolist() == [1, 0, 0, 1, 0, 1]
    assert cc.content_labels([(0, 1)], []).tolist() == [0]


def test_recipe_type_split_fractions():
    counts = {str(t): 10 for t in range(100)}  # 1,000 sentences
    split = cc.recipe_type_split(counts)
    n = {k: sum(10 for v in split.values() if v == k) for k in ("test", "validation", "train")}
    # test until >= 10.37 % (11 types = 110), then validation until >= 8.54 % (9 types = 90)
    assert n == {"test": 110, "validation": 90, "train": 800}
    order = sorted(counts, key=lambda t: hashlib.sha1(t.encode()).hexdigest())
    assert split[order[0]] == "test" and split[order[-1]] == "train"


def test_position_features():
    f = cc.position_features([0, 50, 95], [2, 60, 100], [3, 0, 7], duration=100.0)
    assert f.shape == (3, 5) and f.dtype == np.float32
    np.testing.assert_allclose(f[0], [0.01, 0.0001, 1, 0, np.log(4)], rtol=1e-6)
    np.testing.assert_allclose(f[1], [0.55, 0.3025, 0, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(f[2], [0.975, 0.975**2, 0, 1, np.log(8)], rtol=1e-6)


def test_youcook2_labels_on_real_annotations(shared_data):
    """Labels of synthetic one-second 'sentences' over real YouCook2 annotations equal a direct coverage count."""
    db = json.loads((shared_data / "youcook2/youcookii_annotations_trainval.json").read_text())["database"]
    vid, entry = next(iter(db.items()))
    segments = [a["segment"] for a in entry["annotations"]]
    sentences = [(t, t + 1.0) for t in range(int(entry["duration"]))]
    labels = cc.content_labels(sentences, segments)
    covered = [any(s <= t and t + 1 <= e for s, e in segments) for t in range(int(entry["duration"]))]
    # a 1-s sentence fully inside a segment is content; one fully outside every segment is chat
    for lab, cov, (t, _) in zip(labels, covered, sentences):
        if cov:
            assert lab == 1
        elif not any(s < t + 1 and t < e for s, e in segments):
            assert lab == 0
    assert 0 < labels.mean() < 1
    assert cc.TEST_FRACTION == pytest.approx(0.1037, abs=1e-4)
