"""Speech recognition as a step (Li et al., ECCV 2024, §3.1 and Souček et al., CVPR 2025, Sec. 3: WhisperX): each
video's transcript, read in its declared format or, when there is none and the video file is there, transcribed by the
ASR backend (faster-whisper tiny.en on CPU, WhisperX large-v2 + alignment on GPU; ``builders/models/asr.py``).

ASR output is WhisperX JSON, cached per request under (audio sha256, model id, decoding parameters, code version), so
a rebuild never transcribes a video twice (docs/architecture.md, "Caching and resume"). The cache is the build's
model-output cache (``--model-outputs``, default ``OUT/.work/model-outputs``; its ``asr`` folder), which the builds of
every corpus share: HowToStep built after ShowHowTo on the same HowTo100M videos, with the same ASR model and decoding,
transcribes none of them again. Answers a build kept in its own request cache (``<work dir>/cache``) before are read
there and copied over. Outside a build (no ``model_outputs``) the build's own request cache serves alone.

* :class:`ASRStep`: the ASR parameters (the corpus config keys ``asr``, ``asr_model_path``, ``asr_align_model_path``,
  ``asr_compute_type``, ``asr_batch_size``, ``asr_language`` and, not keyed, ``asr_device``), the backend loaded once
  per worker, the request cache, its resources and optional packages. A corpus's own transcription step subclasses
  it (ShowHowTo's reads the transcript and video each manifest row names).
* :class:`Transcribe`: HowToStep's (docs/corpora/howtostep.md, Inputs): transcripts from a file or folder in
  ``transcript_format``, video files found by id under ``media``, the duration from the container (PyAV). Drops:
  ``no_transcript``, ``malformed_transcript``, ``video_unreadable``, ``no_audio``, ``no_speech``
  (docs/reason-codes.md).

A video's inputs key only its own rows (README.md "Caching and resume"): its slice of a one-file transcript (the sha256
the split records), its WhisperX file and its media file (:meth:`Transcribe.item_digest`), so editing one video's
caption reruns only the shards holding that video.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.records import Out, Row
from ..core.step import FitInputs, Requirement, Resources, execution_setting, gpus_for_device, input_path
from ..sources.transcripts import TranscriptError
from .request_cache import CacheDirStep

#: bump when the ASR request or its post-processing changes (part of the request-cache key)
ASR_CODE_VERSION = "1"
#: the ASR outputs' folder in the build's model-output cache (``Step.model_outputs``)
ASR_OUTPUTS = "asr"
#: PyAV decodes the audio and probes the container
PYAV = Requirement("av", "asr")
#: the package each ``asr`` backend imports
ASR_BACKENDS = {"faster-whisper": Requirement("faster_whisper", "asr"), "whisperx": Requirement("whisperx", "gpu")}


@dataclass(eq=False, kw_only=True)
class ASRStep(CacheDirStep):
    """The ASR backend of a transcription step: its settings (fields), loaded once per worker (:meth:`asr_backend`),
    and :meth:`transcribe` through the build's request cache. ``asr_device`` says where it runs, not what it outputs
    (not keyed); a subclass says whether it may transcribe at all (:meth:`may_transcribe`: else no package is
    needed)."""

    asr: str                           # faster-whisper (CPU, tiny.en) | whisperx (paper: large-v2 + align)
    asr_model_path: str | None         # local model folder (nothing downloads)
    asr_align_model_path: str | None   # wav2vec2 alignment model folder (WhisperX)
    asr_compute_type: str
    asr_batch_size: int                # WhisperX batch_size (keyed, as before issue 21)
    asr_language: str | None
    asr_device: str = execution_setting("cpu")

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.asr_device))

    def may_transcribe(self) -> bool:
        """Whether a video may go through ASR (its optional packages are then needed)."""
        return True

    def missing_requirements(self) -> list[Requirement]:
        if not self.may_transcribe():
            return []
        need = [PYAV, *([ASR_BACKENDS[self.asr]] if self.asr in ASR_BACKENDS else [])]
        return [r for r in need if r.missing()]

    def settings(self) -> Any:
        from ..models.asr import asr_settings_from

        return asr_settings_from(self)  # the fields have the config keys' names

    def setup(self, state: Any) -> None:
        super().setup(state)
        self._asr = None
        self.cache = self.asr_cache()

    def asr_cache(self) -> Any:
        """The ASR answers' cache: the build's shared model-output cache (its ``asr`` folder), reading the build's
        own request cache for older answers; that request cache alone outside a build."""
        own = self.request_cache()
        if not self.model_outputs:
            return own
        from ..models.request_cache import ModelOutputCache

        return ModelOutputCache(Path(self.model_outputs) / ASR_OUTPUTS, fallback=own)

    def teardown(self) -> None:
        self._asr = None
        if getattr(self, "cache", None) is not None:
            self.cache.close()

    def asr_backend(self) -> Any:
        """The ASR backend, loaded on first use (a shard whose videos all have transcripts loads none)."""
        if self._asr is None:
            from ..models.asr import make_asr

            self._asr = make_asr(self.settings())
        return self._asr

    def transcribe(self, path: str | Path, out: Out) -> dict[str, Any]:
        """The WhisperX-form result of the audio of ``path`` (counters ``asr_cache_hits`` / ``asr_requests``, and
        ``asr_cache_damaged`` for a cached answer that was not what was written, transcribed again)."""
        from ..models import media
        from ..models.asr import transcribe_cached

        damaged = getattr(self.cache, "damaged", 0)
        result, cached = transcribe_cached(self.asr_backend(), media.decode_audio(path), self.cache, ASR_CODE_VERSION)
        out.count("asr_cache_hits" if cached else "asr_requests")
        if getattr(self.cache, "damaged", 0) > damaged:
            out.count("asr_cache_damaged")
        return result


def _segments_out(t: Any) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]] | None]:
    segs = [{"start": float(s), "end": float(e), "text": str(x)} for x, s, e in t.segments]
    words = None
    if t.words is not None:
        words = [[{"word": str(w), "start": None if ws is None else float(ws), "end": None if we is None else float(we)}
                  for w, ws, we in seg] for seg in t.words]
    return segs, words


@dataclass(eq=False, kw_only=True)
class Transcribe(ASRStep):
    """Transcript of each video (docs/corpora/howtostep.md, Inputs) or ASR of its video file; duration from the
    container (PyAV)."""

    name = "transcribe"
    version = "1"
    id_field = "video_id"
    #: a video's transcript depends on its own transcript slice and media file: a redone shard reads (or decodes and
    #: transcribes) only the videos whose inputs changed
    row_wise = True
    #: a one-file input's split (the fit's artefact) is re-split where the file changed, not made again
    fit_updates_artefacts = True
    reads = {"video_id": str}
    writes = {"duration": Any, "transcript_source": str, "asr_model": str, "language": str, "segments": list,
              "words": Any}

    transcripts: Path | None = input_path(per_item=True)   # a file or folder in ``transcript_format``
    transcript_format: str | None                          # htm_raw|sentencified|whisperx|segments|asr
    media: Path | None = input_path(per_item=True)         # folder of <vid>.<mp4|webm|mkv>

    def may_transcribe(self) -> bool:
        return bool(self.media)  # PyAV probes every video file; one without a transcript is transcribed

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        state = super().fit(inputs)
        self._reader(inputs.artefact_dir)  # a one-file input is split once, here (streamed, in the artefact folder)
        return state

    def _reader(self, artefacts: str | Path | None) -> Any:
        """The transcript reader (None for ``asr``); a one-file input is split into ``artefacts`` unless done."""
        if self.transcript_format == "asr" or not self.transcripts:
            return None
        from ..sources.narrations import NarrationReader

        return NarrationReader(self.transcript_format, self.transcripts, work_dir=artefacts)

    def setup(self, state: Any) -> None:
        super().setup(state)
        from ..models import media

        self.reader = self._reader(_artefacts(state))
        self.media_files = media.find_media(self.media) if self.media else {}

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """The per-video inputs of ``rows``: each video's transcript (its split slice's sha256 or its file's content
        fingerprint) and its media file; a stat and an index look-up a video (the listings are built once)."""
        from ..core.fingerprint import hash_obj, item_file_sha

        vids = [str(r[self.id_field]) for r in rows]
        cache = self.__dict__.setdefault("_items", {})
        parts: dict[str, Any] = {}
        if self.transcript_format != "asr" and self.transcripts:
            art = _artefacts(state)
            if cache.get("reader_at") != art:
                cache["reader"], cache["reader_at"] = self._reader(art), art
            parts["transcripts"] = cache["reader"].item_digests(vids, memo)
        if self.media:
            if "media" not in cache:
                from ..models import media

                cache["media"] = media.find_media(self.media)
            parts["media"] = {v: item_file_sha(cache["media"].get(v), memo) for v in vids}
        return hash_obj(parts)

    def __getstate__(self) -> dict[str, Any]:  # the look-up tables of item_digest stay in their process
        return {k: v for k, v in self.__dict__.items() if k != "_items"}

    def process(self, rows: list[Row], out: Out) -> None:
        from ..models import media
        from ..sources.narrations import parse_whisperx_json

        for r in rows:
            vid = r["video_id"]
            path = self.media_files.get(vid)
            duration = None
            if path is not None:
                try:
                    duration = media.probe(path).duration
                except media.MediaError as e:
                    if self.reader is None or not self._has_transcript(vid):
                        out.drop(vid, e.reason, str(e))
                        continue
                    out.count("video_unreadable_with_transcript")
            try:
                if self.reader is not None and self._has_transcript(vid):
                    t = self.reader.read(vid)
                    source, asr_model = self.transcript_format, ""
                elif path is not None:
                    t = parse_whisperx_json(vid, self.transcribe(path, out))
                    source, asr_model = "asr", self.asr_backend().model_id
                else:
                    out.drop(vid, "no_transcript", "no transcript file and no video file")
                    continue
            except TranscriptError as e:
                out.drop(vid, e.reason, str(e))
                continue
            except media.MediaError as e:
                out.drop(vid, e.reason, str(e))
                continue
            segs, words = _segments_out(t)
            if not segs or sum(len(s["text"].split()) for s in segs) < 3:  # toolkit: < 3 words -> no_speech
                out.drop(vid, "no_speech", f"{len(segs)} segments")
                continue
            out.keep({**r, "duration": duration, "transcript_source": source, "asr_model": asr_model,
                      "language": t.language or "", "segments": segs, "words": words})

    def _has_transcript(self, vid: str) -> bool:
        return self.reader.has(vid)  # one index look-up or stat (issue 19: a scan of every split file per video)


def _artefacts(state: Any) -> Path | None:
    return Path(state["_artefacts"]) if isinstance(state, dict) and state.get("_artefacts") else None
