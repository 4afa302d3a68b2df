"""The "Swap" of Sieve & Swap: exact nearest-step search and the similarity threshold (Eq. 6-7).

Paper: Batra et al., ECCV 2024, §4.2 "Sieve & Swap ASR Segments" (κ(a) = nearest recipe step
by cosine of MPNet embeddings; keep iff sim ≥ λ_sim = 0.75, Eq. 6); docs/corpora/sieve_swap.md (top-k,
ties by (recipe_id, step_index); blocked search, running top-k, never the full matrix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

import numpy as np

if TYPE_CHECKING:  # torch is optional: only for the annotation
    import torch

ArrayOrTensor = Union[np.ndarray, "torch.Tensor"]

__all__ = ["topk_search", "swap_decisions"]

_NEG_INF = np.float32(-np.inf)


def _as_f32_2d(x: Any, name: str) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor (any device) -> numpy, no torch import needed
        x = x.detach().cpu().float().numpy()
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows, dim), got shape {x.shape}")
    return x


def _block_topk(scores: np.ndarray, kk: int, kth: np.ndarray, out_vals: np.ndarray, out_idx: np.ndarray) -> None:
    """Top-``kk`` of each row of ``scores`` that beat the running k-th best ``kth`` (strictly), in place.

    Pass ``j`` is an ``argmax`` per row (first occurrence = lowest index among equal values) after the elements
    found by passes ``< j`` were set to -inf. A row stops as soon as its best remaining value is not above ``kth``
    (ties with earlier key blocks lose: those keys have lower indices). Passes run over the whole buffer while at
    least half of the rows are still improving (the first key blocks); the few rows that still improve after that
    are finished one row at a time (a loop over improving rows, never over keys), which is cheaper than copying
    them out. So a later key block, where almost no row improves, costs about one argmax pass.
    ``scores`` is scratch (modified). Writes ``out_vals``/``out_idx`` (rows x kk; -inf / -1 where nothing).
    """
    out_vals.fill(_NEG_INF)
    out_idx.fill(-1)
    nrows, ncols = scores.shape
    passes = min(kk, ncols)
    ar = np.arange(nrows)
    alive = np.ones(nrows, dtype=bool)
    j = 0
    while j < passes:
        arg = scores.argmax(axis=1)
        val = scores[ar, arg]
        alive &= val > kth
        out_vals[alive, j] = val[alive]
        out_idx[alive, j] = arg[alive]
        j += 1
        if j == passes:
            return
        scores[ar, arg] = _NEG_INF
        if 2 * int(np.count_nonzero(alive)) < nrows:
            break
    for r in np.flatnonzero(alive).tolist():  # the few rows still improving: finish them row by row
        row, thr = scores[r], kth[r]
        for jj in range(j, passes):
            a = int(row.argmax())
            v = row[a]
            if not v > thr:
                break
            out_vals[r, jj] = v
            out_idx[r, jj] = a
            row[a] = _NEG_INF


def topk_search(queries: ArrayOrTensor, keys: ArrayOrTensor, k: int, block_queries: int = 2048,
                block_keys: int = 16384) -> tuple[np.ndarray, np.ndarray]:
    """Exact maximum-inner-product top-``k`` of every query over ``keys`` (Batra et al., ECCV 2024, Eq. 6 κ(a)).

    ``queries`` (n, d) and ``keys`` (m, d) are float32 (converted if not; torch tensors are accepted and copied to
    CPU); with L2-normalised rows the inner product is the cosine. Blocked: one (block_queries x block_keys) float32
    score buffer is reused (``np.matmul(..., out=)``, BLAS sgemm); each query keeps a running top-k that every key
    block updates; the (n, m) matrix is never built. Per block the top-k costs about k argmax passes over the
    buffer for the first key blocks and about one pass later on (few rows improve), i.e. a few % of the matmul.

    Returns ``(sims (n, k) float32, idx (n, k) int64)``, each row sorted by similarity desc; **equal similarities
    are ordered by the lower key index** (keys sorted by (recipe_id, step_index) give the toolkit's tie rule). When
    ``m < k`` the shape is still (n, k): the missing columns hold idx -1 and sim -inf. Inputs must be finite.
    Default blocks (2048 x 16384, a 128 MiB buffer) were measured fastest on CPU; 8192 x 262144 is a
    GPU-sized example (8 GiB as float32).
    """
    q = _as_f32_2d(queries, "queries")
    kmat = _as_f32_2d(keys, "keys")
    if q.shape[1] != kmat.shape[1]:
        raise ValueError(f"dimension mismatch: queries {q.shape}, keys {kmat.shape}")
    if k < 1:
        raise ValueError("k must be >= 1")
    if block_queries < 1 or block_keys < 1:
        raise ValueError("block sizes must be >= 1")
    n, m = q.shape[0], kmat.shape[0]
    sims = np.full((n, k), _NEG_INF, dtype=np.float32)
    idx = np.full((n, k), -1, dtype=np.int64)
    kk = min(k, m)
    if n == 0 or kk == 0:
        return sims, idx

    bq, bk = min(block_queries, n), min(block_keys, m)
    buf = np.empty(bq * bk, dtype=np.float32)
    blk_vals = np.empty((bq, kk), dtype=np.float32)
    blk_idx = np.empty((bq, kk), dtype=np.int64)
    cat_vals = np.empty((bq, 2 * kk), dtype=np.float32)
    cat_idx = np.empty((bq, 2 * kk), dtype=np.int64)
    for q0 in range(0, n, bq):
        q1 = min(q0 + bq, n)
        nq = q1 - q0
        qb = q[q0:q1]
        run_vals = sims[q0:q1, :kk]  # views into the outputs: the running top-k lives there
        run_idx = idx[q0:q1, :kk]
        for k0 in range(0, m, bk):
            k1 = min(k0 + bk, m)
            scores = buf[: nq * (k1 - k0)].reshape(nq, k1 - k0)
            np.matmul(qb, kmat[k0:k1].T, out=scores)
            bv, bi = blk_vals[:nq], blk_idx[:nq]
            _block_topk(scores, kk, run_vals[:, kk - 1].copy(), bv, bi)
            improved = np.flatnonzero(bv[:, 0] > _NEG_INF)
            if improved.size == 0:
                continue
            bi[improved] += k0
            # Merge: running entries first (lower key indices), then the block's, each already in (sim desc,
            # idx asc) order; a stable sort on -sim therefore yields (sim desc, idx asc) overall.
            cv, ci = cat_vals[: improved.size], cat_idx[: improved.size]
            cv[:, :kk] = run_vals[improved]
            cv[:, kk:] = bv[improved]
            ci[:, :kk] = run_idx[improved]
            ci[:, kk:] = bi[improved]
            order = np.argsort(-cv, axis=1, kind="stable")[:, :kk]
            run_vals[improved] = np.take_along_axis(cv, order, axis=1)
            run_idx[improved] = np.take_along_axis(ci, order, axis=1)
    return sims, idx


def swap_decisions(top1_sims: np.ndarray, sim_threshold: float = 0.75) -> np.ndarray:
    """Keep mask of ASR segments: top-1 step similarity ``≥ λ_sim`` (Batra et al., ECCV 2024, Eq. 6, λ_sim = 0.75).

    Inclusive bound; compared in the dtype of ``top1_sims`` (NumPy 2 rules: a float32 array is compared with the
    threshold rounded to float32). Kept segments take the top-1 step's text, the others are discarded (Eq. 6-7).
    """
    return np.asarray(top1_sims) >= sim_threshold


def keep_rate_threshold(reference_top1: np.ndarray, target_top1: np.ndarray,
                        reference_threshold: float = 0.75) -> tuple[float, float]:
    """The target-model threshold that keeps the same share of segments as the reference model does at
    ``reference_threshold`` (docs/corpora/sieve_swap.md, CPU versus paper configuration: MiniLM's cosines run lower than
    MPNet's, for which Batra et al., ECCV 2024, Eq. 6 sets lambda_sim = 0.75).

    ``reference_top1`` and ``target_top1`` are the top-1 similarities of the same segments under the two models.
    With keep-rate ``r`` of the reference and ``k = round(r * n)``, the result is the k-th largest target
    similarity, so at least ``k`` segments pass it (ties may add more); ``k = 0`` gives a threshold just above the
    largest target similarity. Returns ``(threshold, r)``.
    """
    ref = np.asarray(reference_top1, dtype=np.float64).ravel()
    tgt = np.asarray(target_top1, dtype=np.float64).ravel()
    if ref.size != tgt.size or ref.size == 0:
        raise ValueError(f"need the same, non-zero number of similarities, got {ref.size} and {tgt.size}")
    rate = float(np.mean(ref >= reference_threshold))
    k = int(round(rate * tgt.size))
    if k == 0:
        return float(np.nextafter(tgt.max(), np.inf)), rate
    return float(np.sort(tgt)[::-1][k - 1]), rate
