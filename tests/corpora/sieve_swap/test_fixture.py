"""The fixture build of specs/sieve_swap.md §8 on real data: RecipeNLG's first 49 rows plus the 400 Tasty validation
recipes as RecipeNLG rows, against the three real ShowHowTo transcripts, with ``min_videos_per_task=1``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import main

pytestmark = pytest.mark.slow

IDS = {0: "appleTurnov", 1: "carTires001", 2: "potatoPress"}
CATEGORIES = {0: "Food and Entertaining", 1: "Cars & Other Vehicles", 2: "Food and Entertaining"}


@pytest.fixture(scope="module")
def inputs(shared_data, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fixture_inputs")
    items = json.loads((shared_data / "showhowto" / "showhowto_asr_examples.json").read_text(encoding="utf-8"))
    with open(d / "HowTo100M_v1.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["video_id", "category_1", "category_2", "rank", "task_id"])
        for i, vid in IDS.items():
            w.writerow([vid, CATEGORIES[i], "", 1, 100 + i])
    (d / "task_ids.csv").write_text("".join(f"{100 + i}\t{items[i]['title']}\n" for i in IDS))
    with open(d / "titles.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["video_id", "title"])
        for i, vid in IDS.items():
            w.writerow([vid, items[i]["title"]])
    raw = {vid: {k: [s[k] for s in items[i]["transcript"]] for k in ("text", "start", "end")} for i, vid in IDS.items()}
    (d / "raw_caption.json").write_text(json.dumps(raw))
    wx = d / "whisperx"
    wx.mkdir()
    for i, vid in IDS.items():
        segs = [{"start": s["start"], "end": s["end"], "text": s["text"], "words": []} for s in items[i]["transcript"]]
        (wx / f"{vid}.json").write_text(json.dumps({"segments": segs, "word_segments": [], "language": "en"}))
    tasty = json.loads((shared_data / "tasty" / "tasty_val_anet_format.json").read_text(encoding="utf-8"))
    with open(shared_data / "recipenlg" / "RecipeNLG_first49.csv", newline="", encoding="utf-8") as f:
        recipenlg = list(csv.reader(f))
    with open(d / "recipes.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerows(recipenlg)
        for j, slug in enumerate(sorted(tasty)):  # spec §8: title = slug with '-' -> ' ', directions = sentences
            w.writerow([1000 + j, slug.replace("-", " "), "[]", json.dumps([s.strip() for s in tasty[slug]["sentences"]]),
                        f"tasty.co/recipe/{slug}", "Recipes1M", "[]"])
    return {"dir": d, "tasty_slugs": sorted(tasty)}


def _args(d: Path, transcripts: Path, out: Path) -> list[str]:
    return ["sieve_swap", "--out", str(out), "--work-dir", str(d / "work"), "--no-progress", "-q",
            "--videos", str(d / "HowTo100M_v1.csv"), "--tasks", str(d / "task_ids.csv"),
            "--titles", str(d / "titles.csv"), "--transcripts", str(transcripts), "--recipes", str(d / "recipes.csv"),
            "--set", "min_videos_per_task=1"]


def test_default_thresholds_keep_no_video(inputs, tmp_path, capsys):
    d = inputs["dir"]
    assert main(_args(d, d / "raw_caption.json", tmp_path)) == 3  # nothing survives: statistics, no release
    assert "no video survived" in capsys.readouterr().err
    assert not (tmp_path / "sieve_swap").exists()  # the statistics go beside the release folder, never in its place
    stats = json.loads((tmp_path / "sieve_swap.empty-build" / "stats.json").read_text())
    assert stats["steps"]["read_recipes"]["kept"] == 49 + 400 and stats["steps"]["recipe_lemmas"]["kept"] == 449
    drops = {r["item_id"]: r for r in pq.read_table(tmp_path / "sieve_swap.empty-build" / "drops.parquet").to_pylist()}
    assert drops["carTires001"]["reason"] == "not_cooking"
    assert drops["carTires001"]["detail"] == "Cars & Other Vehicles"
    for vid in ("appleTurnov", "potatoPress"):
        assert drops[vid]["reason"] == "content_sieve_failed"
    # the turnovers' best pair passes the IoU bound (>= 0.1) and fails on recall (< 0.3)
    best = drops["appleTurnov"]["detail"].split()
    assert float(best[2]) >= 0.1 and float(best[4]) < 0.3
    assert stats["steps"]["title_sieve"]["kept"] == 2 and stats["counters"]["title_pairs"] > 0
    assert not (tmp_path / "sieve_swap" / "default").exists()


def test_whisperx_input_and_lower_recall_swaps_a_real_segment(inputs, tmp_path):
    d = inputs["dir"]
    assert main(_args(d, d / "whisperx", tmp_path) + ["--set", "recall_threshold=0.25"]) == 0
    rows = pq.read_table(tmp_path / "sieve_swap" / "default" / "train-00000-of-00001.parquet").to_pylist()
    assert [r["video_id"] for r in rows] == ["appleTurnov"]
    v = rows[0]
    assert v["asr_source"] == 1 and v["duration_source"] == 1  # ClassLabel: whisperx, asr_last_end
    assert v["num_asr_segments"] == 33  # the real transcript's 33 segments, all speech
    slug = inputs["tasty_slugs"][v["recipe_ids"][0] - 1000]
    assert "apple" in slug
    (seg,) = v["segments"]
    assert seg["asr_text"].startswith("First of all, combine the apple cubes, lemon juice")
    assert seg["text"].startswith("In a large bowl, combine the apple slices, lemon juice")
    assert seg["similarity"] >= 0.75 and seg["recipe_id"] == v["recipe_ids"][0]
