"""Microdata of the Schema.org Recipe extraction (docs/corpora/marc.md, "Pipeline" step 1).

Elements with ``itemscope`` and ``itemtype`` ``http(s)://schema.org/Recipe``; properties by ``itemprop`` (``name``,
``recipeIngredient`` / legacy ``ingredients``, ``recipeInstructions``, ``inLanguage``, ``url``), the value from
``content`` if present else the element text; an ``itemprop`` element with its own ``itemscope`` is a nested item
(e.g. a microdata HowToStep), and elements inside a nested ``itemscope`` belong to that item. A
``recipeInstructions`` element's text is split at ``<br>``, ``<p>``, ``<li>`` and other block boundaries, so one
element per step and one container of ``<li>`` / ``<p>`` steps both give one step per line.
"""

from __future__ import annotations

import re
from typing import Any

from .html_tree import _BLOCK_TAGS, _RAW_TEXT_TAGS, _Node
from .jsonld import MAX_DEPTH
from .text import collapse

_RECIPE_ITEMTYPE_RE = re.compile(r"(?:https?://)?(?:www\.)?schema\.org/recipe/?", re.IGNORECASE)


def _node_text(node: _Node, br: str = " ") -> str:
    """Text content of ``node`` (script/style skipped; ``br`` at each ``<br>``, a space at cell bounds)."""
    parts: list[str] = []
    stack: list[_Node | str] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        if item.tag in _RAW_TEXT_TAGS and item is not node:
            continue
        if item.tag == "br":
            parts.append(br)
        elif item.tag in _BLOCK_TAGS:
            parts.append(" ")
            stack.append(" ")
        stack.extend(reversed(item.children))
    return "".join(parts)


def _outermost(node: _Node, tag: str) -> list[_Node]:
    """Descendants ``tag`` of ``node`` not inside another such element, nor inside a nested ``itemscope``."""
    found: list[_Node] = []
    stack: list[_Node | str] = list(reversed(node.children))
    while stack:
        item = stack.pop()
        if isinstance(item, str) or "itemscope" in item.attrs:
            continue
        if item.tag == tag:
            found.append(item)
        else:
            stack.extend(reversed(item.children))
    return found


def _instruction_lines(node: _Node) -> list[str]:
    """Steps of a microdata ``recipeInstructions`` element: a container of two or more ``<li>`` (else
    ``<p>``) gives one step per child; otherwise the element is one step; ``<br>`` always splits (as in a string)."""
    parts = [node]
    for tag in ("li", "p"):
        children = _outermost(node, tag)
        if len(children) >= 2:
            parts = children
            break
    lines = [collapse(line) for part in parts for line in _node_text(part, br="\x00").split("\x00")]
    return [line for line in lines if line]


def _is_recipe_item(node: _Node) -> bool:
    if "itemscope" not in node.attrs:
        return False
    return any(_RECIPE_ITEMTYPE_RE.fullmatch(t) for t in node.attrs.get("itemtype", "").split())


def _item_types(node: _Node) -> list[str]:
    return [t.rstrip("/").rsplit("/", 1)[-1] for t in node.attrs.get("itemtype", "").split()]


def _prop_value(node: _Node, prop: str, depth: int) -> Any:
    """A microdata property's value: a nested item as a dict, else ``content``, else the element text
    (``href`` / ``src`` for a ``url``; the step lines of :func:`_instruction_lines` for ``recipeInstructions``)."""
    if "itemscope" in node.attrs:
        return _item_dict(node, depth + 1)
    if "content" in node.attrs:
        return node.attrs["content"]
    low = prop.lower()
    if low == "url" and (node.attrs.get("href") or node.attrs.get("src")):
        return node.attrs.get("href") or node.attrs.get("src")
    if node.tag == "meta":
        return ""
    if low == "recipeinstructions":
        return _instruction_lines(node)
    return collapse(_node_text(node))


def _item_dict(item: _Node, depth: int = 0) -> dict[str, Any]:
    """A microdata item as a JSON-LD-like dict: ``@type`` and each property (a list when repeated)."""
    out: dict[str, Any] = {"@type": _item_types(item)}
    if depth > MAX_DEPTH:
        return out
    props: dict[str, list[Any]] = {}
    stack: list[_Node | str] = list(reversed(item.children))
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            continue
        for name in node.attrs.get("itemprop", "").split():
            props.setdefault(name, []).append(_prop_value(node, name, depth))
        if "itemscope" in node.attrs:
            continue  # a nested item's properties belong to it
        stack.extend(reversed(node.children))
    for name, values in props.items():
        out[name] = values[0] if len(values) == 1 else values
    return out


def microdata_recipes(root: _Node) -> list[dict[str, Any]]:
    """The Recipe items of a page's microdata as JSON-LD-like dicts, in document order (nested Recipes too)."""
    found: list[dict[str, Any]] = []
    stack: list[_Node | str] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            continue
        if _is_recipe_item(node):
            found.append(_item_dict(node))
        stack.extend(reversed(node.children))
    return found
