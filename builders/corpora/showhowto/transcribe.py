"""ShowHowTo stage 1 (docs/corpora/showhowto.md; Souček et al., CVPR 2025, Sec. 3 "WhisperX transcripts"): probe each
video (container duration, streams), then its supplied transcript or ASR of its audio.

ASR reuses HowToStep's backends (faster-whisper tiny.en on CPU, WhisperX large-v2 on GPU) and the build's request
cache (audio sha256, model id, decoding, code version). Drops: ``video_unreadable``, ``no_audio`` (no audio stream and
no transcript), ``empty_transcript``, ``non_english`` (a declared language other than ``en``; ``any_language``
switches it off), ``malformed_transcript``.
"""

from __future__ import annotations

from typing import Any

from ...core.records import Out, Row
from ...core.step import CacheDirStep, Step, gpus_for_device

#: bump when the ASR request or its post-processing changes (part of the request-cache key)
ASR_CODE_VERSION = "1"
#: the steps that read a video's own files name this key: a manifest row names those files (``video_path``,
#: ``transcript_path``), whose contents, not the manifest's, key the shards (``item_digest``)
ITEM_INPUT_KEYS = ("manifest",)


def file_sha(path: str | None, memo: Any) -> str:
    """The content sha256 of one video's file through the fingerprint memo (a ``stat`` and a look-up while unchanged),
    ``-`` when there is none, the error's name when it cannot be read (a folder in its place: the step fails on it the
    same way each time)."""
    from ...core.fingerprint import item_file_sha

    if not path:
        return "-"
    try:
        return item_file_sha(path, memo)
    except OSError as e:
        return f"!{type(e).__name__}"


def files_digest(rows: list[Row], memo: Any, *fields: str) -> str:
    """What the files named in ``fields`` of each row contribute: the digest a step's ``item_digest`` returns."""
    from ...core.fingerprint import hash_obj

    return hash_obj([[r["video_id"], *(file_sha(r[f], memo) for f in fields)] for r in rows])


class Probe(Step):
    """Container duration and streams (PyAV, no decoding): ``video_unreadable`` for a missing, empty or corrupt file
    with no stream (docs/reason-codes.md); a video without a video stream is unreadable too (nothing to align)."""

    name = "probe"
    version = "1"
    id_field = "video_id"
    item_input_keys = ITEM_INPUT_KEYS
    item_fields = ("video_id", "video_path")

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        return files_digest(rows, memo, "video_path")

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models import media

        for r in rows:
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


class Transcribe(CacheDirStep):
    """Stage 1 (Souček et al., CVPR 2025, Sec. 3.1: WhisperX): the supplied transcript (``transcript_path``) or ASR;
    segments sorted by start, ``end < start`` removed (counter ``bad_segment_times``), text verbatim."""

    name = "transcribe"
    version = "1"
    id_field = "video_id"
    uses_model = True
    config_keys = ("asr", "asr_model_path", "asr_align_model_path", "asr_compute_type", "asr_batch_size",
                   "asr_language", "any_language")
    item_input_keys = ITEM_INPUT_KEYS
    item_fields = ("video_id", "video_path", "transcript_path")

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """The transcript file of each row, and its video when it has none (the audio is then transcribed)."""
        from ...core.fingerprint import hash_obj

        out = []
        for r in rows:
            t = file_sha(r["transcript_path"], memo)
            out.append([r["video_id"], t, file_sha(r["video_path"], memo) if t == "-" else ""])
        return hash_obj(out)

    def gpus(self) -> float:
        return gpus_for_device(self.cfg.asr_device)

    def setup(self, state: Any) -> None:
        super().setup(state)
        self._asr = None
        self.cache = self.request_cache()

    def teardown(self) -> None:
        self._asr = None
        if getattr(self, "cache", None) is not None:
            self.cache.close()

    def asr(self):
        if self._asr is None:
            from ...models.asr import asr_settings_from, make_asr

            self._asr = make_asr(asr_settings_from(self.cfg))
        return self._asr

    def _transcribe(self, path: str, out: Out) -> dict[str, Any]:
        from ...models import media
        from ...models.asr import transcribe_cached

        result, cached = transcribe_cached(self.asr(), media.decode_audio(path), self.cache, ASR_CODE_VERSION)
        out.count("asr_cache_hits" if cached else "asr_requests")
        return result

    def process(self, rows: list[Row], out: Out) -> None:
        from pathlib import Path

        from ...models import media
        from ...sources.transcripts import TranscriptError
        from ...sources.video_manifest import read_transcript, segments_from_json

        for r in rows:
            vid = r["video_id"]
            try:
                if r["transcript_path"] and Path(r["transcript_path"]).exists():
                    t, source, asr_model = read_transcript(r["transcript_path"]), "transcript", ""
                elif not r["has_audio"]:
                    missing = f"transcript {Path(r['transcript_path']).name} not found and " if r["transcript_path"] else ""
                    out.drop(vid, "no_audio", f"{missing}no audio stream to transcribe")
                    continue
                else:
                    t = segments_from_json(self._transcribe(r["video_path"], out))
                    source, asr_model = "asr", self.asr().model_id
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
            if lang and not lang.startswith("en") and not self.cfg.any_language:
                out.drop(vid, "non_english", f"language {t.language!r}")
                continue
            out.keep({**r, "segments": t.segments, "language": t.language or "", "transcript_source": source,
                      "asr_model": asr_model})
