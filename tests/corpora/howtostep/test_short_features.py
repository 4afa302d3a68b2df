"""Feature files shorter than their narrations, without a video file (docs/reason-codes.md,
``feature_duration_mismatch``; docs/corpora/howtostep.md, ``--features``).

The features are then the video, as in TAN's pipeline that HowToStep follows (Li et al., ECCV 2024, supp. §6.1):
the narrations that start at or after the last feature second are dropped and counted (``narration_beyond_video``),
the video goes on, and it is dropped (``too_few_narrations``) only when fewer than ``min_narrations`` remain. A
file far longer than the narrations stays ``feature_duration_mismatch``.

One tiny build (replayed LLM, hash encoders): four bundled videos with matching features, ``shortfeat01`` (12
narrations up to 100.5 s, a 70-row file), ``fewnarr0001`` (the same narrations, a 36-row file) and ``longfeat001``
(the same narrations, 100,000 rows).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import FAST, GOOD, build_ok, make_inputs, stats, table, write_features

DIM = 16
#: sentence starts (s); each lasts 10.5 s, so the last ends at 100.5 s. Below 70 s: 0 ... 63 and 69.5 (9 narrations),
#: at or after: 70.0, 80.0, 90.0 (3). Below 36 s: 0, 9, 18, 27 (4 < min_narrations = 5).
STARTS = [0.0, 9.0, 18.0, 27.0, 36.0, 45.0, 54.0, 63.0, 69.5, 70.0, 80.0, 90.0]
WORDS = "whisk eggs sugar flour butter vanilla cocoa cream milk salt lemon yeast".split()
SHORT, FEW, LONG = "shortfeat01", "fewnarr0001", "longfeat001"


def _sentences() -> list[tuple[str, float, float]]:
    return [(f"Now add the {w} to the bowl and mix it well.", s, s + 10.5) for w, s in zip(WORDS, STARTS)]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("short_features")
    inp = make_inputs(tmp, list(GOOD), features_dim=DIM, custom={v: _sentences() for v in (SHORT, FEW, LONG)})
    write_features(tmp / "features", SHORT, 70, DIM, seed=7)
    write_features(tmp / "features", FEW, 36, DIM, seed=8)
    write_features(tmp / "features", LONG, 100_000, DIM, seed=9)
    return build_ok(tmp / "out", *inp.args, *FAST, "--set", "epsilon2=-1", "--set", "epsilon1=0")


def test_a_short_feature_file_keeps_its_video(built):
    kept = {r["video_id"]: r for r in table(built, "steps")}
    assert set(kept) == set(GOOD) | {SHORT}
    row = kept[SHORT]
    assert row["num_frames"] == 70 and row["duration"] == pytest.approx(70.0)
    assert row["steps"] and all(0 <= s["start"] <= s["end"] <= 69 for s in row["steps"])


def test_the_narrations_beyond_are_dropped_and_counted(built):
    st = stats(built)
    assert st["counters"]["narration_beyond_video"] == 3  # shortfeat01: 70.0, 80.0, 90.0; nothing else
    # the narrations config is the transcript as cut (spec §5): all 12 sentences, the features do not change it
    narr = {r["video_id"]: r for r in table(built, "narrations")}
    assert len(narr[SHORT]["narrations"]) == len(STARTS)


def test_too_few_narrations_left_and_far_longer_features_are_dropped(built):
    dropped = {d["video_id"]: d for d in table(built, "dropped_videos")}
    assert {v: d["reason"] for v, d in dropped.items()} == {FEW: "too_few_narrations",
                                                             LONG: "feature_duration_mismatch"}
    assert "4 of 12 narrations" in dropped[FEW]["detail"]
    assert "100000 feature rows" in dropped[LONG]["detail"]
    assert stats(built)["steps"]["visual_features"]["dropped"] == {"too_few_narrations": 1,
                                                                    "feature_duration_mismatch": 1}

