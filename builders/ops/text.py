"""Text normalisation for Sieve & Swap: transcript cleaning.

Paper: Batra et al., ECCV 2024, §4.2; docs/corpora/sieve_swap.md (``clean``). Pure functions, no model, no I/O.
The PTB tokeniser of the YouCook2-format export (docs/corpora/sieve_swap.md, Outputs) lives
in ``loading_scripts.ptb``, beside its only user ``loading_scripts.sieve_swap.to_yc2_format`` (loading_scripts
import no builders).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["clean", "has_alpha"]

# -------------------------------------------------------------------------------------------------------- clean

_NON_SPEECH_TAG = re.compile(r"\[[^\]]{0,40}\]")  # [Music], [Applause], [Laughter], ... (toolkit rule)
_SPEAKER_MARK = re.compile(r">{2,}")  # ">>" speaker-change marks of YouTube captions (">>>" too)
_WHITESPACE = re.compile(r"\s+")


def clean(text: str) -> str:
    """Normalise one ASR segment or recipe string (docs/corpora/sieve_swap.md; Batra et al., ECCV 2024, §4.2 works on
    "ASR transcripts").

    NFKC; bracketed non-speech tags of at most 40 characters (``[Music]``) and ``>>`` speaker marks are replaced by
    a space (so ``"a[Music]b"`` -> ``"a b"``); runs of whitespace collapse to one space; the result is stripped.
    Case and punctuation are kept. ``clean(clean(x)) == clean(x)``.
    """
    text = unicodedata.normalize("NFKC", text)
    text = _NON_SPEECH_TAG.sub(" ", text)
    text = _SPEAKER_MARK.sub(" ", text)
    return _WHITESPACE.sub(" ", text).strip()


def has_alpha(text: str) -> bool:
    """True iff ``text`` holds at least one alphabetic character (``empty_transcript`` of docs/reason-codes.md: garbled
    segments)."""
    return any(ch.isalpha() for ch in text)
