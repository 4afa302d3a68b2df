"""Issue 19 (ARCHITECTURE.md "Scale") on HowToStep builds of synthetic HowTo100M videos (``tests/perf/scale_inputs``):

* an input that feeds one video keys only that video's rows: editing one video's caption (its slice of
  ``raw_caption.json``, or its WhisperX file) or its feature file reruns only the shards holding it, and the release
  then equals a fresh build;
* no step does per-row work that scans the whole input (``NarrationReader.ids`` is never called per video);
* the work directory holds no file per video: the raw-caption split is blocks + an index, features are one file per
  work shard, and simulated features are regenerated bit for bit from what the shard file keeps.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.perf.scale_inputs import make_howtostep_inputs

from .conftest import FAST, build_ok, stats

#: per-video stages: each holds the edited video in one shard, which is all they redo
PER_VIDEO = ("transcribe", "narrations", "llm_steps", "require_steps", "visual_features", "stage1", "stage1_labels",
             "require_grounded_steps")


def _inputs(tmp: Path, n: int, fmt: str = "htm_raw") -> tuple[dict, list[str]]:
    made = make_howtostep_inputs(tmp / "in", n, seed=3)
    args = list(made["args"])
    if fmt == "whisperx":  # the same captions as one WhisperX file a video
        folder = tmp / "in" / "whisperx"
        folder.mkdir()
        for vid, caps in json.loads(Path(made["transcripts"]).read_text()).items():
            segs = [{"start": s, "end": e, "text": t} for s, e, t in zip(caps["start"], caps["end"], caps["text"])]
            (folder / f"{vid}.json").write_text(json.dumps({"segments": segs}))
        i = args.index("--transcripts")
        args[i + 1:i + 4] = [str(folder), "--transcript-format", "whisperx"]
    return made, [*args, *FAST, "--shard-size", "3"]


def _tables(root: Path) -> dict[str, list[dict]]:
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in sorted(root.glob("*/*.parquet"))}


def _build(out: Path, args: list[str]) -> Path:
    return build_ok(out, *args)


def _rerun(out: Path, args: list[str]):
    """The pipelines again on the build's work directory (the BuildResult: an unchanged release is not rewritten)."""
    from builders.build import load_corpus, make_parser
    from builders.core.driver import resolve_config
    from builders.core.orchestrate import run_pipelines
    from builders.core.runners import LocalRunner

    corpus = load_corpus("howtostep")
    parsed = make_parser().parse_args(["howtostep", "--out", str(out), *args])
    cfg, _ = corpus.resolve_inputs(resolve_config(corpus, parsed))
    return run_pipelines(corpus.pipelines(cfg, parsed.shard_size), out / ".work" / "howtostep", LocalRunner(),
                         progress=False, log=lambda *_: None)


def _kept_video(root: Path) -> str:
    return sorted(r["video_id"] for r in pq.read_table(sorted((root / "steps").glob("*.parquet"))[0]).to_pylist())[0]


@pytest.mark.parametrize("fmt", ["htm_raw", "whisperx"])
def test_editing_one_caption_reruns_only_the_shards_holding_it(tmp_path, fmt, monkeypatch, caplog):
    from builders.sources.transcripts import raw_caption_resplit

    monkeypatch.setattr(raw_caption_resplit, "CHUNK_BYTES", 512)  # pieces small enough for 12 videos
    caplog.set_level("INFO", logger=raw_caption_resplit.__name__)
    made, args = _inputs(tmp_path, 12, fmt)
    root = _build(tmp_path / "out", args)
    n = stats(root)["steps"]["transcribe"]["shards"]
    assert n == 4
    vid = _kept_video(root)
    before = _tables(root)

    work = _rerun(tmp_path / "out", args).this_build()  # nothing changed: nothing is computed, nothing refits
    assert work["shards_computed"] == 0 and work["fits_ran"] == []

    if fmt == "htm_raw":
        path = Path(made["transcripts"])
        data = json.loads(path.read_text())
        # one video's captions one second later: its narrations and windows move
        data[vid] = {**data[vid], "start": [t + 1 for t in data[vid]["start"]],
                     "end": [t + 1 for t in data[vid]["end"]]}
        path.write_text(json.dumps(data))
    else:
        path = tmp_path / "in" / "whisperx" / f"{vid}.json"
        data = json.loads(path.read_text())
        data["segments"] = [{**seg, "start": seg["start"] + 1, "end": seg["end"] + 1} for seg in data["segments"]]
        path.write_text(json.dumps(data))
    caplog.clear()
    root = _build(tmp_path / "out", args)
    if fmt == "htm_raw":  # Transcribe's refit re-split the edited part of raw_caption.json only
        assert [m for m in caplog.messages if "re-split 1 of 12 videos" in m], caplog.messages
    steps = stats(root)["steps"]
    assert {k: steps[k]["computed_shards"] for k in PER_VIDEO} == {k: 1 for k in PER_VIDEO}
    assert {k: steps[k]["computed_shards"] for k in ("read_metadata", "heldout_split")} == {"read_metadata": 0,
                                                                                          "heldout_split": 0}
    after = _tables(root)
    assert after != before
    assert after == _tables(_build(tmp_path / "fresh", args))


def test_editing_one_feature_file_reruns_only_its_shard(tmp_path):
    made, args = _inputs(tmp_path, 9)
    feats = tmp_path / "in" / "features"
    feats.mkdir()
    for i, vid in enumerate(made["video_ids"]):
        caps = json.loads(Path(made["transcripts"]).read_text())[vid]
        x = np.random.default_rng(i).standard_normal((int(max(caps["end"])) + 1, 16)).astype(np.float32)
        np.save(feats / f"{vid}.npy", x)
    args = [*("visual_features=file" if a == "visual_features=simulated" else a for a in args),
            "--features", str(feats), "--set", "visual_dim=16"]
    root = _build(tmp_path / "out", args)
    vid = _kept_video(root)
    x = np.load(feats / f"{vid}.npy")
    np.save(feats / f"{vid}.npy", x[::-1].copy())
    steps = stats(_build(tmp_path / "out", args))["steps"]
    assert steps["transcribe"]["computed_shards"] == 0
    assert steps["visual_features"]["computed_shards"] == 1 and steps["visual_features"]["shards"] == 3
    assert steps["stage1"]["computed_shards"] == 1  # its rows name the file's new content (features_digest)


def test_no_step_scans_the_whole_transcript_input_per_video(tmp_path, monkeypatch):
    """Issue 19: ``Transcribe`` asked ``NarrationReader.ids()`` (a glob of every split file) once per video."""
    from builders.sources.narrations import NarrationReader

    def scan(self):
        raise AssertionError("NarrationReader.ids() scans the whole input: never per video")

    monkeypatch.setattr(NarrationReader, "ids", scan)
    _, args = _inputs(tmp_path, 6)
    root = _build(tmp_path / "out", args)
    assert stats(root)["steps"]["transcribe"]["kept"] == 6


def test_the_work_directory_holds_no_file_per_video(tmp_path):
    from builders.corpora.howtostep.features import load_row_features
    from builders.core.shards import read_rows
    from builders.nasva.data import get_text_encoder
    from builders.ops.simulated_features import simulated_features
    from builders.core.errors import DamagedCache

    _, args = _inputs(tmp_path, 30)
    root = _build(tmp_path / "out", [*args[:-2], "--shard-size", "10"])
    work = tmp_path / "out" / ".work" / "howtostep"
    split = [p for p in work.rglob("raw_captions/*") if p.is_file()]
    assert sorted(p.name for p in split) == ["_split_done.json", "block-00000.jsonl", "index.sqlite"]
    store = [p for p in (work / "cache" / "features").rglob("*") if p.is_file()]
    assert len(store) == 3 and all(p.name.endswith(".sim.npy") for p in store)  # one file a work shard
    stage = next(work.glob("videos/*_visual_features-*"))
    rows = [r for i in range(3) for r in read_rows(stage, i)]
    assert len(rows) == stats(root)["steps"]["visual_features"]["kept"] > 20
    g = get_text_encoder("hash:64")
    for r in rows:  # spec §6, regenerated from the shard file: the fp16 features a per-video file held
        narr = r["narrations"]
        want = simulated_features(g.encode([n["text"] for n in narr]), np.array([n["start"] for n in narr]),
                                  np.array([n["end"] for n in narr]), r["num_frames"], dim=768, seed=0)
        got = load_row_features(r, 768)
        assert r["features_kind"] == "simulated" and got.dtype == np.float32
        assert np.array_equal(got, want.astype(np.float16).astype(np.float32))
    shutil.rmtree(work / "cache" / "features")
    # the store is the build's own cache: gone, it is damaged (the build recomputes the shards naming it,
    # tests/corpora/howtostep/test_damaged_feature_block.py), never a video's missing_features drop
    with pytest.raises(DamagedCache, match="missing"):
        load_row_features(rows[0], 768)
