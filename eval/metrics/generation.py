"""ShowHowTo generation metrics: step faithfulness, scene consistency, task faithfulness and FID.

Contract: docs/corpora/showhowto.md and docs/evaluation.md; Souček et al., CVPR 2025, Sec. 5.1 and
App. D. No upstream evaluation code exists, so every choice below that the paper leaves open is flagged **[unverified]**
and stays a switch of ``eval/run.py showhowto``:

- embeddings are L2-normalised and compared by cosine similarity [unverified]; argmax ties go to the lowest index;
- SF classes ``J = {1..n}`` by default, ``J = {0..n}`` with the input prompt τ_0 [unverified];
- SC gallery = frames ``I_i, i >= 1`` of every test sequence, input frames excluded [unverified];
- TF classes = bare task names [unverified];
- every metric is a per-sequence mean averaged over sequences ("All metrics are first averaged per sequence", App. D);
  ``pooled=True`` gives the image-level mean for comparison.

Everything here is pure numpy on feature arrays (one row per image / text) plus integer labels; the models that
produce the features live in the protocol (``eval/protocols/showhowto.py``). A generated image that is missing is
simply absent from the rows: the per-sequence denominator ``n`` still counts it, so it scores as a miss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "MetricValue",
    "cosine_similarity",
    "frechet_distance",
    "frechet_distance_from_features",
    "gaussian_statistics",
    "l2_normalize",
    "masked_first_argmax",
    "scene_consistency",
    "scene_consistency_hits",
    "sequence_mean",
    "step_faithfulness",
    "step_faithfulness_hits",
    "task_faithfulness",
]

#: ``torch.nn.functional.normalize``'s floor on the norm: an all-zero row stays all-zero instead of becoming NaN
NORM_EPS = 1e-12
#: rows of a similarity block computed at once (memory: CHUNK x gallery float64)
CHUNK_ROWS = 1024
#: float64 elements of the gathered per-image class table in one SF chunk (32 MB)
GATHER_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class MetricValue:
    """One metric: the aggregate (``None`` when undefined), the per-sequence values and the hit count."""

    value: float | None
    per_sequence: np.ndarray  # float64 [S], NaN where a sequence has nothing to score
    hits: int
    total: int


def l2_normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """float64 ``x / max(||x||, 1e-12)`` along ``axis`` ("All embeddings L2-normalised", [unverified])."""
    x = np.asarray(x, dtype=np.float64)
    norm = np.linalg.norm(x, axis=axis, keepdims=True)
    return x / np.maximum(norm, NORM_EPS)


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[A, d] x [B, d] -> [A, B]`` cosine similarities in float64 (similarity = cosine [unverified])."""
    return l2_normalize(a) @ l2_normalize(b).T


def masked_first_argmax(scores: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Row-wise argmax over the ``valid`` columns; ties go to the lowest column index (numpy rule).

    A row without any valid column returns -1.
    """
    scores = np.where(valid, scores, -np.inf)
    idx = np.argmax(scores, axis=1)
    return np.where(valid.any(axis=1), idx, -1)


def sequence_mean(hit_counts: np.ndarray, denominators: np.ndarray, pooled: bool = False) -> MetricValue:
    """Aggregate per-sequence hit counts over their denominators (paper App. D: per sequence, then over sequences).

    ``pooled=True`` divides the total hits by the total denominator (image-level mean). Sequences with a zero
    denominator have a NaN per-sequence value and leave both means; no sequence at all -> ``value=None``.
    """
    hits = np.asarray(hit_counts, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = np.where(den > 0, hits / np.where(den > 0, den, 1.0), np.nan)
    scored = den > 0
    if not scored.any():
        value = None
    elif pooled:
        value = float(hits[scored].sum() / den[scored].sum())
    else:
        value = float(per[scored].mean())
    return MetricValue(value, per, int(hits[scored].sum()), int(den[scored].sum()))


def step_faithfulness_hits(gen: np.ndarray, gen_seq: np.ndarray, gen_step: np.ndarray, prompts: np.ndarray,
                           prompt_seq: np.ndarray, prompt_step: np.ndarray, n_steps: np.ndarray,
                           include_input: bool = False) -> np.ndarray:
    """Per generated image: is its own prompt the argmax over the sequence's classes? (SF, Souček et al., CVPR 2025,
    Sec. 5.1)

    ``gen`` ``[M, d]`` CLIP image features of Î_i with sequence ``gen_seq`` (0..S-1) and step ``gen_step`` (i >= 1);
    ``prompts`` ``[P, d]`` CLIP text features of τ_j with ``prompt_seq`` / ``prompt_step`` (j >= 0). ``n_steps[s]`` = n.
    Classes ``J = {1..n}`` (default) or ``{0..n}`` with ``include_input`` ([unverified]). Columns are
    ordered by step ``j``, so a tie goes to the lowest step. Vectorised: an ``[S, n_max + 1]`` index of prompt rows;
    each chunk of images gathers its own sequence's prompts ``[rows, n_max + 1, d]`` and is scored by ``einsum``.
    """
    gen_n = l2_normalize(gen)
    prm_n = l2_normalize(prompts)
    n_steps = np.asarray(n_steps, dtype=np.int64)
    gen_seq = np.asarray(gen_seq, dtype=np.int64)
    gen_step = np.asarray(gen_step, dtype=np.int64)
    width = int(n_steps.max(initial=0)) + 1
    # row of τ_j of sequence s in ``prompts`` (-1: absent); classes = present prompts with lowest <= j <= n
    index = np.full((n_steps.size, width), -1, dtype=np.int64)
    index[np.asarray(prompt_seq, dtype=np.int64), np.asarray(prompt_step, dtype=np.int64)] = np.arange(len(prm_n))
    steps = np.arange(width)
    lowest = 0 if include_input else 1
    classes = (index >= 0) & (steps[None, :] >= lowest) & (steps[None, :] <= n_steps[:, None])
    hits = np.zeros(gen_n.shape[0], dtype=bool)
    dim = prm_n.shape[1] if prm_n.ndim == 2 else 1
    rows = max(1, GATHER_ELEMENTS // (width * dim))  # bounded memory for the gathered [rows, width, d] block
    for lo in range(0, gen_n.shape[0], rows):
        sl = slice(lo, lo + rows)
        seq = gen_seq[sl]
        block = prm_n[np.maximum(index[seq], 0)]
        sims = np.einsum("md,mjd->mj", gen_n[sl], block)
        best = masked_first_argmax(sims, classes[seq])
        hits[sl] = best == gen_step[sl]
    return hits


def step_faithfulness(gen: np.ndarray, gen_seq: np.ndarray, gen_step: np.ndarray, prompts: np.ndarray,
                      prompt_seq: np.ndarray, prompt_step: np.ndarray, n_steps: np.ndarray,
                      include_input: bool = False, pooled: bool = False) -> MetricValue:
    """SF = mean over sequences of ``mean_{i=1..n} [argmax_{j in J} cos(clip(Î_i), clip(τ_j)) == i]`` (Souček et al.,
    CVPR 2025, Sec. 5.1).

    Denominator per sequence is ``n`` (a missing image is a miss). Chance level is ``1/|J|`` per sequence.
    """
    hits = step_faithfulness_hits(gen, gen_seq, gen_step, prompts, prompt_seq, prompt_step, n_steps, include_input)
    counts = np.bincount(np.asarray(gen_seq, dtype=np.int64), weights=hits, minlength=len(n_steps))
    return sequence_mean(counts, n_steps, pooled)


def scene_consistency_hits(gen: np.ndarray, gen_video: np.ndarray, gallery: np.ndarray,
                           gallery_video: np.ndarray) -> np.ndarray:
    """Per generated image: is the nearest gallery frame (cosine, DINOv2) from the image's own video? (SC, Souček et
    al., CVPR 2025, Sec. 5.1)

    ``gen_video`` and ``gallery_video`` are integer video labels in one shared coding. The gallery is the caller's:
    frames ``I_i, i >= 1`` of every test sequence (input frames excluded [unverified]). Ties -> the lowest
    gallery row. An empty gallery gives no hit.
    """
    gen_n = l2_normalize(gen)
    gal_n = l2_normalize(gallery)
    gen_video = np.asarray(gen_video, dtype=np.int64)
    gallery_video = np.asarray(gallery_video, dtype=np.int64)
    hits = np.zeros(gen_n.shape[0], dtype=bool)
    if gal_n.shape[0] == 0:
        return hits
    for lo in range(0, gen_n.shape[0], CHUNK_ROWS):
        sl = slice(lo, lo + CHUNK_ROWS)
        best = np.argmax(gen_n[sl] @ gal_n.T, axis=1)
        hits[sl] = gallery_video[best] == gen_video[sl]
    return hits


def scene_consistency(gen: np.ndarray, gen_seq: np.ndarray, gallery: np.ndarray, gallery_seq: np.ndarray,
                      n_steps: np.ndarray, pooled: bool = False) -> MetricValue:
    """SC = mean over sequences of ``mean_{i=1..n} [video(NN_gallery(dino(Î_i))) == video(s)]`` (Souček et al., CVPR
    2025, Sec. 5.1).

    ``gen_seq`` / ``gallery_seq`` label rows by sequence (= video: ``sequence_id = video_id``,
    docs/corpora/showhowto.md); gallery labels may go beyond ``len(n_steps)`` (frames of test videos that are not
    scored). Missing images are misses.
    """
    hits = scene_consistency_hits(gen, gen_seq, gallery, gallery_seq)
    counts = np.bincount(np.asarray(gen_seq, dtype=np.int64), weights=hits, minlength=len(n_steps))
    return sequence_mean(counts, n_steps, pooled)


def task_faithfulness(gen: np.ndarray, gen_seq: np.ndarray, n_sequences: int, seq_task: np.ndarray,
                      task_text: np.ndarray) -> MetricValue:
    """TF = mean over sequences of ``[argmax_c cos(normalize(mean_i normalize(clip(Î_i))), clip(task_c)) == task(s)]``.

    Souček et al., CVPR 2025, Sec. 5.1 and App. D: the sequence embedding is the mean of the L2-normalised image
    features, normalised again; classes are the rows of ``task_text`` (bare task names [unverified]); ``seq_task[s]`` is
    the class row of sequence ``s`` or -1 (no task: the sequence leaves TF). A sequence with a task but no generated
    image is a miss.
    """
    gen_n = l2_normalize(gen)
    gen_seq = np.asarray(gen_seq, dtype=np.int64)
    seq_task = np.asarray(seq_task, dtype=np.int64)
    sums = np.zeros((n_sequences, gen_n.shape[1] if gen_n.ndim == 2 else 0))
    np.add.at(sums, gen_seq, gen_n)
    counts = np.bincount(gen_seq, minlength=n_sequences)
    means = sums / np.maximum(counts, 1)[:, None]
    seq_emb = l2_normalize(means)
    if len(task_text):
        pred = np.argmax(cosine_similarity(seq_emb, task_text), axis=1)
    else:
        pred = np.full(n_sequences, -1)
    hit = (pred == seq_task) & (counts > 0) & (seq_task >= 0)
    return sequence_mean(hit.astype(np.float64), (seq_task >= 0).astype(np.float64), pooled=False)


def gaussian_statistics(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance (``ddof=1``, rows = samples) as pytorch-fid's ``calculate_activation_statistics``."""
    feats = np.asarray(features, dtype=np.float64)
    if feats.ndim != 2 or feats.shape[0] < 2:
        raise ValueError(f"FID needs at least 2 feature rows [N, d], got shape {feats.shape}")
    return feats.mean(axis=0), np.cov(feats, rowvar=False, ddof=1).reshape(feats.shape[1], feats.shape[1])


def _sqrtm(matrix: np.ndarray) -> np.ndarray:
    """scipy's principal matrix square root (complex where the product is not positive definite)."""
    import warnings

    from scipy import linalg

    with warnings.catch_warnings():  # near-singular products warn; the caller checks finiteness
        warnings.simplefilter("ignore")
        root = linalg.sqrtm(matrix)
    if isinstance(root, tuple):  # scipy versions that return (root, error estimate)
        root = root[0]
    return np.asarray(root)


def frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray,
                     eps: float = 1e-6) -> float:
    """``||mu1 - mu2||^2 + Tr(S1 + S2 - 2 sqrtm(S1 S2))`` (FID, Souček et al., CVPR 2025, App. E; Heusel et al.'s
    Fréchet distance).

    Same numerical rules as pytorch-fid's ``calculate_frechet_distance`` (checked side by side by
    ``tests/crosscheck/fid_reference.py``): the square root of the product ``S1 @ S2`` by ``scipy.linalg.sqrtm``; if
    it is not finite (singular product), both covariances get ``eps * I`` added and the root is taken again; a
    complex result keeps its real part unless an imaginary diagonal entry exceeds 1e-3 (then ``ValueError``).
    """
    mu1, mu2 = np.atleast_1d(np.asarray(mu1, np.float64)), np.atleast_1d(np.asarray(mu2, np.float64))
    sigma1, sigma2 = np.atleast_2d(np.asarray(sigma1, np.float64)), np.atleast_2d(np.asarray(sigma2, np.float64))
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape or sigma1.shape != (mu1.size, mu1.size):
        raise ValueError(f"FID statistics disagree in shape: mu {mu1.shape} / {mu2.shape}, "
                         f"sigma {sigma1.shape} / {sigma2.shape}")
    root = _sqrtm(sigma1 @ sigma2)
    if not np.isfinite(root).all():
        jitter = eps * np.eye(sigma1.shape[0])
        root = _sqrtm((sigma1 + jitter) @ (sigma2 + jitter))
    if np.iscomplexobj(root):
        imag = np.abs(np.diagonal(root).imag)
        if imag.size and imag.max() > 1e-3:
            raise ValueError(f"FID: the square root of the covariance product has an imaginary component "
                             f"{np.abs(root.imag).max():.3g}")
        root = root.real
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2.0 * np.trace(root))


def frechet_distance_from_features(generated: np.ndarray, real: np.ndarray, eps: float = 1e-6) -> float:
    """FID between two feature sets ``[N, d]`` (generated Î_i vs source frames I_i, i >= 1; ddof=1)."""
    mu_g, s_g = gaussian_statistics(generated)
    mu_r, s_r = gaussian_statistics(real)
    return frechet_distance(mu_g, s_g, mu_r, s_r, eps=eps)
