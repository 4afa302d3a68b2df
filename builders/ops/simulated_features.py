"""Simulated per-second visual features and the matching short-term text tower (docs/corpora/howtostep.md).

``visual_features=simulated`` (bundled sample, tests; provenance ``visual_features="simulated"``): frame
t = L2norm(P·ē_t + 0.5·ε_t), where ē_t is the mean of the L2-normalised text embeddings of the narrations active at
second t (the Y_NV activity rule of ``ops.step_timestamps``; the zero vector when none), P is a fixed [dim × d_text]
matrix with N(0, 1/dim) entries (``np.random.default_rng(seed)``, seed 0), and ε_t ~ N(0, I/dim) drawn from
``np.random.default_rng(1 + t)``. So ‖P·ē_t‖ ≈ 1 for a single narration and ‖0.5·ε_t‖ ≈ 0.5. The simulated
short-term text tower is P·ê (same P). Numbers computed on these features say nothing about real grounding.

ε_t depends only on (t, dim), never on the video or on T: the noise rows are drawn once per process (one generator
per new second, the toolkit's seeding) and cached; per video everything is vectorised.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np

from builders.ops.step_timestamps import l2_normalise, narration_frame_matrix

__all__ = ["NOISE_SCALE", "SIM_DIM", "noise_rows", "projection_matrix", "simulated_features", "simulated_text_tower"]

SIM_DIM = 768  # CLIP ViT-L/14 / InternVideo-MM-L14 feature width (Li et al., ECCV 2024, supp. §6.1)
NOISE_SCALE = 0.5  # frame = L2norm(P·ē + 0.5·ε)

_noise_cache: dict[int, np.ndarray] = {}
_noise_lock = threading.Lock()


@lru_cache(maxsize=16)
def _projection(dim: int, d_text: int, seed: int) -> np.ndarray:
    P = np.random.default_rng(seed).normal(0.0, np.sqrt(1.0 / dim), size=(dim, d_text))
    P.setflags(write=False)
    return P


def projection_matrix(d_text: int, dim: int = SIM_DIM, seed: int = 0) -> np.ndarray:
    """P [dim × d_text], entries N(0, 1/dim) from ``default_rng(seed)``; float64, read-only, cached."""
    if dim < 1 or d_text < 1:
        raise ValueError(f"dim and d_text must be >= 1, got {dim}, {d_text}")
    return _projection(int(dim), int(d_text), int(seed))


def noise_rows(T: int, dim: int = SIM_DIM) -> np.ndarray:
    """ε_0..ε_{T−1} [T, dim]: row t ~ N(0, I/dim) from ``default_rng(1 + t)``, float64, read-only.
    Rows are generated once per (t, dim) and cached, so row t never depends on T."""
    T, dim = int(T), int(dim)
    if T < 0 or dim < 1:
        raise ValueError(f"T must be >= 0 and dim >= 1, got {T}, {dim}")
    with _noise_lock:
        bank = _noise_cache.get(dim)
        have = 0 if bank is None else bank.shape[0]
        if have < T:
            scale = np.sqrt(1.0 / dim)
            new = np.stack([np.random.default_rng(1 + t).normal(0.0, scale, size=dim) for t in range(have, T)])
            bank = new if bank is None else np.concatenate([bank, new])
            bank.setflags(write=False)
            _noise_cache[dim] = bank
    return bank[:T] if T else np.zeros((0, dim))


def simulated_features(
    narr_emb: np.ndarray, starts: np.ndarray, ends: np.ndarray, T: int, dim: int = SIM_DIM, seed: int = 0
) -> np.ndarray:
    """Simulated visual features float32 [T, dim]: row t = L2norm(P·ē_t + 0.5·ε_t), ē_t = mean of the
    L2-normalised embeddings [K, D] of the narrations active at second t (``narration_frame_matrix`` rule), zero
    when none. Narration embeddings are L2-normalised here again (harmless for normalised input)."""
    E = np.asarray(narr_emb, dtype=np.float64)
    if E.ndim != 2:
        raise ValueError(f"narr_emb must be 2-D (K, D), got shape {E.shape}")
    if E.size and not np.isfinite(E).all():
        raise ValueError("narr_emb contains NaN or Inf")
    T = int(T)
    Y, _ = narration_frame_matrix(starts, ends, T)
    if Y.shape[0] != E.shape[0]:
        raise ValueError(f"{E.shape[0]} narration embeddings but {Y.shape[0]} narration times")
    if T == 0:
        return np.zeros((0, dim), dtype=np.float32)
    d_text = E.shape[1] if E.shape[1] else 1
    P = projection_matrix(d_text, dim, seed)
    if E.shape[0] == 0 or E.shape[1] == 0:
        mean = np.zeros((T, d_text))
    else:
        Yd = Y.astype(np.float64)
        counts = Yd.sum(axis=0)
        mean = (Yd.T @ l2_normalise(E)) / np.maximum(counts, 1.0)[:, None]  # zero rows where no narration
    x = mean @ P.T + NOISE_SCALE * noise_rows(T, dim)
    return l2_normalise(x).astype(np.float32)


def simulated_text_tower(text_emb: np.ndarray, dim: int = SIM_DIM, seed: int = 0) -> np.ndarray:
    """The simulated short-term text tower P·ê, ê = L2-normalised text embedding; float32 [L, dim], not
    re-normalised (A_short is a cosine, so only the direction matters)."""
    E = np.asarray(text_emb, dtype=np.float64)
    if E.ndim != 2:
        raise ValueError(f"text_emb must be 2-D (L, D), got shape {E.shape}")
    if E.size and not np.isfinite(E).all():
        raise ValueError("text_emb contains NaN or Inf")
    if E.shape[0] == 0:
        return np.zeros((0, dim), dtype=np.float32)
    return (l2_normalise(E) @ projection_matrix(E.shape[1], dim, seed).T).astype(np.float32)
