"""builders.ops.text: clean / has_alpha (spec §3.0), hand-written expectations."""

import pytest

from builders.ops.text import clean, has_alpha


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("[Music] hello  >> world [Applause]", "hello world"),
        ("  >> so today   we're making\tpancakes\n", "so today we're making pancakes"),
        ("a[Music]b", "a b"),  # a tag is replaced by a space, never glues words
        (">>> chef: add salt", "chef: add salt"),  # ">>>" is a speaker mark too
        ("5 > 3 is true", "5 > 3 is true"),  # a single ">" is text
        ("[Music] [Applause] [Laughter]", ""),  # only non-speech tags -> empty
        ("[] keep", "keep"),  # 0-character tag matches {0,40}
        ("\ufb01ne \uff21\uff22\uff23\u00a0done", "fine ABC done"),  # NFKC: ligature, full-width, NBSP
        ("Add 2 Tbsp. Olive Oil, then STIR!", "Add 2 Tbsp. Olive Oil, then STIR!"),  # case, punctuation kept
    ],
)
def test_clean(raw, expected):
    assert clean(raw) == expected


def test_clean_tag_length_limit():
    forty = "[" + "x" * 40 + "]"  # 40 characters inside the brackets: removed
    forty_one = "[" + "x" * 41 + "]"  # 41: not a tag, kept
    assert clean(f"a {forty} b") == "a b"
    assert clean(f"a {forty_one} b") == f"a {forty_one} b"


def test_clean_idempotent():
    s = "  [Music]  >> hello\u00a0\u00a0 world  [Applause] "
    assert clean(clean(s)) == clean(s) == "hello world"


@pytest.mark.parametrize("text, expected", [("", False), ("123 !! ...", False), ("\u266a \u266a", False),
                                            ("a1", True), ("\u00e9", True), ("  x ", True)])
def test_has_alpha(text, expected):
    assert has_alpha(text) is expected
