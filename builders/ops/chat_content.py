"""Chat/content sentence labels and features of the MARC video side, as pure functions
(docs/corpora/marc.md; Lin et al., ACL 2020, A.1.3).

A transcript sentence of a YouCook2 video is **content** iff at least half of its duration lies inside the union of
the video's annotated segments (a zero-length sentence: its midpoint inside), else **chat**. The classifier is
trained on these labels with a split by recipe type; the offline default classifier (``logreg``) uses a sentence
embedding plus the position features below.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

#: paper A.1.3: 90,927 sentences split 73,728 / 7,767 / 9,432 -> test >= 10.37 %, validation >= 8.54 %
TEST_FRACTION = 9432 / 90927
VALIDATION_FRACTION = 7767 / 90927


def merge_intervals(segments: Iterable[Sequence[float]]) -> list[tuple[float, float]]:
    """The union of ``[start, end]`` segments as sorted disjoint intervals (reversed and NaN segments ignored)."""
    spans = sorted((float(s), float(e)) for s, e in segments if math.isfinite(s) and math.isfinite(e) and e >= s)
    out: list[tuple[float, float]] = []
    for s, e in spans:
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def content_labels(sentences: Sequence[Sequence[float]], segments: Iterable[Sequence[float]],
                   min_overlap: float = 0.5) -> np.ndarray:
    """1 (content) iff ``>= min_overlap`` of the sentence's duration lies in the union of ``segments``; a
    zero-length sentence is content iff its midpoint lies inside (closed intervals). Returns int8 ``[n]``."""
    union = merge_intervals(segments)
    out = np.zeros(len(sentences), dtype=np.int8)
    if not union:
        return out
    starts = np.array([u[0] for u in union])
    ends = np.array([u[1] for u in union])
    for i, (s, e) in enumerate(sentences):
        s, e = float(s), float(e)
        if e <= s:
            mid = (s + e) / 2
            out[i] = int(bool(np.any((starts <= mid) & (mid <= ends))))
            continue
        inside = np.clip(np.minimum(ends, e) - np.maximum(starts, s), 0.0, None).sum()
        out[i] = int(inside >= min_overlap * (e - s))
    return out


def recipe_type_split(sentences_per_type: Mapping[str, int], test_fraction: float = TEST_FRACTION,
                      validation_fraction: float = VALIDATION_FRACTION) -> dict[str, str]:
    """Split by recipe type (dish): types ordered by sha1; test until it holds >= ``test_fraction`` of the
    sentences, then validation until >= ``validation_fraction``, the rest train (Lin et al., ACL 2020, A.1.3)."""
    total = sum(sentences_per_type.values())
    order = sorted(sentences_per_type, key=lambda t: hashlib.sha1(str(t).encode()).hexdigest())
    out: dict[str, str] = {}
    n_test = n_val = 0
    for t in order:
        if n_test < test_fraction * total:
            out[t] = "test"
            n_test += sentences_per_type[t]
        elif n_val < validation_fraction * total:
            out[t] = "validation"
            n_val += sentences_per_type[t]
        else:
            out[t] = "train"
    return out


def position_features(starts: Sequence[float], ends: Sequence[float], n_words: Sequence[int],
                      duration: float) -> np.ndarray:
    """``[r, r², 1[r < 0.1], 1[r > 0.9], log(1 + words)]`` with r = sentence midpoint / video duration
    (docs/corpora/marc.md, the ``logreg`` classifier's non-embedding features). Returns float32 ``[n, 5]``."""
    mid = (np.asarray(starts, dtype=np.float64) + np.asarray(ends, dtype=np.float64)) / 2
    r = np.clip(mid / duration, 0.0, 1.0) if duration > 0 else np.zeros_like(mid)
    words = np.asarray(n_words, dtype=np.float64)
    return np.stack([r, r**2, (r < 0.1).astype(float), (r > 0.9).astype(float), np.log1p(words)],
                    axis=1).astype(np.float32).reshape(len(mid), 5)
