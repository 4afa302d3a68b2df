"""The marc view: a recipe pair side by side (text or video recipe on each side) with its HMM+IBM1 alignment drawn as
links from each source instruction to its most probable target, in both directions.

Lin et al., "A Recipe for Creating Multimodal Aligned Datasets for Sequential Tasks", ACL 2020, §3.1 (pairwise
alignment of two recipes' instructions with an HMM whose emissions are IBM Model 1 translation probabilities).
"""

from __future__ import annotations

from typing import Any

from ._release import Release
from .common import clip_text, num

__all__ = ["PAIR_CONFIGS", "collect"]

PAIR_CONFIGS = ("pairwise_text_text", "pairwise_text_video", "pairwise_video_video")
MAX_STEPS = 150
_PAIR_COLUMNS = ("dish_id", "recipe_a", "recipe_b", "a_instructions", "b_instructions", "a_start", "a_end", "b_start",
                 "b_end", "ingredient_match", "a_to_b", "b_to_a", "model_a_to_b", "model_b_to_a")


def _align(entries: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """One link per source instruction: target index (``-1``/null: aligned to nothing), posterior, top-3."""
    out = []
    for e in (entries or [])[:MAX_STEPS]:
        out.append({"t": e.get("target_index"), "p": num(e.get("probability")),
                    "top": [[i, num(p)] for i, p in zip(e.get("top_indices") or [], e.get("top_probabilities") or [])]})
    return out


def _side(instructions: list[Any] | None, starts: list[Any] | None, ends: list[Any] | None) -> list[dict[str, Any]]:
    starts, ends = starts or [], ends or []
    return [{"t": clip_text(t, 800), "s": num(starts[i]) if i < len(starts) else None,
             "e": num(ends[i]) if i < len(ends) else None} for i, t in enumerate((instructions or [])[:MAX_STEPS])]


def collect(rel: Release, n: int, seed: int) -> dict[str, Any]:
    """The sampled pairs of the three ``pairwise_*`` configs, with their recipes' titles and dishes."""
    configs = [c for c in PAIR_CONFIGS if rel.has(c)]
    cols = [c for c in _PAIR_COLUMNS if configs and c in rel.columns(configs[0])]
    rows = rel.sample(configs, "pair_id", cols, n, seed)
    rids = {r.get(k) for r in rows for k in ("recipe_a", "recipe_b")} - {None}
    recipes = rel.lookup("recipes", "recipe_id", rids, ["title", "dish_name", "url", "modality"]) \
        if rel.has("recipes") else {}

    def meta(rid: Any) -> dict[str, Any]:
        rec = (recipes.get(rid) or [{}])[0]
        modality = rec.get("modality")
        kind = ["text", "video"][modality] if isinstance(modality, int) and modality in (0, 1) else (
            "video" if str(rid).startswith("v:") else "text")
        return {"id": rid, "title": clip_text(rec.get("title"), 300), "url": clip_text(rec.get("url"), 300),
                "kind": kind}

    items = []
    for r in rows:
        ra = meta(r.get("recipe_a"))
        dish = (recipes.get(r.get("recipe_a")) or [{}])[0].get("dish_name") or r.get("dish_id") or ""
        items.append({
            "id": r["pair_id"], "split": r["_split"], "config": r["_config"], "task": dish,
            "dish_id": r.get("dish_id"), "ingredient_match": num(r.get("ingredient_match")),
            "a": ra, "b": meta(r.get("recipe_b")),
            "a_steps": _side(r.get("a_instructions"), r.get("a_start"), r.get("a_end")),
            "b_steps": _side(r.get("b_instructions"), r.get("b_start"), r.get("b_end")),
            "a_to_b": _align(r.get("a_to_b")), "b_to_a": _align(r.get("b_to_a")),
            "model": r.get("model_a_to_b") or "",
        })
    return {"items": items, "main_config": ",".join(configs), "unit": "pair"}
