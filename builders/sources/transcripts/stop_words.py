"""The caption.json check (docs/corpora/sieve_swap.md and docs/corpora/howtostep.md, "Inputs"): HowTo100M
``caption.json`` (stop words removed) passed instead of ``raw_caption.json`` shows as a long text without one English
stop word."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from .transcript import Segment

logger = logging.getLogger(__name__)

STOPWORD_CHECK_MIN_TOKENS = 50  # caption.json (stop words removed) instead of raw_caption.json?
_TOKEN_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")


@cache
def english_stop_words() -> frozenset[str]:
    """spaCy's English stop words (a plain set; no model is loaded), or empty when spaCy is not installed.

    The list is a plain module (``spacy/lang/en/stop_words.py``, no import inside) loaded by path: importing it
    through the package runs ``spacy/__init__`` (2.4 s of CPU in every worker, issue 19). If it cannot be loaded so,
    the package import is the fallback."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("spacy")  # finds the package without running its __init__
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "lang" / "en" / "stop_words.py"
        mod_spec = importlib.util.spec_from_file_location("_procvid_spacy_en_stop_words", path)
        if path.is_file() and mod_spec is not None and mod_spec.loader is not None:
            module = importlib.util.module_from_spec(mod_spec)
            try:
                mod_spec.loader.exec_module(module)
                return frozenset(module.STOP_WORDS)
            except Exception:  # noqa: BLE001 - a changed layout: the package import below
                pass
    try:
        from spacy.lang.en.stop_words import (
            STOP_WORDS,  # imported lazily: importing spacy takes seconds
        )
    except ImportError:
        logger.warning("spaCy is not installed: the caption.json stop-word check is skipped")
        return frozenset()
    return frozenset(STOP_WORDS)


def lacks_stop_words(segments: Iterable[Segment], min_tokens: int = STOPWORD_CHECK_MIN_TOKENS) -> bool:
    """True when the text has at least ``min_tokens`` tokens and none is an English stop word (spaCy's list).

    The sign of HowTo100M ``caption.json`` (stop words removed) passed instead of ``raw_caption.json``
    (docs/corpora/sieve_swap.md, Inputs). Always False when the stop-word list is unavailable.
    """
    tokens = _TOKEN_RE.findall(" ".join(text for _, _, text in segments).lower())
    if len(tokens) < min_tokens or not (stop_words := english_stop_words()):
        return False
    return not any(token in stop_words for token in tokens)
