"""The text side of the MARC corpus, after the extraction (:mod:`.extraction`): extracted Schema.org recipes ->
instructions -> the five recipe filters -> dishes -> dish splits (:class:`SelectTextRecipes`), then the ingredient
terms of each text recipe (:class:`IngredientTerms`) (docs/corpora/marc.md, Pipeline steps 2-4 and 6; Lin et al., ACL
2020, §2, §2.3, A.1.1, A.1.4).

:func:`select_text_recipes` takes the recipe records of :func:`builders.sources.schema_org.read_schema_recipes`
and returns rows shaped like the release's ``recipes`` config (text modality), with the split of their dish, plus
one named drop per removed recipe (under its recipe id, its detail led by its URL: :func:`drop_detail`). The corpus
pipeline (videos, pairs, alignment, release) builds on it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.artefacts import artefact_dir
from ...core.fingerprint import hash_obj
from ...core.records import Drop, Out, Row
from ...core.step import FitInputs, Requirement, Step
from ...models.nlp import ContentLemmatizer
from ...ops import dishes
from ...sources.html_pages import url_detail
from ...sources.schema_org import detect_language, instruction_units
from .config import MarcConfig
from .selection import Outcomes, Selection, content_digest

STAGE = "text_recipes"
NOUN_POS = frozenset({"NOUN", "PROPN"})
SPACY = Requirement("spacy", "nlp")
#: a row of the release's ``recipes`` config, text or video (a video's also holds its search ``rank``)
RECIPE_FIELDS: dict[str, Any] = {
    "recipe_id": str, "dish_id": str, "dish_name": str, "modality": str, "title": str, "url": str, "language": str,
    "ingredients": list, "instructions": list, "step_index": list, "section": list, "start": list, "end": list,
    "num_chat_removed": int, "source": dict, "split": str}
_NON_WORD = re.compile(r"\W+")


@dataclass
class TextRecipes:
    """Kept recipe rows (``recipes`` config, text modality, plus ``split``), drops with reasons, and counters."""

    rows: list[dict[str, Any]]
    drops: list[Drop]
    counts: Counter = field(default_factory=Counter)
    #: what happened to each input record, by its ``_key`` (else its position): its kept row or its drop
    outcome: dict[str, dict[str, Any] | Drop] = field(default_factory=dict)


def recipe_id(url: str, index_in_page: int) -> str:
    """``t:<sha1(url)[:16]>`` and ``:<k>`` for the k-th (k >= 1) recipe of a page (docs/corpora/marc.md, Outputs)."""
    base = "t:" + hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]
    return base if index_in_page == 0 else f"{base}:{index_in_page}"


def drop_detail(rec: Mapping[str, Any], detail: str) -> str:
    """The detail of a dropped recipe, led by the URL its id hashes (``url <url>; ``, then ``page <page url>; `` when
    the page's URL differs), so that a drop under ``t:<sha1>`` can be found by the page a user knows. A page of
    ``--pages`` without a canonical link (URL ``page:<key>``) has no URL: the detail names its key."""
    url = str(rec.get("url") or rec.get("page_url") or "")
    page = str(rec.get("page_url") or "")
    if page and page != url:
        detail = f"page {page}; {detail}"
    if url.startswith("page:"):
        return url_detail("", detail, f"no canonical link or og:url in the page {url[len('page:'):]!r}")
    return url_detail(url, detail, "neither the recipe nor its page has a URL")


def _norm_instruction(text: str) -> str:
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def recipe_instructions(rec: Mapping[str, Any], instruction_unit: str) -> dict[str, Any]:
    """The per-recipe work of the selection (docs/corpora/marc.md, Pipeline step 2 and filter 1): the instruction
    units, the language py3langid finds in them (under 20 characters: the declared one) and the digest of the
    normalised title and instructions (filter 3's duplicate test)."""
    units = instruction_units(rec.get("steps") or [], instruction_unit)
    title = dishes.normalise_title(str(rec.get("title") or ""))
    return {"instructions": [u.text for u in units], "step_index": [u.step_index for u in units],
            "section": [u.section or "" for u in units],
            "_lang": detect_language(" ".join(u.text for u in units), str(rec.get("language") or "")),
            "_content": content_digest(title, (_norm_instruction(u.text) for u in units))}


def recipe_facts(rec: Mapping[str, Any], key: str) -> dict[str, Any]:
    """What the global decisions read of one recipe (:data:`builders.corpora.marc.selection.FACT_FIELDS`), from an
    extracted recipe carrying :func:`recipe_instructions`."""
    return {"key": key, "title": dishes.normalise_title(str(rec.get("title") or "")),
            "recipe_id": recipe_id(str(rec.get("url") or rec.get("page_url") or ""),
                                   int(rec.get("recipe_index_in_page") or 0)),
            "url": str(rec.get("url") or ""), "id_url": str(rec.get("url") or rec.get("page_url") or ""),
            "page_url": str(rec.get("page_url") or ""), "warc_filename": str(rec.get("warc_filename") or ""),
            "offset": int(rec.get("warc_record_offset") or -1), "language": rec["_lang"],
            "content": rec["_content"], "n_units": len(rec["instructions"])}


def text_row(rec: Mapping[str, Any], dish_id: str, dish_name: str, split: str) -> dict[str, Any]:
    """A kept recipe's row (``recipes`` config, text modality, plus ``split``)."""
    return {
        "recipe_id": recipe_id(str(rec.get("url") or rec.get("page_url") or ""),
                               int(rec.get("recipe_index_in_page") or 0)),
        "dish_id": dish_id, "dish_name": dish_name, "modality": "text",
        "title": dishes.normalise_title(str(rec.get("title") or "")),
        "url": str(rec.get("url") or rec.get("page_url") or ""),
        "language": "en", "ingredients": list(rec.get("ingredients") or []),
        "instructions": list(rec["instructions"]), "step_index": list(rec["step_index"]),
        "section": list(rec["section"]), "start": [], "end": [], "num_chat_removed": 0,
        "source": {"extraction": str(rec.get("extraction") or "json-ld"),
                   "warc_filename": str(rec.get("warc_filename") or ""),
                   "warc_record_offset": int(rec.get("warc_record_offset") or -1),
                   "warc_record_id": str(rec.get("warc_record_id") or ""),
                   "recipe_index_in_page": int(rec.get("recipe_index_in_page") or 0),
                   "asr_source": "", "chat_classifier": ""},
        "split": split,
    }


def select_text_recipes(records: Iterable[Mapping[str, Any]], cfg: Any = None) -> TextRecipes:
    """Apply the instruction units, recipe filters and dishes (docs/corpora/marc.md, Pipeline steps 2-4) to
    extracted recipe records, in that order. ``cfg`` holds the settings the filters read (a :class:`MarcConfig`, or
    the :class:`SelectTextRecipes` step); None: the paper's defaults.

    1. ``non_english``: py3langid on the joined instructions is not ``en`` (under 20 characters: the declared
       language); 2. ``title_too_long``: more than ``max_title_words`` whitespace tokens; 3. ``duplicate_recipe``:
    same normalised title and instruction list, or same URL and index in page (the first in (url, warc file,
    offset) order is kept);
    4. ``rare_title_word``: a title word below the top-50% frequency cut over the survivors of 1-3;
    5. ``too_few_steps``: fewer than ``min_steps`` instructions. Then dishes (exact casefolded title tokens):
    ``dish_too_small`` below ``min_recipes_per_dish``, ``dish_capped`` beyond ``max_recipes_per_dish`` (smallest
    sha1(recipe_id) kept); dishes split by sha1 (103 / 94 of 4,262 scaled).

    In memory, for a list of records; the build takes the same decisions shard by shard over a store on disk
    (:class:`RecipeInstructions`, then :class:`SelectTextRecipes` over :class:`~.selection.Selection`).
    """
    cfg = cfg or MarcConfig()
    prepared = []
    selection = Selection()
    try:
        for position, rec in enumerate(records):
            key = str(rec.get("_key", position))
            full = {**rec, **recipe_instructions(rec, cfg.instruction_unit)}
            prepared.append((key, full))
            selection.add(recipe_facts(full, key), cfg)
        counts = selection.decide(cfg)
        drops = [Drop(rid, STAGE, reason, detail) for _key, rid, reason, detail in selection.drops()]
        decided = Outcomes.of(selection).lookup([k for k, _ in prepared])
    finally:
        selection.close()
    outcome: dict[str, dict[str, Any] | Drop] = {}
    rows = []
    for key, full in prepared:
        kind, *rest = decided[key]
        if kind == "drop":
            outcome[key] = Drop(rest[0], STAGE, rest[1], rest[2])
        else:
            row = text_row(full, *rest)
            rows.append(row)
            outcome[key] = row
    rows.sort(key=lambda r: (r["dish_id"], r["recipe_id"]))
    return TextRecipes(rows, drops, counts, outcome)


@dataclass(eq=False)
class RecipeInstructions(Step):
    """The per-recipe part of the selection (Lin et al., ACL 2020, A.1.1; docs/corpora/marc.md, Pipeline step 2 and
    filter 1), shard by shard: the instruction units, the language of the joined instructions (py3langid) and the
    content digest of the duplicate test (:func:`recipe_instructions`). Row-wise: a redone shard reuses its unchanged
    recipes."""

    name = "recipe_instructions"
    version = "1"
    id_field = "_key"
    row_wise = True
    reads = {"_key": str, "title": Any, "steps": list, "language": Any}
    writes = {"instructions": list, "step_index": list, "section": list, "_lang": str, "_content": str}

    instruction_unit: str

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            out.keep({**r, **recipe_instructions(r, self.instruction_unit)})


@dataclass(eq=False)
class SelectTextRecipes(Step):
    """Lin et al., ACL 2020, §2, A.1.1: English, title length, duplicates, common title words, >= 2 steps, dishes with
    >= 3 recipes (capped at 100), dish splits. The global decisions are taken once in ``fit`` over the recipes' facts
    streamed into a store on disk (:class:`~.selection.Selection`: memory holds the title-word counts and one dish);
    each shard then looks its recipes' outcomes up, and is redone only when they changed (:meth:`item_digest`)."""

    name = "select_text_recipes"
    version = "4"
    id_field = "recipe_id"
    item_fields = ("_key",)
    reads = {"_key": str, "title": Any, "url": Any, "page_url": str, "recipe_index_in_page": int, "steps": list,
             "language": Any, "ingredients": list, "extraction": str, "warc_filename": Any,
             "warc_record_offset": Any, "warc_record_id": Any, "instructions": list, "step_index": list,
             "section": list, "_lang": str, "_content": str}
    writes = RECIPE_FIELDS
    replaces = True

    instruction_unit: str
    max_title_words: int
    min_steps: int
    title_word_quantile: float
    min_recipes_per_dish: int
    max_recipes_per_dish: int
    test_dishes: int
    validation_dishes: int
    paper_dishes: int

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """Global stage: every recipe's outcome (its drop, or its dish, dish name and split) in ``selection.sqlite``.
        The state names the store only: a shard's outcomes key it (:meth:`item_digest`), not the whole table."""
        selection = Selection(inputs.artefact_dir / STORE)
        try:
            for rec in inputs.data.rows(FACT_COLUMNS):
                selection.add(recipe_facts(rec, str(rec["_key"])), self)
            selection.decide(self)
        finally:
            selection.close()
        return {"store": STORE}

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """The digest of the outcomes of the shard's recipes: a refit that leaves them the same leaves the shard."""
        keys = sorted(str(r["_key"]) for r in rows)
        found = _outcomes(artefact_dir(state) / state["store"]).lookup(keys)
        return hash_obj([[k, list(found[k]) if k in found else None] for k in keys])

    def setup(self, state: Any) -> None:
        self.outcomes = _outcomes(artefact_dir(state) / state["store"])

    def process(self, rows: list[Row], out: Out) -> None:
        found = self.outcomes.lookup([str(r["_key"]) for r in rows])
        for r in rows:
            kind, *rest = found[str(r["_key"])]
            if kind == "drop":
                out.drop(*rest)
            else:
                out.keep(text_row(r, *rest))


def _outcomes(path: Path) -> Outcomes:
    """One read-only connection a process to a decided store, opened again when a refit replaced the file."""
    st = path.stat()
    key = (st.st_ino, st.st_mtime_ns, st.st_size)
    cached = _OPEN.get(str(path))
    if cached is None or cached[0] != key:
        if cached is not None:
            cached[1].close()
        _OPEN[str(path)] = (key, Outcomes(path))
    return _OPEN[str(path)][1]


_OPEN: dict[str, tuple[tuple, Outcomes]] = {}
STORE = "selection.sqlite"
#: the columns the fit reads (the facts of :func:`recipe_facts`)
FACT_COLUMNS = ["_key", "title", "url", "page_url", "recipe_index_in_page", "warc_filename", "warc_record_offset",
                "_lang", "_content", "instructions"]


@dataclass(eq=False)
class IngredientTerms(Step):
    """Ingredient terms (Lin et al., ACL 2020, §2.3, A.1.4): per ingredient line (casefolded, parentheses removed, cut
    at the first comma, quantities dropped) the spaCy lemmas of NOUN/PROPN tokens minus units and non-ingredient nouns;
    the recipe's set is the union."""

    name = "ingredient_terms"
    version = "1"
    id_field = "recipe_id"
    reads = {"ingredients": list}
    writes = {"ingredient_terms": list}
    requires = (SPACY,)

    spacy_model: str

    def setup(self, state: Any) -> None:
        self.lemmatize = ContentLemmatizer(self.spacy_model, pos=NOUN_POS)

    def process(self, rows: list[Row], out: Out) -> None:
        lines = [[dishes.clean_ingredient_line(x) for x in r["ingredients"]] for r in rows]
        flat = [x for ls in lines for x in ls]
        lemmas = iter(self.lemmatize(flat))
        for r, ls in zip(rows, lines):
            terms: set[str] = set()
            for _ in ls:
                terms |= dishes.ingredient_terms(next(lemmas))
            if not terms:
                out.count("no_ingredient_terms")
            out.keep({**r, "ingredient_terms": sorted(terms)})
