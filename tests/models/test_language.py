"""builders.models.language: TAN's seeded langdetect filter (spec howtostep.md §3.2 (a))."""

from __future__ import annotations

import functools
import random
import subprocess
import sys

import pytest

from builders.models.language import english_probabilities, sample_captions, tan_language_filter
from builders.ops.sentencify import narrations_from_transcript

pytest.importorskip("langdetect")

ENGLISH = [
    "today we are going to make a delicious apple pie",
    "first you need to peel the apples and cut them",
    "then mix the flour with the butter and the sugar",
    "put the dough in the fridge for about an hour",
    "roll it out and place it in the pie pan",
    "now pour the apple filling into the pan",
    "cover it with the rest of the dough",
]
GERMAN = [
    "heute machen wir zusammen einen leckeren Apfelkuchen",
    "zuerst musst du die Äpfel schälen und klein schneiden",
    "dann das Mehl mit der Butter und dem Zucker mischen",
    "den Teig für eine Stunde in den Kühlschrank stellen",
    "den Teig ausrollen und in die Form legen",
    "jetzt die Apfelfüllung in die Form geben",
]
SPANISH = [
    "hoy vamos a preparar una deliciosa tarta de manzana",
    "primero hay que pelar las manzanas y cortarlas en trozos",
    "luego mezclamos la harina con la mantequilla y el azúcar",
    "dejamos la masa en la nevera durante una hora",
    "estiramos la masa y la ponemos en el molde",
]


def test_langdetect_is_imported_lazily():
    code = "import sys, builders.models.language, builders.ops.sentencify; print('langdetect' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
    english_probabilities(["hello there my friend how are you"])
    assert "langdetect" in sys.modules
    from langdetect import DetectorFactory

    assert DetectorFactory.seed == 0


def test_sample_captions_is_seeded():
    assert sample_captions(ENGLISH, seed=2023) == random.Random(2023).sample(ENGLISH, 5)
    assert sample_captions(ENGLISH, seed=2023) == sample_captions(ENGLISH, seed=2023)
    assert sample_captions(ENGLISH[:5]) == ENGLISH[:5]  # not more than 5: all, in order
    assert sample_captions(ENGLISH[:3]) == ENGLISH[:3]


def test_english_passes_german_and_spanish_fail():
    ok, mean = tan_language_filter(ENGLISH)
    assert ok and mean > 0.9
    assert tan_language_filter(ENGLISH) == (ok, mean)  # deterministic (DetectorFactory.seed = 0, Random(2023))
    for texts in (GERMAN, SPANISH):
        ok, mean = tan_language_filter(texts)
        assert not ok and mean < 0.1


def test_english_probabilities():
    probs = english_probabilities([ENGLISH[0], GERMAN[0], "12 34 56 78", ""])
    assert probs[0] > 0.9 and probs[1] < 0.1
    assert probs[2:] == [0.0, 0.0]  # langdetect raises on text without letters: 0


def test_short_and_unscorable_captions():
    assert tan_language_filter(["yes", "ok then", "we mix it"]) == (False, 0.0)  # < 4 words: none scorable
    assert tan_language_filter(["1 2 3 4", "5 6 7 8"]) == (False, 0.0)  # langdetect raises: skipped
    ok, mean = tan_language_filter(["1 2 3 4", ENGLISH[0], "ok"])  # only the English caption is scored
    assert ok and mean == pytest.approx(english_probabilities([ENGLISH[0]])[0])


def test_as_english_check_of_the_flow():
    german = [(t + ".", 4.0 * i, 4.0 * i + 3.0) for i, t in enumerate(GERMAN)]
    english = [(t + ".", 4.0 * i, 4.0 * i + 3.0) for i, t in enumerate(ENGLISH)]
    check = functools.partial(tan_language_filter, seed=2023)
    result = narrations_from_transcript("segments", german, english_check=check)
    assert (result.reason, result.detail) == ("not_english", "(a) on the sentences: langdetect mean P(en) 0.000")
    result = narrations_from_transcript("segments", english, english_check=check)
    assert result.reason is None and len(result.sentences) == 7
