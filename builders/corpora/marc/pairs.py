"""The ``pairs`` pipeline (Lin et al., ACL 2020, §2.3, §3.1, A.1.4, A.2; docs/corpora/marc.md, Pipeline steps 6-7):
within-dish recipe pairs pruned by ingredient overlap and length (:class:`DishPairsSource`), then HMM+IBM1 posteriors
in both directions (:class:`HmmIbm1Align`).

HMM+IBM1 is trained by EM over every train pair, so the pipeline is global by nature: an edit of any recipe trains
the aligners again and changes every pair's posteriors. EM reads the pairs shard by shard from disk and the workers
map the fitted tables (docs/corpora/marc.md, "EM in bounded memory"; :mod:`.em_files`).
"""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.artefacts import artefact_dir, save_json
from ...core.fingerprint import hash_obj
from ...core.records import Count, Drop, Out, Row
from ...core.step import FitInputs, Source, Step
from ...models.tokens import Tokenizer
from ...ops import dishes as dish_ops
from ...ops.hmm_ibm1 import HmmIbm1, HmmIbm1Config
from ...ops.pair_shards import PairShardWriter
from .em_files import DiskPairShards, load_tables, save_tables
from .text import SPACY

#: the columns of a ``recipes`` row (text or video) that pairs and dish graphs read
RECIPE_COLUMNS = ["recipe_id", "dish_id", "dish_name", "modality", "instructions", "start", "end",
                  "ingredient_terms", "split"]
PAIR_FIELDS: dict[str, Any] = {
    "pair_id": str, "dish_id": str, "split": str, "pair_type": str, "recipe_a": str, "recipe_b": str,
    "a_instructions": list, "b_instructions": list, "a_start": list, "a_end": list, "b_start": list, "b_end": list,
    "ingredient_match": float}


def recipes_by_dish(side: dict[str, Any]) -> dict[str, list[Row]]:
    """The text and video recipes (final rows of the ``text`` and ``videos`` pipelines), by dish."""
    by_dish: dict[str, list[Row]] = defaultdict(list)
    for name in ("text", "videos"):
        for r in side[name].rows(RECIPE_COLUMNS):
            by_dish[r["dish_id"]].append(r)
    return by_dish


@dataclass(eq=False)
class DishPairsSource(Source):
    """Within-dish recipe pairs (Lin et al., ACL 2020, §2.3, A.1.4): text-text and text-video pairs with ingredient
    overlap >= 0.70, video-video >= 0.90; text-text pairs also need instruction counts within a factor 2."""

    name = "dish_pairs"
    version = "1"
    side_inputs = ("text", "videos")
    writes = PAIR_FIELDS
    rows_carry_content = True  # a pair holds both recipes' instructions, times and its ingredient match

    text_match: float
    video_match: float
    max_length_ratio: float

    def read(self) -> Iterator[Row | Drop | Count]:
        for dish, recipes in sorted(recipes_by_dish(self.side).items()):
            by_id = {r["recipe_id"]: r for r in recipes}
            kept, dropped = dish_ops.dish_pairs(
                [(r["recipe_id"], r["modality"], len(r["instructions"]), set(r["ingredient_terms"])) for r in recipes],
                self.text_match, self.video_match, self.max_length_ratio)
            for key, reason in dropped:
                yield Drop(f"{dish}:{key}", self.name, reason)
            for p in kept:
                a, b = by_id[p["recipe_a"]], by_id[p["recipe_b"]]
                yield {"pair_id": f"{dish}:{a['recipe_id']}|{b['recipe_id']}", "dish_id": dish,
                       "split": a["split"], "pair_type": p["pair_type"], "recipe_a": a["recipe_id"],
                       "recipe_b": b["recipe_id"], "a_instructions": a["instructions"],
                       "b_instructions": b["instructions"], "a_start": a["start"], "a_end": a["end"],
                       "b_start": b["start"], "b_end": b["end"], "ingredient_match": float(p["ingredient_match"])}


#: model name -> (source side, target side, pair type) of the directed alignments it produces (Lin et al., ACL 2020,
#: §3.1)
MODELS = {"text_text": "text_text", "video_video": "video_video", "text_to_video": "text_video",
          "video_to_text": "text_video"}


def _directions(pair_type: str) -> tuple[str, str]:
    """Models for (a -> b, b -> a): recipe a is the text side of a text-video pair (docs/corpora/marc.md, Outputs)."""
    if pair_type == "text_video":
        return "text_to_video", "video_to_text"
    return pair_type, pair_type


def _model_fingerprint(model: Any) -> str:
    return hash_obj(model.config.to_dict(), sorted(model.vocabulary.items()), model.keys.tobytes().hex()[:64],
                    float(model.t.sum()), sorted(model.jump.items()), len(model.keys))[:12]


@dataclass(eq=False)
class HmmIbm1Align(Step):
    """Lin et al., ACL 2020, §3.1 (Eq. 1, A.2): HMM over target instructions with IBM Model 1 emissions, trained by EM
    on the train-split pairs (``text_text`` and ``video_video`` on both directions, ``text_to_video`` and
    ``video_to_text`` one each), vocabulary cut-offs over the train split; posteriors for every pair of every split in
    both directions.

    ``aligner: best`` (default) is the preset that aligns best on real data (``HmmIbm1Config.best``, see
    ``builders.ops.hmm_ibm1.BEST_NOTE``); ``aligner: paper`` the paper's configuration. ``text_min_count`` /
    ``video_min_count``: the vocabulary cut-offs (the corpus config resolves them from the preset,
    ``MarcConfig.min_counts``).
    """

    name = "hmm_ibm1"
    version = "3"  # 3: tables as checked .npy files that workers map (EM streamed from pair shards)
    id_field = "pair_id"
    side_inputs = ("text", "videos")
    reads = {"pair_id": str, "split": str, "pair_type": str, "a_instructions": list, "b_instructions": list}
    writes = {"a_to_b": list, "b_to_a": list, "model_a_to_b": str, "model_b_to_a": str}
    # spaCy's English stop words are the aligner's stop list; ``tokens: nouns | nouns_verbs`` tags with spaCy too
    requires = (SPACY,)

    aligner: str
    text_min_count: int
    video_min_count: int
    tokens: str
    spacy_model: str

    def _config(self) -> HmmIbm1Config:
        return HmmIbm1Config.best() if self.aligner == "best" else HmmIbm1Config.paper()

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """EM of the four models in bounded memory (docs/corpora/marc.md, "EM in bounded memory"): the train pairs
        are read once, encoded with each model's vocabulary and written as shards of packed ids in the fit's folder;
        each model is then trained from its shards (:meth:`HmmIbm1.fit_streamed`, one shard in memory at a time)
        and its tables saved as checked ``.npy`` files that workers map (:mod:`.em_files`)."""
        tok = Tokenizer(self.tokens, self.spacy_model)
        text_min, video_min = self.text_min_count, self.video_min_count
        counts = {"text": Counter(), "video": Counter()}
        raw_sizes = {}
        for side, modality in (("text", "text"), ("videos", "video")):
            for r in inputs.side[side].rows(["split", "instructions"]):
                if r["split"] == "train":
                    for toks in tok(r["instructions"]):
                        counts[modality].update(toks)
            raw_sizes[modality] = len(counts[modality])
        vocab_words = {"text": {w for w, c in counts["text"].items() if c >= text_min},
                       "video": {w for w, c in counts["video"].items() if c >= video_min}}
        del counts
        words = {"text_text": vocab_words["text"], "video_video": vocab_words["video"],
                 "text_to_video": vocab_words["text"] | vocab_words["video"],
                 "video_to_text": vocab_words["text"] | vocab_words["video"]}
        vocabs = {name: {w: i for i, w in enumerate(sorted(words[name]))} for name in MODELS}
        del words
        cfg = self._config()
        scratch = inputs.artefact_dir / "em_pairs"
        stores = {name: DiskPairShards(scratch / name) for name in MODELS}
        writers = {name: PairShardWriter(vocabs[name], stores[name].append, cfg.chunk_entries, flatten=not cfg.hmm)
                   for name in MODELS}
        for r in inputs.data.rows(["split", "pair_type", "a_instructions", "b_instructions"]):
            if r["split"] != "train":
                continue
            a, b = tok(r["a_instructions"]), tok(r["b_instructions"])
            fwd, bwd = _directions(r["pair_type"])
            writers[fwd].add(a, b)
            writers[bwd].add(b, a)
        names, info_models = {}, {}
        for name in MODELS:
            writers[name].close()
            if not stores[name].pairs:
                continue
            model = HmmIbm1(cfg).fit_streamed(stores[name], vocabs[name])
            names[name] = f"hmm_ibm1/{name}@{_model_fingerprint(model)}"
            arrays, meta = model.to_state()
            save_tables(inputs.artefact_dir, f"model_{name}", arrays, meta)
            info_models[name] = {"jump": {str(d): round(p, 6) for d, p in sorted(model.jump.items())},
                                 "em_seconds": round(model.timings.get("em", 0.0), 3),
                                 "table_bytes": int(sum(a.nbytes for a in arrays.values()))}
            del model, arrays
        shutil.rmtree(scratch)
        info = {"names": names,
                "vocabulary": {"text": [raw_sizes["text"], len(vocab_words["text"]), text_min],
                               "video": [raw_sizes["video"], len(vocab_words["video"]), video_min]},
                "train_pairs": {k: s.pairs for k, s in sorted(stores.items()) if s.pairs},
                "jump": {k: v["jump"] for k, v in info_models.items()},
                "em_seconds": {k: v["em_seconds"] for k, v in info_models.items()},
                "table_bytes": {k: v["table_bytes"] for k, v in info_models.items()}}
        save_json(inputs.artefact_dir, "aligner_info", info)
        return {"names": names}

    def setup(self, state: Any) -> None:
        """The fitted tables of each model, memory-mapped (checked first: a damaged one is refitted, never used)."""
        root = artefact_dir(state)
        models = {}
        for name in state["names"]:
            arrays, meta = load_tables(root, f"model_{name}")
            models[name] = HmmIbm1.from_state(arrays, meta)
        self.state = {"models": models, "names": state["names"]}
        self.tok = Tokenizer(self.tokens, self.spacy_model)

    def process(self, rows: list[Row], out: Out) -> None:
        models = self.state["models"]
        jobs: dict[str, list[tuple[int, str, list[list[str]], list[list[str]]]]] = defaultdict(list)
        tokens = []
        for i, r in enumerate(rows):
            a, b = self.tok(r["a_instructions"]), self.tok(r["b_instructions"])
            tokens.append((a, b))
            fwd, bwd = _directions(r["pair_type"])
            jobs[fwd].append((i, "a_to_b", a, b))
            jobs[bwd].append((i, "b_to_a", b, a))
        results: dict[tuple[int, str], Any] = {}
        for name, items in jobs.items():
            if name not in models:
                continue
            vocab = models[name].vocabulary
            for (i, direction, src, _), al in zip(items, models[name].align([(s, t) for _, _, s, t in items])):
                results[(i, direction)] = al
                out.count("empty_after_vocab", sum(1 for ins in src if not any(w in vocab for w in ins)))
        for i, r in enumerate(rows):
            fwd, bwd = _directions(r["pair_type"])
            missing = [n for n in (fwd, bwd) if n not in models]
            if missing:
                out.drop(r["pair_id"], "no_alignment_model", f"no train-split pairs for {', '.join(missing)}")
                continue
            ab, ba = results[(i, "a_to_b")], results[(i, "b_to_a")]
            if not (np.all(np.isfinite(ab.gamma)) and np.all(np.isfinite(ba.gamma))):
                out.drop(r["pair_id"], "alignment_numerical_error", "NaN or inf posterior")
                continue
            out.keep({**r, "a_to_b": ab.rows(), "b_to_a": ba.rows(), "model_a_to_b": self.state["names"][fwd],
                      "model_b_to_a": self.state["names"][bwd]})
