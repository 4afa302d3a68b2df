"""The recipes pipeline of Sieve & Swap: RecipeNLG rows -> the cleaned recipe database R with title and body content
lemmas (Batra et al., ECCV 2024, §4.2; docs/corpora/sieve_swap.md, Pipeline steps 1-3)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ...core.artefacts import artefact_dir, load_arrays, save_arrays
from ...core.fingerprint import hash_obj
from ...core.records import Count, Drop, Out, Row
from ...core.step import FitInputs, Requirement, Source, Step, input_path
from ...ops.text import clean, has_alpha
from ...sources import recipenlg

RECIPE_FIELDS: dict[str, Any] = {"recipe_id": int, "title": str, "ingredients": list, "directions": list,
                                 "ner": list, "link": str, "source": str}
SPACY = Requirement("spacy", "nlp")


@dataclass(eq=False)
class RecipeNLGSource(Source):
    """RecipeNLG ``full_dataset.csv`` streamed row by row (docs/corpora/sieve_swap.md, Inputs)."""

    name = "read_recipes"
    writes = RECIPE_FIELDS
    #: a row holds the recipe's values: an edited recipe file is listed again into the same folder, and the recipe
    #: stages redo only the shards whose recipes changed
    rows_carry_content = True

    recipes: Path | None = input_path()

    def read(self) -> Iterator[Row | Drop | Count]:
        yield from recipenlg.read_recipenlg(self.recipes)


@dataclass(eq=False)
class RecipeClean(Step):
    """Clean titles and steps; drop recipes with no title or no step of >= ``min_step_chars`` characters."""

    name = "recipe_clean"
    id_field = "recipe_id"
    reads = {"recipe_id": int, "title": str, "directions": list}
    writes = {"title": str, "directions": list}

    min_step_chars: int

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            title = clean(r["title"])
            steps = [s for s in (clean(d) for d in r["directions"]) if len(s) >= self.min_step_chars]
            if not title or not has_alpha(title):
                out.drop(r["recipe_id"], "no_title", repr(r["title"])[:80])
            elif not steps:
                out.drop(r["recipe_id"], "no_directions", f"{len(r['directions'])} raw steps")
            else:
                out.keep({**r, "title": title, "directions": steps})


def _dedup_key(r: Row) -> str:
    return hash_obj(" ".join(r["title"].casefold().split()), r["directions"])


@dataclass(eq=False)
class RecipeDedup(Step):
    """Exact duplicates (casefolded, whitespace-collapsed title and same cleaned steps) keep the lowest id
    (docs/corpora/sieve_swap.md, Pipeline step 2).

    Global stage: ``fit`` writes the duplicates (recipe id -> the id it repeats) as the artefact ``duplicates.npz``."""

    name = "recipe_dedup"
    version = "2"
    id_field = "recipe_id"
    reads = {"recipe_id": int, "title": str, "directions": list}
    writes = {}

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        first: dict[str, int] = {}
        ids, keys = [], []
        for r in inputs.data.rows(["recipe_id", "title", "directions"]):
            k = _dedup_key(r)
            ids.append(r["recipe_id"])
            keys.append(k)
            if k not in first or r["recipe_id"] < first[k]:
                first[k] = r["recipe_id"]
        dup = sorted((i, first[k]) for i, k in zip(ids, keys) if first[k] != i)
        save_arrays(inputs.artefact_dir, "duplicates", {"recipe_id": np.asarray([d[0] for d in dup], np.int64),
                                                        "keeper": np.asarray([d[1] for d in dup], np.int64)})
        # the digest of the artefact: a changed duplicate table redoes every shard (the state keys them)
        return {"duplicates": len(dup), "digest": hash_obj(dup)}

    def setup(self, state: Any) -> None:
        a = load_arrays(artefact_dir(state), "duplicates")
        self.dup_ids, self.keepers = a["recipe_id"], a["keeper"]

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            j = int(np.searchsorted(self.dup_ids, r["recipe_id"]))
            if j < len(self.dup_ids) and self.dup_ids[j] == r["recipe_id"]:
                out.drop(r["recipe_id"], "duplicate_recipe", f"duplicate of recipe {int(self.keepers[j])}")
            else:
                out.keep(r)


@dataclass(eq=False)
class RecipeLemmas(Step):
    """``title_lemmas(r) = content_lemmas(title) - generic_words``, ``body_lemmas(r)`` over all steps (Batra et al.,
    ECCV 2024, Eq. 5, §4.2)."""

    name = "recipe_lemmas"
    id_field = "recipe_id"
    reads = {"title": str, "directions": list}
    writes = {"title_lemmas": list, "body_lemmas": list}
    requires = (SPACY,)
    #: a redone shard (one edited recipe of 16,384) re-lemmatises only its changed recipes
    row_wise = True
    row_wise_batch = True

    generic_words: frozenset[str]
    spacy_model: str

    def setup(self, state: Any) -> None:
        from ...models.nlp import ContentLemmatizer

        self.lemmatize = ContentLemmatizer(self.spacy_model)

    def process(self, rows: list[Row], out: Out) -> None:
        titles = self.lemmatize([r["title"] for r in rows])
        bodies = self.lemmatize([" ".join(r["directions"]) for r in rows])
        for r, t, b in zip(rows, titles, bodies):
            out.keep({**r, "title_lemmas": sorted(t - self.generic_words), "body_lemmas": sorted(b)})
