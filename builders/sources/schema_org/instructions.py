"""``recipeInstructions`` flattened into steps (docs/corpora/marc.md, "Pipeline" step 1): strings, lists,
HowToStep, HowToSection / ItemList and HowToTip, in document order (Lin et al., ACL 2020, §2.1, A.1.1)."""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

from .jsonld import MAX_DEPTH, _as_text, _get, _types
from .text import clean_text, split_instruction_string, split_numbered_steps

HOWTO_TIP = "howto_tip"


class Step(NamedTuple):
    """One flattened instruction step: its text, its HowToSection name, its HowToStep ``name``."""

    text: str
    section: str | None = None
    step_name: str | None = None


def flatten_instructions(value: Any, counters: Counter | None = None, section: str | None = None,
                         depth: int = 0, in_list: bool = False) -> list[Step]:
    """``recipeInstructions`` -> steps in document order.

    A string is split (:func:`split_instruction_string`: a whole-recipe string at lines, HTML breaks and glued
    sentence ends; a string item of a list, ``in_list``, only at HTML breaks); a text that runs numbered steps
    together is split at its numbers (:func:`split_numbered_steps`); a list is flattened item by item; a HowToStep
    gives its
    ``text`` (else its ``name``), keeping ``name`` as ``step_name`` when both exist (a HowToStep without text that
    wraps ``itemListElement`` gives the wrapped steps); a HowToSection / ItemList recurses into ``itemListElement``
    (object or list) with ``section`` = its ``name``; a HowToTip is skipped and counted ``howto_tip``.
    """
    if depth > MAX_DEPTH or value is None or isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        value = str(value)
    if isinstance(value, str):
        if in_list:  # one item of a list: one step (its HTML breaks still split it)
            texts = split_instruction_string(value, newlines=False)
        else:  # the whole instructions as one string: lines, HTML breaks and glued sentence ends split it
            texts = split_instruction_string(value, glued=True)
        return [Step(piece, section, None) for text in texts for piece in split_numbered_steps(text)]
    if isinstance(value, list):
        return [step for item in value
                for step in flatten_instructions(item, counters, section, depth + 1, in_list=True)]
    if not isinstance(value, dict):
        return []
    types = _types(value)
    if "howtotip" in types:
        if counters is not None:
            counters[HOWTO_TIP] += 1
        return []
    elements = _get(value, "itemListElement")
    name = clean_text(_as_text(_get(value, "name")))
    text = clean_text(_as_text(_get(value, "text")))
    if "howtosection" in types or "itemlist" in types or (not text and elements is not None
                                                          and "howtostep" not in types):
        return flatten_instructions(elements, counters, name or section, depth + 1)
    if text:
        pieces = split_numbered_steps(text)
        if len(pieces) > 1:  # several numbered steps in one HowToStep: its name (usually the text again) is dropped
            return [Step(piece, section, None) for piece in pieces]
        return [Step(text, section, name or None)]
    if elements is not None:  # a HowToStep wrapping HowToDirection items
        inner = flatten_instructions(elements, counters, section, depth + 1)
        if inner and name and inner[0].step_name is None:
            inner[0] = inner[0]._replace(step_name=name)
        return inner
    return [Step(name, section, None)] if name else []
