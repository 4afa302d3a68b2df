"""Paraphrases (marc.md §3.9) and multi-step breakdowns (§3.10) from pairwise posteriors."""

from __future__ import annotations

import numpy as np
import pytest

from builders.ops.alignment_products import (
    Breakdown,
    Paraphrase,
    multi_step_breakdowns,
    paraphrases,
)


def test_paraphrases_merge_both_directions():
    # a -> b: 0->1 (0.9), 1->1 (0.5: not > 0.5), 2->0 (0.7)
    # b -> a: 0->2 (0.6), 1->0 (0.95), 2->2 (0.3)
    rows = paraphrases([1, 1, 0], [0.9, 0.5, 0.7], [2, 0, 2], [0.6, 0.95, 0.3])
    assert rows == [
        Paraphrase(0, 1, 0.95, "both"),  # (a0, b1) in both directions: max probability
        Paraphrase(2, 0, 0.7, "both"),
    ]


def test_paraphrases_single_direction_and_threshold():
    rows = paraphrases([1, 0], [0.9, 0.55], [1, 1, 0], [0.2, 0.8, 0.99], threshold=0.5)
    assert rows == [Paraphrase(0, 1, 0.9, "a_to_b"), Paraphrase(0, 2, 0.99, "b_to_a"),
                    Paraphrase(1, 0, 0.55, "a_to_b"), Paraphrase(1, 1, 0.8, "b_to_a")]
    assert paraphrases([0, 1], [0.9, 0.8], threshold=0.85) == [Paraphrase(0, 0, 0.9, "a_to_b")]
    assert paraphrases([-1], [0.9]) == []  # no target
    with pytest.raises(ValueError):
        paraphrases([0], [0.9, 0.8])
    with pytest.raises(ValueError):
        paraphrases([0], [0.9], [0])


def test_multi_step_breakdowns_contiguous_flag():
    target = np.array([0, 0, 1, 2, 2, 1, 2, 3])
    prob = np.array([0.95, 0.92, 0.99, 0.91, 0.97, 0.93, 0.5, 0.99])
    rows = multi_step_breakdowns(target, prob)
    assert rows == [
        Breakdown(0, (0, 1), (0.95, 0.92), True),
        Breakdown(1, (2, 5), (0.99, 0.93), False),
        Breakdown(2, (3, 4), (0.91, 0.97), True),  # source 6 has 0.5, not > 0.9
    ]


def test_multi_step_breakdowns_threshold_is_strict_and_min_steps():
    assert multi_step_breakdowns([0, 0], [0.9, 0.95]) == []  # 0.9 is not > 0.9
    assert multi_step_breakdowns([0, 0, 0], [0.91, 0.95, 0.99], min_steps=4) == []
    assert multi_step_breakdowns([], []) == []
