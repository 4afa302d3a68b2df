"""Steps shared by several corpora, each a dataclass of its own parameters (``builders/core/step.py``):
HowTo100M's metadata sources (:mod:`.howto100m`), the transcript loader (:mod:`.transcripts`) and speech recognition
(:mod:`.asr`: the ASR parameters and backend of any transcription step, and HowToStep's ``Transcribe``).

A corpus's ``pipeline.py`` constructs them from its config; they never see a corpus config.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

#: public name -> the module of this package that defines it (imported on first use: ``from builders.steps import
#: LoadTranscript`` loads ``transcripts`` only)
_EXPORTS = {
    **dict.fromkeys(["HowTo100MSelection", "HowTo100MSource"], "howto100m"),
    **dict.fromkeys(["LoadTranscript", "TranscriptStep"], "transcripts"),
    **dict.fromkeys(["ASRStep", "Transcribe"], "asr"),
    "CacheDirStep": "request_cache",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
