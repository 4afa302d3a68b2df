"""Config of the HowToStep builder: every default is the paper's (000_47e4e363f2e3fb14.txt, 001_e771ed41550f58e8.txt)
or the spec's (specs/howtostep.md §3-§6), overridable with ``--config file.yaml`` / ``--set key=value``.

Two presets (spec §6): ``cpu-offline`` (default; faster-whisper tiny.en, SmolLM2-135M GGUF, MiniLM, features from files
or simulated) and ``paper`` (WhisperX large-v2, vLLM Llama-2-7B-chat, CLIP ViT-L/14 features on a GPU), which needs
local model paths and fails loudly when one is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.config import ConfigError, apply_paper_preset

TRANSCRIPT_FORMATS = ("htm_raw", "sentencified", "whisperx", "segments", "asr")
LABELERS = ("two_stage", "mptva", "llm_timestamps")
VISUAL_FEATURES = ("file", "compute", "simulated")
PRESETS = ("cpu-offline", "paper")

#: spec §6, "paper" column: what the paper preset switches (the rest of the config keeps its paper defaults)
PAPER_PRESET = {"asr": "whisperx", "asr_device": "cuda", "asr_compute_type": "float16", "asr_language": None,
                "llm": "vllm", "llm_device": "cuda", "visual_features": "compute", "vision_device": "cuda",
                "labeler_device": "cuda", "sentencify_mode": "bert"}
#: config keys that must hold a local path under the paper preset, by the setting that needs them
PAPER_PATHS = {"asr_model_path": ("asr", "whisperx"), "asr_align_model_path": ("asr", "whisperx"),
               "llm_model_path": ("llm", "vllm"), "vision_model_path": ("visual_features", "compute")}


@dataclass(frozen=True)
class HowToStepConfig:
    # ---- inputs (spec §2); nothing given = the bundled sample
    videos: str | None = None              # HowTo100M_v1.csv (or csv/jsonl with at least video_id)
    tasks: str | None = None               # task_ids.csv (task_id<TAB>task_name)
    video_ids: str | None = None           # id list (one per line): the selection, else every csv row
    category_1: str | None = None          # keep only this category_1 (e.g. "Food and Entertaining")
    transcripts: str | None = None         # file or directory, in transcript_format
    transcript_format: str | None = None   # htm_raw|sentencified|whisperx|segments|asr (explicit, spec §2.2)
    media: str | None = None               # directory of <vid>.<mp4|webm|mkv> (ASR; frames when computing features)
    features: str | None = None            # directory of per-second visual feature files (spec §2.4)
    features_index: str | None = None      # optional {vid: subfolder or path} json
    exclude: list[str] = field(default_factory=list)   # id lists: the heldout split (spec §5.2)
    limit: int | None = None
    preset: str = "cpu-offline"
    seed: int = 2023                       # spec §3: all randomness seeded
    # ---- §3.1 ASR
    asr: str = "faster-whisper"            # faster-whisper (CPU, tiny.en) | whisperx (paper: large-v2 + align)
    asr_model_path: str | None = None
    asr_align_model_path: str | None = None
    asr_device: str = "cpu"
    asr_compute_type: str = "int8"         # CPU int8; paper float16
    asr_batch_size: int = 16               # WhisperX batch_size (spec §3.1)
    asr_language: str | None = "en"        # faster-whisper tiny.en is English-only; WhisperX auto-detects (None)
    # ---- §3.2 cleaning, sentencification, filters
    sentencify_mode: str = "no_punct_fallback"   # for unpunctuated htm_raw: no_punct_fallback (CPU) | bert (paper)
    punctuation_model_path: str | None = None    # bert: local felflare/bert-restore-punctuation folder
    min_narrations: int = 5                # spec §3.2: >= 5 sentences
    language_threshold: float = 0.9        # TAN: mean langdetect P(en) > 0.9
    # ---- §3.3-§3.6 chunks, prompt, LLM, parser
    chunk_size: int = 10                   # paper "around 10 sentences"; MPTVA exactly 10
    prompt_id: str | None = None           # None: the labeler's own (howtostep_v3, mptva or howtostep_v1_ts)
    prompt_template: str | None = None     # a user's prompt file substituting the text of prompt_id
    llm: str = "smollm2"                   # smollm2 (CPU) | vllm (paper) | replay
    llm_model_path: str | None = None      # vLLM: local dir of Llama-2-7b-chat-hf / Llama-3.1-8B-Instruct
    llm_replay: str | None = None          # replay: JSONL of recorded outputs or an earlier release's llm_outputs
    llm_max_tokens: int = 512              # spec §3.5
    llm_temperature: float = 0.0           # greedy
    llm_n_ctx: int = 2048                  # SmolLM2 context (spec §3.5)
    llm_max_model_len: int = 4096          # vLLM (spec §3.5)
    llm_batch_size: int = 8
    llm_device: str = "cpu"
    max_step_words: int = 40               # spec §3.6 step_too_long
    max_steps_per_chunk: int = 20          # spec §3.6 overgeneration_cap
    # ---- §3.7 Stage 1 and the text encoder g
    text_encoder: str = "minilm"           # g: MiniLM-L6 (CPU preset); a local folder or mpnet also work
    stage1_method: str = "step_asr"        # step_asr (paper default) | step_video (Table 3 "Step-Video")
    nu: float = 0.07                       # Stage-1 softmax temperature (spec §9.2, toolkit choice = MPTVA tau)
    zeta: float = 0.7                      # window growth ratio (paper §3.2, spec §9.1)
    epsilon1: float = 0.20                 # Stage-1 keep threshold (paper text, Table 3)
    # ---- §3.8-§3.9 Stage 2 (NaSVA self-training) and rounds
    labeler: str = "two_stage"             # two_stage | mptva | llm_timestamps
    epsilon2: float = 0.8                  # Stage-2 cosine threshold (spec §9.1)
    anchor: str = "start"                  # Table 8 best: start anchor
    delta_sec: float = 8.0                 # Table 8 best: 8 s
    rounds: int = 1                        # Table 9: the authors kept one round
    max_vlen: int = 1200                   # paper supp. §6.1: 1200 s
    labeler_train_text: str = "steps"      # steps (tables 3/8) | steps+narrations
    labeler_epochs: int = 12               # nasva.md §6
    labeler_batch_size: int = 8
    labeler_lr: float = 1e-4
    labeler_device: str = "cpu"
    nasva_text_encoder: str = "minilm"
    # ---- §2.4, §6 visual features
    visual_features: str | None = None     # file | compute | simulated; None: simulated for the bundled sample,
                                           # file when --features is given (a real build never simulates silently)
    visual_dim: int = 768                  # CLIP ViT-L/14 / InternVideo-MM-L14
    visual_backbone: str = "clip_vit_l14"
    vision_model_path: str | None = None   # local CLIPModel folder (compute)
    vision_device: str = "cpu"
    # ---- §4 MPTVA
    tau: float = 0.07                      # MPTVA softmax temperature
    mptva_w: int = 2                       # MPTVA Table 3: W = 2
    mptva_gamma: float = 0.65              # MPTVA Table 3: gamma = 0.65
    mptva_gamma_mode: str = "absolute"     # absolute | keep_ratio (toolkit addition)
    mptva_keep_ratio: float = 0.15
    mptva_long_model: str | None = None    # NaSVA checkpoint for S-V-long; None = train one on the narrations
    mptva_allow_missing: bool = False
    # ---- §5 release
    export_format: str | None = None       # howtostep_release: also the authors' per-video layout

    def validate(self) -> None:
        checks = [("transcript_format", TRANSCRIPT_FORMATS, True), ("labeler", LABELERS, False),
                  ("visual_features", VISUAL_FEATURES, True), ("preset", PRESETS, False),
                  ("asr", ("faster-whisper", "whisperx"), False), ("llm", ("smollm2", "vllm", "replay"), False),
                  ("anchor", ("start", "centre", "grown"), False), ("stage1_method", ("step_asr", "step_video"), False),
                  ("labeler_train_text", ("steps", "steps+narrations"), False),
                  ("sentencify_mode", ("no_punct_fallback", "bert"), False),
                  ("mptva_gamma_mode", ("absolute", "keep_ratio"), False),
                  ("export_format", ("howtostep_release",), True)]
        for key, allowed, nullable in checks:
            v = getattr(self, key)
            if (v is None and not nullable) or (v is not None and v not in allowed):
                raise ConfigError(f"{key} must be one of {', '.join(allowed)}, got {v!r}")
        for key in ("epsilon1", "zeta", "mptva_keep_ratio", "language_threshold"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ConfigError(f"{key} must lie in [0, 1]")
        for key in ("epsilon2", "mptva_gamma"):
            if not -1.0 <= getattr(self, key) <= 1.0:
                raise ConfigError(f"{key} is a cosine threshold: it must lie in [-1, 1]")
        if not 0 <= self.rounds <= 3:
            raise ConfigError("rounds must be 0, 1, 2 or 3 (spec §3.9)")
        for key in ("chunk_size", "min_narrations", "max_vlen", "visual_dim", "llm_max_tokens", "max_step_words",
                    "max_steps_per_chunk", "labeler_batch_size", "llm_batch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1")
        if self.nu <= 0 or self.tau <= 0 or self.delta_sec < 0 or self.labeler_epochs < 0:
            raise ConfigError("nu and tau must be > 0, delta_sec and labeler_epochs >= 0")
        if self.limit is not None and self.limit < 1:
            raise ConfigError("limit must be >= 1")
        if self.visual_features is not None and (self.labeler == "mptva" or self.stage1_method == "step_video"):
            from .labeler import require_mptva_pathways

            require_mptva_pathways(self)
            if (self.stage1_method == "step_video" and self.visual_features != "simulated"
                    and not self.vision_model_path):
                raise ConfigError("stage1_method=step_video needs a text tower paired with the visual features: "
                                  "visual_features=simulated or --set vision_model_path=DIR (the CLIP model)")
        if self.sentencify_mode == "bert" and self.transcript_format == "htm_raw" and not self.punctuation_model_path:
            raise ConfigError("sentencify_mode=bert (TAN's punctuation model for unpunctuated raw captions, spec "
                              "§3.2) needs a local copy of felflare/bert-restore-punctuation: --set "
                              "punctuation_model_path=DIR (nothing is downloaded), or --set "
                              "sentencify_mode=no_punct_fallback")
        if self.llm == "replay" and not self.llm_replay:
            raise ConfigError("llm=replay needs --set llm_replay=PATH (a JSONL of recorded outputs or a release)")

    @property
    def effective_prompt_id(self) -> str:
        """The prompt of spec §3.4 that goes with the labeler unless ``prompt_id`` names another."""
        if self.prompt_id:
            return self.prompt_id
        return {"mptva": "mptva", "llm_timestamps": "howtostep_v1_ts"}.get(self.labeler, "howtostep_v3")


def apply_preset(cfg: HowToStepConfig, explicit: set[str] | None = None) -> HowToStepConfig:
    """``preset=paper`` switches the GPU models of spec §6 on (keys the user set explicitly win) and fails loudly
    when a model path it needs is missing: no silent fallback to a CPU model, never a download."""
    if cfg.preset != "paper":
        return cfg
    return apply_paper_preset(cfg, PAPER_PRESET, PAPER_PATHS, explicit)
