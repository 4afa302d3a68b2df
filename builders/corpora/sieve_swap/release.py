"""The ``sieve_swap`` release: rows of each config, the paper quantities and the card context, handed to the
release flow (``builders.release.flow``).

Release layout (docs/corpora/sieve_swap.md, docs/publishing.md)::

    <out>/sieve_swap/README.md                      card + configs + dataset_info (from loading_scripts.sieve_swap)
    <out>/sieve_swap/{default,raw_asr,recipes}/<split>-xxxxx-of-yyyyy.parquet
    <out>/sieve_swap/stats.json  drops.parquet  report.html  manifest.json  build_config.yaml
    <out>/sieve_swap/yc2format/sieve_swap_<split>_yc2format.json   (+ _raw_transcript.json)
"""

from __future__ import annotations

import functools
import importlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__ as TOOLKIT_VERSION
from ...core.orchestrate import BuildResult
from ...release.flow import ReleaseSpec, schema_files, write_release
from ...release.parts import ShardedRows
from ...release.streaming import SortedSpill, count_rows, write_json_object
from ...release.tallies import Tally
from ...release import md_table, stats_tables
from .config import SieveSwapConfig
from .flags import INPUT_KEYS

NAME = "sieve_swap"
CARD_TEMPLATE = Path(__file__).resolve().parents[3] / "cards" / "sieve_swap.md"
#: the loading script that defines the release's features, card and splits: imported only when the release is
#: written (it imports datasets, half a second), so that a cached rerun stays fast
SCHEMA = "loading_scripts.sieve_swap"
schema = functools.partial(importlib.import_module, SCHEMA)

#: the fields the release reads from each pipeline's output rows (``Corpus.RELEASE_READS``): checked against the
#: pipelines' row contracts before any work, and the only fields the release can read
RELEASE_READS: dict[str, dict[str, Any]] = {
    "videos": {"video_id": str, "title": str, "title_source": str, "task_id": int, "task_name": str,
               "category_1": str, "category_2": str, "duration": Any, "duration_source": str, "asr_source": str,
               "recipe_ids": list, "recipe_token_iou": list, "recipe_token_recall": list, "max_token_iou": float,
               "num_asr_segments": int, "segments": list, "provenance": dict, "asr_segments": list, "split": str},
    "recipes": {"recipe_id": int, "title": str, "ingredients": list, "directions": list, "ner": list, "link": str,
                "source": str},
}

#: Batra et al., ECCV 2024, §4.2, supp. A (Fig. 5-6): full-scale statistics next to which a build is reported
PAPER_QUANTITIES: dict[str, float | None] = {
    "videos_V": 241_000, "videos_V1_title_sieve": 110_000, "videos_V2_content_sieve": 52_000,
    "videos_train": 48_000, "videos_validation": 3_000,
    "raw_asr_segments_train": 2_750_000, "swapped_segments_train": 510_000,
    "mean_segments_per_video_train": 10.6, "mean_segment_duration_s_train": 11.83,
    "mean_video_duration_s_train": 310.5, "distinct_recipes_used": 4_109, "recipes_with_steps": 2_231_142,
}


# ---------------------------------------------------------------------------------------------- release rows
def _f(x: Any) -> float:
    return float(np.float32(x))


def default_row(r: dict[str, Any]) -> dict[str, Any]:
    keys = schema().FEATURES["default"].keys()
    return {k: r[k] for k in keys}


def raw_asr_row(r: dict[str, Any]) -> dict[str, Any]:
    return {"video_id": r["video_id"], "duration": r["duration"], "asr_source": r["asr_source"],
            "segments": r["asr_segments"]}


@dataclass
class VideoScan:
    """One streamed pass over the released videos: what the recipes config, the file names and the paper's quantities
    need (counts, sums and the recipes used as top-1, never the videos)."""

    per_split: Counter = field(default_factory=Counter)
    top1: Counter = field(default_factory=Counter)        # recipe_id -> final segments using it as top-1
    raw_asr_segments_train: int = 0
    segment_durations_train: Tally = field(default_factory=lambda: Tally(resolution=0.01))
    video_durations_train: Tally = field(default_factory=lambda: Tally(resolution=0.1))

    @classmethod
    def of(cls, videos: Iterable[dict[str, Any]]) -> VideoScan:
        out = cls()
        for v in videos:
            out.per_split[v["split"]] += 1
            out.top1.update(s["recipe_id"] for s in v["segments"])
            if v["split"] == "train":
                out.raw_asr_segments_train += v["num_asr_segments"]
                out.segment_durations_train.extend(s["end"] - s["start"] for s in v["segments"])
                out.video_durations_train.add(v["duration"])
        return out


def recipe_rows(result: BuildResult, top1: Counter, scratch: Path) -> Iterator[dict[str, Any]]:
    """R² (recipes in >= 1 kept pair after the content sieve) with the number of final segments using each as top-1,
    in ``recipe_id`` order (sorted on disk in ``scratch``)."""
    r2: set[int] = set()
    for r in result.stage("content_sieve").rows(["recipe_ids"]):
        r2.update(r["recipe_ids"])
    keys = [k for k in schema().FEATURES["recipes"] if k != "num_segments_top1"]
    rows = ({**{k: r[k] for k in keys}, "num_segments_top1": top1.get(r["recipe_id"], 0)}
            for r in result.outputs["recipes"].rows() if r["recipe_id"] in r2)
    yield from SortedSpill(scratch / "recipes", key=lambda r: r["recipe_id"]).extend(rows).rows()


def quantities(result: BuildResult, scan: VideoScan, sample: bool) -> dict[str, dict[str, Any]]:
    """The paper's quantities of this build next to the paper's, flagged when they deviate by more than 20%."""
    kept = {name: st.kept for name, st in result.steps.items()}
    n_train, segs = scan.per_split["train"], scan.segment_durations_train
    value: dict[str, float | int | None] = {
        "videos_V": kept.get("task_size_filter"),
        "videos_V1_title_sieve": kept.get("title_sieve"),
        "videos_V2_content_sieve": kept.get("content_sieve"),
        "videos_train": n_train,
        "videos_validation": scan.per_split["validation"],
        "raw_asr_segments_train": scan.raw_asr_segments_train,
        "swapped_segments_train": segs.n,
        "mean_segments_per_video_train": round(segs.n / n_train, 2) if n_train else None,
        "mean_segment_duration_s_train": round(float(segs.mean), 2) if segs.n else None,
        "mean_video_duration_s_train": round(float(scan.video_durations_train.mean), 1) if n_train else None,
        "distinct_recipes_used": len(scan.top1),
        "recipes_with_steps": kept.get("recipe_lemmas"),
    }
    from ...release import compare_with_paper

    cause = ("sample build: not the full HowTo100M / RecipeNLG inputs" if sample else
             "check the title source (YouTube titles vs task names), the ASR source and title_match")
    return compare_with_paper(value, PAPER_QUANTITIES, cause)


def models(cfg: SieveSwapConfig) -> dict[str, Any]:
    """Model ids and package versions for the manifest and the card."""
    from ...models.nlp import ContentLemmatizer
    from ...models.text_encoder import SentenceEncoder

    return {"sentence_encoder": SentenceEncoder(cfg.embedding_model).versions(),
            "lemmatizer": ContentLemmatizer(cfg.spacy_model).versions()}


def card_context(stats: dict[str, Any], man: dict[str, Any], cfg: SieveSwapConfig) -> dict[str, str]:
    models = man["models"]
    return {
        **stats_tables(stats),
        "models_table": md_table(["role", "model / package", "version"],
                                  [[role, k, v] for role, d in models.items() for k, v in d.items()]),
        "embedding_model": models["sentence_encoder"]["model_id"],
        "sim_threshold": str(cfg.sim_threshold), "iou_threshold": str(cfg.iou_threshold),
        "recall_threshold": str(cfg.recall_threshold), "val_iou_threshold": str(cfg.val_iou_threshold),
        "title_match": cfg.title_match, "retrieval_pool": cfg.retrieval_pool, "top_k": str(cfg.top_k),
        "merge_max_dur_s": str(cfg.merge_max_dur_s), "merge_max_gap_s": str(cfg.merge_max_gap_s),
        "toolkit_version": TOOLKIT_VERSION, "git_commit": str(man["git_commit"]),
        "sample_note": ("This release was built from the **bundled hand-written sample** (not real HowTo100M or "
                        "RecipeNLG data); it demonstrates the pipeline, its numbers are not comparable to the paper's."
                        if man["sample"] else "Built from the inputs listed in `manifest.json`."),
        "exclusions": ", ".join(f"`{Path(p).name}`" for p in cfg.exclude) or
                      "**none** (the paper removes YouCook2 videos, supp. E.1: pass `--exclude`)",
    }


def release(result: BuildResult, cfg: SieveSwapConfig, out_dir: Path, info: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The ``default``, ``raw_asr`` and ``recipes`` configs and the YouCook2-format files, through the core's release
    flow (streamed from the final work shards, built in a hidden sibling, gated, then swapped into place)."""
    videos = result.outputs["videos"]
    scan = functools.cache(lambda: VideoScan.of(videos.rows(["split", "segments", "num_asr_segments", "duration"])))

    def yc2_file(split: str, raw: bool) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            items = (next(iter(schema().to_yc2_format([v], raw=raw).items())) for v in videos.rows()
                     if v["split"] == split)
            write_json_object(path, items)
        return write

    spec = ReleaseSpec(
        corpus=NAME, title="Sieve & Swap", report_title="Sieve & Swap build report", features=lambda: schema().FEATURES,
        card=lambda: schema().CARD, card_template=CARD_TEMPLATE,
        split_order=("train", "validation"), rows={}, models=lambda: models(cfg),
        stats_extra=lambda: {"quantities": quantities(result, scan(), info["sample"])},
        card_context=lambda stats, man: card_context(stats, man, cfg),
        report_videos=lambda: videos.rows(["duration", "segments"]),
        path_keys=(*INPUT_KEYS, "exclude"), key_files=(Path(__file__).resolve(), *schema_files(SCHEMA)))
    if not count_rows(videos):
        spec.empty = "no video survived the pipeline"
        return write_release(result, cfg, out_dir, info, spec)
    # per-video configs are made one work shard at a time and cached (release/parts.py): an edit of one video
    # re-encodes its shard's rows only
    spec.rows = {
        "default": ShardedRows(videos, lambda rows: ((v["split"], default_row(v)) for v in rows
                                                     if v["split"] in schema().SPLITS["default"])),
        "raw_asr": ShardedRows(videos, lambda rows: ((v["split"], raw_asr_row(v)) for v in rows
                                                     if v["split"] in schema().SPLITS["raw_asr"])),
        "recipes": {"train": lambda: recipe_rows(result, scan().top1, spec.scratch_dir())},
    }

    tags = {"train": "train", "validation": "valid"}

    def yc2_files() -> dict[str, Callable[[Path], None]]:
        out = {}
        for s in schema().SPLITS["default"]:
            n = scan().per_split[s]
            if n:
                for raw, suffix in ((False, "yc2format_clean"), (True, "raw_transcript")):
                    out[f"yc2format/sieve_swap_{tags[s]}_{n}_{suffix}.json"] = yc2_file(s, raw)
        return out

    spec.files = yc2_files  # named after the row counts of the split: resolved once the shards are written
    return write_release(result, cfg, out_dir, info, spec)


def schema_card_body(stats: dict[str, Any], man: dict[str, Any], cfg: SieveSwapConfig) -> str:
    from ...release import render_card

    return render_card(CARD_TEMPLATE, card_context(stats, man, cfg))
