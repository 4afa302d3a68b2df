"""Per-item invalidation of ``showhowto`` (issue 19 item 2): the files a manifest row names (its transcript, its
video) key only the shards that hold that video. Editing one transcript redoes that video's shard from ``transcribe``
on; editing one video file redoes its shard of the steps that read the video (``probe``, ``transcribe`` when it has
no transcript, ``keyframe_alignment``); the release equals a fresh build from the edited inputs. Built from the
sample's every-reason manifest with its recorded LLM answers (replayed), as ``test_build`` does."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import main

from .conftest import SAMPLE

pytestmark = pytest.mark.slow

AFTER_TRANSCRIBE = ("transcribe", "llm_filter", "length_gate", "llm_keysteps", "keyframe_alignment", "extract_images")


def _inputs(root: Path) -> list[str]:
    return ["--manifest", str(root / "manifest_reasons.csv"), "--videos", str(root / "HowTo100M_v1.csv"),
            "--tasks", str(root / "task_ids.csv"), "--set", "llm=replay",
            "--set", f"llm_replay={root / 'llm_outputs.jsonl'}", "--test-tasks", "2", "--test-size", "2",
            "--min-task-seqs", "1"]


def _build(out: Path, root: Path) -> dict:
    assert main(["showhowto", "--out", str(out), "--no-progress", "-q", "--shard-size", "2", *_inputs(root)]) == 0
    return json.loads((out / "showhowto" / "stats.json").read_text())


def _computed(stats: dict) -> dict[str, int]:
    return {k: s["computed_shards"] for k, s in stats["steps"].items()}


def _release(out: Path) -> dict[str, list[dict]]:
    root = out / "showhowto"
    files = [*sorted(root.glob("*/*.parquet")), root / "drops.parquet"]
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in files}


def test_editing_one_transcript_or_one_video_redoes_only_its_shards(tmp_path):
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root)
    old = time.time() - 60  # older than the fingerprint memo's racy window, as inputs not just written are
    for p in root.rglob("*"):
        os.utime(p, (old, old))
    first = _build(tmp_path / "out", root)
    n = first["steps"]["probe"]["shards"]
    assert n >= 10
    before = _release(tmp_path / "out")

    # one transcript (shwRoastVg1's, kept in the release) is now declared German: its shard from transcribe on
    t = root / "transcripts" / "shwRoastVg1.json"
    data = json.loads(t.read_text())
    data["language"] = "de"
    t.write_text(json.dumps(data))
    st = _build(tmp_path / "out", root)
    assert _computed(st) == {"read_manifest": 0, "probe": 0, **{k: 1 for k in AFTER_TRANSCRIBE}}
    assert st["drops"]["non_english"] == first["drops"]["non_english"] + 1
    after_transcript = _release(tmp_path / "out")
    assert after_transcript != before

    # one video (speech_tea.mp4, transcribed by ASR, of one row only) gets trailing bytes the demuxer ignores: the
    # steps reading it redo that shard (the ASR answer comes from the request cache) and the rest stays
    v = root / "videos" / "speech_tea.mp4"
    v.write_bytes(v.read_bytes() + b"\0" * 64)
    st = _build(tmp_path / "out", root)
    assert _computed(st) == {"read_manifest": 0, "probe": 1, "transcribe": 1, "llm_filter": 0, "length_gate": 0,
                             "llm_keysteps": 0, "keyframe_alignment": 1, "extract_images": 0}
    work = st["this_build"]["counters"]  # the shard's two ASR videos: answered by the request cache, no ASR ran
    assert work.get("asr_cache_hits") == 2 and "asr_requests" not in work
    assert _release(tmp_path / "out") == after_transcript

    _build(tmp_path / "fresh", root)
    assert _release(tmp_path / "fresh") == after_transcript
