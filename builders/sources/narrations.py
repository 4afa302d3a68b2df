"""Readers of HowToStep transcripts in the formats of docs/corpora/howtostep.md, Inputs (bad input:
docs/reason-codes.md).

- ``htm_raw``: HowTo100M ``raw_caption.json`` ``{vid: {"text": [str], "start": [num], "end": [num]}}``;
- ``sentencified``: the same schema, already sentences (TAN's Sentencified HTM json);
- ``whisperx``: a directory of ``<vid>.json`` WhisperX outputs, searched recursively (``words`` may be missing,
  single words may lack ``start``/``end``, ``language`` may be absent);
- ``segments``: ``[{"start", "end", "text"}]`` per video, either one json ``{vid: [...]}`` or a directory of
  ``<vid>.json`` lists.

One-file formats are streamed once into blocks of 1,000 videos with an id index under ``work_dir`` with
:func:`builders.sources.transcripts.raw_caption_split.split_raw_captions` (re-split only when the source file or the
wanted ids change; the split builds one video at a time and caps its nesting depth and size while streaming, so one
bad video is a ``malformed_transcript``, never a crash or gigabytes of memory). Every video's JSON (a file, or its
slice of a split) is capped at ``transcripts.transcript.MAX_TRANSCRIPT_BYTES`` and :data:`MAX_JSON_DEPTH` levels of
nesting (checked on the bytes before ``json.loads``).

Errors per video are :class:`~builders.sources.transcripts.TranscriptError`: ``no_transcript`` (no file, invalid id)
or ``malformed_transcript`` (invalid JSON, too big, too deep, wrong top-level type, a segment without start/end/text
or with a non-numeric time or text). As in :mod:`builders.sources.transcripts`, one bad segment makes the whole
video ``malformed_transcript`` (no silent skip); NaN/inf/negative times are numbers and pass here: the
sentencifier drops those segments and counts ``bad_timestamp``. A malformed WhisperX word entry makes
its segment fall back to the segment text (the words are optional).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..ops.sentencify import RawWord, Sentence
from .transcripts import transcript
from .transcripts.raw_caption_split import RAW_CAPTIONS_DIR, SplitIndex, split_once
from .transcripts.stop_words import STOPWORD_CHECK_MIN_TOKENS, lacks_stop_words
from .transcripts.transcript import (
    MALFORMED_TRANSCRIPT,
    NO_TRANSCRIPT,
    TranscriptError,
    _checked_id,
    is_valid_video_id,
    parse_raw_caption,
)
from .transcripts.whisperx import read_whisperx, whisperx_segment

logger = logging.getLogger(__name__)

__all__ = ["FORMATS", "MAX_JSON_DEPTH", "NarrationReader", "TranscriptInput", "json_nesting_depth",
           "load_transcript_json", "parse_segment_list", "parse_whisperx_json"]

FORMATS = ("htm_raw", "sentencified", "whisperx", "segments")
# one folder per one-file format under work_dir (htm_raw shares transcripts.open_transcripts' split)
SPLIT_DIRS = {"htm_raw": RAW_CAPTIONS_DIR, "sentencified": "sentencified_captions", "segments": "segment_lists"}
MAX_JSON_DEPTH = transcript.MAX_JSON_DEPTH  # WhisperX json nests 5 levels ({segments: [{words: [{}]}]})
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


@dataclass
class TranscriptInput:
    """One video's transcript: ``segments`` ``(text, start, end)``; ``words[k]`` segment k's WhisperX words
    ``(word, start | None, end | None)`` (``[]`` when it has none; ``words`` None when no segment has any)."""

    video_id: str
    format: str
    segments: list[Sentence]
    words: list[list[RawWord]] | None = None
    language: str | None = None
    length_mismatch: bool = False  # raw captions with text/start/end lists of unequal length (truncated)


# --------------------------------------------------------------------------------------------- JSON guards


def json_nesting_depth(chunks: Iterable[bytes], limit: int | None = None) -> int:
    """The deepest ``[``/``{`` nesting of JSON bytes given in chunks, ignoring brackets inside strings; stops early
    once above ``limit``. Bytes-level and vectorised (escaped ``\\`` and ``\"`` pairs removed, then everything
    but quotes and brackets), keeping only two bits of state across chunks: inside a string, pending backslash."""
    depth = deepest = 0
    in_string = pending = False
    for chunk in chunks:
        data = (b"\\" + chunk if pending else chunk).replace(b"\\\\", b"")
        pending = data.endswith(b"\\")
        data = (data[:-1] if pending else data).replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
        parts = ((b'"' + data) if in_string else data).split(b'"')
        in_string = len(parts) % 2 == 0  # an odd number of quotes: the last part is an unterminated string
        brackets = np.frombuffer(b"".join(parts[0::2]), dtype=np.uint8)
        if brackets.size:
            steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1).astype(np.int32)
            running = depth + np.cumsum(steps)
            deepest = max(deepest, int(running.max()))
            depth = int(running[-1])
        if limit is not None and deepest > limit:
            break
    return deepest


def load_transcript_json(path: Path) -> Any:
    """Parse one per-video transcript file: ``no_transcript`` when absent; ``malformed_transcript`` when more than
    ``transcript.MAX_TRANSCRIPT_BYTES`` bytes are read (a FIFO or a device is refused unread), nested deeper than
    :data:`MAX_JSON_DEPTH`, unreadable or invalid JSON (``builders/sources/safe_open.py``)."""
    cap = transcript.MAX_TRANSCRIPT_BYTES  # read at call time (tests lower it)
    return parse_transcript_bytes(path.name, transcript.read_transcript_file(path, cap))


def parse_transcript_bytes(name: str, data: bytes) -> Any:
    """Parse one video's JSON bytes (a file or its slice of a split): ``malformed_transcript`` when nested deeper
    than :data:`MAX_JSON_DEPTH` or not UTF-8 JSON."""
    if (depth := json_nesting_depth([data], MAX_JSON_DEPTH)) > MAX_JSON_DEPTH:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} ({depth}+)")
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{name}: invalid JSON: {err}"[:300]) from None


# --------------------------------------------------------------------------------------------- parsing


def parse_whisperx_json(video_id: str, obj: Any) -> TranscriptInput:
    """A :class:`TranscriptInput` from a WhisperX output dict (files, or the ASR stage's output):
    ``segments[*].start/end/text`` (required; else ``malformed_transcript``), ``segments[*].words`` (optional),
    ``language`` (optional; non-strings read as unknown). ``word_segments`` is ignored. The parser is the one of
    :mod:`builders.sources.transcripts.whisperx` (as for Sieve & Swap and MARC), asked for the words."""
    parsed = read_whisperx(obj, words=True)
    words = parsed.words or []
    return TranscriptInput(video_id, "whisperx", [(text, start, end) for start, end, text in parsed.segments],
                           words if any(words) else None, parsed.language)


def parse_segment_list(video_id: str, obj: Any) -> TranscriptInput:
    """A :class:`TranscriptInput` from a ``segments`` value ``[{"start", "end", "text"}]``."""
    if not isinstance(obj, list):
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"not a JSON list of segments but {type(obj).__name__}")
    segments = []
    for seg in obj:
        start, end, text = whisperx_segment(seg)
        segments.append((text, start, end))
    return TranscriptInput(video_id, "segments", segments)


def _parse_caption_lists(video_id: str, fmt: str, obj: Any) -> TranscriptInput:
    transcript = parse_raw_caption(video_id, obj)
    return TranscriptInput(video_id, fmt, [(t, s, e) for s, e, t in transcript.segments],
                           length_mismatch=transcript.length_mismatch)


# --------------------------------------------------------------------------------------------- reader


def _index_dir(root: Path) -> dict[str, Path]:
    """``{video_id: path}`` of the ``<vid>.json`` files under ``root``, recursive; of duplicates the top-level file
    wins, else the first in sorted path order (the order :meth:`NarrationReader.read` looks them up in). An entry so
    named that is no regular file (a dangling link, a loop of links, a directory, a FIFO) is the video's path only
    when no regular file names the video: reading it is that video's ``malformed_transcript`` drop naming the path."""
    index: dict[str, Path] = {}
    bad: dict[str, Path] = {}
    duplicates = 0
    for path in sorted(root.rglob("*.json"), key=lambda p: (p.parent != root, p)):
        vid = path.name[: -len(".json")]
        if not is_valid_video_id(vid):
            continue
        if not path.is_file():
            bad.setdefault(vid, path)
        elif vid in index:
            duplicates += 1
        else:
            index[vid] = path
    if duplicates:
        logger.warning("%s: %d duplicate <video_id>.json files ignored", root, duplicates)
    return {**bad, **index}


class NarrationReader:
    """Per-video transcripts of one format (docs/corpora/howtostep.md, Inputs). ``path``: the one json (``htm_raw``,
    ``sentencified``, ``segments``) or a directory (``whisperx``, ``segments``). One-file inputs are split into
    ``work_dir/<format folder>`` (``work_dir`` required then); ``wanted_ids`` limits the split.
    Missing ``path`` -> FileNotFoundError; a wrong kind of path or an input that is not a JSON object -> ValueError.
    """

    def __init__(self, fmt: str, path: str | Path, work_dir: str | Path | None = None,
                 wanted_ids: set[str] | None = None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown transcript_format {fmt!r}; expected one of {', '.join(FORMATS)}")
        self.fmt = fmt
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"transcripts not found: {self.path}")
        self._index: dict[str, Path] | None = None
        self._warned: set[str] = set()
        self.split_root: Path | None = None
        self.split_error = ""
        if fmt == "whisperx" or (fmt == "segments" and self.path.is_dir()):
            if not self.path.is_dir():
                raise ValueError(f"transcript_format={fmt} needs a directory of <video_id>.json, got {self.path}")
            return
        if not self.path.is_file():
            raise ValueError(f"transcript_format={fmt} needs one JSON file, got {self.path}")
        if work_dir is None:
            raise ValueError(f"transcript_format={fmt}: a work_dir is needed to split {self.path}")
        self.split_root = Path(work_dir) / SPLIT_DIRS[fmt]
        split_once(self.path, self.split_root, wanted_ids)
        self.split = SplitIndex(self.split_root)
        self.split_error = self.split.error

    def _lookup(self, vid: str) -> Path:
        direct = self.path / f"{vid}.json"
        if direct.is_file():
            return direct
        if self._index is None:
            self._index = _index_dir(self.path)
        path = self._index.get(vid)
        if path is None:
            raise TranscriptError(NO_TRANSCRIPT, f"no {vid}.json under {self.path}")
        return path

    def path_of(self, video_id: str) -> Path | None:
        """The ``<vid>.json`` file of a directory input (None when absent, or for a split one-file input)."""
        if self.split_root is not None or not is_valid_video_id(video_id):
            return None
        try:
            return self._lookup(video_id)
        except TranscriptError:
            return None

    def _load(self, vid: str) -> Any:
        if self.split_root is not None:
            return parse_transcript_bytes(vid, self.split.read_bytes(vid))
        return load_transcript_json(self._lookup(vid))

    def read(self, video_id: str) -> TranscriptInput:
        """The video's transcript; raises ``TranscriptError`` (``no_transcript`` | ``malformed_transcript``)."""
        vid = _checked_id(video_id)
        obj = self._load(vid)
        if self.fmt == "whisperx":
            return parse_whisperx_json(vid, obj)
        if self.fmt == "segments":
            return parse_segment_list(vid, obj)
        item = _parse_caption_lists(vid, self.fmt, obj)
        if self.fmt == "htm_raw" and vid not in self._warned and lacks_stop_words(
                [(s, e, t) for t, s, e in item.segments]):
            self._warned.add(vid)
            logger.warning("video %s: %d+ caption tokens and no English stop word; is this caption.json (stop words "
                           "removed) instead of raw_caption.json? (docs/corpora/howtostep.md, Inputs)", vid,
                           STOPWORD_CHECK_MIN_TOKENS)
        return item

    def has(self, video_id: str) -> bool:
        """The input holds a transcript entry for the video (for a split: its bytes, or the reason they could not be
        kept, which :meth:`read` raises as ``malformed_transcript``). One index look-up or one ``stat``: never a scan
        of the whole input per video (README.md "Caching and resume")."""
        if not is_valid_video_id(video_id):
            return False
        if self.split_root is not None:
            return self.split.has(video_id)
        return self.path_of(video_id) is not None

    def item_digests(self, video_ids: list[str], memo: Any = None) -> dict[str, str]:
        """What keys each video's rows: the sha256 of its slice of a split input (recorded by the split), or of its
        ``<vid>.json`` (through the fingerprint ``memo``); ``-`` when the input has none."""
        if self.split_root is not None:
            entries = self.split.entries(video_ids)
            return {v: self.split.digest(v, entries.get(v)) for v in video_ids}
        from ..core.fingerprint import item_file_sha

        return {v: item_file_sha(self.path_of(v), memo) for v in video_ids}

    def ids(self) -> set[str] | None:
        """The video ids with a transcript (for a split input: those whose value the split wrote). A scan of the
        whole input: for listings, never per video (use :meth:`has`)."""
        if self.split_root is not None:
            return self.split.ids()
        if self._index is None:
            self._index = _index_dir(self.path)
        return set(self._index)
