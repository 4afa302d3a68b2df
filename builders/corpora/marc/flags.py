"""The ``marc`` command line: input flags, their config keys, and the bundled sample when none is given."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from ...models.config_checks import check_model_config
from .config import MarcConfig

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "samples" / "marc"
SAMPLE_INPUTS = {
    "warc": [SAMPLE_DIR / "recipes.warc.gz"],
    "videos": SAMPLE_DIR / "video_candidates.jsonl",
    "transcripts": SAMPLE_DIR / "raw_caption.json",
    "youcook2": SAMPLE_DIR / "youcook2_annotations.json",
    "youcook2_transcripts": SAMPLE_DIR / "youcook2_raw_caption.json",
}
INPUT_KEYS = ("warc", "pages", "videos", "transcripts", "youcook2", "youcook2_transcripts", "chat_model")


def resolve_inputs(cfg: MarcConfig) -> tuple[MarcConfig, bool]:
    """No input given -> the bundled sample; else web pages are required, and videos need their transcripts.

    Every given path must exist (an error before any work starts).
    """
    given = [k for k in ("warc", "pages", "videos", "transcripts") if getattr(cfg, k)]
    if not given:
        cfg = dataclasses.replace(
            cfg, warc=[str(p) for p in SAMPLE_INPUTS["warc"]],
            **{k: str(v) for k, v in SAMPLE_INPUTS.items() if k != "warc" and not getattr(cfg, k)})
        sample = True
    else:
        if not cfg.warc and not cfg.pages:
            raise FileNotFoundError("marc needs web pages: --warc FILES|DIRS and/or --pages DIR "
                                    "(give no input at all to build the bundled sample)")
        if bool(cfg.videos) != bool(cfg.transcripts):
            raise FileNotFoundError("--videos (video_candidates.jsonl) and --transcripts go together")
        sample = False
    if cfg.videos and cfg.classifier == "logreg" and not cfg.chat_model \
            and not (cfg.youcook2 and cfg.youcook2_transcripts):
        raise FileNotFoundError(
            "the chat/content classifier (docs/corpora/marc.md) needs training data: --youcook2 "
            "youcookii_annotations_trainval.json and --youcook2-transcripts (their transcripts), or a trained "
            "--chat-model model.json, or "
            "--set classifier=none to keep every transcript sentence (a deviation from the paper)")
    for key in INPUT_KEYS:
        value = getattr(cfg, key)
        for p in ([value] if isinstance(value, str) else list(value or [])):
            if not Path(p).exists():
                raise FileNotFoundError(f"--{key.replace('_', '-')}: {p} does not exist")
    check_inputs(cfg)
    return cfg, sample


def check_inputs(cfg: MarcConfig) -> None:
    """Whole-file checks before any work (docs/reason-codes.md names per-item reasons; a file unusable as a whole is an
    :class:`~builders.core.errors.InputError`, exit 2): ``--pages`` is a directory, ``--videos`` a file, each
    ``raw_caption.json`` a JSON object, the YouCook2 annotations a ``{"database": {...}}`` object."""
    from ...core.errors import InputError
    from ...sources import transcripts
    from ...sources.youcook2 import read_youcook2_annotations

    if cfg.pages and not Path(cfg.pages).is_dir():
        raise InputError(f"--pages: {cfg.pages} is not a directory of <key>.html / <key>.html.gz pages")
    if cfg.videos and not Path(cfg.videos).is_file():
        raise InputError(f"--videos: {cfg.videos} is not a file (video_candidates.jsonl)")
    for key in ("transcripts", "youcook2_transcripts"):
        if getattr(cfg, key):
            transcripts.check_raw_caption_file(getattr(cfg, key))
    if cfg.youcook2:
        read_youcook2_annotations(cfg.youcook2)


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("marc inputs (none given = the bundled sample)")
    g.add_argument("--warc", action="append", default=None, metavar="PATH",
                   help="Common Crawl WARC file (.warc.gz or .warc) or a directory of them; repeatable")
    g.add_argument("--pages", help="a directory of <key>.html / <key>.html.gz recipe pages")
    g.add_argument("--videos", help="video_candidates.jsonl: {dish_id, query, rank, video_id, title} per line")
    g.add_argument("--transcripts", help="transcripts of the candidates: raw_caption.json or a WhisperX directory")
    g.add_argument("--youcook2", help="youcookii_annotations_trainval.json (trains the chat/content classifier)")
    g.add_argument("--youcook2-transcripts", dest="youcook2_transcripts",
                   help="transcripts of the YouCook2 videos: raw_caption.json or a WhisperX directory")
    g.add_argument("--chat-model", dest="chat_model", help="a trained chat/content classifier (model.json)")


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {k: getattr(args, k) for k in
                           ("pages", "videos", "transcripts", "youcook2", "youcook2_transcripts", "chat_model")
                           if getattr(args, k, None)}
    if getattr(args, "warc", None):
        out["warc"] = list(args.warc)
    return out


def check_config(cfg: Any) -> None:
    """The config's models resolve, before any work: ``ConfigError`` (exit 2) naming the key."""
    check_model_config(cfg)
