"""Merging of consecutive swapped segments that share a recipe step (Batra et al., ECCV 2024, supplementary A.2, Fig. 9).

Paper: Batra et al., ECCV 2024, supp. A.2: "we merge two consecutive segments shorter than
8 seconds only when the time gap between them is less than 4 seconds"; the "same step" condition comes from
supp. Fig. 9 (segments 7 and 8 -> step C). docs/corpora/sieve_swap.md.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["merge_segments"]


def _can_join(last: Mapping[str, Any], seg: Mapping[str, Any], discarded: list[int], max_dur_s: float,
              max_gap_s: float) -> bool:
    if (seg["recipe_id"], seg["step_index"]) != (last["recipe_id"], last["step_index"]):
        return False
    if not (last["end"] - last["start"] < max_dur_s and seg["end"] - seg["start"] < max_dur_s):
        return False
    if not seg["start"] - last["end"] < max_gap_s:
        return False
    lo, hi = sorted((int(last["asr_index"]), int(seg["asr_index"])))
    # a discarded ASR index strictly between lo and hi?
    return bisect.bisect_right(discarded, lo) == bisect.bisect_left(discarded, hi)


def _merge_group(group: list[Mapping[str, Any]]) -> dict[str, Any]:
    first = group[0]
    best = max(range(len(group)), key=lambda i: (group[i]["similarity"], -i))  # highest similarity, earliest on ties
    out = {key: value for key, value in first.items() if key != "asr_index"}
    out["start"] = first["start"]
    out["end"] = max(seg["end"] for seg in group)
    out["similarity"] = group[best]["similarity"]
    out["candidates"] = [dict(c) for c in group[best]["candidates"]]
    out["asr_text"] = " ".join(seg["asr_text"] for seg in group)
    out["num_merged"] = len(group)
    return out


def merge_segments(kept: Sequence[Mapping[str, Any]], discarded_asr_indices: Iterable[int] = (),
                   max_dur_s: float = 8.0, max_gap_s: float = 4.0) -> list[dict[str, Any]]:
    """Merge consecutive kept (swapped) segments of one video (Batra et al., ECCV 2024, supp. A.2).

    ``kept``: the segments kept by the swap, dicts with ``start, end, text, recipe_id, step_index, similarity,
    candidates, asr_text, asr_index`` (``asr_index`` = position of the segment in the video's cleaned, time-sorted
    ASR list). ``discarded_asr_indices``: the ``asr_index`` of every ASR segment that the swap discarded.

    Segments are walked in time order (by ``start``, then ``asr_index``). Segment k joins the current group iff all
    hold: (1) same top-1 step ``(recipe_id, step_index)`` as the group; (2) it and the group's last member each
    last ``< max_dur_s`` (8 s); (3) ``start_k − end_last < max_gap_s`` (4 s; overlaps give a negative gap);
    (4) no discarded ASR index lies strictly between the last member's and k's ``asr_index``. A group can thus
    chain beyond 8 s (each pair is checked, as in the paper's pairwise rule).

    Output, one dict per group, in time order: the keys of the input minus ``asr_index`` plus ``num_merged``;
    ``start`` = first start, ``end`` = latest member end (= last member's end unless a member nests inside
    another), ``similarity`` = max, ``candidates`` = a copy of those of the member with the highest similarity
    (earliest on ties), ``text``/``recipe_id``/``step_index`` = the shared top-1 step, ``asr_text`` = member ASR
    texts joined by one space, ``num_merged`` = member count (1 if unmerged). Inputs are not modified.
    """
    discarded = sorted({int(i) for i in discarded_asr_indices})
    ordered = sorted(kept, key=lambda seg: (seg["start"], seg["asr_index"]))
    groups: list[list[Mapping[str, Any]]] = []
    for seg in ordered:
        if groups and _can_join(groups[-1][-1], seg, discarded, max_dur_s, max_gap_s):
            groups[-1].append(seg)
        else:
            groups.append([seg])
    return [_merge_group(group) for group in groups]
