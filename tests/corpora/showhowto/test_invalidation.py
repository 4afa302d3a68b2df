"""Per-item invalidation of ``showhowto`` (issue 19 item 2, issue 35 item 3): the files a manifest row names (its
transcript, its video) key only the shards that hold that video, and inside them the row-wise steps (probe, transcribe,
the LLM stages, the length gate) process that video alone. Editing one transcript redoes that video from
``transcribe`` on; editing one video file redoes it in the steps that read the video (``probe``, ``transcribe`` when
it has no transcript, ``keyframe_alignment``); inserting or removing one manifest row changes the one shard that holds
it (shards end at ids, not positions: ``pipeline.is_boundary``) and sends the model that video's requests only. The
release equals a fresh build from the edited inputs. Built from the sample's every-reason manifest with its recorded
LLM answers (replayed), as ``test_build`` does."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import main
from builders.corpora.showhowto import align, llm_stages, transcribe
from builders.corpora.showhowto.pipeline import is_boundary

from .conftest import SAMPLE

pytestmark = pytest.mark.slow

AFTER_PROBE = ("probe", "transcribe", "llm_filter", "length_gate", "llm_keysteps", "keyframe_alignment",
               "extract_images")


AFTER_TRANSCRIBE = AFTER_PROBE[1:]


def _inputs(root: Path) -> list[str]:
    return ["--manifest", str(root / "manifest_reasons.csv"), "--videos", str(root / "HowTo100M_v1.csv"),
            "--tasks", str(root / "task_ids.csv"), "--set", "llm=replay",
            "--set", f"llm_replay={root / 'llm_outputs.jsonl'}", "--test-tasks", "2", "--test-size", "2",
            "--min-task-seqs", "1"]


def _build(out: Path, root: Path, shard_size: int = 2) -> dict:
    assert main(["showhowto", "--out", str(out), "--no-progress", "-q", "--shard-size", str(shard_size),
                 *_inputs(root)]) == 0
    return json.loads((out / "showhowto" / "stats.json").read_text())


#: the row-wise steps of the pipeline: every step after the source
ROW_WISE = (transcribe.Probe, transcribe.Transcribe, llm_stages.LLMFilter, llm_stages.LengthGate,
            llm_stages.LLMKeySteps, align.KeyframeAlignment, align.ExtractImages)


@pytest.fixture
def processed(monkeypatch) -> dict[str, list[str]]:
    """The video ids each step's ``process`` is given in this process (the local runner), per step name."""
    seen: dict[str, list[str]] = {}
    for cls in ROW_WISE:
        def spy(self, rows, out, _orig=cls.process):
            seen.setdefault(self.name, []).extend(r["video_id"] for r in rows)
            return _orig(self, rows, out)
        monkeypatch.setattr(cls, "process", spy)
    return seen


def _row_wise(seen: dict[str, list[str]]) -> dict[str, list[str]]:
    return {c.name: sorted(seen.get(c.name, [])) for c in ROW_WISE}


def _computed(stats: dict) -> dict[str, int]:
    return {k: s["computed_shards"] for k, s in stats["steps"].items()}


def _release(out: Path) -> dict[str, list[dict]]:
    root = out / "showhowto"
    files = [*sorted(root.glob("*/*.parquet")), root / "drops.parquet"]
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in files}


def test_editing_one_transcript_or_one_video_redoes_only_that_video(tmp_path, processed):
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
    processed.clear()
    st = _build(tmp_path / "out", root)
    assert _computed(st) == {"read_manifest": 0, "probe": 0, **{k: 1 for k in AFTER_TRANSCRIBE}}
    # its shard's other rows are reused: transcribe alone sees the video, which then drops (nothing after it runs)
    assert _row_wise(processed) == {"probe": [], "transcribe": ["shwRoastVg1"], "llm_filter": [], "length_gate": [],
                                    "llm_keysteps": [], "keyframe_alignment": [], "extract_images": []}
    assert st["drops"]["non_english"] == first["drops"]["non_english"] + 1
    after_transcript = _release(tmp_path / "out")
    assert after_transcript != before

    # one video (speech_tea.mp4, transcribed by ASR, of one row only) gets trailing bytes the demuxer ignores: the
    # steps reading it redo that shard (the ASR answer comes from the request cache) and the rest stays
    v = root / "videos" / "speech_tea.mp4"
    v.write_bytes(v.read_bytes() + b"\0" * 64)
    processed.clear()
    st = _build(tmp_path / "out", root)
    assert _computed(st) == {"read_manifest": 0, "probe": 1, "transcribe": 1, "llm_filter": 0, "length_gate": 0,
                             "llm_keysteps": 0, "keyframe_alignment": 1, "extract_images": 0}
    assert _row_wise(processed) == {"probe": ["shwAsrTea01"], "transcribe": ["shwAsrTea01"], "llm_filter": [],
                                    "length_gate": [], "llm_keysteps": [], "keyframe_alignment": ["shwAsrTea01"],
                                    "extract_images": []}
    work = st["this_build"]["counters"]  # that video's ASR: answered by the request cache, no ASR ran
    assert work.get("asr_cache_hits") == 1 and "asr_requests" not in work
    assert _release(tmp_path / "out") == after_transcript

    _build(tmp_path / "fresh", root)
    assert _release(tmp_path / "fresh") == after_transcript


def _manifest(root: Path, without: set[str]) -> None:
    lines = (SAMPLE / "manifest_reasons.csv").read_text().splitlines(keepends=True)
    (root / "manifest_reasons.csv").write_text("".join(ln for ln in lines if ln.split(",")[0] not in without))


def test_inserting_or_removing_one_manifest_row_recomputes_that_video_only(tmp_path, processed):
    """Shards of 3 videos on average. A row is inserted in the middle of the manifest (one with recorded answers, so
    the model is asked) and another removed: each changes the shard that holds it, and no later shard."""
    inserted, removed = "shwShelf001", "shwPancake1"  # early rows; neither id ends a shard (else, 1 in shard_size,
    assert not is_boundary(inserted, 3) and not is_boundary(removed, 3)  # the later shards' indices would move)
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root)
    _manifest(root, {inserted})
    old = time.time() - 60
    for p in root.rglob("*"):
        os.utime(p, (old, old))
    first = _build(tmp_path / "out", root, 3)
    assert first["steps"]["read_manifest"]["shards"] >= 4

    _manifest(root, set())  # the row is back in its place
    processed.clear()
    st = _build(tmp_path / "out", root, 3)
    # the manifest is listed again (same bytes for the unchanged shards); each later stage redoes one shard
    assert {k: v for k, v in _computed(st).items() if k != "read_manifest"} == {k: 1 for k in AFTER_PROBE}
    assert _row_wise(processed) == {k: [inserted] for k in _row_wise(processed)}
    work = st["this_build"]["counters"]  # its filter and key-step requests, and nothing from the cache
    assert work["llm_requests"] == 2 and "llm_cache_hits" not in work
    assert st["this_build"]["rows_reused"] > 0
    with_row = _release(tmp_path / "out")
    _build(tmp_path / "fresh", root, 3)
    assert _release(tmp_path / "fresh") == with_row

    _manifest(root, {removed})
    processed.clear()
    st = _build(tmp_path / "out", root, 3)
    assert {k: v for k, v in _computed(st).items() if k != "read_manifest"} == {k: 1 for k in AFTER_PROBE}
    assert _row_wise(processed) == {k: [] for k in _row_wise(processed)}  # the others of its shard are reused
    assert not {"llm_requests", "llm_cache_hits"} & set(st["this_build"]["counters"])
    without = _release(tmp_path / "out")
    assert without != with_row
    _build(tmp_path / "fresh2", root, 3)
    assert _release(tmp_path / "fresh2") == without
