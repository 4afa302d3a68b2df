from __future__ import annotations

from builders.models.nlp import ContentLemmatizer


def test_content_lemmas_follow_spec_3_0():
    lem = ContentLemmatizer()
    spoken, title, step = lem(["so now were gonna add in two cups of flour and just mix that together",
                               "The BEST Banana Bread Recipe", "Stir in the chopped walnuts."])
    assert {"add", "cup", "flour", "mix"} <= spoken
    assert "two" not in spoken and "so" not in spoken  # numerals are not content words; stop words removed
    assert {"banana", "bread", "recipe", "good"} <= title  # lowercased first, then lemmatised ("best" -> "good")
    assert {"stir", "chop", "walnut"} <= step
    assert all(len(x) >= 2 and x.isalpha() for s in (spoken, title, step) for x in s)


def test_memoised_and_order_preserving():
    lem = ContentLemmatizer()
    a = lem(["whisk the eggs", "fold in the cream", "whisk the eggs"])
    assert a[0] == a[2] and len(a) == 3
    assert lem([]) == []
