"""End-to-end builds of the bundled HowToStep sample (spec howtostep.md §3-§6): the real SmolLM2 LLM and the real
faster-whisper ASR once (session fixture), then replays of its recorded LLM outputs: loading with the declared
Features, the request caches, resume after SIGKILL inside the labeler's training, and the Ray engine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from builders.build import main
from loading_scripts import howtostep as schema

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[3] / "builders" / "samples" / "howtostep"


def build(out: Path, *extra: str, work: Path | None = None) -> Path:
    args = ["howtostep", "--out", str(out), "--no-progress", "-q", *extra]
    if work is not None:
        args += ["--work-dir", str(work)]
    assert main(args) == 0
    return out / "howtostep"


def tables(root: Path, config: str) -> list[dict]:
    rows = []
    for p in sorted((root / config).glob("*.parquet")):
        rows += pq.read_table(p).to_pylist()
    return rows


def steps_without_provenance(root: Path) -> dict[str, list[dict]]:
    return {r["video_id"]: r["steps"] for r in tables(root, "steps")}


def stats(root: Path) -> dict:
    return json.loads((root / "stats.json").read_text())


@pytest.fixture(scope="session")
def sample(tmp_path_factory) -> Path:
    """The sample built with the real CPU models (SmolLM2 through transformers, faster-whisper tiny.en)."""
    return build(tmp_path_factory.mktemp("howtostep_sample"))


@pytest.fixture(scope="session")
def replayed(sample, tmp_path_factory) -> Path:
    """The sample rebuilt in a fresh work directory, answering the LLM from the first release's llm_outputs."""
    return build(tmp_path_factory.mktemp("howtostep_replay"), "--set", "llm=replay", "--set", f"llm_replay={sample}")


def test_the_sample_loads_with_the_declared_features(sample, tmp_path):
    for config, features in schema.FEATURES.items():
        ds = datasets.load_dataset(str(sample), config, cache_dir=str(tmp_path / "hf"))
        for split in ds:
            assert ds[split].features == features, (config, split)
    heldout = {x.strip() for x in (SAMPLE / "exclude_ids.txt").read_text().split() if x.strip()
               and not x.startswith("#")}
    narr = datasets.load_dataset(str(sample), "narrations", cache_dir=str(tmp_path / "hf"))
    assert {r["video_id"] for r in narr["heldout"]} == heldout  # spec §5.2: processed, in their own split
    steps = datasets.load_dataset(str(sample), cache_dir=str(tmp_path / "hf"))
    assert "train" in steps and set(steps) <= {"train", "heldout"}  # a split only when non-empty
    assert not {r["video_id"] for r in steps["train"]} & heldout


def test_every_video_is_kept_or_dropped_with_a_named_reason(sample):
    st = stats(sample)
    kept = {r["video_id"] for r in tables(sample, "steps")}
    dropped = tables(sample, "dropped_videos")
    assert not kept & {d["video_id"] for d in dropped}
    assert st["howtostep"]["videos"]["in"] == len(kept) + len(dropped)
    reasons = {d["reason"] for d in dropped}
    assert {"duplicate_video_id", "not_english", "too_few_narrations"} <= reasons, reasons
    for name, step in st["steps"].items():
        if name != "read_metadata":
            assert step["rows_in"] == step["kept"] + sum(step["dropped"].values()), name


def test_the_sample_steps_are_grounded_inside_their_videos(sample):
    for r in tables(sample, "steps"):
        assert r["steps"], r["video_id"]
        assert r["provenance"]["visual_features"] == "simulated"
        assert r["provenance"]["labeler"] == "two_stage" and r["provenance"]["labeler_checkpoint_sha256"]
        starts = [s["start"] for s in r["steps"]]
        assert starts == sorted(starts)
        for s in r["steps"]:
            assert 0 <= s["start"] <= s["end"] <= min(r["num_frames"], 1200) - 1
            assert s["end"] - s["start"] <= 8.0 and s["score"] >= 0.8 - 1e-6  # spec §3.8: start anchor, eps2
    card = (sample / "README.md").read_text()
    assert "SIMULATED" in card


def test_the_asr_videos_went_through_real_asr(sample):
    spoken = json.loads((SAMPLE / "videos" / "SPOKEN.json").read_text())
    narr = {r["video_id"]: r for r in tables(sample, "narrations")}
    for vid in spoken:
        assert narr[vid]["transcript_source"] == "asr", vid
        assert "tiny.en" in narr[vid]["asr_model"]
    c = stats(sample)["counters"]
    assert c["asr_requests"] == len(spoken)


def test_a_replay_of_the_released_llm_outputs_gives_the_same_steps(sample, replayed):
    assert steps_without_provenance(replayed) == steps_without_provenance(sample)
    assert tables(replayed, "llm_outputs") == tables(sample, "llm_outputs")


def test_changing_epsilon2_sends_no_llm_or_asr_request(sample, tmp_path):
    work = sample.parent / ".work" / "howtostep"
    again = build(tmp_path, "--set", "epsilon2=0.7", work=work)
    st = stats(again)
    for name in ("transcribe", "narrations", "llm_steps", "visual_features", "stage1"):
        assert st["steps"][name]["cached_shards"] == st["steps"][name]["shards"], name
    assert st["steps"]["train_labeler"]["fit"] == "cached"
    assert st["steps"]["stage2"]["cached_shards"] == 0
    assert all(s["score"] >= 0.7 - 1e-6 for r in tables(again, "steps") for s in r["steps"])


def test_the_request_caches_answer_a_rerun_of_the_model_stages(sample, tmp_path):
    """With the ASR and LLM stages' shards deleted, the rerun asks the per-request caches, not the models (the ASR
    answers are in the model-output cache the builds of every corpus share, ``--model-outputs``)."""
    work = tmp_path / "work"
    shutil.copytree(sample.parent / ".work" / "howtostep", work)
    shutil.copytree(sample.parent / ".work" / "model-outputs", tmp_path / "model-outputs")
    for stage in (*work.glob("videos/*_transcribe-*"), *work.glob("videos/*_llm_steps-*")):
        shutil.rmtree(stage)
    again = build(tmp_path / "out", "--model-outputs", str(tmp_path / "model-outputs"), work=work)
    c = stats(again)["counters"]
    first = stats(sample)["counters"]
    assert c.get("asr_requests", 0) == 0 and c["asr_cache_hits"] == first["asr_requests"]
    assert c.get("llm_requests", 0) == 0 and c["llm_cache_hits"] == first["llm_requests"]
    assert steps_without_provenance(again) == steps_without_provenance(sample)


def _training_started(work: Path) -> bool:
    return any(work.glob("cache/labeler/*/ckpt/resume.pt"))


def test_resume_after_sigkill_inside_the_labelers_training(replayed, tmp_path):
    out = tmp_path / "killed"
    work = out / ".work" / "howtostep"
    cmd = [sys.executable, "-m", "builders.build", "howtostep", "--out", str(out), "--no-progress", "-q",
           "--set", "llm=replay", "--set", f"llm_replay={replayed}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not _training_started(work):
        time.sleep(0.05)
    assert proc.poll() is None, "the build finished before it could be killed: " + proc.stderr.read().decode()[-800:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "howtostep").exists()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    st = stats(out / "howtostep")
    assert st["steps"]["train_labeler"]["fit"] == "ran"
    assert st["howtostep"]["labeler_loss_per_epoch"]["train_labeler"] == \
        stats(replayed)["howtostep"]["labeler_loss_per_epoch"]["train_labeler"]
    assert steps_without_provenance(out / "howtostep") == steps_without_provenance(replayed)


@pytest.mark.ray
def test_the_ray_engine_gives_the_same_rows(replayed, tmp_path):
    pytest.importorskip("ray")
    out = build(tmp_path, "--engine", "ray", "--workers", "2", "--set", "llm=replay", "--set",
                f"llm_replay={replayed}")
    assert steps_without_provenance(out) == steps_without_provenance(replayed)
    assert tables(out, "narrations") == tables(replayed, "narrations")
