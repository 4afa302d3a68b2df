"""Stage-1/Stage-2 grounding ops (spec howtostep.md §3.7-§3.9): worked examples, anchors, edge cases, and the
vectorised window growth against a brute-force loop."""

from __future__ import annotations

import numpy as np
import pytest

from builders.ops.step_timestamps import (
    DELTA_SEC,
    EPS1,
    EPS2,
    NU,
    ZETA,
    grow_windows,
    narration_frame_matrix,
    round_settings,
    softmax_rows,
    stage1_from_similarity,
    stage1_step_video,
    stage1_timestamps,
    stage2_timestamps,
)

# the spec's worked example (§3.7): T=10, K=3
STARTS = [0.0, 3.0, 7.0]
ENDS = [3.0, 6.5, 9.2]


def _rows(Y: np.ndarray) -> list[list[int]]:
    return [np.flatnonzero(r).tolist() for r in Y]


# ------------------------------------------------------------------------------------------------- defaults


def test_defaults_are_the_papers():
    assert (NU, ZETA, EPS1, EPS2, DELTA_SEC) == (0.07, 0.7, 0.20, 0.8, 8.0)


def test_round_settings_table9():
    assert round_settings(0) == (0.20, "grown", None)
    assert round_settings(1) == (0.8, "start", 8.0)
    assert round_settings(2) == (0.7, "grown", None)
    eps, anchor, delta = round_settings(3)
    assert (eps, anchor, delta) == (0.8, "grown", None)
    with pytest.raises(ValueError):
        round_settings(4)


# ------------------------------------------------------------------------------------------------- Y_NV


def test_narration_frame_matrix_worked_example():
    Y, beyond = narration_frame_matrix(STARTS, ENDS, 10)
    assert Y.dtype == np.float32 and Y.shape == (3, 10)
    assert _rows(Y) == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    assert beyond == 0


def test_narration_frame_matrix_edges():
    # zero-length and sub-second narrations cover their floor second; ends past T are clipped; starts >= T are
    # all-zero and counted; a negative start is clipped to frame 0
    Y, beyond = narration_frame_matrix([4.0, 4.5, 8.5, 10.0, 12.0, -0.5], [4.0, 4.6, 30.0, 11.0, 13.0, 1.0], 10)
    assert _rows(Y) == [[4], [4], [8, 9], [], [], [0]]
    assert beyond == 2
    Y, beyond = narration_frame_matrix([-5.0, -0.5], [-2.0, 0.0], 10)  # entirely before 0: no frame
    assert _rows(Y) == [[], []] and beyond == 0
    Y, beyond = narration_frame_matrix([0.0, 9.99], [0.5, 10.5], 10)
    assert _rows(Y) == [[0], [9]] and beyond == 0
    Y, beyond = narration_frame_matrix([], [], 5)
    assert Y.shape == (0, 5) and beyond == 0
    Y, beyond = narration_frame_matrix([0.0, 1.0], [2.0, 3.0], 0)
    assert Y.shape == (2, 0) and beyond == 2


def test_narration_frame_matrix_rejects_nan():
    with pytest.raises(ValueError):
        narration_frame_matrix([0.0, np.nan], [1.0, 2.0], 5)
    with pytest.raises(ValueError):
        narration_frame_matrix([0.0], [1.0, 2.0], 5)


# ------------------------------------------------------------------------------------------------- softmax


def test_softmax_rows_stable_and_tempered():
    x = np.array([[1000.0, 1000.0, 999.0], [0.0, 0.0, 0.0]])
    p = softmax_rows(x, 1.0)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(1), 1.0)
    np.testing.assert_allclose(p[1], 1 / 3)
    e = np.exp([0.0, 0.0, -1.0])
    np.testing.assert_allclose(p[0], e / e.sum())
    q = softmax_rows(np.array([[0.1, 0.2]]), 0.1)
    np.testing.assert_allclose(q[0], np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum())
    assert softmax_rows(np.zeros((2, 0))).shape == (2, 0)
    with pytest.raises(ValueError):
        softmax_rows(x, 0.0)


# ------------------------------------------------------------------------------------------------- grow_windows


def _grow_reference(scores: np.ndarray, centres: np.ndarray, zeta: float) -> tuple[list[int], list[int]]:
    starts, ends = [], []
    for row, c in zip(scores, centres, strict=True):
        thr = zeta * row[c]
        s = c
        while s - 1 >= 0 and row[s - 1] >= thr:
            s -= 1
        e = c
        while e + 1 < len(row) and row[e + 1] >= thr:
            e += 1
        starts.append(s)
        ends.append(e)
    return starts, ends


def test_grow_windows_matches_brute_force_loop():
    rng = np.random.default_rng(2023)
    for case in range(600):
        L = int(rng.integers(1, 8))
        T = int(rng.integers(1, 40))
        if case % 3 == 0:  # few distinct values: exact ties with the threshold
            scores = rng.integers(0, 5, size=(L, T)).astype(float) / 4.0
        elif case % 3 == 1:  # cosines, negatives included
            scores = rng.uniform(-1, 1, size=(L, T))
        else:
            scores = rng.dirichlet(np.ones(T), size=L)
        zeta = float(rng.choice([0.0, 0.5, 0.7, 1.0, rng.uniform()]))
        centres = np.argmax(scores, 1) if case % 2 else rng.integers(0, T, size=L)
        start, end = grow_windows(scores, centres, zeta)
        ref_s, ref_e = _grow_reference(scores, centres, zeta)
        assert start.tolist() == ref_s and end.tolist() == ref_e, (case, scores, centres, zeta)
        assert start.dtype == np.int64


def test_grow_windows_ge_rule_and_errors():
    # threshold 0.7 * 1.0 = 0.7: a neighbour exactly at 0.7 is inside (>=), 0.69 stops the growth
    s, e = grow_windows(np.array([[0.69, 0.7, 1.0, 0.7, 0.7, 0.2, 0.9]]), np.array([2]), 0.7)
    assert (s.tolist(), e.tolist()) == ([1], [4])
    s, e = grow_windows(np.zeros((0, 5)), np.zeros(0, dtype=int), 0.7)
    assert s.shape == e.shape == (0,)
    with pytest.raises(ValueError):
        grow_windows(np.array([[0.1, np.nan]]), np.array([0]), 0.7)
    with pytest.raises(ValueError):
        grow_windows(np.array([[0.1, 0.2]]), np.array([2]), 0.7)
    with pytest.raises(ValueError):
        grow_windows(np.array([[0.1, 0.2]]), np.array([0]), 1.5)


# ------------------------------------------------------------------------------------------------- Stage 1


def test_stage1_worked_example_from_similarity():
    Y, _ = narration_frame_matrix(STARTS, ENDS, 10)
    T_SN = np.array([[0.1, 0.6, 0.3], [0.34, 0.33, 0.33]])
    r = stage1_from_similarity(T_SN, Y, zeta=0.7, eps1=0.2)
    assert r.centre.tolist() == [3, 0]
    assert r.start.tolist() == [3.0, 0.0] and r.end.tolist() == [6.0, 9.0]
    np.testing.assert_allclose(r.score, [0.6, 0.34])
    assert r.keep.tolist() == [True, True]
    # the Y_SV row itself: 0.1 (0-2), 0.6 (3-6), 0.3 (7-9); thresholds 0.42 and 0.238
    Y_SV = T_SN @ Y
    np.testing.assert_allclose(Y_SV[0], [0.1] * 3 + [0.6] * 4 + [0.3] * 3)
    np.testing.assert_allclose(0.7 * r.score, [0.42, 0.238])
    # eps1 above the score: not kept, window still reported
    r = stage1_from_similarity(T_SN, Y, eps1=0.5)
    assert r.keep.tolist() == [True, False] and r.end.tolist() == [6.0, 9.0]


def _unit_steps_for(probs: np.ndarray, basis: np.ndarray, nu: float) -> np.ndarray:
    """A step embedding whose softmax_n(cos/nu) against orthonormal narrations ``basis`` equals ``probs``."""
    cos = nu * np.log(probs) + 0.5
    rest = np.sqrt(1.0 - (cos**2).sum())
    return cos @ basis[: len(probs)] + rest * basis[len(probs)]


def test_stage1_timestamps_from_embeddings():
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    basis = basis.T  # orthonormal rows
    narr = basis[:3] * np.array([[3.0], [0.5], [7.0]])  # not normalised: the op normalises
    steps = np.stack([
        _unit_steps_for(np.array([0.1, 0.6, 0.3]), basis, 0.07) * 5.0,
        _unit_steps_for(np.array([0.34, 0.33, 0.33]), basis, 0.07),
        _unit_steps_for(np.array([0.05, 0.1, 0.85]), basis, 0.07),
    ])
    r = stage1_timestamps(steps, narr, STARTS, ENDS, 10)
    assert r.centre.tolist() == [3, 0, 7]
    assert r.start.tolist() == [3.0, 0.0, 7.0] and r.end.tolist() == [6.0, 9.0, 9.0]
    np.testing.assert_allclose(r.score, [0.6, 0.34, 0.85], atol=1e-5)
    assert r.keep.tolist() == [True, True, True] and r.beyond == 0


def test_stage1_timestamps_beyond_and_empty():
    rng = np.random.default_rng(1)
    steps, narr = rng.normal(size=(4, 8)), rng.normal(size=(3, 8))
    # every narration starts at or after T: Y_SV = 0, whole-video windows, nothing kept
    r = stage1_timestamps(steps, narr, [5.0, 6.0, 7.0], [6.0, 7.0, 8.0], 5)
    assert r.beyond == 3 and r.keep.tolist() == [False] * 4
    assert r.centre.tolist() == [0] * 4 and r.end.tolist() == [4.0] * 4 and r.score.tolist() == [0.0] * 4
    r = stage1_timestamps(np.zeros((0, 8)), narr, STARTS, ENDS, 10)
    assert r.centre.shape == r.start.shape == r.keep.shape == (0,)
    r = stage1_timestamps(steps, np.zeros((0, 8)), [], [], 10)
    assert r.keep.tolist() == [False] * 4 and r.score.tolist() == [0.0] * 4
    r = stage1_timestamps(steps, narr, [0.0, 0.2, 0.5], [0.5, 0.9, 3.0], 1)  # T = 1
    assert r.centre.tolist() == [0] * 4 and r.start.tolist() == [0.0] * 4 and r.end.tolist() == [0.0] * 4
    np.testing.assert_allclose(r.score, 1.0, rtol=1e-6)  # every narration covers the one frame


def test_stage1_rejects_bad_input():
    narr = np.eye(3)
    with pytest.raises(ValueError):
        stage1_timestamps(np.array([[np.nan, 0, 0]]), narr, STARTS, ENDS, 10)
    with pytest.raises(ValueError):
        stage1_timestamps(np.eye(3), narr, STARTS, ENDS, 0)
    with pytest.raises(ValueError):
        stage1_timestamps(np.eye(3), narr, STARTS[:2], ENDS[:2], 10)
    with pytest.raises(ValueError):
        stage1_timestamps(np.ones((1, 4)), narr, STARTS, ENDS, 10)


def test_stage1_step_video():
    frames = np.zeros((6, 4))
    frames[:, 0] = 1.0
    frames[2] = [0.0, 1.0, 0.0, 0.0]
    text = np.array([[0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    r = stage1_step_video(text, frames)
    assert r.centre.tolist() == [2, 0]
    assert (r.start.tolist(), r.end.tolist()) == ([2.0, 0.0], [2.0, 5.0])  # exp(-100) neighbours; uniform row
    np.testing.assert_allclose(r.score, [1.0, 1 / 6], rtol=1e-5)
    assert r.keep.tolist() == [True, False]
    assert stage1_step_video(np.zeros((0, 4)), frames).keep.shape == (0,)


# ------------------------------------------------------------------------------------------------- Stage 2


A = np.array([
    [0.1, 0.2, 0.5, 0.85, 0.7, 0.6, 0.62, 0.3, 0.1, 0.0],   # t* = 3
    [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],     # all equal: t* = 0
    [-0.2, -0.1, 0.3, 0.5, 0.79, 0.2, 0.1, 0.0, 0.0, 0.81],  # t* = 9 (last frame)
])


def test_stage2_start_anchor():
    r = stage2_timestamps(A)  # defaults: eps2 0.8, start, delta 8
    assert r.t_star.tolist() == [3, 0, 9]
    np.testing.assert_allclose(r.score, [0.85, 0.9, 0.81])
    assert r.start.tolist() == [3.0, 0.0, 9.0]
    assert r.end.tolist() == [9.0, 8.0, 9.0]  # min(t* + 8, T - 1)
    assert r.keep.tolist() == [True, True, True]
    assert stage2_timestamps(A, eps2=0.85).keep.tolist() == [True, True, False]
    assert stage2_timestamps(A, delta=6).end.tolist() == [9.0, 6.0, 9.0]


def test_stage2_centre_anchor():
    r = stage2_timestamps(A, anchor="centre", delta=8.0)
    assert r.start.tolist() == [0.0, 0.0, 5.0] and r.end.tolist() == [7.0, 4.0, 9.0]
    r = stage2_timestamps(A, anchor="centre", delta=5.0)
    assert r.start.tolist() == [0.5, 0.0, 6.5] and r.end.tolist() == [5.5, 2.5, 9.0]


def test_stage2_grown_anchor():
    r = stage2_timestamps(A, eps2=0.7, anchor="grown", delta=None, zeta=0.7)
    # row 0: threshold 0.595 -> frames 3..6; row 1: all equal -> 0..9; row 2: threshold 0.567, frame 8 = 0.0 -> 9..9
    assert r.start.tolist() == [3.0, 0.0, 9.0] and r.end.tolist() == [6.0, 9.0, 9.0]
    # a negative best cosine: one-frame window
    r = stage2_timestamps(np.array([[-0.5, -0.4, -0.45]]), anchor="grown")
    assert (r.t_star.tolist(), r.start.tolist(), r.end.tolist(), r.keep.tolist()) == ([1], [1.0], [1.0], [False])


def test_stage2_edges():
    r = stage2_timestamps(np.zeros((0, 7)))
    assert r.t_star.shape == r.start.shape == r.keep.shape == (0,)
    r = stage2_timestamps(np.array([[0.95], [0.5]]))  # T = 1
    assert r.start.tolist() == [0.0, 0.0] and r.end.tolist() == [0.0, 0.0] and r.keep.tolist() == [True, False]
    with pytest.raises(ValueError):
        stage2_timestamps(np.array([[0.1, np.nan]]))
    with pytest.raises(ValueError):
        stage2_timestamps(A, anchor="middle")
    with pytest.raises(ValueError):
        stage2_timestamps(A, anchor="start", delta=None)
    with pytest.raises(ValueError):
        stage2_timestamps(np.zeros((2, 0)))
