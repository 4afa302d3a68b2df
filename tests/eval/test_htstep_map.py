"""HT-Step article grounding: the official activity-grouped mAP (``../shared/specs/evaluation.md`` §3).

The toy example of §3(e) (hand: 0.8), the fixture's official example predictions (0.1150196, per threshold
14.69 / 13.37 / 12.08 / 9.92 / 7.45 %), the label-permutation property of §3(a), tie rules and bad inputs.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import numpy as np
import pytest

from eval.benchmarks.htstep import (
    read_detection_csv,
    read_map_ground_truth,
    read_taxonomy,
)
from eval.metrics.htstep_map import (
    TIOU_THRESHOLDS,
    activity_grouped_map,
    filter_predictions,
    interpolated_prec_rec,
    remove_duplicate_annotations,
    segment_iou,
)
from eval.registry import EvalError, EvalInputs, Warnings, get

FIXTURE_MAP = 0.1150196
FIXTURE_PER_TIOU = [0.1469, 0.1337, 0.1208, 0.0992, 0.0745]


def _run(gt: Path, pred: Path, variant: list[str] | None = None, subset: str | None = None):
    proto = get("htstep_map")
    w = Warnings()
    inputs = EvalInputs(gt=[gt], pred=pred, variant=proto.resolve_variant(variant or []), subset=subset, warnings=w)
    return proto.evaluate(inputs), w


# ------------------------------------------------------------------------------------------------ pure functions


def test_segment_iou_and_interpolation() -> None:
    iou = segment_iou(np.array([0.0, 10.0]), np.array([[0.0, 10.0], [5.0, 15.0], [20.0, 30.0], [2.0, 4.0]]))
    assert iou.tolist() == pytest.approx([1.0, 5 / 15, 0.0, 0.2])
    # precision [1, 0.5, 2/3] at recall [1/3, 1/3, 2/3]: AP = 1/3 * 1 + 1/3 * 2/3 = 5/9
    assert interpolated_prec_rec(np.array([1.0, 0.5, 2 / 3]), np.array([1 / 3, 1 / 3, 2 / 3])) == pytest.approx(5 / 9)
    assert interpolated_prec_rec(np.array([0.0, 0.5]), np.array([0.0, 1.0])) == pytest.approx(0.5)


def test_remove_duplicate_annotations() -> None:
    keep = remove_duplicate_annotations(
        [0.0, 0.0005, 5.0, 5.0, 8.0], [10.0, 10.0005, 5.0005, 9.0, 9.0], [1, 1, 1, 2, 3]
    )
    # row 1 duplicates row 0 (same id, ends within 1e-3); row 2 is shorter than 1e-3; rows 3, 4 differ in id
    assert keep.tolist() == [True, False, False, True, True]


def _one_group_map(gt_segments, pred_segments, scores, video="v"):
    n_gt, n_pr = len(gt_segments), len(pred_segments)
    return activity_grouped_map(
        [video] * n_gt, np.array(gt_segments, float), ["A"] * n_gt,
        [video] * n_pr, np.array(pred_segments, float), ["A"] * n_pr, np.array(scores, float),
    )


def test_equal_scores_later_rows_first() -> None:
    """Equal scores: the later prediction row is taken first (``argsort()[::-1]``, §3a)."""
    res = _one_group_map([[0, 10]], [[0, 10], [0, 4.5]], [0.7, 0.7])
    # row 1 (tIoU .45) first: TP at 0.3 / 0.4 and row 0 is an FP; at >= 0.5 row 1 is an FP and row 0 a TP (AP .5)
    assert res.per_threshold.tolist() == pytest.approx([1, 1, 0.5, 0.5, 0.5])
    assert res.average == pytest.approx(0.7)


def test_equal_tiou_later_gt_first() -> None:
    """A prediction equally overlapping two GT segments locks the later one (§3a)."""
    res = _one_group_map([[0, 10], [10, 20]], [[5, 15], [10, 20]], [0.9, 0.8])
    assert res.per_threshold.tolist() == pytest.approx([0.5, 0.25, 0.25, 0.25, 0.25])


def test_tiou_equal_to_threshold_is_tp() -> None:
    res = _one_group_map([[0, 10]], [[0, 5]], [0.9])  # tIoU exactly 0.5
    assert res.per_threshold.tolist() == pytest.approx([1, 1, 1, 0, 0])


def test_no_predictions_ap_zero_and_video_without_gt_is_fp() -> None:
    res = _one_group_map([[0, 10]], [], [])
    assert res.average == 0.0
    res = activity_grouped_map(
        ["v"], np.array([[0.0, 10.0]]), ["A"], ["w", "v"], np.array([[0.0, 10.0], [0.0, 10.0]]), ["A", "A"],
        np.array([0.9, 0.8]),
    )
    assert res.average == pytest.approx(0.5)  # FP then TP: precision 1/2 at recall 1


# ------------------------------------------------------------------------------------------------ toy example §3(e)


def _write_toy(tmp_path: Path) -> tuple[Path, Path]:
    with (tmp_path / "taxonomy.csv").open("w", encoding="utf-8", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["global_step_index", "activity", "step_index", "variation", "variation_index", "headline",
                     "paragraph"])
        for i, (g, act) in enumerate([(1, "A"), (2, "A"), (3, "A"), (10, "B"), (11, "B")]):
            wr.writerow([g, act, i, "none", 1, f"step {g}", ""])
    gt = {
        "v1": {"subset": "val_seen", "activity": "A", "variation": "none", "duration": 60.0, "annotations": [
            {"segment": [0, 10], "id": 1, "label": "step 1", "partial": "Full Match"},
            {"segment": [20, 30], "id": 2, "label": "step 2", "partial": "Full Match"}]},
        "v2": {"subset": "val_seen", "activity": "B", "variation": "none", "duration": 60.0, "annotations": [
            {"segment": [0, 10], "id": 10, "label": "step 10", "partial": "Full Match"}]},
    }
    gt_path = tmp_path / "gt.json"
    gt_path.write_text(json.dumps(gt), encoding="utf-8")
    pred_path = tmp_path / "pred.csv"
    pred_path.write_text(
        ",video-id,t-start,t-end,label,score\n"
        "0,v1,0,10,2,0.9\n"  # wrong step of the right article: still a TP
        "1,v1,22,30,2,0.8\n"  # tIoU .8
        "2,v1,5,15,1,0.6\n"  # the step-1 segment is already taken: FP
        "3,v1,20,30,10,0.95\n"  # other activity: removed by the article filter
        "4,v1,20,30,3,0.97\n"  # never annotated: removed
        "5,v2,0,5.5,10,0.5\n",  # tIoU .55
        encoding="utf-8",
    )
    return gt_path, pred_path


def test_toy_example(tmp_path: Path) -> None:
    gt, pred = _write_toy(tmp_path)
    res, w = _run(gt, pred)
    assert res.metrics["map"] == pytest.approx(0.8)
    assert list(res.metrics["map_per_tiou"]) == ["0.3", "0.4", "0.5", "0.6", "0.7"]
    assert list(res.metrics["map_per_tiou"].values()) == pytest.approx([1, 1, 1, 0.5, 0.5])
    assert res.items == 4
    assert res.skip_reasons == {"not_in_article": 1, "label_not_in_gt": 1}
    assert res.resolved["taxonomy"] == str(tmp_path / "taxonomy.csv") and res.resolved["subset"] == "val_seen"
    assert w.total == 0


def test_toy_taxonomy_variant_and_bad_inputs(tmp_path: Path) -> None:
    gt, pred = _write_toy(tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    moved = other / "tax.csv"
    (tmp_path / "taxonomy.csv").rename(moved)
    with pytest.raises(EvalError, match="taxonomy file not found.*--variant taxonomy=PATH"):
        _run(gt, pred)
    res, _ = _run(gt, pred, [f"taxonomy={moved}"])
    assert res.metrics["map"] == pytest.approx(0.8)
    # wrong subset
    with pytest.raises(EvalError, match="no video of subset 'test_seen'"):
        _run(gt, pred, [f"taxonomy={moved}"], subset="test_seen")
    # unknown videos (v_ prefix matches), invalid rows and missing columns
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "video-id,t-start,t-end,label,score\n"
        "v_v2,0,5.5,10,0.5\n"  # v_ rule: still v2
        "ghost,0,5,10,0.4\n"  # unknown video
        "v2,9,3,10,0.3\n"  # t-end < t-start
        "v2,0,abc,10,0.3\n"  # not a number
        "v2,0,5,10,nan\n",  # NaN score
        encoding="utf-8",
    )
    res, w = _run(gt, bad, [f"taxonomy={moved}"])
    assert w.counts["invalid_row"] == 3 and w.counts["unknown_video"] == 1
    assert res.items == 1 and res.skip_reasons == {"unknown_video": 1}
    assert res.metrics["map_per_tiou"]["0.3"] == pytest.approx(0.5)  # B: AP 1, A: no prediction -> AP 0
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("video,start,end,label,score\nv1,0,1,1,0.5\n", encoding="utf-8")
    with pytest.raises(EvalError, match="missing column.*video-id"):
        _run(gt, nocol, [f"taxonomy={moved}"])
    # GT segments of two variations in one video: the official scorer's assertion, as a clear error
    tax2 = tmp_path / "tax2.csv"
    tax2.write_text(moved.read_text(encoding="utf-8").replace("2,A,1,none", "2,A,1,B"), encoding="utf-8")
    with pytest.raises(EvalError, match="several variations"):
        _run(gt, pred, [f"taxonomy={tax2}"])


# ------------------------------------------------------------------------------------------------ fixture


@pytest.fixture(scope="module")
def htstep_dir(shared_data: Path) -> Path:
    return shared_data / "htstep"


def test_fixture_official_example_predictions(htstep_dir: Path) -> None:
    t0 = time.perf_counter()
    res, w = _run(htstep_dir / "htstep_val_seen_annotations_official_schema.json",
                  htstep_dir / "example_predictions_val_seen.csv")
    elapsed = time.perf_counter() - t0
    assert res.metrics["map"] == pytest.approx(FIXTURE_MAP, abs=1e-6)
    assert list(res.metrics["map_per_tiou"].values()) == pytest.approx(FIXTURE_PER_TIOU, abs=5e-5)
    assert res.items + res.skipped == 3000
    assert w.total == 0
    assert elapsed < 5.0, f"fixture mAP took {elapsed:.2f} s"


def test_fixture_record_list_ground_truth_gives_the_same_map(htstep_dir: Path) -> None:
    """The R@1 record list (no subset field) holds the same segments: same mAP."""
    res, w = _run(htstep_dir / "htstep_val_seen_annotations.json", htstep_dir / "example_predictions_val_seen.csv")
    assert res.metrics["map"] == pytest.approx(FIXTURE_MAP, abs=1e-6)
    assert res.resolved["subset"] == "all" and w.total == 0


def test_fixture_label_permutation_property(htstep_dir: Path, tmp_path: Path) -> None:
    """Permuting labels among the kept predictions of each video leaves the score unchanged (§3a)."""
    tax = read_taxonomy(htstep_dir / "taxonomy.csv")
    videos = read_map_ground_truth(htstep_dir / "htstep_val_seen_annotations_official_schema.json")
    article = {}
    for v in videos:
        var = tax.variation[v.ids[0]]
        article[v.video_id] = tax.article_steps[(v.activity, var)]
    gt_labels = {i for v in videos for i in v.ids}
    rows = read_detection_csv(htstep_dir / "example_predictions_val_seen.csv", Warnings())
    flt = filter_predictions(rows.video, rows.label, article, gt_labels)
    labels = list(rows.label)
    rng = np.random.default_rng(0)
    changed = 0
    for vid in dict.fromkeys(rows.video):
        idx = [i for i in range(len(labels)) if rows.video[i] == vid and flt.keep[i]]
        perm = rng.permutation(idx)
        new = [labels[j] for j in perm]
        changed += sum(labels[i] != n for i, n in zip(idx, new))
        for i, n in zip(idx, new):
            labels[i] = n
    assert changed > 100  # the permutation really moves labels
    out = tmp_path / "permuted.csv"
    with out.open("w", encoding="utf-8", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["video-id", "t-start", "t-end", "label", "score"])
        for i in range(len(labels)):
            wr.writerow([rows.video[i], *(repr(float(x[i])) for x in (rows.start, rows.end)), labels[i],
                         repr(float(rows.score[i]))])
    res, _ = _run(htstep_dir / "htstep_val_seen_annotations_official_schema.json", out,
                  [f"taxonomy={htstep_dir / 'taxonomy.csv'}"])
    assert res.metrics["map"] == pytest.approx(FIXTURE_MAP, abs=1e-6)
    # a label moved to another activity is removed by the article filter: the score changes
    labels2 = list(rows.label)
    kept = np.flatnonzero(flt.keep)
    for i in kept[:200]:
        labels2[i] = 0  # step 0 belongs to "Make Pastel De Papa", not these videos' articles
    with out.open("w", encoding="utf-8", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["video-id", "t-start", "t-end", "label", "score"])
        for i in range(len(labels2)):
            wr.writerow([rows.video[i], *(repr(float(x[i])) for x in (rows.start, rows.end)), labels2[i],
                         repr(float(rows.score[i]))])
    res, _ = _run(htstep_dir / "htstep_val_seen_annotations_official_schema.json", out,
                  [f"taxonomy={htstep_dir / 'taxonomy.csv'}"])
    assert res.metrics["map"] < FIXTURE_MAP - 1e-3


def test_thresholds_are_the_reference_linspace() -> None:
    assert np.array_equal(TIOU_THRESHOLDS, np.linspace(0.3, 0.7, 5))
