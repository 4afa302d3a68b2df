"""MARC video recipe candidates: ``video_candidates.jsonl`` (docs/corpora/marc.md).

One line per search result ``{"dish_id", "query", "rank", "video_id", "title"}`` (query = dish name + " recipe",
produced outside the toolkit). Malformed lines are named drops (``malformed_candidate``); a video listed twice for one
dish keeps its best rank (``duplicate_candidate``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..core.records import Drop
from .howto100m import iter_jsonl_records
from .transcripts import is_valid_video_id

STAGE = "video_candidates"


@dataclass(frozen=True)
class Candidate:
    dish_id: str
    rank: int
    video_id: str
    title: str
    query: str


def read_video_candidates(path: str | Path) -> tuple[dict[str, list[Candidate]], list[Drop]]:
    """Candidates per dish in rank order (ties by video id), and the drops of unusable lines."""
    by_dish: dict[str, dict[str, Candidate]] = defaultdict(dict)
    drops: list[Drop] = []
    for rec in iter_jsonl_records(path):
        where = f"{Path(path).name}:{rec.line_no}"
        obj = rec.value
        if obj is None or not isinstance(obj, dict):
            drops.append(Drop(where, STAGE, "malformed_candidate", rec.problem or "not a JSON object"))
            continue
        dish, vid, rank = obj.get("dish_id"), obj.get("video_id"), obj.get("rank")
        if not isinstance(dish, str) or not dish or not is_valid_video_id(vid) \
                or isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            drops.append(Drop(where, STAGE, "malformed_candidate", "needs dish_id, a valid video_id and an int rank"))
            continue
        cand = Candidate(dish, rank, str(vid), str(obj.get("title") or ""), str(obj.get("query") or ""))
        old = by_dish[dish].get(cand.video_id)
        if old is not None:
            drops.append(Drop(f"{dish}:{cand.video_id}", STAGE, "duplicate_candidate", f"ranks {old.rank}, {rank}"))
            if rank >= old.rank:
                continue
        by_dish[dish][cand.video_id] = cand
    ordered = {d: sorted(c.values(), key=lambda c: (c.rank, c.video_id)) for d, c in by_dish.items()}
    return ordered, drops


def pick_videos(candidates: list[Candidate], wanted: int, usable: set[str]) -> tuple[list[Candidate], bool]:
    """The first ``wanted`` candidates in rank order that have a usable transcript (docs/corpora/marc.md, Pipeline step
    5); the flag says the dish got fewer than wanted (counter ``videos_short``)."""
    picked = [c for c in candidates if c.video_id in usable][:wanted]
    return picked, len(picked) < wanted
