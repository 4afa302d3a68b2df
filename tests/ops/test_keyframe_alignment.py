"""ShowHowTo keyframe alignment (spec showhowto.md §6-§7): windows, candidates, the DP's worked and tie examples, the
middle aligner, infeasible cases, re-extraction pairs, and the DP against brute force on random small cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from builders.ops.keyframe_alignment import (
    EPSILON_SEC,
    FPS,
    align_keyframes,
    candidate_mask,
    frame_time_from_upstream,
    frame_windows,
    middle_scores,
    start_sec_frame_idx,
    union_frames,
)


def _grid(rows: list[dict[int, float]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores (NaN outside the candidates) and mask from per-step {frame: score} dicts."""
    S = np.full((len(rows), n), np.nan)
    m = np.zeros((len(rows), n), dtype=bool)
    for k, row in enumerate(rows):
        for g, s in row.items():
            S[k, g], m[k, g] = s, True
    return S, m


# ---------------------------------------------------------------------------------------------- windows, mask


def test_defaults():
    assert (EPSILON_SEC, FPS) == (15.0, 5.0)


def test_frame_windows_clip_to_video():
    a, b = frame_windows([10.0, 40.0, 5.0], [20.0, 58.0, 6.0], t_last=60.0)
    np.testing.assert_array_equal(a, [0.0, 25.0, 0.0])
    np.testing.assert_array_equal(b, [35.0, 60.0, 21.0])
    a, b = frame_windows([10.0], [20.0], t_last=60.0, epsilon=2.5)
    assert (a[0], b[0]) == (7.5, 22.5)
    with pytest.raises(ValueError):
        frame_windows([1.0, 2.0], [3.0], t_last=10.0)


def test_candidate_mask_tolerance():
    # 7.4 s is frame 37 at 5 fps; bounds a hair off the grid still include it (±1e-6), 1e-5 off do not
    m = candidate_mask([7.4 + 5e-7, 7.4 + 1e-5], [7.4 - 5e-7, 8.0], 50)
    assert np.flatnonzero(m[0]).tolist() == [37]
    assert np.flatnonzero(m[1]).tolist() == [38, 39, 40]
    assert m.shape == (2, 50) and m.dtype == bool
    # 0.1 * 3 = 0.30000000000000004 > 0.3: the tolerance keeps frame 3 of a 10-fps grid
    assert candidate_mask([0.1 * 3], [0.3], 10, fps=10.0)[0].tolist() == [False] * 3 + [True] + [False] * 6


def test_empty_window_and_union():
    a, b = frame_windows([100.0], [110.0], t_last=20.0)  # starts after t_last + eps
    assert b[0] < a[0]
    m = candidate_mask(a, b, 101)
    assert not m.any()
    m = candidate_mask([1.0, 3.0], [1.4, 3.2], 30)
    assert union_frames(m).tolist() == [5, 6, 7, 15, 16]


# ---------------------------------------------------------------------------------------------- the DP


def test_worked_example_spec6():
    S, m = _grid([{0: .20, 1: .25, 2: .30, 3: .10}, {1: .10, 2: .40, 3: .35, 4: .20},
                  {2: .50, 3: .45, 4: .15, 5: .10}], 6)
    # per-step argmax breaks the order
    assert np.nanargmax(S, axis=1).tolist() == [2, 2, 2]
    frames, total = align_keyframes(S, m)
    assert frames.tolist() == [1, 2, 3]
    assert total == pytest.approx(1.10, abs=1e-12)
    assert frames.dtype == np.int64


def test_tie_example_spec6():
    S, m = _grid([{0: .5, 1: .5}, {1: .3, 2: .3}], 3)
    frames, total = align_keyframes(S, m)
    assert frames.tolist() == [0, 1] and total == pytest.approx(.8)


def test_union_columns_layout_gives_the_same_answer():
    S, m = _grid([{3: .2, 7: .9}, {7: .5, 12: .4}, {12: .3, 20: .1}], 25)
    U = union_frames(m)
    full = align_keyframes(S, m)
    sub = align_keyframes(S[:, U], m[:, U], columns=U)
    assert full.frames.tolist() == sub.frames.tolist() == [7, 12, 20]
    assert full.total == sub.total == pytest.approx(.9 + .4 + .1)
    with pytest.raises(ValueError):
        align_keyframes(S[:, U], m[:, U], columns=U[::-1])


def test_single_step_and_no_steps():
    frames, total = align_keyframes(np.array([[.1, .7, .7]]), np.ones((1, 3), bool))
    assert frames.tolist() == [1] and total == .7
    frames, total = align_keyframes(np.zeros((0, 5)), np.zeros((0, 5), bool))
    assert frames.tolist() == [] and total == 0.0


@pytest.mark.parametrize("rows, n", [
    ([{2: 1.0}, {2: 1.0}], 3),                         # both steps can only use the same frame
    ([{3: 1.0, 4: .5}, {1: 1.0, 2: 2.0}], 5),          # step 1's frames all lie before step 0's
    ([{0: 1.0}, {1: 1.0}, {1: 1.0}], 2),               # three steps, two frames
    ([{0: .1}, {}], 4),                                # an empty candidate set
    ([{}], 4),
])
def test_infeasible(rows, n):
    S, m = _grid(rows, n)
    frames, total = align_keyframes(S, m)
    assert frames is None and total == -math.inf


def test_nonfinite_score_on_a_candidate_raises():
    S, m = _grid([{0: .1, 1: np.nan}], 2)
    with pytest.raises(ValueError):
        align_keyframes(S, m)
    with pytest.raises(ValueError):
        align_keyframes(np.zeros((2, 3)), np.ones((2, 4), bool))


def _brute_force(S: np.ndarray, m: np.ndarray) -> tuple[tuple[int, ...] | None, float]:
    """All strictly increasing assignments; optimum with the spec's tie rule: earliest last frame, then earliest
    predecessor, recursively (the lexicographically smallest reversed tuple). Sums left to right, as the DP."""
    K, N = S.shape
    best, chosen = -math.inf, None
    for combo in itertools.combinations(range(N), K):
        if not all(m[k, g] for k, g in enumerate(combo)):
            continue
        total = 0.0
        for k, g in enumerate(combo):
            total += float(S[k, g])
        if total > best or (total == best and combo[::-1] < chosen[::-1]):
            best, chosen = total, combo
    return chosen, best


def test_brute_force_random_cases_with_ties():
    rng = np.random.default_rng(13)
    feasible = infeasible = tied = 0
    for case in range(400):
        K = int(rng.integers(1, 5))
        N = int(rng.integers(1, 9))
        if case % 2:  # quantised scores: many exact ties
            S = rng.integers(0, 3, size=(K, N)).astype(np.float64) / 4.0
        else:
            S = rng.normal(size=(K, N))
        if case % 3 == 0:  # window-shaped masks, as the pipeline makes
            lo = np.sort(rng.integers(0, N, K))
            hi = np.minimum(N - 1, lo + rng.integers(0, 4, K))
            g = np.arange(N)
            m = (g[None, :] >= lo[:, None]) & (g[None, :] <= hi[:, None])
        else:
            m = rng.random((K, N)) < 0.6
        S_in = np.where(m, S, np.nan)
        expected, best = _brute_force(S, m)
        frames, total = align_keyframes(S_in, m)
        if expected is None:
            infeasible += 1
            assert frames is None and total == -math.inf, case
            continue
        feasible += 1
        assert total == best, case
        assert tuple(frames.tolist()) == expected, (case, S, m)
        # count cases where another optimal assignment exists (the tie rule is exercised)
        others = [c for c in itertools.combinations(range(N), K) if c != expected
                  and all(m[k, x] for k, x in enumerate(c)) and sum(S[k, x] for k, x in enumerate(c)) == best]
        tied += bool(others)
    assert feasible >= 150 and infeasible >= 20 and tied >= 30, (feasible, infeasible, tied)


def _loop_dp(S: np.ndarray, m: np.ndarray) -> tuple[list[int] | None, float]:
    """The spec's recurrence written as loops over U with a running prefix maximum (strict > update after use)."""
    K, _ = S.shape
    U = [g for g in range(S.shape[1]) if m[:, g].any()]
    V = [[-math.inf] * len(U) for _ in range(K)]
    P = [[-1] * len(U) for _ in range(K)]
    for j, g in enumerate(U):
        if m[0, g]:
            V[0][j] = float(S[0, g])
    for k in range(1, K):
        run, arg = -math.inf, -1
        for j, g in enumerate(U):
            if m[k, g] and run > -math.inf:
                V[k][j] = float(S[k, g]) + run
                P[k][j] = arg
            if V[k - 1][j] > run:
                run, arg = V[k - 1][j], j
    best = max(V[K - 1]) if U else -math.inf
    if best == -math.inf:
        return None, best
    j = V[K - 1].index(best)
    path = []
    for k in range(K - 1, -1, -1):
        path.append(U[j])
        j = P[k][j]
    return path[::-1], best


def test_matches_loop_recurrence_on_medium_cases():
    rng = np.random.default_rng(7)
    for _ in range(20):
        K, N = int(rng.integers(2, 12)), int(rng.integers(20, 120))
        starts = np.sort(rng.uniform(0, N / 5, K))
        ends = starts + rng.uniform(0, 4, K)
        a, b = frame_windows(starts, ends, (N - 1) / 5, epsilon=3.0)
        m = candidate_mask(a, b, N)
        S = np.round(rng.normal(size=(K, N)), 1)
        frames, total = align_keyframes(S, m)
        ref, best = _loop_dp(S, m)
        assert total == best
        assert (frames is None and ref is None) or frames.tolist() == ref


# ---------------------------------------------------------------------------------------------- middle aligner


def _middle(starts, ends, n_frames):
    a, b = frame_windows(starts, ends, (n_frames - 1) / FPS)
    return align_keyframes(middle_scores(starts, ends, n_frames), candidate_mask(a, b, n_frames))


def test_middle_same_interval():
    frames, total = _middle([10.0, 10.0], [20.0, 20.0], 151)
    assert frames.tolist() == [74, 75]
    np.testing.assert_allclose(frames / FPS, [14.8, 15.0])
    assert total == -1.0


def test_middle_nested_intervals():
    frames, total = _middle([10.0, 12.0], [20.0, 14.0], 151)
    assert frames.tolist() == [64, 65]
    np.testing.assert_allclose(frames / FPS, [12.8, 13.0])
    assert total == -11.0


def test_middle_scores_values():
    S = middle_scores([1.0], [2.0], 10)
    assert S.shape == (1, 10) and S.dtype == np.float64
    assert S[0, 7] == -0.5 and S[0, 8] == -0.5 and S[0, 0] == -7.5
    S = middle_scores([1.0], [2.0], 10, fps=2.0)
    assert S[0, 3] == 0.0


# ---------------------------------------------------------------------------------------------- re-extraction


def test_start_sec_frame_idx():
    a = np.array([0.0, 12.7, 30.0, 44.9999999])
    frames = np.array([3, 64, 150, 226])
    start_sec, frame_idx = start_sec_frame_idx(a, frames)
    assert start_sec.tolist() == [0, 12, 30, 44]
    assert frame_idx.tolist() == [3, 4, 0, 6]
    assert start_sec.dtype == frame_idx.dtype == np.int64
    np.testing.assert_allclose(start_sec + frame_idx / 5, frames / 5)


def test_start_sec_frame_idx_round_trip_from_windows():
    rng = np.random.default_rng(3)
    starts = np.sort(rng.uniform(0, 500, 30))
    ends = starts + rng.uniform(0, 20, 30)
    n = 3000
    a, b = frame_windows(starts, ends, (n - 1) / 5)
    m = candidate_mask(a, b, n)
    g = np.array([np.flatnonzero(row)[0] for row in m])  # the earliest candidate: the tightest case
    start_sec, frame_idx = start_sec_frame_idx(a, g)
    assert (frame_idx >= 0).all()
    np.testing.assert_allclose(frame_time_from_upstream(start_sec, frame_idx), g / 5)


def test_frame_time_from_upstream():
    assert frame_time_from_upstream(12, 4) == pytest.approx(12.8)
    assert frame_time_from_upstream(12.1, 0) == pytest.approx(12.2)  # first grid frame at t >= 12.1
    assert frame_time_from_upstream(12.2, 1) == pytest.approx(12.4)  # 5*12.2 = 61.00000000000001: still frame 61
    np.testing.assert_allclose(frame_time_from_upstream([0.0, 7.3], [0, 2]), [0.0, 7.8])
