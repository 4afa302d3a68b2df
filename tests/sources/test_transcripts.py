"""Tests of the transcript readers (spec sieve_swap.md §2.3, §6) on the real ShowHowTo ASR examples converted into
HowTo100M raw_caption.json and WhisperX formats, and on broken inputs."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from pathlib import Path

import pytest

from builders.sources import transcripts as tr
from builders.sources.transcripts import (
    RawCaptionStore,
    Transcript,
    TranscriptError,
    WhisperXStore,
    open_transcripts,
    split_raw_captions,
)

# ids given to items 0-2 of showhowto_asr_examples.json
IDS = ("AppleTurn01", "CarTires_01", "PotatoPc-01")
# hand-read from the fixture: segment count, first segment, last end
EXPECTED = {
    "AppleTurn01": (33, (0.87, 7.79, "Hey little muffins, today we will make together a super easy, quick and "
                                     "delicious apple turnovers."), 216.03),
    "CarTires_01": (24, (0.17, 5.42, " Cleaning your tires properly requires more than just using car wash soap and "
                                     "then rinsing it down."), 223.84),
    "PotatoPc-01": (47, (0.504, 2.605, " Hi, it's Matthew in his pressure cooker again."), 135.037),
}


def _raw_caption(segments: list[dict]) -> dict:
    return {"text": [s["text"] for s in segments], "start": [s["start"] for s in segments],
            "end": [s["end"] for s in segments]}


def _whisperx(segments: list[dict], language: str | None = "en") -> dict:
    out = {"segments": [{"start": s["start"], "end": s["end"], "text": s["text"], "words": []} for s in segments],
           "word_segments": []}
    if language is not None:
        out["language"] = language
    return out


@pytest.fixture
def raw_caption_file(tmp_path, asr_items) -> Path:
    data = {vid: _raw_caption(item["transcript"]) for vid, item in zip(IDS, asr_items)}
    path = tmp_path / "raw_caption.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def whisperx_dir(tmp_path, asr_items) -> Path:
    root = tmp_path / "whisperx"
    root.mkdir()
    for vid, item in zip(IDS, asr_items):
        (root / f"{vid}.json").write_text(json.dumps(_whisperx(item["transcript"])), encoding="utf-8")
    return root


def _split_one(tmp_path: Path, value, video_id: str = "vid00000001") -> RawCaptionStore:
    src = tmp_path / "one.json"
    src.write_text(json.dumps({video_id: value}), encoding="utf-8")
    split_raw_captions(src, tmp_path / "split")
    return RawCaptionStore(tmp_path / "split")


# ------------------------------------------------------------------------------------------- real transcripts


@pytest.mark.parametrize("video_id", IDS)
def test_raw_captions_roundtrip_real_transcripts(tmp_path, raw_caption_file, asr_items, video_id):
    counts = split_raw_captions(raw_caption_file, tmp_path / "split")
    assert counts == {"videos": 3, "skipped_unwanted": 0, "bad_id": 0, "json_error": 0}
    t = RawCaptionStore(tmp_path / "split").get(video_id)
    n, first, last_end = EXPECTED[video_id]
    assert (t.video_id, t.source, t.language, t.length_mismatch) == (video_id, "howto100m_raw_caption", None, False)
    assert len(t.segments) == n
    assert t.segments[0] == first
    assert t.segments[-1][1] == last_end
    item = asr_items[IDS.index(video_id)]
    assert t.segments == [(s["start"], s["end"], s["text"]) for s in item["transcript"]]


@pytest.mark.parametrize("video_id", IDS)
def test_whisperx_real_transcripts(whisperx_dir, video_id):
    t = WhisperXStore(whisperx_dir).get(video_id)
    n, first, last_end = EXPECTED[video_id]
    assert (t.source, t.language, t.length_mismatch) == ("whisperx", "en", False)
    assert len(t.segments) == n and t.segments[0] == first and t.segments[-1][1] == last_end


def test_split_layout_wanted_ids_and_idempotence(tmp_path, raw_caption_file):
    out = tmp_path / "split"
    counts = split_raw_captions(raw_caption_file, out, wanted_ids={"AppleTurn01", "NotInFile01"})
    assert counts == {"videos": 1, "skipped_unwanted": 2, "bad_id": 0, "json_error": 0}
    shard = hashlib.sha1(b"AppleTurn01").hexdigest()[:2]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        [f"{shard}/AppleTurn01.json", tr.SPLIT_MARKER])
    store = RawCaptionStore(out)
    assert len(store.get("AppleTurn01").segments) == 33
    with pytest.raises(TranscriptError) as err:
        store.get("CarTires_01")
    assert err.value.reason == "no_transcript"

    full = tmp_path / "full"
    first = split_raw_captions(raw_caption_file, full)
    snapshot = {p: p.read_bytes() for p in full.rglob("*.json") if p.name != tr.SPLIT_MARKER}
    assert split_raw_captions(raw_caption_file, full) == first
    assert {p: p.read_bytes() for p in full.rglob("*.json") if p.name != tr.SPLIT_MARKER} == snapshot
    assert len(snapshot) == 3
    assert not list(full.rglob("*.tmp"))


# ------------------------------------------------------------------------------------------- bad raw captions


def test_split_rejects_unsafe_ids(tmp_path):
    good = {"text": ["hello"], "start": [0.0], "end": [1.0]}
    data = {"../evil": good, "a/b": good, "..\\win": good, "x" * 65: good, "": good, "ok_id-1": good}
    src = tmp_path / "raw_caption.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "deep" / "split"
    counts = split_raw_captions(src, out)
    assert counts == {"videos": 1, "skipped_unwanted": 0, "bad_id": 5, "json_error": 0}
    written = sorted(p.name for p in tmp_path.rglob("*.json"))
    assert written == sorted(["raw_caption.json", "ok_id-1.json", tr.SPLIT_MARKER])
    store = RawCaptionStore(out)
    assert store.get("ok_id-1").segments == [(0.0, 1.0, "hello")]
    with pytest.raises(TranscriptError) as err:
        store.get("../evil")
    assert err.value.reason == "no_transcript"


def test_truncated_raw_caption_file_keeps_what_was_read(tmp_path, raw_caption_file, caplog):
    text = raw_caption_file.read_text(encoding="utf-8")
    cut = text.index('"PotatoPc-01"') + 40  # inside the third video
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[:cut], encoding="utf-8")
    with caplog.at_level(logging.ERROR, logger=tr.__name__):
        counts = split_raw_captions(truncated, tmp_path / "split")
    assert counts == {"videos": 2, "skipped_unwanted": 0, "bad_id": 0, "json_error": 1}
    assert any("JSON error after 2 videos" in r.getMessage() for r in caplog.records)
    store = RawCaptionStore(tmp_path / "split")
    assert store.split_counts == counts
    assert len(store.get("CarTires_01").segments) == 24
    with pytest.raises(TranscriptError) as err:  # issue 14: the video cut by the error is malformed, not missing
        store.get("PotatoPc-01")
    assert err.value.reason == "malformed_transcript" and "invalid JSON" in err.value.detail
    with pytest.raises(TranscriptError) as err:  # and so is any video absent from a file that could not be read whole
        store.get("NeverListed")
    assert err.value.reason == "malformed_transcript" and "not in the readable part" in err.value.detail


def test_split_config_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        split_raw_captions(tmp_path / "absent.json", tmp_path / "out")
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="not a JSON object"):
        split_raw_captions(not_object, tmp_path / "out")
    with pytest.raises(FileNotFoundError):
        RawCaptionStore(tmp_path / "no_such_dir")


def test_unequal_lengths_are_truncated_and_flagged(tmp_path):
    store = _split_one(tmp_path, {"text": ["a", "b", "c"], "start": [0, 1.5, 3], "end": [1.5, 3.0]})
    t = store.get("vid00000001")
    assert t.segments == [(0.0, 1.5, "a"), (1.5, 3.0, "b")]
    assert t.length_mismatch is True
    assert all(isinstance(x, float) for s in t.segments for x in s[:2])


def test_numeric_strings_are_converted(tmp_path):
    store = _split_one(tmp_path, {"text": ["a", "b"], "start": ["0.5", 2], "end": [" 2.0 ", 3]})
    assert store.get("vid00000001").segments == [(0.5, 2.0, "a"), (2.0, 3.0, "b")]


@pytest.mark.parametrize(
    "value",
    [
        {"text": "not a list", "start": [0], "end": [1]},
        {"text": ["a"], "start": [0]},  # no "end"
        [["a"], [0], [1]],  # not an object
        {"text": ["a", None], "start": [0, 1], "end": [1, 2]},
        {"text": ["a", 7], "start": [0, 1], "end": [1, 2]},
        {"text": ["a", "b"], "start": [0, "abc"], "end": [1, 2]},
        {"text": ["a", "b"], "start": [0, None], "end": [1, 2]},
        {"text": ["a", "b"], "start": [0, 1], "end": [1, True]},
        {"text": ["a"], "start": [[0]], "end": [1]},
    ],
)
def test_malformed_raw_captions(tmp_path, value):
    store = _split_one(tmp_path, value)
    with pytest.raises(TranscriptError) as err:
        store.get("vid00000001")
    assert err.value.reason == "malformed_transcript"


def test_corrupt_or_oversized_per_video_file(tmp_path, monkeypatch):
    store = _split_one(tmp_path, {"text": ["a"], "start": [0], "end": [1]})
    path = tr.raw_caption_path(store.root, "vid00000001")
    assert store.get("vid00000001").segments == [(0.0, 1.0, "a")]
    monkeypatch.setattr(tr, "MAX_TRANSCRIPT_BYTES", 10)
    with pytest.raises(TranscriptError, match="bytes") as err:
        store.get("vid00000001")
    assert err.value.reason == "malformed_transcript"
    monkeypatch.undo()
    path.write_text('{"text": ["a"], "start": [0', encoding="utf-8")
    with pytest.raises(TranscriptError, match="invalid JSON") as err:
        store.get("vid00000001")
    assert err.value.reason == "malformed_transcript"


def test_transcript_error_reasons():
    assert TranscriptError("no_transcript", "x").reason == "no_transcript"
    with pytest.raises(ValueError):
        TranscriptError("something_else")


# ------------------------------------------------------------------------------------------- bad WhisperX


def test_whisperx_language_nan_and_missing(tmp_path):
    root = tmp_path / "wx"
    root.mkdir()
    (root / "nolang01.json").write_text(json.dumps(_whisperx([{"start": 1, "end": 2, "text": "hi"}], None)))
    (root / "badlang1.json").write_text(json.dumps({"segments": [], "language": 5}))
    (root / "nantime1.json").write_text('{"segments": [{"start": NaN, "end": 2.0, "text": "x"}], "language": "de"}')
    store = WhisperXStore(root)
    assert store.get("nolang01") == Transcript("nolang01", [(1.0, 2.0, "hi")], "whisperx", None, False)
    assert store.get("badlang1").segments == [] and store.get("badlang1").language is None
    nan = store.get("nantime1")
    assert math.isnan(nan.segments[0][0]) and nan.segments[0][1:] == (2.0, "x") and nan.language == "de"
    with pytest.raises(TranscriptError) as err:
        store.get("absent01")
    assert err.value.reason == "no_transcript"


@pytest.mark.parametrize(
    "text",
    [
        '{"segments": [{"start": 0.5, "end": 1.0, "text": "hel',  # truncated
        "[]",
        '{"segments": {"start": 0.5}}',
        '{"language": "en"}',
        '{"segments": [{"start": 0.5, "text": "no end"}]}',
        '{"segments": [{"start": 0.5, "end": 1.0, "text": 3}]}',
        '{"segments": [{"start": "soon", "end": 1.0, "text": "x"}]}',
        '{"segments": ["not a dict"]}',
    ],
)
def test_malformed_whisperx(tmp_path, text):
    root = tmp_path / "wx"
    root.mkdir()
    (root / "bad00000001.json").write_text(text, encoding="utf-8")
    with pytest.raises(TranscriptError) as err:
        WhisperXStore(root).get("bad00000001")
    assert err.value.reason == "malformed_transcript"


def test_whisperx_undecodable_file(tmp_path):
    root = tmp_path / "wx"
    root.mkdir()
    (root / "bad00000001.json").write_bytes(b'{"segments": [{"start": 0, "end": 1, "text": "\xff"}]}')
    with pytest.raises(TranscriptError) as err:
        WhisperXStore(root).get("bad00000001")
    assert err.value.reason == "malformed_transcript"


# ------------------------------------------------------------------------------------------- caption.json warning


def test_warns_once_on_stop_word_free_captions(tmp_path, asr_items, caplog):
    from spacy.lang.en.stop_words import STOP_WORDS

    # the real apple-turnovers transcript as HowTo100M's caption.json would hold it: stop words removed (145 tokens)
    def strip_stop_words(text: str) -> str:
        return " ".join(t for t in re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower()) if t not in STOP_WORDS)

    segments = asr_items[0]["transcript"]
    stripped = [{**s, "text": strip_stop_words(s["text"])} for s in segments]
    short = [{"start": 0, "end": 1, "text": " ".join(["onion"] * 49)}]  # 49 tokens: below the threshold
    data = {"captionJson1": _raw_caption(stripped), "rawCaption1": _raw_caption(segments), "short000001": _raw_caption(short)}
    src = tmp_path / "caption.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    split_raw_captions(src, tmp_path / "split")
    store = RawCaptionStore(tmp_path / "split")
    with caplog.at_level(logging.WARNING, logger=tr.__name__):
        for vid in ("captionJson1", "captionJson1", "rawCaption1", "short000001"):
            store.get(vid)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "captionJson1" in warnings[0].getMessage() and "raw_caption.json" in warnings[0].getMessage()


# ------------------------------------------------------------------------------------------- open_transcripts


def test_open_transcripts_splits_once(tmp_path, raw_caption_file, monkeypatch):
    work = tmp_path / "work"
    store = open_transcripts(raw_caption_file, work)
    assert isinstance(store, RawCaptionStore)
    assert store.root == work / "raw_captions"
    assert store.split_counts == {"videos": 3, "skipped_unwanted": 0, "bad_id": 0, "json_error": 0}
    assert len(store.get("PotatoPc-01").segments) == 47

    calls = []
    real_split = tr.split_raw_captions
    monkeypatch.setattr(tr, "split_raw_captions", lambda *a: calls.append(a) or real_split(*a))
    open_transcripts(raw_caption_file, work)
    assert calls == []  # the marker matches: no second split
    open_transcripts(raw_caption_file, work, wanted_ids={"AppleTurn01"})
    assert len(calls) == 1  # another wanted set: split again
    raw_caption_file.write_text(json.dumps({"NewVideo001": {"text": ["a"], "start": [0], "end": [1]}}))
    again = open_transcripts(raw_caption_file, work)
    assert len(calls) == 2  # the source changed: split again
    assert again.get("NewVideo001").segments == [(0.0, 1.0, "a")]


def test_open_transcripts_directory_and_missing(tmp_path, whisperx_dir):
    assert isinstance(open_transcripts(whisperx_dir, tmp_path / "work"), WhisperXStore)
    with pytest.raises(FileNotFoundError):
        open_transcripts(tmp_path / "absent.json", tmp_path / "work")
