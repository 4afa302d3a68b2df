"""Readers of timed transcripts: HowTo100M ``raw_caption.json`` and WhisperX per-video JSON
(docs/corpora/sieve_swap.md, "Inputs").

Both give a :class:`Transcript` of ``(start, end, text)`` segments in seconds, the input of the sieve and swap of
the paper (Batra et al., ECCV 2024, §4.2: transcript segments keep their ASR timestamps).
The raw-caption file is large (one JSON object over all videos), so :func:`split_raw_captions` streams it once with
``ijson`` into blocks of 1,000 videos with an id index (:class:`SplitIndex`); the stores then read one video at a
time. A video that cannot be read
raises :class:`TranscriptError` with its reason code (``no_transcript`` / ``malformed_transcript``), which the
pipeline turns into a counted drop.

Modules: :mod:`.transcript` (the :class:`Transcript`, :class:`TranscriptError`, the caps, one video's JSON and raw
caption lists), :mod:`.raw_caption_split` (the split and :class:`SplitIndex`; :mod:`.careful_reader` streams a file
that is not plain; :mod:`.raw_caption_resplit` re-splits an edited plain file where it changed), :mod:`.whisperx` (the one WhisperX parser, shared with :mod:`builders.sources.narrations`),
:mod:`.stop_words` (the caption.json check) and :mod:`.stores` (the per-video stores). The public names are importable
from this package; the caps are read at call time where they are defined (``transcript.MAX_TRANSCRIPT_BYTES``,
``raw_caption_split.BLOCK_VIDEOS``): change them there, not here.
"""

from __future__ import annotations

from .raw_caption_split import (
    BLOCK_VIDEOS,
    INDEX_FILE,
    RAW_CAPTIONS_DIR,
    SPLIT_LAYOUT,
    SPLIT_MARKER,
    SplitIndex,
    block_path,
    check_raw_caption_file,
    split_once,
    split_raw_captions,
)
from .stop_words import STOPWORD_CHECK_MIN_TOKENS, english_stop_words, lacks_stop_words
from .stores import RawCaptionStore, WhisperXStore, open_transcripts, transcript_item_digests
from .transcript import (
    BARE_TOKEN_MARK,
    BARE_TOKEN_MARK_JSON,
    MALFORMED_TRANSCRIPT,
    MAX_JSON_DEPTH,
    MAX_TRANSCRIPT_BYTES,
    NO_TRANSCRIPT,
    RAW_CAPTION_SOURCE,
    WHISPERX_SOURCE,
    Segment,
    Transcript,
    TranscriptError,
    is_valid_video_id,
    parse_raw_caption,
    read_transcript_file,
)
from .whisperx import WhisperXOutput, parse_whisperx, read_whisperx, whisperx_segment

__all__ = [
    "BARE_TOKEN_MARK", "BARE_TOKEN_MARK_JSON", "BLOCK_VIDEOS", "INDEX_FILE", "MALFORMED_TRANSCRIPT", "MAX_JSON_DEPTH",
    "MAX_TRANSCRIPT_BYTES", "NO_TRANSCRIPT", "RAW_CAPTIONS_DIR", "RAW_CAPTION_SOURCE", "SPLIT_LAYOUT", "SPLIT_MARKER",
    "STOPWORD_CHECK_MIN_TOKENS", "WHISPERX_SOURCE", "RawCaptionStore", "Segment", "SplitIndex", "Transcript",
    "TranscriptError", "WhisperXOutput", "WhisperXStore", "block_path", "check_raw_caption_file", "english_stop_words",
    "is_valid_video_id", "lacks_stop_words", "open_transcripts", "parse_raw_caption", "parse_whisperx",
    "read_transcript_file", "read_whisperx", "split_once", "split_raw_captions", "transcript_item_digests",
    "whisperx_segment",
]
