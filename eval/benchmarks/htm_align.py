"""HTM-Align ground truth and predictions (docs/evaluation.md).

Ground truth ``htm_align.json``: ``{vid: [[alignable 1/0, start_s, end_s, text], ...]}`` (not available offline).
Predictions, per video (see :func:`eval.benchmarks.predictions.load_per_video_predictions` for the containers):

- a ``[N_text, T]`` score matrix, rows in ground-truth order (``<vid>.npy`` in a directory, an ``.npz`` archive, or
  JSON ``{vid: [[...], ...]}``; JSON ``null`` cells are NaN = not scored);
- ``{"pred_time": [seconds per text], "align_score": [float per text]}`` (``align_score`` optional), the output of
  ``python -m builders.nasva.infer``; a flat list ``[seconds per text]`` is read as ``pred_time`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.common import finite_number, load_json
from eval.benchmarks.predictions import as_matrix, as_times
from eval.registry import EvalError

__all__ = ["HtmPrediction", "HtmVideo", "parse_htm_prediction", "read_htm_align"]


@dataclass(frozen=True)
class HtmVideo:
    """One HTM-Align video: per sentence (file order) its alignable flag and window in seconds."""

    video_id: str
    alignable: np.ndarray  # bool [N]
    starts: np.ndarray
    ends: np.ndarray

    @property
    def n_text(self) -> int:
        return int(self.alignable.size)


def read_htm_align(path: Path) -> list[HtmVideo]:
    """Parse ``htm_align.json`` (docs/evaluation.md, ``htm_align``); a malformed row is an :class:`EvalError` naming the
    file, video and row."""
    path = Path(path)
    data = load_json(path, "ground-truth")
    if not isinstance(data, dict):
        raise EvalError(
            f"ground-truth file {path}: expected an object {{video_id: [[alignable, start, end, text], ...]}}, "
            f"got {type(data).__name__}"
        )
    videos: list[HtmVideo] = []
    for vid, rows in data.items():
        where = f"ground-truth file {path}, video {vid}"
        if not isinstance(rows, list):
            raise EvalError(f"{where}: expected a list of [alignable, start, end, text] rows")
        flags, starts, ends = [], [], []
        for i, row in enumerate(rows):
            if not isinstance(row, (list, tuple)) or len(row) < 3:
                raise EvalError(f"{where}, row {i}: expected [alignable, start, end, text], got {row!r}")
            a = row[0]
            if isinstance(a, str) or a not in (0, 1):
                raise EvalError(f"{where}, row {i}: alignable flag {a!r} is not 0/1")
            flags.append(bool(a))
            starts.append(finite_number(row[1], f"{where}, row {i}, start"))
            ends.append(finite_number(row[2], f"{where}, row {i}, end"))
        videos.append(
            HtmVideo(
                video_id=str(vid),
                alignable=np.asarray(flags, dtype=bool),
                starts=np.asarray(starts, dtype=np.float64),
                ends=np.asarray(ends, dtype=np.float64),
            )
        )
    if not videos:
        raise EvalError(f"ground-truth file {path} holds no video")
    return videos


@dataclass(frozen=True)
class HtmPrediction:
    """One video's prediction: either a ``[N, T]`` ``matrix`` or ``times`` (seconds per text); optional ``scores``."""

    matrix: np.ndarray | None = None
    times: np.ndarray | None = None
    scores: np.ndarray | None = None


def _score_vector(value: Any, n_text: int, where: str) -> np.ndarray:
    vec = as_times(value, where)
    if vec is None:
        raise EvalError(f"{where}: 'align_score' must be a flat list of numbers")
    if vec.size != n_text:
        raise EvalError(f"{where}: {vec.size} align_score values for {n_text} sentences")
    return vec


def parse_htm_prediction(value: Any, n_text: int, where: str) -> HtmPrediction:
    """Interpret one video's prediction value; a wrong shape or layout is an :class:`EvalError`."""
    if isinstance(value, dict):
        unknown = set(value) - {"pred_time", "align_score"}
        if "pred_time" not in value:
            raise EvalError(f"{where}: expected {{'pred_time': [...], 'align_score': [...]}}, keys {sorted(value)}")
        if unknown:
            raise EvalError(f"{where}: unknown key(s) {sorted(unknown)} (expected pred_time, align_score)")
        times = as_times(value["pred_time"], where + ", pred_time")
        if times is None:
            raise EvalError(f"{where}: 'pred_time' must be a flat list of seconds")
        if times.size != n_text:
            raise EvalError(f"{where}: {times.size} pred_time values for {n_text} sentences")
        scores = value.get("align_score")
        return HtmPrediction(
            times=times, scores=None if scores is None else _score_vector(scores, n_text, where + ", align_score")
        )
    if isinstance(value, list) and not value and n_text == 0:
        return HtmPrediction(times=np.zeros(0))
    matrix = as_matrix(value, where)
    if matrix is not None:
        if matrix.shape[0] != n_text:
            raise EvalError(f"{where}: score matrix has {matrix.shape[0]} rows for {n_text} sentences ([N_text, T])")
        if matrix.shape[1] == 0:
            raise EvalError(f"{where}: score matrix has no time column")
        return HtmPrediction(matrix=matrix)
    times = as_times(value, where)
    if times is not None:
        if times.size != n_text:
            raise EvalError(f"{where}: {times.size} predicted times for {n_text} sentences")
        return HtmPrediction(times=times)
    raise EvalError(
        f"{where}: expected a [N_text, T] score matrix, a list of seconds, or {{'pred_time', 'align_score'}}; "
        f"got {type(value).__name__}"
    )
