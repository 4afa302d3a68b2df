"""builders.sources.narrations: the four transcript formats of spec howtostep.md §2.2 on the real ShowHowTo ASR
examples (entries 0-2 as showhowto_0..2), and bad input per format (§7)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from builders.ops.sentencify import narrations_from_transcript
from builders.sources import transcripts as tr
from builders.sources.narrations import (
    MAX_JSON_DEPTH,
    NarrationReader,
    TranscriptInput,
    json_nesting_depth,
    parse_whisperx_json,
)
from builders.sources.transcripts import TranscriptError

IDS = ("showhowto_0", "showhowto_1", "showhowto_2")
COUNTS = {"showhowto_0": 33, "showhowto_1": 24, "showhowto_2": 47}
DEEP = 10_000  # nesting levels of the "deeply nested" inputs (ijson/json would need memory or recursion for it)


@pytest.fixture(autouse=True)
def _small_stop_words(monkeypatch):
    """A small stop-word list for the caption.json check of htm_raw (spaCy's import takes seconds)."""
    monkeypatch.setattr(tr.stop_words, "english_stop_words",
                        lambda: frozenset({"the", "and", "a", "to", "you", "it", "i"}))


def _raw(segments: list[dict]) -> dict:
    return {"text": [s["text"] for s in segments], "start": [s["start"] for s in segments],
            "end": [s["end"] for s in segments]}


def _write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def _malformed(reader: NarrationReader, vid: str) -> str:
    with pytest.raises(TranscriptError) as err:
        reader.read(vid)
    assert err.value.reason == "malformed_transcript"
    return err.value.detail


def _missing(reader: NarrationReader, vid: str) -> None:
    with pytest.raises(TranscriptError) as err:
        reader.read(vid)
    assert err.value.reason == "no_transcript"


@pytest.fixture
def raw_file(tmp_path, asr_items) -> Path:
    data = {vid: _raw(item["transcript"]) for vid, item in zip(IDS, asr_items)}
    data["list_value"] = [1, 2]
    data["text_times"] = {"text": ["a"], "start": ["zero"], "end": [1.0]}
    data["short_lists"] = {"text": ["a", "b"], "start": [0.0], "end": [1.0, 2.0]}
    return _write(tmp_path / "in" / "raw_caption.json", data)


# --------------------------------------------------------------------------------------------- depth guard


def test_json_nesting_depth():
    assert json_nesting_depth([b'{"a": [1, {"b": "[[[[\\"[["}]}']) == 3  # brackets inside strings ignored
    assert json_nesting_depth([b"[[[", b"]]]"]) == 3
    assert json_nesting_depth([b'{"x": "ab[[', b"[[\\", b'"[[", "y": [[1]]}']) == 3  # split string and escape
    assert json_nesting_depth([b'"\\\\', b'"', b"[[]]"]) == 2  # "\\" then the closing quote in the next chunk
    assert json_nesting_depth([b"[" * DEEP], limit=MAX_JSON_DEPTH) == DEEP
    assert json_nesting_depth([b""]) == 0


# --------------------------------------------------------------------------------------------- htm_raw


def test_htm_raw_reads_real_transcripts(raw_file, tmp_path, asr_items):
    reader = NarrationReader("htm_raw", raw_file, tmp_path / "work")
    assert reader.ids() == set(IDS) | {"list_value", "text_times", "short_lists"}
    item = reader.read("showhowto_1")
    assert isinstance(item, TranscriptInput) and item.format == "htm_raw" and item.words is None
    assert len(item.segments) == 24 and item.language is None
    first = " Cleaning your tires properly requires more than just using car wash soap and then rinsing it down."
    assert item.segments[0] == (first, 0.17, 5.42)
    assert item.segments[-1] == ("We'll see you guys next time.", 222.94, 223.84)
    assert (tmp_path / "work" / "raw_captions" / tr.SPLIT_MARKER).is_file()


def test_has_and_item_digests_are_look_ups_not_scans(raw_file, tmp_path, monkeypatch):
    """Issue 19: ``has`` answers from the split index (one look-up), never from ``ids()`` (a scan of the input);
    a video's digest is the sha256 of its own slice, so editing one video changes only its digest."""
    reader = NarrationReader("htm_raw", raw_file, tmp_path / "work")
    monkeypatch.setattr(NarrationReader, "ids", lambda self: pytest.fail("ids() scans the whole input"))
    assert [reader.has(v) for v in (*IDS, "list_value", "absent_id", "../etc")] == [True] * 4 + [False, False]
    before = reader.item_digests([*IDS, "absent_id"])
    assert before["absent_id"] == "-" and len(set(before.values())) == 4
    data = json.loads(raw_file.read_text())
    data["showhowto_1"]["text"][0] = "an edited first caption"
    raw_file.write_text(json.dumps(data))
    after = NarrationReader("htm_raw", raw_file, tmp_path / "work").item_digests([*IDS, "absent_id"])
    assert {v for v in before if before[v] != after[v]} == {"showhowto_1"}


def test_whisperx_has_and_item_digests(whisperx_dir, tmp_path):
    from builders.core.fingerprint import FingerprintMemo

    reader = NarrationReader("whisperx", whisperx_dir)
    assert reader.has("showhowto_1") and not reader.has("absent_id") and not reader.has("../x")
    memo = FingerprintMemo(tmp_path / "memo.sqlite")
    d = reader.item_digests(["showhowto_1", "absent_id"], memo)
    assert d["absent_id"] == "-"
    assert d["showhowto_1"] == hashlib.sha256((whisperx_dir / "part1" / "showhowto_1.json").read_bytes()).hexdigest()
    memo.close()


def test_htm_raw_warns_once_on_stop_word_free_captions(tmp_path, caplog):
    words = [f"word{i}" for i in range(60)]  # caption.json (stop words removed) passed instead of raw_caption.json
    src = _write(tmp_path / "caption.json", {"v1": {"text": words, "start": list(range(60)), "end": list(range(1, 61))}})
    reader = NarrationReader("htm_raw", src, tmp_path / "work")
    with caplog.at_level("WARNING", logger="builders.sources.narrations"):
        reader.read("v1")
        reader.read("v1")
    assert sum("no English stop word" in r.getMessage() for r in caplog.records) == 1


def test_htm_raw_bad_values(raw_file, tmp_path):
    reader = NarrationReader("htm_raw", raw_file, tmp_path / "work")
    assert "not a JSON object" in _malformed(reader, "list_value")  # a list where {text, start, end} is expected
    assert "not a number" in _malformed(reader, "text_times")  # a non-numeric time: the whole video (as tr)
    assert reader.read("short_lists").length_mismatch and len(reader.read("short_lists").segments) == 1
    _missing(reader, "absent_id")
    _missing(reader, "../etc/passwd")  # not a video id: never a path


def test_htm_raw_whole_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        NarrationReader("htm_raw", tmp_path / "nope.json", tmp_path / "work")
    top_list = _write(tmp_path / "list.json", [{"text": ["a"], "start": [0], "end": [1]}])
    with pytest.raises(ValueError, match="not a JSON object"):
        NarrationReader("htm_raw", top_list, tmp_path / "work")
    ok = _write(tmp_path / "ok.json", {"v1": {"text": ["a"], "start": [0], "end": [1]}})
    with pytest.raises(ValueError, match="work_dir"):
        NarrationReader("htm_raw", ok, None)
    with pytest.raises(ValueError, match="one JSON file"):
        NarrationReader("htm_raw", tmp_path, tmp_path / "work")
    with pytest.raises(ValueError, match="unknown transcript_format"):
        NarrationReader("srt", ok, tmp_path / "work")


def test_htm_raw_deeply_nested_video_is_malformed_not_the_file(tmp_path):
    """Issue 14: the split caps each video's depth while streaming: the deep video is ``malformed_transcript``."""
    deep = _write(tmp_path / "deep.json", '{"v1": ' + "[" * DEEP + "]" * DEEP +
                  ', "v2": {"text": ["a"], "start": [0], "end": [1]}}')
    reader = NarrationReader("htm_raw", deep, tmp_path / "work")
    assert "nested deeper" in _malformed(reader, "v1")
    assert reader.read("v2").segments == [("a", 0.0, 1.0)]


def test_htm_raw_garbage_json_keeps_what_was_read(tmp_path):
    garbage = _write(tmp_path / "g.json", '{"v1": {"text": ["a"], "start": [0], "end": [1]}, "v2": {"text": [tru')
    reader = NarrationReader("htm_raw", garbage, tmp_path / "work")
    assert reader.read("v1").segments == [("a", 0.0, 1.0)]
    assert "invalid JSON" in _malformed(reader, "v2")  # issue 14: cut by the error, not "no transcript"
    assert "not in the readable part" in _malformed(reader, "v3")


def test_htm_raw_nan_literal_is_a_nan_time_not_the_end_of_the_split(tmp_path):
    """Issue 14: the non-standard NaN literal (Python's json.dumps writes it) is read as a NaN time, which the
    sentencifier drops as ``bad_timestamp``; the videos after it are read."""
    src = _write(tmp_path / "nan.json", '{"v1": {"text": ["a"], "start": [0], "end": [1]}, '
                                        '"v2": {"text": ["b"], "start": [NaN], "end": [1]}, '
                                        '"v3": {"text": ["c"], "start": [0], "end": [Infinity]}}')
    reader = NarrationReader("htm_raw", src, tmp_path / "work")
    assert reader.read("v1").segments == [("a", 0.0, 1.0)]
    assert math.isnan(reader.read("v2").segments[0][1])
    assert reader.read("v3").segments[0][2] == math.inf


def test_htm_raw_split_once_and_oversize_video(raw_file, tmp_path, monkeypatch):
    NarrationReader("htm_raw", raw_file, tmp_path / "work")
    marker = tmp_path / "work" / "raw_captions" / tr.SPLIT_MARKER
    before = marker.stat().st_mtime_ns
    reader = NarrationReader("htm_raw", raw_file, tmp_path / "work")  # same source: not split again
    assert marker.stat().st_mtime_ns == before
    monkeypatch.setattr(tr.transcript, "MAX_TRANSCRIPT_BYTES", 100)
    assert "bytes >" in _malformed(reader, "showhowto_0")


def test_htm_raw_flow_on_real_transcript(raw_file, tmp_path):
    item = NarrationReader("htm_raw", raw_file, tmp_path / "work").read("showhowto_2")
    result = narrations_from_transcript("htm_raw", item.segments, item.words)
    # Whisper lines are punctuated, contiguous and longer than 0.2 s: (c)-(e) change nothing, 47 sentences
    assert result.reason is None and result.sentencify_mode == "punctuated" and len(result.sentences) == 47


# --------------------------------------------------------------------------------------------- sentencified


def test_sentencified(tmp_path, asr_items):
    src = _write(tmp_path / "sent.json", {"showhowto_0": _raw(asr_items[0]["transcript"]), "bad": {"text": "x"}})
    reader = NarrationReader("sentencified", src, tmp_path / "work")
    item = reader.read("showhowto_0")
    assert item.format == "sentencified" and len(item.segments) == 33
    result = narrations_from_transcript("sentencified", item.segments)
    assert result.sentencify_mode == "sentencified" and len(result.sentences) == 33
    assert "non-list" in _malformed(reader, "bad")
    assert (tmp_path / "work" / "sentencified_captions" / tr.SPLIT_MARKER).is_file()


# --------------------------------------------------------------------------------------------- whisperx


def _whisperx(segments: list[dict]) -> dict:
    out = []
    for s in segments:
        toks = s["text"].split()
        width = (s["end"] - s["start"]) / len(toks)
        words = [{"word": w, "start": s["start"] + i * width, "end": s["start"] + (i + 1) * width, "score": 0.9}
                 for i, w in enumerate(toks)]
        out.append({"start": s["start"], "end": s["end"], "text": s["text"], "words": words})
    return {"segments": out, "word_segments": [], "language": "en"}


@pytest.fixture
def whisperx_dir(tmp_path, asr_items) -> Path:
    root = tmp_path / "wx"
    for i, (vid, item) in enumerate(zip(IDS, asr_items)):
        _write(root / f"part{i}" / f"{vid}.json", _whisperx(item["transcript"]))  # searched recursively
    return root


def test_whisperx_reads_words_and_missing_parts(whisperx_dir, asr_items):
    obj = _whisperx(asr_items[0]["transcript"])
    del obj["language"]
    del obj["segments"][1]["words"]  # words may be missing
    obj["segments"][0]["words"][9] = {"word": "40", "score": 0.1}  # a word without times
    obj["segments"][2]["words"][0] = "garbage"  # a malformed word entry: the segment uses its text
    _write(whisperx_dir / "showhowto_x.json", obj)
    reader = NarrationReader("whisperx", whisperx_dir)
    assert reader.ids() == set(IDS) | {"showhowto_x"}
    item = reader.read("showhowto_x")
    assert item.language is None and len(item.segments) == 33
    assert item.words[1] == [] and item.words[2] == [] and item.words[0][9] == ("40", None, None)
    assert item.words[0][0] == ("Hey", 0.87, pytest.approx(0.87 + 6.92 / 16))
    result = narrations_from_transcript("whisperx", item.segments, item.words, language=item.language)
    assert result.sentencify_mode == "whisperx_words" and len(result.sentences) == 33
    assert result.sentences[0][1:] == pytest.approx((0.87, 7.79))
    full = reader.read("showhowto_2")
    assert full.language == "en" and len(full.segments) == 47 and len(full.words) == 47


def test_whisperx_bad_inputs(whisperx_dir, monkeypatch):
    _write(whisperx_dir / "garbage.json", '{"segments": [{"start": 0, "end": 1, "text": "a"')
    _write(whisperx_dir / "toplist.json", [{"start": 0, "end": 1, "text": "a"}])
    _write(whisperx_dir / "segdict.json", {"segments": {"start": 0}})
    _write(whisperx_dir / "nostart.json", {"segments": [{"end": 1, "text": "a"}]})
    _write(whisperx_dir / "strtime.json", {"segments": [{"start": "soon", "end": 1, "text": "a"}]})
    _write(whisperx_dir / "deep.json", '{"segments": [], "x": ' + "[" * DEEP + "]" * DEEP + "}")
    _write(whisperx_dir / "nan.json", '{"segments": [{"start": NaN, "end": 1, "text": "a."}]}')
    reader = NarrationReader("whisperx", whisperx_dir)
    assert "invalid JSON" in _malformed(reader, "garbage")
    assert "'segments' list" in _malformed(reader, "toplist")
    assert "'segments' list" in _malformed(reader, "segdict")
    assert "start, end and text" in _malformed(reader, "nostart")
    assert "not a number" in _malformed(reader, "strtime")
    assert "nested deeper" in _malformed(reader, "deep")
    assert math.isnan(reader.read("nan").segments[0][1])
    _missing(reader, "absent")
    monkeypatch.setattr(tr.transcript, "MAX_TRANSCRIPT_BYTES", 100)
    assert "more than 100 bytes" in _malformed(reader, "showhowto_0")
    with pytest.raises(ValueError, match="directory"):
        NarrationReader("whisperx", whisperx_dir / "garbage.json")


def test_whisperx_duplicate_ids_top_level_then_sorted_order(tmp_path):
    _write(tmp_path / "b" / "v1.json", {"segments": [{"start": 0, "end": 1, "text": "from b"}]})
    _write(tmp_path / "a" / "v1.json", {"segments": [{"start": 0, "end": 1, "text": "from a"}]})
    _write(tmp_path / "a" / "not an id!.json", {"segments": []})
    reader = NarrationReader("whisperx", tmp_path)
    assert reader.read("v1").segments == [("from a", 0.0, 1.0)]
    assert reader.ids() == {"v1"}
    _write(tmp_path / "v2.json", {"segments": [{"start": 0, "end": 1, "text": "top"}]})
    _write(tmp_path / "a" / "v2.json", {"segments": [{"start": 0, "end": 1, "text": "nested"}]})
    reader = NarrationReader("whisperx", tmp_path)
    assert reader.ids() == {"v1", "v2"} and reader.read("v2").segments == [("top", 0.0, 1.0)]
    assert reader._index["v2"] == tmp_path / "v2.json"  # the index agrees: the top-level file wins


def test_parse_whisperx_json_on_asr_output():
    asr = {"segments": [{"start": 0.0, "end": 2.0, "text": " Boil the water.",
                         "words": [{"word": "Boil", "start": 0.0, "end": 0.5}, {"word": "the"},
                                   {"word": "water.", "start": 1.0, "end": 2.0}]}], "language": 3}
    item = parse_whisperx_json("vid", asr)
    assert item == TranscriptInput("vid", "whisperx", [(" Boil the water.", 0.0, 2.0)],
                                   [[("Boil", 0.0, 0.5), ("the", None, None), ("water.", 1.0, 2.0)]], None)
    assert parse_whisperx_json("vid", {"segments": []}).segments == []
    with pytest.raises(TranscriptError):
        parse_whisperx_json("vid", [asr])


# --------------------------------------------------------------------------------------------- segments


def test_segments_one_json_and_directory(tmp_path, asr_items):
    one = _write(tmp_path / "segments.json", {vid: item["transcript"] for vid, item in zip(IDS, asr_items)}
                 | {"dict_value": {"segments": []}, "nan": [{"start": None, "end": 1, "text": "a"}]})
    reader = NarrationReader("segments", one, tmp_path / "work")
    assert {vid: len(reader.read(vid).segments) for vid in IDS} == COUNTS
    assert reader.read("showhowto_0").format == "segments"
    assert "not a JSON list" in _malformed(reader, "dict_value")
    assert "not a number" in _malformed(reader, "nan")  # null is not a time
    _missing(reader, "absent")
    folder = tmp_path / "segdir"
    for vid, item in zip(IDS, asr_items):
        _write(folder / f"{vid}.json", item["transcript"])
    _write(folder / "wrapped.json", {"segments": asr_items[0]["transcript"]})
    _write(folder / "deep.json", "[" * DEEP + "]" * DEEP)
    reader = NarrationReader("segments", folder)
    assert reader.ids() == set(IDS) | {"wrapped", "deep"}
    item = reader.read("showhowto_1")
    assert len(item.segments) == 24 and item.segments[2][1:] == (17.69, 22.31)  # after the 5.9 s gap
    assert "not a JSON list" in _malformed(reader, "wrapped")
    assert "nested deeper" in _malformed(reader, "deep")
    _missing(reader, "absent")
