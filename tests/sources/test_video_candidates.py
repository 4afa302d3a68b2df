"""builders.sources.video_candidates: MARC video candidates per dish (marc.md §2.3, §3.5)."""

from __future__ import annotations

import json

from builders.sources.video_candidates import pick_videos, read_video_candidates


def test_read_and_pick(tmp_path):
    lines = [
        {"dish_id": "banana_bread", "query": "banana bread recipe", "rank": 2, "video_id": "bbbbbbbbbbb", "title": "B"},
        {"dish_id": "banana_bread", "query": "banana bread recipe", "rank": 0, "video_id": "aaaaaaaaaaa", "title": "A"},
        {"dish_id": "banana_bread", "query": "banana bread recipe", "rank": 1, "video_id": "ccccccccccc", "title": "C"},
        {"dish_id": "banana_bread", "rank": 5, "video_id": "aaaaaaaaaaa"},          # listed twice: best rank kept
        {"dish_id": "corn_bread", "rank": "x", "video_id": "ddddddddddd"},         # malformed rank
        {"dish_id": "corn_bread", "rank": 0, "video_id": "../../etc/pwd"},         # not a video id
    ]
    path = tmp_path / "video_candidates.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n")
    cands, drops = read_video_candidates(path)
    assert [c.video_id for c in cands["banana_bread"]] == ["aaaaaaaaaaa", "ccccccccccc", "bbbbbbbbbbb"]
    assert cands["banana_bread"][0].rank == 0 and "corn_bread" not in cands
    assert sorted(d.reason for d in drops) == ["duplicate_candidate"] + ["malformed_candidate"] * 3
    picked, short = pick_videos(cands["banana_bread"], 2, usable={"bbbbbbbbbbb", "ccccccccccc"})
    assert [c.video_id for c in picked] == ["ccccccccccc", "bbbbbbbbbbb"] and not short
    picked, short = pick_videos(cands["banana_bread"], 3, usable={"aaaaaaaaaaa"})
    assert len(picked) == 1 and short
