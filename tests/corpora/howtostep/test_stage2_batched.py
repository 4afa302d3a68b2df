"""HowToStep Stage 2 grounds a shard's videos in batches (issue 24), with the same rows, drops and counters as one
``Grounder.matrices`` call per video: real tiny NaSVA checkpoints (two, so a shard holds two labeler groups), toy
features of different lengths (some beyond ``max_vlen``), different step counts (one video without steps), and
videos whose feature file is missing or of the wrong size (dropped as ``step_error`` by the runner, alone)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from builders.core.records import Out
from builders.core.runners import STEP_ERROR, ExecPolicy, _process_isolated
from builders.corpora.howtostep import grounding
from builders.corpora.howtostep.features import load_row_features
from builders.corpora.howtostep.grounding import Stage2, _t_eff
from builders.nasva.infer import Grounder
from builders.nasva.train import NasvaTrainConfig, train

from tests.nasva.toy import TINY, write_toy

MAX_VLEN = 28  # toy videos are 20-35 s: some are cut
VIS_DIM = 16


@pytest.fixture(autouse=True, scope="module")
def _torch_threads():
    """1 torch thread for this module, restored afterwards (float reductions of later tests stay as they were)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class PerVideoStage2(Stage2):
    """Stage 2 as it was before issue 24: one ``Grounder.matrices`` call per video (the reference); the rest of
    ``process`` (timestamps, drops, the kept row) is Stage 2's own."""

    def _matrices(self, rows):
        mats = []
        for r in rows:
            g = self.grounder(r["labeler"]["checkpoint"], r["labeler"]["text_cache"])
            feats = load_row_features(r, self.visual_dim)[:_t_eff(r, self.max_vlen)]
            mats.append(g.matrices([(feats, [s["text"] for s in r["steps"]])], mode="step", max_rows=self.max_vlen)[0])
        return mats


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("stage2_toy")
    labels = write_toy(root, n_videos=10, visual_dim=VIS_DIM, text_dim=32, t_range=(20, 36))
    ckpts = []
    for seed in (7, 8):
        out = root / f"ckpt{seed}"
        train(root / "features", out, labels=root / "labels.json", model_overrides=TINY,
              cfg=NasvaTrainConfig(epochs=2, batch_size=4, lr=1e-3, text_encoder="hash:32", seed=seed),
              text_cache=root / "text.sqlite", progress=False)
        ckpts.append(out)
    np.save(root / "features" / "wide.npy", np.ones((25, VIS_DIM + 3), np.float32))  # not visual_dim wide
    toy = {"root": root, "labels": labels, "ckpts": ckpts}
    # epsilon2 between two scores (A's row maxima) near the median, far from both: some steps kept, some dropped
    mats = _step(Stage2)._matrices([r for r in _rows(toy) if r["video_id"] not in ("missing", "wide")])
    scores = np.sort(np.concatenate([A.max(axis=1) for A in mats if len(A)]))
    mid = len(scores) // 2
    k = max(range(mid - 5, mid + 5), key=lambda i: scores[i + 1] - scores[i])
    assert scores[k + 1] - scores[k] > 1e-3
    toy["eps2"] = float(scores[k] + scores[k + 1]) / 2
    return toy


def _rows(toy: dict) -> list[dict]:
    """One row per toy video (every other one on the second checkpoint), plus a video without steps, one whose
    feature file is missing and one whose features have the wrong width."""
    root, labels = toy["root"], toy["labels"]
    extra = ["wash the board", "cut the dough slowly", "rinse", "pour the milk into the rice"]
    rows = []
    for i, vid in enumerate(sorted(labels)):
        texts = [e["text"] for e in labels[vid]] + extra[: i % 4]  # 1-9 steps, not all in the video
        steps = [{"step_index": k, "chunk_index": k // 3, "text": t, "stage1_score": 0.5} for k, t in enumerate(texts)]
        earlier = [{"step_index": 99, "chunk_index": 0, "text": "x", "stage": "stage1", "reason": "stage1_below_eps1",
                    "score": 0.1},
                   {"step_index": 98, "chunk_index": 0, "text": "y", "stage": "stage2", "reason": "stage2_below_eps2",
                    "score": 0.2}]  # a previous round's drop: replaced
        T = int(np.load(root / "features" / f"{vid}.npy").shape[0])
        rows.append(_row(vid, toy["ckpts"][i % 2], root, T, steps, earlier))
    rows.insert(3, _row("nosteps", toy["ckpts"][0], root, 24, [], [], path=root / "features" / "toy01.npy"))
    rows.insert(5, _row("missing", toy["ckpts"][1], root, 30, rows[0]["steps"], []))
    rows.insert(8, _row("wide", toy["ckpts"][0], root, 25, rows[1]["steps"], []))
    return rows


def _row(vid: str, ckpt: Path, root: Path, T: int, steps: list, drops: list, path: Path | None = None) -> dict:
    return {"video_id": vid, "steps": steps, "dropped_steps": drops,
            "labeler": {"checkpoint": str(ckpt), "text_cache": str(root / "text.sqlite"), "sha256": ckpt.name},
            "features_path": str(path or root / "features" / f"{vid}.npy"), "features_rows": None,
            "features_kind": "dense", "num_frames": T}


def _step(cls, eps2: float = 0.0, **kw) -> Stage2:
    s = cls(round=1, epsilon2=eps2, anchor=kw.pop("anchor", "start"), delta_sec=kw.pop("delta_sec", 8.0), zeta=0.7,
            max_vlen=MAX_VLEN, visual_dim=VIS_DIM, nasva_text_encoder="hash:32", **kw)
    s.setup(None)
    return s


def _run(step: Stage2, rows: list[dict]) -> Out:
    out = Out(step.name)
    _process_isolated(step, rows, out, ExecPolicy(retries=0), 0)
    return out


def _same(a: Out, b: Out) -> None:
    """Identical kept rows (scores to float tolerance), drops and counters."""
    assert [r["video_id"] for r in a.rows] == [r["video_id"] for r in b.rows]
    for ra, rb in zip(a.rows, b.rows):
        assert ra.keys() == rb.keys()
        assert {k: v for k, v in ra.items() if k not in ("grounded_steps", "dropped_steps")} == \
            {k: v for k, v in rb.items() if k not in ("grounded_steps", "dropped_steps")}
        for key in ("grounded_steps", "dropped_steps"):
            sa, sb = ra[key], rb[key]
            assert [{k: v for k, v in s.items() if k != "score"} for s in sa] == \
                [{k: v for k, v in s.items() if k != "score"} for s in sb]
            assert [s["score"] for s in sa] == pytest.approx([s["score"] for s in sb], abs=1e-5)
    assert a.drops == b.drops
    assert a.counters == b.counters


@pytest.mark.parametrize("anchor,delta", [("start", 8.0), ("grown", None)])
def test_batched_stage2_equals_one_video_at_a_time(toy, anchor, delta):
    rows = _rows(toy)
    good = [r for r in rows if r["video_id"] not in ("missing", "wide")]
    kw = {"eps2": toy["eps2"], "anchor": anchor, "delta_sec": delta}
    batched, single = _step(Stage2, **kw), _step(PerVideoStage2, **kw)
    # the matrices themselves: [K, min(T, max_vlen)] per row, as one call per video gives them
    mats = batched._matrices(good)
    for r, A in zip(good, mats):
        (ref,) = single.grounder(r["labeler"]["checkpoint"], r["labeler"]["text_cache"]).matrices(
            [(load_row_features(r, VIS_DIM)[:_t_eff(r, MAX_VLEN)], [s["text"] for s in r["steps"]])], mode="step",
            max_rows=MAX_VLEN)
        assert A.shape == (len(r["steps"]), min(r["num_frames"], MAX_VLEN)) == ref.shape
        np.testing.assert_allclose(A, ref, atol=1e-5)
    assert len({A.shape[1] for A in mats}) >= 3 and max(A.shape[1] for A in mats) == MAX_VLEN  # padded and cut
    assert len({A.shape[0] for A in mats}) >= 3 and min(A.shape[0] for A in mats) == 0

    # whole shards: the clean one, and one with two bad videos (the runner reruns it row by row)
    for shard in (good, rows):
        a, b = _run(batched, shard), _run(single, shard)
        _same(a, b)
        kept = sum(len(r["grounded_steps"]) for r in a.rows)
        assert kept and a.counters["stage2_below_eps2"]  # the threshold keeps some steps and drops others
    assert sorted((d.item_id, d.reason) for d in a.drops) == [("missing", STEP_ERROR), ("wide", STEP_ERROR)]
    detail = {d.item_id: d.detail for d in a.drops}
    assert "no such file" in detail["missing"] and "visual_dim" in detail["wide"]
    nosteps = next(r for r in a.rows if r["video_id"] == "nosteps")
    assert nosteps["grounded_steps"] == [] and nosteps["dropped_steps"] == []
    for r in a.rows:  # an earlier round's stage-2 drops are replaced, other stages' kept
        assert not [d for d in r["dropped_steps"] if d["stage"] == "stage2" and d["step_index"] == 98]


def test_one_matrices_call_per_checkpoint_and_chunk(toy, monkeypatch):
    rows = [r for r in _rows(toy) if r["video_id"] not in ("missing", "wide")]
    calls: list[int] = []
    real = Grounder.matrices

    def spy(self, videos, *a, **kw):
        calls.append(len(videos))
        return real(self, videos, *a, **kw)

    monkeypatch.setattr(Grounder, "matrices", spy)
    ref = _run(_step(PerVideoStage2, toy["eps2"]), rows)
    assert len(calls) == len(rows)
    calls.clear()
    _same(_run(_step(Stage2, toy["eps2"]), rows), ref)
    n0 = sum(r["labeler"]["checkpoint"] == str(toy["ckpts"][0]) for r in rows)
    assert sorted(calls) == sorted([n0, len(rows) - n0])  # one call per labeler
    calls.clear()
    monkeypatch.setattr(grounding, "GROUND_ROWS", 2)  # bounded features in memory: chunks of a group
    _same(_run(_step(Stage2, toy["eps2"]), rows), ref)
    assert len(calls) == (n0 + 1) // 2 + (len(rows) - n0 + 1) // 2 and max(calls) == 2
