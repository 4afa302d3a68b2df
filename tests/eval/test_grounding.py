"""Grounding metrics and the ``htm_align`` / ``htstep_r1`` protocols (``../shared/specs/evaluation.md`` §0-§2).

Expected values are the spec's worked examples A and B (hand-computed there) and its fixture regressions.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from eval.metrics.grounding import (
    htm_align_hits,
    nan_argmax,
    nan_max,
    recall_at_1,
    roc_auc,
    step_hits,
    step_targets,
    times_to_slots,
)
from eval.registry import EvalError, EvalInputs, Warnings, get

# ------------------------------------------------------------------------------------------------ §0 conventions


def test_nan_argmax_ties_lowest_and_nan_never_wins() -> None:
    x = np.array(
        [
            [1.0, 3.0, 3.0, 2.0],  # tie -> lowest index 1
            [np.nan, 0.5, np.nan, 0.1],  # NaN never wins
            [np.nan, np.nan, np.nan, np.nan],  # all NaN -> 0, flagged
            [np.nan, -np.inf, np.nan, -np.inf],  # NaN must not beat -inf
        ]
    )
    idx, all_nan = nan_argmax(x, axis=1)
    assert idx.tolist() == [1, 1, 0, 1]
    assert all_nan.tolist() == [False, False, True, False]
    idx0, _ = nan_argmax(x.T, axis=0)
    assert idx0.tolist() == [1, 1, 0, 1]
    assert np.isnan(nan_max(x, axis=1)[2]) and nan_max(x, axis=1)[1] == 0.5


def test_times_to_slots_floor_and_clamp() -> None:
    slots, valid, n_clamped = times_to_slots([0.0, 3.99, -0.5, 12.2, 10.0, np.nan], 10)
    assert slots.tolist() == [0, 3, 0, 9, 9, -1]
    assert valid.tolist() == [True, True, True, True, True, False]
    assert n_clamped == 3  # -0.5, 12.2 and 10.0 (slot 10 of a 10-slot video)
    slots, _, n_clamped = times_to_slots([250.7, -1.0], None)  # T unknown: clamp below only
    assert slots.tolist() == [250, 0] and n_clamped == 1


# ------------------------------------------------------------------------------------------------ §1 HTM-Align

# Example A (§1e): vidA 5 sentences, vidB 2; T = 10
EX_A_GT = {
    "vidA": [[1, 1.2, 3.6, "a0"], [0, 4, 5, "a1"], [1, 6.5, 7.5, "a2"], [1, 8, 9, "a3"], [0, 9, 9.5, "a4"]],
    "vidB": [[1, 2, 3, "b0"], [0, 5, 6, "b1"]],
}
EX_A_SLOTS = {"vidA": [4, 0, 7, 2, 0], "vidB": [3, 0]}  # argmax slots of a0, a2, a3, b0 from the spec
EX_A_SCORES = {"vidA": [0.9, 0.2, 0.6, 0.4, 0.5], "vidB": [0.8, 0.3]}


def _example_a_matrices() -> dict[str, list[list[float]]]:
    """[N_text, T=10] matrices whose row argmax is the spec's slot and whose row max is the spec's score."""
    out = {}
    for vid, slots in EX_A_SLOTS.items():
        m = np.full((len(slots), 10), -1.0)
        for i, (t, s) in enumerate(zip(slots, EX_A_SCORES[vid])):
            m[i, t] = s
        out[vid] = m.tolist()
    return out


def test_example_a_pure_functions() -> None:
    hits_tan, hits_nsva = [], []
    for vid, rows in EX_A_GT.items():
        a = np.array([r[0] for r in rows], dtype=bool)
        s = np.array([r[1] for r in rows], dtype=float)
        e = np.array([r[2] for r in rows], dtype=float)
        t = np.array(EX_A_SLOTS[vid])
        hits_tan.append(htm_align_hits(t[a], s[a], e[a], "tan"))
        hits_nsva.append(htm_align_hits(t[a], s[a], e[a], "nsva"))
    assert np.concatenate(hits_tan).tolist() == [True, True, False, True]
    assert recall_at_1(np.concatenate(hits_tan)) == pytest.approx(0.75)
    assert recall_at_1(np.concatenate(hits_nsva)) == pytest.approx(0.5)
    # a per-video mean would be (2/3 + 1) / 2 = 0.8333 - the micro average is not that
    assert recall_at_1(np.concatenate(hits_tan)) != pytest.approx(0.8333, abs=1e-3)
    labels = [1, 0, 1, 1, 0, 1, 0]
    scores = [0.9, 0.2, 0.6, 0.4, 0.5, 0.8, 0.3]
    assert roc_auc(labels, scores) == pytest.approx(11 / 12)
    assert roc_auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores))


def test_window_rules_on_the_spec_window() -> None:
    """[1.2, 3.6] accepts slots {2,3} under NaSVA and {1,2,3,4} under TAN (§1c)."""
    slots = np.arange(0, 6)
    s, e = np.full(6, 1.2), np.full(6, 3.6)
    assert np.flatnonzero(htm_align_hits(slots, s, e, "nsva")).tolist() == [2, 3]
    assert np.flatnonzero(htm_align_hits(slots, s, e, "tan")).tolist() == [1, 2, 3, 4]
    assert not htm_align_hits(np.array([-1]), np.array([0.0]), np.array([5.0]), "tan")[0]  # no prediction = miss


def test_roc_auc_matches_sklearn_with_ties() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(2, 60))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            y[0] = 1 - y[0]
        s = rng.integers(0, 5, n) / 4.0  # heavy ties
        assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert roc_auc([1, 1, 1], [0.1, 0.2, 0.3]) is None
    assert roc_auc([0, 0], [0.1, 0.2]) is None
    assert roc_auc([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.5)


def _run(name: str, gt: Path, pred: Path, variant: list[str] | None = None) -> tuple[dict, Warnings]:
    proto = get(name)
    w = Warnings()
    inputs = EvalInputs(gt=[gt], pred=pred, variant=proto.resolve_variant(variant or []), warnings=w)
    res = proto.evaluate(inputs)
    return {"metrics": res.metrics, "items": res.items, "skipped": res.skipped, "skip": res.skip_reasons}, w


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_htm_align_protocol_example_a_matrices(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", EX_A_GT)
    pred = _write(tmp_path / "pred.json", _example_a_matrices())
    out, w = _run("htm_align", gt, pred)
    assert out["metrics"]["r1"] == pytest.approx(0.75)
    assert out["metrics"]["roc_auc"] == pytest.approx(0.916667, abs=1e-6)
    assert out["items"] == 4 and w.total == 0
    out, _ = _run("htm_align", gt, pred, ["rule=nsva"])
    assert out["metrics"]["r1"] == pytest.approx(0.5)


def test_htm_align_npy_directory_and_npz(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", EX_A_GT)
    d = tmp_path / "sims"
    d.mkdir()
    mats = _example_a_matrices()
    for vid, m in mats.items():
        np.save(d / f"{vid}.npy", np.asarray(m, dtype=np.float32))
    out, _ = _run("htm_align", gt, d)
    assert out["metrics"]["r1"] == pytest.approx(0.75)
    assert out["metrics"]["roc_auc"] == pytest.approx(11 / 12, abs=1e-6)
    npz = tmp_path / "sims.npz"
    np.savez(npz, **{vid: np.asarray(m) for vid, m in mats.items()})
    out, _ = _run("htm_align", gt, npz)
    assert out["metrics"]["r1"] == pytest.approx(0.75)


def test_htm_align_pred_time_format(tmp_path: Path) -> None:
    """The ``{vid: {pred_time, align_score}}`` layout written by ``builders.nasva.infer``."""
    gt = _write(tmp_path / "gt.json", EX_A_GT)
    pred = {
        vid: {"pred_time": [t + 0.5 for t in EX_A_SLOTS[vid]], "align_score": EX_A_SCORES[vid]} for vid in EX_A_GT
    }
    out, w = _run("htm_align", gt, _write(tmp_path / "p.json", pred))
    assert out["metrics"] == {"r1": pytest.approx(0.75), "roc_auc": pytest.approx(11 / 12)}
    assert w.total == 0
    # without align_score: R@1 still defined, AUC null with a named warning
    no_scores = {vid: {"pred_time": v["pred_time"]} for vid, v in pred.items()}
    out, w = _run("htm_align", gt, _write(tmp_path / "p2.json", no_scores))
    assert out["metrics"]["r1"] == pytest.approx(0.75) and out["metrics"]["roc_auc"] is None
    assert w.counts["no_align_score"] == 1


def test_htm_align_bad_and_partial_predictions(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", EX_A_GT)
    mats = _example_a_matrices()
    # vidB missing, an unknown video, a v_-prefixed id for vidA
    pred = {"v_vidA": mats["vidA"], "ghost": [[0.0]]}
    out, w = _run("htm_align", gt, _write(tmp_path / "p.json", pred))
    assert out["metrics"]["r1"] == pytest.approx(2 / 4)  # b0 counts as a miss
    assert out["items"] == 4
    assert w.counts["missing_video"] == 1 and w.counts["unknown_video"] == 1
    assert out["metrics"]["roc_auc"] == pytest.approx(roc_auc_score([1, 0, 1, 1, 0], [0.9, 0.2, 0.6, 0.4, 0.5]))
    # an all-NaN row predicts slot 0 (TAN) and leaves the AUC
    m = np.asarray(mats["vidA"])
    m[1, :] = np.nan
    pred = {"vidA": [[None if np.isnan(x) else x for x in row] for row in m.tolist()], "vidB": mats["vidB"]}
    out, w = _run("htm_align", gt, _write(tmp_path / "p3.json", pred))
    assert w.counts["all_nan_row"] == 1 and w.counts["nan_score"] == 1
    assert out["metrics"]["roc_auc"] == pytest.approx(
        roc_auc_score([1, 1, 1, 0, 1, 0], [0.9, 0.6, 0.4, 0.5, 0.8, 0.3])
    )
    # wrong number of rows: a clear error naming the video
    bad = {"vidA": mats["vidA"][:4], "vidB": mats["vidB"]}
    with pytest.raises(EvalError, match="vidA.*4 rows for 5 sentences"):
        _run("htm_align", gt, _write(tmp_path / "p4.json", bad))
    with pytest.raises(EvalError, match="top level"):
        _run("htm_align", gt, _write(tmp_path / "p5.json", [[0.0]]))


def test_htm_align_single_class_auc_is_null(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", {"v": [[1, 0, 2, "x"], [1, 3, 4, "y"]]})
    pred = _write(tmp_path / "p.json", {"v": [[0.9, 0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.8, 0.0]]})
    out, w = _run("htm_align", gt, pred)
    assert out["metrics"]["r1"] == 1.0 and out["metrics"]["roc_auc"] is None
    assert w.counts["auc_single_class"] == 1


def test_htm_align_tan_zero_mask(tmp_path: Path) -> None:
    """TAN replaces exact zeros (cells no window scored) by -6e4 before argmax / max (§1c)."""
    gt = _write(tmp_path / "gt.json", {"v": [[1, 2, 3, "x"], [0, 0, 1, "y"]]})
    pred = _write(tmp_path / "p.json", {"v": [[0.0, 0.0, -1.0, 0.0], [-2.0, 0.0, -3.0, -4.0]]})
    out, _ = _run("htm_align", gt, pred)
    assert out["metrics"]["r1"] == 0.0  # argmax 0 (a zero beats -1)
    assert out["metrics"]["roc_auc"] == 0.5  # both row maxima are 0: a tie
    out, _ = _run("htm_align", gt, pred, ["tan_zero_mask=true"])
    assert out["metrics"]["r1"] == 1.0  # argmax 2 after masking
    assert out["metrics"]["roc_auc"] == 1.0  # row maxima -1 (alignable) > -2 (unalignable)


# ------------------------------------------------------------------------------------------------ §2 HT-Step R@1


def test_example_b() -> None:
    """T = 12, s0 [1.2, 3.6]; s2 [6, 8] and [9.1, 9.9]; predictions s0->4, s1->9, s2->10, s3->0 (§2e)."""
    cols, starts, ends = [0, 2, 2], [1.2, 6, 9.1], [3.6, 8, 9.9]
    slots = np.array([4, 9, 10, 0])
    y = step_targets(12, 4, cols, starts, ends, "inclusive")
    annotated, hit = step_hits(y, slots)
    assert annotated.tolist() == [True, False, True, False]
    assert hit.sum() / annotated.sum() == 1.0
    y = step_targets(12, 4, cols, starts, ends, "exclusive")
    assert np.flatnonzero(y[:, 0]).tolist() == [1, 2, 3]
    assert np.flatnonzero(y[:, 2]).tolist() == [6, 7, 9]
    annotated, hit = step_hits(y, slots)
    assert annotated.sum() == 2 and hit.sum() == 0


def test_step_targets_cut_at_t() -> None:
    y = step_targets(5, 2, [0, 1], [3.5, 5.0], [9.0, 7.0], "inclusive")
    assert np.flatnonzero(y[:, 0]).tolist() == [3, 4]
    assert not y[:, 1].any()  # starts at T: no slot
    annotated, hit = step_hits(y, np.array([-1, 2]))
    assert annotated.tolist() == [True, False] and not hit.any()


def _uniform(n_slots: int, k: int) -> list[int]:
    return [min(n_slots - 1, math.floor((i + 0.5) * n_slots / k)) for i in range(k)]


@pytest.fixture(scope="module")
def htstep_records(shared_data: Path) -> list[dict]:
    return json.loads((shared_data / "htstep" / "htstep_val_seen_annotations.json").read_text(encoding="utf-8"))


def test_htstep_fixture_uniform_baseline(shared_data: Path, htstep_records: list[dict], tmp_path: Path) -> None:
    gt = shared_data / "htstep" / "htstep_val_seen_annotations.json"
    pred = {r["video_uid"]: _uniform(math.ceil(r["video_duration"]), len(r["step_headline"])) for r in htstep_records}
    p = _write(tmp_path / "uniform.json", pred)
    out, w = _run("htstep_r1", gt, p)
    assert out["items"] == 2387
    assert out["metrics"]["r1"] == pytest.approx(0.108504, abs=1e-6)
    assert w.total == 0
    out, _ = _run("htstep_r1", gt, p, ["end=exclusive"])
    assert out["metrics"]["r1"] == pytest.approx(0.101382, abs=1e-6)

    # the same predictions keyed by global_step_index give the same score (one (video, step) per column here)
    by_id: dict[str, dict[str, int]] = {}
    for r in htstep_records:
        last = {h: k for k, h in enumerate(r["step_headline"])}
        uni = pred[r["video_uid"]]
        qs = r["clips"][0]["annotations"][0]["language_queries"]
        by_id[r["video_uid"]] = {str(q["step"]): uni[last[q["query"]]] for q in qs}
    out, w = _run("htstep_r1", gt, _write(tmp_path / "by_id.json", by_id))
    assert out["items"] == 2387 and out["metrics"]["r1"] == pytest.approx(0.108504, abs=1e-6)
    assert w.total == 0


def test_htstep_duplicate_headline_and_step_ids(tmp_path: Path) -> None:
    """"Serve hot." twice: text lookup maps to the last position; global-step keys avoid the ambiguity (§2c)."""
    rec = {
        "video_uid": "dup",
        "video_duration": 20.0,
        "activity": "Cook",
        "variation": "none",
        "step_headline": ["Serve hot.", "Cut.", "Serve hot."],
        "clips": [{"annotations": [{"language_queries": [
            {"clip_start_sec": 12.0, "clip_end_sec": 14.0, "query": "Serve hot.", "step": 32, "partial": "Full Match"},
            {"clip_start_sec": 2.0, "clip_end_sec": 4.0, "query": "Cut.", "step": 31, "partial": "Full Match"},
        ]}]}],
    }
    gt = _write(tmp_path / "gt.json", [rec])
    out, _ = _run("htstep_r1", gt, _write(tmp_path / "p1.json", {"dup": [13, 3, 0]}))
    assert out["items"] == 2 and out["metrics"]["r1"] == 0.5  # the last "Serve hot." position is the scored one
    out, _ = _run("htstep_r1", gt, _write(tmp_path / "p2.json", {"dup": [0, 3, 13]}))
    assert out["metrics"]["r1"] == 1.0
    out, w = _run("htstep_r1", gt, _write(tmp_path / "p3.json", {"dup": {"32": 13.5, "31": 30.0}}))
    assert out["metrics"]["r1"] == 0.5 and w.counts["time_clamped"] == 1  # 30 s clamps to slot 19: a miss
    out, w = _run("htstep_r1", gt, _write(tmp_path / "p4.json", {"dup": {"32": 13.5}}))
    assert out["metrics"]["r1"] == 0.5 and w.counts["missing_step"] == 1


def test_htstep_matrix_and_bad_inputs(tmp_path: Path) -> None:
    rec = {
        "video_uid": "v1",
        "video_duration": 11.5,
        "activity": "A",
        "variation": "none",
        "step_headline": ["s0", "s1", "s2", "s3"],
        "clips": [{"annotations": [{"language_queries": [
            {"clip_start_sec": 1.2, "clip_end_sec": 3.6, "query": "s0", "step": 0},
            {"clip_start_sec": 6, "clip_end_sec": 8, "query": "s2", "step": 2},
            {"clip_start_sec": 9.1, "clip_end_sec": 9.9, "query": "s2", "step": 2},
        ]}]}],
    }
    gt = _write(tmp_path / "gt.json", [rec])
    m = np.zeros((12, 4))
    for k, t in enumerate([4, 9, 10, 0]):  # Example B as a [T, K] matrix
        m[t, k] = 1.0
    out, _ = _run("htstep_r1", gt, _write(tmp_path / "m.json", {"v1": m.tolist()}))
    assert out["metrics"]["r1"] == 1.0
    out, _ = _run("htstep_r1", gt, _write(tmp_path / "m.json", {"v1": m.tolist()}), ["end=exclusive"])
    assert out["metrics"]["r1"] == 0.0
    with pytest.raises(EvalError, match="3 columns for 4 steps"):
        _run("htstep_r1", gt, _write(tmp_path / "bad.json", {"v1": m[:, :3].tolist()}))
    with pytest.raises(EvalError, match="3 predicted times for 4 steps"):
        _run("htstep_r1", gt, _write(tmp_path / "bad2.json", {"v1": [1, 2, 3]}))
    with pytest.raises(EvalError, match="not valid JSON"):
        (tmp_path / "broken.json").write_text("{", encoding="utf-8")
        _run("htstep_r1", gt, tmp_path / "broken.json")
    # missing video: its 2 annotated steps are misses; NaN time: a miss with a warning
    gt2 = _write(tmp_path / "gt2.json", [rec, {**rec, "video_uid": "v2"}])
    out, w = _run("htstep_r1", gt2, _write(tmp_path / "p.json", {"v1": [2.5, None, 7.0, 0]}))
    assert out["items"] == 4 and out["metrics"]["r1"] == 0.5
    assert w.counts["missing_video"] == 1 and w.counts["missing_step"] == 1
    # an official-schema file is refused by htstep_r1 with a hint
    with pytest.raises(EvalError, match="htstep_map"):
        _run("htstep_r1", _write(tmp_path / "off.json", {"v1": {"subset": "val_seen"}}), tmp_path / "p.json")
