"""The HowToStep pipeline (docs/corpora/howtostep.md; Li et al., ECCV 2024, §3.2, supp. Table 6): one ``videos`` pipeline.

    read_metadata -> heldout_split -> transcribe (transcript or ASR) -> narrations (TAN cleaning, sentencification,
    language and length filters) -> llm_steps (10-sentence chunks, prompt, batched cached LLM, step parser) ->
    require_steps -> visual_features -> labeler stages (``grounding.py``) -> require_grounded_steps

Videos run in sorted-id order; every model request (ASR, LLM) is cached one by one in ``<work>/cache``, so changing a
threshold never re-runs a model. Steps that must know the build's cache folder are global stages whose ``fit`` only
names it (the fit is keyed by its input's digest, so it costs nothing on a rerun).

:func:`pipelines` maps the corpus config (its paper defaults and citations: ``config.py``) onto the stages' parameters;
each stage gets only the keys that can change its output (and, unkeyed, the devices and batch sizes it runs with).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.records import Out, Row
from ...core.step import Pipeline, Step, input_path
from ...ops.step_timestamps import round_settings
from ...sources import exclusions
from ...steps.asr import Transcribe
from ...steps.howto100m import HowTo100MSelection
from .config import HowToStepConfig
from .features import VisualFeatures
from .grounding import (LLMTimestampLabels, MptvaLabels, RequireGroundedSteps, Stage1, Stage1Final, Stage2)
from .labeler import LabelerTraining, MptvaLongModel, require_mptva_pathways
from .narrate import LLMSteps, Narrations, RequireSteps

#: the metadata source (``builders/steps/howto100m.py``), under the name this package has always exported
HowTo100MSource = HowTo100MSelection


@dataclass(eq=False)
class HeldoutSplit(Step):
    """docs/corpora/howtostep.md, Inputs (``--exclude``): videos listed in an exclusion list go to ``heldout``
    (processed, never used to train the labeler)."""

    name = "heldout_split"
    id_field = "video_id"
    reads = {"video_id": str}
    writes = {"split": str}

    exclude: list[Path] = input_path(default=[])

    def setup(self, state: Any) -> None:
        self.heldout = exclusions.read_exclusion_ids(self.exclude) if self.exclude else set()

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            split = "heldout" if r["video_id"] in self.heldout else "train"
            out.count(f"split_{split}")
            out.keep({**r, "split": split})


def pipelines(cfg: HowToStepConfig, shard_size: int = 64) -> list[Pipeline]:
    """The ``videos`` pipeline: each config key goes to the stages whose output it can change."""
    return [Pipeline("videos", HowTo100MSelection(videos=cfg.videos, tasks=cfg.tasks, video_ids=cfg.video_ids,
                                                  category_1=cfg.category_1, limit=cfg.limit), [
        HeldoutSplit(exclude=list(cfg.exclude)),
        Transcribe(transcripts=cfg.transcripts, transcript_format=cfg.transcript_format, media=cfg.media,
                   **_asr(cfg)),
        Narrations(seed=cfg.seed, min_narrations=cfg.min_narrations, language_threshold=cfg.language_threshold,
                   sentencify_mode=cfg.sentencify_mode, punctuation_model_path=cfg.punctuation_model_path,
                   transcript_format=cfg.transcript_format, device=cfg.asr_device),
        LLMSteps(chunk_size=cfg.chunk_size, prompt_id=cfg.effective_prompt_id, prompt_template=cfg.prompt_template,
                 max_step_words=cfg.max_step_words, max_steps_per_chunk=cfg.max_steps_per_chunk,
                 max_vlen=cfg.max_vlen, **_llm(cfg)),
        RequireSteps(),
        visual_features_step(cfg),
        *labeler_steps(cfg),
        RequireGroundedSteps(),
    ], shard_size=shard_size)]


def labeler_steps(cfg: HowToStepConfig) -> list[Step]:
    """The stages of ``cfg.labeler`` (docs/corpora/howtostep.md, Pipeline); the last one holds the final labels of
    every grounded video (:func:`final_labels_stage`)."""
    if cfg.labeler == "llm_timestamps":  # supp. Table 6 row 1: the LLM's own timestamps
        return [LLMTimestampLabels(delta_sec=cfg.delta_sec, max_vlen=cfg.max_vlen)]
    if cfg.labeler == "mptva":  # Chen et al., ECCV 2024, §3.2.2
        if cfg.visual_features is not None:
            require_mptva_pathways(cfg)  # before a long model is trained for nothing
        return [MptvaLongModel(mptva_long_model=cfg.mptva_long_model, **_training(cfg)),
                MptvaLabels(tau=cfg.tau, mptva_w=cfg.mptva_w, mptva_gamma=cfg.mptva_gamma,
                            mptva_gamma_mode=cfg.mptva_gamma_mode, mptva_keep_ratio=cfg.mptva_keep_ratio,
                            mptva_allow_missing=cfg.mptva_allow_missing, labeler_device=cfg.labeler_device,
                            **_tower(cfg))]
    steps: list[Step] = [Stage1(stage1_method=cfg.stage1_method, nu=cfg.nu, zeta=cfg.zeta, epsilon1=cfg.epsilon1,
                                **_tower(cfg))]
    if cfg.rounds == 0:  # Table 9 round 0
        steps.append(Stage1Final())
    for r in range(1, cfg.rounds + 1):  # §3.3 self-training; Table 9's settings from round 2
        eps, anchor, delta = (cfg.epsilon2, cfg.anchor, cfg.delta_sec) if r == 1 else round_settings(r)
        steps += [LabelerTraining(round=r, labeler_train_text=cfg.labeler_train_text, **_training(cfg)),
                  Stage2(round=r, epsilon2=eps, anchor=anchor, delta_sec=delta, zeta=cfg.zeta, max_vlen=cfg.max_vlen,
                         visual_dim=cfg.visual_dim, nasva_text_encoder=cfg.nasva_text_encoder,
                         labeler_device=cfg.labeler_device)]
    return steps


def final_labels_stage(cfg: HowToStepConfig) -> str:
    """The name of the stage whose rows hold every grounded video's final labels and dropped steps (the release's
    ``dropped_steps`` config): the last of :func:`labeler_steps`."""
    return labeler_steps(cfg)[-1].name


def visual_features_step(cfg: HowToStepConfig) -> VisualFeatures:
    """The per-second visual features (supp. §6.1); the frames of ``media`` are read only to compute them."""
    return VisualFeatures(
        visual_features=cfg.visual_features, visual_dim=cfg.visual_dim, visual_backbone=cfg.visual_backbone,
        features=cfg.features, features_index=cfg.features_index,
        media=cfg.media if cfg.visual_features == "compute" else None, vision_model_path=cfg.vision_model_path,
        text_encoder=cfg.text_encoder, feature_max_bad_share=cfg.feature_max_bad_share,
        feature_max_abs=cfg.feature_max_abs, feature_duration_tolerance_s=cfg.feature_duration_tolerance_s,
        feature_duration_tolerance_frac=cfg.feature_duration_tolerance_frac,
        feature_transcript_span_ratio=cfg.feature_transcript_span_ratio, vision_device=cfg.vision_device,
        # only feature files can cut narrations (the video's length is the file's): the threshold reaches them alone
        **({"min_narrations": cfg.min_narrations} if cfg.visual_features == "file" else {}))


def _asr(cfg: HowToStepConfig) -> dict[str, Any]:
    return {k: getattr(cfg, k) for k in ("asr", "asr_model_path", "asr_align_model_path", "asr_compute_type",
                                         "asr_batch_size", "asr_language", "asr_device")}


def _llm(cfg: HowToStepConfig) -> dict[str, Any]:
    return {k: getattr(cfg, k) for k in ("llm", "llm_model_path", "llm_replay", "llm_max_tokens", "llm_temperature",
                                         "llm_n_ctx", "llm_max_model_len", "llm_batch_size", "llm_device")}


def _tower(cfg: HowToStepConfig) -> dict[str, Any]:
    """The text encoder g and the paired text tower's parameters (Stage 1, MPTVA)."""
    return {k: getattr(cfg, k) for k in ("text_encoder", "max_vlen", "visual_features", "visual_dim",
                                         "visual_backbone", "vision_model_path", "vision_device")}


def _training(cfg: HowToStepConfig) -> dict[str, Any]:
    """The NaSVA training schedule (docs/evaluation.md; paper supp. §6.1)."""
    return {k: getattr(cfg, k) for k in ("labeler_epochs", "labeler_batch_size", "labeler_lr", "seed", "max_vlen",
                                         "nasva_text_encoder", "visual_backbone", "visual_dim", "labeler_device")}


__all__ = ["pipelines", "labeler_steps", "final_labels_stage", "visual_features_step", "HowTo100MSource",
           "HowTo100MSelection", "HeldoutSplit", "Transcribe", "Narrations", "LLMSteps", "RequireSteps",
           "VisualFeatures", "RequireGroundedSteps"]
