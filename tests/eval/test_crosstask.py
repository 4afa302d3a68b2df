"""CrossTask zero-shot Average R@1 (``../shared/specs/evaluation.md`` §4): example C, the fixture regressions of the
uniform baseline, the 20-set sampling, both ground-truth layouts and bad inputs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from eval.metrics.crosstask import (
    average_recall,
    avg_r1_over_sets,
    sample_sets,
    task_recalls,
)
from eval.registry import EvalError, EvalInputs, Warnings, get


def _run(gt: Path, pred: Path, variant: list[str] | None = None):
    proto = get("crosstask")
    w = Warnings()
    inputs = EvalInputs(gt=[gt], pred=pred, variant=proto.resolve_variant(variant or []), warnings=w)
    return proto.evaluate(inputs), w


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def _record(vid: str, task: str, steps: list[str], segs: list[tuple[int, float, float]], duration: float = 10.0):
    return {
        "video_uid": vid,
        "video_duration": duration,
        "task_id": task,
        "task_name": f"task {task}",
        "task_steps": steps,
        "clips": [{"annotations": [{"language_queries": [
            {"clip_start_sec": s, "clip_end_sec": e, "query": steps[k], "step": k} for k, s, e in segs
        ]}]}],
    }


# Example C (§4e), 0-based steps
EX_C = [
    _record("v1", "1", ["a", "b", "c"], [(0, 1.5, 3.2), (2, 6.0, 8.0)]),
    _record("v2", "1", ["a", "b", "c"], [(0, 0, 2), (1, 4, 5)]),
    _record("w1", "2", ["d", "e"], [(0, 0, 3), (1, 5, 7)]),
]
EX_C_ARGMAX = {"v1": [3, 5, 8], "v2": [1, 9, 0], "w1": [2, 6]}


def _one_hot(slots: list[int], n_slots: int = 10) -> list[list[float]]:
    m = np.zeros((n_slots, len(slots)))
    m[slots, np.arange(len(slots))] = 1.0
    return m.tolist()


def test_metric_functions_example_c() -> None:
    # per video: hits / annotated steps (exclusive), task index
    hits, annotated, task = [1, 1, 2], [2, 2, 2], [0, 0, 1]
    rec = task_recalls(hits, annotated, task, 2)
    assert rec.tolist() == [0.5, 1.0]
    assert average_recall(rec) == 0.75
    assert sum(hits) / sum(annotated) == pytest.approx(4 / 6)  # pooled over all steps: the wrong 0.6667
    assert math.isnan(task_recalls([0], [0], [0], 1)[0])  # a task without annotated step is skipped
    mean, per_set = avg_r1_over_sets(hits, annotated, task, 2, [[0, 2], [1, 2], [0, 1]])
    assert per_set == [0.75, 0.75, 0.5]  # the third set holds task 0 only
    assert mean == pytest.approx(2 / 3)


def test_example_c_protocol(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", EX_C)
    mats = _write(tmp_path / "m.json", {v: _one_hot(s) for v, s in EX_C_ARGMAX.items()})
    res, w = _run(gt, mats, ["protocol=all"])
    assert res.metrics["avg_r1"] == pytest.approx(0.75)
    assert res.items == 6 and w.total == 0
    res, _ = _run(gt, mats, ["protocol=all", "end=inclusive"])
    assert res.metrics["avg_r1"] == pytest.approx(0.875)
    # seconds per step (slot + 0.4) give the same; the sets protocol on 3 videos samples all 3 every time
    times = _write(tmp_path / "t.json", {v: [t + 0.4 for t in s] for v, s in EX_C_ARGMAX.items()})
    res, w = _run(gt, times)
    assert res.metrics["avg_r1"] == pytest.approx(0.75) and w.total == 0


def test_release_layout(tmp_path: Path) -> None:
    root = tmp_path / "crosstask_release"
    (root / "annotations").mkdir(parents=True)
    (root / "tasks_primary.txt").write_text(
        "1\ntask one\nhttp://example.org/1\n3\na,b,c\n\n2\ntask two\nhttp://example.org/2\n2\nd,e\n\n", encoding="utf-8"
    )
    (root / "videos.csv").write_text("1,v1,u\n1,v2,u\n2,w1,u\n99,zz,u\n", encoding="utf-8")
    (root / "annotations" / "1_v1.csv").write_text("1,1.5,3.2\n3,6.0,8.0\n", encoding="utf-8")
    (root / "annotations" / "1_v2.csv").write_text("1,0,2\n2,4,5\n", encoding="utf-8")
    (root / "annotations" / "2_w1.csv").write_text("1,0,3\n2,5,7\n", encoding="utf-8")
    mats = _write(tmp_path / "m.json", {v: _one_hot(s) for v, s in EX_C_ARGMAX.items()})
    res, w = _run(root, mats, ["protocol=all"])
    assert res.metrics["avg_r1"] == pytest.approx(0.75)
    assert res.resolved == {"gt_format": "release"}
    assert w.counts["no_duration"] == 1
    (root / "annotations" / "2_w1.csv").write_text("1,0,3\n7,5,7\n", encoding="utf-8")
    with pytest.raises(EvalError, match="2_w1.csv, line 2: step 7 outside 1..2"):
        _run(root, mats)


def test_bad_inputs(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", EX_C)
    # several 1s in a column of a 0/1 matrix: rejected (recall could exceed 1)
    m = np.asarray(_one_hot(EX_C_ARGMAX["v1"]))
    m[0, 0] = 1.0
    preds = {v: _one_hot(s) for v, s in EX_C_ARGMAX.items()}
    preds["v1"] = m.tolist()
    with pytest.raises(EvalError, match="v1.*2 ones in column 0"):
        _run(gt, _write(tmp_path / "multi.json", preds), ["protocol=all"])
    # real-valued ties are argmax ties (lowest slot), not rejected
    preds["v1"] = (np.asarray(_one_hot(EX_C_ARGMAX["v1"])) * 0.5).tolist()
    res, _ = _run(gt, _write(tmp_path / "half.json", preds), ["protocol=all"])
    assert res.metrics["avg_r1"] == pytest.approx(0.75)
    # missing video, unknown video, an all-NaN column
    preds = {v: _one_hot(s) for v, s in EX_C_ARGMAX.items() if v != "v2"}
    preds["ghost"] = [[1.0]]
    w1 = np.asarray(preds["w1"])
    w1[:, 1] = np.nan
    preds["w1"] = [[None if np.isnan(x) else x for x in row] for row in w1.tolist()]
    res, w = _run(gt, _write(tmp_path / "partial.json", preds), ["protocol=all"])
    assert res.metrics["avg_r1"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    assert w.counts["missing_video"] == 1 and w.counts["unknown_video"] == 1 and w.counts["all_nan_column"] == 1
    # wrong column count, wrong layout, a dict prediction (global step ids are HT-Step only)
    with pytest.raises(EvalError, match="2 columns for 3 steps"):
        _run(gt, _write(tmp_path / "cols.json", {"v1": _one_hot([1, 2])}))
    with pytest.raises(EvalError, match="top level"):
        _run(gt, _write(tmp_path / "list.json", [1, 2, 3]))
    with pytest.raises(EvalError, match="got an object"):
        _run(gt, _write(tmp_path / "dict.json", {"v1": {"0": 3.0}}))
    with pytest.raises(EvalError, match="step 5 is not a 0-based index"):
        _run(_write(tmp_path / "badgt.json", [_record("v1", "1", ["a"], [(0, 1, 2)]) | {
            "clips": [{"annotations": [{"language_queries": [
                {"clip_start_sec": 1, "clip_end_sec": 2, "query": "a", "step": 5}]}]}]}]), tmp_path / "cols.json")


def test_task_without_annotated_step_is_skipped(tmp_path: Path) -> None:
    # task 3: its only segment starts at T = 10, so the step has no slot
    gt = _write(tmp_path / "gt.json", EX_C + [_record("x1", "3", ["f"], [(0, 10.0, 12.0)])])
    preds = {v: _one_hot(s) for v, s in EX_C_ARGMAX.items()} | {"x1": _one_hot([0])}
    res, w = _run(gt, _write(tmp_path / "p.json", preds), ["protocol=all"])
    assert res.metrics["avg_r1"] == pytest.approx(0.75)
    assert w.counts["task_without_annotated_step"] == 1
    assert res.skip_reasons == {"step_without_slot": 1}


# ------------------------------------------------------------------------------------------------ fixture


@pytest.fixture(scope="module")
def crosstask_records(shared_data: Path) -> list[dict]:
    return json.loads((shared_data / "crosstask" / "crosstask_video_annotations.json").read_text(encoding="utf-8"))


def test_sampling_matches_python_random(crosstask_records: list[dict]) -> None:
    ids = [r["video_uid"] for r in crosstask_records]
    sets = sample_sets(len(ids), 20, 1850, 0)
    assert [ids[i] for i in sets[0][:3]] == ["E3EXJggzObE", "42rZTb8JFlE", "fB0QS6Dsf7c"]
    state = random.getstate()
    try:
        for i in (0, 7, 19):
            random.seed(i)
            assert [ids[j] for j in sets[i]] == random.sample(ids, 1850)
    finally:
        random.setstate(state)
    assert all(len(s) == 1850 and len(set(s)) == 1850 for s in sets)
    assert len(sample_sets(10, 2, 1850, 0)[0]) == 10  # min(1850, n)


def test_fixture_uniform_baseline(shared_data: Path, crosstask_records: list[dict], tmp_path: Path) -> None:
    gt = shared_data / "crosstask" / "crosstask_video_annotations.json"
    pred = {}
    for r in crosstask_records:
        n_slots, k = math.ceil(r["video_duration"]), len(r["task_steps"])
        pred[r["video_uid"]] = [min(n_slots - 1, math.floor((i + 0.5) * n_slots / k)) for i in range(k)]
    p = _write(tmp_path / "uniform.json", pred)
    expected = {
        ("all", "exclusive"): 0.097242,
        ("sets", "exclusive"): 0.098040,
        ("all", "inclusive"): 0.107142,
        ("sets", "inclusive"): 0.107998,
    }
    for (protocol, end), value in expected.items():
        res, w = _run(gt, p, [f"protocol={protocol}", f"end={end}"])
        assert res.metrics["avg_r1"] == pytest.approx(value, abs=1e-6), (protocol, end)
        assert w.total == 0
    res, _ = _run(gt, p)  # defaults: sets, exclusive
    assert res.metrics["avg_r1"] == pytest.approx(0.098040, abs=1e-6)
    assert res.skip_reasons == {"step_without_slot": 19}  # steps whose segments all start at or after T
