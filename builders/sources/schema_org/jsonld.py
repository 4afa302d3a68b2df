"""JSON-LD of the Schema.org Recipe extraction (docs/corpora/marc.md, "Pipeline" step 1).

Every ``<script type="application/ld+json">`` block goes through the repair chain (toolkit), stopping at the first
success: ``json.loads(strict=False)``; strip ``<!-- -->`` / CDATA wrappers and trailing ``;``; double backslashes that
do not start a valid JSON escape; delete commas before ``}`` / ``]`` (outside strings). A node is a Recipe iff its
``@type`` (a string or a list) is ``Recipe`` or an IRI ending in ``/Recipe`` (also the compact ``schema:Recipe``),
case-insensitively; Recipes are found in objects, lists, ``@graph`` and any nesting (``mainEntity``, ...).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSONLD_CHARS = 2_000_000  # one ld+json block; longer blocks count as unparseable
MAX_DEPTH = 64  # JSON / microdata nesting followed when looking for Recipes and flattening instructions

_JSON_ESCAPE_RE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])|\\')
_TRAILING_COMMA_RE = re.compile(r'"(?:[^"\\]|\\.)*"|,(\s*[}\]])', re.DOTALL)
_WRAPPER_HEAD_RE = re.compile(r"^\s*(?:<!--|(?://|/\*)?\s*<!\[CDATA\[\s*(?:\*/)?)")
_WRAPPER_TAIL_RE = re.compile(r"(?:-->|(?://|/\*)?\s*\]\]>\s*(?:\*/)?|;)\s*$")


def _as_text(value: Any, depth: int = 0) -> str:
    """A JSON-LD value as text: a string, the first usable item of a list, or a dict's ``@value`` / ``name`` /
    ``text``; numbers as written; anything else ``""``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None or depth > 4:
        return ""
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        for item in value:
            text = _as_text(item, depth + 1)
            if text.strip():
                return text
        return ""
    if isinstance(value, dict):
        for key in ("@value", "name", "text"):
            text = _as_text(value.get(key), depth + 1)
            if text.strip():
                return text
    return ""


def _get(node: dict[str, Any], key: str) -> Any:
    """``node[key]``, else the value of a key equal to ``key`` up to case (``RecipeInstructions``), else ``None``."""
    if key in node:
        return node[key]
    low = key.lower()
    for k, v in node.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


def _types(node: dict[str, Any]) -> list[str]:
    """The local names of a node's ``@type`` values, casefolded (``http://schema.org/HowToStep`` -> ``howtostep``)."""
    raw = node.get("@type")
    values = raw if isinstance(raw, list) else [raw]
    out = []
    for value in values:
        if isinstance(value, str) and value.strip():
            out.append(re.split(r"[/#:]", value.strip())[-1].casefold())
    return out


def is_recipe_type(value: Any) -> bool:
    """``@type`` is ``Recipe``, a list containing it, or an IRI ending in ``/Recipe`` (case-insensitive;
    the compact ``schema:Recipe`` too)."""
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, str):
            low = item.strip().casefold()
            if low == "recipe" or low.endswith("/recipe") or low.endswith(":recipe"):
                return True
    return False


# --------------------------------------------------------------------------------------------- repair chain


def _strip_wrappers(text: str) -> str:
    """Remove ``<!-- -->`` and ``//<![CDATA[`` / ``]]>`` wrappers and trailing ``;`` (repeatedly, they nest)."""
    for _ in range(6):
        stripped = _WRAPPER_TAIL_RE.sub("", _WRAPPER_HEAD_RE.sub("", text, count=1), count=1).strip()
        if stripped == text:
            break
        text = stripped
    return text


def _double_invalid_backslashes(text: str) -> str:
    """``don\\'t`` -> ``don\\\\'t``: a backslash that does not start a valid JSON escape is doubled."""
    return _JSON_ESCAPE_RE.sub(lambda m: m.group(0) if m.group(1) else "\\\\", text)


def _drop_trailing_commas(text: str) -> str:
    """Delete commas directly before ``}`` / ``]`` outside JSON strings."""
    return _TRAILING_COMMA_RE.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(0), text)


def _loads(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text, strict=False)
    except (ValueError, RecursionError):
        return False, None


def parse_jsonld(text: str) -> tuple[bool, Any]:
    """``(ok, value)`` of one ld+json block through the repair chain of the module docstring (stop at the first
    success)."""
    if len(text) > MAX_JSONLD_CHARS:
        return False, None
    text = text.strip()
    ok, value = _loads(text)
    if ok:
        return ok, value
    for repair in (_strip_wrappers, _double_invalid_backslashes, _drop_trailing_commas):
        text = repair(text)
        ok, value = _loads(text)
        if ok:
            return ok, value
    return False, None


def find_recipe_nodes(value: Any, depth: int = 0) -> list[dict[str, Any]]:
    """Recipe nodes of a JSON-LD value in document order: objects, lists, ``@graph`` and any nesting
    (``mainEntity``, ...); a Recipe's own properties are not searched further."""
    if depth > MAX_DEPTH:
        return []
    if isinstance(value, dict):
        if is_recipe_type(value.get("@type")):
            return [value]
        return [node for item in value.values() for node in find_recipe_nodes(item, depth + 1)]
    if isinstance(value, list):
        return [node for item in value for node in find_recipe_nodes(item, depth + 1)]
    return []
