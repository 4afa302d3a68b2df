"""The video corpus V of Sieve & Swap: HowTo100M cooking videos under ten minutes, of tasks with at least five of
them, with a clean transcript (Batra et al., ECCV 2024, §4.2 "Source Datasets"; docs/corpora/sieve_swap.md, video
corpus steps 1-5). The metadata source and the transcript loader are shared steps (``builders/steps/``)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core.artefacts import artefact_dir, load_arrays, load_json, save_arrays, save_json
from ...core.fingerprint import hash_obj
from ...core.records import Out, Row
from ...core.step import FitInputs, Step, input_path
from ...ops.text import clean, has_alpha
from ...sources import exclusions


@dataclass(eq=False)
class CookingFilter(Step):
    """Video corpus step 1: keep ``category_1`` in ``cooking_categories`` (paper §4.2: all HowTo100M cooking videos)."""

    name = "cooking_filter"
    id_field = "video_id"
    reads = {"video_id": str, "category_1": str}
    writes = {}

    cooking_categories: list[str]

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            if r["category_1"] in self.cooking_categories:
                out.keep(r)
            else:
                out.drop(r["video_id"], "not_cooking", r["category_1"])


@dataclass(eq=False)
class ExclusionFilter(Step):
    """Video corpus step 2: drop excluded ids (YouCook2, paper supp. E.1) and later duplicate rows of a video id.

    Global stage: the exclusion files (their contents key the cache) and the repeated rows (row -> first row of the
    same id) are written as artefacts ``excluded.json`` and ``repeats.npz``. The lists key ``fit`` only, not the
    stage folder (per-item inputs): the excluded ids are in the fitted state (its digest), which keys every shard, so
    an edited list redoes this stage's shards (a look-up) and later only the videos it moves."""

    name = "exclusion_filter"
    version = "2"
    id_field = "video_id"
    reads = {"video_id": str, "_ord": int}
    writes = {}

    exclude: list[Path] = input_path(per_item=True, default=[])

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        first: dict[str, int] = {}
        ords: list[tuple[str, int]] = []
        for r in inputs.data.rows(["video_id", "_ord"]):
            ords.append((r["video_id"], r["_ord"]))
            first[r["video_id"]] = min(first.get(r["video_id"], r["_ord"]), r["_ord"])
        repeats = sorted((o, first[v]) for v, o in ords if first[v] != o)
        save_arrays(inputs.artefact_dir, "repeats", {"ord": np.asarray([x[0] for x in repeats], np.int64),
                                                     "first": np.asarray([x[1] for x in repeats], np.int64)})
        excluded = sorted(exclusions.read_exclusion_ids(self.exclude))
        save_json(inputs.artefact_dir, "excluded", excluded)
        return {"excluded": len(excluded), "repeated_rows": len(repeats), "digest": hash_obj(excluded, repeats)}

    def setup(self, state: Any) -> None:
        root = artefact_dir(state)
        self.excluded = set(load_json(root, "excluded"))
        a = load_arrays(root, "repeats")
        self.repeat_ords, self.repeat_first = a["ord"], a["first"]

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            vid = r["video_id"]
            j = int(np.searchsorted(self.repeat_ords, r["_ord"]))
            if vid in self.excluded:
                out.drop(vid, "excluded_id")
            elif j < len(self.repeat_ords) and self.repeat_ords[j] == r["_ord"]:
                out.drop(vid, "duplicate_video_row", f"row {r['_ord']} repeats row {int(self.repeat_first[j])}")
            else:
                out.keep(r)


@dataclass(eq=False)
class DurationFilter(Step):
    """Video corpus step 3: keep ``duration <= max_duration_s`` (paper §4.2: "a maximum duration of 10 minutes")."""

    name = "duration_filter"
    id_field = "video_id"
    reads = {"video_id": str, "duration": Any, "duration_source": str}
    writes = {}

    max_duration_s: float

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            d = r["duration"]
            if d is not None and d > self.max_duration_s:
                out.drop(r["video_id"], "too_long", f"{d:.1f} s ({r['duration_source']})")
            else:
                out.keep(r)


@dataclass(eq=False)
class TaskSizeFilter(Step):
    """Video corpus step 4: keep tasks with >= ``min_videos_per_task`` videos surviving steps 1-3 (paper §4.2: "a
    minimum of five videos per cooking category"). The result is the paper's corpus V."""

    name = "task_size_filter"
    id_field = "video_id"
    reads = {"video_id": str, "task_id": int}
    writes = {}

    min_videos_per_task: int

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        counts = Counter(r["task_id"] for r in inputs.data.rows(["task_id"]))
        table = {str(k): v for k, v in sorted(counts.items())}
        save_json(inputs.artefact_dir, "videos_per_task", table)
        return {"tasks": len(counts), "digest": hash_obj(table)}

    def setup(self, state: Any) -> None:
        self.per_task = {int(k): v for k, v in load_json(artefact_dir(state), "videos_per_task").items()}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            n = self.per_task.get(r["task_id"], 0)
            if n < self.min_videos_per_task:
                out.drop(r["video_id"], "small_task", f"task {r['task_id']} has {n} videos")
            else:
                out.keep(r)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(eq=False)
class CleanTranscript(Step):
    """Video corpus step 5: ``clean`` each segment, remove empty / ``end <= start`` / NaN segments (``bad_segment``),
    sort by start, clip ends to the duration; optional English check (off by default: the paper has none)."""

    name = "clean_transcript"
    version = "3"
    id_field = "video_id"
    reads = {"video_id": str, "asr_error": str, "asr_raw": list, "asr_language": Any, "duration": Any}
    writes = {"asr_segments": list, "num_asr_segments": int}
    removes = ("asr_raw", "asr_error", "asr_language")

    require_english: bool = field(default=False)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            if r["asr_error"]:
                reason, _, detail = r["asr_error"].partition(": ")
                out.drop(r["video_id"], reason, detail)
                continue
            segs = []
            bad = 0
            for s in r["asr_raw"]:
                start, end, text = s["start"], s["end"], clean(s["text"] or "")
                # step 5 / docs/reason-codes.md: empty text after `clean` (e.g. only "[Music]"), garbled text (no
                # letter), NaN times or end <= start -> the segment is removed and counted
                if not (_finite(start) and _finite(end)) or end <= start or not text or not has_alpha(text):
                    bad += 1
                    continue
                segs.append({"start": float(start), "end": float(end), "text": text})
            out.count("bad_segment", bad)
            segs.sort(key=lambda s: (s["start"], s["end"]))
            duration = r["duration"]
            if duration is not None:
                inside = [{**s, "end": min(s["end"], duration)} for s in segs if s["start"] < duration]
                out.count("segment_after_duration", len(segs) - len(inside))
                segs = inside
            if not segs:
                out.drop(r["video_id"], "empty_transcript", f"{len(r['asr_raw'])} raw segments")
                continue
            if self.require_english:
                lang = r["asr_language"]
                if not lang:
                    import py3langid

                    lang = py3langid.classify(" ".join(s["text"] for s in segs))[0]
                if lang != "en":
                    out.drop(r["video_id"], "non_english_transcript", f"language {lang}")
                    continue
            row = {k: v for k, v in r.items() if k not in ("asr_raw", "asr_error", "asr_language")}
            out.keep({**row, "asr_segments": segs, "num_asr_segments": len(segs)})
