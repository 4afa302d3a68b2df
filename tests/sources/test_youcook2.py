"""builders.sources.youcook2: YouCook2 annotations for the MARC chat/content classifier (marc.md §2.4)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from builders.sources import youcook2
from builders.sources.youcook2 import read_food_types, read_youcook2_annotations


def test_real_annotations(shared_data):
    videos, drops = read_youcook2_annotations(shared_data / "youcook2" / "youcookii_annotations_trainval.json")
    assert drops == []
    assert len(videos) == 1790
    assert sum(len(v.segments) for v in videos.values()) == 13829
    assert all(len(v.segments) == len(v.sentences) for v in videos.values())
    assert Counter(v.subset for v in videos.values()) == {"training": 1333, "validation": 457}
    assert len({v.recipe_type for v in videos.values()}) == 89
    v = videos["GLd3aX16zBg"]
    assert (v.duration, v.subset, v.recipe_type) == (241.62, "training", "113")
    assert v.segments[0] == (90.0, 102.0) and v.sentences[0] == "spread margarine on two slices of white bread"
    assert v.segments[4] == (173.0, 174.0) and len(v.segments) == 5
    assert v.video_url == "https://www.youtube.com/watch?v=GLd3aX16zBg"


def test_real_food_types(shared_data):
    types = read_food_types(shared_data / "youcook2" / "label_foodtype.csv")
    assert types["101"] == "BLT" and types["425"] == "masala dosa" and types["103"] == "burger"
    videos, _ = read_youcook2_annotations(shared_data / "youcook2" / "youcookii_annotations_trainval.json")
    assert {v.recipe_type for v in videos.values()} <= types.keys()


def _entry(**over):
    entry = {"duration": 60.5, "subset": "training", "recipe_type": "101", "video_url": "u",
             "annotations": [{"segment": [1, 5], "id": 0, "sentence": "cut the bread"}]}
    entry.update(over)
    return entry


def test_malformed_entries_are_named_drops(tmp_path):
    db = {
        "goodvideo01": _entry(),
        "intrecipe02": _entry(recipe_type=102),                                     # int type -> "102"
        "noduration3": _entry(duration="long"),
        "zerodurat04": _entry(duration=0),
        "badsubset05": _entry(subset="train"),
        "notypes0006": _entry(recipe_type=""),
        "noannots007": _entry(annotations=[]),
        "reversed008": _entry(annotations=[{"segment": [9, 3], "sentence": "x"}]),
        "oneseg00009": _entry(annotations=[{"segment": [3], "sentence": "x"}]),
        "boolseg0010": _entry(annotations=[{"segment": [True, 3], "sentence": "x"}]),
        "nosent00011": _entry(annotations=[{"segment": [1, 3]}]),
        "notdict0012": [1, 2],
        "../../etc/x": _entry(),
        "partbad0013": _entry(annotations=[{"segment": [1, 3], "sentence": "ok"}, "junk"]),
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps({"database": db}))
    videos, drops = read_youcook2_annotations(path)
    assert list(videos) == ["goodvideo01", "intrecipe02"]
    assert videos["intrecipe02"].recipe_type == "102"
    assert videos["goodvideo01"].segments == [(1.0, 5.0)] and videos["goodvideo01"].duration == 60.5
    assert {d.reason for d in drops} == {"malformed_annotation"} and {d.stage for d in drops} == {"youcook2"}
    assert sorted(d.item_id for d in drops) == sorted(set(db) - {"goodvideo01", "intrecipe02"})
    by_id = {d.item_id: d.detail for d in drops}
    assert "duration" in by_id["noduration3"] and "subset" in by_id["badsubset05"]
    assert "annotation 1" in by_id["partbad0013"] and "segment" in by_id["reversed008"]


def test_bad_files_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="YouCook2 annotations not found"):
        read_youcook2_annotations(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\"database\": {")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_youcook2_annotations(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="database"):
        read_youcook2_annotations(bad)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"database": {"goodvideo01": _entry()}}))
    with pytest.raises(ValueError, match="exceeds the 10-byte limit"):
        read_youcook2_annotations(big, max_bytes=10)
    assert len(read_youcook2_annotations(big)[0]) == 1 and youcook2.MAX_ANNOTATION_BYTES == 200 << 20
