"""Dish-level joint alignment: maximum spanning forest and jointly-alignable instruction sets (Lin et al., ACL 2020, §3.2).

docs/corpora/marc.md Nodes are all instructions of a dish's recipes (text and video). Every directed pairwise
alignment (a source instruction -> its argmax target) with posterior γ > ``edge_threshold`` (0.5, "greater than") is
an edge; the undirected weight of {u, v} is the mean of the directed weights present (one or two). Kruskal's algorithm
on descending weight, ties broken by (min id, max id), gives the maximum spanning forest. Jointly-alignable sets:
every node starts as a one-node path; scanning the forest edges in the same order, the paths of u and v are joined
when u and v are both endpoints of their paths and the two paths share no recipe; every path of >= 2 nodes is a set
(a tree path with at most one instruction per recipe, as the paper requires).

Pure function over arrays: O(E log E) for the sort, then near-linear union-find (the loop runs over edges once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["AlignedSet", "JointAlignment", "joint_alignment", "undirected_edges"]


@dataclass(frozen=True)
class AlignedSet:
    """A jointly-alignable set: its nodes in path order, the smallest edge weight on the path, text/video counts."""

    node_ids: tuple[int, ...]
    min_weight: float
    num_text: int = 0
    num_video: int = 0


@dataclass
class JointAlignment:
    """Forest edges (u < v, weight) in Kruskal order and the aligned sets (ordered by their smallest node id)."""

    forest_edges: list[tuple[int, int, float]] = field(default_factory=list)
    aligned_sets: list[AlignedSet] = field(default_factory=list)
    edge_threshold: float = 0.5


def undirected_edges(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, threshold: float = 0.5
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directed edges with weight > ``threshold`` merged into undirected ones (u < v) weighted by their mean.

    Returns (u, v, weight) sorted in Kruskal order: descending weight, then (u, v) ascending. Self-loops are dropped.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    keep = (weight > threshold) & (src != dst) & np.isfinite(weight)
    u = np.minimum(src[keep], dst[keep])
    v = np.maximum(src[keep], dst[keep])
    w = weight[keep]
    if u.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), np.zeros(0)
    pairs, inverse = np.unique(np.stack([u, v], axis=1), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    mean = np.bincount(inverse, weights=w) / np.bincount(inverse)
    order = np.lexsort((pairs[:, 1], pairs[:, 0], -mean))
    return pairs[order, 0], pairs[order, 1], mean[order]


def joint_alignment(num_nodes: int, node_recipe: Sequence[int] | np.ndarray, src: Sequence[int] | np.ndarray,
                    dst: Sequence[int] | np.ndarray, weight: Sequence[float] | np.ndarray,
                    edge_threshold: float = 0.5, node_is_video: Sequence[bool] | np.ndarray | None = None
                    ) -> JointAlignment:
    """Maximum spanning forest (Kruskal, ties by (min id, max id)) and jointly-alignable sets of one dish.

    ``node_recipe[i]`` identifies the recipe of node ``i`` (any integer code); ``src``/``dst``/``weight`` are the
    directed alignment edges (all pair types, both directions); ``node_is_video`` feeds the sets' text/video counts.
    """
    node_recipe = np.asarray(node_recipe)
    if node_recipe.shape != (num_nodes,):
        raise ValueError(f"node_recipe must have one entry per node ({num_nodes}), got {node_recipe.shape}")
    is_video = np.zeros(num_nodes, dtype=bool) if node_is_video is None else np.asarray(node_is_video, dtype=bool)
    for arr in (src, dst):
        a = np.asarray(arr)
        if a.size and (a.min() < 0 or a.max() >= num_nodes):
            raise ValueError("edge endpoints must be node ids in [0, num_nodes)")
    u_all, v_all, w_all = undirected_edges(src, dst, weight, edge_threshold)

    parent = list(range(num_nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    forest: list[tuple[int, int, float]] = []
    for u, v, w in zip(u_all.tolist(), v_all.tolist(), w_all.tolist()):
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
            forest.append((u, v, w))

    # paths: each node's path as a deque-like list; path_of maps node -> path id
    paths: dict[int, list[int]] = {i: [i] for i in range(num_nodes)}
    recipes: dict[int, set] = {i: {node_recipe[i].item()} for i in range(num_nodes)}
    min_w: dict[int, float] = {i: float("inf") for i in range(num_nodes)}
    path_of = list(range(num_nodes))
    for u, v, w in forest:
        pu, pv = path_of[u], path_of[v]
        a, b = paths[pu], paths[pv]
        if u not in (a[0], a[-1]) or v not in (b[0], b[-1]) or recipes[pu] & recipes[pv]:
            continue
        left = a if a[-1] == u else a[::-1]  # ... u
        right = b if b[0] == v else b[::-1]  # v ...
        keep, drop = (pu, pv) if pu < pv else (pv, pu)
        paths[keep] = left + right
        recipes[keep] = recipes[pu] | recipes[pv]
        min_w[keep] = min(min_w[pu], min_w[pv], w)
        for node in paths[drop]:
            path_of[node] = keep
        del paths[drop], recipes[drop], min_w[drop]
    sets = []
    for pid, nodes in paths.items():
        if len(nodes) >= 2:
            if nodes[-1] < nodes[0]:
                nodes = nodes[::-1]
            video = int(is_video[nodes].sum())
            sets.append(AlignedSet(tuple(nodes), float(min_w[pid]), len(nodes) - video, video))
    sets.sort(key=lambda s: min(s.node_ids))
    return JointAlignment(forest, sets, edge_threshold)
