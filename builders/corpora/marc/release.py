"""The ``marc`` release: rows of each config, the classifier files, the paper quantities and the card context,
handed to the core's release flow (``builders.core.release_flow``).

Release layout (specs/marc.md §4, specs/releases.md §1)::

    <out>/marc/README.md             card + configs + dataset_info (features from loading_scripts.marc)
    <out>/marc/<config>/<split>-xxxxx-of-yyyyy.parquet   recipes, pairwise_{text_text,text_video,video_video},
                                                         joint, paraphrases, multi_step_breakdown, chat_content
    <out>/marc/stats.json  drops.parquet  report.html  manifest.json  build_config.yaml
    <out>/marc/models/     the chat/content classifier (JSON) and its scores, when one was trained
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loading_scripts import marc as schema

from ... import __version__ as TOOLKIT_VERSION
from ...core.orchestrate import BuildResult
from ...core.release_flow import ReleaseSpec, write_release
from ...ops.alignment_products import multi_step_breakdowns, paraphrases
from ...release import fmt_value, md_table, stats_tables
from .config import MarcConfig
from .flags import INPUT_KEYS

NAME = "marc"
CARD_TEMPLATE = Path(__file__).resolve().parents[3] / "cards" / "marc.md"
SPLITS = ("train", "validation", "test")

#: paper 002 §2, Table 1, A.1 and spec §7: full-scale statistics next to which a build is reported
PAPER_QUANTITIES: dict[str, float | None] = {
    "text_recipes": 48_852, "dishes": 4_262, "dishes_train": 4_065, "dishes_validation": 94, "dishes_test": 103,
    "mean_recipes_per_dish": 6.54, "mean_instructions_per_text_recipe": 8, "video_recipes": 77_550,
    "pairs_text_text": 63_528, "pairs_text_video": 65_432, "pairs_video_video": 19_988,
    "vocabulary_text": 13_061, "vocabulary_video": 16_733,
    "paraphrases_text_text": 358_516, "paraphrases_text_video": 211_703, "multi_step_breakdowns": 5_592,
    "chat_classifier_test_f1": 85.01,
}


# ---------------------------------------------------------------------------------------------- release rows
def _stage_rows(result: BuildResult, pipeline: str) -> list[dict[str, Any]]:
    return list(result.outputs[pipeline].rows())


def recipe_row(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r[k] for k in schema.FEATURES["recipes"]}


def pairwise_row(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r[k] for k in schema.FEATURES["pairwise"]}


def _nan_if_empty(times: list[float], i: int) -> float:
    return float(times[i]) if times else float("nan")


def paraphrase_rows(pair: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """§3.9: directed alignments with posterior > ``threshold``; an instruction pair found both ways is one row."""
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
    """§3.10 (text-text pairs, each direction): target instruction n broken down into the >= 2 source instructions
    whose argmax is n with posterior > ``threshold``."""
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


def chat_content_rows(folder: Path) -> dict[str, list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    out: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for r in pq.read_table(folder / "sentences.parquet").to_pylist():
        out[r["split"]].append({"video_id": r["video_id"], "recipe_type": str(r["recipe_type"]),
                                "sentence": r["sentence"], "start": r["start"], "end": r["end"],
                                "label": int(r["label"])})
    return out


def quantities(by_config: dict[str, dict[str, list[dict[str, Any]]]], aligner_info: dict[str, Any] | None,
               classifier: dict[str, Any] | None, sample: bool) -> dict[str, dict[str, Any]]:
    """The §7 quantities of this build next to the paper's, flagged when they deviate by more than 20%."""
    recipes = [r for rows in by_config["recipes"].values() for r in rows]
    text = [r for r in recipes if r["modality"] == "text"]
    dishes_by_split = {s: {r["dish_id"] for r in by_config["recipes"][s] if r["modality"] == "text"} for s in SPLITS}
    n_dishes = sum(len(v) for v in dishes_by_split.values())
    vocab = {k: v[1] for k, v in (aligner_info or {}).get("vocabulary", {}).items()}
    value: dict[str, Any] = {
        "text_recipes": len(text), "dishes": n_dishes,
        **{f"dishes_{s}": len(dishes_by_split[s]) for s in SPLITS},
        "mean_recipes_per_dish": round(len(text) / n_dishes, 2) if n_dishes else None,
        "mean_instructions_per_text_recipe": round(float(np.mean([len(r["instructions"]) for r in text])), 2)
        if text else None,
        "video_recipes": len(recipes) - len(text),
        **{f"pairs_{t}": sum(len(v) for v in by_config[f"pairwise_{t}"].values()) for t in schema.PAIR_TYPES},
        "vocabulary_text": vocab.get("text"), "vocabulary_video": vocab.get("video"),
        "paraphrases_text_text": sum(r["kind"] == "text_text" for rows in by_config["paraphrases"].values()
                                     for r in rows),
        "paraphrases_text_video": sum(r["kind"] == "text_video" for rows in by_config["paraphrases"].values()
                                      for r in rows),
        "multi_step_breakdowns": sum(len(v) for v in by_config["multi_step_breakdown"].values()),
        "chat_classifier_test_f1": round(100 * classifier["scores"]["test"]["f1"], 2)
        if classifier and "test" in classifier.get("scores", {}) else None,
    }
    from ...release import compare_with_paper

    cause = ("sample build: a few hand-written pages, not Common Crawl" if sample else
             "smaller or different inputs than the paper's 3.2M Common Crawl recipes")
    return compare_with_paper(value, PAPER_QUANTITIES, cause, notes={
        "mean_recipes_per_dish": "paper text says 6.54 (sd 7.22) but 48,852 / 4,262 = 11.46: both reported (spec §7)"})


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
    """The eight configs, the classifier files and the card, through the core's release flow."""
    text = _stage_rows(result, "text")
    videos = _stage_rows(result, "videos")
    pairs = _stage_rows(result, "pairs")
    joint = _stage_rows(result, "dishes")

    by_config: dict[str, dict[str, list[dict[str, Any]]]] = {c: {s: [] for s in SPLITS} for c in schema.CONFIG_FEATURES}
    for r in sorted(text + videos, key=lambda r: (r["dish_id"], r["modality"], r["recipe_id"])):
        by_config["recipes"][r["split"]].append(recipe_row(r))
    for p in sorted(pairs, key=lambda p: p["pair_id"]):
        by_config[f"pairwise_{p['pair_type']}"][p["split"]].append(pairwise_row(p))
        if p["pair_type"] != "video_video" or cfg.release_video_video_paraphrases:
            by_config["paraphrases"][p["split"]].extend(paraphrase_rows(p, cfg.paraphrase_threshold))
        if p["pair_type"] == "text_text":
            by_config["multi_step_breakdown"][p["split"]].extend(breakdown_rows(p, cfg.breakdown_threshold))
    for j in sorted(joint, key=lambda j: j["dish_id"]):
        by_config["joint"][j["split"]].append({k: j[k] for k in schema.FEATURES["joint"]})

    files: dict[str, Path | bytes | str] = {}
    classifier = _classifier_files(result, {v["source"]["chat_classifier"] for v in videos})
    if classifier:
        by_config["chat_content"] = chat_content_rows(classifier["folder"])
        files["models/chat_classifier.json"] = classifier["folder"] / "model.json"
        files["models/chat_classifier_scores.json"] = classifier["folder"] / "scores.json"

    aligners = {}
    for p in pairs:
        for key in ("model_a_to_b", "model_b_to_a"):
            name = p[key]
            aligners[name.split("@")[0]] = name
    aligner_info = _aligner_info(result) if aligners else None
    spec = ReleaseSpec(
        corpus=NAME, title="MARC-style aligned recipe corpus", report_title="MARC build report",
        features={c: schema.features(c) for c in by_config}, default_config=schema.DEFAULT_CONFIG, card=schema.CARD,
        card_template=CARD_TEMPLATE, split_order=SPLITS, rows=by_config, files=files,
        models=models(cfg, aligners, (classifier or {}).get("name")),
        stats_extra={
            "quantities": quantities(by_config, aligner_info, classifier, info["sample"]),
            "chat_classifier": {k: v for k, v in (classifier or {}).items() if k != "folder"} or None,
            "aligner": {"preset": cfg.aligner, "models": aligners, "tokens": cfg.tokens,
                        "min_counts": dict(zip(("text", "video"), cfg.min_counts())), **(aligner_info or {})},
            "release_empty_configs": sorted(c for c in by_config if not any(by_config[c].values())),
        },
        card_context=lambda stats, man: card_context(stats, man, cfg),
        report_videos=[{"video_id": v["recipe_id"], "duration": max(v["end"]) if v["end"] else None,
                        "segments": [{"start": s, "end": e, "text": t}
                                     for s, e, t in zip(v["start"], v["end"], v["instructions"])]} for v in videos],
        input_keys=INPUT_KEYS,
        empty="" if any(by_config["recipes"].values()) else "no recipe survived the pipeline")
    return write_release(result, cfg, out_dir, info, spec)
