"""Schemas, config names and a loader for the ShowHowTo corpus (``showhowto``).

The one source of truth for the release's ``datasets.Features`` (docs/corpora/showhowto.md), used by the
builder and by users. Paper: Souček et al., "ShowHowTo: Generating Scene-Conditioned Step-by-Step Visual
Instructions", CVPR 2025 (Souček et al., CVPR 2025).
"""

from __future__ import annotations

from typing import Any

from datasets import Features, Image, List, Value

#: one key step with its keyframe (docs/corpora/showhowto.md, Outputs); ``score`` is null for aligner "middle"
STEP: dict[str, Any] = {"instruction": Value("string"), "start": Value("float32"), "end": Value("float32"),
                        "frame_time": Value("float32"), "start_sec": Value("int32"), "frame_idx": Value("int32"),
                        "score": Value("float32")}
SEQUENCE: dict[str, Any] = {
    "sequence_id": Value("string"), "video_id": Value("string"), "task_id": Value("string"), "task": Value("string"),
    "category_1": Value("string"), "category_2": Value("string"), "title": Value("string"),
    "wikihow_title": Value("string"), "duration": Value("float32"), "num_steps": Value("int32"),
    "mean_score": Value("float32"), "aligner": Value("string"), "steps": List(STEP)}
FEATURES: dict[str, Features] = {
    "sequences": Features(SEQUENCE),
    "images": Features({**SEQUENCE, "images": List(Image())}),   # images[i] belongs to steps[i]
}
SPLITS: dict[str, list[str]] = {c: ["train", "test"] for c in FEATURES}
DEFAULT_CONFIG = "sequences"
CARD: dict[str, Any] = dict(
    license="mit",
    pretty_name="ShowHowTo",
    language=["en"],
    task_categories=["image-to-image", "text-to-image"],
    tags=["procedural-video", "instructional-video", "visual-instructions", "howto100m", "llm-generated",
          "keyframes"],
)


def load(config: str | None = None, split: str | None = None, revision: str | None = None, repo: str | None = None,
         **kw: Any):
    """Load a showhowto release: the local folder ``./showhowto`` a build wrote, else the Hub repo ``repo=``, else
    ``$PROCVID_HUB_ORG/showhowto`` (``loading_scripts.hub.resolve``). ``revision="vX.Y.Z"`` pins a version."""
    from . import hub

    return hub.load("showhowto", FEATURES, DEFAULT_CONFIG, config, split=split, revision=revision, repo=repo, **kw)


def to_upstream_prompts(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The upstream training layout's ``prompts.json``: ``{sequence_id: [instruction per step]}``."""
    return {r["sequence_id"]: [s["instruction"] for s in r["steps"]] for r in rows}


def keyframes_json(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, int]]]:
    """The builder's ``keyframes.json``: ``{sequence_id: [{"start_sec", "frame_idx"}, ...]}`` in step order
    (docs/corpora/showhowto.md, Outputs)."""
    return {r["sequence_id"]: [{"start_sec": int(s["start_sec"]), "frame_idx": int(s["frame_idx"])}
                               for s in r["steps"]] for r in rows}
