"""The two sieves of Sieve & Swap: the title sieve V¹ (Batra et al., ECCV 2024, Eq. 5) and the content sieve V² with
the train/validation split (§4.2 "Sieving Videos"), over an index of the recipe database R."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.artefacts import artefact_dir, load_arrays, save_arrays
from ...core.records import Out, Row
from ...core.step import FitInputs, Step
from ...ops import sieve as sieve_ops
from .recipes import SPACY


@dataclass(eq=False)
class _RecipeIndexStep(Step):
    """Shared global stage of the two sieves: the recipe database as a lemma vocabulary, title index and body matrix,
    written as the artefact ``recipe_index.{npz,json}`` (``builders.ops.sieve`` ``to_state``) and loaded by path."""

    side_inputs = ("recipes",)
    version = "2"
    requires = (SPACY,)

    spacy_model: str

    def fit(self, inputs: FitInputs) -> Any:
        ids, titles, bodies = [], [], []
        for r in inputs.side["recipes"].rows(["recipe_id", "title_lemmas", "body_lemmas"]):
            ids.append(r["recipe_id"])
            titles.append(r["title_lemmas"])
            bodies.append(r["body_lemmas"])
        vocab = sieve_ops.LemmaVocab()
        title_ids = [vocab.encode(t) for t in titles]
        body_ids = [vocab.encode(b) for b in bodies]
        rid = np.asarray(ids, dtype=np.int64)
        arrays: dict[str, np.ndarray] = {"recipe_ids": rid}
        meta: dict[str, Any] = {}
        for key, obj in (("vocab", vocab), ("titles", sieve_ops.TitleIndex(rid, title_ids, vocab_size=len(vocab))),
                         ("bodies", sieve_ops.BodyMatrix(body_ids, vocab_size=len(vocab)))):
            a, m = obj.to_state()
            arrays.update(a)
            meta[key] = m
        save_arrays(inputs.artefact_dir, "recipe_index", arrays, meta)
        return {"recipes": len(ids), "lemmas": len(vocab)}

    def setup(self, state: Any) -> None:
        from ...models.nlp import ContentLemmatizer

        arrays, meta = load_arrays(artefact_dir(state), "recipe_index", with_meta=True)
        self.state = {"vocab": sieve_ops.LemmaVocab.from_state(arrays, meta["vocab"]),
                      "titles": sieve_ops.TitleIndex.from_state(arrays, meta["titles"]),
                      "bodies": sieve_ops.BodyMatrix.from_state(arrays, meta["bodies"]),
                      "recipe_ids": arrays["recipe_ids"]}
        self.lemmatize = ContentLemmatizer(self.spacy_model)
        self.row_of = {int(r): i for i, r in enumerate(arrays["recipe_ids"])}


@dataclass(eq=False)
class TitleSieve(_RecipeIndexStep):
    """Eq. 5: pair each video with the recipes whose title shares a content lemma (generic words removed)."""

    name = "title_sieve"
    id_field = "video_id"
    reads = {"video_id": str, "title": str}
    writes = {"title_lemmas": list, "candidate_recipe_ids": list}

    generic_words: frozenset[str]
    title_match: str
    title_min_shared: int
    max_title_candidates: int | None

    def process(self, rows: list[Row], out: Out) -> None:
        vocab: sieve_ops.LemmaVocab = self.state["vocab"]
        for r, lem in zip(rows, self.lemmatize([r["title"] for r in rows])):
            lemmas = sorted(lem - self.generic_words)
            if not lemmas:
                out.drop(r["video_id"], "no_title_content_words", r["title"][:120])
                continue
            cand_rows, shared, truncated = self.state["titles"].candidates(
                vocab.encode(lemmas, add=False), mode=self.title_match, min_shared=self.title_min_shared,
                max_candidates=self.max_title_candidates)
            if truncated:
                out.count("title_candidates_truncated")
            if len(cand_rows) == 0:
                out.drop(r["video_id"], "no_title_match", " ".join(lemmas)[:120])
                continue
            out.count("title_pairs", len(cand_rows))
            out.keep({**r, "title_lemmas": lemmas,
                      "candidate_recipe_ids": self.state["recipe_ids"][cand_rows].tolist()})


@dataclass(eq=False)
class ContentSieve(_RecipeIndexStep):
    """Content sieve (Batra et al., ECCV 2024, §4.2 "Sieving Videos"): keep pairs with token-IoU >= 0.1 and token-recall
    >= 0.3 over content lemmas of the whole transcript vs the recipe's steps; split validation iff max IoU >= 0.2."""

    name = "content_sieve"
    id_field = "video_id"
    reads = {"video_id": str, "asr_segments": list, "candidate_recipe_ids": list}
    writes = {"recipe_ids": list, "recipe_token_iou": list, "recipe_token_recall": list, "max_token_iou": float,
              "split": str}
    removes = ("candidate_recipe_ids",)

    iou_threshold: float
    recall_threshold: float
    val_iou_threshold: float

    def process(self, rows: list[Row], out: Out) -> None:
        vocab: sieve_ops.LemmaVocab = self.state["vocab"]
        texts = [" ".join(s["text"] for s in r["asr_segments"]) for r in rows]
        for r, lem in zip(rows, self.lemmatize(texts)):
            cand = np.asarray([self.row_of[i] for i in r["candidate_recipe_ids"]], dtype=np.int64)
            iou, recall = self.state["bodies"].scores(cand, vocab.encode(lem, add=False), video_size=len(lem))
            keep = sieve_ops.content_sieve(iou, recall, self.iou_threshold, self.recall_threshold)
            if not keep.any():
                best = int(np.argmax(iou)) if len(iou) else -1
                detail = f"best iou {iou[best]:.3f} recall {recall[best]:.3f}" if best >= 0 else "no candidates"
                out.drop(r["video_id"], "content_sieve_failed", detail)
                continue
            ids = np.asarray(r["candidate_recipe_ids"], dtype=np.int64)[keep]
            k_iou, k_rec = iou[keep], recall[keep]
            order = np.lexsort((ids, -k_iou))  # token_iou desc, then recipe id
            max_iou = float(k_iou.max())
            out.count("kept_pairs", int(keep.sum()))
            row = {k: v for k, v in r.items() if k != "candidate_recipe_ids"}
            out.keep({**row, "recipe_ids": ids[order].tolist(),
                      "recipe_token_iou": k_iou[order].astype(float).tolist(),
                      "recipe_token_recall": k_rec[order].astype(float).tolist(),
                      "max_token_iou": max_iou,
                      "split": sieve_ops.split_for(max_iou, self.val_iou_threshold)})
