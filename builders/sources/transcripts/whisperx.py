"""WhisperX outputs (docs/corpora/sieve_swap.md and docs/corpora/howtostep.md, "Inputs"): one parser,
:func:`read_whisperx`, for both readers of a WhisperX JSON, the Sieve & Swap / MARC stores (:func:`parse_whisperx`,
a :class:`~builders.sources.transcripts.transcript.Transcript`, words ignored) and the HowToStep narration reader
(:func:`builders.sources.narrations.parse_whisperx_json`, words kept).

``segments[*].start/end/text`` are required (else ``malformed_transcript``); ``segments[*].words`` are optional and read
only when asked (a malformed word entry makes its segment have no words); ``language`` is optional (a non-string is read
as unknown); ``word_segments`` is ignored.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from builders.ops.sentencify import RawWord

from .transcript import (
    MALFORMED_TRANSCRIPT,
    WHISPERX_SOURCE,
    Segment,
    Transcript,
    TranscriptError,
    _as_text,
    _as_time,
)


class WhisperXOutput(NamedTuple):
    """A parsed WhisperX output: ``segments`` ``(start, end, text)`` in file order; ``words[k]`` segment k's words
    ``(word, start | None, end | None)`` (``[]`` when it has none), or None when words were not asked for;
    ``language`` or None."""

    segments: list[Segment]
    words: list[list[RawWord]] | None
    language: str | None


def whisperx_segment(seg: Any) -> Segment:
    """``(start, end, text)`` of one segment object; ``malformed_transcript`` when it lacks one of them or a time is
    not a number or the text not a string."""
    if not isinstance(seg, dict) or not {"start", "end", "text"} <= seg.keys():
        raise TranscriptError(MALFORMED_TRANSCRIPT, "segment is not an object with start, end and text")
    return _as_time(seg["start"]), _as_time(seg["end"]), _as_text(seg["text"])


def _opt_time(value: Any) -> float | None:
    """A word time: a finite number, else None (absent, null, NaN, string: the sentencifier interpolates)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        return None
    return float(value)


def segment_words(seg: dict) -> list[RawWord]:
    """A segment's ``words`` as ``(word, start, end)``; ``[]`` when missing or when any entry is malformed."""
    entries = seg.get("words")
    if not isinstance(entries, list):
        return []
    out = []
    for w in entries:
        if not isinstance(w, dict) or not isinstance(w.get("word"), str):
            return []
        out.append((w["word"], _opt_time(w.get("start")), _opt_time(w.get("end"))))
    return out


def read_whisperx(obj: Any, words: bool) -> WhisperXOutput:
    """The segments, the words (``words=True``; else None: Sieve & Swap and MARC use no word timing) and the language
    of a WhisperX output dict (a file, or the ASR stage's output)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list):
        raise TranscriptError(MALFORMED_TRANSCRIPT, "not a JSON object with a 'segments' list")
    segments: list[Segment] = []
    seg_words: list[list[RawWord]] = []
    for seg in obj["segments"]:
        segments.append(whisperx_segment(seg))
        if words:
            seg_words.append(segment_words(seg))
    language = obj.get("language")
    return WhisperXOutput(segments, seg_words if words else None, language if isinstance(language, str) else None)


def parse_whisperx(video_id: str, obj: Any) -> Transcript:
    """A transcript from a WhisperX output: ``segments[*].start/end/text`` and top-level ``language``
    (docs/corpora/sieve_swap.md, Inputs).

    Word-level entries are ignored (words may lack times); a non-string ``language`` is read as unknown.
    """
    parsed = read_whisperx(obj, words=False)
    return Transcript(video_id, parsed.segments, WHISPERX_SOURCE, parsed.language)
