"""The video recipes of a dish (Lin et al., ACL 2020, §2, §2.3, Table 1; docs/corpora/marc.md, Pipeline step 5): the
``videos`` pipeline's search results per dish, the videos picked per dish in rank order, and each picked video as a
``recipes`` row with its ingredient terms. Its transcript sentences and chat removal are :mod:`.chat_content`.

The candidates carry their dish's name, split and size, joined from the ``text`` pipeline when listed
(:func:`dish_table`), so a page edit that leaves the dish table as it was processes no video again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.artefacts import artefact_dir, load_json, save_json
from ...core.records import Count, Drop, Out, Row
from ...core.step import FitInputs, Source, Step, input_path
from ...models.nlp import ContentLemmatizer
from ...ops import dishes as dish_ops
from ...sources.video_candidates import read_video_candidates
from .text import NOUN_POS, RECIPE_FIELDS, SPACY

#: a search result, with its dish joined from the ``text`` pipeline (null for a dish not in the corpus)
CANDIDATE_FIELDS: dict[str, Any] = {"dish_id": str, "rank": int, "video_id": str, "title": str, "query": str,
                                    "_key": str, "_dish_name": Any, "_split": Any, "_n_text": Any}


def dish_table(text: Any) -> dict[str, dict[str, Any]]:
    """The dishes of the ``text`` pipeline's output: name, split, number of text recipes and ingredient terms."""
    out: dict[str, dict[str, Any]] = {}
    for r in text.rows(["dish_id", "dish_name", "split", "ingredient_terms"]):
        d = out.setdefault(r["dish_id"], {"dish_name": r["dish_name"], "split": r["split"], "n_text": 0,
                                          "terms": set()})
        d["n_text"] += 1
        d["terms"].update(r["ingredient_terms"])
    return out


@dataclass(eq=False)
class VideoCandidatesSource(Source):
    """``video_candidates.jsonl`` (docs/corpora/marc.md, Inputs): search results per dish in rank order, each with its
    dish's name, split and number of text recipes from the ``text`` pipeline (``_dish_name``, ``_split``, ``_n_text``;
    null for a dish not in the corpus), which ``dish_videos`` reads. Rows carry their content, so an edit of the
    candidates or of the text recipes lists them again into the same folder, and only candidates whose row changed are
    processed again (a page edit that leaves the dish table as it was redoes no video)."""

    name = "read_video_candidates"
    version = "2"
    side_inputs = ("text",)
    writes = CANDIDATE_FIELDS
    rows_carry_content = True

    videos: Path | None = input_path()

    def read(self) -> Iterator[Row | Drop | Count]:
        if not self.videos:
            return
        by_dish, drops = read_video_candidates(self.videos)
        yield from drops
        dishes = dish_table(self.side["text"]) if by_dish else {}
        for dish in sorted(by_dish):
            d = dishes.get(dish)
            for c in by_dish[dish]:
                yield {"dish_id": c.dish_id, "rank": c.rank, "video_id": c.video_id, "title": c.title,
                       "query": c.query, "_key": f"{c.dish_id}:{c.video_id}",
                       "_dish_name": d["dish_name"] if d else None, "_split": d["split"] if d else None,
                       "_n_text": d["n_text"] if d else None}


@dataclass(eq=False)
class DishVideos(Step):
    """Keep candidates of the corpus's dishes (those with >= 3 text recipes), with their dish name and split (joined
    by the source from the ``text`` pipeline's dish table)."""

    name = "dish_videos"
    version = "3"
    id_field = "_key"
    reads = {"_key": str, "dish_id": str, "_dish_name": Any, "_split": Any, "_n_text": Any}
    writes = {"dish_name": str, "split": str, "n_text": int}
    removes = ("_dish_name", "_split", "_n_text")

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            row = {k: v for k, v in r.items() if k not in ("_dish_name", "_split", "_n_text")}
            if r["_n_text"] is None:
                out.drop(r["_key"], "dish_not_in_corpus", r["dish_id"])
            else:
                out.keep({**row, "dish_name": r["_dish_name"], "split": r["_split"], "n_text": int(r["_n_text"])})


@dataclass(eq=False)
class PickVideos(Step):
    """Lin et al., ACL 2020, §2, Table 1: per dish ``n_v = clamp(round(ρ · n_text), 3, 100)`` videos, ρ = 77,550 /
    48,852: the first candidates in rank order whose transcript survived (``dish_video_quota`` for the rest; counter
    ``videos_short`` when a dish gets fewer). A video listed under two dishes is kept in the first dish
    (``video_in_two_dishes``)."""

    name = "pick_videos"
    id_field = "_key"
    reads = {"_key": str, "dish_id": str, "rank": int, "video_id": str, "n_text": int}
    writes = {}

    video_ratio: float
    min_videos_per_dish: int
    max_videos_per_dish: int

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        by_dish: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
        for r in inputs.data.rows(["dish_id", "rank", "video_id", "n_text"]):
            by_dish[r["dish_id"]].append((r["rank"], r["video_id"], r["n_text"]))
        picked: dict[str, str] = {}
        elsewhere: dict[str, str] = {}
        short: dict[str, str] = {}
        owner: dict[str, str] = {}
        for dish in sorted(by_dish):
            cands = sorted(by_dish[dish])
            wanted = dish_ops.videos_per_dish(cands[0][2], self.video_ratio, self.min_videos_per_dish,
                                              self.max_videos_per_dish)
            got = 0
            for rank, vid, _ in cands:
                key = f"{dish}:{vid}"
                if vid in owner:
                    elsewhere[key] = owner[vid]
                elif got < wanted:
                    picked[key] = "picked"
                    owner[vid] = dish
                    got += 1
            if got < wanted:
                first = next(f"{dish}:{vid}" for _, vid, _ in cands if f"{dish}:{vid}" in picked) if got else None
                if first:
                    short[first] = f"{got} of {wanted}"
        return {"picked": picked, "elsewhere": elsewhere, "short": short}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            k = r["_key"]
            if k in self.state["elsewhere"]:
                out.drop(k, "video_in_two_dishes", f"kept in dish {self.state['elsewhere'][k]}")
            elif k not in self.state["picked"]:
                out.drop(k, "dish_video_quota", f"rank {r['rank']}")
            else:
                if k in self.state["short"]:
                    out.count("videos_short")
                out.keep(r)


@dataclass(eq=False)
class VideoTerms(Step):
    """Lin et al., ACL 2020, §2.3, the video's half of its ingredient terms: the ingredient terms among the NOUN/PROPN
    lemmas of its content sentences (``_video_terms``). Apart from ``video_recipe``, which intersects them with the dish
    vocabulary of the text recipes, so that an edit of a web page does not lemmatize the videos again."""

    name = "video_terms"
    version = "1"
    id_field = "_key"
    reads = {"content": list}
    writes = {"_video_terms": list}
    requires = (SPACY,)

    spacy_model: str

    def setup(self, state: Any) -> None:
        self.lemmatize = ContentLemmatizer(self.spacy_model, pos=NOUN_POS)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            lemmas: set[str] = set()
            for s in self.lemmatize([c["text"] for c in r["content"]]):
                lemmas |= s
            out.keep({**r, "_video_terms": sorted(dish_ops.ingredient_terms(lemmas))})


@dataclass(eq=False)
class VideoRecipe(Step):
    """A picked video as a ``recipes`` row: content sentences are its instructions (with times); its ingredient
    terms are the dish vocabulary D ∩ the NOUN/PROPN lemmas of its content sentences (Lin et al., ACL 2020, §2.3;
    ``video_terms``)."""

    name = "video_recipe"
    version = "2"
    id_field = "_key"
    side_inputs = ("text",)
    reads = {"video_id": str, "dish_id": str, "dish_name": str, "title": str, "content": list, "_video_terms": list,
             "num_chat_removed": int, "asr_source": str, "chat_classifier": str, "split": str, "rank": int}
    writes = {**RECIPE_FIELDS, "ingredient_terms": list, "rank": int}
    replaces = True

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        table = {k: sorted(v["terms"]) for k, v in dish_table(inputs.side["text"]).items()}
        save_json(inputs.artefact_dir, "dish_terms", table)
        return {"dishes": len(table)}

    def setup(self, state: Any) -> None:
        self.vocab = {k: set(v) for k, v in load_json(artefact_dir(state), "dish_terms").items()}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            content = r["content"]
            terms = sorted(self.vocab.get(r["dish_id"], set()) & set(r["_video_terms"]))
            out.keep({
                "recipe_id": f"v:{r['video_id']}", "dish_id": r["dish_id"], "dish_name": r["dish_name"],
                "modality": "video", "title": r["title"], "url": f"https://www.youtube.com/watch?v={r['video_id']}",
                "language": "en", "ingredients": [], "ingredient_terms": terms,
                "instructions": [c["text"] for c in content], "step_index": list(range(len(content))),
                "section": [""] * len(content), "start": [float(c["start"]) for c in content],
                "end": [float(c["end"]) for c in content], "num_chat_removed": int(r["num_chat_removed"]),
                "source": {"extraction": "transcript", "warc_filename": "", "warc_record_offset": -1,
                           "warc_record_id": "", "recipe_index_in_page": 0, "asr_source": r["asr_source"],
                           "chat_classifier": r["chat_classifier"]},
                "split": r["split"], "rank": int(r["rank"])})
