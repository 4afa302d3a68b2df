"""The ``howtostep`` command line: input flags, their config keys, and the bundled sample when none is given."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path
from typing import Any

from ...core.config import ConfigError
from ...models.config_checks import check_model_config
from . import prompts
from .config import TRANSCRIPT_FORMATS, HowToStepConfig, apply_preset

log = logging.getLogger(__name__)
SAMPLE_DIR = Path(__file__).resolve().parents[2] / "samples" / "howtostep"
SAMPLE_INPUTS = {
    "videos": SAMPLE_DIR / "HowTo100M_v1.csv",
    "tasks": SAMPLE_DIR / "task_ids.csv",
    "transcripts": SAMPLE_DIR / "transcripts",
    "media": SAMPLE_DIR / "videos",
}
SAMPLE_EXCLUDE = SAMPLE_DIR / "exclude_ids.txt"
#: the bundled sample caps the CPU LLM's answer at 128 new tokens (config default 512): SmolLM2 through transformers
#: makes ~38 tokens/s batched on 2 cores and its lists often run to the cap, so 512 would take minutes per shard
SAMPLE_LLM_MAX_TOKENS = 128
INPUT_KEYS = ("videos", "tasks", "video_ids", "transcripts", "media", "features", "features_index")
#: config keys holding input paths (fingerprinted, made relative in the manifest)
PATH_KEYS = (*INPUT_KEYS, "exclude", "llm_replay", "prompt_template", "mptva_long_model", "punctuation_model_path")


def resolve_inputs(cfg: HowToStepConfig) -> tuple[HowToStepConfig, bool]:
    """With no input given build the bundled sample (WhisperX transcripts + two media files that go through ASR,
    simulated features); otherwise require the video list and a transcript source. Every given path must exist."""
    given = {k: getattr(cfg, k) for k in INPUT_KEYS if getattr(cfg, k)}
    if not given:
        cfg = dataclasses.replace(cfg, **{k: str(v) for k, v in SAMPLE_INPUTS.items()},
                                  transcript_format=cfg.transcript_format or "whisperx",
                                  exclude=list(cfg.exclude) or [str(SAMPLE_EXCLUDE)])
        if cfg.llm_max_tokens == HowToStepConfig.llm_max_tokens:
            cfg = dataclasses.replace(cfg, llm_max_tokens=SAMPLE_LLM_MAX_TOKENS)
        sample = True
    else:
        sample = False
        if not cfg.videos and not cfg.video_ids:
            raise FileNotFoundError("howtostep needs --videos (HowTo100M_v1.csv) or --video-ids when any input is "
                                    "given (give none to build the bundled sample)")
        if not cfg.transcript_format:
            raise ConfigError("--transcript-format is required (one of " + ", ".join(TRANSCRIPT_FORMATS) + "): "
                              "the builder never guesses the format (docs/corpora/howtostep.md)")
        if cfg.transcript_format != "asr" and not cfg.transcripts:
            raise FileNotFoundError(f"--transcript-format {cfg.transcript_format} needs --transcripts")
        if cfg.transcript_format == "asr" and not cfg.media:
            raise FileNotFoundError("--transcript-format asr needs --media DIR (the video files to transcribe)")
    cfg = apply_preset(cfg)  # before the defaults below: the paper preset computes its features
    if cfg.visual_features is None:
        if not sample and not cfg.features:
            raise ConfigError("give the visual features: --features DIR (per-second feature files), or --set "
                              "visual_features=compute (CLIP from --media and vision_model_path) or "
                              "visual_features=simulated (tests only: timestamps then say nothing about real grounding)")
        cfg = dataclasses.replace(cfg, visual_features="simulated" if sample else "file")
    if cfg.visual_features == "file" and not cfg.features:
        raise FileNotFoundError("visual_features=file needs --features DIR (or --set visual_features=simulated)")
    if cfg.visual_features == "compute" and not cfg.media:
        raise FileNotFoundError("visual_features=compute needs --media DIR (frames are decoded from the videos)")
    for key in PATH_KEYS:
        paths = getattr(cfg, key)
        for p in ([paths] if isinstance(paths, str) else list(paths or [])):
            if not Path(p).exists():
                raise FileNotFoundError(f"--{key.replace('_', '-')}: {p} does not exist")
    if not sample and not cfg.exclude:
        log.warning("no --exclude given: every video goes to the train split. The paper holds out the HT-Step "
                    "(video_splits.json) and TAN/HTM-Align (htm_holdout_vid.txt) videos "
                    "(docs/corpora/howtostep.md, Inputs)")
    cfg.validate()
    return cfg, sample


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("howtostep inputs (none given = the bundled sample)")
    g.add_argument("--videos", help="HowTo100M_v1.csv (video_id,category_1,category_2,rank,task_id)")
    g.add_argument("--tasks", help="task_ids.csv (task_id<TAB>task_name)")
    g.add_argument("--video-ids", dest="video_ids", help="id list, one YouTube id per line (the selection)")
    g.add_argument("--transcripts", help="transcript file or directory (see --transcript-format)")
    g.add_argument("--transcript-format", dest="transcript_format", choices=TRANSCRIPT_FORMATS,
                   help="htm_raw (raw_caption.json), sentencified, whisperx (dir of <vid>.json), segments, asr "
                        "(no transcript: run ASR on --media)")
    g.add_argument("--media", help="directory of <vid>.<mp4|webm|mkv> video files (ASR, computed features)")
    g.add_argument("--features", help="directory of per-second visual features <vid>.{pth.tar,pth,pt,npy,npz}")
    g.add_argument("--exclude", action="append", default=None,
                   help="id list of the heldout split (HT-Step video_splits.json, htm_holdout_vid.txt, ...); "
                        "repeatable")
    g.add_argument("--prompt-template", dest="prompt_template",
                   help="a prompt file substituting the text of the prompt_id (recorded with its hash)")


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("videos", "tasks", "video_ids", "transcripts", "transcript_format", "media", "features",
            "prompt_template")
    out = {k: getattr(args, k) for k in keys if getattr(args, k, None)}
    if getattr(args, "exclude", None):
        out["exclude"] = list(args.exclude)
    return out


def check_config(cfg: Any) -> None:
    """The config's models and prompts resolve, before any work: ``ConfigError`` (exit 2) naming the key."""
    check_model_config(cfg)
    try:
        prompts.check_config(cfg)
    except ValueError as e:
        raise ConfigError(str(e)) from None
