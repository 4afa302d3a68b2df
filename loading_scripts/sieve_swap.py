"""Schemas, config names and a loader for the Sieve & Swap corpus (``sieve_swap``).

The one source of truth for the release's ``datasets.Features`` (docs/corpora/sieve_swap.md), used by the builder
(``builders/release/card.py`` writes the README ``dataset_info`` from it) and by users. This is a plain module, not a
``datasets`` loading script: ``datasets`` 4+ refuses scripts (docs/publishing.md), a release is Parquet + README.

Paper: Batra et al., "Efficient Pre-training for Localized Instruction Generation of Procedural Videos", ECCV 2024.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from datasets import ClassLabel, Features, List, Value

# One kept (swapped, possibly merged) segment of a video (Batra et al., ECCV 2024, Eq. 6, supp. A.2;
# docs/corpora/sieve_swap.md).
SEGMENT: dict[str, Any] = {
    "start": Value("float32"),
    "end": Value("float32"),
    "text": Value("string"),  # chosen RecipeNLG step (top-1), original casing
    "recipe_id": Value("int64"),
    "step_index": Value("int32"),
    "similarity": Value("float32"),  # cosine of top-1
    "candidates": List(
        {
            "text": Value("string"),
            "recipe_id": Value("int64"),
            "step_index": Value("int32"),
            "similarity": Value("float32"),
        }
    ),  # top_k, rank order
    "asr_text": Value("string"),
    "num_merged": Value("int32"),
}

# Build parameters recorded on every video row (the threshold and model a build used).
PROVENANCE: dict[str, Any] = {
    "builder_version": Value("string"),
    "embedding_model": Value("string"),
    "sim_threshold": Value("float32"),
    "iou_threshold": Value("float32"),
    "recall_threshold": Value("float32"),
    "val_iou_threshold": Value("float32"),
    "title_match": Value("string"),
    "retrieval_pool": Value("string"),
    "top_k": Value("int32"),
}

TITLE_SOURCES = ["youtube_title", "task_name"]
DURATION_SOURCES = ["metadata", "asr_last_end"]
ASR_SOURCES = ["howto100m_raw_caption", "whisperx"]
RECIPE_SOURCES = ["Gathered", "Recipes1M"]

FEATURES: dict[str, Features] = {
    "default": Features(
        {
            "video_id": Value("string"),
            "title": Value("string"),
            "title_source": ClassLabel(names=TITLE_SOURCES),
            "task_id": Value("int64"),
            "task_name": Value("string"),
            "category_1": Value("string"),
            "category_2": Value("string"),
            "duration": Value("float32"),
            "duration_source": ClassLabel(names=DURATION_SOURCES),
            "asr_source": ClassLabel(names=ASR_SOURCES),
            "recipe_ids": List(Value("int64")),  # kept pairs, sorted by token_iou desc, then id
            "recipe_token_iou": List(Value("float32")),
            "recipe_token_recall": List(Value("float32")),
            "max_token_iou": Value("float32"),
            "num_asr_segments": Value("int32"),
            "segments": List(SEGMENT),
            "provenance": PROVENANCE,
        }
    ),
    "raw_asr": Features(
        {
            "video_id": Value("string"),
            "duration": Value("float32"),
            "asr_source": ClassLabel(names=ASR_SOURCES),
            "segments": List({"start": Value("float32"), "end": Value("float32"), "text": Value("string")}),
        }
    ),
    "recipes": Features(
        {
            "recipe_id": Value("int64"),
            "title": Value("string"),
            "ingredients": List(Value("string")),
            "directions": List(Value("string")),
            "ner": List(Value("string")),
            "link": Value("string"),
            "source": ClassLabel(names=RECIPE_SOURCES),
            "num_segments_top1": Value("int32"),
        }
    ),
}

SPLITS: dict[str, list[str]] = {
    "default": ["train", "validation"],
    "raw_asr": ["train", "validation"],
    "recipes": ["train"],
}

DEFAULT_CONFIG = "default"

# Dataset-card metadata (docs/publishing.md). RecipeNLG text is for non-commercial research only, hence NC.
CARD: dict[str, Any] = dict(
    license="cc-by-nc-4.0",
    pretty_name="Sieve & Swap",
    language=["en"],
    task_categories=["video-text-to-text", "text-generation"],
    tags=[
        "procedural-video",
        "instructional-video",
        "cooking",
        "dense-video-captioning",
        "localized-instruction-generation",
        "howto100m",
        "recipenlg",
    ],
)


def load(config: str | None = None, split: str | None = None, revision: str | None = None, repo: str | None = None,
         **kw: Any):
    """Load a sieve_swap release: the local folder ``./sieve_swap`` a build wrote, else the Hub repo ``repo=``,
    else ``$PROCVID_HUB_ORG/sieve_swap``, else the default repo (``loading_scripts.hub.resolve``).

    ``revision="vX.Y.Z"`` pins a published version (and, like ``repo=``, skips the local folder). Extra keyword
    arguments go to ``datasets.load_dataset`` (``streaming=``, ``cache_dir=`` ...)."""
    from . import hub

    return hub.load("sieve_swap", FEATURES, DEFAULT_CONFIG, config, split=split, revision=revision, repo=repo, **kw)


def _seconds(x: Any) -> float:
    """A float32-stored time as the shortest decimal that round-trips float32 (0.87, not 0.8700000047683716)."""
    return float(str(np.float32(x)))


def _get(obj: Mapping[str, Any], key: str) -> Any:
    if key not in obj:
        raise KeyError(f"row is missing {key!r}: to_yc2_format expects rows of the 'default' config")
    return obj[key]


def to_yc2_format(rows: Iterable[Mapping[str, Any]], raw: bool = False) -> dict[str, dict[str, Any]]:
    """Export rows of the ``default`` config in the PDVC/YouCook2 JSON shape of the upstream release
    (docs/corpora/sieve_swap.md, Outputs).

    Returns ``{video_id: {"duration": float, "timestamps": [[s, e], ...], "sentences": [...]}}``. By default each
    sentence is the list of the segment's candidate step texts ``[c1, c2]`` (rank order), lowercased and
    PTB-tokenised (as ``htmrkb_dis_*_yc2format_clean.json``); with ``raw=True`` each sentence is the segment's
    ``asr_text`` (as ``..._raw_transcript.json``). ``rows`` may be plain dicts or a ``datasets.Dataset``.
    """
    tokenize = None
    if not raw:
        from .ptb import ptb_tokenize

        tokenize = ptb_tokenize

    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        video_id = str(_get(row, "video_id"))
        if video_id in out:
            raise ValueError(f"duplicate video_id {video_id!r} in to_yc2_format input")
        timestamps: list[list[float]] = []
        sentences: list[Any] = []
        for seg in _get(row, "segments") or []:
            timestamps.append([_seconds(_get(seg, "start")), _seconds(_get(seg, "end"))])
            if raw:
                sentences.append(str(_get(seg, "asr_text")))
            else:
                candidates = _get(seg, "candidates") or [{"text": _get(seg, "text")}]
                sentences.append([tokenize(str(c["text"])).lower() for c in candidates])
        out[video_id] = {"duration": _seconds(_get(row, "duration")), "timestamps": timestamps, "sentences": sentences}
    return out
