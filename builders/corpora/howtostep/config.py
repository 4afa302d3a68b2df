"""Config of the HowToStep builder (Li et al., ECCV 2024, §3 and supp. §6; the MPTVA option after Chen et al., ECCV
2024, §3.3): every default is the paper's unless its comment says "toolkit", overridable with ``--config file.yaml`` /
``--set key=value``. Documented in docs/corpora/howtostep.md; docs/configuration.md is generated from this class.

Two presets: ``cpu-offline`` (default; faster-whisper tiny.en, SmolLM2-135M GGUF, MiniLM, features from files
or simulated) and ``paper`` (WhisperX large-v2, vLLM Llama-2-7B-chat, CLIP ViT-L/14 features on a GPU), which needs
local model paths and fails loudly when one is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.config import ConfigError, apply_paper_preset, check_range, check_ranges
from ...models.llm.backend import LLM_BACKEND_NAMES

TRANSCRIPT_FORMATS = ("htm_raw", "sentencified", "whisperx", "segments", "asr")
LABELERS = ("two_stage", "mptva", "llm_timestamps")
VISUAL_FEATURES = ("file", "compute", "simulated")
PRESETS = ("cpu-offline", "paper")

#: what the paper preset switches (the rest of the config keeps its paper defaults; docs/corpora/howtostep.md)
PAPER_PRESET = {"asr": "whisperx", "asr_device": "cuda", "asr_compute_type": "float16", "asr_language": None,
                "llm": "vllm", "llm_device": "cuda", "visual_features": "compute", "vision_device": "cuda",
                "labeler_device": "cuda", "sentencify_mode": "bert"}
#: config keys that must hold a local path under the paper preset, by the setting that needs them
PAPER_PATHS = {"asr_model_path": ("asr", "whisperx"), "asr_align_model_path": ("asr", "whisperx"),
               "llm_model_path": ("llm", "vllm"), "vision_model_path": ("visual_features", "compute")}


@dataclass(frozen=True)
class HowToStepConfig:
    # ---- inputs (nothing given = the bundled sample)
    videos: str | None = None              # HowTo100M_v1.csv (or csv/jsonl with at least video_id)
    tasks: str | None = None               # task_ids.csv (task_id<TAB>task_name)
    video_ids: str | None = None           # id list (one per line): the selection, else every csv row
    category_1: str | None = None          # keep only this category_1 (e.g. "Food and Entertaining")
    transcripts: str | None = None         # file or directory, in transcript_format
    transcript_format: str | None = None   # htm_raw|sentencified|whisperx|segments|asr (always explicit)
    media: str | None = None               # directory of <vid>.<mp4|webm|mkv> (ASR; frames when computing features)
    features: str | None = None            # directory of per-second visual feature files
    features_index: str | None = None      # optional {vid: subfolder or path} json
    exclude: list[str] = field(default_factory=list)   # id lists: the heldout split (grounded, never trained on)
    limit: int | None = None               # only the first N videos (trial builds)
    preset: str = "cpu-offline"            # cpu-offline (small models from packages) | paper (GPU models, local paths)
    seed: int = 2023                       # seed of all randomness (toolkit)
    # ---- ASR (paper §3.1: WhisperX)
    asr: str = "faster-whisper"            # faster-whisper (CPU, tiny.en) | whisperx (paper: large-v2 + align)
    asr_model_path: str | None = None      # WhisperX / faster-whisper model folder (paper preset: required)
    asr_align_model_path: str | None = None   # wav2vec2 alignment model folder (WhisperX)
    asr_device: str = "cpu"                # torch device of the ASR model
    asr_compute_type: str = "int8"         # CPU int8; paper float16
    asr_batch_size: int = 16               # WhisperX batch_size
    asr_language: str | None = "en"        # faster-whisper tiny.en is English-only; WhisperX auto-detects (None)
    # ---- cleaning, sentencification, filters (after TAN, Han et al., CVPR 2022)
    sentencify_mode: str = "no_punct_fallback"   # for unpunctuated htm_raw: no_punct_fallback (CPU) | bert (paper)
    punctuation_model_path: str | None = None    # bert: local felflare/bert-restore-punctuation folder
    min_narrations: int = 5                # videos with fewer ASR sentences are dropped
    language_threshold: float = 0.9        # TAN: mean langdetect P(en) > 0.9
    # ---- chunks, prompt, LLM, parser (paper §3.1, supp. Table 6)
    chunk_size: int = 10                   # paper "around 10 sentences"; MPTVA exactly 10
    prompt_id: str | None = None           # None: the labeler's own (howtostep_v3, mptva or howtostep_v1_ts)
    prompt_template: str | None = None     # a user's prompt file substituting the text of prompt_id
    llm: str = "smollm2"                   # smollm2 | smollm2-ct2 (CPU, int8) | vllm (paper) | replay
    llm_model_path: str | None = None      # vLLM: local dir of Llama-2-7b-chat-hf / Llama-3.1-8B-Instruct
    llm_replay: str | None = None          # replay: JSONL of recorded outputs or an earlier release's llm_outputs
    llm_max_tokens: int = 512              # new tokens per answer
    llm_temperature: float = 0.0           # greedy
    llm_n_ctx: int = 2048                  # SmolLM2 context
    llm_max_model_len: int = 4096          # vLLM context
    llm_batch_size: int = 8                # prompts per LLM batch
    llm_device: str = "cpu"                # torch device of the transformers backend
    max_step_words: int = 40               # longer parsed steps are dropped (step_too_long; toolkit)
    max_steps_per_chunk: int = 20          # a chunk's answer is cut after this many steps (toolkit)
    # ---- Stage 1 and the text encoder g (paper §3.1)
    text_encoder: str = "minilm"           # g: MiniLM-L6 (CPU preset); a local folder or mpnet also work
    stage1_method: str = "step_asr"        # step_asr (paper default) | step_video (Table 3 "Step-Video")
    nu: float = 0.07                       # Stage-1 softmax temperature (toolkit choice: MPTVA's tau)
    zeta: float = 0.7                      # window growth ratio (paper §3.1)
    epsilon1: float = 0.20                 # Stage-1 keep threshold (paper text, Table 3)
    # ---- Stage 2 (NaSVA self-training) and rounds (paper §3.2-§3.3, supp. §6)
    labeler: str = "two_stage"             # two_stage | mptva | llm_timestamps
    epsilon2: float = 0.8                  # Stage-2 cosine threshold (paper §3.2)
    anchor: str = "start"                  # Table 8 best: start anchor
    delta_sec: float = 8.0                 # Table 8 best: 8 s
    rounds: int = 1                        # Table 9: the authors kept one round
    max_vlen: int = 1200                   # paper supp. §6.1: 1200 s
    labeler_train_text: str = "steps"      # steps (tables 3/8) | steps+narrations
    labeler_epochs: int = 12               # NaSVA training epochs (paper supp. §6.1)
    labeler_batch_size: int = 8            # NaSVA batch size (authors' code)
    labeler_lr: float = 1e-4               # AdamW learning rate (authors' code)
    labeler_device: str = "cpu"            # torch device of the labeler
    nasva_text_encoder: str = "minilm"     # sentence encoder of the labeler's text features
    # ---- visual features
    visual_features: str | None = None     # file | compute | simulated; None: simulated for the bundled sample,
                                           # file when --features is given (a real build never simulates silently)
    visual_dim: int = 768                  # CLIP ViT-L/14 / InternVideo-MM-L14
    visual_backbone: str = "clip_vit_l14"  # name recorded for the features (clip_vit_l14 or a file's backbone)
    vision_model_path: str | None = None   # local CLIPModel folder (compute)
    vision_device: str = "cpu"             # torch device of the vision model
    #: feature files hold one row a second; rows that hold NaN/Inf, only zeros or a value beyond feature_max_abs
    #: are bad: more than this share of them and the video is dropped (bad_features), fewer are repaired from their
    #: neighbours (features_repaired); 0 drops a video for one bad row (toolkit; in [0, 1])
    feature_max_bad_share: float = 0.05
    feature_max_abs: float = 65504.0       # a value beyond this magnitude makes its row bad: the fp16 maximum of the
                                           # feature store (toolkit; in (0, 65504])
    #: a feature file's rows (seconds) must match the container duration within max(feature_duration_tolerance_s,
    #: feature_duration_tolerance_frac x duration), else feature_duration_mismatch (toolkit; >= 0); more than 2 s
    #: off but within it: counter feature_length_mismatch, the build proceeds with the rows
    feature_duration_tolerance_s: float = 2.0
    feature_duration_tolerance_frac: float = 0.10   # see feature_duration_tolerance_s (toolkit; >= 0)
    #: without a video file the features are the video: narrations starting at or after their end (one row a
    #: second) are dropped (counter narration_beyond_video; too_few_narrations when fewer than min_narrations
    #: remain: TAN's rule, Li et al., ECCV 2024, supp. §6.1); rows above this multiple of the last narration end
    #: plus the tolerance, or none, are feature_duration_mismatch (silent outros; toolkit; >= 1)
    feature_transcript_span_ratio: float = 2.0
    # ---- MPTVA (Chen et al., ECCV 2024, §3.3)
    tau: float = 0.07                      # MPTVA softmax temperature
    mptva_w: int = 2                       # MPTVA Table 3: W = 2
    mptva_gamma: float = 0.65              # MPTVA Table 3: gamma = 0.65
    mptva_gamma_mode: str = "absolute"     # absolute | keep_ratio (toolkit addition)
    mptva_keep_ratio: float = 0.15         # share of steps kept under mptva_gamma_mode=keep_ratio
    mptva_long_model: str | None = None    # NaSVA checkpoint for S-V-long; None = train one on the narrations
    mptva_allow_missing: bool = False      # run without a missing pathway instead of failing
    # ---- release
    export_format: str | None = None       # howtostep_release: also the authors' per-video layout

    def validate(self) -> None:
        checks = [("transcript_format", TRANSCRIPT_FORMATS, True), ("labeler", LABELERS, False),
                  ("visual_features", VISUAL_FEATURES, True), ("preset", PRESETS, False),
                  ("asr", ("faster-whisper", "whisperx"), False), ("llm", LLM_BACKEND_NAMES, False),
                  ("anchor", ("start", "centre", "grown"), False), ("stage1_method", ("step_asr", "step_video"), False),
                  ("labeler_train_text", ("steps", "steps+narrations"), False),
                  ("sentencify_mode", ("no_punct_fallback", "bert"), False),
                  ("mptva_gamma_mode", ("absolute", "keep_ratio"), False),
                  ("export_format", ("howtostep_release",), True)]
        for key, allowed, nullable in checks:
            v = getattr(self, key)
            if (v is None and not nullable) or (v is not None and v not in allowed):
                raise ConfigError(f"{key} must be one of {', '.join(allowed)}, got {v!r}")
        self._validate_ranges()
        if self.visual_features is not None and (self.labeler == "mptva" or self.stage1_method == "step_video"):
            from .labeler import require_mptva_pathways

            require_mptva_pathways(self)
            if (self.stage1_method == "step_video" and self.visual_features != "simulated"
                    and not self.vision_model_path):
                raise ConfigError("stage1_method=step_video needs a text tower paired with the visual features: "
                                  "visual_features=simulated or --set vision_model_path=DIR (the CLIP model)")
        if self.sentencify_mode == "bert" and self.transcript_format == "htm_raw" and not self.punctuation_model_path:
            raise ConfigError("sentencify_mode=bert (TAN's punctuation model for unpunctuated raw captions) "
                              "needs a local copy of felflare/bert-restore-punctuation: --set "
                              "punctuation_model_path=DIR (nothing is downloaded), or --set "
                              "sentencify_mode=no_punct_fallback")
        if self.llm == "replay" and not self.llm_replay:
            raise ConfigError("llm=replay needs --set llm_replay=PATH (a JSONL of recorded outputs or a release)")

    def _validate_ranges(self) -> None:
        """The range of every number (docs/configuration.md): thresholds and shares in [0, 1] (Li et al., ECCV 2024,
        §3.1: epsilon1, zeta; MPTVA, Chen et al., ECCV 2024, §3.3: the keep ratio), cosines in [-1, 1] (epsilon2,
        gamma), temperatures and the learning rate > 0, durations >= 0, counts >= 1; one line naming the key."""
        check_ranges(self, {k: (0.0, 1.0) for k in ("epsilon1", "zeta", "mptva_keep_ratio", "language_threshold",
                                                      "feature_max_bad_share")}, why="a threshold or share")
        check_ranges(self, {"epsilon2": (-1.0, 1.0), "mptva_gamma": (-1.0, 1.0)}, why="a cosine threshold")
        check_range(self, "rounds", 0, 3, why="paper Table 9: 0, 1, 2 or 3")
        check_ranges(self, {k: (1, None) for k in (
            "chunk_size", "min_narrations", "max_vlen", "visual_dim", "llm_max_tokens", "max_step_words",
            "max_steps_per_chunk", "labeler_batch_size", "llm_batch_size", "asr_batch_size", "llm_n_ctx",
            "llm_max_model_len", "limit")})
        check_ranges(self, {"nu": (0.0, None), "tau": (0.0, None), "labeler_lr": (0.0, None)}, lo_open=True,
                     why="a softmax temperature or learning rate")
        check_ranges(self, {k: (0, None) for k in ("delta_sec", "labeler_epochs", "mptva_w", "llm_temperature",
                                                    "feature_duration_tolerance_s",
                                                    "feature_duration_tolerance_frac")})
        check_range(self, "feature_max_abs", 0.0, 65504.0, lo_open=True, why="the fp16 feature store's range")
        check_range(self, "feature_transcript_span_ratio", 1.0, None)

    @property
    def effective_prompt_id(self) -> str:
        """The prompt (paper supp. Table 6) that goes with the labeler unless ``prompt_id`` names another."""
        if self.prompt_id:
            return self.prompt_id
        return {"mptva": "mptva", "llm_timestamps": "howtostep_v1_ts"}.get(self.labeler, "howtostep_v3")


def apply_preset(cfg: HowToStepConfig, explicit: set[str] | None = None) -> HowToStepConfig:
    """``preset=paper`` switches the GPU models on (keys the user set explicitly win) and fails loudly
    when a model path it needs is missing: no silent fallback to a CPU model, never a download."""
    if cfg.preset != "paper":
        return cfg
    return apply_paper_preset(cfg, PAPER_PRESET, PAPER_PATHS, explicit)
