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
from .common import MAX_TEXT, clip_text, num
from .reuse import Encoded, ItemReuse

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
    return _match(steps, [n.get("start") for n in narrations], [n.get("end") for n in narrations],
                  [n.get("index") for n in narrations])


def _match(steps: list[dict[str, Any]], starts: list[Any], ends: list[Any], indices: list[Any]) -> list[int | None]:
    """``_matched_narrations`` of narrations given as their start, end and index columns."""
    windows = []
    for step in steps:
        lo, hi = step.get("stage1_start"), step.get("stage1_end")
        if lo is None or hi is None:
            lo, hi = step.get("start"), step.get("end")
        windows.append(None if lo is None or hi is None else (float(lo), float(hi)))
    have = [i for i, w in enumerate(windows) if w is not None]
    out: list[int | None] = [None] * len(steps)
    if not have or not indices:
        return out
    import numpy as np

    n_starts = np.array([float(v or 0.0) for v in starts])
    n_ends = np.array([float(v or 0.0) for v in ends])
    lo = np.array([windows[i][0] for i in have])[:, None]
    hi = np.array([windows[i][1] for i in have])[:, None]
    overlap = np.maximum(0.0, np.minimum(hi, n_ends) - np.maximum(lo, n_starts))
    distance = np.abs((n_starts + n_ends) / 2 - (lo + hi) / 2)
    distance = np.where(overlap == overlap.max(axis=1, keepdims=True), distance, np.inf)
    for i, j in zip(have, distance.argmin(axis=1).tolist()):
        out[i] = indices[j]
    return out


_NARRATION_FIELDS = ("index", "text", "start", "end")


def _narrations(rel: Release, ids: list[Any]) -> dict[Any, dict[str, Any]]:
    """The first ``narrations`` row of each id, as ``{"language", "transcript_source", "total", "index", "start",
    "end", "shown"}``: the columns of its first ``MAX_NARRATIONS`` narrations and those narrations as the page shows
    them. The nested values are converted and formatted column by column, in bulk (a row's narrations are the bulk
    of what the page embeds)."""
    if not rel.has("narrations"):
        return {}
    table = rel.lookup_table("narrations", "video_id", ids, ["narrations", "language", "transcript_source"])
    if table is None:
        return {}
    import pyarrow.compute as pc

    def column(name: str) -> list[Any]:
        return table[name].to_pylist() if name in table.column_names else [None] * table.num_rows

    lists = table["narrations"].combine_chunks()
    lengths = [n or 0 for n in pc.list_value_length(lists).to_pylist()]
    offsets, rows, kept = 0, {}, []
    for k, (vid, n) in enumerate(zip(column("video_id"), lengths)):
        if vid not in rows:
            rows[vid] = (k, n)
            kept.append((offsets, min(n, MAX_NARRATIONS)))
        offsets += n
    values = lists.flatten()
    if sum(n for _, n in kept) < len(values):  # only the narrations shown
        import pyarrow as pa

        values = values.take(pa.array([j for start, n in kept for j in range(start, start + n)], type=pa.int64()))
    names = [values.type.field(i).name for i in range(values.type.num_fields)]
    flat = dict(zip(names, values.flatten()))
    col = {k: flat[k].to_pylist() if k in flat else [None] * len(values) for k in _NARRATION_FIELDS}
    shown = [{"i": i, "t": t if type(t) is str and len(t) <= MAX_TEXT else clip_text(t),
              "s": round(s, 3) if type(s) is float and s - s == 0.0 else num(s),
              "e": round(e, 3) if type(e) is float and e - e == 0.0 else num(e)}
             for i, t, s, e in zip(col["index"], col["text"], col["start"], col["end"])]
    language, source = column("language"), column("transcript_source")
    out: dict[Any, dict[str, Any]] = {}
    at = 0
    for vid, (k, n) in rows.items():
        m = min(n, MAX_NARRATIONS)
        out[vid] = {"language": language[k], "transcript_source": source[k], "total": n,
                    "index": col["index"][at:at + m], "start": col["start"][at:at + m], "end": col["end"][at:at + m],
                    "shown": shown[at:at + m]}
        at += m
    return out


def _rounded(values: list[Any]) -> list[Any]:
    """``num`` of each value (the finite floats inline)."""
    return [round(v, 3) if type(v) is float and v - v == 0.0 else num(v) for v in values]


def _steps_shown(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The steps of each row as the page shows them (``"m"``, the matched narration, left ``None``), formatted field
    by field over every row's steps at once."""
    every = [s for r in rows for s in (r.get("steps") or [])]

    def field(k: str) -> list[Any]:
        return [s.get(k) for s in every]

    numbers = [_rounded(field(k)) for k in ("start", "end", "score", "stage1_start", "stage1_end", "stage1_score")]
    texts = [t if type(t) is str and len(t) <= MAX_TEXT else clip_text(t) for t in field("text")]
    pathways = [_rounded(p) if p else [] for p in field("pathway_scores")]
    flat = [{"i": i, "c": c, "t": t, "s": s, "e": e, "sc": sc, "s1s": s1s, "s1e": s1e, "s1sc": s1sc, "pw": pw,
             "m": None}
            for i, c, t, s, e, sc, s1s, s1e, s1sc, pw in zip(field("step_index"), field("chunk_index"), texts,
                                                             *numbers, pathways)]
    out, at = [], 0
    for r in rows:
        k = len(r.get("steps") or [])
        out.append(flat[at:at + k])
        at += k
    return out


def collect(rel: Release, n: int, seed: int, reuse: ItemReuse | None = None) -> dict[str, Any]:
    """The sampled videos of the ``steps`` config with their narrations and dropped steps. With ``reuse``, the videos
    whose rows did not change since an earlier page come from it (``Encoded``) and only the others are read."""
    cols = [c for c in ("task_id", "task_name", "category_1", "duration", "num_raw_steps", "steps", "provenance")
            if c in rel.columns("steps")]
    picks = rel.sample_picks(["steps"], "video_id", n, seed)
    kept: dict[str, str] = {}
    if reuse is not None and len({p.id for p in picks}) == len(picks):  # an item per id (else nothing is kept)
        kept = reuse.load("howtostep", [c for c in ("steps", "narrations", "dropped_steps") if rel.has(c)], "video_id")
    rows = rel.read_picks([p for p in picks if p.id not in kept], "video_id", cols)
    ids = [r["video_id"] for r in rows]
    narr = _narrations(rel, ids)
    dropped = rel.lookup("dropped_steps", "video_id", ids, ["step_index", "chunk_index", "text", "stage", "reason",
                                                             "score"], limit_per_id=MAX_DROPPED) \
        if rel.has("dropped_steps") else {}
    none: dict[str, Any] = {"total": 0, "shown": [], **{k: [] for k in _NARRATION_FIELDS}}
    shown = iter(_steps_shown(rows))
    made = iter(rows)
    items: list[Any] = []
    for pick in picks:
        if pick.id in kept:
            items.append(Encoded(pick.id, kept[pick.id]))
            continue
        r = next(made)
        vid = r["video_id"]
        nrow = narr.get(vid) or none
        narrations = nrow["shown"]
        steps = next(shown)
        for step, m in zip(steps, _match(r.get("steps") or [], nrow["start"], nrow["end"], nrow["index"])):
            step["m"] = m
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
            "narrations": narrations, "narrations_total": nrow["total"],
            "steps": steps, "dropped": drops,
            "provenance": {k: num(v) if isinstance(v, float) else v for k in _PROVENANCE_KEYS
                           if (v := prov.get(k)) is not None},
        })
    return {"items": items, "pathways": PATHWAYS, "main_config": "steps", "unit": "video"}
