"""HT-Step ground truth, taxonomy and predictions (docs/evaluation.md), and the per-video
prediction loading shared by the grounding protocols (docs/evaluation.md).

Ground truth of step grounding (R@1): the list of records ``{video_uid, video_duration, activity, variation,
step_headline[], clips[].annotations[].language_queries[{clip_start_sec, clip_end_sec, query, step}]}``.
Ground truth of article grounding (mAP): the official schema ``{vid: {subset, activity, variation, duration,
annotations: [{segment: [s, e], id, label, partial}]}}`` (the R@1 record list is also accepted; it has no subset).
Taxonomy: ``taxonomy.csv`` (global_step_index, activity, step_index, variation, ...). Article-grounding predictions:
CSV ``[index,]video-id,t-start,t-end,label,score``.

Per-video predictions (:func:`load_per_video_predictions`): a JSON object ``{vid: value}``, a directory of
``<vid>.npy`` score matrices, or one ``.npz`` archive with one matrix per video id. A bad ground-truth file is an
:class:`EvalError` naming the file and the video; bad prediction rows are counted, named warnings.
"""

from __future__ import annotations

import csv
import math
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.common import (
    MAX_INPUT_BYTES,
    csv_field_cap,
    finite_number,
    load_json,
    match_ids,
)
from eval.metrics.grounding import nan_argmax, times_to_slots
from eval.registry import EvalError, Warnings

__all__ = [
    "DetectionRows",
    "MapVideo",
    "StepPrediction",
    "StepVideo",
    "Taxonomy",
    "as_matrix",
    "as_times",
    "iter_language_queries",
    "load_per_video_predictions",
    "match_predictions",
    "read_detection_csv",
    "read_map_ground_truth",
    "read_step_ground_truth",
    "read_taxonomy",
    "resolve_step_prediction",
]


# --------------------------------------------------------------------------------------------------------------------
# per-video predictions (shared by htm_align, htstep_r1 and crosstask)


def _load_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise EvalError(f"predictions file {path} is not a readable .npy array: {exc}") from None
    if not isinstance(arr, np.ndarray):
        raise EvalError(f"predictions file {path} does not hold one array")
    return arr


def load_per_video_predictions(path: Path, what: str = "predictions") -> dict[str, Any]:
    """``{video_id: value}`` from a JSON object, a directory of ``<vid>.npy`` or an ``.npz`` archive.

    JSON values are returned as parsed (lists / objects); arrays are returned as numpy arrays. A wrong top-level layout
    (not an object), an empty directory or an unreadable array is an :class:`EvalError` naming the file.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".npy" and p.is_file() and not p.name.startswith("."))
        if not files:
            raise EvalError(f"{what} directory {path} holds no <video_id>.npy file")
        return {p.stem: _load_npy(p) for p in files}
    if not path.is_file():
        raise EvalError(f"{what} file not found: {path}")
    if path.suffix == ".npz":
        if path.stat().st_size > MAX_INPUT_BYTES:
            raise EvalError(f"{what} file {path} is above the {MAX_INPUT_BYTES}-byte cap")
        try:
            with np.load(path, allow_pickle=False) as archive:
                return {key: archive[key] for key in archive.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise EvalError(f"{what} file {path} is not a readable .npz archive: {exc}") from None
    if path.suffix == ".npy":
        raise EvalError(f"{what} file {path}: a single .npy has no video id; pass a directory of <video_id>.npy")
    data = load_json(path, what)
    if not isinstance(data, dict):
        raise EvalError(
            f"{what} file {path}: expected a JSON object {{video_id: ...}} at the top level, got {type(data).__name__}"
        )
    return data


def match_predictions(
    gt_ids: list[str], preds: dict[str, Any], warnings: Warnings, what: str = "predictions"
) -> dict[str, Any]:
    """Prediction values keyed by ground-truth id (exact id first, else ``v_`` toggled).

    Unknown ids are an ``unknown_video`` warning; two prediction ids resolving to one video keep the exact one
    (``duplicate_video`` warning).
    """
    mapping = match_ids(gt_ids, preds.keys())
    out: dict[str, Any] = {}
    for pid, value in preds.items():
        gid = mapping.get(pid)
        if gid is None:
            warnings.add("unknown_video", f"{what}: video {pid!r} is not in the ground truth; ignored")
            continue
        if gid in out:
            warnings.add("duplicate_video", f"{what}: {pid!r} and {gid!r} name the same video; kept the exact id")
            if pid != gid:
                continue
        out[gid] = value
    return out


def as_matrix(value: Any, where: str) -> np.ndarray | None:
    """A 2-D float matrix from a nested list or an array (JSON ``null`` -> NaN); ``None`` if ``value`` is not 2-D-like.

    A ragged or non-numeric nested list is an :class:`EvalError` naming ``where``.
    """
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, list) and value and all(isinstance(r, (list, tuple)) for r in value):
        try:
            arr = np.array(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise EvalError(f"{where}: score matrix is ragged or not numeric ({exc})") from None
    else:
        return None
    if arr.ndim != 2:
        raise EvalError(f"{where}: expected a 2-D score matrix, got shape {tuple(arr.shape)}")
    if not np.issubdtype(arr.dtype, np.number) and arr.dtype != np.bool_:
        raise EvalError(f"{where}: score matrix of dtype {arr.dtype} is not numeric")
    return arr.astype(np.float64, copy=False)


def as_times(value: Any, where: str) -> np.ndarray | None:
    """A 1-D float vector of seconds from a flat list (``null`` -> NaN); ``None`` if ``value`` is not a flat list."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value.astype(np.float64)
    if not isinstance(value, list) or any(isinstance(v, (list, tuple, dict)) for v in value):
        return None
    out = np.empty(len(value), dtype=np.float64)
    for i, v in enumerate(value):
        if v is None:
            out[i] = math.nan
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[i] = float(v)
        else:
            raise EvalError(f"{where}: entry {i} is {v!r}, not a number of seconds")
    return out


# --------------------------------------------------------------------------------------------------------------------
# step grounding ground truth (HT-Step R@1 records; CrossTask reuses StepVideo)


@dataclass(frozen=True)
class StepVideo:
    """One video of a step-grounding benchmark (docs/evaluation.md).

    ``steps`` are the K candidate step texts in column order; per GT segment: ``cols`` (its column), ``step_ids`` (the
    global step index for HT-Step, the column for CrossTask), ``starts`` / ``ends`` in seconds. ``group`` is the
    HT-Step activity or the CrossTask task id; ``duration`` is ``None`` when the source has none.
    """

    video_id: str
    group: str
    duration: float | None
    steps: tuple[str, ...]
    cols: np.ndarray
    step_ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    variation: str | None = None

    @property
    def n_slots(self) -> int | None:
        """``T = ceil(duration)``, or ``None`` when the duration is unknown."""
        return None if self.duration is None else max(1, math.ceil(self.duration))


def iter_language_queries(record: dict[str, Any], where: str) -> Iterator[dict[str, Any]]:
    """Every ``clips[].annotations[].language_queries[]`` entry of one record (the HT-Step and CrossTask fixtures'
    layout)."""
    clips = record.get("clips")
    if not isinstance(clips, list):
        raise EvalError(f"{where}: 'clips' must be a list")
    for clip in clips:
        annotations = clip.get("annotations") if isinstance(clip, dict) else None
        if not isinstance(annotations, list):
            raise EvalError(f"{where}: each clip needs an 'annotations' list")
        for ann in annotations:
            queries = ann.get("language_queries") if isinstance(ann, dict) else None
            if not isinstance(queries, list):
                raise EvalError(f"{where}: each annotation needs a 'language_queries' list")
            for q in queries:
                if not isinstance(q, dict):
                    raise EvalError(f"{where}: a language query is not an object")
                yield q


def iter_video_records(data: list, path: Path) -> Iterator[tuple[dict, str, str, float]]:
    """``(record, video_uid, where, video_duration)`` of a ground-truth record list (HT-Step R@1 and CrossTask
    layouts); a record that is not an object, lacks a ``video_uid``, repeats one or has no positive duration is an
    :class:`EvalError` naming the file and the video."""
    seen: set[str] = set()
    for n, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise EvalError(f"ground-truth file {path}: record {n} is not an object")
        vid = rec.get("video_uid")
        if not isinstance(vid, str) or not vid:
            raise EvalError(f"ground-truth file {path}: record {n} has no 'video_uid'")
        where = f"ground-truth file {path}, video {vid}"
        if vid in seen:
            raise EvalError(f"{where}: listed twice")
        seen.add(vid)
        duration = finite_number(rec.get("video_duration"), f"{where}, video_duration")
        if duration <= 0:
            raise EvalError(f"{where}: video_duration {duration} is not positive")
        yield rec, vid, where, duration


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


# --------------------------------------------------------------------------------------------------------------------
# step-grounding predictions of one video (HT-Step R@1 and CrossTask)


@dataclass(frozen=True)
class StepPrediction:
    """One video's step-grounding prediction resolved to slots (docs/evaluation.md).

    Either ``slots`` (one per column, -1 = no prediction) or ``slots_by_id`` (global step index -> slot, HT-Step's
    ``{global_step_index: seconds}`` layout). ``n_slots`` is T: the matrix rows, else ``ceil(duration)`` (``None``
    when the duration is unknown).
    """

    n_slots: int | None
    slots: np.ndarray | None = None
    slots_by_id: dict[int, int] | None = None


def _step_id_times(value: dict[Any, Any], where: str) -> tuple[list[int], np.ndarray]:
    ids: list[int] = []
    times = np.empty(len(value), dtype=np.float64)
    for i, (key, sec) in enumerate(value.items()):
        try:
            ids.append(int(key))
        except (TypeError, ValueError):
            raise EvalError(f"{where}: key {key!r} is not a global_step_index") from None
        if sec is None:
            times[i] = math.nan
        elif isinstance(sec, (int, float)) and not isinstance(sec, bool):
            times[i] = float(sec)
        else:
            raise EvalError(f"{where}: step {key}: {sec!r} is not a number of seconds")
    return ids, times


def resolve_step_prediction(
    video: StepVideo,
    value: Any,
    where: str,
    warnings: Warnings,
    *,
    allow_step_ids: bool = False,
    reject_multi_one: bool = False,
) -> StepPrediction:
    """Turn one video's prediction value into slots (docs/evaluation.md).

    - ``[seconds per column]``: slot ``floor(p)`` clamped to ``[0, T-1]``, T = ``ceil(duration)`` (``time_clamped``
      warning); ``null`` / NaN = no prediction (``missing_step`` warning, a miss);
    - ``{global_step_index: seconds}`` (``allow_step_ids``, HT-Step): the same per global step;
    - a ``[T, K]`` score matrix: argmax over time per column (ties to the earliest slot, NaN never wins; an all-NaN
      column is no prediction, ``all_nan_column``). With ``reject_multi_one`` a 0/1 matrix with several 1s in a column
      is an :class:`EvalError`; a 0/1 column without a 1 is no prediction.

    A wrong number of columns or entries is an :class:`EvalError` naming ``where``.
    """
    n_cols = len(video.steps)
    if isinstance(value, dict):
        if not allow_step_ids:
            raise EvalError(f"{where}: expected a list of seconds per step or a [T, K] score matrix, got an object")
        ids, times = _step_id_times(value, where)
        # a NaN time is dropped here; the annotated steps left without a slot are counted when scoring
        slots, valid, _ = _slots_for(video, times, where, warnings, warn_missing=False)
        return StepPrediction(
            n_slots=video.n_slots, slots_by_id={i: int(t) for i, t, ok in zip(ids, slots, valid) if ok}
        )
    matrix = as_matrix(value, where)
    if matrix is not None:
        if matrix.shape[1] != n_cols:
            raise EvalError(f"{where}: score matrix has {matrix.shape[1]} columns for {n_cols} steps ([T, K])")
        if matrix.shape[0] == 0:
            raise EvalError(f"{where}: score matrix has no time row")
        slots, all_nan = nan_argmax(matrix, axis=0)
        slots = np.where(all_nan, -1, slots)
        if all_nan.any():
            warnings.add("all_nan_column", f"{where}: {int(all_nan.sum())} all-NaN column(s): no prediction (miss)",
                         n=int(all_nan.sum()))
        if reject_multi_one:
            finite = matrix[~np.isnan(matrix)]
            if finite.size and np.isin(finite, (0.0, 1.0)).all():
                ones = np.nansum(matrix == 1.0, axis=0)
                if (ones > 1).any():
                    k = int(np.flatnonzero(ones > 1)[0])
                    raise EvalError(
                        f"{where}: 0/1 prediction matrix with {int(ones[k])} ones in column {k}; one predicted slot "
                        "per step is allowed (recall could exceed 1)"
                    )
                empty = (ones == 0) & ~all_nan
                if empty.any():
                    warnings.add("empty_column", f"{where}: {int(empty.sum())} 0/1 column(s) without a 1: no "
                                 "prediction (miss)", n=int(empty.sum()))
                    slots = np.where(empty, -1, slots)
        expected = video.n_slots
        if expected is not None and abs(matrix.shape[0] - expected) > 1:
            warnings.add("matrix_length", f"{where}: {matrix.shape[0]} rows for a {video.duration}-s video "
                         f"(ceil = {expected}); T = rows")
        return StepPrediction(n_slots=int(matrix.shape[0]), slots=slots)
    times = as_times(value, where)
    if times is None:
        raise EvalError(f"{where}: expected a list of seconds per step or a [T, K] score matrix")
    if times.size != n_cols:
        raise EvalError(f"{where}: {times.size} predicted times for {n_cols} steps")
    slots, valid, _ = _slots_for(video, times, where, warnings)
    return StepPrediction(n_slots=video.n_slots, slots=np.where(valid, slots, -1))


def _slots_for(
    video: StepVideo, times: np.ndarray, where: str, warnings: Warnings, warn_missing: bool = True
) -> tuple[np.ndarray, np.ndarray, int]:
    """Seconds -> slots for one video, with the ``time_clamped`` / ``missing_step`` warnings (docs/evaluation.md)."""
    slots, valid, n_clamped = times_to_slots(times, video.n_slots)
    if n_clamped:
        limit = f"[0, {video.n_slots - 1}]" if video.n_slots is not None else "[0, ...)"
        warnings.add("time_clamped", f"{where}: {n_clamped} time(s) outside the video clamped to slots {limit}",
                     n=n_clamped)
    n_bad = int((~valid).sum())
    if n_bad and warn_missing:
        warnings.add("missing_step", f"{where}: {n_bad} step(s) without a finite time: no prediction (miss)", n=n_bad)
    return slots, valid, n_clamped
