"""The howtostep view: per video a timeline of its narrations, its LLM steps' Stage-1 and Stage-2 windows, MPTVA's
pathway scores when present, and the steps that were dropped, with their reason.

Li et al., "Multi-Sentence Grounding for Long-term Instructional Video", ECCV 2024, §3.2 (Stage 1: step -> narration
-> time with threshold epsilon1; Stage 2: the NaSVA labeler's windows with epsilon2); Chen et al., "Learning to
Localize Actions in Instructional Videos with LLM-Based Multi-Pathway Text-Video Alignment", ECCV 2024, §3.2 (the
S-N-V, S-V-long and S-V-short pathways).
"""

from __future__ import annotations

from typing import Any

from ._release import Release
from .common import clip_text, num

__all__ = ["collect"]

#: narrations and dropped steps embedded per video at most (the page stays small whatever a transcript's length)
MAX_NARRATIONS = 400
MAX_DROPPED = 200
PATHWAYS = ["S-N-V", "S-V-long", "S-V-short"]
_PROVENANCE_KEYS = ("labeler", "llm", "prompt_id", "visual_features", "anchor", "epsilon1", "epsilon2", "delta_sec",
                    "rounds", "transcript_source", "asr_model")


def _matched_narrations(steps: list[dict[str, Any]], narrations: list[dict[str, Any]]) -> list[int | None]:
    """For each step, the narration that Stage 1 matched it to, read from the release: the one overlapping the
    Stage-1 window most (Stage 1 places a step at its most similar narrations' times, Li et al. §3.2), else the final
    window; ties and no overlap go to the nearest centre, then to the first narration. ``None`` for a step without a
    window or a video without narrations. One (steps x narrations) array per video, not a scan per step."""
    windows = []
    for step in steps:
        lo, hi = step.get("stage1_start"), step.get("stage1_end")
        if lo is None or hi is None:
            lo, hi = step.get("start"), step.get("end")
        windows.append(None if lo is None or hi is None else (float(lo), float(hi)))
    have = [i for i, w in enumerate(windows) if w is not None]
    out: list[int | None] = [None] * len(steps)
    if not have or not narrations:
        return out
    import numpy as np

    starts = np.array([float(n.get("start") or 0.0) for n in narrations])
    ends = np.array([float(n.get("end") or 0.0) for n in narrations])
    lo = np.array([windows[i][0] for i in have])[:, None]
    hi = np.array([windows[i][1] for i in have])[:, None]
    overlap = np.maximum(0.0, np.minimum(hi, ends) - np.maximum(lo, starts))
    distance = np.abs((starts + ends) / 2 - (lo + hi) / 2)
    distance = np.where(overlap == overlap.max(axis=1, keepdims=True), distance, np.inf)
    for i, j in zip(have, distance.argmin(axis=1).tolist()):
        out[i] = narrations[j].get("index")
    return out


def collect(rel: Release, n: int, seed: int) -> dict[str, Any]:
    """The sampled videos of the ``steps`` config with their narrations and dropped steps."""
    cols = [c for c in ("task_id", "task_name", "category_1", "duration", "num_raw_steps", "steps", "provenance")
            if c in rel.columns("steps")]
    rows = rel.sample(["steps"], "video_id", cols, n, seed)
    ids = [r["video_id"] for r in rows]
    narr = rel.lookup("narrations", "video_id", ids, ["narrations", "language", "transcript_source"]) \
        if rel.has("narrations") else {}
    dropped = rel.lookup("dropped_steps", "video_id", ids, ["step_index", "chunk_index", "text", "stage", "reason",
                                                             "score"], limit_per_id=MAX_DROPPED) \
        if rel.has("dropped_steps") else {}
    items = []
    for r in rows:
        vid = r["video_id"]
        nrow = (narr.get(vid) or [{}])[0]
        narrations = [{"i": x.get("index"), "t": clip_text(x.get("text")), "s": num(x.get("start")),
                       "e": num(x.get("end"))} for x in (nrow.get("narrations") or [])[:MAX_NARRATIONS]]
        raw_narr = (nrow.get("narrations") or [])[:MAX_NARRATIONS]
        steps = []
        matched = _matched_narrations(r.get("steps") or [], raw_narr)
        for s, m in zip(r.get("steps") or [], matched):
            steps.append({
                "i": s.get("step_index"), "c": s.get("chunk_index"), "t": clip_text(s.get("text")),
                "s": num(s.get("start")), "e": num(s.get("end")), "sc": num(s.get("score")),
                "s1s": num(s.get("stage1_start")), "s1e": num(s.get("stage1_end")), "s1sc": num(s.get("stage1_score")),
                "pw": [num(p) for p in (s.get("pathway_scores") or [])],
                "m": m,
            })
        drops = [{"i": d.get("step_index"), "c": d.get("chunk_index"), "t": clip_text(d.get("text")),
                  "st": d.get("stage"), "r": d.get("reason"), "sc": num(d.get("score"))}
                 for d in dropped.get(vid, [])]
        prov = r.get("provenance") or {}
        ends = [x["e"] for x in narrations if x["e"] is not None] + [x["e"] for x in steps if x["e"] is not None]
        duration = num(r.get("duration")) or (max(ends) if ends else 0.0)
        items.append({
            "id": vid, "split": r["_split"], "task": r.get("task_name") or "", "task_id": r.get("task_id") or "",
            "category": r.get("category_1") or "", "duration": duration, "num_raw_steps": r.get("num_raw_steps"),
            "language": nrow.get("language"), "transcript_source": nrow.get("transcript_source"),
            "narrations": narrations, "narrations_total": len(nrow.get("narrations") or []),
            "steps": steps, "dropped": drops,
            "provenance": {k: num(v) if isinstance(v, float) else v for k in _PROVENANCE_KEYS
                           if (v := prov.get(k)) is not None},
        })
    return {"items": items, "pathways": PATHWAYS, "main_config": "steps", "unit": "video"}
