"""HowTo100M metadata as a source (Miech et al., ICCV 2019): ``HowTo100M_v1.csv`` joined with the task names.

Two listings of the same files, for the two ways the corpora select their videos:

* :class:`HowTo100MSource` (Sieve & Swap): every row of the csv in file order (repeated ids kept, for a later step to
  drop), with optionally the YouTube titles and durations (docs/corpora/sieve_swap.md, Inputs);
* :class:`HowTo100MSelection` (HowToStep): one row a video id in sorted id order, optionally restricted to an id list
  and a category, repeated ids dropped at the source (docs/corpora/howtostep.md, Inputs). Its rows have another shape
  (``task_id`` a string, ``""`` for a video the csv does not hold), the one HowToStep releases.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..core.records import Count, Drop, Row
from ..core.step import Source, input_path
from ..sources import exclusions, howto100m

#: the fields of a metadata row (``builders/sources/howto100m.py``) and of the joins
METADATA_FIELDS: dict[str, Any] = {
    "video_id": str, "category_1": str, "category_2": str, "rank": Any, "task_id": int, "_ord": int,
    "task_name": str, "title": str, "title_source": str, "duration": Any, "duration_source": str}


@dataclass(eq=False)
class HowTo100MSource(Source):
    """One row a video of ``videos``, with its task name (``tasks``, ``task_ids.csv``), title (``titles``; the task
    name when absent, ``title_source`` says which) and duration (``durations``; None when absent, then the transcript's
    last end: ``duration_source``). ``limit``: the first N rows only."""

    name = "read_metadata"
    writes = METADATA_FIELDS
    #: a row holds every value its video gets from these files (metadata, task name, title, duration): an edit is
    #: listed again into the same folder and only the shards whose rows changed are redone downstream
    rows_carry_content = True

    videos: Path | None = input_path()
    tasks: Path | None = input_path()
    titles: Path | None = input_path()
    durations: Path | None = input_path()
    limit: int | None = None

    def read(self) -> Iterator[Row | Drop | Count]:
        tasks: dict[int, str] = {}
        titles: dict[str, str] = {}
        durations: dict[str, float] = {}
        if self.tasks:
            tasks, bad = howto100m.read_task_ids(self.tasks)
            yield from bad
        if self.titles:
            titles, bad = howto100m.read_titles(self.titles)
            yield from bad
        if self.durations:
            durations, bad = howto100m.read_durations(self.durations)
            yield from bad
        n = 0
        for rec in howto100m.read_metadata(self.videos):
            if self.limit is not None and n >= self.limit:
                break
            n += 1
            if isinstance(rec, Drop):
                yield rec
                continue
            vid = rec["video_id"]
            task_name = tasks.get(rec["task_id"])
            if task_name is None:
                yield Count("unknown_task_id")
                task_name = ""
            title = titles.get(vid)
            duration = durations.get(vid)
            yield {
                **rec,
                "task_name": task_name,
                "title": title if title else task_name,
                "title_source": "youtube_title" if title else "task_name",
                "duration": duration,
                "duration_source": "metadata" if duration is not None else "asr_last_end",
            }


#: the fields of a :class:`HowTo100MSelection` row
SELECTION_FIELDS: dict[str, Any] = {"video_id": str, "task_id": str, "task_name": str, "category_1": str,
                                    "category_2": str}


@dataclass(eq=False)
class HowTo100MSelection(Source):
    """HowTo100M metadata (optionally restricted to an id list and a category), task names joined, duplicates dropped
    as ``duplicate_video_id`` (first kept), rows in sorted video-id order (docs/corpora/howtostep.md, Inputs).

    ``video_ids``: the selection (an id list, one a line): ids the csv does not hold get empty metadata, csv rows not
    listed are dropped as ``not_selected``; ``category_1``: keep only this category (``not_in_category``);
    ``limit``: the first N videos in id order (counter ``beyond_limit``)."""

    name = "read_metadata"
    version = "1"
    writes = SELECTION_FIELDS

    videos: Path | None = input_path()
    tasks: Path | None = input_path()
    video_ids: Path | None = input_path()
    category_1: str | None = None
    limit: int | None = None

    def read(self) -> Iterator[Row | Drop | Count]:
        tasks: dict[int, str] = {}
        if self.tasks:
            tasks, bad = howto100m.read_task_ids(self.tasks)
            yield from bad
        wanted: list[str] | None = None
        if self.video_ids:
            wanted = sorted(exclusions.read_exclusion_ids([self.video_ids]))
        rows: dict[str, Row] = {}
        if self.videos:
            for rec in howto100m.read_metadata(self.videos):
                if isinstance(rec, Drop):
                    yield rec
                    continue
                vid = rec["video_id"]
                if vid in rows:
                    yield Drop(vid, self.name, "duplicate_video_id", f"row {rec['_ord']} repeats an earlier row")
                    continue
                if self.category_1 and rec["category_1"] != self.category_1:
                    yield Drop(vid, self.name, "not_in_category", rec["category_1"])
                    continue
                task_id = rec.get("task_id")
                name = tasks.get(task_id, "") if task_id is not None else ""
                if task_id is not None and self.tasks and not name:
                    yield Count("unknown_task_id")
                rows[vid] = {"video_id": vid, "task_id": "" if task_id is None else str(task_id), "task_name": name,
                             "category_1": rec.get("category_1") or "", "category_2": rec.get("category_2") or ""}
        if wanted is not None:
            listed = set(wanted)
            for vid in sorted(set(rows) - listed):
                yield Drop(vid, self.name, "not_selected", "not in --video-ids")
            rows = {v: rows.get(v) or {"video_id": v, "task_id": "", "task_name": "", "category_1": "",
                                       "category_2": ""} for v in wanted}
        for n, vid in enumerate(sorted(rows)):
            if self.limit is not None and n >= self.limit:
                yield Count("beyond_limit", len(rows) - n)
                break
            yield rows[vid]
