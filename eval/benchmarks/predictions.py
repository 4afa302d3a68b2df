"""Per-video predictions of the grounding protocols (docs/evaluation.md; shared by ``htm_align``, ``htstep_r1`` and
``crosstask``): a JSON object ``{vid: value}``, a directory of ``<vid>.npy`` score matrices, or one ``.npz`` archive
with one matrix per video id (:func:`load_per_video_predictions`), matched to the ground-truth ids
(:func:`match_predictions`), and the value shapes (:func:`as_matrix`, :func:`as_times`). A bad container is an
:class:`EvalError` naming the file; bad prediction ids are counted, named warnings.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.common import MAX_INPUT_BYTES, load_json, match_ids
from eval.registry import EvalError, Warnings

__all__ = ["as_matrix", "as_times", "load_per_video_predictions", "match_predictions"]


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
