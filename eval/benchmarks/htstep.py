"""HT-Step ground truth, taxonomy and predictions (docs/evaluation.md).

Ground truth of step grounding (R@1): the list of records ``{video_uid, video_duration, activity, variation,
step_headline[], clips[].annotations[].language_queries[{clip_start_sec, clip_end_sec, query, step}]}``.
Ground truth of article grounding (mAP): the official schema ``{vid: {subset, activity, variation, duration,
annotations: [{segment: [s, e], id, label, partial}]}}`` (the R@1 record list is also accepted; it has no subset).
Taxonomy: ``taxonomy.csv`` (global_step_index, activity, step_index, variation, ...). Article-grounding predictions:
CSV ``[index,]video-id,t-start,t-end,label,score``.

The step-grounding video and prediction (:class:`~eval.benchmarks.step_grounding.StepVideo`, shared with CrossTask)
are in :mod:`eval.benchmarks.step_grounding`; the per-video prediction containers (shared with HTM-Align) in
:mod:`eval.benchmarks.predictions`. A bad ground-truth file is an :class:`EvalError` naming the file and the video; bad
prediction rows are counted, named warnings.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.common import (
    MAX_INPUT_BYTES,
    csv_field_cap,
    finite_number,
    load_json,
)
from eval.benchmarks.step_grounding import StepVideo, iter_language_queries, iter_video_records
from eval.registry import EvalError, Warnings

__all__ = [
    "DetectionRows",
    "MapVideo",
    "Taxonomy",
    "read_detection_csv",
    "read_map_ground_truth",
    "read_step_ground_truth",
    "read_taxonomy",
]


def read_step_ground_truth(path: Path) -> list[StepVideo]:
    """The HT-Step R@1 record list (docs/evaluation.md); GT segments map to the LAST position of their ``query`` in
    ``step_headline`` (the reference's text lookup); ``step_ids`` keep the global step index."""
    path = Path(path)
    data = load_json(path, "ground-truth")
    if isinstance(data, dict):
        raise EvalError(
            f"ground-truth file {path}: expected the HT-Step record list [{{video_uid, video_duration, step_headline, "
            f"clips}}, ...]; this is an object (the official-schema file is read by htstep_map, not htstep_r1)"
        )
    if not isinstance(data, list):
        raise EvalError(f"ground-truth file {path}: expected a list of video records")
    videos: list[StepVideo] = []
    for rec, vid, where, duration in iter_video_records(data, path):
        headlines = rec.get("step_headline")
        if not isinstance(headlines, list) or not all(isinstance(h, str) for h in headlines):
            raise EvalError(f"{where}: 'step_headline' must be a list of strings")
        last_pos = {h: k for k, h in enumerate(headlines)}  # duplicates: last position wins (as the reference)
        cols, ids, starts, ends = [], [], [], []
        for q in iter_language_queries(rec, where):
            query = q.get("query")
            if query not in last_pos:
                raise EvalError(f"{where}: query {query!r} is not one of its step_headline entries")
            step = q.get("step")
            if isinstance(step, bool) or not isinstance(step, int):
                raise EvalError(f"{where}: query {query!r} has no integer 'step' (global_step_index)")
            cols.append(last_pos[query])
            ids.append(step)
            starts.append(finite_number(q.get("clip_start_sec"), f"{where}, clip_start_sec"))
            ends.append(finite_number(q.get("clip_end_sec"), f"{where}, clip_end_sec"))
        variation = rec.get("variation")
        videos.append(
            StepVideo(
                video_id=vid,
                group=str(rec.get("activity", "")),
                duration=duration,
                steps=tuple(headlines),
                cols=np.asarray(cols, dtype=np.int64),
                step_ids=np.asarray(ids, dtype=np.int64),
                starts=np.asarray(starts, dtype=np.float64),
                ends=np.asarray(ends, dtype=np.float64),
                variation=variation if isinstance(variation, str) else None,
            )
        )
    if not videos:
        raise EvalError(f"ground-truth file {path} holds no video")
    return videos


# --------------------------------------------------------------------------------------------------------------------
# article grounding (mAP): official-schema ground truth, taxonomy, prediction CSV


@dataclass(frozen=True)
class Taxonomy:
    """``taxonomy.csv``: the activity and variation of every global step, and each article's step set."""

    activity: dict[int, str]
    variation: dict[int, str]
    article_steps: dict[tuple[str, str], frozenset[int]]


def read_taxonomy(path: Path) -> Taxonomy:
    """Parse ``taxonomy.csv`` (columns global_step_index, activity, variation, ...)."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"taxonomy file not found: {path}")
    activity: dict[int, str] = {}
    variation: dict[int, str] = {}
    articles: dict[tuple[str, str], set[int]] = {}
    try:
        with csv_field_cap(), path.open("r", encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = {"global_step_index", "activity", "variation"} - set(reader.fieldnames or ())
            if missing:
                raise EvalError(f"taxonomy file {path}: missing column(s) {', '.join(sorted(missing))}")
            for line, row in enumerate(reader, start=2):
                try:
                    step = int(row["global_step_index"])
                except (TypeError, ValueError):
                    raise EvalError(
                        f"taxonomy file {path}, line {line}: global_step_index {row['global_step_index']!r} "
                        "is not an integer"
                    ) from None
                if step in activity:
                    raise EvalError(f"taxonomy file {path}, line {line}: global_step_index {step} listed twice")
                act, var = row["activity"] or "", row["variation"] or ""
                activity[step] = act
                variation[step] = var
                articles.setdefault((act, var), set()).add(step)
    except UnicodeDecodeError as exc:
        raise EvalError(f"taxonomy file {path} is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        raise EvalError(f"taxonomy file {path} is not valid CSV: {exc}") from None
    if not activity:
        raise EvalError(f"taxonomy file {path} lists no step")
    return Taxonomy(activity, variation, {k: frozenset(v) for k, v in articles.items()})


@dataclass(frozen=True)
class MapVideo:
    """One ground-truth video of article grounding: raw segments and step ids in file order."""

    video_id: str
    subset: str | None
    activity: str
    variation: str | None
    segments: np.ndarray  # [n, 2]
    ids: list[int]


def _map_video_from_official(vid: str, rec: Any, where: str) -> MapVideo:
    if not isinstance(rec, dict):
        raise EvalError(f"{where}: expected an object {{subset, activity, annotations}}")
    subset = rec.get("subset")
    if not isinstance(subset, str):
        raise EvalError(f"{where}: no 'subset'")
    annotations = rec.get("annotations")
    if not isinstance(annotations, list):
        raise EvalError(f"{where}: 'annotations' must be a list")
    segs, ids = [], []
    for a in annotations:
        seg = a.get("segment") if isinstance(a, dict) else None
        if not isinstance(seg, (list, tuple)) or len(seg) != 2:
            raise EvalError(f"{where}: an annotation has no [start, end] 'segment'")
        step = a.get("id")
        try:
            step_int = int(step)
        except (TypeError, ValueError):
            raise EvalError(f"{where}: annotation id {step!r} is not an integer step index") from None
        if isinstance(step, bool) or float(step) != step_int:
            raise EvalError(f"{where}: annotation id {step!r} is not an integer step index")
        segs.append((finite_number(seg[0], f"{where}, segment"), finite_number(seg[1], f"{where}, segment")))
        ids.append(step_int)
    var = rec.get("variation")
    return MapVideo(
        video_id=vid,
        subset=subset,
        activity=str(rec.get("activity", "")),
        variation=var if isinstance(var, str) else None,
        segments=np.asarray(segs, dtype=np.float64).reshape(-1, 2),
        ids=ids,
    )


def read_map_ground_truth(path: Path) -> list[MapVideo]:
    """Article-grounding ground truth (docs/evaluation.md, ``htstep_map``): the official-schema object, or the R@1
    record list (no subset)."""
    path = Path(path)
    data = load_json(path, "ground-truth")
    videos: list[MapVideo] = []
    if isinstance(data, dict):
        for vid, rec in data.items():
            videos.append(_map_video_from_official(vid, rec, f"ground-truth file {path}, video {vid}"))
    elif isinstance(data, list):
        for sv in read_step_ground_truth(path):
            videos.append(
                MapVideo(
                    video_id=sv.video_id,
                    subset=None,
                    activity=sv.group,
                    variation=sv.variation,
                    segments=np.stack([sv.starts, sv.ends], axis=1) if sv.starts.size else np.zeros((0, 2)),
                    ids=[int(i) for i in sv.step_ids],
                )
            )
    else:
        raise EvalError(f"ground-truth file {path}: expected an object {{video_id: {{subset, annotations}}}}")
    if not videos:
        raise EvalError(f"ground-truth file {path} holds no video")
    return videos


@dataclass(frozen=True)
class DetectionRows:
    """Valid prediction rows of the article-grounding CSV, in file order."""

    video: list[str]
    start: np.ndarray
    end: np.ndarray
    label: list[int]
    score: np.ndarray


_CSV_COLUMNS = ("video-id", "t-start", "t-end", "label", "score")


def read_detection_csv(path: Path, warnings: Warnings) -> DetectionRows:
    """The article-grounding prediction CSV ``[index,]video-id,t-start,t-end,label,score``.

    Missing columns, an unreadable file or a file without one valid row are an :class:`EvalError`; a row with a
    non-numeric or non-finite value, a non-integer label or ``t-end < t-start`` is dropped with an ``invalid_row``
    warning.
    """
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"predictions file not found: {path}")
    if path.stat().st_size > MAX_INPUT_BYTES:
        raise EvalError(f"predictions file {path} is above the {MAX_INPUT_BYTES}-byte cap")
    video: list[str] = []
    start: list[float] = []
    end: list[float] = []
    label: list[int] = []
    score: list[float] = []
    n_bad_before = warnings.counts.get("invalid_row", 0)
    try:
        with csv_field_cap(), path.open("r", encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            fields = [c.strip() for c in (reader.fieldnames or [])]
            missing = [c for c in _CSV_COLUMNS if c not in fields]
            if missing:
                raise EvalError(
                    f"predictions file {path}: missing column(s) {', '.join(missing)} "
                    f"(expected a CSV header with {','.join(_CSV_COLUMNS)})"
                )
            reader.fieldnames = fields
            for line, row in enumerate(reader, start=2):
                try:
                    vid = (row["video-id"] or "").strip()
                    s, e, sc = float(row["t-start"]), float(row["t-end"]), float(row["score"])
                    lab_f = float(row["label"])
                except (TypeError, ValueError):
                    warnings.add("invalid_row", f"{path}, line {line}: a value is missing or not a number; dropped")
                    continue
                if not vid:
                    warnings.add("invalid_row", f"{path}, line {line}: empty video-id; dropped")
                    continue
                if not (math.isfinite(s) and math.isfinite(e) and math.isfinite(sc)):
                    warnings.add("invalid_row", f"{path}, line {line}: non-finite time or score; dropped")
                    continue
                if not math.isfinite(lab_f) or lab_f != int(lab_f):
                    warnings.add("invalid_row", f"{path}, line {line}: label {row['label']!r} is not a step index")
                    continue
                if e < s:
                    warnings.add("invalid_row", f"{path}, line {line}: t-end {e} < t-start {s}; dropped")
                    continue
                video.append(vid)
                start.append(s)
                end.append(e)
                label.append(int(lab_f))
                score.append(sc)
    except UnicodeDecodeError as exc:
        raise EvalError(f"predictions file {path} is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        raise EvalError(f"predictions file {path} is not valid CSV: {exc}") from None
    n_bad = warnings.counts.get("invalid_row", 0) - n_bad_before
    if n_bad and not video:
        raise EvalError(f"predictions file {path}: none of its {n_bad} rows is valid (see the invalid_row warnings)")
    return DetectionRows(
        video=video,
        start=np.asarray(start, dtype=np.float64),
        end=np.asarray(end, dtype=np.float64),
        label=label,
        score=np.asarray(score, dtype=np.float64),
    )
