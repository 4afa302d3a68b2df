"""The ``dishes`` pipeline: joint alignment (Lin et al., ACL 2020, §3.2; docs/corpora/marc.md, Pipeline step 8). The
instruction graph of each dish (:class:`DishGraphSource`) is cut into a maximum spanning forest and jointly-alignable
sets (:class:`JointAlignment`, ``builders.ops.joint_alignment``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.records import Count, Drop, Out, Row
from ...core.step import Source, Step
from ...ops.joint_alignment import joint_alignment
from .pairs import recipes_by_dish

DISH_GRAPH_FIELDS: dict[str, Any] = {"dish_id": str, "dish_name": str, "split": str, "nodes": list, "src": list,
                                     "dst": list, "weight": list}


@dataclass(eq=False)
class DishGraphSource(Source):
    """One row per dish: its instructions as nodes, ordered by (recipe_id, instruction_index), and one directed edge
    per source instruction to its argmax target (all pair types, both directions) weighted by the posterior."""

    name = "dish_graphs"
    version = "1"
    side_inputs = ("text", "videos", "pairs")
    writes = DISH_GRAPH_FIELDS
    rows_carry_content = True  # a dish's nodes (texts, times) and weighted edges

    def read(self) -> Iterator[Row | Drop | Count]:
        by_dish = recipes_by_dish(self.side)
        edges: dict[str, list[tuple[str, int, str, int, float]]] = defaultdict(list)
        for p in self.side["pairs"].rows(["dish_id", "recipe_a", "recipe_b", "a_to_b", "b_to_a"]):
            for src, dst, align in ((p["recipe_a"], p["recipe_b"], p["a_to_b"]),
                                    (p["recipe_b"], p["recipe_a"], p["b_to_a"])):
                for m, x in enumerate(align):
                    if x["target_index"] >= 0:
                        edges[p["dish_id"]].append((src, m, dst, x["target_index"], x["probability"]))
        for dish in sorted(by_dish):
            recipes = sorted(by_dish[dish], key=lambda r: r["recipe_id"])
            nodes, node_of = [], {}
            for r in recipes:
                video = r["modality"] == "video"
                for k, text in enumerate(r["instructions"]):
                    node_of[(r["recipe_id"], k)] = len(nodes)
                    nodes.append({"node_id": len(nodes), "recipe_id": r["recipe_id"], "modality": r["modality"],
                                  "instruction_index": k, "text": text,
                                  "start": float(r["start"][k]) if video else float("nan"),
                                  "end": float(r["end"][k]) if video else float("nan")})
            src, dst, w = [], [], []
            for a, m, b, n, prob in edges.get(dish, []):
                src.append(node_of[(a, m)])
                dst.append(node_of[(b, n)])
                w.append(float(prob))
            yield {"dish_id": dish, "dish_name": recipes[0]["dish_name"], "split": recipes[0]["split"],
                   "nodes": nodes, "src": src, "dst": dst, "weight": w}


@dataclass(eq=False)
class JointAlignment(Step):
    """Lin et al., ACL 2020, §3.2: edges with posterior > ``edge_threshold`` (0.5), undirected weight = mean of the
    directed ones, maximum spanning forest by Kruskal, and jointly-alignable sets (paths with at most one instruction
    per recipe)."""

    name = "joint_alignment"
    version = "1"
    id_field = "dish_id"
    reads = DISH_GRAPH_FIELDS
    writes = {"dish_id": str, "dish_name": str, "split": str, "nodes": list, "forest_edges": list,
              "aligned_sets": list, "edge_threshold": float}
    replaces = True

    edge_threshold: float

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            nodes = r["nodes"]
            codes = {rid: i for i, rid in enumerate(sorted({n["recipe_id"] for n in nodes}))}
            ja = joint_alignment(len(nodes), np.asarray([codes[n["recipe_id"]] for n in nodes], dtype=np.int64),
                                 np.asarray(r["src"], dtype=np.int64), np.asarray(r["dst"], dtype=np.int64),
                                 np.asarray(r["weight"], dtype=np.float64), self.edge_threshold,
                                 [n["modality"] == "video" for n in nodes])
            out.count("aligned_sets", len(ja.aligned_sets))
            out.keep({"dish_id": r["dish_id"], "dish_name": r["dish_name"], "split": r["split"], "nodes": nodes,
                      "forest_edges": [{"u": int(u), "v": int(v), "weight": float(w)} for u, v, w in ja.forest_edges],
                      "aligned_sets": [{"node_ids": list(s.node_ids), "min_weight": float(s.min_weight),
                                        "num_text": int(s.num_text), "num_video": int(s.num_video)}
                                       for s in ja.aligned_sets],
                      "edge_threshold": float(self.edge_threshold)})
