"""The ``marc`` release: rows of each config, the classifier files, the paper quantities and the card context,
handed to the release flow (``builders.release.flow``).

Release layout (docs/corpora/marc.md, docs/publishing.md)::

    <out>/marc/README.md             card + configs + dataset_info (features from loading_scripts.marc)
    <out>/marc/<config>/<split>-xxxxx-of-yyyyy.parquet   recipes, pairwise_{text_text,text_video,video_video},
                                                         joint, paraphrases, multi_step_breakdown, chat_content
    <out>/marc/stats.json  drops.parquet  report.html  manifest.json  build_config.yaml
    <out>/marc/models/     the chat/content classifier (JSON) and its scores, when one was trained
"""

from __future__ import annotations

import functools
import importlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from ... import __version__ as TOOLKIT_VERSION
from ...core.orchestrate import BuildResult
from ...release.flow import ReleaseSpec, schema_files, write_release
from ...release.parts import ShardedRows
from ...release.streaming import SortedSpill, count_rows
from ...release.tallies import Tally
from ...ops.alignment_products import multi_step_breakdowns, paraphrases
from ...release import fmt_value, md_table, stats_tables
from .config import MarcConfig
from .flags import INPUT_KEYS

NAME = "marc"
CARD_TEMPLATE = Path(__file__).resolve().parents[3] / "cards" / "marc.md"
#: the loading script that defines the release's features, card and splits: imported only when the release is
#: written (it imports datasets, half a second), so that a cached rerun stays fast
SCHEMA = "loading_scripts.marc"
schema = functools.partial(importlib.import_module, SCHEMA)

#: the fields the release reads from each pipeline's output rows (``Corpus.RELEASE_READS``): checked against the
#: pipelines' row contracts before any work, and the only fields the release can read
_RECIPE_FIELDS: dict[str, Any] = {
    "recipe_id": str, "dish_id": str, "dish_name": str, "modality": str, "title": str, "url": str, "language": str,
    "ingredients": list, "ingredient_terms": list, "instructions": list, "step_index": list, "section": list,
    "start": list, "end": list, "num_chat_removed": int, "source": dict, "split": str}
RELEASE_READS: dict[str, dict[str, Any]] = {
    "text": _RECIPE_FIELDS,
    "videos": _RECIPE_FIELDS,
    "pairs": {"pair_id": str, "dish_id": str, "pair_type": str, "recipe_a": str, "recipe_b": str,
              "a_instructions": list, "b_instructions": list, "a_start": list, "a_end": list, "b_start": list,
              "b_end": list, "ingredient_match": float, "a_to_b": list, "b_to_a": list, "model_a_to_b": str,
              "model_b_to_a": str, "split": str},
    "dishes": {"dish_id": str, "dish_name": str, "nodes": list, "forest_edges": list, "aligned_sets": list,
               "edge_threshold": float, "split": str},
}
SPLITS = ("train", "validation", "test")

#: Lin et al., ACL 2020, §2, Table 1, A.1: full-scale statistics next to which a build is reported
PAPER_QUANTITIES: dict[str, float | None] = {
    "text_recipes": 48_852, "dishes": 4_262, "dishes_train": 4_065, "dishes_validation": 94, "dishes_test": 103,
    "mean_recipes_per_dish": 6.54, "mean_instructions_per_text_recipe": 8, "video_recipes": 77_550,
    "pairs_text_text": 63_528, "pairs_text_video": 65_432, "pairs_video_video": 19_988,
    "vocabulary_text": 13_061, "vocabulary_video": 16_733,
    "paraphrases_text_text": 358_516, "paraphrases_text_video": 211_703, "multi_step_breakdowns": 5_592,
    "chat_classifier_test_f1": 85.01,
}


# ---------------------------------------------------------------------------------------------- release rows
def recipe_row(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r[k] for k in schema().FEATURES["recipes"]}


def pairwise_row(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r[k] for k in schema().FEATURES["pairwise"]}


def _nan_if_empty(times: list[float], i: int) -> float:
    return float(times[i]) if times else float("nan")


def paraphrase_rows(pair: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """Paraphrases (Lin et al., ACL 2020, §5.2): directed alignments with posterior > ``threshold``; an instruction pair
    found both ways is one row."""
    kind = pair["pair_type"]
    ab_t = [x["target_index"] for x in pair["a_to_b"]]
    ab_p = [x["probability"] for x in pair["a_to_b"]]
    ba_t = [x["target_index"] for x in pair["b_to_a"]]
    ba_p = [x["probability"] for x in pair["b_to_a"]]
    out = []
    for p in paraphrases(ab_t, ab_p, ba_t, ba_p, threshold=threshold):
        out.append({"pair_id": pair["pair_id"], "dish_id": pair["dish_id"], "kind": kind,
                    "a_recipe_id": pair["recipe_a"], "a_index": p.a_index, "a_text": pair["a_instructions"][p.a_index],
                    "a_start": _nan_if_empty(pair["a_start"], p.a_index),
                    "a_end": _nan_if_empty(pair["a_end"], p.a_index),
                    "b_recipe_id": pair["recipe_b"], "b_index": p.b_index, "b_text": pair["b_instructions"][p.b_index],
                    "b_start": _nan_if_empty(pair["b_start"], p.b_index),
                    "b_end": _nan_if_empty(pair["b_end"], p.b_index),
                    "probability": p.probability, "directions": p.directions, "threshold": threshold})
    return out


def breakdown_rows(pair: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """Multi-step breakdowns (Lin et al., ACL 2020, §5.3; text-text pairs, each direction): target instruction n broken
    down into the >= 2 source instructions whose argmax is n with posterior > ``threshold``."""
    out = []
    for direction, src, tgt in (("a_to_b", "a", "b"), ("b_to_a", "b", "a")):
        align = pair[direction]
        rows = multi_step_breakdowns([x["target_index"] for x in align], [x["probability"] for x in align],
                                     threshold=threshold)
        for b in rows:
            out.append({"pair_id": pair["pair_id"], "dish_id": pair["dish_id"],
                        "single_recipe_id": pair[f"recipe_{tgt}"], "single_index": b.single_index,
                        "single_text": pair[f"{tgt}_instructions"][b.single_index],
                        "multi_recipe_id": pair[f"recipe_{src}"], "multi_indices": list(b.multi_indices),
                        "multi_texts": [pair[f"{src}_instructions"][m] for m in b.multi_indices],
                        "probabilities": list(b.probabilities), "contiguous": b.contiguous, "threshold": threshold})
    return out


def _classifier_files(result: BuildResult, names: set[str]) -> dict[str, Any] | None:
    """The trained classifier (model.json, sentences.parquet, scores.json) from the ``chat_filter`` stage's artefacts,
    when the kept videos used it."""
    import json

    rec = result.fits.get("chat_filter")
    if rec is None:
        return None
    folder = rec.artefact_dir
    scores = folder / "scores.json"
    if (folder / "model.json").exists() and scores.exists():
        info = json.loads(scores.read_text(encoding="utf-8"))
        if info.get("name") in names:
            return {"folder": folder, **info}
    return None


def _aligner_info(result: BuildResult) -> dict[str, Any] | None:
    """What the ``hmm_ibm1`` stage recorded (vocabulary sizes, training pairs, learned jumps, EM time)."""
    import json

    rec = result.fits.get("hmm_ibm1")
    if rec is None or not (rec.artefact_dir / "aligner_info.json").exists():
        return None
    info = json.loads((rec.artefact_dir / "aligner_info.json").read_text(encoding="utf-8"))
    return {k: v for k, v in info.items() if k != "names"}


def chat_content_rows(folder: Path, split: str) -> Iterator[dict[str, Any]]:
    """Rows of the ``chat_content`` config of one split, streamed from the classifier's ``sentences.parquet``."""
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(folder / "sentences.parquet").iter_batches(batch_size=10_000):
        for r in batch.to_pylist():
            if r["split"] == split:
                yield {"video_id": r["video_id"], "recipe_type": str(r["recipe_type"]), "sentence": r["sentence"],
                       "start": r["start"], "end": r["end"], "label": int(r["label"])}


@dataclass
class MarcScan:
    """One streamed pass over the final stages: row counts of every config and split, and what the paper's quantities,
    the manifest and the card need (dish sets, instruction counts, aligner and classifier names), never the rows."""

    rows: Counter = field(default_factory=Counter)        # (config, split) -> rows
    text_per_split: Counter = field(default_factory=Counter)
    dishes_by_split: dict[str, set[str]] = field(default_factory=lambda: {s: set() for s in SPLITS})
    instructions_per_text_recipe: Tally = field(default_factory=Tally)
    paraphrases_by_kind: Counter = field(default_factory=Counter)
    aligners: dict[str, str] = field(default_factory=dict)
    classifier_names: set[str] = field(default_factory=set)


def scan(result: BuildResult, cfg: MarcConfig) -> MarcScan:
    out = MarcScan()
    for name in ("text", "videos"):
        for r in result.outputs[name].rows(["split", "modality", "dish_id", "instructions", "source"]):
            out.rows["recipes", r["split"]] += 1
            if r["modality"] == "text":
                out.text_per_split[r["split"]] += 1
                out.dishes_by_split[r["split"]].add(r["dish_id"])
                out.instructions_per_text_recipe.add(len(r["instructions"]))
            if name == "videos":
                out.classifier_names.add(r["source"]["chat_classifier"])
    for p in result.outputs["pairs"].rows():
        out.rows[f"pairwise_{p['pair_type']}", p["split"]] += 1
        if p["pair_type"] != "video_video" or cfg.release_video_video_paraphrases:
            n = len(paraphrase_rows(p, cfg.paraphrase_threshold))
            out.rows["paraphrases", p["split"]] += n
            out.paraphrases_by_kind[p["pair_type"]] += n
        if p["pair_type"] == "text_text":
            out.rows["multi_step_breakdown", p["split"]] += len(breakdown_rows(p, cfg.breakdown_threshold))
        for key in ("model_a_to_b", "model_b_to_a"):
            out.aligners[p[key].split("@")[0]] = p[key]
    for j in result.outputs["dishes"].rows(["split"]):
        out.rows["joint", j["split"]] += 1
    return out


def quantities(sc: MarcScan, aligner_info: dict[str, Any] | None, classifier: dict[str, Any] | None,
               sample: bool) -> dict[str, dict[str, Any]]:
    """The paper's quantities of this build next to the paper's, flagged when they deviate by more than 20%."""
    n_text = sum(sc.text_per_split.values())
    n_dishes = sum(len(v) for v in sc.dishes_by_split.values())
    vocab = {k: v[1] for k, v in (aligner_info or {}).get("vocabulary", {}).items()}
    value: dict[str, Any] = {
        "text_recipes": n_text, "dishes": n_dishes,
        **{f"dishes_{s}": len(sc.dishes_by_split[s]) for s in SPLITS},
        "mean_recipes_per_dish": round(n_text / n_dishes, 2) if n_dishes else None,
        "mean_instructions_per_text_recipe": round(float(sc.instructions_per_text_recipe.mean), 2)
        if n_text else None,
        "video_recipes": sum(sc.rows["recipes", s] for s in SPLITS) - n_text,
        **{f"pairs_{t}": sum(sc.rows[f"pairwise_{t}", s] for s in SPLITS) for t in schema().PAIR_TYPES},
        "vocabulary_text": vocab.get("text"), "vocabulary_video": vocab.get("video"),
        "paraphrases_text_text": sc.paraphrases_by_kind["text_text"],
        "paraphrases_text_video": sc.paraphrases_by_kind["text_video"],
        "multi_step_breakdowns": sum(sc.rows["multi_step_breakdown", s] for s in SPLITS),
        "chat_classifier_test_f1": round(100 * classifier["scores"]["test"]["f1"], 2)
        if classifier and "test" in classifier.get("scores", {}) else None,
    }
    from ...release import compare_with_paper

    cause = ("sample build: a few hand-written pages, not Common Crawl" if sample else
             "smaller or different inputs than the paper's 3.2M Common Crawl recipes")
    return compare_with_paper(value, PAPER_QUANTITIES, cause, notes={
        "mean_recipes_per_dish": "paper text says 6.54 (sd 7.22) but 48,852 / 4,262 = 11.46: both reported "
                                 "(Lin et al., ACL 2020, §2)"})


def models(cfg: MarcConfig, aligners: dict[str, str], classifier: str | None) -> dict[str, Any]:
    """The manifest's models: the aligners' ids, the classifier's name and the lemmatizer's versions."""
    from ...models.nlp import ContentLemmatizer

    return {"aligners": aligners, "chat_classifier": classifier,
            "lemmatizer": ContentLemmatizer(cfg.spacy_model).versions()}


def card_context(stats: dict[str, Any], man: dict[str, Any], cfg: MarcConfig) -> dict[str, str]:
    from ...ops.hmm_ibm1 import BEST_SETTINGS, HmmIbm1Config, stop_words

    clf = stats.get("chat_classifier") or {}
    scores = clf.get("scores") or {}
    aligner = HmmIbm1Config.best() if cfg.aligner == "best" else HmmIbm1Config.paper()
    text_min, video_min = cfg.min_counts()
    return {
        **stats_tables(stats),
        "models_table": md_table(["model", "id"], [[k, v] for k, v in sorted(man["models"]["aligners"].items())])
        if man["models"]["aligners"] else "No aligner was trained (no train-split pair).",
        "classifier_table": md_table(
            ["split", "precision", "recall", "F1"],
            [[s, fmt_value(round(100 * d["precision"], 2)), fmt_value(round(100 * d["recall"], 2)), fmt_value(round(100 * d["f1"], 2))]
             for s, d in scores.items() if isinstance(d, dict) and "f1" in d]) if scores else
        "No classifier was trained in this build (`classifier: none`, a supplied `--chat-model`, or no video input).",
        "chat_classifier": str(clf.get("name") or cfg.classifier),
        "aligner": cfg.aligner, "aligner_settings": ", ".join(f"{k}={v}" for k, v in aligner.to_dict().items()
                                                             if k in ("schedule", "identity_prior", "identity_map",
                                                                      "null_word", "smoothing")),
        "best_settings": ", ".join(f"{k}={v}" for k, v in BEST_SETTINGS.items()),
        "text_min_count": str(text_min), "video_min_count": str(video_min), "tokens": cfg.tokens,
        "num_stop_words": str(len(stop_words())),
        "text_match": str(cfg.text_match), "video_match": str(cfg.video_match),
        "max_length_ratio": str(cfg.max_length_ratio), "edge_threshold": str(cfg.edge_threshold),
        "paraphrase_threshold": str(cfg.paraphrase_threshold), "breakdown_threshold": str(cfg.breakdown_threshold),
        "chat_threshold": str(cfg.chat_threshold), "max_title_words": str(cfg.max_title_words),
        "min_recipes_per_dish": str(cfg.min_recipes_per_dish), "max_recipes_per_dish": str(cfg.max_recipes_per_dish),
        "instruction_unit": cfg.instruction_unit, "toolkit_version": TOOLKIT_VERSION,
        "git_commit": str(man["git_commit"]),
        "sample_note": ("This release was built from the **bundled hand-written sample** (a WARC file of made-up "
                        "recipe pages and made-up transcripts, not Common Crawl or YouTube data); it demonstrates the "
                        "pipeline, its numbers are not comparable to the paper's." if man["sample"] else
                        "Built from the inputs listed in `manifest.json`."),
    }


def release(result: BuildResult, cfg: MarcConfig, out_dir: Path, info: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The eight configs, the classifier files and the card, through the core's release flow: every config is
    streamed from the final work shards in its release order (sorted on disk where the shards are not)."""
    sc = functools.cache(lambda: scan(result, cfg))
    classifier = functools.cache(lambda: _classifier_files(result, sc().classifier_names))
    aligner_info = functools.cache(lambda: _aligner_info(result) if sc().aligners else None)

    @functools.cache
    def recipes() -> SortedSpill:
        spill = SortedSpill(spec.scratch_dir() / "recipes", key=lambda r: (r["dish_id"], r["modality"], r["recipe_id"]))
        for name in ("text", "videos"):
            for r in result.outputs[name].rows():
                spill.add(recipe_row(r), r["split"])
        return spill

    @functools.cache
    def pairs() -> SortedSpill:
        spill = SortedSpill(spec.scratch_dir() / "pairs", key=lambda p: p["pair_id"])
        for p in result.outputs["pairs"].rows():
            spill.add(pairwise_row(p), (p["pair_type"], p["split"]))
        return spill

    def joint_rows(rows: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
        fields = list(schema().FEATURES["joint"])
        return ((j["split"], {k: j[k] for k in fields}) for j in rows)

    def rows() -> dict[str, dict[str, Any] | ShardedRows]:
        para_types = [t for t in schema().PAIR_TYPES if t != "video_video" or cfg.release_video_video_paraphrases]
        out: dict[str, dict[str, Any] | ShardedRows] = {c: {} for c in schema().CONFIG_FEATURES}
        for s in SPLITS:
            out["recipes"][s] = lambda s=s: recipes().rows(s)
            for t in schema().PAIR_TYPES:
                out[f"pairwise_{t}"][s] = lambda s=s, t=t: pairs().rows((t, s))
            out["paraphrases"][s] = lambda s=s: (x for p in pairs().rows(*[(t, s) for t in para_types])
                                                 for x in paraphrase_rows(p, cfg.paraphrase_threshold))
            out["multi_step_breakdown"][s] = lambda s=s: (x for p in pairs().rows(("text_text", s))
                                                          for x in breakdown_rows(p, cfg.breakdown_threshold))
            out["chat_content"][s] = lambda s=s: (chat_content_rows(classifier()["folder"], s) if classifier()
                                                  else iter(()))
        # the dish graphs are listed in dish_id order, the joint config's order: its rows come from parts made one
        # work shard at a time (an edit re-encodes the shards of the dishes it changed)
        out["joint"] = ShardedRows(result.outputs["dishes"], joint_rows)
        return out

    def files() -> dict[str, Path]:
        clf = classifier()
        return {"models/chat_classifier.json": clf["folder"] / "model.json",
                "models/chat_classifier_scores.json": clf["folder"] / "scores.json"} if clf else {}

    def stats_extra() -> dict[str, Any]:
        import pyarrow.parquet as pq

        clf, info_ = classifier(), aligner_info()
        n_chat = pq.ParquetFile(clf["folder"] / "sentences.parquet").metadata.num_rows if clf else 0
        total = {c: n_chat if c == "chat_content" else sum(sc().rows[c, s] for s in SPLITS)
                 for c in schema().CONFIG_FEATURES}
        return {
            "quantities": quantities(sc(), info_, clf, info["sample"]),
            "chat_classifier": {k: v for k, v in (clf or {}).items() if k != "folder"} or None,
            "aligner": {"preset": cfg.aligner, "models": sc().aligners, "tokens": cfg.tokens,
                        "min_counts": dict(zip(("text", "video"), cfg.min_counts())), **(info_ or {})},
            "release_empty_configs": sorted(c for c, n in total.items() if not n),
        }

    def report_videos() -> Iterator[dict[str, Any]]:
        for v in result.outputs["videos"].rows(["recipe_id", "start", "end", "instructions"]):
            yield {"video_id": v["recipe_id"], "duration": max(v["end"]) if v["end"] else None,
                   "segments": [{"start": s, "end": e, "text": t}
                                for s, e, t in zip(v["start"], v["end"], v["instructions"])]}

    spec = ReleaseSpec(
        corpus=NAME, title="MARC-style aligned recipe corpus", report_title="MARC build report",
        features=lambda: {c: schema().features(c) for c in schema().CONFIG_FEATURES},
        card=lambda: schema().CARD, card_template=CARD_TEMPLATE, split_order=SPLITS, rows=rows, files=files,
        models=lambda: models(cfg, sc().aligners, (classifier() or {}).get("name")),
        stats_extra=stats_extra, card_context=lambda stats, man: card_context(stats, man, cfg),
        report_videos=report_videos, path_keys=INPUT_KEYS,
        key_files=(Path(__file__).resolve(), *schema_files(SCHEMA)),
        empty="" if count_rows(result.outputs["text"]) + count_rows(result.outputs["videos"])
        else "no recipe survived the pipeline")
    return write_release(result, cfg, out_dir, info, spec)
