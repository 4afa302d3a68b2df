"""Shared test fixtures: the real data of ``../shared/data`` (never copied into the repository)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _repo_root() -> Path:
    """The repository root: the nearest folder above this file holding ``pyproject.toml`` (works from any conftest)."""
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").is_file())


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo>/../shared/data``; a missing folder fails the test under CI (env ``CI`` set) and skips it elsewhere."""
    path = _repo_root().parent / "shared" / "data"
    if not path.is_dir():
        message = f"real data fixtures not found at {path}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


