"""The ``sieve_swap`` command line: input flags, their config keys, and the bundled sample when none is given."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from ...models.config_checks import check_model_config
from .config import SieveSwapConfig

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "samples" / "sieve_swap"
SAMPLE_INPUTS = {
    "videos": SAMPLE_DIR / "HowTo100M_v1.csv",
    "tasks": SAMPLE_DIR / "task_ids.csv",
    "titles": SAMPLE_DIR / "video_titles.csv",
    "durations": SAMPLE_DIR / "video_durations.csv",
    "transcripts": SAMPLE_DIR / "raw_caption.json",
    "recipes": SAMPLE_DIR / "recipes.csv",
}
SAMPLE_EXCLUDE = SAMPLE_DIR / "exclude_ids.txt"
REQUIRED_INPUTS = ("videos", "transcripts", "recipes")
INPUT_KEYS = ("videos", "tasks", "titles", "durations", "transcripts", "recipes")


def resolve_inputs(cfg: SieveSwapConfig) -> tuple[SieveSwapConfig, bool]:
    """With no input given use the bundled sample; otherwise require videos, transcripts and recipes.

    Every given path must exist: a missing input is an error before any work starts.
    """
    given = {k: getattr(cfg, k) for k in INPUT_KEYS if getattr(cfg, k)}
    if not given:
        cfg = dataclasses.replace(cfg, **{k: str(v) for k, v in SAMPLE_INPUTS.items()},
                                  exclude=list(cfg.exclude) or [str(SAMPLE_EXCLUDE)])
        sample = True
    else:
        missing = [k for k in REQUIRED_INPUTS if k not in given]
        if missing:
            raise FileNotFoundError("sieve_swap needs --" + ", --".join(missing) +
                                    " when any input is given (give none to build the bundled sample)")
        sample = False
    for key in (*INPUT_KEYS, "exclude"):
        paths = getattr(cfg, key)
        for p in ([paths] if isinstance(paths, str) else list(paths or [])):
            if not Path(p).exists():
                raise FileNotFoundError(f"--{key}: {p} does not exist")
    check_inputs(cfg)
    return cfg, sample


def check_inputs(cfg: SieveSwapConfig) -> None:
    """Whole-file checks before any work (docs/reason-codes.md names per-row reasons; a file that is unusable as a whole
    is an :class:`~builders.core.errors.InputError`, exit 2): headers of the CSV inputs, the shape of
    ``raw_caption.json`` and of every exclusion list. Cheap: headers, the first JSON entry, and the (small) exclusion
    lists."""
    from ...sources import exclusions, howto100m, recipenlg, transcripts

    howto100m.read_metadata(cfg.videos)                      # header / video_id column (a lazy reader: no rows read)
    if cfg.titles and not howto100m.is_jsonl(cfg.titles):
        howto100m._titles_csv_columns(Path(cfg.titles))
    if cfg.durations:
        howto100m.read_csv_header(cfg.durations)
    transcripts.check_raw_caption_file(cfg.transcripts)
    recipenlg.read_recipenlg(cfg.recipes)                    # the RecipeNLG header (lazy: no rows read)
    if cfg.exclude:
        exclusions.read_exclusion_ids(cfg.exclude)


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sieve_swap inputs (none given = the bundled sample)")
    g.add_argument("--videos", help="HowTo100M_v1.csv, or a csv/jsonl with at least video_id")
    g.add_argument("--tasks", help="task_ids.csv (task_id<TAB>task_name)")
    g.add_argument("--titles", help="video titles: csv video_id,title or jsonl")
    g.add_argument("--durations", help="video durations: csv video_id,duration or vid_id,duration,total_frame")
    g.add_argument("--transcripts", help="HowTo100M raw_caption.json, or a directory of WhisperX <video_id>.json")
    g.add_argument("--recipes", help="RecipeNLG full_dataset.csv")
    g.add_argument("--exclude", action="append", default=None,
                   help="id list to exclude (YouCook2 annotations json, *_list.txt, one id per line); repeatable")


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    out = {k: getattr(args, k) for k in ("videos", "tasks", "titles", "durations", "transcripts", "recipes")
           if getattr(args, k, None)}
    if getattr(args, "exclude", None):
        out["exclude"] = list(args.exclude)
    return out


def check_config(cfg: Any) -> None:
    """The config's models resolve, before any work: ``ConfigError`` (exit 2) naming the key."""
    check_model_config(cfg)
