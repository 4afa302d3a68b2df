"""builders.ops.swap: exact blocked top-k search (spec §3.5, §9) and the Eq. 6 threshold (paper 004, λ_sim = 0.75)."""

import numpy as np
import pytest

from builders.ops.swap import swap_decisions, topk_search


def brute_force(q, keys, k):
    """Reference: full (n, m) matrix in float64, order by (similarity desc, key index asc)."""
    s = q.astype(np.float64) @ keys.astype(np.float64).T
    col = np.broadcast_to(np.arange(keys.shape[0]), s.shape)
    order = np.lexsort((col, -s), axis=1)[:, :k]
    return np.take_along_axis(s, order, axis=1), order


SHAPES = [  # n, m, d, k, block_queries, block_keys
    (50, 300, 8, 1, 7, 13),  # blocks much smaller than the data, partial last blocks
    (50, 300, 8, 2, 7, 13),
    (64, 1000, 6, 2, 16, 64),
    (33, 257, 5, 3, 64, 1000),  # one block holds everything
    (40, 100, 4, 2, 3, 1),  # one key per block: every tie crosses a block boundary
    (20, 5, 4, 2, 6, 2),
    (10, 10, 3, 10, 3, 3),  # k == m
]


@pytest.mark.parametrize("n, m, d, k, bq, bk", SHAPES)
def test_topk_matches_brute_force_with_exact_ties(n, m, d, k, bq, bk):
    # small integers: every dot product is exact in float32, and there are many exact ties
    rng = np.random.default_rng(n * 1000 + m)
    q = rng.integers(-2, 3, (n, d)).astype(np.float32)
    keys = rng.integers(-2, 3, (m, d)).astype(np.float32)
    sims, idx = topk_search(q, keys, k, block_queries=bq, block_keys=bk)
    ref_s, ref_i = brute_force(q, keys, k)
    assert sims.shape == (n, k) and idx.shape == (n, k)
    assert sims.dtype == np.float32 and idx.dtype == np.int64
    np.testing.assert_array_equal(idx, ref_i)
    np.testing.assert_array_equal(sims, ref_s.astype(np.float32))


@pytest.mark.parametrize("k", [1, 2, 5])
def test_topk_random_normalised(k):
    rng = np.random.default_rng(k)
    q = rng.standard_normal((300, 32)).astype(np.float32)
    keys = rng.standard_normal((5000, 32)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    sims, idx = topk_search(q, keys, k, block_queries=128, block_keys=1024)
    ref_s, ref_i = brute_force(q, keys, k + 1)
    np.testing.assert_allclose(sims, ref_s[:, :k], atol=1e-5)
    # indices must agree wherever the reference ranks are separated by more than float32 noise
    gaps = np.diff(-ref_s, axis=1)  # gap between rank j and j+1 (>= 0)
    for j in range(k):
        clear = (gaps[:, j] > 1e-5) & ((gaps[:, j - 1] > 1e-5) if j else True)
        np.testing.assert_array_equal(idx[clear, j], ref_i[clear, j])


def test_ties_go_to_lower_index_across_blocks():
    keys = np.array([[1, 0], [0, 1], [1, 0], [1, 0], [0.5, 0]], dtype=np.float32)
    q = np.array([[1, 0], [0, 1]], dtype=np.float32)
    # query 0: sims [1, 0, 1, 1, .5] -> ties at 1 among keys 0, 2, 3 -> top-2 = keys 0, 2
    # query 1: sims [0, 1, 0, 0, 0]  -> key 1, then the tie at 0 among 0, 2, 3, 4 -> key 0
    for bk in (1, 2, 3, 5, 100):
        sims, idx = topk_search(q, keys, 2, block_queries=1, block_keys=bk)
        assert idx.tolist() == [[0, 2], [1, 0]], bk
        assert sims.tolist() == [[1.0, 1.0], [1.0, 0.0]]
        sims, idx = topk_search(q, keys, 4, block_keys=bk)
        assert idx.tolist() == [[0, 2, 3, 4], [1, 0, 2, 3]], bk


def test_fewer_keys_than_k_pads():
    keys = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    sims, idx = topk_search(q, keys, 4)
    # m = 2 < k = 4: shape stays (1, 4), missing columns are idx -1 / sim -inf
    assert idx.tolist() == [[1, 0, -1, -1]]
    assert sims[0, :2].tolist() == [1.0, 0.0] and np.isneginf(sims[0, 2:]).all()
    sims, idx = topk_search(q, np.zeros((0, 2), dtype=np.float32), 2)
    assert idx.tolist() == [[-1, -1]] and np.isneginf(sims).all()


def test_empty_queries_and_bad_input():
    sims, idx = topk_search(np.zeros((0, 3), np.float32), np.ones((4, 3), np.float32), 2)
    assert sims.shape == (0, 2) and idx.shape == (0, 2)
    with pytest.raises(ValueError):
        topk_search(np.ones((2, 3)), np.ones((4, 2)), 1)  # dimension mismatch
    with pytest.raises(ValueError):
        topk_search(np.ones((2, 3)), np.ones((4, 3)), 0)
    with pytest.raises(ValueError):
        topk_search(np.ones(3), np.ones((4, 3)), 1)


def test_float64_and_torch_inputs():
    rng = np.random.default_rng(3)
    q = rng.integers(-3, 4, (9, 4)).astype(np.float64)
    keys = rng.integers(-3, 4, (30, 4)).astype(np.float64)
    ref_s, ref_i = brute_force(q, keys, 2)
    sims, idx = topk_search(q, keys, 2, block_keys=7)
    np.testing.assert_array_equal(idx, ref_i)
    torch = pytest.importorskip("torch")
    sims_t, idx_t = topk_search(torch.from_numpy(q), torch.from_numpy(keys), 2, block_keys=7)
    np.testing.assert_array_equal(idx_t, ref_i)
    np.testing.assert_array_equal(sims_t, sims)


def test_swap_decisions_threshold():
    sims = np.array([0.75, 0.7499, 0.9, 0.0, 1.0], dtype=np.float32)
    # Eq. 6: keep iff sim >= 0.75 (0.75 is exact in float32; 0.7499 is below)
    assert swap_decisions(sims).tolist() == [True, False, True, False, True]
    assert swap_decisions(sims.astype(np.float64)).tolist() == [True, False, True, False, True]
    assert swap_decisions(sims, sim_threshold=0.9).tolist() == [False, False, True, False, True]
    assert swap_decisions(np.array([], dtype=np.float32)).tolist() == []


def test_keep_rate_threshold_matches_the_reference_keep_rate():
    from builders.ops.swap import keep_rate_threshold

    ref = np.array([0.90, 0.80, 0.76, 0.74, 0.50])   # 3 of 5 pass 0.75 -> rate 0.6, k = 3
    tgt = np.array([0.85, 0.70, 0.72, 0.69, 0.40])   # sorted desc 0.85, 0.72, 0.70 -> third largest 0.70
    thr, rate = keep_rate_threshold(ref, tgt, 0.75)
    assert rate == 0.6 and thr == 0.70
    assert int((tgt >= thr).sum()) == 3
    thr0, rate0 = keep_rate_threshold(np.array([0.1, 0.2]), np.array([0.3, 0.6]), 0.75)  # nothing kept
    assert rate0 == 0.0 and thr0 > 0.6 and not (np.array([0.3, 0.6]) >= thr0).any()
    with pytest.raises(ValueError):
        keep_rate_threshold(np.array([0.8]), np.array([0.8, 0.9]))
