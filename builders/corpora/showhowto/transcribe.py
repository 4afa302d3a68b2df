"""ShowHowTo stage 1 (docs/corpora/showhowto.md; Souček et al., CVPR 2025, Sec. 3 "WhisperX transcripts"): probe each
video (container duration, streams), then its supplied transcript or ASR of its audio.

ASR is the shared step's (:class:`builders.steps.asr.ASRStep`: faster-whisper tiny.en on CPU, WhisperX large-v2 on
GPU, HowToStep's backends) through the build's request cache (audio sha256, model id, decoding, code version).
Drops: ``video_unreadable``, ``no_audio`` (no audio stream and no transcript), ``empty_transcript``, ``non_english``
(a declared language other than ``en``; ``any_language`` switches it off), ``malformed_transcript``.

Per-item inputs: a manifest row names its video file and its transcript file, whose contents (not the manifest's) key
each shard (:meth:`Step.item_digest` through :func:`files_digest`), each file by its size and edges under a cheap
identity (:mod:`.identity`), not by hashing every video in full.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.fingerprint import hash_obj, item_file_sha
from ...core.records import Out, Row
from ...core.step import Step
from ...models import media
from ...sources.transcripts import TranscriptError
from ...sources.video_manifest import read_transcript, segments_from_json
from ...steps.asr import PYAV, ASRStep
from .identity import identity_memo


def file_sha(path: str | None, memo: Any) -> str:
    """The key of one video's (or transcript's) file: with the build's fingerprint memo, its size and first and last
    MiB, read once and then remembered under its (size, mtime, inode), the full sha256 only when that identity changes
    under the same size and edges (:mod:`.identity`); without a memo its content sha256. ``-`` when there is none,
    what it is when it is not a regular file, the error's name when it cannot be read (a folder in its place: the step
    fails on it the same way each time)."""
    if not path:
        return "-"
    try:
        if memo is None:
            return item_file_sha(path, None)
        st = os.stat(path)
        if not stat_mod.S_ISREG(st.st_mode):  # never opened (a FIFO, a device, a folder): as item_file_sha names it
            return f"special:{stat_mod.S_IFMT(st.st_mode):o}"
        return identity_memo(Path(memo.path).parent).key(path, st)
    except FileNotFoundError:
        return "-"
    except OSError as e:
        return "symlink-loop" if e.errno == errno.ELOOP else f"!{type(e).__name__}"


def files_digest(rows: list[Row], memo: Any, *fields: str) -> str:
    """What the files named in ``fields`` of each row contribute: the digest a step's ``item_digest`` returns."""
    return hash_obj([[r["video_id"], *(file_sha(r[f], memo) for f in fields)] for r in rows])


@dataclass(eq=False)
class Probe(Step):
    """Container duration and streams (PyAV, no decoding): ``video_unreadable`` for a missing, empty or corrupt file
    with no stream (docs/reason-codes.md); a video without a video stream is unreadable too (nothing to align).
    No parameters: each row's video file keys its shard (:meth:`item_digest`)."""

    name = "probe"
    version = "1"
    id_field = "video_id"
    row_wise = True
    row_wise_batch = True
    item_fields = ("video_id", "video_path")
    reads = {"video_id": str, "video_path": str, "title": str}
    writes = {"duration": Any, "has_audio": bool, "width": Any, "height": Any}
    requires = (PYAV,)

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        return files_digest(rows, memo, "video_path")

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            out.item = r["video_id"]  # its counters are its own (row_wise_batch)
            try:
                info = media.probe(r["video_path"])
            except media.MediaError as e:
                out.drop(r["video_id"], "video_unreadable", e.detail or str(e))
                continue
            if not info.has_video:
                out.drop(r["video_id"], "video_unreadable", "no video stream")
                continue
            if not r["title"]:
                out.count("missing_title")  # an empty string in both prompts, counted
            out.keep({**r, "duration": info.duration, "has_audio": info.has_audio,
                      "width": info.width, "height": info.height})


@dataclass(eq=False, kw_only=True)
class Transcribe(ASRStep):
    """Stage 1 (Souček et al., CVPR 2025, Sec. 3.1: WhisperX): the supplied transcript (``transcript_path``) or ASR;
    segments sorted by start, ``end < start`` removed (counter ``bad_segment_times``), text verbatim.

    Parameters: the ASR backend and decoding (:class:`~builders.steps.asr.ASRStep`: ``asr`` faster-whisper |
    whisperx, its model folders, compute type, batch size, language; ``asr_device`` says where the model runs, not
    part of the cache key) and ``any_language`` (keep a declared non-English transcript). ASR answers go to the
    model-output cache that the builds of every corpus share (``--model-outputs``): HowToStep built on the same videos
    with the same ASR settings transcribes none of them again."""

    name = "transcribe"
    version = "1"
    id_field = "video_id"
    row_wise = True
    row_wise_batch = True
    item_fields = ("video_id", "video_path", "transcript_path")
    reads = {"video_id": str, "video_path": str, "transcript_path": Any, "has_audio": bool}
    writes = {"segments": list, "language": str, "transcript_source": str, "asr_model": str}

    any_language: bool

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """The transcript file of each row, and its video when it has none (the audio is then transcribed)."""
        out = []
        for r in rows:
            t = file_sha(r["transcript_path"], memo)
            out.append([r["video_id"], t, file_sha(r["video_path"], memo) if t == "-" else ""])
        return hash_obj(out)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            vid = out.item = r["video_id"]  # its counters (ASR requests, cache hits) are its own (row_wise_batch)
            try:
                if r["transcript_path"] and Path(r["transcript_path"]).exists():
                    t, source, asr_model = read_transcript(r["transcript_path"]), "transcript", ""
                elif not r["has_audio"]:
                    name = Path(r["transcript_path"]).name if r["transcript_path"] else ""
                    missing = f"transcript {name} not found and " if name else ""
                    out.drop(vid, "no_audio", f"{missing}no audio stream to transcribe")
                    continue
                else:
                    t = segments_from_json(self.transcribe(r["video_path"], out))
                    source, asr_model = "asr", self.asr_backend().model_id
            except TranscriptError as e:
                out.drop(vid, e.reason, e.detail if hasattr(e, "detail") else str(e))
                continue
            except media.MediaError as e:
                out.drop(vid, e.reason, e.detail or str(e))
                continue
            if t.bad_times:
                out.count("bad_segment_times", t.bad_times)
            if not any(s["text"].strip() for s in t.segments):
                out.drop(vid, "empty_transcript", f"{len(t.segments)} segments, no text")
                continue
            lang = (t.language or "").lower()
            if lang and not lang.startswith("en") and not self.any_language:
                out.drop(vid, "non_english", f"language {t.language!r}")
                continue
            out.keep({**r, "segments": t.segments, "language": t.language or "", "transcript_source": source,
                      "asr_model": asr_model})
