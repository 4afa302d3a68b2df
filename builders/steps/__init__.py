"""Steps shared by several corpora, each a dataclass of its own parameters (``builders/core/step.py``):
HowTo100M's metadata sources (:mod:`.howto100m`), the transcript loader (:mod:`.transcripts`) and speech recognition
(:mod:`.asr`: the ASR parameters and backend of any transcription step, and HowToStep's ``Transcribe``).

A corpus's ``pipeline.py`` constructs them from its config; they never see a corpus config.
"""
