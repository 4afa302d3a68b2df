"""Schema.org Recipe extraction from HTML pages (docs/corpora/marc.md, "Pipeline" step 1).

MARC's text recipes are the Schema.org Recipe objects of Common Crawl pages
(Lin et al., ACL 2020, §2.1, A.1.1). This package turns one page record
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

Modules: :mod:`.text` (unescaping, tags, instruction strings), :mod:`.jsonld` (repair chain, Recipe nodes),
:mod:`.html_tree` (the one parser pass), :mod:`.microdata`, :mod:`.instructions` (flattening), :mod:`.records` (merge,
drops, the page's records); for the text recipes after extraction, :mod:`.sentences` (punkt instruction units,
docs/corpora/marc.md step 2) and :mod:`.language` (the English filter). Every public name is importable from this
package.
"""

from __future__ import annotations

from .html_tree import MAX_HTML_CHARS, MAX_TREE_DEPTH, ParsedPage, parse_page
from .instructions import HOWTO_TIP, Step, flatten_instructions
from .jsonld import MAX_DEPTH, MAX_JSONLD_CHARS, find_recipe_nodes, is_recipe_type, parse_jsonld
from .language import MAX_LANGID_CHARS, MIN_LANGID_CHARS, detect_language, primary_language
from .microdata import microdata_recipes
from .records import (
    JSON_LD,
    JSONLD_UNPARSEABLE,
    MICRODATA,
    MULTI_RECIPE_PAGE,
    NO_INSTRUCTIONS,
    NO_SCHEMA_RECIPE,
    NO_TITLE,
    STAGE,
    Candidate,
    PageExtraction,
    extract_recipes,
    read_schema_recipes,
    recipe_rows,
)
from .sentences import InstructionUnit, instruction_units, split_sentences
from .text import (
    clean_text,
    collapse,
    normalize_name,
    split_instruction_string,
    split_numbered_steps,
    strip_tags,
    unescape_html,
)

__all__ = [
    "HOWTO_TIP", "JSONLD_UNPARSEABLE", "JSON_LD", "MAX_DEPTH", "MAX_HTML_CHARS", "MAX_JSONLD_CHARS",
    "MAX_LANGID_CHARS", "MAX_TREE_DEPTH", "MICRODATA", "MIN_LANGID_CHARS", "MULTI_RECIPE_PAGE", "NO_INSTRUCTIONS",
    "NO_SCHEMA_RECIPE", "NO_TITLE", "STAGE", "Candidate", "InstructionUnit", "PageExtraction", "ParsedPage", "Step",
    "clean_text", "collapse", "detect_language", "extract_recipes", "find_recipe_nodes", "flatten_instructions",
    "instruction_units", "is_recipe_type", "microdata_recipes", "normalize_name", "parse_jsonld", "parse_page",
    "primary_language", "read_schema_recipes", "recipe_rows", "split_instruction_string", "split_numbered_steps",
    "split_sentences", "strip_tags", "unescape_html",
]
