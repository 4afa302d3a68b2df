"""Joint alignment (builders/ops/joint_alignment.py): Kruskal forest and jointly-alignable paths, marc.md §3.8."""

from __future__ import annotations

import numpy as np
import pytest

from builders.ops.joint_alignment import joint_alignment, undirected_edges


def test_undirected_edges_mean_threshold_and_order():
    # 0->1 0.8 and 1->0 0.6 merge to 0.7; 2->3 0.5 is not > 0.5; 3->2 0.9 alone; self-loop dropped
    u, v, w = undirected_edges([0, 1, 2, 3, 4, 5], [1, 0, 3, 2, 4, 1], [0.8, 0.6, 0.5, 0.9, 0.99, 0.7])
    assert list(zip(u.tolist(), v.tolist())) == [(2, 3), (0, 1), (1, 5)]
    np.testing.assert_allclose(w, [0.9, 0.7, 0.7])  # the 0.7 tie is ordered by (min id, max id)


def test_hand_built_graph():
    # three recipes: A = {0, 1, 2}, B = {3, 4}, C = {5, 6}
    recipe = [0, 0, 0, 1, 1, 2, 2]
    src = [0, 3, 1, 4, 3, 5, 0, 2, 6]
    dst = [3, 0, 4, 1, 5, 3, 5, 6, 2]
    wgt = [0.9, 0.7, 0.95, 0.95, 0.6, 0.8, 0.65, 0.55, 0.4]
    # undirected: {0,3}=0.8, {1,4}=0.95, {3,5}=0.7, {0,5}=0.65, {2,6}=0.55 (0.4 is below the threshold)
    out = joint_alignment(7, recipe, src, dst, wgt)
    assert out.forest_edges == [(1, 4, 0.95), (0, 3, pytest.approx(0.8)), (3, 5, pytest.approx(0.7)),
                                (2, 6, 0.55)]
    # {0,5} closes the cycle 0-3-5 and is not in the forest
    sets = {s.node_ids: s for s in out.aligned_sets}
    assert set(sets) == {(1, 4), (0, 3, 5), (2, 6)}
    assert sets[(0, 3, 5)].min_weight == pytest.approx(0.7)
    assert sets[(1, 4)].min_weight == pytest.approx(0.95)
    assert [s.node_ids for s in out.aligned_sets] == [(0, 3, 5), (1, 4), (2, 6)]  # by smallest node id


def test_paths_never_hold_two_instructions_of_one_recipe_and_need_endpoints():
    # star around node 0 (recipe A): 0-1 (B), 0-2 (C), 0-3 (D), 1-4 (A)
    recipe = [0, 1, 2, 3, 0]
    out = joint_alignment(5, recipe, [0, 0, 0, 1], [1, 2, 3, 4], [0.9, 0.8, 0.7, 0.85])
    assert [(u, v) for u, v, _ in out.forest_edges] == [(0, 1), (1, 4), (0, 2), (0, 3)]
    # 0-1 joins; 1-4 refused (4 shares recipe A with 0); 0-2 extends the path at endpoint 0: 2-0-1;
    # 0-3 refused (0 is no longer an endpoint)
    assert [s.node_ids for s in out.aligned_sets] == [(1, 0, 2)]
    assert out.aligned_sets[0].min_weight == pytest.approx(0.8)


def test_tie_rule_decides_the_forest():
    # a triangle with equal weights: Kruskal takes (0,1), (0,2); (1,2) closes the cycle
    out = joint_alignment(3, [0, 1, 2], [1, 2, 2], [0, 0, 1], [0.6, 0.6, 0.6])
    assert [(u, v) for u, v, _ in out.forest_edges] == [(0, 1), (0, 2)]


def test_counts_text_video_and_empty_graph():
    out = joint_alignment(3, [0, 1, 2], [0, 1], [1, 2], [0.9, 0.8], node_is_video=[False, True, True])
    assert out.aligned_sets[0].node_ids == (0, 1, 2)
    assert (out.aligned_sets[0].num_text, out.aligned_sets[0].num_video) == (1, 2)
    empty = joint_alignment(2, [0, 1], [], [], [])
    assert empty.forest_edges == [] and empty.aligned_sets == []


def test_bad_input():
    with pytest.raises(ValueError):
        joint_alignment(2, [0], [0], [1], [0.9])
    with pytest.raises(ValueError):
        joint_alignment(2, [0, 1], [0], [5], [0.9])
