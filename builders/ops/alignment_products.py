"""Products of the pairwise posteriors: paraphrases and single-step -> multi-step breakdowns (Lin et al., ACL 2020, §5.2, §5.3).

Documented in docs/corpora/marc.md ("Pipeline", steps 8-9).

- Paraphrases: every directed alignment (source instruction -> its argmax target) with posterior
  γ > ``paraphrase_threshold`` (0.5) is a paraphrase pair; an instruction pair found in both directions of a recipe
  pair is one row with the larger probability and ``directions = "both"``.
- Multi-step breakdowns (text-text pairs, each direction): for target instruction n, M_n = the source instructions
  whose argmax is n with γ > ``breakdown_threshold`` (0.9); |M_n| >= 2 gives one row (single = e^(n),
  multi = M_n in source order, ``contiguous`` when M_n is a run of consecutive indices).

Pure functions over the per-source-instruction decisions (target index and probability arrays).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Breakdown", "Paraphrase", "multi_step_breakdowns", "paraphrases"]

Direction = Literal["a_to_b", "b_to_a", "both"]


@dataclass(frozen=True)
class Paraphrase:
    """Instruction ``a_index`` of recipe a paraphrases ``b_index`` of recipe b, with its probability and direction."""

    a_index: int
    b_index: int
    probability: float
    directions: Direction


@dataclass(frozen=True)
class Breakdown:
    """Target instruction ``single_index`` broken down into the source instructions ``multi_indices`` (Lin et al., ACL
    2020, §5.3)."""

    single_index: int
    multi_indices: tuple[int, ...]
    probabilities: tuple[float, ...]
    contiguous: bool


def _directed(target: Sequence[int] | np.ndarray, prob: Sequence[float] | np.ndarray, threshold: float
              ) -> dict[tuple[int, int], float]:
    t = np.asarray(target, dtype=np.int64)
    p = np.asarray(prob, dtype=np.float64)
    if t.shape != p.shape:
        raise ValueError("target indices and probabilities must have the same length")
    keep = np.flatnonzero((p > threshold) & (t >= 0))
    return {(int(m), int(t[m])): float(p[m]) for m in keep}


def paraphrases(a_to_b_target: Sequence[int] | np.ndarray, a_to_b_prob: Sequence[float] | np.ndarray,
                b_to_a_target: Sequence[int] | np.ndarray | None = None,
                b_to_a_prob: Sequence[float] | np.ndarray | None = None,
                threshold: float = 0.5) -> list[Paraphrase]:
    """Paraphrase rows of one recipe pair (docs/corpora/marc.md), sorted by (a_index, b_index).

    ``a_to_b_*``: for each instruction of a, its argmax instruction in b and the posterior; ``b_to_a_*`` the other
    direction (optional). Alignments with probability > ``threshold`` are kept; found in both directions -> one row.
    """
    forward = _directed(a_to_b_target, a_to_b_prob, threshold)
    backward: dict[tuple[int, int], float] = {}
    if b_to_a_target is not None:
        if b_to_a_prob is None:
            raise ValueError("b_to_a_prob is required with b_to_a_target")
        backward = {(a, b): p for (b, a), p in _directed(b_to_a_target, b_to_a_prob, threshold).items()}
    rows = []
    for key in sorted(set(forward) | set(backward)):
        if key in forward and key in backward:
            rows.append(Paraphrase(key[0], key[1], max(forward[key], backward[key]), "both"))
        elif key in forward:
            rows.append(Paraphrase(key[0], key[1], forward[key], "a_to_b"))
        else:
            rows.append(Paraphrase(key[0], key[1], backward[key], "b_to_a"))
    return rows


def multi_step_breakdowns(target: Sequence[int] | np.ndarray, prob: Sequence[float] | np.ndarray,
                          threshold: float = 0.9, min_steps: int = 2) -> list[Breakdown]:
    """Single -> multi-step rows of one direction of a text-text pair (docs/corpora/marc.md), sorted by ``single_index``.

    M_n = source instructions m (in order) with ``target[m] == n`` and ``prob[m] > threshold``; a row per n with
    |M_n| >= ``min_steps``.
    """
    t = np.asarray(target, dtype=np.int64)
    p = np.asarray(prob, dtype=np.float64)
    if t.shape != p.shape:
        raise ValueError("target indices and probabilities must have the same length")
    keep = np.flatnonzero((p > threshold) & (t >= 0))
    rows = []
    for n in np.unique(t[keep]).tolist():
        members = keep[t[keep] == n]
        if members.size >= min_steps:
            contiguous = bool(np.all(np.diff(members) == 1))
            rows.append(Breakdown(int(n), tuple(int(m) for m in members), tuple(float(x) for x in p[members]),
                                  contiguous))
    return rows
