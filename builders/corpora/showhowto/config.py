"""Config of the ShowHowTo builder (Souček et al., CVPR 2025, §3 and App. A): every default is the paper's unless its
comment says "toolkit", overridable with ``--config file.yaml`` / ``--set key=value``. Documented in
docs/corpora/showhowto.md; the key reference docs/configuration.md is generated from this class.

Two presets: ``cpu-offline`` (default: faster-whisper tiny.en, SmolLM2-135M GGUF, ``aligner=auto`` -> ``middle``
without CLIP weights) and ``paper`` (WhisperX large-v2, vLLM Llama-3.1-8B-Instruct, DFN5B-CLIP ViT-H-14-378 through
open_clip, all from local paths; a missing path fails loudly, nothing downloads).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.config import ConfigError, apply_paper_preset, check_range, check_ranges
from ...models.llm.backend import LLM_BACKEND_NAMES, SMOLLM2_BACKENDS
from ...models.media import GRID_FPS_RANGE

PRESETS = ("cpu-offline", "paper")
ALIGNERS = ("clip", "middle", "auto")
#: the frame grid rates accepted (frames a second): the release's 5 fps (paper App. A) and up to 60, beyond which a
#: grid only repeats the decoded frames and its frame cap would drop good videos (issue 20); the frame reader's own
FPS_RANGE = GRID_FPS_RANGE
#: the paper's aligner (App. A): DFN5B-CLIP-ViT-H-14-378 through open_clip (``ViT-H-14-378-quickgelu``, 1024-d)
DFN_ARCH = "ViT-H-14-378-quickgelu"
#: [toolkit] the paper preset's vLLM call: 512 prompts at once (a default shard's worth), twice vLLM's default
#: ``max_num_seqs`` of 256 running sequences, so its scheduler always has waiting requests to admit as others finish
#: (continuous batching, Kwon et al., SOSP 2023 "Efficient Memory Management for LLM Serving with PagedAttention",
#: Sec. 4.5); the CPU preset keeps 8 (SmolLM2 pads a batch to its longest prompt; docs/corpora/showhowto.md
#: "Shards, batching and caching")
PAPER_LLM_BATCH_SIZE = 512
PAPER_PRESET = {"asr": "whisperx", "asr_device": "cuda", "asr_compute_type": "float16", "asr_language": None,
                "llm": "vllm", "llm_device": "cuda", "llm_batch_size": PAPER_LLM_BATCH_SIZE, "aligner": "clip",
                "clip_backend": "open_clip", "clip_arch": DFN_ARCH, "vision_device": "cuda"}
PAPER_PATHS = {"asr_model_path": ("asr", "whisperx"), "asr_align_model_path": ("asr", "whisperx"),
               "llm_model_path": ("llm", "vllm"), "clip_model_path": ("aligner", "clip")}


@dataclass(frozen=True)
class ShowHowToConfig:
    # ---- inputs (nothing given = the bundled sample)
    manifest: str | None = None            # CSV or JSONL: video_id, video_path, title, optional transcript_path
    videos: str | None = None              # HowTo100M_v1.csv (task_id, category_1, category_2 per video)
    tasks: str | None = None               # task_ids.csv (task_id<TAB>task_name)
    test_list: str | None = None           # official test video ids (overrides the drawn split)
    limit: int | None = None               # only the first N manifest rows (trial builds)
    preset: str = "cpu-offline"            # cpu-offline (small models from packages) | paper (GPU models, local paths)
    seed: int = 0                          # fixed LLM seed and the split draw (toolkit)
    # ---- stage 1: ASR (paper §3: WhisperX)
    asr: str = "faster-whisper"            # faster-whisper (CPU tiny.en) | whisperx (paper: large-v2)
    asr_model_path: str | None = None      # WhisperX / faster-whisper model folder (paper preset: required)
    asr_align_model_path: str | None = None   # wav2vec2 alignment model folder (WhisperX)
    asr_device: str = "cpu"                # torch device of the ASR model
    asr_compute_type: str = "int8"         # CPU int8; paper float16
    asr_batch_size: int = 16               # WhisperX batch_size
    asr_language: str | None = "en"        # tiny.en is English-only; WhisperX auto-detects (None)
    any_language: bool = False             # --any-language switches the non_english check off
    # ---- stages 2-3: LLM filter and key steps (paper §3, App. E Fig. 19-20)
    llm: str = "smollm2"                   # smollm2 | smollm2-ct2 (CPU) | vllm (paper: Llama-3.1-8B-Instruct) | replay
    llm_model_path: str | None = None      # vLLM: local folder of Llama-3.1-8B-Instruct
    llm_replay: str | None = None          # JSONL of {"video_id", "stage": "filter"|"keysteps", "raw_output"}
    llm_prompt_format: str | None = None   # chat | raw; None = chat for vllm, raw (completion) for smollm2
    llm_temperature: float = 0.0           # greedy
    llm_n_ctx: int = 8192                  # SmolLM2-135M's context (the key-step prompt needs ~2-4K tokens)
    llm_max_model_len: int = 8192          # vLLM
    llm_batch_size: int = 8                # prompts per LLM batch
    llm_device: str = "cpu"                # torch device of the transformers backend
    filter_max_tokens: int = 64            # the answer and one explanation line
    keysteps_max_tokens: int = 1536        # new tokens of a key-step answer
    filter_prompt_template: str | None = None    # a user's file replacing the packaged filter prompt
    prompt_template: str | None = None           # a user's file replacing the packaged key-step prompt
    constrained_json: bool = False         # decode the key steps under the target JSON shape (vLLM structured
                                           # outputs; SmolLM2: regex-guided greedy decoding) [toolkit]
    constrained_max_steps: int = 26        # at most this many steps under constrained_json (paper: 1-26 steps)
    on_ambiguous: str = "reject"           # an answer neither Yes nor No: reject (filter_ambiguous) | accept
    filter_mode: str = "apply"             # apply (paper) | record: answers kept and counted, no video dropped
    gate_before_filter: bool = False       # the length gate after the filter unless this is set
    max_duration: float = 600.0            # paper §3: "videos under 10 minutes"
    min_steps: int = 2                     # toolkit: 2 (the paper kept 1-step sequences: --set min_steps=1)
    range_tolerance: float = 1.0           # a step may end at most this far past min(duration, last ASR time)
    # ---- stage 4: keyframe alignment (paper §3, App. A)
    aligner: str = "auto"                  # clip | middle | auto (clip with a configured model, else middle)
    fps: int = 5                           # the 5-fps frame grid of the release (1-60: a finer grid than the
                                           # video's own frame rate only repeats frames)
    epsilon: float = 15.0                  # window margin around each step, 15 s (paper App. A)
    clip_backend: str = "hf"               # hf (CLIPModel folder) | open_clip (paper: DFN5B) | plugin (module:factory)
    clip_model_path: str | None = None     # local CLIP checkpoint (folder, open_clip file or plug-in argument)
    clip_arch: str = DFN_ARCH              # open_clip architecture name
    vision_device: str = "cpu"             # torch device of the CLIP model
    vision_batch_size: int = 64            # frames per CLIP batch
    # ---- stage 4's decode pipeline (an execution setting: no cache key, no row changes with it)
    decode_workers: int | None = None      # CPU processes decoding, resizing and normalising frames for the CLIP
                                           # aligner beside the encoder (None: cores minus one; 0: in the step's
                                           # own process, in series) [toolkit]
    # ---- images and release
    with_images: bool = False              # the opt-in images config
    image_max_side: int | None = None      # downscale keyframes so the longer side is at most this (None: as decoded)
    jpeg_quality: int = 95                 # JPEG quality of the keyframes
    test_tasks: int = 200                  # tasks drawn for the test split (paper §5)
    min_task_seqs: int = 20                # a test task needs at least this many sequences
    test_size: int = 3964                  # test sequences (paper §5: 3,964)
    export_upstream: bool = False          # also write prompts.json + imgseqs/ (needs with_images)

    def validate(self) -> None:
        checks = [("preset", PRESETS), ("asr", ("faster-whisper", "whisperx")), ("llm", LLM_BACKEND_NAMES),
                  ("aligner", ALIGNERS), ("on_ambiguous", ("reject", "accept")),
                  ("filter_mode", ("apply", "record")), ("clip_backend", ("hf", "open_clip", "plugin"))]
        for key, allowed in checks:
            if getattr(self, key) not in allowed:
                raise ConfigError(f"{key} must be one of {', '.join(allowed)}, got {getattr(self, key)!r}")
        if self.llm_prompt_format not in (None, "chat", "raw"):
            raise ConfigError(f"llm_prompt_format must be chat or raw, got {self.llm_prompt_format!r}")
        self._validate_ranges()
        if self.aligner == "clip" and not self.clip_model_path:
            raise ConfigError("aligner=clip needs --set clip_model_path=PATH (a local CLIP / DFN5B-CLIP checkpoint; "
                              "nothing is downloaded), or aligner=middle")
        if self.llm == "replay" and not self.llm_replay:
            raise ConfigError("llm=replay needs --set llm_replay=PATH (JSONL of {video_id, stage, raw_output})")
        if self.export_upstream and not self.with_images:
            raise ConfigError("export_upstream writes imgseqs/ from the frames: it needs --with-images")

    def _validate_ranges(self) -> None:
        """The range of every number (docs/configuration.md), one line naming the key: the frame grid in
        :data:`FPS_RANGE` (Souček et al., CVPR 2025, App. A: 5 fps), durations and margins >= 0 (``max_duration`` > 0,
        §3: "videos under 10 minutes"), counts >= 1."""
        check_range(self, "fps", *FPS_RANGE, why="frames a second of the keyframe grid")
        check_ranges(self, {k: (1, None) for k in (
            "min_steps", "filter_max_tokens", "keysteps_max_tokens", "llm_batch_size", "test_tasks", "min_task_seqs",
            "test_size", "vision_batch_size", "llm_n_ctx", "llm_max_model_len", "constrained_max_steps",
            "asr_batch_size", "limit")})
        check_range(self, "max_duration", 0.0, None, lo_open=True, why="seconds")
        check_ranges(self, {"epsilon": (0.0, None), "range_tolerance": (0.0, None), "llm_temperature": (0.0, None)})
        check_range(self, "jpeg_quality", 1, 100)
        check_range(self, "image_max_side", 16, None)
        check_range(self, "decode_workers", 0, None, why="decode processes (0: none, decode in the step's process)")

    @property
    def prompt_format(self) -> str:
        """One user message through the chat template; completion-only use receives the raw string. The
        CPU default sends SmolLM2 the raw string (the 135M model follows the few-shot layout only as a completion)."""
        if self.llm_prompt_format:
            return self.llm_prompt_format
        return "raw" if self.llm in SMOLLM2_BACKENDS else "chat"

    @property
    def effective_aligner(self) -> str:
        """``auto`` = ``clip`` when a model path is configured, else ``middle`` (with a warning)."""
        if self.aligner == "auto":
            return "clip" if self.clip_model_path else "middle"
        return self.aligner


def apply_preset(cfg: ShowHowToConfig, explicit: set[str] | None = None) -> ShowHowToConfig:
    """``preset=paper`` switches the GPU models on (keys set explicitly win) and fails loudly when a local model path
    it needs is missing: no silent fallback to a CPU model, never a download."""
    if cfg.preset != "paper":
        return cfg
    return apply_paper_preset(cfg, PAPER_PRESET, PAPER_PATHS, explicit)
