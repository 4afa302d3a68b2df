"""Instruction tokens and their POS ablations (paper 002 §3.7, Tables 2-3; marc.md §3.7)."""

from __future__ import annotations

import pytest

from builders.models.nlp import DEFAULT_SPACY_MODEL
from builders.models.tokens import MODES, Tokenizer

# Hand-checked against en_core_web_sm 3.8.0 tags:
#   Preheat/VB the/DT oven/NNP to/IN 350/CD degrees/NNS ./.
#   Whisk/VB the/DT eggs/NNS and/CC sugar/NN in/IN a/DT large/JJ bowl/NN ./.
#   Pour/VB the/DT batter/NN into/IN the/DT pan/NN and/CC bake/VB for/IN 30/CD minutes/NNS ./.
TEXTS = ["Preheat the oven to 350 degrees.",
         "Whisk the eggs and sugar in a large bowl.",
         "Pour the batter into the pan and bake for 30 minutes."]
EXPECTED = {
    # every \w+ word, casefolded, minus spaCy stop words (the, to, and, in, a, into, for)
    "all": [["preheat", "oven", "350", "degrees"],
            ["whisk", "eggs", "sugar", "large", "bowl"],
            ["pour", "batter", "pan", "bake", "30", "minutes"]],
    # NN* only (NNP "oven" included): verbs, the adjective and the numbers go
    "nouns": [["oven", "degrees"],
              ["eggs", "sugar", "bowl"],
              ["batter", "pan", "minutes"]],
    # NN* and VB*
    "nouns_verbs": [["preheat", "oven", "degrees"],
                    ["whisk", "eggs", "sugar", "bowl"],
                    ["pour", "batter", "pan", "bake", "minutes"]],
}


@pytest.mark.parametrize("mode", MODES)
def test_modes_on_hand_checked_sentences(mode):
    tok = Tokenizer(mode, DEFAULT_SPACY_MODEL)
    assert tok(TEXTS) == EXPECTED[mode]


def test_all_needs_no_tagger():
    tok = Tokenizer("all", DEFAULT_SPACY_MODEL)
    assert tok(["Add the SALT, then stir!"]) == [["add", "salt", "stir"]]
    assert tok._nlp is None  # mode "all" never loads spaCy


def test_tagged_modes_are_memoised_and_keep_order():
    tok = Tokenizer("nouns", DEFAULT_SPACY_MODEL)
    assert tok([]) == []
    out = tok([TEXTS[1], TEXTS[0], TEXTS[1]])
    assert out == [EXPECTED["nouns"][1], EXPECTED["nouns"][0], EXPECTED["nouns"][1]]
    assert set(tok._memo) == {TEXTS[0], TEXTS[1]}  # each distinct instruction tagged once
    nlp = tok._nlp
    assert tok(TEXTS[:1]) == EXPECTED["nouns"][:1] and tok._nlp is nlp  # the model is loaded once


def test_the_memo_is_bounded(monkeypatch):
    from builders.models import tokens

    monkeypatch.setattr(tokens, "MEMO_LIMIT", 2)
    tok = Tokenizer("nouns", DEFAULT_SPACY_MODEL)
    assert tok(TEXTS[:2]) == EXPECTED["nouns"][:2] and len(tok._memo) == 2
    assert tok(TEXTS[2:]) == EXPECTED["nouns"][2:]  # over the bound: the memo starts again
    assert set(tok._memo) == {TEXTS[2]}
    assert tok(TEXTS) == EXPECTED["nouns"]
