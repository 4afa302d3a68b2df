"""TAN's seeded language filter with ``langdetect`` (filter (a) of docs/corpora/howtostep.md; TAN
``sentencify_text/filters/utils.py::filter_language``).

``langdetect==1.0.9`` is imported lazily; ``DetectorFactory.seed = 0`` is set before the first detection, which makes
its probabilities deterministic. Captions are sampled with ``random.Random(seed)`` (``seed=2023``, the build seed), not
with the global ``random`` state TAN uses.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import cache
from typing import Any

__all__ = ["english_probabilities", "sample_captions", "tan_language_filter"]

SAMPLE = 5  # captions sampled (all if fewer)
MIN_WORDS = 4  # a caption is scored only with >= 4 whitespace words
THRESHOLD = 0.9  # English iff mean P(en) > 0.9
SEED = 2023  # all randomness of a HowToStep build is seeded with 2023


@cache
def _detect_langs() -> Any:
    """``langdetect.detect_langs`` with ``DetectorFactory.seed = 0`` set first (lazy import, filter (a))."""
    try:
        from langdetect import DetectorFactory, detect_langs
    except ImportError as err:  # pragma: no cover - langdetect is a project dependency
        raise ImportError("the language filter needs langdetect (pip install langdetect==1.0.9)") from err
    DetectorFactory.seed = 0
    return detect_langs


def _p_english(text: str) -> float | None:
    """P(en) of one text: 0 when ``en`` is not among langdetect's candidates, None when langdetect raises (no
    letters: numbers, symbols)."""
    from langdetect.lang_detect_exception import LangDetectException

    try:
        langs = _detect_langs()(text)
    except LangDetectException:
        return None
    return next((float(lang.prob) for lang in langs if lang.lang == "en"), 0.0)


def english_probabilities(texts: Sequence[str]) -> list[float]:
    """langdetect's probability of ``en`` for each text; 0.0 when ``en`` is absent or langdetect raises."""
    return [p if (p := _p_english(str(t))) is not None else 0.0 for t in texts]


def sample_captions(texts: Sequence[str], seed: int = SEED, sample: int = SAMPLE) -> list[str]:
    """``random.Random(seed).sample(texts, sample)``, or all texts (in order) when there are not more than
    ``sample`` (filter (a): "sample 5 captions, all if fewer")."""
    texts = [str(t) for t in texts]
    return random.Random(seed).sample(texts, sample) if len(texts) > sample else texts


def tan_language_filter(texts: Sequence[str], seed: int = SEED, sample: int = SAMPLE, min_words: int = MIN_WORDS,
                        threshold: float = THRESHOLD) -> tuple[bool, float]:
    """Filter (a) -> ``(is_english, mean P(en))``: sample 5 captions (:func:`sample_captions`), score those with
    at least 4 words, English iff the mean is above 0.9. As in TAN, a caption langdetect cannot score (it raises)
    is skipped; with no scorable caption the mean is 0 (not English)."""
    scored = [p for t in sample_captions(texts, seed, sample) if len(t.split()) >= min_words
              if (p := _p_english(t)) is not None]
    mean = sum(scored) / len(scored) if scored else 0.0
    return mean > threshold, mean
