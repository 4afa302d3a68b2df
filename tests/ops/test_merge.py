"""builders.ops.merge: the supp. A.2 merge rule of paper 004 (spec §3.6), one test per condition."""

import copy

import pytest

from builders.ops.merge import merge_segments


def seg(i, start, end, rid=7, step=0, sim=0.8, cands=None):
    """A kept segment with asr_index ``i``; its candidates record ``i`` so tests can tell whose they are."""
    return {
        "start": start, "end": end, "text": f"step {rid}/{step}", "recipe_id": rid, "step_index": step,
        "similarity": sim,
        "candidates": cands if cands is not None else [
            {"text": f"step {rid}/{step}", "recipe_id": rid, "step_index": step, "similarity": sim, "from": i}],
        "asr_text": f"asr{i}", "asr_index": i,
    }


def test_two_segments_merge():
    a, b = seg(0, 0.0, 5.0, sim=0.8), seg(1, 6.0, 10.0, sim=0.9)
    # same step; durations 5 and 4 < 8; gap 6 - 5 = 1 < 4; no discarded index between 0 and 1
    (m,) = merge_segments([a, b])
    assert m["start"] == 0.0 and m["end"] == 10.0
    assert m["similarity"] == 0.9 and m["candidates"][0]["from"] == 1  # candidates of the max-similarity member
    assert m["text"] == "step 7/0" and m["recipe_id"] == 7 and m["step_index"] == 0
    assert m["asr_text"] == "asr0 asr1" and m["num_merged"] == 2
    assert "asr_index" not in m
    assert set(m) == {"start", "end", "text", "recipe_id", "step_index", "similarity", "candidates", "asr_text",
                      "num_merged"}


def test_unmerged_segment_has_num_merged_1():
    (m,) = merge_segments([seg(3, 1.0, 2.0)])
    assert m["num_merged"] == 1 and m["asr_text"] == "asr3" and "asr_index" not in m


def test_condition_same_step():
    out = merge_segments([seg(0, 0.0, 5.0, step=0), seg(1, 6.0, 10.0, step=1)])
    assert [m["num_merged"] for m in out] == [1, 1]
    # same step index but another recipe is another step
    out = merge_segments([seg(0, 0.0, 5.0, rid=1), seg(1, 6.0, 10.0, rid=2)])
    assert [m["num_merged"] for m in out] == [1, 1]


def test_condition_new_segment_duration():
    # b lasts 14 - 6 = 8.0 s: not < 8 -> no merge
    assert len(merge_segments([seg(0, 0.0, 5.0), seg(1, 6.0, 14.0)])) == 2
    # 7.99 s -> merge
    assert len(merge_segments([seg(0, 0.0, 5.0), seg(1, 6.0, 13.99)])) == 1


def test_condition_last_member_duration():
    # a lasts exactly 8.0 s -> no merge, even though b is short and the gap is 1 s
    assert len(merge_segments([seg(0, 0.0, 8.0), seg(1, 9.0, 12.0)])) == 2
    # with max_dur_s = 10 the same pair merges (8 < 10, 3 < 10)
    assert len(merge_segments([seg(0, 0.0, 8.0), seg(1, 9.0, 12.0)], max_dur_s=10.0)) == 1


def test_condition_gap():
    # gap = 9.0 - 5.0 = 4.0: not < 4 -> no merge
    assert len(merge_segments([seg(0, 0.0, 5.0), seg(1, 9.0, 12.0)])) == 2
    # gap = 8.99 - 5.0 = 3.99 -> merge
    assert len(merge_segments([seg(0, 0.0, 5.0), seg(1, 8.99, 12.0)])) == 1
    # overlapping captions: gap = 4.0 - 5.0 = -1 -> merge, end = 7.0
    (m,) = merge_segments([seg(0, 0.0, 5.0), seg(1, 4.0, 7.0)])
    assert m["start"] == 0.0 and m["end"] == 7.0
    # larger max_gap_s
    assert len(merge_segments([seg(0, 0.0, 5.0), seg(1, 9.0, 12.0)], max_gap_s=4.5)) == 1


def test_condition_discarded_asr_segment_between():
    a, b = seg(0, 0.0, 3.0), seg(2, 4.0, 6.0)
    # ASR segment 1 (between 0 and 2) was discarded by the swap -> no merge
    assert len(merge_segments([a, b], discarded_asr_indices=[1])) == 2
    # discarded segments outside (0, 2) do not block
    assert len(merge_segments([a, b], discarded_asr_indices=[3, 5])) == 1
    # nothing discarded (the missing index 1 is simply not given) -> merge
    assert len(merge_segments([a, b])) == 1


def test_chain_of_three_can_exceed_8_seconds():
    segs = [seg(0, 0.0, 5.0, sim=0.80), seg(1, 5.5, 10.0, sim=0.95), seg(2, 11.0, 15.0, sim=0.85)]
    # pairs (0,1): 5, 4.5 < 8, gap .5; (1,2): 4.5, 4 < 8, gap 1 -> one group spanning 15 s
    (m,) = merge_segments(segs)
    assert (m["start"], m["end"], m["num_merged"]) == (0.0, 15.0, 3)
    assert m["similarity"] == 0.95 and m["candidates"][0]["from"] == 1
    assert m["asr_text"] == "asr0 asr1 asr2"


def test_gap_and_duration_are_checked_against_the_last_member():
    # group {0,1}; seg 2 is 12 s after seg 0 ends but 1 s after seg 1 ends -> joins
    segs = [seg(0, 0.0, 2.0), seg(1, 5.0, 12.0), seg(2, 13.0, 15.0)]
    assert [m["num_merged"] for m in merge_segments(segs)] == [3]
    # last member lasts 8 s -> seg 2 starts a new group although seg 0 was short
    segs = [seg(0, 0.0, 2.0), seg(1, 5.0, 13.0), seg(2, 14.0, 15.0)]
    assert [m["num_merged"] for m in merge_segments(segs)] == [1, 1, 1]  # (0,1): seg 1 lasts 8.0 too


def test_candidates_tie_goes_to_earliest_member():
    segs = [seg(0, 0.0, 2.0, sim=0.8), seg(1, 3.0, 5.0, sim=0.9), seg(2, 6.0, 7.0, sim=0.9)]
    (m,) = merge_segments(segs)
    assert m["similarity"] == 0.9 and m["candidates"][0]["from"] == 1


def test_groups_break_and_restart_in_time_order():
    a1, b, a2, a3 = seg(0, 0.0, 2.0), seg(1, 2.5, 4.0, step=1), seg(2, 4.5, 6.0), seg(3, 6.5, 7.0)
    out = merge_segments([a3, b, a2, a1])  # unordered input: walked by start time
    assert [(m["step_index"], m["num_merged"], m["start"]) for m in out] == [(0, 1, 0.0), (1, 1, 2.5), (0, 2, 4.5)]


def test_empty_and_inputs_not_modified():
    assert merge_segments([]) == []
    segs = [seg(0, 0.0, 5.0), seg(1, 6.0, 10.0)]
    before = copy.deepcopy(segs)
    out = merge_segments(segs, discarded_asr_indices=iter([]))
    assert segs == before
    out[0]["candidates"][0]["similarity"] = -1  # output does not alias input candidates
    assert segs == before


@pytest.mark.parametrize("discarded", [[1], (1,), {1}])
def test_discarded_accepts_any_iterable(discarded):
    assert len(merge_segments([seg(0, 0.0, 1.0), seg(2, 1.5, 2.0)], discarded)) == 2
