"""Fixtures of the source-reader tests: the real data files of ``../shared/data`` (never copied into the repo)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def asr_items(shared_data: Path) -> list[dict[str, Any]]:
    """Items 0–2 of ``showhowto/showhowto_asr_examples.json``: real timed transcripts ``[{start, end, text}]``."""
    items = json.loads((shared_data / "showhowto" / "showhowto_asr_examples.json").read_text(encoding="utf-8"))
    return items[:3]
