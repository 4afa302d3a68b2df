"""The ShowHowTo input generator of the scale benchmark (``tests/perf/scale_showhowto.py``, issue 35 item 6) writes
inputs the readers accept (real H.264 files PyAV probes, manifest, WhisperX-style transcripts, HowTo100M metadata,
replayed answers for every video, the inserted one included), and each edit changes one item only. The benchmark
itself (whole builds) runs with ``python tests/perf/bench_scale.py --corpus showhowto``, not here."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[1] / "perf"


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    pytest.importorskip("av")
    spec = importlib.util.spec_from_file_location("_bench_scale_showhowto", PERF / "scale_showhowto.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("shw")
    return mod, root, mod.make_showhowto_inputs(root, 8, seed=0)


def _manifest(root: Path) -> list[list[str]]:
    with open(root / "manifest.csv", newline="") as f:
        return list(csv.reader(f))


def test_inputs_are_what_the_readers_accept(gen):
    from builders.models import media
    from builders.sources.video_manifest import read_manifest, read_transcript

    mod, root, got = gen
    rows = list(read_manifest(root / "manifest.csv"))
    assert len(rows) == 8 and all(isinstance(r, dict) for r in rows)
    for r in rows:
        info = media.probe(r["video_path"])
        assert info.has_video and abs(info.duration - mod.SECONDS) < 1.0
        t = read_transcript(r["transcript_path"])
        assert t.language == "en" and t.segments and all(0 <= s["start"] <= s["end"] <= mod.SECONDS for s in t.segments)
    replay = [json.loads(x) for x in (root / "llm_outputs.jsonl").read_text().splitlines()]
    ids = {r["video_id"] for r in rows} | {got["edits"]["row"][0]}
    assert {(x["video_id"], x["stage"]) for x in replay} == {(v, s) for v in ids for s in ("filter", "keysteps")}
    for x in replay:
        if x["stage"] == "keysteps":
            steps = json.loads(x["raw_output"])[1]["steps"]
            times = [t for s in steps for t in (s["start_timestamp"], s["end_timestamp"])]
            assert times == sorted(times) and 0 < times[0] and times[-1] < mod.SECONDS and len(steps) >= 3
    meta = list(csv.DictReader(open(root / "HowTo100M_v1.csv")))
    assert {m["video_id"] for m in meta} == ids
    assert "--test-tasks" in got["args"] and "aligner=middle" in got["args"]


def test_each_edit_changes_one_item_only(gen):
    mod, root, got = gen
    e = got["edits"]
    files = {p: p.read_bytes() for p in [*(root / "transcripts").iterdir(), *(root / "videos").iterdir()]}
    inodes = {p: p.stat().st_ino for p in (root / "videos").iterdir()}
    mod.edit_transcript(e["transcript"])
    mod.replace_video(e["video"])
    before = _manifest(root)
    mod.insert_row(e["manifest"], e["row"], e["at"])
    after = _manifest(root)
    changed = {p for p, b in files.items() if p.read_bytes() != b}
    assert changed == {e["transcript"], e["video"]}
    old = json.loads(files[e["transcript"]])["segments"]
    new = json.loads(e["transcript"].read_text())["segments"]
    diff = [(a["text"], b["text"]) for a, b in zip(old, new) if a != b]
    assert len(diff) == 1 and len(set(diff[0][0].split()) ^ set(diff[0][1].split())) == 2
    assert all(p.stat().st_ino == n for p, n in inodes.items() if p != e["video"])  # the other links kept
    assert after[:1 + e["at"]] == before[:1 + e["at"]] and after[2 + e["at"]:] == before[1 + e["at"]:]
    assert after[1 + e["at"]] == e["row"]
