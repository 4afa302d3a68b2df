"""TAN's seeded language filter with ``langdetect`` (filter (a) of docs/corpora/howtostep.md; TAN
``sentencify_text/filters/utils.py::filter_language``).

``langdetect==1.0.9`` is imported lazily; ``DetectorFactory.seed = 0`` is set before the first detection, which makes
its probabilities deterministic. Captions are sampled with ``random.Random(seed)`` (``seed=2023``, the build seed), not
with the global ``random`` state TAN uses.

langdetect reads its 55 JSON language profiles (87,598 n-grams) at the first detection of every process: 0.3-0.4 s,
most of a rebuild that re-checks one edited video. They are converted once per machine into an SQLite table in the
model cache (:func:`profile_table`, keyed by the langdetect version and its profile files in listing order, which is
langdetect's language order), and a process then reads only the n-grams its texts contain. The probabilities are
langdetect's own floats, so every detection is bit-identical to ``langdetect.detect_langs`` (tested).
"""

from __future__ import annotations

import array
import hashlib
import json
import logging
import os
import random
import sqlite3
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

__all__ = ["english_probabilities", "profile_table", "sample_captions", "tan_language_filter"]

log = logging.getLogger(__name__)

#: bump when the table's layout changes (part of its cache key)
TABLE_VERSION = "2"
_TABLE = "profiles.sqlite"

SAMPLE = 5  # captions sampled (all if fewer)
MIN_WORDS = 4  # a caption is scored only with >= 4 whitespace words
THRESHOLD = 0.9  # English iff mean P(en) > 0.9
SEED = 2023  # all randomness of a HowToStep build is seeded with 2023


class _Grams(dict):
    """langdetect's ``word_lang_prob_map`` read from the converted table on demand: ``ngram in grams`` loads the
    n-gram's probabilities (or remembers it is absent); ``grams[ngram]`` is then a plain dict look-up, which is all
    langdetect's ``Detector`` does with it."""

    def __init__(self, con: sqlite3.Connection, n_langs: int):
        super().__init__()
        self._con, self._n = con, n_langs
        self._absent: set[str] = set()

    def __contains__(self, gram: object) -> bool:
        if dict.__contains__(self, gram):
            return True
        if gram in self._absent or not isinstance(gram, str):
            return False
        row = self._con.execute("SELECT i, p FROM grams WHERE w = ?", (gram,)).fetchone()
        if row is None:
            self._absent.add(gram)
            return False
        values = array.array("d")
        values.frombytes(row[1])
        probs = [0.0] * self._n
        for i, v in zip(row[0], values):
            probs[i] = v
        self[gram] = probs
        return True


def _profiles_dir() -> Path:
    from langdetect import detector_factory

    return Path(detector_factory.PROFILES_DIRECTORY)


def _table_key(profiles: Path) -> dict[str, str]:
    """What the table depends on: the langdetect version and its profile files (names, sizes) in ``os.listdir``
    order, the order in which langdetect numbers its languages."""
    from importlib.metadata import version

    listing = [[name, (profiles / name).stat().st_size] for name in os.listdir(profiles)]
    return {"langdetect": version("langdetect"), "profiles": hashlib.sha256(json.dumps(listing).encode()).hexdigest(),
            "table": TABLE_VERSION, "byteorder": sys.byteorder}


def _write_table(factory: Any, out_dir: Path) -> dict[str, Any]:
    out_dir.mkdir(parents=True)
    con = sqlite3.connect(out_dir / _TABLE)
    try:
        con.execute("CREATE TABLE langs (i INTEGER PRIMARY KEY, lang TEXT)")
        # sparse (4 % of the probabilities are not 0): the languages' indices (one byte each) and their floats
        con.execute("CREATE TABLE grams (w TEXT PRIMARY KEY, i BLOB, p BLOB) WITHOUT ROWID")
        con.executemany("INSERT INTO langs VALUES (?, ?)", enumerate(factory.langlist))

        def rows() -> Any:
            for w, probs in factory.word_lang_prob_map.items():
                nz = [i for i, v in enumerate(probs) if v != 0.0]
                yield w, bytes(nz), array.array("d", [probs[i] for i in nz]).tobytes()

        con.executemany("INSERT INTO grams VALUES (?, ?, ?)", rows())
        con.commit()
    finally:
        con.close()
    return {"languages": len(factory.langlist), "ngrams": len(factory.word_lang_prob_map)}


def profile_table(cache: Path | None = None) -> Path:
    """The converted profile table (module docstring), made on first use under ``cache`` (default: the model
    cache, ``$PROCVID_MODEL_CACHE``); an unwritable cache raises ``OSError`` naming it."""
    from langdetect import DetectorFactory

    from .llm.converted import converted_folder
    from .text_encoder import model_cache_dir

    profiles = _profiles_dir()

    def convert(out_dir: Path) -> dict[str, Any]:
        factory = DetectorFactory()
        factory.load_profile(str(profiles))
        if len(factory.langlist) > 255:
            raise ValueError(f"{len(factory.langlist)} langdetect profiles: the table numbers languages in one byte")
        return _write_table(factory, out_dir)

    folder = converted_folder(profiles, cache or model_cache_dir(), "langdetect", _table_key(profiles), (_TABLE,),
                              convert)
    return folder / _TABLE


def _table_factory(table: Path) -> Any:
    """A stand-in for langdetect's ``DetectorFactory`` (what ``Detector.__init__`` reads) over the table."""
    from langdetect import DetectorFactory

    con = sqlite3.connect(f"file:{table}?mode=ro", uri=True, check_same_thread=False)
    langs = [lang for _, lang in con.execute("SELECT i, lang FROM langs ORDER BY i")]
    return SimpleNamespace(word_lang_prob_map=_Grams(con, len(langs)), langlist=langs, seed=DetectorFactory.seed)


@cache
def _detect_langs() -> Any:
    """``langdetect.detect_langs`` with ``DetectorFactory.seed = 0`` set first (lazy import, filter (a)), over the
    converted profile table; langdetect's own loader when the model cache cannot be written (said once)."""
    try:
        from langdetect import DetectorFactory, detect_langs
        from langdetect.detector import Detector
    except ImportError as err:  # pragma: no cover - langdetect is a project dependency
        raise ImportError("the language filter needs langdetect (pip install langdetect==1.0.9)") from err
    DetectorFactory.seed = 0
    try:
        factory = _table_factory(profile_table())
    except OSError as e:  # identical probabilities either way: only the 0.3 s profile load is not saved
        log.warning("langdetect reads its JSON profiles in this process: %s", e)
        return detect_langs

    def detect(text: str) -> Any:
        detector = Detector(factory)
        detector.append(text)
        return detector.get_probabilities()

    return detect


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
