"""Reader of the ``recipe_pages`` layout (docs/corpora/marc.md; tests/fixtures.json).

A folder of real recipe pages ``<key>.html.gz`` (or ``<key>.html``), each with ``<key>.expected.json`` (the fields the
recipe-scrapers library extracted: ``title``, ``instructions_list``, ``language``, ...), and ``INDEX.json``
(``{"items": [{"key": ...}, ...]}``) listing the keys. Without ``INDEX.json`` every ``*.expected.json`` is a page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.benchmarks.common import load_json
from eval.registry import EvalError, Warnings

EXPECTED_SUFFIX = ".expected.json"
_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


@dataclass(frozen=True)
class PageCase:
    """One page of the benchmark: its key, its HTML file and the recipe-scrapers fields."""

    key: str
    html_path: Path
    title: str
    instructions: list[str]
    language: str


def _index_keys(root: Path) -> list[str]:
    index = root / "INDEX.json"
    if not index.is_file():
        return sorted(p.name[: -len(EXPECTED_SUFFIX)] for p in root.glob(f"*{EXPECTED_SUFFIX}"))
    data = load_json(index, "recipe_pages index")
    items = data.get("items") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise EvalError(f"{index}: expected {{\"items\": [{{\"key\": ...}}, ...]}}")
    keys = []
    for item in items:
        key = item.get("key") if isinstance(item, dict) else item
        if not isinstance(key, str):
            raise EvalError(f"{index}: an item without a string \"key\": {str(item)[:80]}")
        keys.append(key)
    return keys


def _html_path(root: Path, key: str) -> Path | None:
    for suffix in (".html.gz", ".html"):
        path = root / f"{key}{suffix}"
        if path.is_file():
            return path
    return None


def _case(root: Path, key: str, warnings: Warnings) -> PageCase | None:
    if not _KEY_RE.fullmatch(key) or ".." in key:
        warnings.add("bad_key", f"page key {key[:80]!r} is not a plain file name")
        return None
    html_path = _html_path(root, key)
    expected_path = root / f"{key}{EXPECTED_SUFFIX}"
    if html_path is None or not expected_path.is_file():
        warnings.add("missing_page", f"{key}: no {key}.html(.gz) or no {key}{EXPECTED_SUFFIX}")
        return None
    try:
        expected: Any = load_json(expected_path, "expected fields")
    except EvalError as exc:
        warnings.add("malformed_expected", str(exc))
        return None
    if not isinstance(expected, dict):
        warnings.add("malformed_expected", f"{expected_path.name}: not a JSON object")
        return None
    title, instructions = expected.get("title"), expected.get("instructions_list")
    if not isinstance(title, str) or not isinstance(instructions, list) or not all(
            isinstance(i, str) for i in instructions):
        warnings.add("malformed_expected", f"{expected_path.name}: needs a string \"title\" and a list of strings "
                                           "\"instructions_list\"")
        return None
    language = expected.get("language")
    return PageCase(key, html_path, title, list(instructions), language if isinstance(language, str) else "")


def read_recipe_pages(root: Path, warnings: Warnings) -> list[PageCase]:
    """The pages of a ``recipe_pages`` folder in index order; unusable pages are skipped with a named warning
    (``bad_key``, ``missing_page``, ``malformed_expected``). A missing folder or no usable page is an error."""
    root = Path(root)
    if not root.is_dir():
        raise EvalError(f"--gt must be a recipe_pages folder (<key>.html.gz + <key>.expected.json): {root}")
    keys = _index_keys(root)
    cases = [case for case in (_case(root, key, warnings) for key in dict.fromkeys(keys)) if case is not None]
    if not cases:
        raise EvalError(f"{root}: no page with both <key>.html(.gz) and <key>{EXPECTED_SUFFIX}")
    return cases
