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
import json
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...core.artefacts import artefact_dir
from ...core.fingerprint import hash_obj
from ...core.records import Drop, Out, Row
from ...core.step import FitInputs, Requirement, Step
from ...models.nlp import ContentLemmatizer
from ...ops import dishes
from ...sources.html_pages import url_detail
from ...sources.schema_org import detect_language, instruction_units
from .config import MarcConfig

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
    """
    cfg = cfg or MarcConfig()
    drops: list[Drop] = []
    counts: Counter = Counter()
    prepared: list[dict[str, Any]] = []
    outcome: dict[str, dict[str, Any] | Drop] = {}

    def dropped(p: dict[str, Any], reason: str, detail: str) -> None:
        d = Drop(p["recipe_id"], STAGE, reason, drop_detail(p["rec"], detail))
        drops.append(d)
        outcome[p["key"]] = d

    for position, rec in enumerate(records):
        key = str(rec.get("_key", position))
        title = dishes.normalise_title(str(rec.get("title") or ""))
        rid = recipe_id(str(rec.get("url") or rec.get("page_url") or ""), int(rec.get("recipe_index_in_page") or 0))
        units = instruction_units(rec.get("steps") or [], cfg.instruction_unit)
        joined = " ".join(u.text for u in units)
        # 1. English instructions
        p = {"rec": rec, "title": title, "recipe_id": rid, "units": units, "key": key}
        lang = detect_language(joined, str(rec.get("language") or ""))
        if lang != "en":
            dropped(p, "non_english", f"{lang or 'unknown'}: {title}")
            continue
        # 2. title length
        if len(title.split()) > cfg.max_title_words:
            dropped(p, "title_too_long", title)
            continue
        prepared.append(p)

    # 3. duplicates, first in (url, warc file, offset) order
    prepared.sort(key=lambda p: (str(p["rec"].get("url") or ""), str(p["rec"].get("warc_filename") or ""),
                                 int(p["rec"].get("warc_record_offset") or -1), p["recipe_id"]))
    seen_content: set[tuple[str, tuple[str, ...]]] = set()
    seen_id: set[str] = set()
    unique = []
    for p in prepared:
        key = (p["title"].casefold(), tuple(_norm_instruction(u.text) for u in p["units"]))
        # the same URL (recipe id = sha1 of the URL and the recipe's index in its page): the page crawled twice
        if key in seen_content or p["recipe_id"] in seen_id:
            dropped(p, "duplicate_recipe", p["title"])
            continue
        seen_content.add(key)
        seen_id.add(p["recipe_id"])
        unique.append(p)

    # 4. common title words over the survivors of 1-3
    keep = dishes.common_title_word_mask([p["title"] for p in unique], cfg.title_word_quantile)
    survivors = []
    for p, ok in zip(unique, keep):
        if not ok:
            dropped(p, "rare_title_word", p["title"])
        # 5. at least min_steps instructions
        elif len(p["units"]) < cfg.min_steps:
            dropped(p, "too_few_steps", f"{len(p['units'])} instructions: {p['title']}")
        else:
            survivors.append(p)

    # dishes, caps and splits (Lin et al., ACL 2020, §2)
    by_dish: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in survivors:
        by_dish[dishes.dish_id(p["title"])].append(p)
    kept_dishes: dict[str, list[dict[str, Any]]] = {}
    for dish, members in by_dish.items():
        if len(members) < cfg.min_recipes_per_dish:
            for p in members:
                dropped(p, "dish_too_small", f"{dish}: {len(members)} recipes")
            continue
        capped = set(dishes.cap_recipes([p["recipe_id"] for p in members], cfg.max_recipes_per_dish))
        for p in members:
            if p["recipe_id"] not in capped:
                dropped(p, "dish_capped", dish)
        kept_dishes[dish] = [p for p in members if p["recipe_id"] in capped]
    splits = dishes.dish_splits(kept_dishes, cfg.test_dishes, cfg.validation_dishes, cfg.paper_dishes)
    rows = []
    for dish in sorted(kept_dishes):
        dish_name = kept_dishes[dish][0]["title"]
        for p in sorted(kept_dishes[dish], key=lambda q: q["recipe_id"]):
            rec = p["rec"]
            row = {
                "recipe_id": p["recipe_id"], "dish_id": dish, "dish_name": dish_name, "modality": "text",
                "title": p["title"], "url": str(rec.get("url") or rec.get("page_url") or ""),
                "language": "en", "ingredients": list(rec.get("ingredients") or []),
                "instructions": [u.text for u in p["units"]], "step_index": [u.step_index for u in p["units"]],
                "section": [u.section or "" for u in p["units"]], "start": [], "end": [], "num_chat_removed": 0,
                "source": {"extraction": str(rec.get("extraction") or "json-ld"),
                           "warc_filename": str(rec.get("warc_filename") or ""),
                           "warc_record_offset": int(rec.get("warc_record_offset") or -1),
                           "warc_record_id": str(rec.get("warc_record_id") or ""),
                           "recipe_index_in_page": int(rec.get("recipe_index_in_page") or 0),
                           "asr_source": "", "chat_classifier": ""},
                "split": splits[dish],
            }
            rows.append(row)
            outcome[p["key"]] = row
    counts.update(d.reason for d in drops)
    counts["kept"] = len(rows)
    counts["dishes"] = len(kept_dishes)
    return TextRecipes(rows, drops, counts, outcome)


@dataclass(eq=False)
class SelectTextRecipes(Step):
    """Lin et al., ACL 2020, §2, A.1.1: instructions, English, title length, duplicates, common title words, >= 2 steps,
    dishes with >= 3 recipes (capped at 100), dish splits. Global decisions, so the work is done once in ``fit``
    (:func:`select_text_recipes`, which reads this step's parameters)."""

    name = "select_text_recipes"
    version = "3"
    id_field = "recipe_id"
    reads = {"_key": str, "title": Any, "url": Any, "page_url": str, "recipe_index_in_page": int, "steps": list,
             "language": Any, "ingredients": list, "extraction": str, "warc_filename": Any,
             "warc_record_offset": Any, "warc_record_id": Any}
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
        """Global stage: the outcome of every record (its kept row or its drop), written as ``outcome.parquet``."""
        outcome = select_text_recipes(inputs.data.rows(), self).outcome
        table = [{"key": k, "drop": [o.item_id, o.reason, o.detail] if isinstance(o, Drop) else None,
                  "row": None if isinstance(o, Drop) else json.dumps(o, ensure_ascii=False)}
                 for k, o in sorted(outcome.items())]
        schema = pa.schema([("key", pa.string()), ("drop", pa.list_(pa.string())), ("row", pa.string())])
        pq.write_table(pa.Table.from_pylist(table, schema=schema), inputs.artefact_dir / "outcome.parquet")
        # the outcome's digest: when an edit changes it (a recipe's dish, a duplicate, the title-word quantile), every
        # shard is redone (a look-up); those whose rows come out the same leave the later stages cached
        return {"records": len(table), "digest": hash_obj(table)}

    def setup(self, state: Any) -> None:
        self.outcome = pq.read_table(artefact_dir(state) / "outcome.parquet")
        self.index = {k: i for i, k in enumerate(self.outcome.column("key").to_pylist())}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            i = self.index[r["_key"]]
            drop = self.outcome.column("drop")[i].as_py()
            if drop is not None:
                out.drop(*drop)
            else:
                out.keep(json.loads(self.outcome.column("row")[i].as_py()))


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
