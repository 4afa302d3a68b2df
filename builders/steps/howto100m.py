"""HowTo100M metadata as a source (Miech et al., ICCV 2019): ``HowTo100M_v1.csv`` joined with the task names, and
optionally the YouTube titles and durations (docs/corpora/sieve_swap.md, Inputs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..core.records import Count, Drop, Row
from ..core.step import Source, input_path
from ..sources import howto100m

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
