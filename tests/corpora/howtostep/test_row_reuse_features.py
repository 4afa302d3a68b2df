"""Row reuse of ``VisualFeatures`` and ``Stage1`` (``row_wise_batch``; builders/core/row_reuse.py, issue 19): a shard
redone after one video changed processes that video alone, in one call, and gives the kept rows, drops and counters
of a full recomputation. The recomputed video's features go to a new small store block while the reused rows keep
naming the earlier one: ``features_path`` / ``features_rows`` differ from a full recomputation's, the features
loaded from them do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from builders.core.records import Out
from builders.core.runners import ExecPolicy, StageTask, run_shard
from builders.core.shards import read_drops, read_rows, write_shard
from builders.corpora.howtostep.features import VisualFeatures, load_row_features
from builders.corpora.howtostep.grounding import Stage1

DIM = 32
REF = ("features_path", "features_rows")


def _row(vid: str, duration: float | None, words: str = "stir") -> dict[str, Any]:
    narr = [{"text": f"{words} the pan {vid} now {k}", "start": 2.0 + 3 * k, "end": 4.0 + 3 * k} for k in range(5)]
    steps = [{"text": f"{words} the pan {k}", "step_index": k, "chunk_index": 0} for k in range(3)]
    return {"video_id": vid, "duration": duration, "narrations": narr, "steps": steps}


def _vf(mode: str, features: Path | None = None) -> VisualFeatures:
    return VisualFeatures(visual_features=mode, visual_dim=DIM, visual_backbone="clip_vit_l14", features=features,
                          features_index=None, media=None, vision_model_path=None, text_encoder="hash:64",
                          feature_max_bad_share=0.2, feature_max_abs=65504.0, feature_duration_tolerance_s=2.0,
                          feature_duration_tolerance_frac=0.10, feature_transcript_span_ratio=2.0)


def _stage1(method: str) -> Stage1:
    return Stage1(stage1_method=method, nu=0.07, zeta=0.7, epsilon1=0.2, text_encoder="hash:64", max_vlen=1200,
                  visual_features="simulated", visual_dim=DIM, visual_backbone="clip_vit_l14", vision_model_path=None)


def _spy(monkeypatch, cls) -> list[list[str]]:
    """Records the video ids of every ``process`` call of ``cls``."""
    calls: list[list[str]] = []
    real = cls.process

    def process(self, rows, out: Out) -> None:
        calls.append([r["video_id"] for r in rows])
        real(self, rows, out)

    monkeypatch.setattr(cls, "process", process)
    return calls


def _run(step, state: Any, rows: list[dict] | None, in_dir: Path, out_dir: Path) -> dict[str, Any]:
    """Shard 0 of ``step`` from ``in_dir`` (written from ``rows`` when given) to ``out_dir``."""
    if rows is not None:
        write_shard(in_dir, 0, rows, [], {"rows_in": len(rows), "kept": len(rows), "dropped": {}, "counters": {}})
    step.setup(state)
    return run_shard(StageTask(step, state, in_dir, out_dir, ExecPolicy(retries=0, backoff_s=0.0)), 0)


def _feature_file(folder: Path, vid: str, T: int, nan_rows: tuple[int, ...] = ()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    x = np.random.default_rng(len(vid) + T).standard_normal((T, DIM)).astype(np.float32)
    x[list(nan_rows)] = np.nan
    np.save(folder / f"{vid}.npy", x)


def _loaded(rows: list[dict]) -> dict[str, np.ndarray]:
    return {r["video_id"]: load_row_features(r, DIM) for r in rows}


def _strip(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in REF} for r in rows]


def _stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: stats[k] for k in ("rows_in", "kept", "dropped", "counters")}


def test_visual_features_redo_only_the_edited_video_and_store_it_alone(tmp_path, monkeypatch):
    feats, store = tmp_path / "features", {"store": str(tmp_path / "store")}
    _feature_file(feats, "v0", 40)
    _feature_file(feats, "v1", 30, nan_rows=(3, 4))          # repaired: 2 rows, stored in the build's store
    _feature_file(feats, "v3", 33)                           # 3 s off its 36 s: counted, within the 3.6 s tolerance
    _feature_file(feats, "v4", 25, nan_rows=(0,))            # repaired: 1 row
    _feature_file(feats, "v5", 20)                           # v2 has no file: missing_features
    rows = [_row("v0", 40.0), _row("v1", 30.0), _row("v2", 30.0), _row("v3", 36.0), _row("v4", 25.0),
            _row("v5", 20.0)]
    calls = _spy(monkeypatch, VisualFeatures)
    first = _run(_vf("file", feats), store, rows, tmp_path / "in", tmp_path / "out")
    assert calls == [["v0", "v1", "v2", "v3", "v4", "v5"]]          # a fresh shard: one call, as before
    assert first["counters"] == {"features_repaired": 3, "feature_length_mismatch": 1}
    assert {k: c for k, (_, c) in first["row_memo"].items()} == {
        "v0": {}, "v1": {"features_repaired": 2}, "v2": {}, "v3": {"feature_length_mismatch": 1},
        "v4": {"features_repaired": 1}, "v5": {}}
    before = {r["video_id"]: r for r in read_rows(tmp_path / "out", 0)}
    assert before["v1"]["features_rows"] == [0, 30] and before["v4"]["features_rows"] == [30, 55]

    rows[4] = _row("v4", 25.0, words="whisk")                # one video's narrations change
    calls.clear()
    again = _run(_vf("file", feats), store, rows, tmp_path / "in", tmp_path / "out")
    assert calls == [["v4"]] and again["rows_reused"] == 5
    assert again["counters_computed"] == {"features_repaired": 1}
    got = read_rows(tmp_path / "out", 0)
    new = {r["video_id"]: r for r in got}
    assert new["v4"]["features_rows"] == [0, 25] and new["v4"]["features_path"] != before["v4"]["features_path"]
    assert new["v1"]["features_path"] == before["v1"]["features_path"]          # reused: the earlier block

    calls.clear()
    full = _run(_vf("file", feats), store, None, tmp_path / "in", tmp_path / "full")
    assert calls == [["v0", "v1", "v2", "v3", "v4", "v5"]]
    want = read_rows(tmp_path / "full", 0)
    assert _stats(again) == _stats(full) and again["row_memo"] == full["row_memo"]
    assert read_drops(tmp_path / "out", 0) == read_drops(tmp_path / "full", 0)
    assert [r["video_id"] for r in got] == ["v0", "v1", "v3", "v4", "v5"]       # input order
    assert _strip(got) == _strip(want)
    # only the recomputed video names another block: the full recomputation's block is the first build's
    assert [r["video_id"] for r, w in zip(got, want) if r != w] == ["v4"]
    loaded, wanted = _loaded(got), _loaded(want)
    assert all(np.array_equal(loaded[v], wanted[v]) for v in wanted)
    assert len(list(Path(store["store"]).iterdir())) == 2    # the first block and v4's own


@pytest.mark.parametrize("method", ["step_video", "step_asr"])
def test_stage1_after_an_edit_redoes_only_that_video(tmp_path, monkeypatch, method):
    store = {"store": str(tmp_path / "store")}
    rows = [_row(f"v{k}", 20.0 + 4 * k) for k in range(5)]
    vf_calls, s1_calls = _spy(monkeypatch, VisualFeatures), _spy(monkeypatch, Stage1)
    _run(_vf("simulated"), store, rows, tmp_path / "in", tmp_path / "vf")
    _run(_stage1(method), None, None, tmp_path / "vf", tmp_path / "s1")
    assert vf_calls == s1_calls == [["v0", "v1", "v2", "v3", "v4"]]

    rows[2] = _row("v2", 28.0, words="knead")
    vf_calls.clear(), s1_calls.clear()
    _run(_vf("simulated"), store, rows, tmp_path / "in", tmp_path / "vf")
    s1 = _run(_stage1(method), None, None, tmp_path / "vf", tmp_path / "s1")
    assert vf_calls == s1_calls == [["v2"]]                  # the other videos keep their feature rows: reused
    assert s1["rows_reused"] == 4

    _run(_vf("simulated"), store, None, tmp_path / "in", tmp_path / "vf_full")
    full = _run(_stage1(method), None, None, tmp_path / "vf_full", tmp_path / "s1_full")
    vf_got, vf_want = read_rows(tmp_path / "vf", 0), read_rows(tmp_path / "vf_full", 0)
    # v2's factors changed, so the full recomputation's block is a new one: every row names another file ...
    assert all(g["features_path"] != w["features_path"] for g, w in zip(vf_got, vf_want))
    # ... and loads the same features
    loaded, wanted = _loaded(vf_got), _loaded(vf_want)
    assert all(np.array_equal(loaded[v], wanted[v]) for v in wanted)
    got, want = read_rows(tmp_path / "s1", 0), read_rows(tmp_path / "s1_full", 0)
    assert _strip(got) == _strip(want)                       # the Stage-1 windows and scores, exactly
    assert _stats(s1) == _stats(full)
    # the memo's counters are the same; its digests are not (they cover the input rows' features_path)
    assert {k: c for k, (_, c) in s1["row_memo"].items()} == {k: c for k, (_, c) in full["row_memo"].items()}
    kept = sum(s["stage1_start"] is not None for r in want for s in r["steps"])
    assert full["counters"]["stage1_kept"] == kept and sum(full["counters"].values()) >= 15
