"""Feature files that pass the reader and would change results silently (issue 20; docs/reason-codes.md).

* a file whose rows (one a second, Li et al., ECCV 2024, supp. §6.1) do not match the video file's duration, or,
  without a video file, an empty file or one far longer than the narrations: ``feature_duration_mismatch`` (a
  100,000-row file for a 151 s video used to make it a 100,000 s video);
* without a video file, a file shorter than the narrations is the video (TAN's rule, which HowToStep follows, Li et
  al., ECCV 2024, supp. §6.1): the narrations starting at or after its end are dropped (``narration_beyond_video``)
  and the video is ``too_few_narrations`` only when fewer than ``min_narrations`` remain;
* NaN/Inf rows and finite values that overflow the first product they enter (a float32 ``1e30``, a float64 ``1e300``):
  bad rows, repaired up to ``feature_max_bad_share`` and ``bad_features`` beyond it, for that video only (a ``1e30``
  row used to fail Stage 2 with ``A contains NaN or Inf`` and the build with exit 5).

Most cases call :class:`builders.corpora.howtostep.features.VisualFeatures` on hand-made rows; one tiny build
(replayed LLM, hash encoders, a few seconds) checks the drops end to end.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from builders.core.records import Out
from builders.corpora.howtostep.config import HowToStepConfig
from builders.corpora.howtostep.features import load_row_features
from builders.corpora.howtostep.pipeline import visual_features_step
from builders.sources.visual_features import (
    BAD_FEATURES,
    FEATURE_DURATION_MISMATCH,
    MAX_ABS_VALUE,
    FeatureFileError,
    bad_row_mask,
    check_feature_duration,
    read_visual_features,
    repair_feature_rows,
)

DIM = 8


def _vid(i: int) -> str:
    return f"vid{i:08d}"


def _features(T: int, seed: int = 0, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((T, DIM)).astype(dtype)


def _row(vid: str, duration: float | None, narrated_end: float = 150.0) -> dict:
    narr = [{"start": 0.0, "end": narrated_end / 2, "text": "first"}, {"start": narrated_end / 2,
                                                                           "end": narrated_end, "text": "last"}]
    return {"video_id": vid, "duration": duration, "narrations": narr}


def _run(tmp_path: Path, files: dict[str, np.ndarray], rows: list[dict], **cfg_kw) -> Out:
    """``VisualFeatures`` (``visual_features=file``) on ``rows`` with ``files`` saved as ``<vid>.npy``."""
    feats = tmp_path / "features"
    feats.mkdir(parents=True, exist_ok=True)
    for vid, x in files.items():
        np.save(feats / f"{vid}.npy", x)
    cfg = dataclasses.replace(HowToStepConfig(features=str(feats), visual_features="file", visual_dim=DIM), **cfg_kw)
    cfg.validate()
    step = visual_features_step(cfg)
    step.setup({"store": str(tmp_path / "store")})
    out = Out(step.name)
    step.process(rows, out)
    assert len(out.rows) + len(out.drops) == len(rows)  # nothing lost silently
    return out


def _reasons(out: Out) -> dict[str, str]:
    return {d.item_id: d.reason for d in out.drops}


# ------------------------------------------------------------------------------------ rows against the duration
def test_100000_rows_for_a_151_s_video_is_a_named_drop(tmp_path):
    files = {_vid(0): _features(151), _vid(1): _features(100_000, 1), _vid(2): _features(151, 2),
             _vid(3): _features(100_000, 3)}
    rows = [_row(_vid(0), 151.0), _row(_vid(1), 151.0), _row(_vid(2), None, 150.0), _row(_vid(3), None, 150.0)]
    out = _run(tmp_path, files, rows)
    assert _reasons(out) == {_vid(1): FEATURE_DURATION_MISMATCH, _vid(3): FEATURE_DURATION_MISMATCH}
    detail = {d.item_id: d.detail for d in out.drops}
    assert "100000 feature rows" in detail[_vid(1)] and "151.0 s video" in detail[_vid(1)]
    assert "narrations end at 150.0 s" in detail[_vid(3)]
    kept = {r["video_id"]: r for r in out.rows}
    assert kept[_vid(0)]["duration"] == 151.0 and kept[_vid(2)]["duration"] == 151.0  # T when no container duration
    assert all(r["num_frames"] == 151 for r in kept.values())


@pytest.mark.parametrize("T, duration, kept, counted", [
    (151, 151.0, True, False),       # exact
    (153, 151.0, True, False),       # 2 s off: the counter's own tolerance
    (166, 151.0, True, True),        # 15 s off, within max(2 s, 10 %) = 15.1 s: proceed, counted
    (167, 151.0, False, False),      # 16 s off
    (136, 151.0, True, True),        # 15 s short
    (135, 151.0, False, False),
    (12, 10.0, True, False),         # short video: the 2 s floor
    (13, 10.0, False, False),
])
def test_container_duration_tolerance(tmp_path, T, duration, kept, counted):
    out = _run(tmp_path, {_vid(0): _features(T)}, [_row(_vid(0), duration, narrated_end=min(duration, 9.0))])
    assert bool(out.rows) == kept, out.drops
    assert (out.counters.get("feature_length_mismatch", 0) == 1) == counted
    if not kept:
        assert _reasons(out) == {_vid(0): FEATURE_DURATION_MISMATCH}


@pytest.mark.parametrize("T, reason", [
    (150, None), (136, None),        # narrations (starting at 0 and 75 s) end at 150 s
    (134, None),                     # 16 s short of the speech: the file is the video, both narrations start in it
    (76, None),                      # the second narration starts in its last second
    (75, "too_few_narrations"),      # it starts at the end: 1 narration left, fewer than min_narrations = 5
    (314, None), (316, FEATURE_DURATION_MISMATCH),  # silent outro: up to 2 x 150 + 15
])
def test_transcript_only_bounds(tmp_path, T, reason):
    out = _run(tmp_path, {_vid(0): _features(T)}, [_row(_vid(0), None, 150.0)])
    assert _reasons(out) == ({_vid(0): reason} if reason else {}), out.drops
    if not reason:
        assert out.rows[0]["num_frames"] == T and out.rows[0]["duration"] == float(T)
        assert len(out.rows[0]["narrations"]) == 2 and not out.counters.get("narration_beyond_video")


def test_the_tolerances_are_config_keys(tmp_path):
    files = {_vid(0): _features(300)}
    rows = [_row(_vid(0), 151.0)]
    assert _reasons(_run(tmp_path, files, rows)) == {_vid(0): FEATURE_DURATION_MISMATCH}
    assert _run(tmp_path, files, rows, feature_duration_tolerance_frac=1.0).rows
    assert _run(tmp_path, files, rows, feature_duration_tolerance_s=150.0).rows
    # transcript only: the ratio bounds the silent tail
    files, rows = {_vid(1): _features(500)}, [_row(_vid(1), None, 150.0)]
    assert _reasons(_run(tmp_path, files, rows)) == {_vid(1): FEATURE_DURATION_MISMATCH}
    assert _run(tmp_path, files, rows, feature_transcript_span_ratio=4.0).rows


def test_check_feature_duration_without_any_duration_checks_nothing():
    assert check_feature_duration(100_000, None, None) == 0.0
    assert check_feature_duration(100_000, float("nan"), None) == 0.0
    assert check_feature_duration(151, 0.0, 150.0) == 0.0  # a zero container duration falls back to the narrations
    with pytest.raises(FeatureFileError) as e:
        check_feature_duration(100_000, 0.0, 150.0)
    assert e.value.reason == FEATURE_DURATION_MISMATCH


def test_check_feature_duration_refuses_far_longer_and_empty_but_not_shorter_without_a_video_file():
    """Without a video file the narrations bound the features from above only: 70 rows for narrations ending at
    100.5 s pass (the caller drops the narrations beyond them); 0 rows and 100,000 rows do not."""
    assert check_feature_duration(70, None, 100.5) == 0.0
    assert check_feature_duration(1, None, 100.5) == 0.0
    assert check_feature_duration(211, None, 100.5) == 0.0  # 2 x 100.5 + max(2, 10.05) = 211.05
    for rows in (0, 212, 100_000):
        with pytest.raises(FeatureFileError) as e:
            check_feature_duration(rows, None, 100.5)
        assert e.value.reason == FEATURE_DURATION_MISMATCH
    with pytest.raises(FeatureFileError):
        check_feature_duration(0, None, None)
    with pytest.raises(FeatureFileError) as e:  # with a video file: unchanged, 70 rows are 30 s off a 100 s video
        check_feature_duration(70, 100.0, 100.5)
    assert "100.0 s video" in e.value.detail


def test_an_empty_feature_file_is_bad_features(tmp_path):
    out = _run(tmp_path, {_vid(0): np.zeros((0, DIM), np.float32)}, [_row(_vid(0), None, 150.0)])
    assert _reasons(out) == {_vid(0): BAD_FEATURES}


# ------------------------------------------------- shorter than the narrations without a video file (TAN's rule)
#: 12 narrations; the last ends at 100.5 s. Against 70 rows (0-69 s): starts 0 ... 63 and 69.5 lie in the features
#: (9), starts 70.0, 80.0 and 90.0 do not (3). Against 36 rows: 0, 9, 18, 27 (4); against 37 rows also 36 (5).
STARTS = [0.0, 9.0, 18.0, 27.0, 36.0, 45.0, 54.0, 63.0, 69.5, 70.0, 80.0, 90.0]


def _narrated_row(vid: str, duration: float | None) -> dict:
    narr = [{"index": i, "text": f"sentence {i}", "start": s, "end": s + 10.5} for i, s in enumerate(STARTS)]
    return {"video_id": vid, "duration": duration, "narrations": narr}


def test_features_shorter_than_the_narrations_keep_the_video_and_drop_the_narrations_beyond(tmp_path):
    out = _run(tmp_path, {_vid(0): _features(70)}, [_narrated_row(_vid(0), None)])
    assert not out.drops
    (row,) = out.rows
    assert [n["index"] for n in row["narrations"]] == list(range(9))  # 69.5 s: kept, its end clipped later
    assert out.counters["narration_beyond_video"] == 3  # 70.0, 80.0, 90.0
    assert row["num_frames"] == 70 and row["duration"] == 70.0
    assert load_row_features(row, DIM).shape == (70, DIM)


@pytest.mark.parametrize("T, min_narrations, kept, beyond", [
    (37, 5, 5, 7),       # 0, 9, 18, 27, 36 remain: exactly min_narrations
    (36, 5, None, None),  # 0, 9, 18, 27: fewer than 5
    (36, 4, 4, 8),       # the threshold is the config key
    (1, 1, 1, 11),       # one row: only the narration at 0 s
])
def test_the_video_is_dropped_only_when_fewer_than_min_narrations_remain(tmp_path, T, min_narrations, kept, beyond):
    out = _run(tmp_path, {_vid(0): _features(T)}, [_narrated_row(_vid(0), None)], min_narrations=min_narrations)
    if kept is None:
        assert _reasons(out) == {_vid(0): "too_few_narrations"} and not out.rows
        assert "4 of 12 narrations" in out.drops[0].detail and "min_narrations=5" in out.drops[0].detail
        assert not out.counters.get("narration_beyond_video")
    else:
        assert not out.drops and len(out.rows[0]["narrations"]) == kept
        assert out.counters["narration_beyond_video"] == beyond


def test_with_a_video_file_the_narrations_are_left_alone(tmp_path):
    """A container duration: the features are checked against it as before, and the narrations beyond them stay
    (the labelers count them, ``narration_beyond_video``, and give them no frame)."""
    out = _run(tmp_path, {_vid(0): _features(70), _vid(1): _features(70, 1)},
               [_narrated_row(_vid(0), 70.0), _narrated_row(_vid(1), 100.0)])
    assert _reasons(out) == {_vid(1): FEATURE_DURATION_MISMATCH}
    assert len(out.rows[0]["narrations"]) == 12 and not out.counters.get("narration_beyond_video")


def test_min_narrations_keys_only_the_file_mode():
    """``min_narrations`` can drop a video only with feature files: the other modes keep their cache keys."""
    file_step = visual_features_step(HowToStepConfig(features="f", visual_features="file"))
    sim_step = visual_features_step(HowToStepConfig(visual_features="simulated"))
    assert file_step.cache_config()["min_narrations"] == 5
    assert "min_narrations" not in sim_step.cache_config()


# ------------------------------------------------------------------------------------- non-finite feature values
def test_rows_beyond_the_fp16_range_are_bad_rows():
    x = _features(10)
    x[2, 3] = 1e30           # finite in float32; its square is Inf
    x[4, 0] = -MAX_ABS_VALUE  # the largest fp16 value is fine
    x[5, 1] = np.inf
    x[6, 2] = np.nan
    assert bad_row_mask(x).tolist() == [False, False, True, False, False, True, True, False, False, False]
    assert bad_row_mask(x, max_abs=1.0).sum() > 3


@pytest.mark.parametrize("case, mutate, dtype", [
    ("inf_row", lambda x: x.__setitem__(3, np.inf), np.float32),
    ("nan_row", lambda x: x.__setitem__((3, 0), np.nan), np.float32),
    ("float32_1e30", lambda x: x.__setitem__((3, 5), 1e30), np.float32),
    ("float64_1e300", lambda x: x.__setitem__((3, 5), 1e300), np.float64),
    ("float64_1e300_neg", lambda x: x.__setitem__((3, 5), -1e300), np.float64),
])
def test_one_non_finite_row_is_repaired_or_dropped_for_that_video_only(tmp_path, case, mutate, dtype):
    """Up to ``feature_max_bad_share`` (5 %) such rows are repaired; with the share 0 the video is ``bad_features``;
    the other videos of the batch are kept either way, and what is kept is finite and fp16-safe."""
    bad = _features(151, 1, dtype)
    mutate(bad)
    files = {_vid(0): _features(151), _vid(1): bad, _vid(2): _features(151, 2)}
    rows = [_row(_vid(i), 151.0) for i in range(3)]
    out = _run(tmp_path / "repair", files, rows)
    assert not out.drops and out.counters["features_repaired"] == 1
    for r in out.rows:
        x = load_row_features(r, DIM)
        assert x.shape == (151, DIM) and np.isfinite(x).all() and np.abs(x).max() <= MAX_ABS_VALUE
    out = _run(tmp_path / "strict", files, rows, feature_max_bad_share=0.0)
    assert _reasons(out) == {_vid(1): BAD_FEATURES}
    assert {r["video_id"] for r in out.rows} == {_vid(0), _vid(2)}


def test_more_non_finite_rows_than_the_share_is_bad_features(tmp_path):
    x = _features(20, 1)
    x[5] = np.inf           # 1 of 20 = 5 %: repaired
    out = _run(tmp_path / "a", {_vid(1): x}, [_row(_vid(1), 20.0, 19.0)])
    assert out.rows and out.counters["features_repaired"] == 1
    x[6, 0] = 3e38          # 2 of 20 = 10 %
    out = _run(tmp_path / "b", {_vid(1): x}, [_row(_vid(1), 20.0, 19.0)])
    assert _reasons(out) == {_vid(1): BAD_FEATURES}
    assert "2 of 20 rows" in out.drops[0].detail
    assert _run(tmp_path / "c", {_vid(1): x}, [_row(_vid(1), 20.0, 19.0)], feature_max_bad_share=0.1).rows


def test_a_lower_max_abs_makes_large_values_bad(tmp_path):
    x = _features(40, 1)
    x[7] = 500.0
    out = _run(tmp_path / "a", {_vid(0): x}, [_row(_vid(0), 40.0, 39.0)])
    assert out.rows and not out.counters.get("features_repaired")
    out = _run(tmp_path / "b", {_vid(0): x}, [_row(_vid(0), 40.0, 39.0)], feature_max_abs=100.0)
    assert out.rows and out.counters["features_repaired"] == 1
    np.testing.assert_array_equal(load_row_features(out.rows[0], DIM)[7], np.asarray(x[6], np.float16))


def test_reader_thresholds_are_checked():
    with pytest.raises(ValueError, match="max_bad_share"):
        repair_feature_rows(_features(3), max_bad_share=float("nan"))
    with pytest.raises(ValueError, match="max_abs"):
        repair_feature_rows(_features(3), max_abs=1e9)


def test_computed_non_finite_features_are_repaired_or_bad(tmp_path, monkeypatch):
    """``visual_features=compute``: an encoder that returns NaN rows goes through the same rule as a file."""
    import builders.models.vision_encoder as ve

    def fake_extract(src, encoder, num_seconds):
        x = _features(num_seconds)
        x[: int(src.stem[-1])] = np.nan  # the id's last digit: how many leading NaN rows
        return x, {}

    monkeypatch.setattr(ve, "extract_video_features", fake_extract)
    cfg = HowToStepConfig(visual_features="compute", visual_dim=DIM, vision_model_path=str(tmp_path))
    step = visual_features_step(cfg)
    step.store = tmp_path / "store"
    step.store.mkdir()
    step.encoder, step.index, step.text = object(), None, None
    step.media_files = {_vid(i): tmp_path / f"{_vid(i)}.mp4" for i in (1, 9)}
    out = Out(step.name)
    step.process([_row(_vid(1), 100.0, 99.0), _row(_vid(9), 100.0, 99.0)], out)
    assert _reasons(out) == {_vid(9): BAD_FEATURES}  # 9 of 100 NaN rows
    assert out.counters["features_repaired"] == 1 and np.isfinite(load_row_features(out.rows[0], DIM)).all()


def test_read_visual_features_counts_float64_overflow_as_a_bad_row(tmp_path):
    x = _features(50, dtype=np.float64)
    x[0, 0] = 1e300
    np.save(tmp_path / "a.npy", x)
    y, counters = read_visual_features(tmp_path / "a.npy", DIM)
    assert counters == {"features_repaired": 1} and np.array_equal(y[0], y[1])


# ------------------------------------------------------------------------------------------- one tiny build
def test_tiny_build_drops_each_broken_feature_file_by_name_and_exits_0(tmp_path):
    """Issue 20 end to end: a 100,000-row file, a file with 10 % Inf rows and one with a ``1e30`` row among good
    videos: the build completes (exit 0), the first two are named drops, the third is repaired, nothing else lost."""
    from tests.corpora.howtostep.conftest import FAST, GOOD, make_inputs, run_build, stats, table

    ids = GOOD + ["longfeat001", "infrows0001", "hugeval0001"]
    inp = make_inputs(tmp_path, ids, features_dim=16)
    feats = tmp_path / "features"
    x = np.load(feats / "longfeat001.npy")
    np.save(feats / "longfeat001.npy", np.resize(x, (100_000, 16)))
    x = np.load(feats / "infrows0001.npy")
    x[: len(x) // 10 + 1] = np.inf
    np.save(feats / "infrows0001.npy", x)
    x = np.load(feats / "hugeval0001.npy")
    x[3, 0] = 1e30
    np.save(feats / "hugeval0001.npy", x)
    rc, err, root = run_build(tmp_path / "out", *inp.args, *FAST, "--set", "epsilon2=-1", "--set", "epsilon1=0")
    assert rc == 0, err[-3000:]
    dropped = {d["video_id"]: d["reason"] for d in table(root, "dropped_videos")}
    assert dropped == {"longfeat001": FEATURE_DURATION_MISMATCH, "infrows0001": BAD_FEATURES}
    kept = {r["video_id"]: r for r in table(root, "steps")}
    assert set(kept) == set(GOOD) | {"hugeval0001"}
    assert max(r["duration"] for r in kept.values()) < 300
    st = stats(root)
    assert st["counters"]["features_repaired"] == 1
    assert st["steps"]["visual_features"]["dropped"] == {FEATURE_DURATION_MISMATCH: 1, BAD_FEATURES: 1}
