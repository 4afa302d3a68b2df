"""Schemas, config names and a loader for the HowToStep corpus (``howtostep``).

The one source of truth for the release's ``datasets.Features`` (docs/corpora/howtostep.md), used by the builder (the
README ``dataset_info`` is written from it) and by users. A release is Parquet + README, not a loading script.

Papers: Li et al., "Multi-Sentence Grounding for Long-term Instructional Video", ECCV 2024 (HowToStep, NaSVA;
Li et al., ECCV 2024) and Chen et al., "Learning to Localize Actions in Instructional Videos
with LLM-Based Multi-Pathway Text-Video Alignment", ECCV 2024 (MPTVA; Chen et al., ECCV 2024).
"""

from __future__ import annotations

from typing import Any

from datasets import Features, List, Value

#: one grounded LLM step (docs/corpora/howtostep.md, Outputs): final window/score of the last round, the Stage-1 window,
#: MPTVA pathway scores
STEP: dict[str, Any] = {
    "step_index": Value("int32"),        # LLM order within the video
    "chunk_index": Value("int32"),
    "text": Value("string"),
    "start": Value("float32"),
    "end": Value("float32"),
    "score": Value("float32"),
    "stage1_start": Value("float32"),    # null when the step is below epsilon1
    "stage1_end": Value("float32"),
    "stage1_score": Value("float32"),
    "pathway_scores": List(Value("float32")),  # [] for two_stage; [snv, long, short] for mptva
}

#: build parameters recorded on every video row; fields that do not apply to the labeler used are null
PROVENANCE: dict[str, Any] = {k: Value("string") for k in [
    "builder_version", "config_sha256", "transcript_source", "asr_model", "sentencify_mode", "llm", "llm_runtime",
    "prompt_id", "text_encoder", "nasva_text_encoder", "visual_backbone", "visual_features", "labeler", "anchor",
    "labeler_checkpoint_sha256"]}
PROVENANCE.update({k: Value("float32") for k in ["nu", "zeta", "epsilon1", "epsilon2", "delta_sec", "tau", "gamma"]})
PROVENANCE.update({"rounds": Value("int32"), "window_w": Value("int32"), "chunk_size": Value("int32"),
                   "max_vlen": Value("int32")})

NARRATION: dict[str, Any] = {"index": Value("int32"), "text": Value("string"), "start": Value("float32"),
                             "end": Value("float32")}

LLM_CHUNK: dict[str, Any] = {"chunk_index": Value("int32"), "first_narration": Value("int32"),
                             "last_narration": Value("int32"), "prompt_id": Value("string"),
                             "raw_output": Value("string"), "parse_mode": Value("string"), "num_steps": Value("int32")}

FEATURES: dict[str, Features] = {
    "steps": Features({
        "video_id": Value("string"), "task_id": Value("string"), "task_name": Value("string"),
        "category_1": Value("string"), "category_2": Value("string"), "duration": Value("float32"),
        "num_frames": Value("int32"), "num_raw_steps": Value("int32"), "steps": List(STEP),
        "provenance": PROVENANCE}),
    "narrations": Features({
        "video_id": Value("string"), "duration": Value("float32"), "language": Value("string"),
        "transcript_source": Value("string"), "asr_model": Value("string"), "sentencify_mode": Value("string"),
        "narrations": List(NARRATION)}),
    "llm_outputs": Features({"video_id": Value("string"), "chunks": List(LLM_CHUNK)}),
    "dropped_steps": Features({
        "video_id": Value("string"), "step_index": Value("int32"), "chunk_index": Value("int32"),
        "text": Value("string"), "stage": Value("string"), "reason": Value("string"), "score": Value("float32")}),
    "dropped_videos": Features({
        "video_id": Value("string"), "stage": Value("string"), "reason": Value("string"), "detail": Value("string")}),
}

#: ``train`` (everything not excluded) and ``heldout`` (HT-Step / HTM-Align / TAN held-out ids)
SPLITS: dict[str, list[str]] = {c: ["train", "heldout"] for c in FEATURES}
DEFAULT_CONFIG = "steps"

CARD: dict[str, Any] = dict(
    license="cc-by-nc-4.0",
    pretty_name="HowToStep",
    language=["en"],
    task_categories=["video-text-to-text"],
    tags=["procedural-video", "instructional-video", "temporal-grounding", "multi-sentence-grounding",
          "howto100m", "llm-generated", "pseudo-labels"],
)


def load(config: str | None = None, split: str | None = None, revision: str | None = None, repo: str | None = None,
         **kw: Any):
    """Load a howtostep release: the local folder ``./howtostep`` a build wrote, else the Hub repo ``repo=``,
    else ``$PROCVID_HUB_ORG/howtostep``, else the default repo (``loading_scripts.hub.resolve``).

    ``revision="vX.Y.Z"`` pins a published version (and, like ``repo=``, skips the local folder). Extra keyword
    arguments go to ``datasets.load_dataset`` (``streaming=``, ``cache_dir=`` ...)."""
    from . import hub

    return hub.load("howtostep", FEATURES, DEFAULT_CONFIG, config, split=split, revision=revision, repo=repo, **kw)


def to_release_layout(row: dict[str, Any]) -> dict[str, list[Any]]:
    """One ``steps`` row in the authors' per-video layout ``{"text": [...], "start": [int], "end": [int]}``
    (``export_format=howtostep_release``): steps in release order, times rounded down to whole seconds."""
    steps = row.get("steps") or []
    return {"text": [s["text"] for s in steps], "start": [int(s["start"]) for s in steps],
            "end": [int(s["end"]) for s in steps]}
