"""Schemas, config names and a loader for the MARC-style aligned recipe corpus (``marc``).

The one source of truth for the release's ``datasets.Features`` (docs/corpora/marc.md), used by the builder
and by users. A plain module, not a ``datasets`` loading script (a release is Parquet + README).

Paper: Lin et al., "A Recipe for Creating Multimodal Aligned Datasets for Sequential Tasks", ACL 2020
(Lin et al., ACL 2020, §2-§5).
"""

from __future__ import annotations

from typing import Any

from datasets import ClassLabel, Features, List, Value

MODALITIES = ["text", "video"]
PAIR_TYPES = ["text_text", "text_video", "video_video"]
EXTRACTIONS = ["json-ld", "microdata", "conllu", "transcript"]
DIRECTIONS = ["a_to_b", "b_to_a", "both"]

#: one entry per source instruction: argmax target, its posterior and the top-3 (docs/corpora/marc.md, Outputs)
ALIGN = List({
    "target_index": Value("int32"),
    "probability": Value("float32"),
    "top_indices": List(Value("int32")),
    "top_probabilities": List(Value("float32")),
})

FEATURES: dict[str, Features] = {
    "recipes": Features({
        "recipe_id": Value("string"),  # "t:<sha1(url)[:16]>[:<k>]" or "v:<youtube id>"
        "dish_id": Value("string"),
        "dish_name": Value("string"),
        "modality": ClassLabel(names=MODALITIES),
        "title": Value("string"),
        "url": Value("string"),
        "language": Value("string"),
        "ingredients": List(Value("string")),
        "ingredient_terms": List(Value("string")),
        "instructions": List(Value("string")),
        "step_index": List(Value("int32")),
        "section": List(Value("string")),
        "start": List(Value("float32")),  # video only; [] for text
        "end": List(Value("float32")),
        "num_chat_removed": Value("int32"),
        "source": {
            "extraction": ClassLabel(names=EXTRACTIONS),
            "warc_filename": Value("string"),
            "warc_record_offset": Value("int64"),
            "warc_record_id": Value("string"),
            "recipe_index_in_page": Value("int32"),
            "asr_source": Value("string"),
            "chat_classifier": Value("string"),
        },
    }),
    "pairwise": Features({
        "pair_id": Value("string"),
        "dish_id": Value("string"),
        "pair_type": ClassLabel(names=PAIR_TYPES),
        "recipe_a": Value("string"),
        "recipe_b": Value("string"),
        "a_instructions": List(Value("string")),
        "b_instructions": List(Value("string")),
        "a_start": List(Value("float32")),
        "a_end": List(Value("float32")),
        "b_start": List(Value("float32")),
        "b_end": List(Value("float32")),
        "ingredient_match": Value("float32"),
        "a_to_b": ALIGN,
        "b_to_a": ALIGN,
        "model_a_to_b": Value("string"),  # e.g. "hmm_ibm1/text_text@<fingerprint>"
        "model_b_to_a": Value("string"),
    }),
    "joint": Features({
        "dish_id": Value("string"),
        "dish_name": Value("string"),
        "nodes": List({
            "node_id": Value("int32"),
            "recipe_id": Value("string"),
            "modality": ClassLabel(names=MODALITIES),
            "instruction_index": Value("int32"),
            "text": Value("string"),
            "start": Value("float32"),  # NaN for text
            "end": Value("float32"),
        }),
        "forest_edges": List({"u": Value("int32"), "v": Value("int32"), "weight": Value("float32")}),
        "aligned_sets": List({
            "node_ids": List(Value("int32")),
            "min_weight": Value("float32"),
            "num_text": Value("int32"),
            "num_video": Value("int32"),
        }),
        "edge_threshold": Value("float32"),
    }),
    "paraphrases": Features({
        "pair_id": Value("string"),
        "dish_id": Value("string"),
        "kind": ClassLabel(names=PAIR_TYPES),
        "a_recipe_id": Value("string"),
        "a_index": Value("int32"),
        "a_text": Value("string"),
        "a_start": Value("float32"),  # NaN on a text side
        "a_end": Value("float32"),
        "b_recipe_id": Value("string"),
        "b_index": Value("int32"),
        "b_text": Value("string"),
        "b_start": Value("float32"),
        "b_end": Value("float32"),
        "probability": Value("float32"),
        "directions": ClassLabel(names=DIRECTIONS),
        "threshold": Value("float32"),
    }),
    "multi_step_breakdown": Features({
        "pair_id": Value("string"),
        "dish_id": Value("string"),
        "single_recipe_id": Value("string"),
        "single_index": Value("int32"),
        "single_text": Value("string"),
        "multi_recipe_id": Value("string"),
        "multi_indices": List(Value("int32")),
        "multi_texts": List(Value("string")),
        "probabilities": List(Value("float32")),
        "contiguous": Value("bool"),
        "threshold": Value("float32"),
    }),
    "chat_content": Features({
        "video_id": Value("string"),
        "recipe_type": Value("string"),
        "sentence": Value("string"),
        "start": Value("float32"),
        "end": Value("float32"),
        "label": ClassLabel(names=["chat", "content"]),
    }),
}

#: the three pair types share the ``pairwise`` Features, one config each (docs/corpora/marc.md, Outputs)
CONFIG_FEATURES: dict[str, str] = {
    "recipes": "recipes",
    "pairwise_text_text": "pairwise",
    "pairwise_text_video": "pairwise",
    "pairwise_video_video": "pairwise",
    "joint": "joint",
    "paraphrases": "paraphrases",
    "multi_step_breakdown": "multi_step_breakdown",
    "chat_content": "chat_content",
}

SPLITS: dict[str, list[str]] = {name: ["train", "validation", "test"] for name in CONFIG_FEATURES}

DEFAULT_CONFIG = "recipes"

CARD: dict[str, Any] = dict(
    license="cc-by-4.0",
    pretty_name="MARC-style aligned recipe corpus",
    language=["en"],
    task_categories=["text-generation", "video-text-to-text"],
    tags=["recipes", "alignment", "procedural-text", "instructional-video", "common-crawl", "hmm", "ibm-model-1"],
)


def features(config: str) -> Features:
    """The ``datasets.Features`` of a release config (the three ``pairwise_*`` configs share one schema)."""
    if config not in CONFIG_FEATURES:
        raise ValueError(f"unknown marc config {config!r}; expected one of {sorted(CONFIG_FEATURES)}")
    return FEATURES[CONFIG_FEATURES[config]]


def load(config: str | None = None, split: str | None = None, revision: str | None = None, repo: str | None = None,
         **kw: Any):
    """Load a marc release: the local folder ``./marc`` a build wrote, else the Hub repo ``repo=``,
    else ``$PROCVID_HUB_ORG/marc``, else the default repo (``loading_scripts.hub.resolve``).

    ``revision="vX.Y.Z"`` pins a published version (and, like ``repo=``, skips the local folder). Extra keyword
    arguments go to ``datasets.load_dataset`` (``streaming=``, ``cache_dir=`` ...)."""
    from . import hub

    return hub.load("marc", CONFIG_FEATURES, DEFAULT_CONFIG, config, split=split, revision=revision, repo=repo, **kw)
