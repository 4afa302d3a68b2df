"""Readers of timed transcripts: HowTo100M ``raw_caption.json`` and WhisperX per-video JSON (spec ``sieve_swap.md``
§2.3, §6).

Both give a :class:`Transcript` of ``(start, end, text)`` segments in seconds, the input of the sieve and swap of
the paper (``../shared/papers/004_7a7f59c04c52b84c.txt`` §4.2: transcript segments keep their ASR timestamps).
The raw-caption file is large (one JSON object over all videos), so :func:`split_raw_captions` streams it once with
``ijson`` into one small file per video; the stores then read one video at a time. A video that cannot be read
raises :class:`TranscriptError` with the spec's reason (``no_transcript`` / ``malformed_transcript``), which the
pipeline turns into a counted drop.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable
from functools import cache
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ijson

logger = logging.getLogger(__name__)

Segment = tuple[float, float, str]

RAW_CAPTION_SOURCE = "howto100m_raw_caption"
WHISPERX_SOURCE = "whisperx"
NO_TRANSCRIPT = "no_transcript"
MALFORMED_TRANSCRIPT = "malformed_transcript"
MAX_TRANSCRIPT_BYTES = 64 << 20  # one video's transcript file; larger ones are malformed, not read
STOPWORD_CHECK_MIN_TOKENS = 50  # spec §2.3: caption.json (stop words removed) instead of raw_caption.json
SPLIT_MARKER = "_split_done.json"
RAW_CAPTIONS_DIR = "raw_captions"
_VIDEO_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOKEN_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass
class Transcript:
    """One video's timed transcript: ``segments`` are ``(start, end, text)`` in seconds, in file order."""

    video_id: str
    segments: list[Segment]
    source: str  # RAW_CAPTION_SOURCE | WHISPERX_SOURCE
    language: str | None = None
    length_mismatch: bool = False  # raw captions with text/start/end lists of unequal length (truncated)


class TranscriptError(Exception):
    """A video whose transcript cannot be used; ``reason`` is ``no_transcript`` or ``malformed_transcript``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in (NO_TRANSCRIPT, MALFORMED_TRANSCRIPT):
            raise ValueError(f"unknown transcript error reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def is_valid_video_id(video_id: Any) -> bool:
    """True for a string of 1–64 characters from ``[A-Za-z0-9_-]`` (YouTube ids), safe as a file name."""
    return isinstance(video_id, str) and _VIDEO_ID_RE.fullmatch(video_id) is not None


def raw_caption_path(root: str | Path, video_id: str) -> Path:
    """Where :func:`split_raw_captions` puts a video: ``root/<first 2 hex of sha1(id)>/<id>.json``."""
    shard = hashlib.sha1(video_id.encode("utf-8")).hexdigest()[:2]
    return Path(root) / shard / f"{video_id}.json"


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _check_json_object_file(path: Path) -> None:
    with open(path, "rb") as f:
        head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()
    if not head.startswith(b"{"):
        raise ValueError(f"{path}: not a JSON object {{video_id: {{text, start, end}}}} (raw_caption.json)")


def split_raw_captions(
    path: str | Path, out_dir: str | Path, wanted_ids: set[str] | None = None
) -> dict[str, int]:
    """Stream HowTo100M ``raw_caption.json`` (spec §2.3) into one JSON file per video under ``out_dir``.

    Uses ``ijson.kvitems`` (the file is never loaded whole). Ids that are not ``[A-Za-z0-9_-]{1,64}`` are never
    used as paths and are counted as ``bad_id``; ids outside ``wanted_ids`` (when given) as ``skipped_unwanted``.
    Each file is written atomically; re-running rewrites the same files (idempotent). A JSON syntax error (e.g. a
    truncated download) stops the split: what was read is kept, ``json_error`` is 1 and an error is logged. A marker
    ``SPLIT_MARKER`` with the source's size/mtime and the counts is written last. Returns the counts.
    """
    src = Path(path)
    if not src.is_file():
        raise FileNotFoundError(f"raw captions file not found: {src}")
    _check_json_object_file(src)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {"videos": 0, "skipped_unwanted": 0, "bad_id": 0, "json_error": 0}
    with open(src, "rb") as f:
        try:
            for video_id, value in ijson.kvitems(f, "", use_float=True):
                if not is_valid_video_id(video_id):
                    counts["bad_id"] += 1
                    if counts["bad_id"] <= 10:
                        logger.warning("raw captions: ignoring unsafe video id %r", str(video_id)[:80])
                elif wanted_ids is not None and video_id not in wanted_ids:
                    counts["skipped_unwanted"] += 1
                else:
                    _write_atomic(raw_caption_path(out, video_id), json.dumps(value).encode("utf-8"))
                    counts["videos"] += 1
        except (ijson.JSONError, ValueError) as err:  # ValueError: bad bytes with a pure-Python backend
            counts["json_error"] = 1
            logger.error("raw captions %s: JSON error after %d videos, rest not read: %s", src, counts["videos"], err)
    _write_atomic(out / SPLIT_MARKER, json.dumps(_split_marker(src, wanted_ids, counts)).encode("utf-8"))
    return counts


def _split_marker(src: Path, wanted_ids: Iterable[str] | None, counts: dict[str, int] | None) -> dict[str, Any]:
    stat = src.stat()
    wanted = None if wanted_ids is None else hashlib.sha1("\n".join(sorted(wanted_ids)).encode()).hexdigest()
    return {"source": str(src.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "wanted": wanted,
            "counts": counts}


def _marker_key(marker: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What identifies a split: the source file (path, size, mtime) and the wanted-id set."""
    if marker is None:
        return None
    return tuple(marker.get(key) for key in ("source", "size", "mtime_ns", "wanted"))


def _read_marker(root: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((root / SPLIT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


# --------------------------------------------------------------------------------------------- parsing


def _load_json_file(path: Path) -> Any:
    """Parse one transcript file; ``no_transcript`` when absent, ``malformed_transcript`` when too big or invalid."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise TranscriptError(NO_TRANSCRIPT, f"no file {path.name}") from None
    if size > MAX_TRANSCRIPT_BYTES:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{path.name}: {size} bytes > {MAX_TRANSCRIPT_BYTES}")
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{path.name}: invalid JSON: {err}") from None


def _as_time(value: Any) -> float:
    """A segment time as float; NaN/inf floats pass (the cleaning step drops them as ``bad_segment``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment time is not a number: {value!r}"[:200])


def _as_text(value: Any) -> str:
    if not isinstance(value, str):
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment text is not a string: {value!r}"[:200])
    return value


def parse_raw_caption(video_id: str, obj: Any) -> Transcript:
    """A transcript from one raw-caption value ``{"text": [str], "start": [num], "end": [num]}`` (spec §2.3).

    Lists of unequal length are truncated to the shortest and flagged ``length_mismatch`` (spec §6).
    """
    if not isinstance(obj, dict):
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"not a JSON object but {type(obj).__name__}")
    lists = {key: obj.get(key) for key in ("text", "start", "end")}
    bad = [key for key, value in lists.items() if not isinstance(value, list)]
    if bad:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"missing or non-list field(s): {', '.join(bad)}")
    texts, starts, ends = lists["text"], lists["start"], lists["end"]
    n = min(len(texts), len(starts), len(ends))
    segments = [(_as_time(s), _as_time(e), _as_text(t)) for s, e, t in zip(starts[:n], ends[:n], texts[:n])]
    mismatch = not (len(texts) == len(starts) == len(ends))
    return Transcript(video_id, segments, RAW_CAPTION_SOURCE, None, mismatch)


def _whisperx_segment(seg: Any) -> Segment:
    if not isinstance(seg, dict) or not {"start", "end", "text"} <= seg.keys():
        raise TranscriptError(MALFORMED_TRANSCRIPT, "segment is not an object with start, end and text")
    return _as_time(seg["start"]), _as_time(seg["end"]), _as_text(seg["text"])


def parse_whisperx(video_id: str, obj: Any) -> Transcript:
    """A transcript from a WhisperX output: ``segments[*].start/end/text`` and top-level ``language`` (§2.3).

    Word-level entries are ignored (words may lack times); a non-string ``language`` is read as unknown.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list):
        raise TranscriptError(MALFORMED_TRANSCRIPT, "not a JSON object with a 'segments' list")
    segments = [_whisperx_segment(seg) for seg in obj["segments"]]
    language = obj.get("language")
    return Transcript(video_id, segments, WHISPERX_SOURCE, language if isinstance(language, str) else None)


@cache
def english_stop_words() -> frozenset[str]:
    """spaCy's English stop words (a plain set; no model is loaded), or empty when spaCy is not installed."""
    try:
        from spacy.lang.en.stop_words import STOP_WORDS  # imported lazily: importing spacy takes seconds
    except ImportError:
        logger.warning("spaCy is not installed: the caption.json stop-word check is skipped")
        return frozenset()
    return frozenset(STOP_WORDS)


def lacks_stop_words(segments: Iterable[Segment], min_tokens: int = STOPWORD_CHECK_MIN_TOKENS) -> bool:
    """True when the text has at least ``min_tokens`` tokens and none is an English stop word (spaCy's list).

    The sign of HowTo100M ``caption.json`` (stop words removed) passed instead of ``raw_caption.json`` (§2.3).
    Always False when the stop-word list is unavailable.
    """
    tokens = _TOKEN_RE.findall(" ".join(text for _, _, text in segments).lower())
    if len(tokens) < min_tokens or not (stop_words := english_stop_words()):
        return False
    return not any(token in stop_words for token in tokens)


# --------------------------------------------------------------------------------------------- stores


def _require_dir(root: str | Path) -> Path:
    p = Path(root)
    if not p.is_dir():
        raise FileNotFoundError(f"transcript directory not found: {p}")
    return p


def _checked_id(video_id: Any) -> str:
    if not is_valid_video_id(video_id):
        raise TranscriptError(NO_TRANSCRIPT, f"invalid video id {str(video_id)[:80]!r}")
    return video_id


class RawCaptionStore:
    """Per-video raw captions written by :func:`split_raw_captions` (``split_counts`` from its marker, if any)."""

    def __init__(self, root: str | Path) -> None:
        self.root = _require_dir(root)
        marker = _read_marker(self.root)
        self.split_counts: dict[str, int] | None = marker.get("counts") if marker else None
        self._warned: set[str] = set()

    def get(self, video_id: str) -> Transcript:
        """The video's transcript; raises :class:`TranscriptError`. Warns once per video on stop-word-free text."""
        vid = _checked_id(video_id)
        transcript = parse_raw_caption(vid, _load_json_file(raw_caption_path(self.root, vid)))
        if vid not in self._warned and lacks_stop_words(transcript.segments):
            self._warned.add(vid)
            logger.warning(
                "video %s: %d+ caption tokens and no English stop word; is this caption.json (stop words "
                "removed) instead of raw_caption.json? (spec sieve_swap §2.3)", vid, STOPWORD_CHECK_MIN_TOKENS,
            )
        return transcript


class WhisperXStore:
    """A directory of WhisperX outputs named ``<video_id>.json``."""

    def __init__(self, root: str | Path) -> None:
        self.root = _require_dir(root)

    def get(self, video_id: str) -> Transcript:
        """The video's transcript; raises :class:`TranscriptError`."""
        vid = _checked_id(video_id)
        return parse_whisperx(vid, _load_json_file(self.root / f"{vid}.json"))


def open_transcripts(
    path: str | Path, work_dir: str | Path, wanted_ids: set[str] | None = None
) -> RawCaptionStore | WhisperXStore:
    """A store over ``path``: a directory is read as WhisperX outputs; a file as HowTo100M ``raw_caption.json``,
    split once into ``work_dir/raw_captions`` (re-split only when the source file or ``wanted_ids`` changed).
    """
    src = Path(path)
    if src.is_dir():
        return WhisperXStore(src)
    if not src.is_file():
        raise FileNotFoundError(f"transcripts not found: {src}")
    out = Path(work_dir) / RAW_CAPTIONS_DIR
    if _marker_key(_read_marker(out)) != _marker_key(_split_marker(src, wanted_ids, None)):
        split_raw_captions(src, out, wanted_ids)
    return RawCaptionStore(out)
