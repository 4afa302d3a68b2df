"""Recipe records of one page (docs/corpora/marc.md, "Pipeline" step 1): the JSON-LD and microdata Recipe nodes
merged into candidates, with their drops and counters (docs/reason-codes.md).

Records (toolkit rule): nodes with the same normalised name merge (first non-empty field wins, the longest
instruction list wins); a microdata node with the name of a JSON-LD record only fills that record's empty fields
(JSON-LD wins); distinct names are separate records numbered ``recipe_index_in_page`` in document order (JSON-LD
first).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from builders.core.records import Count, Drop, Row

from .html_tree import parse_page
from .instructions import Step, flatten_instructions
from .jsonld import _as_text, _get, find_recipe_nodes, parse_jsonld
from .microdata import microdata_recipes
from .text import _LINES_RE, clean_text, collapse, normalize_name, strip_tags, unescape_html

STAGE = "extract_schema_recipes"
NO_SCHEMA_RECIPE = "no_schema_recipe"
NO_TITLE = "no_title"
NO_INSTRUCTIONS = "no_instructions"
JSONLD_UNPARSEABLE = "jsonld_unparseable"
MULTI_RECIPE_PAGE = "multi_recipe_page"
JSON_LD = "json-ld"
MICRODATA = "microdata"

_RECIPE_WORD_RE = re.compile(r"recipe", re.IGNORECASE)


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
