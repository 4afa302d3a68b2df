"""The ShowHowTo video manifest and its transcripts (docs/corpora/showhowto.md).

Manifest: CSV (header) or JSONL, one row per video: ``video_id`` (YouTube id, 11 characters of ``[A-Za-z0-9_-]``),
``video_path`` (a local file; relative paths are read from the manifest's folder), ``title`` (may be empty) and an
optional ``transcript_path``. A bad row is a named drop (``malformed_manifest_row``, ``invalid_video_id``), a repeated
id is processed once (first row) and the later rows are dropped as ``duplicate_video_id``: rows in = rows out + drops.
A manifest without the ``video_id`` / ``video_path`` columns, empty or unreadable, is a whole-file error (exit 2).

Transcript: WhisperX JSON ``{"segments": [{"start", "end", "text", ...}], "language"}`` or a bare segment list
``[{"start", "end", "text"}]``; segment text is kept verbatim (leading spaces included, the prompts quote it as is).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.records import Drop, Row
from .howto100m import is_jsonl, iter_csv_records, iter_jsonl_records, require_file
from .narrations import load_transcript_json
from .transcripts import MALFORMED_TRANSCRIPT, TranscriptError, whisperx_segment

STAGE = "read_manifest"
VIDEO_ID_RE = re.compile(r"[A-Za-z0-9_-]{11}")
MAX_TITLE_CHARS = 4096
COLUMNS = ("video_id", "video_path", "title", "transcript_path")


class ManifestError(InputError):
    """A manifest that cannot be read at all (the build exits 2 before any work)."""


def _path(base: Path, value: Any) -> str:
    text = str(value or "").strip()
    if not text:
        return ""
    p = Path(text)
    return str(p if p.is_absolute() else base / p)


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """(line, row dict or None, problem) for each record of a CSV or JSONL manifest."""
    if is_jsonl(path):
        for rec in iter_jsonl_records(path):
            if rec.problem:
                yield rec.line_no, None, rec.problem
            elif not isinstance(rec.value, dict):
                yield rec.line_no, None, f"a JSON {type(rec.value).__name__}, not an object"
            else:
                yield rec.line_no, rec.value, ""
        return
    header: list[str] | None = None
    for rec in iter_csv_records(path, header_columns=True):  # a quoted title may hold a line break: data
        if header is None:
            if rec.value is None:
                raise ManifestError(f"manifest {path}: unreadable header line ({rec.problem})")
            header = [h.strip().lstrip("\ufeff") for h in rec.value]
            if not {"video_id", "video_path"} <= set(header):
                raise ManifestError(f"manifest {path}: the header must name video_id and video_path (and title, "
                                    f"optionally transcript_path); found {', '.join(header) or 'nothing'}")
            repeated = sorted({h for h in header if h and header.count(h) > 1})
            if repeated:
                raise ManifestError(f"manifest {path}: the header names column {repeated[0]!r} twice "
                                    f"({', '.join(header)[:200]}): every row would take the last one; rename or "
                                    "remove one")
            continue
        if rec.problem or rec.value is None:
            yield rec.line_no, None, rec.problem or "unreadable record"
        elif len(rec.value) != len(header):
            yield rec.line_no, None, f"{len(rec.value)} fields, the header has {len(header)}"
        else:
            yield rec.line_no, dict(zip(header, rec.value)), ""
    if header is None:
        raise ManifestError(f"manifest {path} is empty")


def read_manifest(path: str | Path) -> Iterator[Row | Drop]:
    """Rows ``{"video_id", "video_path", "title", "transcript_path", "_line"}`` in file order, or drops."""
    p = require_file(path)
    base = p.parent
    seen: set[str] = set()
    n = 0
    for line, row, problem in _records(p):
        n += 1
        if row is None:
            yield Drop(f"{p.name}:{line}", STAGE, "malformed_manifest_row", f"line {line}: {problem}"[:300])
            continue
        vid = row.get("video_id")
        vid = vid.strip() if isinstance(vid, str) else vid
        if not isinstance(vid, str) or not VIDEO_ID_RE.fullmatch(vid):
            yield Drop(f"{p.name}:{line}", STAGE, "invalid_video_id",
                       f"line {line}: video_id {vid!r} is not an 11-character YouTube id"[:300])
            continue
        if vid in seen:
            yield Drop(vid, STAGE, "duplicate_video_id", f"line {line} repeats an earlier row (the first is kept)")
            continue
        title = row.get("title")
        if title is not None and not isinstance(title, str):
            yield Drop(vid, STAGE, "malformed_manifest_row", f"line {line}: title is not a string")
            continue
        if not isinstance(row.get("video_path"), str) or not row["video_path"].strip():
            yield Drop(vid, STAGE, "malformed_manifest_row", f"line {line}: no video_path")
            continue
        tpath = row.get("transcript_path")
        if tpath is not None and not isinstance(tpath, str):
            yield Drop(vid, STAGE, "malformed_manifest_row", f"line {line}: transcript_path is not a string")
            continue
        seen.add(vid)
        yield {"video_id": vid, "video_path": _path(base, row["video_path"]),
               "title": (title or "")[:MAX_TITLE_CHARS], "transcript_path": _path(base, tpath), "_line": line}
    if n == 0:
        raise ManifestError(f"manifest {p} has no rows")


@dataclass
class Segments:
    """A transcript's segments (verbatim text) and its declared language (None when absent)."""

    segments: list[dict[str, Any]]
    language: str | None
    bad_times: int = 0


def segments_from_json(obj: Any) -> Segments:
    """ShowHowTo transcripts (docs/corpora/showhowto.md): WhisperX dict or bare list; segments sorted by ``start``;
    ``end < start`` or non-finite times are removed (counted in ``bad_times``); nothing else is rewritten. Malformed ->
    ``TranscriptError``."""
    if isinstance(obj, dict):
        if not isinstance(obj.get("segments"), list):
            raise TranscriptError(MALFORMED_TRANSCRIPT, "a JSON object without a 'segments' list")
        raw, language = obj["segments"], obj.get("language")
        language = language if isinstance(language, str) and language.strip() else None
    elif isinstance(obj, list):
        raw, language = obj, None
    else:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"a JSON {type(obj).__name__}, not a segment list or object")
    segs, bad = [], 0
    for seg in raw:
        start, end, text = whisperx_segment(seg)
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            bad += 1
            continue
        segs.append({"start": start, "end": end, "text": text})
    segs.sort(key=lambda s: s["start"])  # stable: equal starts keep their order
    return Segments(segs, language, bad)


def read_transcript(path: str | Path) -> Segments:
    """One transcript file (size and nesting caps of :func:`load_transcript_json`)."""
    return segments_from_json(load_transcript_json(Path(path)))


__all__ = ["STAGE", "ManifestError", "Segments", "read_manifest", "read_transcript", "segments_from_json"]
