"""Shared reading helpers: bounded JSON loading and the video-id matching rule (docs/evaluation.md)."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from eval.registry import EvalError

#: refuse input files above this size (bytes); benchmark files are a few MB, predictions at most a few hundred
MAX_INPUT_BYTES = 2 * 1024**3
#: refuse JSON nested deeper than this; every benchmark layout of ``evaluation.md`` needs at most 8 levels, and a
#: deeper document (a "JSON bomb" of 100,000 nested arrays) would exhaust the parser's recursion instead
MAX_JSON_DEPTH = 64
_READ_CHUNK = 16 * 1024 * 1024

# a JSON string, escapes included (an unterminated one runs to the end of the text)
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
# every byte except the four brackets, deleted before the depth count
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (strings skipped), without recursion."""
    brackets = _JSON_STRING.sub("", text).encode("ascii", "ignore").translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1).astype(np.int32)
    return int(np.cumsum(steps).max())


def parse_json_text(text: str, where: str, max_depth: int | None = None) -> Any:
    """Parse one JSON document with the depth cap; anything malformed is an :class:`EvalError` saying ``where``.

    The one JSON parser of ``eval/`` (issue 14: malformed inputs end in a clear error, never a traceback).
    """
    cap = MAX_JSON_DEPTH if max_depth is None else max_depth
    depth = json_depth(text)
    if depth > cap:
        raise EvalError(f"{where}: JSON nested {depth} levels deep, above the cap of {cap} (a malformed or "
                        "hostile file; no benchmark layout nests more than a few levels)")
    try:
        return json.loads(text)
    except RecursionError:  # defensive: the depth cap above keeps well below the interpreter's limit
        raise EvalError(f"{where}: JSON nested too deeply to parse") from None
    except json.JSONDecodeError as exc:
        raise EvalError(f"{where}: not valid JSON ({exc})") from None
    except ValueError as exc:  # e.g. an integer literal longer than Python's 4300-digit conversion limit
        raise EvalError(f"{where}: not valid JSON ({exc})") from None


def read_text_capped(path: Path, what: str, max_bytes: int | None = None) -> str:
    """The UTF-8 text of an input file (a leading BOM dropped); a missing, oversized or undecodable file is an
    :class:`EvalError` naming it."""
    path = Path(path)
    cap = MAX_INPUT_BYTES if max_bytes is None else max_bytes
    if not path.is_file():
        raise EvalError(f"{what} file not found: {path}")
    size = path.stat().st_size
    if size > cap:
        raise EvalError(f"{what} file {path} is {size} bytes, above the {cap}-byte cap")
    try:
        with path.open("rb") as f:
            data = bytearray()
            while len(data) <= cap:  # chunked: f.read(cap + 1) would allocate the whole cap up front
                chunk = f.read(min(_READ_CHUNK, cap + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise EvalError(f"{what} file {path} cannot be read: {exc}") from None
    if len(data) > cap:  # grew since stat (or a special file): still capped
        raise EvalError(f"{what} file {path} is above the {cap}-byte cap")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvalError(f"{what} file {path} is not UTF-8 text: {exc}") from None


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file with the size and depth caps (:data:`MAX_INPUT_BYTES`, :data:`MAX_JSON_DEPTH`); a missing,
    oversized, too deeply nested or malformed file is an :class:`EvalError` naming the file."""
    text = read_text_capped(path, what)
    return parse_json_text(text, f"{what} file {path}")


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


#: the largest CSV field the evaluation readers accept (the csv module's own default, 128 KiB)
MAX_CSV_FIELD = 131072


@contextlib.contextmanager
def csv_field_cap(limit: int = MAX_CSV_FIELD) -> Iterator[None]:
    """Read CSV with a field-size cap of our own: ``csv.field_size_limit`` is process-wide, and a builder in the same
    process may have raised it (``builders.sources.howto100m.raise_csv_field_limit``), which would let an oversized
    field through. The previous limit is restored afterwards."""
    previous = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(previous)
