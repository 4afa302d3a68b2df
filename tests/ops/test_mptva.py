"""MPTVA fusion (spec howtostep.md §4; paper 001 §3.2.2, Table 3): the worked example and the γ / W / missing
pathway rules."""

from __future__ import annotations

import numpy as np
import pytest

from builders.ops.mptva import GAMMA, KEEP_RATIO, TAU, WINDOW_W, keep_top_share, mptva_fuse, snv_matrix
from builders.ops.step_timestamps import narration_frame_matrix

SNV = np.array([[0.0, 0.0, 1.0, 1.0, 0.0, 0.0]])
LONG = np.array([[0.2, 0.3, 0.9, 0.6, 0.1, 0.0]])
SHORT = np.array([[0.1, 0.2, 0.8, 0.7, 0.2, 0.1]])


def test_defaults_are_the_papers():
    assert (TAU, WINDOW_W, GAMMA, KEEP_RATIO) == (0.07, 2, 0.65, 0.15)


def test_worked_example():
    r = mptva_fuse(SNV, LONG, SHORT)
    a_mult = (SNV + LONG + SHORT) / 3
    np.testing.assert_allclose(a_mult[0], [0.1, 0.1667, 0.9, 0.7667, 0.1, 0.0333], atol=1e-4)
    assert r.k_star.tolist() == [2]
    np.testing.assert_allclose(r.score, [0.9])
    assert r.start.tolist() == [0.0] and r.end.tolist() == [4.0]
    assert r.keep.tolist() == [True]
    np.testing.assert_allclose(r.pathway_scores, [[1.0, 0.9, 0.8]])
    assert r.pathways == ("snv", "long", "short")


def test_gamma_and_window_clipping():
    a = np.array([
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.64],   # k* = 5 (last): window [3, 5]; 0.64 < 0.65 dropped
        [0.65, 0.65, 0.1, 0.0, 0.0, 0.0],  # tie: k* = 0; exactly gamma: kept
    ])
    r = mptva_fuse(a, a, a)
    assert r.k_star.tolist() == [5, 0]
    assert r.start.tolist() == [3.0, 0.0] and r.end.tolist() == [5.0, 2.0]
    assert r.keep.tolist() == [False, True]
    r = mptva_fuse(a, a, a, W=0, gamma=0.6)
    assert r.start.tolist() == [5.0, 0.0] and r.end.tolist() == [5.0, 0.0] and r.keep.tolist() == [True, True]


def test_missing_pathway():
    with pytest.raises(ValueError, match="allow_missing"):
        mptva_fuse(SNV, LONG, None)
    r = mptva_fuse(SNV, LONG, None, allow_missing=True)
    np.testing.assert_allclose(r.score, [0.95])  # (1 + 0.9) / 2 at t = 2
    assert r.k_star.tolist() == [2] and r.pathways == ("snv", "long")
    assert np.isnan(r.pathway_scores[0, 2]) and r.pathway_scores[0, :2].tolist() == [1.0, 0.9]
    r = mptva_fuse(None, None, SHORT, allow_missing=True)
    np.testing.assert_allclose(r.score, [0.8])
    with pytest.raises(ValueError):
        mptva_fuse(None, None, None, allow_missing=True)


def test_keep_ratio_mode():
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, size=(20, 30))
    r = mptva_fuse(a, a, a, gamma_mode="keep_ratio")
    assert r.keep.sum() == 3  # ceil(0.15 * 20)
    assert set(np.flatnonzero(r.keep)) == set(np.argsort(-r.score)[:3])
    assert keep_top_share([0.5, 0.9, 0.9, 0.1], 0.5).tolist() == [False, True, True, False]
    assert keep_top_share([0.9, 0.9, 0.9], 0.34).tolist() == [True, True, False]  # ceil(1.02) = 2, lower index wins
    assert keep_top_share([0.2, 0.3], 0.15).tolist() == [False, True]  # at least one kept
    assert keep_top_share([], 0.15).tolist() == []
    with pytest.raises(ValueError):
        mptva_fuse(a, a, a, gamma_mode="relative")


def test_edges_and_errors():
    r = mptva_fuse(np.zeros((0, 6)), np.zeros((0, 6)), np.zeros((0, 6)))
    assert r.k_star.shape == (0,) and r.pathway_scores.shape == (0, 3)
    r = mptva_fuse(np.array([[0.7]]), np.array([[0.7]]), np.array([[0.7]]))  # T = 1
    assert r.start.tolist() == [0.0] and r.end.tolist() == [0.0] and r.keep.tolist() == [True]
    with pytest.raises(ValueError):
        mptva_fuse(SNV, LONG[:, :5], SHORT)
    with pytest.raises(ValueError):
        mptva_fuse(SNV, np.where(LONG > 0.5, np.nan, LONG), SHORT)
    with pytest.raises(ValueError):
        mptva_fuse(SNV, LONG, SHORT, W=-1)


def test_snv_matrix():
    Y, _ = narration_frame_matrix([0.0, 3.0], [3.0, 6.0], 6)
    narr = np.array([[1.0, 0.0], [0.0, 2.0]])
    step = np.array([[3.0, 0.0], [1.0, 1.0]])
    A = snv_matrix(step, narr, Y)
    p = np.exp(1 / 0.07) / (np.exp(1 / 0.07) + 1.0)  # cos 1 vs 0 at tau = 0.07
    np.testing.assert_allclose(A[0], [p] * 3 + [1 - p] * 3, rtol=1e-5)
    np.testing.assert_allclose(A[1], 0.5, rtol=1e-6)  # equal cosines
    assert snv_matrix(step, np.zeros((0, 2)), np.zeros((0, 6))).shape == (2, 6)
    with pytest.raises(ValueError):
        snv_matrix(step, narr, Y[:1])
