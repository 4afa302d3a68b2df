"""The sieve_swap view: per video its cleaned ASR segments in order, the RecipeNLG step swapped in beside each kept
(possibly merged) segment with its similarity, the discarded segments greyed, and the recipe the video matched.

Batra et al., "Efficient Pre-training for Localized Instruction Generation of Procedural Videos", ECCV 2024, §3
(Sieve: title and content sieves against RecipeNLG by token IoU; Swap: each ASR segment is replaced by its most
similar recipe step when the cosine passes the threshold, adjacent kept segments merged).
"""

from __future__ import annotations

from typing import Any

from ._release import Release
from .common import clip_text, num

__all__ = ["collect", "assign_raw_segments"]

MAX_SEGMENTS = 600
MAX_DIRECTIONS = 60


def assign_raw_segments(kept: list[dict[str, Any]], raw: list[dict[str, Any]]) -> list[int | None]:
    """For each raw ASR segment, the index of the kept segment it went into (its midpoint lies in the kept segment's
    window, which spans every segment merged into it), else ``None``: discarded by the similarity threshold."""
    out: list[int | None] = []
    for r in raw:
        s, e = r.get("start"), r.get("end")
        if s is None or e is None:
            out.append(None)
            continue
        mid = (s + e) / 2
        hit = None
        for k, seg in enumerate(kept):
            lo, hi = seg.get("start"), seg.get("end")
            if lo is not None and hi is not None and lo - 1e-3 <= mid <= hi + 1e-3:
                hit = k
                break
        out.append(hit)
    return out


def collect(rel: Release, n: int, seed: int) -> dict[str, Any]:
    """The sampled videos of the ``default`` config with their raw ASR segments and their best recipe."""
    cols = [c for c in ("title", "task_id", "task_name", "category_2", "duration", "recipe_ids", "recipe_token_iou",
                        "recipe_token_recall", "max_token_iou", "num_asr_segments", "segments", "provenance")
            if c in rel.columns("default")]
    rows = rel.sample(["default"], "video_id", cols, n, seed)
    ids = [r["video_id"] for r in rows]
    raw = rel.lookup("raw_asr", "video_id", ids, ["segments"]) if rel.has("raw_asr") else {}
    best = {r["video_id"]: (r.get("recipe_ids") or [None])[0] for r in rows}
    recipes: dict[Any, list[dict[str, Any]]] = {}
    if rel.has("recipes"):
        recipes = rel.lookup("recipes", "recipe_id", [b for b in best.values() if b is not None],
                             ["title", "directions", "ingredients", "link"])
    items = []
    for r in rows:
        vid = r["video_id"]
        kept = r.get("segments") or []
        raw_segs = ((raw.get(vid) or [{}])[0].get("segments") or [])[:MAX_SEGMENTS]
        where = assign_raw_segments(kept, raw_segs)
        rec_row = (recipes.get(best[vid]) or [None])[0] if best[vid] is not None else None
        prov = r.get("provenance") or {}
        items.append({
            "id": vid, "split": r["_split"], "title": clip_text(r.get("title")), "task": r.get("task_name") or "",
            "task_id": r.get("task_id"), "category": r.get("category_2") or "", "duration": num(r.get("duration")),
            "threshold": num(prov.get("sim_threshold")), "model": prov.get("embedding_model"),
            "kept": [{"s": num(k.get("start")), "e": num(k.get("end")), "t": clip_text(k.get("text")),
                      "asr": clip_text(k.get("asr_text")), "sim": num(k.get("similarity")),
                      "rid": k.get("recipe_id"), "si": k.get("step_index"), "m": k.get("num_merged"),
                      "cand": [{"t": clip_text(c.get("text"), 400), "rid": c.get("recipe_id"),
                                "si": c.get("step_index"), "sim": num(c.get("similarity"))}
                               for c in (k.get("candidates") or [])[:5]]}
                     for k in kept],
            "raw": [{"s": num(x.get("start")), "e": num(x.get("end")), "t": clip_text(x.get("text")), "k": w}
                    for x, w in zip(raw_segs, where)],
            "raw_total": len((raw.get(vid) or [{}])[0].get("segments") or []),
            "recipes": [{"rid": rid, "iou": num(iou), "recall": num(rc)} for rid, iou, rc in
                        zip(r.get("recipe_ids") or [], r.get("recipe_token_iou") or [],
                            r.get("recipe_token_recall") or [])],
            "recipe": None if rec_row is None else {
                "rid": best[vid], "title": clip_text(rec_row.get("title")), "link": clip_text(rec_row.get("link"), 300),
                "directions": [clip_text(d, 600) for d in (rec_row.get("directions") or [])[:MAX_DIRECTIONS]],
                "ingredients": [clip_text(d, 200) for d in (rec_row.get("ingredients") or [])[:MAX_DIRECTIONS]]},
        })
    return {"items": items, "main_config": "default", "unit": "video"}
