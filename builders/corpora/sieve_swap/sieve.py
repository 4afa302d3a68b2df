"""The two sieves of Sieve & Swap: the title sieve V¹ (Batra et al., ECCV 2024, Eq. 5) and the content sieve V² with
the train/validation split (§4.2 "Sieving Videos"), over an index of the recipe database R."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...core.artefacts import artefact_dir
from ...core.errors import DamagedCache
from ...core.records import Out, Row
from ...core.step import FitInputs, Step
from ...ops import sieve as sieve_ops
from . import recipe_index
from .recipes import SPACY


@dataclass(eq=False)
class _RecipeIndexStep(Step):
    """Shared by the two sieves: the recipe index (:mod:`.recipe_index`), one per recipes content, built by whichever
    sieve fits first and opened memory-mapped by both. The recipes key the fit only, not the stage folder
    (``side_inputs_per_item``): the title sieve's state names the index, so an edited recipe redoes its shards (the
    titles' lemmas, in its folder); the content sieve's state names only a pointer file, and its per-item digest (the
    digests of a video's title lemmas) redoes just the videos whose title candidates the edit can touch."""

    side_inputs = ("recipes",)
    side_inputs_per_item = True
    version = "3"
    requires = (SPACY,)
    row_wise = True
    row_wise_batch = True

    spacy_model: str
    title_match: str
    title_min_shared: int
    max_title_candidates: int | None

    def _ensure_index(self, inputs: FitInputs) -> Path:
        folder, _ = recipe_index.ensure(inputs.side["recipes"], Path(inputs.cache_dir))
        recipe_index.write_pointer(inputs.artefact_dir, folder)
        return folder

    def _with_index(self, state: Any, use: Callable[[Path], Any]) -> Any:
        """``use(folder)`` of the index the fitted state names, which checks what it reads; a damaged or missing index
        is removed and reported as damage of this stage's fit record (``_fit/_complete.json``), so that the build
        refits the stage, which builds the index again (builders/core/repair.py)."""
        folder = recipe_index.read_pointer(artefact_dir(state))
        try:
            return use(folder)
        except (FileNotFoundError, DamagedCache) as err:
            shutil.rmtree(folder, ignore_errors=True)
            raise DamagedCache(artefact_dir(state).parent / "_complete.json",
                               f"the recipe index it names is damaged or missing ({err})") from err

    def setup(self, state: Any) -> None:
        from ...models.nlp import ContentLemmatizer

        self.state = state
        self.index = self._with_index(state, recipe_index.RecipeIndex.open)
        self.lemmatize = ContentLemmatizer(self.spacy_model)

    def teardown(self) -> None:
        self.index = None


@dataclass(eq=False)
class TitleSieve(_RecipeIndexStep):
    """Eq. 5: pair each video with the recipes whose title shares a content lemma (generic words removed). The
    candidates are not written: the content sieve computes them again from ``title_lemmas`` (the same index, the same
    parameters), so a shard never holds a video's thousands of candidate ids; this stage drops the videos with none
    and counts them (``title_pairs``)."""

    name = "title_sieve"
    id_field = "video_id"
    reads = {"video_id": str, "title": str}
    writes = {"title_lemmas": list}

    generic_words: frozenset[str]

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        # the state names the index: an edited recipe redoes this stage's shards (their rows stay the same unless a
        # video's title match changed, so the content sieve sees unchanged input shards)
        return {"index": self._ensure_index(inputs).name}

    def process(self, rows: list[Row], out: Out) -> None:
        for r, lem in zip(rows, self.lemmatize([r["title"] for r in rows])):
            out.item = r["video_id"]
            lemmas = sorted(lem - self.generic_words)
            if not lemmas:
                out.drop(r["video_id"], "no_title_content_words", r["title"][:120])
                continue
            cand_rows, _, truncated = self.index.title_candidates(lemmas, self.title_match, self.title_min_shared,
                                                                  self.max_title_candidates)
            if truncated:
                out.count("title_candidates_truncated")
            if len(cand_rows) == 0:
                out.drop(r["video_id"], "no_title_match", " ".join(lemmas)[:120])
                continue
            out.count("title_pairs", len(cand_rows))
            out.keep({**r, "title_lemmas": lemmas})
        out.item = None


@dataclass(eq=False)
class ContentSieve(_RecipeIndexStep):
    """Content sieve (Batra et al., ECCV 2024, §4.2 "Sieving Videos"): keep pairs with token-IoU >= 0.1 and token-recall
    >= 0.3 over content lemmas of the whole transcript vs the recipe's steps; split validation iff max IoU >= 0.2.
    The pairs scored are the video's title candidates (Eq. 5), computed here from its ``title_lemmas``."""

    name = "content_sieve"
    id_field = "video_id"
    item_fields = ("video_id", "title_lemmas")
    reads = {"video_id": str, "asr_segments": list, "title_lemmas": list}
    writes = {"recipe_ids": list, "recipe_token_iou": list, "recipe_token_recall": list, "max_token_iou": float,
              "split": str}

    iou_threshold: float
    recall_threshold: float
    val_iou_threshold: float

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        # the state names only the pointer (index.json in the artefact folder): it is the same for every recipes
        # content, and ``item_digest`` says which videos an edited recipe concerns
        self._ensure_index(inputs)
        return {"index": "index.json"}

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """The digests of each video's title lemmas in the index (:func:`.recipe_index.title_digests`): all that its
        candidates and their scores depend on in the recipes."""
        capped = self.max_title_candidates is not None
        return self._with_index(state, lambda folder: recipe_index.title_digests(folder, rows, with_size=capped))

    def process(self, rows: list[Row], out: Out) -> None:
        index = self.index
        texts = [" ".join(s["text"] for s in r["asr_segments"]) for r in rows]
        for r, lem in zip(rows, self.lemmatize(texts)):
            out.item = r["video_id"]
            cand, _, _ = index.title_candidates(r["title_lemmas"], self.title_match, self.title_min_shared,
                                                self.max_title_candidates)
            iou, recall = index.bodies.scores(cand, index.encode(lem), video_size=len(lem))
            keep = sieve_ops.content_sieve(iou, recall, self.iou_threshold, self.recall_threshold)
            if not keep.any():
                best = int(np.argmax(iou)) if len(iou) else -1
                detail = f"best iou {iou[best]:.3f} recall {recall[best]:.3f}" if best >= 0 else "no candidates"
                out.drop(r["video_id"], "content_sieve_failed", detail)
                continue
            ids = index.recipe_ids[cand[keep]]
            k_iou, k_rec = iou[keep], recall[keep]
            order = np.lexsort((ids, -k_iou))  # token_iou desc, then recipe id
            max_iou = float(k_iou.max())
            out.count("kept_pairs", int(keep.sum()))
            out.keep({**r, "recipe_ids": ids[order].tolist(),
                      "recipe_token_iou": k_iou[order].astype(float).tolist(),
                      "recipe_token_recall": k_rec[order].astype(float).tolist(),
                      "max_token_iou": max_iou,
                      "split": sieve_ops.split_for(max_iou, self.val_iou_threshold)})
        out.item = None
