"""The howtostep view's matched narration (``builders/explore/howtostep.py``): the narration overlapping a step's
Stage-1 window most, else its final window; ties and no overlap go to the nearest centre, then the first."""

from __future__ import annotations

from builders.explore.howtostep import _matched_narrations

NARR = [
    {"index": 0, "start": 0.0, "end": 4.0},
    {"index": 1, "start": 4.0, "end": 8.0},
    {"index": 2, "start": 8.0, "end": 12.0},
    {"index": 3, "start": 20.0, "end": 24.0},
]


def test_most_overlap_wins():
    # window 3-9: overlaps n0 by 1 s, n1 by 4 s, n2 by 1 s -> n1
    assert _matched_narrations([{"stage1_start": 3.0, "stage1_end": 9.0}], NARR) == [1]


def test_stage1_window_before_the_final_window():
    step = {"stage1_start": 20.5, "stage1_end": 21.0, "start": 0.0, "end": 4.0}
    assert _matched_narrations([step], NARR) == [3]
    assert _matched_narrations([{"start": 0.5, "end": 1.0}], NARR) == [0]


def test_no_overlap_goes_to_the_nearest_centre_and_ties_to_the_first():
    # window 14-15 (centre 14.5) overlaps nothing: centres 2, 6, 10, 22 -> n2 (4.5 away) beats n3 (7.5)
    assert _matched_narrations([{"start": 14.0, "end": 15.0}], NARR) == [2]
    # window 4-4 (centre 4): no overlap; n0 and n1 both 2.0 away -> the first, n0
    assert _matched_narrations([{"start": 4.0, "end": 4.0}], NARR) == [0]
    # equal overlap (window 7-9: 1 s of n1 and 1 s of n2) -> nearer centre: |6-8| = |10-8| -> first, n1
    assert _matched_narrations([{"start": 7.0, "end": 9.0}], NARR) == [1]


def test_steps_without_a_window_and_videos_without_narrations():
    steps = [{"start": None, "end": 1.0}, {"stage1_start": 8.5, "stage1_end": 11.0}, {}]
    assert _matched_narrations(steps, NARR) == [None, 2, None]
    assert _matched_narrations(steps, []) == [None, None, None]
    assert _matched_narrations([], NARR) == []


def test_missing_narration_times_count_as_zero():
    narr = [{"index": 7, "start": None, "end": None}, {"index": 8, "start": 1.0, "end": 2.0}]
    assert _matched_narrations([{"start": 0.0, "end": 0.5}], narr) == [7]
