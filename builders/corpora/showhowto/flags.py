"""The ``showhowto`` command line: input flags, their config keys, and the bundled sample when none is given
(docs/corpora/showhowto.md)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path
from typing import Any

from ...core.config import ConfigError
from ...models.config_checks import check_model_config
from . import prompts
from .config import ALIGNERS, ShowHowToConfig, apply_preset

log = logging.getLogger(__name__)
SAMPLE_DIR = Path(__file__).resolve().parents[2] / "samples" / "showhowto"
SAMPLE_INPUTS = {"manifest": SAMPLE_DIR / "manifest.csv", "videos": SAMPLE_DIR / "HowTo100M_v1.csv",
                 "tasks": SAMPLE_DIR / "task_ids.csv"}
#: every row, and recorded answers covering every reason code of docs/reason-codes.md (tests: ``--manifest <that> --set
#: llm=replay --set llm_replay=<this>``)
SAMPLE_ALL_ROWS = SAMPLE_DIR / "manifest_reasons.csv"
SAMPLE_REPLAY = SAMPLE_DIR / "llm_outputs.jsonl"
#: the bundled sample's settings (config defaults in brackets). SmolLM2-135M answers "No" to nearly every filter
#: question and, free, writes steps until its token cap (every answer ``llm_truncated``): the sample records the
#: filter's answers without applying them [apply] and decodes the key steps under the JSON shape with at most 4 steps
#: [off; 26], capped at 24 and 240 new tokens [64, 1536], so it builds in about 3 minutes on 2 cores. Its split takes 2
#: tasks [200], one sequence each [3,964], from tasks with >= 1 sequence [20].
SAMPLE_SETTINGS = {"filter_max_tokens": 24, "keysteps_max_tokens": 240, "constrained_json": True,
                   "constrained_max_steps": 4, "filter_mode": "record", "test_tasks": 2, "test_size": 2,
                   "min_task_seqs": 1}
INPUT_KEYS = ("manifest", "videos", "tasks", "test_list")
PATH_KEYS = (*INPUT_KEYS, "llm_replay", "prompt_template", "filter_prompt_template")


def resolve_inputs(cfg: ShowHowToConfig) -> tuple[ShowHowToConfig, bool]:
    """With no input build the bundled sample; otherwise a manifest is required. Every given path must exist and the
    manifest must be readable (a whole-file problem exits 2 here, before any work)."""
    given = {k: getattr(cfg, k) for k in INPUT_KEYS if getattr(cfg, k)}
    sample = not given
    if sample:
        base = ShowHowToConfig()
        changes: dict[str, Any] = {k: str(v) for k, v in SAMPLE_INPUTS.items()}
        changes.update({k: v for k, v in SAMPLE_SETTINGS.items() if getattr(cfg, k) == getattr(base, k)})
        cfg = dataclasses.replace(cfg, **changes)
    elif not cfg.manifest:
        raise FileNotFoundError("showhowto needs --manifest FILE (CSV or JSONL: video_id, video_path, title, optional "
                                "transcript_path) when any input is given (give none to build the bundled sample)")
    cfg = apply_preset(cfg)
    for key in PATH_KEYS:
        value = getattr(cfg, key)
        if value and not Path(value).exists():
            raise FileNotFoundError(f"--{key.replace('_', '-')}: {value} does not exist")
    cfg.validate()
    if cfg.aligner == "auto" and cfg.effective_aligner == "middle":
        log.warning("aligner=auto: no CLIP model configured (clip_model_path), so keyframes are the frames nearest each "
                    "step's midpoint (aligner=middle, a lower-quality mode: paper Table 3); the card says so per row")
    from ...sources.video_manifest import read_manifest

    for _ in read_manifest(cfg.manifest):  # whole-file problems (no header, no rows) raise InputError: exit 2
        pass
    if cfg.test_list:
        from ...sources.exclusions import read_exclusion_ids

        read_exclusion_ids([cfg.test_list])
    return cfg, sample


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("showhowto inputs (none given = the bundled sample)")
    g.add_argument("--manifest", help="CSV or JSONL: video_id, video_path, title, optional transcript_path")
    g.add_argument("--videos", help="HowTo100M_v1.csv (task_id, category_1, category_2 of each video)")
    g.add_argument("--tasks", help="task_ids.csv (task_id<TAB>task_name)")
    g.add_argument("--test-list", dest="test_list", help="official test video ids, one per line "
                                                     "(overrides the split algorithm)")
    g.add_argument("--prompt-template", dest="prompt_template",
                   help="a key-step prompt file replacing the packaged one ({title} and {transcript} placeholders)")
    g.add_argument("--filter-prompt-template", dest="filter_prompt_template",
                   help="a filter prompt file replacing the packaged one ({title} and {transcript} placeholders)")
    g.add_argument("--aligner", choices=ALIGNERS, help="keyframe aligner (default auto: clip with a model, else middle)")
    g.add_argument("--with-images", dest="with_images", action="store_true", default=None,
                   help="also release the images config (frames as JPEG; needs redistribution rights)")
    g.add_argument("--export-upstream", dest="export_upstream", action="store_true", default=None,
                   help="also write the upstream training layout prompts.json + imgseqs/ (needs --with-images)")
    g.add_argument("--on-ambiguous", dest="on_ambiguous", choices=("reject", "accept"))
    g.add_argument("--gate-before-filter", dest="gate_before_filter", action="store_true", default=None)
    g.add_argument("--any-language", dest="any_language", action="store_true", default=None)
    g.add_argument("--min-steps", dest="min_steps", type=int)
    g.add_argument("--fps", type=int)
    g.add_argument("--image-max-side", dest="image_max_side", type=int)
    g.add_argument("--test-tasks", dest="test_tasks", type=int)
    g.add_argument("--min-task-seqs", dest="min_task_seqs", type=int)
    g.add_argument("--test-size", dest="test_size", type=int)
    # the decode pipeline of the keyframe stage (builders/models/frame_decode.py): an execution setting
    g.add_argument("--decode-workers", dest="decode_workers", type=int,
                   help="CPU processes decoding frames beside the CLIP encoder (default: cores minus one; 0: none)")


_FLAG_KEYS = ("manifest", "videos", "tasks", "test_list", "prompt_template", "filter_prompt_template", "aligner",
              "with_images", "export_upstream", "on_ambiguous", "gate_before_filter", "any_language", "min_steps",
              "fps", "image_max_side", "test_tasks", "min_task_seqs", "test_size")


_DECODE_FLAG_KEYS = ("decode_workers",)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    out = {k: getattr(args, k) for k in (*_FLAG_KEYS, *_DECODE_FLAG_KEYS) if getattr(args, k, None) is not None}
    if out.get("with_images") is False:
        raise ConfigError("--with-images takes no value")
    return out


def check_config(cfg: Any) -> None:
    """The config's models and prompts resolve, before any work: ``ConfigError`` (exit 2) naming the key."""
    check_model_config(cfg)
    try:
        prompts.check_config(cfg)
    except ValueError as e:
        raise ConfigError(str(e)) from None
