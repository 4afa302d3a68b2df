"""Step grounding (docs/evaluation.md; HT-Step R@1 and CrossTask): one ground-truth video (:class:`StepVideo`), the
records of the HT-Step and CrossTask layouts (:func:`iter_video_records`, :func:`iter_language_queries`), and one
video's prediction resolved to slots (:func:`resolve_step_prediction`). A bad record is an :class:`EvalError` naming
the file and the video; bad prediction values are counted, named warnings.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.common import finite_number
from eval.benchmarks.predictions import as_matrix, as_times
from eval.metrics.grounding import nan_argmax, times_to_slots
from eval.registry import EvalError, Warnings

__all__ = ["StepPrediction", "StepVideo", "iter_language_queries", "iter_video_records", "resolve_step_prediction"]


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
