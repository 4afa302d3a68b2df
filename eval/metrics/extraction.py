"""Recipe-extraction metrics against recipe-scrapers output (docs/evaluation.md, ``recipe_pages``).

Pure functions: the title normalisation and comparison, the recipe-scrapers-compatible instruction list built from
extracted steps, item normalisation, exact list equality and multiset item precision / recall / F1.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

_WS_RE = re.compile(r"\s+")
_NON_WORD_RE = re.compile(r"\W+")


class ItemScores(NamedTuple):
    """Multiset item precision, recall and F1 of one page."""

    precision: float
    recall: float
    f1: float


def normalize_title(title: str | None) -> str:
    """Title normalisation: HTML unescape, NFKC, whitespace collapse (case kept)."""
    text = unicodedata.normalize("NFKC", html.unescape(title or ""))
    return _WS_RE.sub(" ", text).strip()


def titles_match(predicted: str | None, expected: str | None) -> bool:
    """Exact title match after :func:`normalize_title`."""
    return normalize_title(predicted) == normalize_title(expected)


def normalize_item(item: str) -> str:
    """Item normalisation: NFKC, casefold, runs of non-word characters -> one space, stripped."""
    text = unicodedata.normalize("NFKC", item).casefold()
    return _NON_WORD_RE.sub(" ", text).strip()


def normalize_items(items: Iterable[str]) -> list[str]:
    """Normalised items, empty ones dropped."""
    return [n for n in (normalize_item(i) for i in items if isinstance(i, str)) if n]


def _step_fields(step: Any) -> tuple[str, str | None, str | None]:
    if isinstance(step, dict):
        return str(step.get("text") or ""), step.get("section"), step.get("step_name")
    text = step[0] if len(step) > 0 else ""
    section = step[1] if len(step) > 1 else None
    step_name = step[2] if len(step) > 2 else None
    return str(text or ""), section, step_name


def scrapers_instruction_list(steps: Sequence[Any]) -> list[str]:
    """The recipe-scrapers-compatible list from ``(text, section, step_name)`` steps: a section name before
    the first step of its section, a ``step_name`` before its text unless the text starts with the name minus a
    trailing ``.``, then the text."""
    out: list[str] = []
    current: str | None = None
    for step in steps:
        text, section, step_name = _step_fields(step)
        if section and section != current:
            out.append(section)
        current = section or None
        if step_name and not text.startswith(step_name.rstrip(".")):
            out.append(step_name)
        out.append(text)
    return out


def exact_list_match(predicted: Iterable[str], expected: Iterable[str]) -> bool:
    """Equality of the normalised lists (order and multiplicity count)."""
    return normalize_items(predicted) == normalize_items(expected)


def item_scores(predicted: Iterable[str], expected: Iterable[str]) -> ItemScores:
    """Multiset precision / recall / F1 of normalised items; two empty lists score 1, one empty list 0."""
    pred, gold = Counter(normalize_items(predicted)), Counter(normalize_items(expected))
    n_pred, n_gold = sum(pred.values()), sum(gold.values())
    if n_pred == 0 and n_gold == 0:
        return ItemScores(1.0, 1.0, 1.0)
    common = sum((pred & gold).values())
    precision = common / n_pred if n_pred else 0.0
    recall = common / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return ItemScores(precision, recall, f1)


def pick_record(titles: Sequence[str], expected_title: str | None) -> int | None:
    """The index of the first record whose normalised title equals the expected one, else 0 (``None`` when
    there is no record)."""
    if not titles:
        return None
    want = normalize_title(expected_title)
    for i, title in enumerate(titles):
        if normalize_title(title) == want:
            return i
    return 0


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; NaN for no values (reported as null)."""
    return sum(values) / len(values) if values else float("nan")
