"""CrossTask zero-shot step localisation: Average R@1 over tasks, on all videos or on 20 random sets
(docs/evaluation.md). Pure functions over per-video hit counts (no file reading).

The per-video counts come from :func:`eval.metrics.grounding.step_targets` / :func:`~eval.metrics.grounding.step_hits`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

__all__ = ["PROTOCOLS", "average_recall", "avg_r1_over_sets", "sample_sets", "task_recalls"]

#: "sets": mean over random sets of videos (default); "all": every video once (docs/evaluation.md)
PROTOCOLS = ("sets", "all")


def task_recalls(
    hits: Sequence[int] | np.ndarray,
    annotated: Sequence[int] | np.ndarray,
    task_of_video: Sequence[int] | np.ndarray,
    n_tasks: int,
) -> np.ndarray:
    """Recall per task, pooled inside the task: ``sum_v hits_v / sum_v annotated_v`` (docs/evaluation.md).

    ``hits[v]`` / ``annotated[v]`` are one video's hit and annotated-step counts, ``task_of_video[v]`` its task index in
    ``[0, n_tasks)``. A task with no annotated step gets NaN (skipped by :func:`average_recall`).
    """
    task = np.asarray(task_of_video, dtype=np.int64)
    num = np.bincount(task, weights=np.asarray(hits, dtype=np.float64), minlength=n_tasks)
    den = np.bincount(task, weights=np.asarray(annotated, dtype=np.float64), minlength=n_tasks)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def average_recall(recalls: np.ndarray) -> float:
    """Macro average over the tasks that have a recall (NaN = no annotated step in the set); NaN if none."""
    r = np.asarray(recalls, dtype=np.float64)
    r = r[~np.isnan(r)]
    return float(r.mean()) if r.size else float("nan")


def sample_sets(n_videos: int, n_sets: int = 20, set_size: int = 1850, seed: int = 0) -> list[list[int]]:
    """Indices of the random video sets: set ``i`` is ``random.seed(seed + i); random.sample(videos, min(size, n))``
    over the videos in file order (docs/evaluation.md). A private ``random.Random`` gives the same draws as the
    module-level functions without touching the global state.
    """
    k = min(set_size, n_videos)
    return [random.Random(seed + i).sample(range(n_videos), k) for i in range(n_sets)]


def avg_r1_over_sets(
    hits: Sequence[int] | np.ndarray,
    annotated: Sequence[int] | np.ndarray,
    task_of_video: Sequence[int] | np.ndarray,
    n_tasks: int,
    sets: Sequence[Sequence[int]],
) -> tuple[float, list[float]]:
    """Mean over sets of the Average R@1 of each set (docs/evaluation.md, protocol "sets"); returns (mean, per set)."""
    h = np.asarray(hits, dtype=np.float64)
    a = np.asarray(annotated, dtype=np.float64)
    task = np.asarray(task_of_video, dtype=np.int64)
    per_set = []
    for members in sets:
        idx = np.asarray(members, dtype=np.int64)
        per_set.append(average_recall(task_recalls(h[idx], a[idx], task[idx], n_tasks)))
    return (float(np.mean(per_set)) if per_set else float("nan")), per_set
