"""Shared reading helpers: bounded JSON loading and the video-id matching rule (``evaluation.md`` §0)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eval.registry import EvalError

#: refuse input files above this size (bytes); benchmark files are a few MB, predictions at most a few hundred
MAX_INPUT_BYTES = 2 * 1024**3


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file; a missing, oversized or malformed file is an :class:`EvalError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"{what} file not found: {path}")
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise EvalError(f"{what} file {path} is {size} bytes, above the {MAX_INPUT_BYTES}-byte cap")
    try:
        with path.open("r", encoding="utf-8") as f:
            return json.load(f)
    except UnicodeDecodeError as exc:
        raise EvalError(f"{what} file {path} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise EvalError(f"{what} file {path} is not valid JSON: {exc}") from None


def alternate_id(video_id: str) -> str:
    """The id with a leading ``v_`` removed, or added when absent (PDVC files carry ``v_``; YouCook2's do not)."""
    return video_id[2:] if video_id.startswith("v_") else "v_" + video_id


def match_ids(gt_ids: Iterable[str], other_ids: Iterable[str]) -> dict[str, str]:
    """Map each id of ``other_ids`` to a ground-truth id: exact match first, else the ``v_``-toggled id.

    Ids that match nothing are absent from the result (the caller counts them).
    """
    gt = set(gt_ids)
    mapping: dict[str, str] = {}
    for vid in other_ids:
        if vid in gt:
            mapping[vid] = vid
        else:
            alt = alternate_id(vid)
            if alt in gt:
                mapping[vid] = alt
    return mapping


def read_video_list(path: Path) -> list[str]:
    """One video id per line; blank lines and ``#`` comments skipped; ``recipe_type/vid`` lines keep ``vid``."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"video list not found: {path}")
    ids: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        ids.append(line.rsplit("/", 1)[-1])
    if not ids:
        raise EvalError(f"video list {path} holds no video id")
    return ids


def finite_number(value: Any, where: str) -> float:
    """A JSON number that is finite (booleans refused); otherwise an :class:`EvalError` saying ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise EvalError(f"{where}: expected a finite number, got {value!r}")
    return float(value)
