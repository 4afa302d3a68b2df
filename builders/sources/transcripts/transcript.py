"""One video's timed transcript (docs/corpora/sieve_swap.md, "Inputs"): the :class:`Transcript` of ``(start, end,
text)`` segments in seconds (Batra et al., ECCV 2024, §4.2: transcript segments keep their ASR timestamps), the
per-video reason codes of :class:`TranscriptError` (``no_transcript`` / ``malformed_transcript``, docs/reason-codes.md),
the size and nesting caps, and the reading and parsing of one video's JSON (a file, or its slice of a
``raw_caption.json`` split), raw-caption lists included.

:data:`MAX_TRANSCRIPT_BYTES` is read at call time by every reader of the package (tests lower it here).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders.sources.safe_open import InputTooLarge, NotRegularFile, read_input_bytes

Segment = tuple[float, float, str]

RAW_CAPTION_SOURCE = "howto100m_raw_caption"
WHISPERX_SOURCE = "whisperx"
NO_TRANSCRIPT = "no_transcript"
MALFORMED_TRANSCRIPT = "malformed_transcript"
MAX_TRANSCRIPT_BYTES = 64 << 20  # one video's transcript file; larger ones are malformed, not read
MAX_JSON_DEPTH = 32  # one video's JSON nesting (WhisperX nests 5 levels, raw_caption.json 3); deeper: malformed
_VIDEO_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: the prefix of a bare non-JSON token read as a string by the careful reader of a split (``_NonFiniteAsStrings`` of
#: :mod:`builders.sources.transcripts.careful_reader`; a NUL: never a number)
BARE_TOKEN_MARK = "\x00bare:"
BARE_TOKEN_MARK_JSON = b"\\u0000bare:"


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


def _checked_id(video_id: Any) -> str:
    if not is_valid_video_id(video_id):
        raise TranscriptError(NO_TRANSCRIPT, f"invalid video id {str(video_id)[:80]!r}")
    return video_id


def read_transcript_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of one video's transcript file (``builders/sources/safe_open.py``): ``no_transcript`` when absent;
    ``malformed_transcript`` for a dangling link, a FIFO, device or directory (refused unread: never a hang), a loop
    of links, more than ``max_bytes`` bytes read (whatever ``stat`` says) or a read error (docs/reason-codes.md)."""
    try:
        return read_input_bytes(path, max_bytes=max_bytes, what="transcript")
    except FileNotFoundError:
        if path.is_symlink():  # a dangling link: the entry is there, and broken
            raise TranscriptError(MALFORMED_TRANSCRIPT, f"{path}: dangling symbolic link") from None
        raise TranscriptError(NO_TRANSCRIPT, f"no file {path.name}") from None
    except InputTooLarge:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{path.name}: more than {max_bytes} bytes") from None
    except NotRegularFile as err:
        raise TranscriptError(MALFORMED_TRANSCRIPT, str(err)[:300]) from None
    except (OSError, ValueError) as err:  # ValueError: a path with a NUL byte
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{path.name}: unreadable: {err}"[:300]) from None


def _load_json_file(path: Path) -> Any:
    """Parse one transcript file; ``no_transcript`` when absent, ``malformed_transcript`` when not a regular file, too
    big or invalid."""
    return _parse_json_bytes(path.name, read_transcript_file(path, MAX_TRANSCRIPT_BYTES))


def _parse_json_bytes(name: str, data: bytes) -> Any:
    """One video's JSON value from its bytes; ``malformed_transcript`` when not UTF-8 JSON."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{name}: invalid JSON: {err}") from None


def _as_time(value: Any) -> float:
    """A segment time as float; NaN/inf floats pass (the cleaning step drops them as ``bad_segment``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        if value.startswith(BARE_TOKEN_MARK):
            raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment time is a bare {value[len(BARE_TOKEN_MARK):]!r}, "
                                                        "not JSON (only NaN, Infinity and -Infinity are read)"[:200])
        try:
            return float(value)
        except ValueError:
            pass
    raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment time is not a number: {value!r}"[:200])


def _as_text(value: Any) -> str:
    if not isinstance(value, str) or value.startswith(BARE_TOKEN_MARK):
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment text is not a string: {value!r}"[:200])
    return value


def parse_raw_caption(video_id: str, obj: Any) -> Transcript:
    """A transcript from one raw-caption value ``{"text": [str], "start": [num], "end": [num]}``.

    Lists of unequal length are truncated to the shortest and flagged ``length_mismatch`` (docs/reason-codes.md).
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
