"""The English filter of the text recipes (docs/corpora/marc.md; Lin et al., ACL 2020, A.1.1): py3langid's language of
a text, or the declared language of a short one."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .text import collapse

MAX_LANGID_CHARS = 20_000
MIN_LANGID_CHARS = 20  # English filter (Lin et al., ACL 2020, A.1.1): shorter texts take the declared language


@lru_cache(maxsize=1)
def _langid() -> Any:
    import py3langid  # model inside the wheel (no download)

    return py3langid


def primary_language(tag: str | None) -> str:
    """``en`` of ``en-US`` / ``en_GB`` (lower case); ``""`` for ``None``."""
    return re.split(r"[-_]", (tag or "").strip(), maxsplit=1)[0].lower()


def detect_language(text: str, declared: str | None = None) -> str:
    """English filter (Lin et al., ACL 2020, A.1.1): py3langid's language of ``text``; texts under 20 characters take
    the declared language's primary subtag (``""`` when none is declared)."""
    text = collapse(text)
    if len(text) < MIN_LANGID_CHARS:
        return primary_language(declared)
    lang, _score = _langid().classify(text[:MAX_LANGID_CHARS])
    return str(lang)
