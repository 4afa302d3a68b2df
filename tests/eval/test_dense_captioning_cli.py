"""``python eval/run.py densevid|soda`` end to end: the worked examples with the real Java scorers, the real fixtures
against values of the reference implementations run side by side (tests/crosscheck/), readers and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dvc_perturb import perturb_predictions
from dvc_toy import GT_F, PRED_E, requires_java, submission, write_toy
from eval_cli import run_cli, run_json


def test_help_lists_protocols():
    out = run_cli("--help").stdout
    assert "densevid" in out and "soda" in out
    sub = run_cli("densevid", "--help").stdout
    assert "garbage=2018" in sub and "--video-list" in sub


@requires_java
def test_example_f_with_real_scorers(tmp_path):
    gt, pred = write_toy(tmp_path)
    out = run_json("densevid", "--gt", str(gt), "--pred", str(pred), "--out", str(tmp_path / "r.json"))
    assert set(out) == {"protocol", "variant", "metrics", "counts"}
    assert out["variant"]["garbage"] == "2018" and out["variant"]["tious"] == [0.3, 0.5, 0.7, 0.9]
    m = out["metrics"]
    per = [m["per_tiou"][t] for t in ("0.3", "0.5", "0.7", "0.9")]
    # [regression] values of the reference evaluator, spec §6(e)
    assert [p["meteor"] for p in per] == pytest.approx([0.280161, 0.081433, 0.081433, 0.075188], abs=1e-6)
    assert m["meteor"] == pytest.approx(0.129554, abs=1e-6)
    assert [p["bleu4"] for p in per] == pytest.approx([0.107683, 0.101595, 0.101595, 0.101595], abs=1e-6)
    assert m["bleu4"] == pytest.approx(0.103117, abs=1e-6)
    assert m["cider"] == pytest.approx(1.223958, abs=1e-6)
    assert m["precision"] == m["recall"] == pytest.approx(0.239583, abs=1e-6)
    assert out["counts"]["items"] == 4 and out["counts"]["warning_reasons"] == {"no_prediction": 1}
    assert json.loads((tmp_path / "r.json").read_text()) == out
    m21 = run_json("densevid", "--gt", str(gt), "--pred", str(pred), "--variant", "garbage=2021")["metrics"]
    assert m21["meteor"] == pytest.approx(0.183598, abs=1e-6)
    assert m21["cider"] == m["cider"] and m21["bleu4"] == m["bleu4"]


@requires_java
def test_example_e_soda_with_real_meteor(tmp_path):
    gt, pred = write_toy(tmp_path)
    out = run_json("soda", "--gt", str(gt), "--pred", str(pred))
    d, c = out["metrics"]["soda_d"], out["metrics"]["soda_c"]
    assert (d["precision"], d["recall"], d["f1"]) == pytest.approx((0.461111, 0.377778, 0.405556), abs=1e-6)
    # METEOR 1.5 scores identical sentences 1 and (toast, slice) 0.2730: the spec's hand values hold
    assert (c["precision"], c["recall"], c["f1"]) == pytest.approx((0.372222, 0.288889, 0.316667), abs=1e-6)
    assert out["counts"]["items"] == 3 and out["counts"]["skip_reasons"] == {"gt_video_without_prediction": 1}
    zero = run_json("soda", "--gt", str(gt), "--pred", str(pred), "--variant", "missing=zero")
    assert zero["counts"]["items"] == 4 and zero["metrics"]["soda_d"]["f1"] == pytest.approx(1.216667 / 4, abs=1e-6)


# Values of the reference implementations (PDVC densevid_eval3/evaluate2018.py and evaluate2021.py with
# verbose=True, fujiso/SODA @9cb3e2c soda.py) on the same files, produced by
# tests/crosscheck/dense_captioning_reference.py; ours equal them to < 1e-15 under several PYTHONHASHSEEDs. [ref]
REFERENCE = {
    "youcook2/yc2_val_pdvc_format.json": {
        "densevid": {"meteor": 0.145778930, "cider": 1.749231037, "bleu4": 0.193945648,
                     "precision": 0.385385791, "recall": 0.371650101},
        "meteor_2021": 0.182039378,
        "soda_c": (0.243627767, 0.243527257, 0.241508479),
        "soda_d": (0.478584116, 0.479469415, 0.474767176),
    },
    "tasty/tasty_val_anet_format.json": {
        "densevid": {"meteor": 0.148003648, "cider": 1.611005589, "bleu4": 0.179831699,
                     "precision": 0.413453914, "recall": 0.379478215},
        "meteor_2021": 0.175499356,
        "soda_c": (0.233681753, 0.234902017, 0.232397580),
        "soda_d": (0.476567478, 0.478468115, 0.473682419),
    },
}


def _fixture_files(tmp: Path, gt_path: Path) -> tuple[Path, Path]:
    pred = tmp / "pred.json"
    pred.write_text(json.dumps(perturb_predictions(json.loads(gt_path.read_text()), seed=0)))
    return gt_path, pred


@pytest.fixture(scope="module")
def yc2_files(tmp_path_factory, shared_data):
    return _fixture_files(tmp_path_factory.mktemp("yc2"), shared_data / "youcook2/yc2_val_pdvc_format.json")


@requires_java
@pytest.mark.slow
@pytest.mark.parametrize("fixture, n_videos", [("youcook2/yc2_val_pdvc_format.json", 457),
                                               ("tasty/tasty_val_anet_format.json", 400)])
def test_fixture_equals_reference_implementations(shared_data, tmp_path, fixture, n_videos):
    gt, pred = _fixture_files(tmp_path, shared_data / fixture)
    ref = REFERENCE[fixture]
    out = run_json("densevid", "--gt", str(gt), "--pred", str(pred))
    for key, value in ref["densevid"].items():
        assert out["metrics"][key] == pytest.approx(value, abs=1e-6), key
    assert out["counts"]["items"] == n_videos
    assert out["counts"]["skip_reasons"] == {"unknown_video": 1}
    soda_out = run_json("soda", "--gt", str(gt), "--pred", str(pred))
    for kind in ("soda_c", "soda_d"):
        got = soda_out["metrics"][kind]
        assert (got["precision"], got["recall"], got["f1"]) == pytest.approx(ref[kind], abs=1e-6), kind
    assert soda_out["counts"]["items"] == n_videos - n_videos // 23


@requires_java
@pytest.mark.slow
def test_official_youcook2_json_gives_the_same_numbers(yc2_files, shared_data, tmp_path):
    """The official ``database`` file (no ``v_``) with --subset validation equals the PDVC file (``v_`` ids)."""
    gt, pred = yc2_files
    official = shared_data / "youcook2/youcookii_annotations_trainval.json"
    out = run_json("densevid", "--gt", str(official), "--subset", "validation", "--pred", str(pred),
                   "--variant", "tious=0.5")
    pdvc = run_json("densevid", "--gt", str(gt), "--pred", str(pred), "--variant", "tious=0.5")
    assert out["variant"]["gt_format"] == "youcook2" and out["variant"]["subset"] == "validation"
    for key in ("meteor", "cider", "bleu4", "precision", "recall"):
        assert out["metrics"][key] == pytest.approx(pdvc["metrics"][key], abs=1e-12), key
    assert out["counts"]["items"] == 457


@requires_java
def test_video_list_restricts_and_is_reported(tmp_path):
    gt, pred = write_toy(tmp_path)
    listing = tmp_path / "videos.txt"
    listing.write_text("# two videos\n101/v1\nv_v3\nmissing_video\n")
    out = run_json("densevid", "--gt", str(gt), "--pred", str(pred), "--video-list", str(listing),
                   "--variant", "tious=0.3")
    assert out["counts"]["items"] == 2
    assert out["variant"]["video_list"] == {"file": str(listing), "listed": 3, "videos": 2}
    assert out["counts"]["warning_reasons"]["video_list_unknown"] == 1
    # v1 precision 2/3, v3 precision 1/2 at 0.3 (v3's [6,9] misses by the epsilon)
    assert out["metrics"]["precision"] == pytest.approx((2 / 3 + 1 / 2) / 2, abs=1e-9)
    # predictions of v2 are not part of the restricted ground truth: counted as unknown
    assert out["counts"]["skip_reasons"]["unknown_video"] == 1


@requires_java
def test_bad_predictions_are_counted_warnings(tmp_path):
    results = json.loads(json.dumps(PRED_E))
    results["v1"].append({"sentence": "broken", "timestamp": [float("nan"), 3.0]})
    results["v1"].append({"sentence": "reversed", "timestamp": [30, 20]})
    results["v1"].append({"timestamp": [0, 10]})
    results["v1"].append({"sentence": "no time"})
    results["v2"].append({"sentence": "ajouter le jalapeño", "timestamp": [0, 10]})
    results["v4"] = []
    results["unknown"] = [{"sentence": "x", "timestamp": [0, 1]}]
    gt, pred = write_toy(tmp_path, GT_F, results)
    proc = run_cli("densevid", "--gt", str(gt), "--pred", str(pred), "--json", "--variant", "tious=0.3")
    out = json.loads(proc.stdout)
    reasons = out["counts"]["warning_reasons"]
    assert reasons == {"bad_timestamp": 2, "malformed_prediction": 2, "non_ascii_text": 1,
                       "empty_prediction_list": 1, "unknown_video": 1}
    assert out["counts"]["skip_reasons"] == {"malformed_prediction": 2, "unknown_video": 1}
    assert out["counts"]["warnings"] == 7
    assert "bad_timestamp" in proc.stderr
    # v1 has 5 scorable predictions now (2 matched at 0.3), v2 two (both match), v3 1/2, v4 0
    assert out["metrics"]["precision"] == pytest.approx((2 / 5 + 1 + 1 / 2 + 0) / 4, abs=1e-9)
    soda_out = run_json("soda", "--gt", str(gt), "--pred", str(pred), "--variant", "kinds=d")
    assert soda_out["counts"]["items"] == 4  # v4's empty list is scored 0, not dropped


@pytest.mark.parametrize("content, message", [
    ("[]", "expected"),
    ('{"results": []}', "expected"),
    ("{not json", "not valid JSON"),
])
def test_wrong_prediction_layout_is_a_clear_error(tmp_path, content, message):
    gt, _ = write_toy(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = run_cli("densevid", "--gt", str(gt), "--pred", str(bad), check=False)
    assert proc.returncode == 2 and message in proc.stderr and str(bad) in proc.stderr


def test_bad_ground_truth_and_arguments_are_clear_errors(tmp_path):
    gt, pred = write_toy(tmp_path)
    bad_gt = tmp_path / "bad_gt.json"
    bad_gt.write_text(json.dumps({"v1": {"timestamps": [[0, 1]], "sentences": []}}))
    proc = run_cli("soda", "--gt", str(bad_gt), "--pred", str(pred), check=False)
    assert proc.returncode == 2 and "1 timestamps for 0 sentences" in proc.stderr
    proc = run_cli("soda", "--gt", str(tmp_path / "nope.json"), "--pred", str(pred), check=False)
    assert proc.returncode == 2 and "not found" in proc.stderr
    proc = run_cli("densevid", "--gt", str(gt), "--pred", str(pred), "--variant", "garbage=2019", check=False)
    assert proc.returncode == 2 and "2018|2021" in proc.stderr
    proc = run_cli("densevid", "--gt", str(gt), "--pred", str(pred), "--variant", "colour=red", check=False)
    assert proc.returncode == 2 and "unknown" in proc.stderr
    proc = run_cli("densevid", "--gt", str(gt), "--pred", str(pred), "--subset", "validation", check=False)
    assert proc.returncode == 2 and "official YouCook2" in proc.stderr
    proc = run_cli("nonexistent_protocol", "--gt", str(gt), check=False)
    assert proc.returncode == 2


def test_soda_without_any_matching_video_is_an_error(tmp_path):
    gt, pred = write_toy(tmp_path, GT_F, {"other": [{"sentence": "x", "timestamp": [0, 1]}]})
    proc = run_cli("soda", "--gt", str(gt), "--pred", str(pred), "--variant", "kinds=d", check=False)
    assert proc.returncode == 2 and "no ground-truth video has a prediction" in proc.stderr


def test_submission_helper_shape():
    assert set(submission({})) == {"version", "results", "external_data"}
