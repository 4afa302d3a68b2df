"""End-to-end builds of the bundled ShowHowTo sample (spec showhowto.md §3-§10) with its recorded LLM answers
(``llm_outputs.jsonl``, replayed: no model is loaded; the real SmolLM2 run is ``make sample`` in CI): every reason code
of §10, count conservation, the release through ``datasets.load_dataset``, the images config and the upstream
layout, resume after SIGKILL, and the Ray engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from io import BytesIO
from pathlib import Path

import datasets
import numpy as np
import pyarrow.parquet as pq
import pytest

from builders.build import main
from loading_scripts import showhowto as schema

from .conftest import SAMPLE

pytestmark = pytest.mark.slow
#: the full sample (every row) with its recorded answers, split as the default sample is (2 tasks, 1 sequence each)
REPLAY = ["--manifest", str(SAMPLE / "manifest_reasons.csv"), "--videos", str(SAMPLE / "HowTo100M_v1.csv"),
          "--tasks", str(SAMPLE / "task_ids.csv"), "--set", "llm=replay",
          "--set", f"llm_replay={SAMPLE / 'llm_outputs.jsonl'}", "--test-tasks", "2", "--test-size", "2",
          "--min-task-seqs", "1"]
#: spec §10: every reason code the sample exercises, one video each (manifest rows: 23; kept: 5)
REASONS = {"duplicate_video_id", "invalid_video_id", "video_unreadable", "no_audio", "empty_transcript",
           "non_english", "malformed_transcript", "filtered_non_instructional", "filter_ambiguous", "too_long",
           "llm_error", "llm_no_json", "llm_malformed", "llm_truncated", "steps_not_ordered", "too_few_steps",
           "steps_out_of_range", "alignment_infeasible"}
KEPT = {"shwRoastVg1", "shwPancake1", "shwAsrTea01", "shwAsrEgg01", "shwShelf001"}


def build(out: Path, *extra: str) -> Path:
    assert main(["showhowto", "--out", str(out), "--no-progress", "-q", "--shard-size", "2", *REPLAY, *extra]) == 0
    return out / "showhowto"


def rows(root: Path, config: str) -> list[dict]:
    return [r for p in sorted((root / config).glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def stats(root: Path) -> dict:
    return json.loads((root / "stats.json").read_text())


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("showhowto"), "--with-images", "--export-upstream")


def test_every_reason_code_once_and_every_row_accounted_for(sample):
    st = stats(sample)
    assert set(st["drops"]) == REASONS and all(n == 1 for n in st["drops"].values())
    h = st["showhowto"]
    assert h["videos"]["in"] == 23 == h["videos"]["kept"] + sum(st["drops"].values())
    assert {r["video_id"] for r in rows(sample, "sequences")} == KEPT
    drops = pq.read_table(sample / "drops.parquet").to_pylist()
    assert {d["reason"] for d in drops} == REASONS and len(drops) == 18
    assert st["counters"]["asr_requests"] == 2 and st["counters"]["parse_repaired"] == 1  # the trailing comma


def test_statistics_of_spec_section_1(sample):
    h = stats(sample)["showhowto"]
    seqs = rows(sample, "sequences")
    n = np.array([r["num_steps"] for r in seqs], float)
    words = np.array([len(s["instruction"].split()) for r in seqs for s in r["steps"]], float)
    assert h["steps_per_sequence"]["mean"] == pytest.approx(round(n.mean(), 3))
    assert h["steps_per_sequence"]["std"] == pytest.approx(round(n.std(ddof=0), 3))
    assert h["words_per_step"]["mean"] == pytest.approx(round(words.mean(), 3))
    assert h["filter"] == {"judged": 16, "yes": 14, "no": 1, "ambiguous": 1, "accepted_ambiguous": 0, "kept_despite_no": 0}
    assert h["aligners"] == {"middle": 5} and h["tasks"] == 5
    assert stats(sample)["histograms"] == {}  # the report draws them once, as its own charts
    report = (sample / "report.html").read_text()
    assert report.count("words per step: mean") == 1 and "steps per sequence" not in report
    card = (sample / "README.md").read_text()  # the sample's keyframes come from the middle aligner: said once
    keyframes = card.split("**Keyframes**")[1].split("\n5.")[0]
    assert "aligner `middle`" in keyframes and "chosen by a dynamic programme" not in keyframes


def test_the_release_loads_with_its_features(sample, tmp_path):
    seqs = datasets.load_dataset(str(sample), cache_dir=str(tmp_path / "hf"))
    assert set(seqs) == {"train", "test"} and seqs["train"].features == schema.FEATURES["sequences"]
    assert seqs["train"].num_rows + seqs["test"].num_rows == 5 and seqs["test"].num_rows == 2
    imgs = datasets.load_dataset(str(sample), "images", cache_dir=str(tmp_path / "hf"))
    row = imgs["train"][0]
    assert len(row["images"]) == row["num_steps"] and row["images"][0].size == (160, 120)
    test_tasks = {r["task_id"] for r in seqs["test"]}
    assert len(test_tasks) == 2  # sample split: 2 tasks, one sequence each (spec §8 with the sample's settings)


def test_keyframes_are_ordered_middle_frames_with_reextraction_positions(sample):
    keyframes = json.loads((sample / "keyframes.json").read_text())
    for r in rows(sample, "sequences"):
        assert r["aligner"] == "middle" and r["mean_score"] is None
        times = [s["frame_time"] for s in r["steps"]]
        assert times == sorted(times) and len(set(times)) == len(times)
        for s, k in zip(r["steps"], keyframes[r["sequence_id"]]):
            assert (k["start_sec"], k["frame_idx"]) == (s["start_sec"], s["frame_idx"])
            assert s["start_sec"] + s["frame_idx"] / 5 == pytest.approx(s["frame_time"], abs=1e-4)
            assert s["start_sec"] == max(0, int(np.floor(s["start"] - 15.0 + 1e-9)))
            # middle aligner: the grid frame nearest the interval midpoint (no two steps share a frame here)
            assert abs(s["frame_time"] - (s["start"] + s["end"]) / 2) <= 0.1 + 1e-4


def test_card_report_and_upstream_layout(sample):
    card = (sample / "README.md").read_text()
    assert "chosen by the `middle` aligner" in card and "filter_v1@" in card and "keysteps_v1@" in card
    prompts = json.loads((sample / "upstream" / "prompts.json").read_text())
    assert set(prompts) == KEPT
    from PIL import Image

    for sid, instructions in prompts.items():
        img = Image.open(sample / "upstream" / "imgseqs" / f"{sid}.jpg")
        assert img.size == (160 * len(instructions), 120)
    html = (sample / "report.html").read_text()
    assert "segments per video" in html and "words per step" in html  # steps per sequence, drawn once


def test_resume_after_sigkill(sample, tmp_path):
    """Kill the build once the key-step stage has written a shard, rerun: same rows, and the finished shards are
    not recomputed."""
    out = tmp_path / "killed"
    work = out / ".work" / "showhowto"
    cmd = [sys.executable, "-m", "builders.build", "showhowto", "--out", str(out), "--no-progress", "-q",
           "--shard-size", "2", *REPLAY]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not list(work.glob("videos/*llm_keysteps*/part-*.stats.json")):
        time.sleep(0.02)
    assert proc.poll() is None, "the build ended before it could be killed: " + proc.stderr.read().decode()[-800:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "showhowto").exists()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    again = stats(out / "showhowto")
    assert rows(out / "showhowto", "sequences") == rows(sample, "sequences") and again["drops"] == stats(sample)["drops"]
    assert again["steps"]["transcribe"]["cached_shards"] == again["steps"]["transcribe"]["shards"]  # not redone


@pytest.mark.ray
def test_the_ray_engine_gives_the_same_rows(sample, tmp_path):
    pytest.importorskip("ray")
    out = build(tmp_path, "--engine", "ray", "--workers", "2")
    assert rows(out, "sequences") == rows(sample, "sequences")


def test_images_config_frames_are_the_keyframes(sample):
    """The JPEG of each step is grid frame ``start_sec*5 + frame_idx`` of its video (spec §7)."""
    from PIL import Image

    from builders.models import media

    manifest = {line.split(",")[0]: line.split(",")[1]
                for line in (SAMPLE / "manifest_reasons.csv").read_text().splitlines()}
    r = next(x for x in rows(sample, "images") if x["video_id"] == "shwPancake1")
    want = {5 * s["start_sec"] + s["frame_idx"] for s in r["steps"]}
    frames = {g: f for g, f in media.iter_grid_frames(SAMPLE / manifest["shwPancake1"], wanted=want.__contains__)
              if f is not None}
    for s, im in zip(r["steps"], r["images"]):
        got = np.asarray(Image.open(BytesIO(im["bytes"])).convert("RGB")).astype(int)
        assert np.abs(got - frames[5 * s["start_sec"] + s["frame_idx"]]).mean() < 3.0
