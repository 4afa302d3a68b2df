"""The showhowto view: per sequence the keyframes in step order with the step text under each, the task and the
LLM filter's answer. Thumbnails come from the ``images`` config, else from frames cut from the build's media (the
video files the build's video manifest names, or a ``media`` folder given here), else a placeholder that says why.

The video manifest is found, first that is a file: the build's own resolved path (``inputs``, what the release flow
hands over while it writes the page); the path the release records in ``config.manifest`` (relative to the inputs'
common folder) under ``inputs_root`` (``--inputs DIR``), under the folder ``manifest.json`` names in
``inputs_root`` (relative to the release folder), under the current directory; for the bundled sample, its folder.
A recorded path that is absolute or climbs out of its folder (``..``) is not followed.

Souček et al., "ShowHowTo: Generating Scene-Conditioned Step-by-Step Visual Instructions", CVPR 2025, §3 (the LLM
filter of instructional videos, key steps with timestamps, one keyframe per step on the 5-fps grid).
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ._release import Release
from .common import clip_text, num, path_within, thumbnail_data_uri

__all__ = ["IMAGE_BUDGET", "collect"]

#: bytes of embedded thumbnails at most (the page stays a few MB); later sequences get a placeholder
IMAGE_BUDGET = 2_500_000
#: seconds spent cutting frames from media at most (decoding is the slow part of a showhowto explorer)
MEDIA_SECONDS = 20.0
MAX_STEPS = 40
_GRID_FPS = 5
_DRIVE = re.compile(r"^[A-Za-z]:")


def _filter_answer(rel: Release) -> dict[str, Any]:
    """What the LLM filter said about the kept sequences, from the build's config and statistics (the release keeps
    no per-sequence answer): with ``filter_mode=apply`` every kept video answered Yes (or Ambiguous when accepted)."""
    cfg = rel.json("manifest.json").get("config") or {}
    stats = rel.json("stats.json")
    filt = _find(stats, "filter", "judged") or {}
    mode = cfg.get("filter_mode")
    if mode == "record":
        text = "recorded, not applied (filter_mode=record): the release keeps no per-video answer"
    elif mode == "apply":
        text = "Yes" + (" or Ambiguous (on_ambiguous=accept)" if cfg.get("on_ambiguous") == "accept" else "")
    else:
        text = "unknown (no build config in this folder)"
    counts = {k: filt[k] for k in ("judged", "yes", "no", "ambiguous", "kept_despite_no") if filt.get(k) is not None}
    return {"text": text, "mode": mode, "counts": counts}


def _find(d: Any, key: str, inner: str, depth: int = 3) -> dict[str, Any] | None:
    """The first dict under ``key`` that has ``inner``, searched ``depth`` levels into ``d`` (the build's statistics
    nest the corpus's own numbers, e.g. ``{"showhowto": {"filter": {"judged": ...}}}``)."""
    if not isinstance(d, dict) or depth < 0:
        return None
    if isinstance(d.get(key), dict) and inner in d[key]:
        return d[key]
    for v in d.values():
        if (got := _find(v, key, inner, depth - 1)) is not None:
            return got
    return None


def _media_paths(rel: Release, media: str | Path | None, wanted: set[str],
                 inputs: Mapping[str, Sequence[str | os.PathLike[str]]] | None = None,
                 inputs_root: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """``video_id -> file`` for the wanted videos: from ``media`` (``<vid>.<mp4|webm|mkv>`` under it), else from the
    build's video manifest (``_manifest_inputs``) for the files that still exist on this machine."""
    found: dict[str, Path] = {}
    try:
        from ..models.media import find_media

        if media is not None:
            found = {v: p for v, p in find_media(media).items() if v in wanted}
        else:
            from ..sources.video_manifest import read_manifest

            for path in _manifest_inputs(rel, inputs, inputs_root):
                for row in read_manifest(path):
                    if isinstance(row, dict) and row["video_id"] in wanted and Path(row["video_path"]).is_file():
                        found.setdefault(row["video_id"], Path(row["video_path"]))
    except Exception:  # noqa: BLE001 - media are optional: no frames means placeholders, never a failed page
        return found
    return found


def _manifest_inputs(rel: Release, inputs: Mapping[str, Sequence[str | os.PathLike[str]]] | None = None,
                     inputs_root: str | os.PathLike[str] | None = None) -> list[Path]:
    """The video manifest the build read, found on this machine (the first of the module's list that is a file), or
    ``[]``."""
    tries: list[Path] = [Path(p) for p in (inputs or {}).get("manifest") or []]
    man = rel.json("manifest.json")
    name = (man.get("config") or {}).get("manifest")
    if isinstance(name, str) and name:
        roots: list[Path] = [Path(inputs_root)] if inputs_root is not None else []
        recorded = man.get("inputs_root")
        if isinstance(recorded, str) and recorded and _DRIVE.match(recorded) is None \
                and not PurePosixPath(recorded).is_absolute() and "\\" not in recorded and "\x00" not in recorded:
            roots.append(rel.root / recorded)  # relative to the release folder: it may climb (``../inputs``)
        roots.append(Path.cwd())
        tries += [p for p in (path_within(r, name) for r in roots) if p is not None]
        if man.get("sample"):
            tries.append(Path(__file__).resolve().parents[1] / "samples" / "showhowto" / PurePosixPath(name).name)
    for p in tries:
        try:
            if p.is_file():
                return [p]
        except OSError:  # a name too long, a folder without permission: not this one
            continue
    return []


def _cut_frames(path: Path, times: list[float | None], deadline: float) -> list[str | None]:
    """Thumbnails of the grid frames at ``times`` (the keyframes' ``frame_time``) cut from one video file."""
    import numpy as np

    from ..models import media

    wanted = {round(t * _GRID_FPS): i for i, t in enumerate(times) if t is not None}
    got: dict[int, str | None] = {}
    if not wanted:
        return [None] * len(times)
    try:
        from PIL import Image

        for g, frame in media.iter_grid_frames(path, fps=_GRID_FPS, wanted=wanted.__contains__):
            if frame is not None:
                buf = io.BytesIO()
                Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB").save(buf, format="PNG")
                got[g] = thumbnail_data_uri(buf.getvalue())
            if len(got) == len(wanted) or time.monotonic() > deadline or g > max(wanted):
                break
    except Exception:  # noqa: BLE001 - an unreadable file gives placeholders
        pass
    return [got.get(round(t * _GRID_FPS)) if t is not None else None for t in times]


def collect(rel: Release, n: int, seed: int, media: str | Path | None = None,
            inputs: Mapping[str, Sequence[str | os.PathLike[str]]] | None = None,
            inputs_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The sampled sequences of the ``sequences`` config with their keyframe thumbnails (``media``, ``inputs`` and
    ``inputs_root``: where the video files are, see the module)."""
    cols = [c for c in ("video_id", "task", "task_id", "category_1", "title", "wikihow_title", "duration",
                        "num_steps", "mean_score", "aligner", "steps") if c in rel.columns("sequences")]
    rows = rel.sample(["sequences"], "sequence_id", cols, n, seed)
    ids = [r["sequence_id"] for r in rows]
    images: dict[Any, list[dict[str, Any]]] = {}
    if rel.has("images"):
        images = rel.lookup("images", "sequence_id", ids, ["images"])
    todo = {r["video_id"] for r in rows if not images.get(r["sequence_id"])}
    paths = _media_paths(rel, media, todo, inputs, inputs_root) if todo else {}
    deadline = time.monotonic() + MEDIA_SECONDS
    budget = IMAGE_BUDGET
    items = []
    for r in rows:
        steps = (r.get("steps") or [])[:MAX_STEPS]
        thumbs: list[str | None] = [None] * len(steps)
        source, why = "none", ("no images: the build ran without --with-images and its video files were not found "
                               "on this machine (python -m builders.explore <release> --inputs DIR or --media DIR)")
        imgs = ((images.get(r["sequence_id"]) or [{}])[0].get("images") or [])
        if budget <= 0:
            why = "thumbnails omitted: this page's image budget is spent (it embeds a few MB at most)"
        elif imgs:
            source = "images config"
            thumbs = [thumbnail_data_uri(im.get("bytes")) if isinstance(im, dict) and im.get("bytes") else None
                      for im in imgs[:len(steps)]] + [None] * max(0, len(steps) - len(imgs))
            why = "image not readable"
        elif r.get("video_id") in paths:
            if time.monotonic() < deadline:
                source = "frames cut from the media"
                thumbs = _cut_frames(paths[r["video_id"]], [s.get("frame_time") for s in steps], deadline)
                why = "frame not decodable"
            else:
                why = "thumbnails omitted: the time for cutting frames from the media is spent"
        if budget <= 0:
            thumbs = [None] * len(steps)
        budget -= sum(len(t) for t in thumbs if t)
        items.append({
            "id": r["sequence_id"], "split": r["_split"], "video_id": r.get("video_id"),
            "task": r.get("task") or "", "task_id": r.get("task_id"), "category": r.get("category_1") or "",
            "title": clip_text(r.get("title"), 400), "wikihow_title": clip_text(r.get("wikihow_title"), 400),
            "duration": num(r.get("duration")), "mean_score": num(r.get("mean_score")), "aligner": r.get("aligner"),
            "image_source": source, "placeholder": why,
            "steps": [{"t": clip_text(s.get("instruction"), 600), "s": num(s.get("start")), "e": num(s.get("end")),
                       "ft": num(s.get("frame_time")), "sc": num(s.get("score")), "img": thumbs[k]}
                      for k, s in enumerate(steps)],
        })
    return {"items": items, "filter": _filter_answer(rel), "main_config": "sequences", "unit": "sequence"}
