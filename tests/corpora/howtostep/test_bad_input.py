"""Bad input through a whole HowToStep build (spec howtostep.md §7): every broken video ends in its named reason,
every broken step in ``dropped_steps``, the build completes, and rows in = kept + dropped at every step.

Fast: the LLM answers from a replay file written here, features are files (``visual_features=file``, 32-d), and the
text encoders are the deterministic hash encoder of ``builders.nasva.data`` (no model is loaded)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from builders.build import main

SAMPLE = Path(__file__).resolve().parents[3] / "builders" / "samples" / "howtostep"
GOOD = ["Pk3nQ8vTz1L", "Gw7mR2cXh5D", "-Tp4kL9sWq2", "Mc8vN4dLs3F"]
DIM = 32
#: video id -> (transcript source, what is wrong, expected reason)
CASES = {
    "badjson0001": ("garbage json", "malformed_transcript"),
    "corrupt0001": ("random bytes as .mp4, no transcript", "video_unreadable"),
    "noaudio0001": ("video without an audio stream, no transcript", "no_audio"),
    "notrans0001": ("nothing at all", "no_transcript"),
    "unpars00001": ("LLM prose with no list", "llm_unparsable"),
    "llmerr00001": ("no recorded LLM output", "llm_error"),
    "nofeat00001": ("no feature file", "missing_features"),
    "baddim00001": ("features of dimension 16", "bad_features"),
    "nanbad00001": ("10% NaN feature rows", "bad_features"),
}
RUNAWAY = "runaway0001"
REPAIRED = "nanrow00001"


def _narration_chunks(path: Path) -> list[str]:
    """The 10-sentence chunks of a sample transcript, as the pipeline cuts them (for the replayed answers)."""
    from builders.ops.sentencify import narrations_from_transcript
    from builders.sources.narrations import parse_whisperx_json

    t = parse_whisperx_json(path.stem, json.loads(path.read_text()))
    res = narrations_from_transcript("whisperx", t.segments, t.words, language=t.language)
    texts = [s[0] for s in res.sentences]
    return [" ".join(texts[i:i + 10]) for i in range(0, len(texts), 10)]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    from tests.models.test_media import make_clip

    d = tmp_path_factory.mktemp("howtostep_bad")
    tr, media, feats = d / "transcripts", d / "media", d / "features"
    for p in (tr, media, feats):
        p.mkdir()
    ids = GOOD + list(CASES) + [RUNAWAY, REPAIRED]
    src = {vid: SAMPLE / "transcripts" / f"{GOOD[i % len(GOOD)]}.json" for i, vid in enumerate(ids)}
    replay = []
    rng = np.random.default_rng(0)
    for vid in ids:
        if vid in ("notrans0001", "corrupt0001", "noaudio0001"):
            continue
        if vid == "badjson0001":
            (tr / f"{vid}.json").write_text('{"segments": [ {"start": 0, "end"')
            continue
        shutil.copyfile(src[vid], tr / f"{vid}.json")
        for ci, chunk in enumerate(_narration_chunks(src[vid])):
            words = chunk.split()
            if vid == "unpars00001":
                out = "Sure! In this part the speaker talks about cooking and it sounds fun."
            elif vid == "llmerr00001":
                continue
            elif vid == RUNAWAY:
                out = "\n".join(f"{k + 1}. Stir the pot again number {k}." for k in range(25))
            else:
                out = "Here are the steps:\n" + "\n".join(
                    f"{k + 1}. {' '.join(words[8 * k:8 * k + 8])}" for k in range(min(4, len(words) // 8)))
            replay.append({"video_id": vid, "chunk_index": ci, "raw_output": out})
        duration = json.loads(src[vid].read_text())["segments"][-1]["end"]
        T = int(duration) + 1
        x = rng.standard_normal((T, DIM)).astype(np.float32)
        if vid == "nofeat00001":
            continue
        if vid == "baddim00001":
            x = x[:, :16]
        if vid == "nanbad00001":
            x[: max(1, T // 10) + 1] = np.nan
        if vid == REPAIRED:
            x[3] = np.nan
        np.save(feats / f"{vid}.npy", x)
    (media / "corrupt0001.mp4").write_bytes(np.random.default_rng(1).bytes(3000))
    make_clip(media / "noaudio0001.mp4", seconds=3, audio_rate=None)
    (d / "replay.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replay))
    (d / "videos.csv").write_text("video_id,category_1,category_2,rank,task_id\n" +
                                  "".join(f"{v},Food and Entertaining,Recipes,1,1\n" for v in ids))
    out = d / "out"
    assert main(["howtostep", "--out", str(out), "--no-progress", "-q", "--videos", str(d / "videos.csv"),
                 "--transcripts", str(tr), "--transcript-format", "whisperx", "--media", str(media),
                 "--features", str(feats), "--set", "visual_features=file", "--set", f"visual_dim={DIM}",
                 "--set", "llm=replay", "--set", f"llm_replay={d / 'replay.jsonl'}", "--set", "text_encoder=hash:64",
                 "--set", "nasva_text_encoder=hash:64", "--set", "labeler_epochs=2", "--set", "epsilon2=-1",
                 "--set", "epsilon1=0"]) == 0
    return out / "howtostep"


def _rows(root: Path, config: str) -> list[dict]:
    return [r for p in sorted((root / config).glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def test_every_broken_video_is_dropped_with_its_reason(built):
    dropped = {d["video_id"]: d["reason"] for d in _rows(built, "dropped_videos")}
    for vid, (_, reason) in CASES.items():
        assert dropped.get(vid) == reason, (vid, dropped.get(vid))
    kept = {r["video_id"] for r in _rows(built, "steps")}
    assert set(GOOD) | {RUNAWAY, REPAIRED} <= kept


def test_counts_are_conserved_at_every_step(built):
    st = json.loads((built / "stats.json").read_text())
    for name, step in st["steps"].items():
        if name != "read_metadata":
            assert step["rows_in"] == step["kept"] + sum(step["dropped"].values()), name
    assert st["howtostep"]["videos"]["in"] == len(_rows(built, "steps")) + len(_rows(built, "dropped_videos"))


def test_runaway_lists_are_capped_and_bad_feature_rows_repaired(built):
    st = json.loads((built / "stats.json").read_text())
    assert st["counters"]["features_repaired"] == 1
    capped = [d for d in _rows(built, "dropped_steps") if d["video_id"] == RUNAWAY]
    assert {d["reason"] for d in capped} >= {"overgeneration_cap"}
    assert all(len(c["raw_output"]) for r in _rows(built, "llm_outputs") if r["video_id"] == RUNAWAY
               for c in r["chunks"])
    steps = {r["video_id"]: r for r in _rows(built, "steps")}[RUNAWAY]["steps"]
    assert 1 <= len(steps) <= 20 * 2


def test_an_llm_error_says_which_chunk_is_missing(built):
    d = {x["video_id"]: x for x in _rows(built, "dropped_videos")}["llmerr00001"]
    assert "no recorded output" in d["detail"] and "chunk" in d["detail"]
