"""Recipe filters, dishes, splits and ingredient overlap of the MARC corpus, as pure functions
(docs/corpora/marc.md; Lin et al., ACL 2020, §2, A.1)."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
_PARENS = re.compile(r"\([^)]*\)")
#: quantities dropped from ingredient lines (Lin et al., ACL 2020, §2.3, A.1.4; NFKC turns ½ into 1⁄2 with a fraction
#: slash)
_QUANTITY = re.compile(r"(?<!\w)[\d½¼¾⅓⅔⅛⁄/.\-]+(?!\w)")

#: units and non-ingredient nouns removed from ingredient terms (toolkit list, docs/corpora/marc.md)
NON_INGREDIENT_NOUNS = frozenset([
    "cup", "tablespoon", "tbsp", "teaspoon", "tsp", "ounce", "oz", "pound", "lb", "gram", "g", "kg", "ml", "l",
    "liter", "litre", "pinch", "dash", "can", "package", "jar", "piece", "slice", "inch", "stick", "quart",
    "pint", "taste", "serving", "garnish", "temperature"
])


def normalise_title(title: str) -> str:
    """NFKC, whitespace collapsed, stripped (case kept)."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", title)).strip()


def title_words(title: str) -> list[str]:
    """Casefolded ``\\w+`` tokens of a title (common-title-word filter of Lin et al., ACL 2020, A.1.1; dishes)."""
    return _WORD.findall(unicodedata.normalize("NFKC", title).casefold())


def dish_id(title: str) -> str:
    """Casefolded title tokens joined by ``_`` (``chewy_chocolate_chip_cookies``, the ARA naming; Lin et al., ACL 2020,
    §2)."""
    return "_".join(title_words(title))


def common_title_word_mask(titles: Sequence[str], quantile: float = 0.5) -> list[bool]:
    """Filter 4 of A.1.1, "titles whose words are in the top 50% most common words": rank the distinct title words by
    frequency, f* = the frequency at rank ⌈V·quantile⌉; keep a title iff every word has frequency >= f* (ties at the
    cut are kept). A title without a word is dropped."""
    words = [title_words(t) for t in titles]
    freq = Counter(w for ws in words for w in ws)
    cut = title_word_cut(freq, quantile)
    return [title_passes(ws, freq, cut) for ws in words]


def title_word_cut(freq: Mapping[str, int], quantile: float = 0.5) -> int | None:
    """f* of :func:`common_title_word_mask` from the title-word counts (streamed: the counts are all it needs);
    None when there is no word."""
    if not freq:
        return None
    ranked = sorted(freq.values(), reverse=True)
    return ranked[max(1, math.ceil(len(ranked) * quantile)) - 1]


def title_passes(words: Sequence[str], freq: Mapping[str, int], cut: int | None) -> bool:
    """A title passes filter 4 when it has a word and every word's count is >= the cut."""
    return cut is not None and bool(words) and all(freq.get(w, 0) >= cut for w in words)


def sha1_hex(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def cap_recipes(recipe_ids: Sequence[str], cap: int) -> list[str]:
    """At most ``cap`` recipes of a dish: the ones with the smallest sha1(recipe_id) (toolkit rule, ``dish_capped``)."""
    return sorted(recipe_ids, key=sha1_hex)[:cap] if len(recipe_ids) > cap else list(recipe_ids)


def split_counts(n_dishes: int, test: int = 103, validation: int = 94, paper_total: int = 4262) -> tuple[int, int]:
    """(test, validation) dish counts: the paper's 103 / 94 of 4,262 scaled to ``n_dishes`` (rounded, at least 1 each
    when there are >= 3 dishes; Lin et al., ACL 2020, §2)."""
    if n_dishes >= paper_total:
        return test, validation
    n_test = round(n_dishes * test / paper_total)
    n_val = round(n_dishes * validation / paper_total)
    if n_dishes >= 3:
        n_test, n_val = max(1, n_test), max(1, n_val)
    return n_test, n_val


def dish_splits(dish_ids: Iterable[str], test: int = 103, validation: int = 94,
                paper_total: int = 4262) -> dict[str, str]:
    """Split by dish: dishes ordered by sha1(dish_id); the first go to test, the next to validation, the rest to
    train (Lin et al., ACL 2020, §2: 103 / 94 / 4,065 dishes)."""
    ordered = sorted(set(dish_ids), key=sha1_hex)
    n_test, n_val = split_counts(len(ordered), test, validation, paper_total)
    out = {}
    for i, d in enumerate(ordered):
        out[d] = "test" if i < n_test else ("validation" if i < n_test + n_val else "train")
    return out


def videos_per_dish(n_text: int, ratio: float = 77550 / 48852, lo: int = 3, hi: int = 100) -> int:
    """``clamp(round(rho · n_text), 3, 100)`` video recipes per dish (Lin et al., ACL 2020, §2, Table 1; rho = 77,550 /
    48,852)."""
    return int(min(hi, max(lo, round(ratio * n_text))))


def clean_ingredient_line(line: str) -> str:
    """Casefold, remove parentheses, cut at the first comma, drop quantities (docs/corpora/marc.md)."""
    text = _PARENS.sub(" ", unicodedata.normalize("NFKC", line).casefold())
    text = text.split(",", 1)[0]
    text = _QUANTITY.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


def _non_ingredient(word: str) -> bool:
    """A unit or non-ingredient noun, also in a plural the tagger left unlemmatised ("cups" tagged PROPN)."""
    return word in NON_INGREDIENT_NOUNS or (word.endswith("s") and word[:-1] in NON_INGREDIENT_NOUNS) \
        or (word.endswith("es") and word[:-2] in NON_INGREDIENT_NOUNS)


def ingredient_terms(noun_lemmas: Iterable[str]) -> set[str]:
    """The ingredient terms of one line from its NOUN/PROPN lemmas: units and non-ingredient nouns removed."""
    return {w for w in (x.casefold() for x in noun_lemmas) if w and not _non_ingredient(w) and _WORD.search(w)}


def ingredient_match(a: set[str], b: set[str]) -> float:
    """Overlap coefficient ``|A ∩ B| / min(|A|, |B|)``, 0 if either is empty (the paper gives no denominator:
    docs/corpora/marc.md, Departures from the paper)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def length_ok(n_a: int, n_b: int, max_ratio: float = 2.0) -> bool:
    """Text-text pairs: neither recipe has more than ``max_ratio`` times the other's instructions (Lin et al., ACL 2020,
    A.1.4)."""
    lo, hi = sorted((n_a, n_b))
    return lo > 0 and hi <= max_ratio * lo


def dish_pairs(recipes: Sequence[tuple[str, str, int, set[str]]], text_match: float = 0.70,
               video_match: float = 0.90, max_length_ratio: float = 2.0
               ) -> tuple[list[dict[str, object]], list[tuple[str, str]]]:
    """Within-dish recipe pairs with ingredient and length pruning (Lin et al., ACL 2020, §2.3, A.1.4).

    ``recipes``: ``(recipe_id, modality "text"|"video", number of instructions, ingredient terms)``. Every unordered
    pair is considered once; text-text and text-video pairs need ``match >= text_match``, video-video
    ``>= video_match``; text-text pairs are also dropped when one recipe has more than ``max_length_ratio`` times
    the other's instructions. ``recipe_a`` is the text side of a text-video pair, else the smaller recipe id.
    Returns the kept pairs (``pair_type``, ``recipe_a``, ``recipe_b``, ``ingredient_match``) and the dropped ones
    as ``(pair key, reason)`` with reasons ``no_ingredients``, ``ingredient_mismatch``, ``length_mismatch``.
    """
    kept: list[dict[str, object]] = []
    dropped: list[tuple[str, str]] = []
    ordered = sorted(recipes, key=lambda r: r[0])
    for i in range(len(ordered)):
        for j in range(i + 1, len(ordered)):
            a, b = ordered[i], ordered[j]
            if a[1] == "video" and b[1] == "text":
                a, b = b, a
            kinds = {a[1], b[1]}
            pair_type = "text_text" if kinds == {"text"} else ("video_video" if kinds == {"video"} else "text_video")
            key = f"{a[0]}|{b[0]}"
            if not a[3] or not b[3]:
                dropped.append((key, "no_ingredients"))
                continue
            match = ingredient_match(a[3], b[3])
            if match < (video_match if pair_type == "video_video" else text_match):
                dropped.append((key, "ingredient_mismatch"))
                continue
            if pair_type == "text_text" and not length_ok(a[2], b[2], max_length_ratio):
                dropped.append((key, "length_mismatch"))
                continue
            kept.append({"pair_type": pair_type, "recipe_a": a[0], "recipe_b": b[0], "ingredient_match": match})
    return kept, dropped
