"""builders.ops.transcript_sentences: timed sentences from WhisperX words and raw caption lines (marc.md §3.5)."""

from __future__ import annotations

import pytest

from builders.ops.transcript_sentences import (
    interpolate_times,
    sentences_from_lines,
    sentences_from_words,
)


def split_on_period(text: str) -> list[str]:
    """A deterministic stand-in for punkt: split after '. ', '? ', '! '."""
    out, cur = [], ""
    for i, ch in enumerate(text):
        cur += ch
        if ch in ".?!" and (i + 1 == len(text) or text[i + 1] == " "):
            out.append(cur.strip())
            cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def test_interpolate_times():
    assert interpolate_times([None, 1.0, None, None, 4.0, None]) == [1.0, 1.0, 2.0, 3.0, 4.0, 4.0]
    with pytest.raises(ValueError):
        interpolate_times([None, float("nan")])


def test_sentences_from_words_times_from_first_and_last_word():
    words = [("add", 1.0, 1.4), ("the", 1.5, 1.6), ("flour.", 1.7, 2.2), ("Then", None, None), ("mix.", 3.0, 3.5)]
    out = sentences_from_words(words, split_on_period)
    assert out[0] == ("add the flour.", 1.0, 2.2)
    # "Then" has no time: its start interpolates between 1.7 and 3.0
    assert out[1][0] == "Then mix." and out[1][1] == pytest.approx(2.35) and out[1][2] == 3.5
    assert sentences_from_words([], split_on_period) == []


def test_sentences_from_lines_punctuated_joins_and_interpolates():
    lines = [("Add the flour. Then", 0.0, 4.0), ("mix it well.", 4.0, 6.0), ("Bake.", 6.0, 7.0)]
    out = sentences_from_lines(lines, split_on_period)
    assert [s for s, _, _ in out] == ["Add the flour.", "Then mix it well.", "Bake."]
    assert out[0][1] == 0.0 and out[0][2] == pytest.approx(4.0 * 14 / 19)  # ends at char 14 of a 19-char line
    assert out[1][1] == pytest.approx(4.0 * 15 / 19) and out[1][2] == pytest.approx(6.0)
    assert out[2][1:] == pytest.approx((6.0, 7.0))


def test_sentences_from_lines_unpunctuated_keeps_lines():
    lines = [("so now we add", 0.0, 2.0), ("the flour", 2.0, 3.0), ("and mix.", 3.0, 4.0), ("ok", 4, 5)]
    # 1 of 4 lines ends a sentence (< 30 %): one line per sentence
    assert sentences_from_lines(lines, split_on_period) == [("so now we add", 0.0, 2.0), ("the flour", 2.0, 3.0),
                                                            ("and mix.", 3.0, 4.0), ("ok", 4.0, 5.0)]
    assert sentences_from_lines([(" ", 0, 1)], split_on_period) == []


def test_with_punkt():
    punkt = pytest.importorskip("punkt")
    words = [(w, float(i), float(i) + 0.5) for i, w in enumerate(["Preheat", "the", "oven.", "Mr.", "Smith", "whisks", "eggs."])]
    out = sentences_from_words(words, punkt.sent_tokenize)
    assert [s for s, _, _ in out] == ["Preheat the oven.", "Mr. Smith whisks eggs."]
    assert out[1][1:] == (3.0, 6.5)
