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


# ------------------------------------------------------------------ the converted profile table
def _langdetect_probs(detect, text: str):
    from langdetect.lang_detect_exception import LangDetectException

    try:
        return [(lang.lang, lang.prob) for lang in detect(text)]
    except LangDetectException as e:
        return repr(e)


def test_the_profile_table_gives_langdetects_own_probabilities(tmp_path, monkeypatch):
    """Bit-identical to ``langdetect.detect_langs`` on real captions (the bundled Sieve & Swap sample), the texts above
    and mixed-language word salads."""
    import json
    from pathlib import Path

    import langdetect
    from langdetect import DetectorFactory
    from langdetect.detector import Detector

    from builders.models import language

    monkeypatch.setenv("PROCVID_MODEL_CACHE", str(tmp_path / "models"))
    table = language.profile_table()
    assert table.is_file() and table.is_relative_to(tmp_path / "models" / "langdetect")
    factory = language._table_factory(table)
    DetectorFactory.seed = 0

    def ours(text):
        d = Detector(factory)
        d.append(text)
        return d.get_probabilities()

    caps = json.loads((Path(language.__file__).parents[1] / "samples" / "sieve_swap" / "raw_caption.json").read_text())
    texts = [str(t) for v in caps.values() for t in v["text"]][:400] + ENGLISH + GERMAN + SPANISH
    rng = random.Random(0)
    words = " ".join(ENGLISH + GERMAN + SPANISH).split() + ["1", "2", "!", "ok"]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(200)]
    for text in texts:
        assert _langdetect_probs(ours, text) == _langdetect_probs(langdetect.detect_langs, text), text


def test_the_table_is_converted_once_and_then_read_without_the_profiles(tmp_path, monkeypatch):
    from langdetect import DetectorFactory

    from builders.models import language

    monkeypatch.setenv("PROCVID_MODEL_CACHE", str(tmp_path / "models"))
    first = language.profile_table()

    def no_json_profiles(self, directory):
        raise AssertionError("the JSON profiles were read again")

    monkeypatch.setattr(DetectorFactory, "load_profile", no_json_profiles)
    assert language.profile_table() == first
    monkeypatch.setattr(language, "_detect_langs", language._detect_langs.__wrapped__)
    assert tan_language_filter(ENGLISH)[0] is True and tan_language_filter(GERMAN)[0] is False


def test_an_unwritable_model_cache_falls_back_to_langdetects_loader(tmp_path, monkeypatch, caplog):
    from builders.models import language

    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("PROCVID_MODEL_CACHE", str(blocked / "models"))
    monkeypatch.setattr(language, "_detect_langs", language._detect_langs.__wrapped__)
    with caplog.at_level("WARNING", logger="builders.models.language"):
        detect = language._detect_langs()
    assert "PROCVID_MODEL_CACHE" in caplog.text
    import langdetect

    assert detect is langdetect.detect_langs
