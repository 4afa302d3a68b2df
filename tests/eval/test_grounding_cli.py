"""``python eval/run.py`` for the grounding protocols (``../shared/specs/evaluation.md`` §0-§4), run as a subprocess
on toy files: the JSON shape ``{"protocol", "variant", "metrics", "counts"}``, values, warnings and errors."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest
from eval_cli import run_cli, run_json


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, check=False, timeout=120)


_json = run_json


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


HTM_GT = {
    "vidA": [[1, 1.2, 3.6, "a0"], [0, 4, 5, "a1"], [1, 6.5, 7.5, "a2"], [1, 8, 9, "a3"], [0, 9, 9.5, "a4"]],
    "vidB": [[1, 2, 3, "b0"], [0, 5, 6, "b1"]],
}
# Example A in the layout of ``python -m builders.nasva.infer``: pred_time + align_score per text
HTM_PRED = {
    "vidA": {"pred_time": [4.2, 0.0, 7.9, 2.5, 0.0], "align_score": [0.9, 0.2, 0.6, 0.4, 0.5]},
    "vidB": {"pred_time": [3.0, 1.0], "align_score": [0.8, 0.3]},
}


def test_htm_align_cli_nasva_infer_layout(tmp_path: Path) -> None:
    gt = _write(tmp_path / "val_htm_align.json", HTM_GT)
    pred = _write(tmp_path / "PRED.json", HTM_PRED)
    out = _json("htm_align", "--gt", gt, "--pred", pred)
    assert out["protocol"] == "htm_align"
    assert out["variant"] == {"rule": "tan", "tan_zero_mask": False}
    assert out["metrics"]["r1"] == pytest.approx(0.75)
    assert out["metrics"]["roc_auc"] == pytest.approx(0.916667, abs=1e-6)
    assert out["counts"] == {"items": 4, "skipped": 0, "warnings": 0}
    out = _json("htm_align", "--gt", gt, "--pred", pred, "--variant", "rule=nsva", "--variant", "tan_zero_mask=true")
    assert out["variant"] == {"rule": "nsva", "tan_zero_mask": True}
    assert out["metrics"]["r1"] == pytest.approx(0.5)
    # --out writes the same object; the readable table prints x100
    dest = tmp_path / "res" / "htm.json"
    proc = _cli("htm_align", "--gt", gt, "--pred", pred, "--out", dest)
    assert proc.returncode == 0 and "75.00" in proc.stdout
    assert json.loads(dest.read_text(encoding="utf-8"))["metrics"]["r1"] == pytest.approx(0.75)


def test_htm_align_cli_warnings_and_nulls(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", HTM_GT)
    pred = _write(tmp_path / "p.json", {"vidA": {"pred_time": [4.2, 0.0, 7.9, 2.5, -3.0]}, "extra": [1.0]})
    proc = _cli("htm_align", "--gt", gt, "--pred", pred, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["metrics"]["roc_auc"] is None  # no align_score: null, never NaN
    assert out["metrics"]["r1"] == pytest.approx(2 / 4)  # vidB missing: b0 is a miss
    reasons = out["counts"]["warning_reasons"]
    assert reasons == {"missing_video": 1, "no_align_score": 1, "time_clamped": 1, "unknown_video": 1}
    assert out["counts"]["warnings"] == 4
    assert "warning: missing_video x1" in proc.stderr


def test_htstep_r1_cli(tmp_path: Path) -> None:
    rec = {
        "video_uid": "v1",
        "video_duration": 12.0,
        "activity": "A",
        "variation": "none",
        "step_headline": ["s0", "s1", "s2", "s3"],
        "clips": [{"annotations": [{"language_queries": [
            {"clip_start_sec": 1.2, "clip_end_sec": 3.6, "query": "s0", "step": 100},
            {"clip_start_sec": 6, "clip_end_sec": 8, "query": "s2", "step": 102},
            {"clip_start_sec": 9.1, "clip_end_sec": 9.9, "query": "s2", "step": 102},
        ]}]}],
    }
    gt = _write(tmp_path / "gt.json", [rec])
    pred = _write(tmp_path / "result.json", {"v1": [4, 9, 10, 0]})  # Example B, NaSVA's result.json layout
    out = _json("htstep_r1", "--gt", gt, "--pred", pred)
    assert out["variant"] == {"end": "inclusive"} and out["metrics"] == {"r1": 1.0}
    assert out["counts"]["items"] == 2
    out = _json("htstep_r1", "--gt", gt, "--pred", pred, "--variant", "end=exclusive")
    assert out["metrics"] == {"r1": 0.0}


def test_htstep_map_cli(tmp_path: Path) -> None:
    with (tmp_path / "taxonomy.csv").open("w", encoding="utf-8", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["global_step_index", "activity", "step_index", "variation", "variation_index", "headline",
                     "paragraph"])
        for i, (g, act) in enumerate([(1, "A"), (2, "A"), (3, "A"), (10, "B"), (11, "B")]):
            wr.writerow([g, act, i, "none", 1, f"step {g}", ""])
    gt = _write(tmp_path / "ann.json", {
        "v1": {"subset": "val_seen", "activity": "A", "variation": "none", "duration": 60, "annotations": [
            {"segment": [0, 10], "id": 1, "label": "s", "partial": "Full Match"},
            {"segment": [20, 30], "id": 2, "label": "s", "partial": "Full Match"}]},
        "v2": {"subset": "val_seen", "activity": "B", "variation": "none", "duration": 60, "annotations": [
            {"segment": [0, 10], "id": 10, "label": "s", "partial": "Full Match"}]},
    })
    pred = tmp_path / "pred.csv"
    pred.write_text(
        ",video-id,t-start,t-end,label,score\n0,v1,0,10,2,0.9\n1,v1,22,30,2,0.8\n2,v1,5,15,1,0.6\n"
        "3,v1,20,30,10,0.95\n4,v1,20,30,3,0.97\n5,v2,0,5.5,10,0.5\n",
        encoding="utf-8",
    )
    out = _json("htstep_map", "--gt", gt, "--pred", pred)
    assert out["metrics"]["map"] == pytest.approx(0.8)
    assert out["metrics"]["map_per_tiou"] == pytest.approx({"0.3": 1, "0.4": 1, "0.5": 1, "0.6": 0.5, "0.7": 0.5})
    assert out["variant"] == {"taxonomy": str(tmp_path / "taxonomy.csv"), "subset": "val_seen"}
    assert out["counts"]["skip_reasons"] == {"label_not_in_gt": 1, "not_in_article": 1}
    proc = _cli("htstep_map", "--gt", gt, "--pred", pred, "--subset", "test_seen", "--json")
    assert proc.returncode == 2 and "no video of subset 'test_seen'" in proc.stderr
    proc = _cli("htstep_map", "--gt", gt, "--pred", pred, "--variant", f"taxonomy={tmp_path / 'nope.csv'}")
    assert proc.returncode == 2 and "taxonomy file not found" in proc.stderr


def test_htstep_map_cli_fixture(shared_data: Path) -> None:
    d = shared_data / "htstep"
    out = _json("htstep_map", "--gt", d / "htstep_val_seen_annotations_official_schema.json",
                "--pred", d / "example_predictions_val_seen.csv")
    assert out["metrics"]["map"] == pytest.approx(0.1150196, abs=1e-6)
    assert out["variant"]["taxonomy"] == str(d / "taxonomy.csv")


def test_crosstask_cli(tmp_path: Path) -> None:
    def rec(vid, task, steps, segs):
        return {"video_uid": vid, "video_duration": 10.0, "task_id": task, "task_name": task, "task_steps": steps,
                "clips": [{"annotations": [{"language_queries": [
                    {"clip_start_sec": s, "clip_end_sec": e, "query": steps[k], "step": k} for k, s, e in segs]}]}]}

    gt = _write(tmp_path / "ct.json", [
        rec("v1", "1", ["a", "b", "c"], [(0, 1.5, 3.2), (2, 6.0, 8.0)]),
        rec("v2", "1", ["a", "b", "c"], [(0, 0, 2), (1, 4, 5)]),
        rec("w1", "2", ["d", "e"], [(0, 0, 3), (1, 5, 7)]),
    ])
    pred = _write(tmp_path / "p.json", {"v1": [3, 5, 8], "v2": [1, 9, 0], "w1": [2, 6]})  # Example C
    out = _json("crosstask", "--gt", gt, "--pred", pred)
    assert out["variant"] == {"protocol": "sets", "end": "exclusive", "n_sets": 20, "set_size": 1850, "seed": 0,
                              "gt_format": "records"}
    assert out["metrics"] == {"avg_r1": pytest.approx(0.75)}
    out = _json("crosstask", "--gt", gt, "--pred", pred, "--variant", "end=inclusive", "--variant", "protocol=all")
    assert out["metrics"] == {"avg_r1": pytest.approx(0.875)}
    # sets of 2 of the 3 videos: seeds 0.. pick different pairs; the mean is the mean of the per-set averages
    out = _json("crosstask", "--gt", gt, "--pred", pred, "--variant", "set_size=2", "--variant", "n_sets=3")
    assert 0.0 < out["metrics"]["avg_r1"] <= 1.0


@pytest.mark.parametrize(
    ("protocol", "content", "message"),
    [
        ("htm_align", "{not json", "not valid JSON"),
        ("htstep_r1", "{not json", "not valid JSON"),
        ("crosstask", "{not json", "not valid JSON"),
        ("htm_align", "[1, 2]", "top level"),
    ],
)
def test_cli_bad_prediction_files(tmp_path: Path, protocol: str, content: str, message: str) -> None:
    if protocol == "htm_align":
        gt = _write(tmp_path / "gt.json", HTM_GT)
    elif protocol == "htstep_r1":
        gt = _write(tmp_path / "gt.json", [{"video_uid": "v", "video_duration": 5.0, "step_headline": ["a"],
                                             "clips": []}])
    else:
        gt = _write(tmp_path / "gt.json", [{"video_uid": "v", "video_duration": 5.0, "task_id": 1,
                                             "task_steps": ["a"], "clips": []}])
    pred = tmp_path / "bad_pred.json"
    pred.write_text(content, encoding="utf-8")
    proc = _cli(protocol, "--gt", gt, "--pred", pred, "--json")
    assert proc.returncode == 2
    assert message in proc.stderr and "bad_pred.json" in proc.stderr
    assert proc.stdout == ""


def test_cli_bad_variant_and_ground_truth(tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", HTM_GT)
    pred = _write(tmp_path / "p.json", HTM_PRED)
    proc = _cli("htm_align", "--gt", gt, "--pred", pred, "--variant", "rule=median")
    assert proc.returncode == 2 and "expected one of tan|nsva" in proc.stderr
    proc = _cli("crosstask", "--gt", gt, "--pred", pred, "--variant", "n_sets=x")
    assert proc.returncode == 2 and "n_sets" in proc.stderr
    bad_gt = _write(tmp_path / "bad_gt.json", {"vidA": [[1, "x", 3, "t"]]})
    proc = _cli("htm_align", "--gt", bad_gt, "--pred", pred)
    assert proc.returncode == 2 and "bad_gt.json, video vidA, row 0" in proc.stderr
    proc = _cli("htm_align", "--gt", tmp_path / "missing.json", "--pred", pred)
    assert proc.returncode == 2 and "not found" in proc.stderr
