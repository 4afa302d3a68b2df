"""Tests of the transcript readers (spec sieve_swap.md §2.3, §6) on the real ShowHowTo ASR examples converted into
HowTo100M raw_caption.json and WhisperX formats, and on broken inputs."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from builders.sources import transcripts as tr
from builders.sources.transcripts import (
    RawCaptionStore,
    SplitIndex,
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
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        ["block-00000.jsonl", tr.INDEX_FILE, tr.SPLIT_MARKER])
    store = RawCaptionStore(out)
    assert len(store.get("AppleTurn01").segments) == 33
    with pytest.raises(TranscriptError) as err:
        store.get("CarTires_01")
    assert err.value.reason == "no_transcript"

    full = tmp_path / "full"
    first = split_raw_captions(raw_caption_file, full)
    snapshot = {p: p.read_bytes() for p in full.rglob("*.jsonl")}
    index = SplitIndex(full)
    digests = {v: index.digest(v, e) for v, e in index.entries(IDS).items()}
    assert split_raw_captions(raw_caption_file, full) == first
    assert {p: p.read_bytes() for p in full.rglob("*.jsonl")} == snapshot
    assert {v: index.digest(v, e) for v, e in index.entries(IDS).items()} == digests
    assert len(snapshot) == 1 and len(snapshot[tr.block_path(full, 0)].splitlines()) == 3
    assert not list(full.rglob("*.tmp"))


def test_split_blocks_of_videos_and_per_video_digests(tmp_path, monkeypatch):
    """ARCHITECTURE.md "Scale": BLOCK_VIDEOS videos a file (never a file a video), each found by the index alone;
    a video's digest is the sha256 of its own bytes, so editing one video changes its digest only."""
    monkeypatch.setattr(tr.raw_caption_split, "BLOCK_VIDEOS", 4)
    data = {f"vid{i:08d}": {"text": [f"word {i}"], "start": [i], "end": [i + 1]} for i in range(10)}
    src = tmp_path / "raw_caption.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "split"
    assert split_raw_captions(src, out)["videos"] == 10
    assert sorted(p.name for p in out.glob("block-*.jsonl")) == ["block-00000.jsonl", "block-00001.jsonl",
                                                                 "block-00002.jsonl"]
    store = RawCaptionStore(out)
    assert [store.get(v).segments for v in data] == [[(float(i), float(i + 1), f"word {i}")] for i in range(10)]
    index = SplitIndex(out)
    assert index.ids() == set(data) and index.has("vid00000009") and not index.has("vid00000010")
    before = {v: index.digest(v, e) for v, e in index.entries(list(data)).items()}
    assert before["vid00000005"] == hashlib.sha256(json.dumps(data["vid00000005"]).encode()).hexdigest()
    data["vid00000005"]["text"] = ["an edited caption"]
    src.write_text(json.dumps(data), encoding="utf-8")
    split_raw_captions(src, out)
    after = {v: index.digest(v, e) for v, e in index.entries(list(data)).items()}  # the same reader sees the new index
    assert {v for v in data if before[v] != after[v]} == {"vid00000005"}
    assert RawCaptionStore(out).get("vid00000005").segments == [(5.0, 6.0, "an edited caption")]
    data = {v: data[v] for v in list(data)[:3]}  # a shorter file: the blocks of the longer split go
    src.write_text(json.dumps(data), encoding="utf-8")
    split_raw_captions(src, out)
    assert sorted(p.name for p in out.glob("block-*.jsonl")) == ["block-00000.jsonl"]
    assert SplitIndex(out).ids() == set(data)


# ------------------------------------------------------------------------------------------- bad raw captions


def test_split_rejects_unsafe_ids(tmp_path):
    good = {"text": ["hello"], "start": [0.0], "end": [1.0]}
    data = {"../evil": good, "a/b": good, "..\\win": good, "x" * 65: good, "": good, "ok_id-1": good}
    src = tmp_path / "raw_caption.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "deep" / "split"
    counts = split_raw_captions(src, out)
    assert counts == {"videos": 1, "skipped_unwanted": 0, "bad_id": 5, "json_error": 0}
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted(["raw_caption.json", "deep/split/block-00000.jsonl", f"deep/split/{tr.INDEX_FILE}",
                              f"deep/split/{tr.SPLIT_MARKER}"])
    assert SplitIndex(out).ids() == {"ok_id-1"}
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


def test_corrupt_or_oversized_per_video_slice(tmp_path, monkeypatch):
    store = _split_one(tmp_path, {"text": ["a"], "start": [0], "end": [1]})
    block = tr.block_path(store.root, 0)
    assert store.get("vid00000001").segments == [(0.0, 1.0, "a")]
    monkeypatch.setattr(tr.transcript, "MAX_TRANSCRIPT_BYTES", 10)
    with pytest.raises(TranscriptError, match="bytes") as err:
        store.get("vid00000001")
    assert err.value.reason == "malformed_transcript"
    monkeypatch.undo()
    size = block.stat().st_size
    block.write_bytes(b'{"text": ["a"], "start": [0'.ljust(size - 1) + b"\n")  # the same length, cut JSON
    with pytest.raises(TranscriptError, match="invalid JSON") as err:
        store.get("vid00000001")
    assert err.value.reason == "malformed_transcript"
    block.write_bytes(b"{}")  # a block cut short
    with pytest.raises(TranscriptError, match="cut short") as err:
        store.get("vid00000001")
    assert err.value.reason == "malformed_transcript"


def test_transcript_item_digests_of_a_split_and_of_whisperx_files(tmp_path, raw_caption_file, whisperx_dir):
    from builders.core.fingerprint import FingerprintMemo

    split_raw_captions(raw_caption_file, tmp_path / "split")
    got = tr.transcript_item_digests([*IDS, "NotInFile01"], tmp_path / "split", raw_caption_file)
    raw = json.loads(raw_caption_file.read_text())
    assert got == [*(hashlib.sha256(json.dumps(raw[v]).encode()).hexdigest() for v in IDS), "-"]
    memo = FingerprintMemo(tmp_path / "memo.sqlite")
    got = tr.transcript_item_digests([IDS[0], "NotInFile01", "../x"], None, whisperx_dir, memo)
    assert got == [hashlib.sha256((whisperx_dir / f"{IDS[0]}.json").read_bytes()).hexdigest(), "-", "-"]
    memo.close()


def test_stop_words_are_spacys_without_importing_spacy():
    """Issue 19: importing ``spacy`` to read its stop-word list cost 2.4 s of CPU in every worker."""
    code = ("import sys; from builders.sources.transcripts import english_stop_words as e; w = e(); "
            "print(len(w), 'spacy' in sys.modules, 'the' in w, \"n't\" in w)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["326", "False", "True", "True"]
    from spacy.lang.en.stop_words import STOP_WORDS

    tr.english_stop_words.cache_clear()
    assert tr.english_stop_words() == frozenset(STOP_WORDS)


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
    data = {"captionJson1": _raw_caption(stripped), "rawCaption1": _raw_caption(segments),
            "short000001": _raw_caption(short)}
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
    monkeypatch.setattr(tr.raw_caption_split, "split_raw_captions", lambda *a: calls.append(a) or real_split(*a))
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
