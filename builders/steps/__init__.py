"""Steps shared by several corpora, each a dataclass of its own parameters (``builders/core/step.py``):
HowTo100M's metadata source (:mod:`.howto100m`) and the transcript loader (:mod:`.transcripts`).

A corpus's ``pipeline.py`` constructs them from its config; they never see a corpus config.
"""
