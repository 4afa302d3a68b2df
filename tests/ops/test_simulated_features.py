"""Simulated visual features and text tower (spec howtostep.md §6): norms, determinism, seeding per second."""

from __future__ import annotations

import numpy as np
import pytest

from builders.ops.simulated_features import (
    noise_rows,
    projection_matrix,
    simulated_features,
    simulated_text_tower,
)

D_TEXT = 384
STARTS = [0.0, 3.0, 7.0]
ENDS = [3.0, 6.5, 9.2]


@pytest.fixture(scope="module")
def narr() -> np.ndarray:
    e = np.random.default_rng(7).normal(size=(3, D_TEXT))
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def test_projection_and_noise_follow_the_seeds():
    P = projection_matrix(D_TEXT)
    assert P.shape == (768, D_TEXT)
    np.testing.assert_array_equal(P, np.random.default_rng(0).normal(0.0, np.sqrt(1 / 768), size=(768, D_TEXT)))
    eps = noise_rows(5)
    np.testing.assert_array_equal(eps[3], np.random.default_rng(4).normal(0.0, np.sqrt(1 / 768), size=768))
    assert not np.array_equal(projection_matrix(D_TEXT, seed=1), P)


def test_signal_and_noise_norms():
    P = projection_matrix(D_TEXT)
    e = np.random.default_rng(11).normal(size=(200, D_TEXT))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    signal = np.linalg.norm(e @ P.T, axis=1)
    noise = np.linalg.norm(0.5 * noise_rows(200), axis=1)
    assert abs(signal.mean() - 1.0) < 0.03 and abs(noise.mean() - 0.5) < 0.02


def test_simulated_features_rows(narr):
    X = simulated_features(narr, STARTS, ENDS, 12)
    assert X.shape == (12, 768) and X.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    text = simulated_text_tower(narr)
    cos = (text / np.linalg.norm(text, axis=1, keepdims=True)) @ X.T  # [3, 12]
    # frames 0-2 / 3-6 / 7-9 carry narration 0 / 1 / 2: cos ≈ 1/sqrt(1 + 0.25) = 0.89; frames 10-11 are pure noise
    for n, frames in enumerate([range(3), range(3, 7), range(7, 10)]):
        assert (cos[n, list(frames)] > 0.75).all()
        assert (np.delete(cos[n], list(frames)) < 0.25).all()
    # no narration at 10, 11: the row is the normalised noise exactly
    eps = noise_rows(12)[10:]
    np.testing.assert_allclose(X[10:], eps / np.linalg.norm(eps, axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_overlap_is_the_mean_of_normalised_embeddings(narr):
    X = simulated_features(narr[:2] * np.array([[2.0], [5.0]]), [0.0, 0.5], [2.0, 1.0], 2)
    mean = narr[:2].mean(0)
    x0 = projection_matrix(D_TEXT) @ mean + 0.5 * noise_rows(1)[0]
    np.testing.assert_allclose(X[0], x0 / np.linalg.norm(x0), rtol=1e-5, atol=1e-7)


def test_deterministic_and_frames_independent_of_T(narr):
    a = simulated_features(narr, STARTS, ENDS, 10)
    b = simulated_features(narr, STARTS, ENDS, 10)
    np.testing.assert_array_equal(a, b)
    long = simulated_features(narr, STARTS, ENDS, 40)
    # the same up to BLAS blocking (a matmul of another height may round differently in the last bit)
    np.testing.assert_allclose(long[:10], a, rtol=1e-6, atol=1e-7)
    short = simulated_features(narr, STARTS, ENDS, 5)  # narration 1 clipped, narration 2 beyond: rows 0-4 unchanged
    np.testing.assert_allclose(short, a[:5], rtol=1e-6, atol=1e-7)
    assert not np.array_equal(simulated_features(narr, STARTS, ENDS, 10, seed=1), a)


def test_text_tower_and_edges(narr):
    t = simulated_text_tower(narr * 3.0)
    np.testing.assert_allclose(t, (narr @ projection_matrix(D_TEXT).T).astype(np.float32), rtol=1e-5)
    assert simulated_text_tower(np.zeros((0, D_TEXT))).shape == (0, 768)
    assert simulated_features(narr, STARTS, ENDS, 0).shape == (0, 768)
    X = simulated_features(np.zeros((0, D_TEXT)), [], [], 3, dim=16)
    assert X.shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError):
        simulated_features(np.full((3, D_TEXT), np.nan), STARTS, ENDS, 10)
    with pytest.raises(ValueError):
        simulated_features(narr, STARTS[:2], ENDS[:2], 10)
