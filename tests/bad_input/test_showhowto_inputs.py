"""Malformed ShowHowTo inputs (issue 14 beside issue 13; spec showhowto.md §2, §4-§5, §10): the manifest (CSV and
JSONL), transcripts, recorded LLM answers and prompt templates. Each case: the named reason or a clear whole-file
error, rows in = kept + dropped, and (autouse fixture) peak memory under 1 GiB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders.core.errors import InputError
from builders.core.records import Out
from builders.corpora.showhowto.config import ShowHowToConfig
from builders.corpora.showhowto.prompts import load_prompt
from builders.corpora.showhowto.pipeline import steps
from builders.models.llm import LLMSettings, make_llm
from builders.sources.transcripts import TranscriptError
from builders.sources.video_manifest import read_manifest, segments_from_json

from .conftest import check_conserved

HEADER = "video_id,video_path,title,transcript_path\n"
GOOD = "abcdefghijk,v.mp4,A title,t.json\n"


@pytest.mark.parametrize("body, n_in, reasons", [
    (GOOD + "abcdefghijk,v.mp4,Again,\n", 2, {"duplicate_video_id": 1}),
    (GOOD + "short,v.mp4,t,\n", 2, {"invalid_video_id": 1}),
    (GOOD + "abcdefghij!,v.mp4,t,\n", 2, {"invalid_video_id": 1}),
    (GOOD + ",v.mp4,t,\n", 2, {"invalid_video_id": 1}),
    (GOOD + "bcdefghijkl,,t,\n", 2, {"malformed_manifest_row": 1}),
    (GOOD + "bcdefghijkl,v.mp4\n", 2, {"malformed_manifest_row": 1}),
    (GOOD + "bcdefghijkl,v.mp4,t,x,extra\n", 2, {"malformed_manifest_row": 1}),
    (GOOD + 'bcdefghijkl,v.mp4,"unterminated,\ncdefghijklm,v.mp4,ok,\n', 3, {"malformed_manifest_row": 1}),
    (GOOD + "bcdefghijkl,v.mp4,\xff\xfe bad utf8,\n", 2, {"malformed_manifest_row": 1}),
    (GOOD + "bcdefghijkl,v.mp4," + "x" * (2 << 20) + ",\n", 2, {"malformed_manifest_row": 1}),
    (GOOD + "\n\n" + "cdefghijklm,v.mp4,,\n", 2, {}),
])
def test_csv_manifest_rows(tmp_path, body, n_in, reasons):
    p = tmp_path / "m.csv"
    p.write_bytes((HEADER + body).encode("utf-8", "surrogateescape") if "\xff" not in body
                  else HEADER.encode() + body.replace("\xff\xfe", "").encode().replace(b"bad", b"\xff\xfebad"))
    rows, _, _ = check_conserved(read_manifest(p), n_in, reasons)
    assert rows[0]["video_path"] == str(tmp_path / "v.mp4") and rows[0]["transcript_path"] == str(tmp_path / "t.json")


@pytest.mark.parametrize("lines, n_in, reasons", [
    ([{"video_id": "abcdefghijk", "video_path": "v.mp4", "title": "t"}, "not json"], 2, {"malformed_manifest_row": 1}),
    ([{"video_id": "abcdefghijk", "video_path": "v.mp4"}, [1, 2]], 2, {"malformed_manifest_row": 1}),
    ([{"video_id": "abcdefghijk", "video_path": "v.mp4"}, {"video_id": 12345678901, "video_path": "v"}], 2,
     {"invalid_video_id": 1}),
    ([{"video_id": "abcdefghijk", "video_path": "v.mp4"}, {"video_id": "bcdefghijkl", "video_path": "v", "title": 3}],
     2, {"malformed_manifest_row": 1}),
    ([{"video_id": "abcdefghijk", "video_path": "v.mp4"}, {"video_id": "bcdefghijkl", "video_path": "v",
                                                           "transcript_path": ["a"]}], 2, {"malformed_manifest_row": 1}),
    ([{"video_id": "abcdefghijk", "video_path": "v.mp4"}, "[" * 100_000], 2, {"malformed_manifest_row": 1}),
])
def test_jsonl_manifest_rows(tmp_path, lines, n_in, reasons):
    p = tmp_path / "m.jsonl"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    check_conserved(read_manifest(p), n_in, reasons)


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("id,path\nabcdefghijk,v\n", "must name video_id and video_path"),
    (HEADER, "has no rows"),
])
def test_whole_file_manifest_errors(tmp_path, content, message):
    p = tmp_path / "m.csv"
    p.write_text(content)
    with pytest.raises(InputError, match=message):
        list(read_manifest(p))


@pytest.mark.parametrize("obj, kept, bad", [
    ({"segments": [{"start": 2.0, "end": 3.0, "text": " b"}, {"start": 0.0, "end": 1.0, "text": " a"}]}, 2, 0),
    ([{"start": 1.0, "end": 0.5, "text": "reversed"}, {"start": 0.0, "end": 1.0, "text": "ok"}], 1, 1),
    ([{"start": float("nan"), "end": 1.0, "text": "nan"}, {"start": 0.0, "end": 1.0, "text": "ok"}], 1, 1),
    ([{"start": 0.0, "end": float("inf"), "text": "inf"}], 0, 1),
    ([{"start": "0.5", "end": "1.5", "text": "strings are numbers"}], 1, 0),
])
def test_segments_sorted_and_bad_times_removed(obj, kept, bad):
    t = segments_from_json(obj)
    assert len(t.segments) == kept and t.bad_times == bad
    assert [s["start"] for s in t.segments] == sorted(s["start"] for s in t.segments)


@pytest.mark.parametrize("obj", [{"segments": "no"}, {"text": "x"}, 3, "str", [{"start": 0, "end": 1}],
                                 [{"start": "soon", "end": 1, "text": "x"}], [{"start": 0, "end": 1, "text": 5}]])
def test_malformed_transcripts_raise_the_named_reason(obj):
    with pytest.raises(TranscriptError) as e:
        segments_from_json(obj)
    assert e.value.reason == "malformed_transcript"


def _transcribe(tmp_path: Path, files: dict[str, str | bytes], has_audio: bool = False) -> Out:
    rows = []
    for i, (name, content) in enumerate(files.items()):
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        rows.append({"video_id": f"vid{i:08d}", "video_path": str(tmp_path / "none.mp4"), "title": "",
                     "transcript_path": str(p), "has_audio": has_audio})
    step = next(s for s in steps(ShowHowToConfig()) if s.name == "transcribe")
    step.state = {"cache_dir": str(tmp_path)}
    step.setup(step.state)
    out = Out(step.name)
    step.process(rows, out)
    step.teardown()
    assert len(out.rows) + len(out.drops) == len(rows)
    return out


def test_transcript_files_end_in_named_reasons(tmp_path):
    out = _transcribe(tmp_path, {
        "empty.json": json.dumps({"segments": []}),
        "blank.json": json.dumps([{"start": 0, "end": 1, "text": "  "}]),
        "german.json": json.dumps({"language": "de", "segments": [{"start": 0, "end": 1, "text": "Hallo"}]}),
        "broken.json": '{"segments": [',
        "bomb.json": "[" * 200_000,
        "binary.json": b"\x00\xff\xfe" * 100,
        "ok.json": json.dumps({"language": "en", "segments": [{"start": 0, "end": 1, "text": " Cut it."}]}),
    })
    assert [d.reason for d in out.drops] == ["empty_transcript", "empty_transcript", "non_english",
                                             "malformed_transcript", "malformed_transcript", "malformed_transcript"]
    assert [r["segments"][0]["text"] for r in out.rows] == [" Cut it."]  # verbatim, leading space kept


def test_no_transcript_and_no_audio(tmp_path):
    row = {"video_id": "abcdefghijk", "video_path": str(tmp_path / "v.mp4"), "title": "",
           "transcript_path": str(tmp_path / "missing.json"), "has_audio": False}
    step = next(s for s in steps(ShowHowToConfig()) if s.name == "transcribe")
    step.state = {"cache_dir": str(tmp_path)}
    step.setup(step.state)
    out = Out(step.name)
    step.process([row], out)
    assert [d.reason for d in out.drops] == ["no_audio"] and "missing.json not found" in out.drops[0].detail


@pytest.mark.parametrize("line", ['{"video_id": "v", "stage": 3, "raw_output": "x"}',
                                  '{"video_id": "v", "raw_output": "x"}',
                                  '{"video_id": "v", "stage": "filter", "raw_output": 7}', "[1,"])
def test_malformed_replay_lines_name_the_line(tmp_path, line):
    p = tmp_path / "r.jsonl"
    p.write_text('{"video_id": "v", "stage": "filter", "raw_output": "Yes"}\n' + line + "\n")
    with pytest.raises(ValueError, match="line 2: malformed LLM output record"):
        make_llm(LLMSettings(backend="replay", replay_path=str(p)))


@pytest.mark.parametrize("text, message", [("no placeholders", "lacks the placeholder"),
                                           ("{title} only", "{transcript}"), ("", "lacks")])
def test_prompt_templates_need_both_placeholders(tmp_path, text, message):
    p = tmp_path / "t.txt"
    p.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_prompt("keysteps_v1", p)
