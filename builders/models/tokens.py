"""Instruction tokens for the HMM+IBM1 aligner, with the part-of-speech ablations of MARC (Lin et al., ACL 2020,
§3.1 and Tables 2-3; docs/corpora/marc.md).

``Tokenizer(mode, spacy_model)`` maps a list of instruction texts to their token lists:

* ``all`` (the paper's main model): :func:`builders.ops.hmm_ibm1.tokenize`, i.e. NFKC-casefolded ``\\w+`` minus
  spaCy stop words; no tagger is loaded;
* ``nouns`` / ``nouns_verbs`` (the "HMM+IBM1 (nouns)" and "HMM+IBM1 (nouns and verbs)" rows of Tables 2-3): the
  text is first tagged by spaCy (the paper used NLTK's tagger; spaCy's ``en_core_web_sm`` also emits PTB-style
  ``tag_`` values) and only the words whose PTB tag is ``NN*`` (+ ``VB*``) are kept, then tokenised as above.

It lives in ``models/`` because it loads a spaCy model (lazily, on the first tagged call); tagged results are
memoised per distinct instruction string (up to ``MEMO_LIMIT`` of them). Used by the ``marc`` builder (``tokens:``
config key) and by the ``marc_ara`` evaluation protocol.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODES", "Tokenizer"]

#: the token modes of Lin et al., ACL 2020, Tables 2-3
MODES = ("all", "nouns", "nouns_verbs")
#: distinct instructions whose tagged tokens are kept (the memo starts again beyond it: memory stays bounded)
MEMO_LIMIT = 200_000


class Tokenizer:
    """Aligner tokens: NFKC-casefolded ``\\w+`` minus spaCy stop words; the ablation ``tokens: nouns | nouns_verbs``
    first keeps only the words whose PTB tag is NN* (+ VB*) (paper Tables 2-3)."""

    def __init__(self, mode: str, spacy_model: str) -> None:
        from ..ops.hmm_ibm1 import stop_words

        self.mode = mode
        self.stop = stop_words()
        self.spacy_model = spacy_model
        self._nlp: Any = None
        self._memo: dict[str, list[str]] = {}

    def _tagged(self, texts: list[str]) -> None:
        if self._nlp is None:
            import spacy

            self._nlp = spacy.load(self.spacy_model, disable=["parser", "ner", "lemmatizer"])
        prefixes = ("NN",) if self.mode == "nouns" else ("NN", "VB")
        from ..ops.hmm_ibm1 import tokenize

        for text, doc in zip(texts, self._nlp.pipe(texts, batch_size=256)):
            self._memo[text] = tokenize(" ".join(t.text for t in doc if t.tag_.startswith(prefixes)), self.stop)

    def __call__(self, instructions: list[str]) -> list[list[str]]:
        from ..ops.hmm_ibm1 import tokenize

        if self.mode == "all":
            return [tokenize(x, self.stop) for x in instructions]
        todo = list(dict.fromkeys(x for x in instructions if x not in self._memo))
        if todo:
            if len(self._memo) + len(todo) > MEMO_LIMIT:  # a cache, not a store: the fit reads every train pair
                self._memo.clear()
                todo = list(dict.fromkeys(instructions))
            self._tagged(todo)
        return [self._memo[x] for x in instructions]
