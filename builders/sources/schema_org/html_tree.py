"""One pass of the stdlib HTML parser over a page (docs/corpora/marc.md, "Pipeline" step 1): the ld+json script
texts, ``<html lang>``, and, when the page has microdata Recipe markup, a forgiving element tree for
:mod:`builders.sources.schema_org.microdata`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

MAX_HTML_CHARS = 6_000_000  # pages are capped at 5 MB by the readers; a longer string is cut here
MAX_TREE_DEPTH = 512  # open HTML elements kept on the tree builder's stack

_MICRODATA_RECIPE_RE = re.compile(r"itemtype\s*=\s*[\"']?[^\"'>]*schema\.org/recipe", re.IGNORECASE)

_VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                        "source", "track", "wbr", "keygen"})
_RAW_TEXT_TAGS = frozenset({"script", "style", "template", "noscript", "textarea", "title"})
_BLOCK_TAGS = frozenset({"address", "article", "aside", "blockquote", "dd", "div", "dl", "dt", "figcaption",
                         "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
                         "main", "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "th", "thead", "tr",
                         "ul"})
_CLOSES_P = _BLOCK_TAGS - {"li", "dd", "dt", "td", "th", "tr", "tbody", "thead"}


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
