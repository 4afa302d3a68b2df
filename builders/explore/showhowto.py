"""The showhowto view: per sequence the keyframes in step order with the step text under each, the task and the
LLM filter's answer. Thumbnails come from the ``images`` config, else from frames cut from the build's media (the
video files the build's manifest names, or a ``media`` folder given here), else a placeholder that says why.

Souček et al., "ShowHowTo: Generating Scene-Conditioned Step-by-Step Visual Instructions", CVPR 2025, §3 (the LLM
filter of instructional videos, key steps with timestamps, one keyframe per step on the 5-fps grid).
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

from ._release import Release
from .common import clip_text, num, thumbnail_data_uri

__all__ = ["IMAGE_BUDGET", "collect"]

#: bytes of embedded thumbnails at most (the page stays a few MB); later sequences get a placeholder
IMAGE_BUDGET = 2_500_000
#: seconds spent cutting frames from media at most (decoding is the slow part of a showhowto explorer)
MEDIA_SECONDS = 20.0
MAX_STEPS = 40
_GRID_FPS = 5


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


def _media_paths(rel: Release, media: str | Path | None, wanted: set[str]) -> dict[str, Path]:
    """``video_id -> file`` for the wanted videos: from ``media`` (``<vid>.<mp4|webm|mkv>`` under it), else the
    video manifest recorded in the build's ``manifest.json`` when its files still exist on this machine."""
    found: dict[str, Path] = {}
    try:
        from ..models.media import find_media

        if media is not None:
            found = {v: p for v, p in find_media(media).items() if v in wanted}
        else:
            from ..sources.video_manifest import read_manifest

            for path in _manifest_inputs(rel):
                for row in read_manifest(path):
                    if isinstance(row, dict) and row["video_id"] in wanted and Path(row["video_path"]).is_file():
                        found.setdefault(row["video_id"], Path(row["video_path"]))
    except Exception:  # noqa: BLE001 - media are optional: no frames means placeholders, never a failed page
        return found
    return found


def _manifest_inputs(rel: Release) -> list[Path]:
    """The video manifest the build read (``config.manifest``; the ``manifest.json`` records it by name), found on
    this machine: as written (absolute, or relative to the current directory), or in the bundled sample's folder
    when the release is the sample's (``"sample": true``)."""
    man = rel.json("manifest.json")
    name = (man.get("config") or {}).get("manifest")
    if not isinstance(name, str) or not name:
        return []
    tries = [Path(name)]
    if man.get("sample"):
        tries.append(Path(__file__).resolve().parents[1] / "samples" / "showhowto" / Path(name).name)
    return [p for p in tries if p.is_file()][:1]


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


def collect(rel: Release, n: int, seed: int, media: str | Path | None = None) -> dict[str, Any]:
    """The sampled sequences of the ``sequences`` config with their keyframe thumbnails."""
    cols = [c for c in ("video_id", "task", "task_id", "category_1", "title", "wikihow_title", "duration",
                        "num_steps", "mean_score", "aligner", "steps") if c in rel.columns("sequences")]
    rows = rel.sample(["sequences"], "sequence_id", cols, n, seed)
    ids = [r["sequence_id"] for r in rows]
    images: dict[Any, list[dict[str, Any]]] = {}
    if rel.has("images"):
        images = rel.lookup("images", "sequence_id", ids, ["images"])
    todo = {r["video_id"] for r in rows if not images.get(r["sequence_id"])}
    paths = _media_paths(rel, media, todo) if todo else {}
    deadline = time.monotonic() + MEDIA_SECONDS
    budget = IMAGE_BUDGET
    items = []
    for r in rows:
        steps = (r.get("steps") or [])[:MAX_STEPS]
        thumbs: list[str | None] = [None] * len(steps)
        source, why = "none", "no images: the build ran without --with-images and its media are not on this machine"
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
