"""The C-speed reader of a large JSON object's entries (``builders/sources/json_entries.py``) and the split that uses
it: a plain file gives exactly the careful reader's split; anything else raises ``NotPlain`` and the careful reader
reads the file."""

from __future__ import annotations

import io
import json
import logging
import sqlite3
from pathlib import Path

import pytest

from builders.sources import json_entries, transcripts
from builders.sources.json_entries import NotPlain, plain_object_entries
from builders.sources.transcripts import INDEX_FILE, SPLIT_MARKER, split_raw_captions


def entries(data: bytes, max_value_chars: int = 1 << 20, max_depth: int = 32) -> list:
    return list(plain_object_entries(io.BytesIO(data), max_value_chars=max_value_chars, max_depth=max_depth))


def test_entries_in_file_order_with_repeats_bom_spaces_and_python_constants():
    data = ('\ufeff {\n "a" : {"start": [0, 1.5], "text": ["x\\u00e9", "y"]},"b":[],\t"a": 7, '
            '"c": [NaN, Infinity, -Infinity, 1e3, -0, true, null] } trailing junk').encode("utf-8")
    assert entries(data) == [("a", {"start": [0, 1.5], "text": ["xé", "y"]}), ("b", []), ("a", 7),
                             ("c", ["NaN", "Infinity", "-Infinity", 1000.0, 0, True, None])]
    assert entries(b"{}") == [] and entries(b"  { }  ") == []


@pytest.mark.parametrize("data, why", [
    (b'{"a": [nan]}', "value of 'a'"),                  # not a constant Python writes: the careful reader names it
    (b'{"a": [1, 2}', "value of 'a'"),                  # invalid JSON
    (b'{"a": [1, 2]', "expected one of"),               # truncated after a value
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'[1, 2]', "expected one of '{'"),
    (b'{1: 2}', "key"),
    (b'{"a": [1] "b": 2}', "expected one of ',}'"),
    (b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 32"),
    (b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}", "RecursionError"),
    (b'{"a": "' + b"x" * 200 + b'"}', "longer than 100"),
])
def test_anything_not_plain_raises(data, why):
    with pytest.raises(NotPlain, match=why.replace("(", r"\(").replace("[", r"\[")):
        entries(data, max_value_chars=100)


def test_depth_is_counted_as_the_careful_reader_counts_it():
    assert json_entries._depth(3) == 0 and json_entries._depth([]) == 1
    assert json_entries._depth({"a": [[1], {"b": []}]}) == 4
    assert entries(b'{"a": ' + b"[" * 32 + b"]" * 32 + b"}")  # 32 levels: kept (MAX_JSON_DEPTH)


def test_a_value_across_many_read_chunks(monkeypatch):
    monkeypatch.setattr(json_entries, "_CHUNK_BYTES", 7)
    value = {"text": ["é" * 50, "b"], "start": list(range(30))}
    data = json.dumps({f"v{i}": value for i in range(20)}, ensure_ascii=False).encode("utf-8")
    assert entries(data) == [(f"v{i}", value) for i in range(20)]


@pytest.mark.parametrize("ensure_ascii, bom, chunk", [(True, False, 7), (False, True, 7), (False, False, 1 << 20)])
def test_spans_are_the_byte_offsets_of_each_entry(monkeypatch, ensure_ascii, bom, chunk):
    """With ``spans=True`` each entry comes with its bytes in the file, from its key's opening quote to its value's
    end, with multi-byte UTF-8 and a BOM before it and across read chunks; ``plain_member`` reads the same entry."""
    monkeypatch.setattr(json_entries, "_CHUNK_BYTES", chunk)
    caps = {f"v{i}": {"text": ["é€😀" * (i % 3), "stir"], "start": [i / 3]} for i in range(12)}
    text = ("\ufeff" if bom else "") + " {\n" + ",\n ".join(
        f"{json.dumps(k)} :  {json.dumps(v, ensure_ascii=ensure_ascii)}" for k, v in caps.items()) + "\n} junk"
    data = text.encode("utf-8")
    got = list(plain_object_entries(io.BytesIO(data), max_value_chars=1000, max_depth=8, spans=True))
    assert [(k, v) for k, v, _, _ in got] == list(caps.items())
    assert [(k, v) for k, v in entries(data)] == list(caps.items())  # the same entries without spans
    for key, value, start, end in got:
        piece = data[start:end].decode("utf-8")
        assert piece.startswith(json.dumps(key)) and piece.endswith("}")
        assert json_entries.plain_member(piece, 0, max_value_chars=1000, max_depth=8) == (key, value, 0, len(piece))
    with pytest.raises(NotPlain, match="longer than 10"):
        json_entries.plain_member('"k": "' + "x" * 20 + '"', 0, max_value_chars=10, max_depth=8)
    with pytest.raises(NotPlain, match="expected one of ':'"):
        json_entries.plain_member('"k" 1', 0, max_value_chars=10, max_depth=8)


def _split(src: Path, out: Path, careful: bool, monkeypatch) -> tuple[dict, list, dict]:
    with monkeypatch.context() as m:
        if careful:
            m.setattr(transcripts.raw_caption_split, "_split_plain", lambda *a, **k: None)
        counts = split_raw_captions(src, out, wanted_ids={"vidA", "vidB", "vidC", "vidD"})
    con = sqlite3.connect(out / INDEX_FILE)
    index = sorted(con.execute("SELECT * FROM videos"))
    con.close()
    blocks = {p.name: p.read_bytes() for p in sorted(out.glob("block-*.jsonl"))}
    marker = json.loads((out / SPLIT_MARKER).read_text())
    plain = marker.pop("plain")  # only the C-speed reader records what an incremental re-split needs
    assert (plain is None) == careful
    return counts, index, {"blocks": blocks, "marker": marker}


def test_a_plain_file_splits_exactly_as_the_careful_reader_splits_it(tmp_path, monkeypatch, caplog):
    caps = {"vidA": {"start": [0.0, 2.5], "end": [2.5, 4.0], "text": ["hello there", "now stir é"]},
            "bad id!": {"text": ["x"]}, "vidB": {"start": [1], "end": [2], "text": ["one"]},
            "unwanted1": {"text": ["y"]}, "vidC": {"start": [float("nan")], "end": [1.0], "text": ["z"]},
            "vidA ": [], "vidD": []}
    src = tmp_path / "raw_caption.json"
    src.write_text(json.dumps(caps), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="builders.sources.transcripts"):
        fast = _split(src, tmp_path / "fast", careful=False, monkeypatch=monkeypatch)
    assert "careful reader" not in caplog.text   # the fast path read it
    careful = _split(src, tmp_path / "careful", careful=True, monkeypatch=monkeypatch)
    assert fast == careful
    assert fast[0] == {"videos": 4, "skipped_unwanted": 1, "bad_id": 2, "json_error": 0}


def test_a_file_that_is_not_plain_is_read_by_the_careful_reader(tmp_path, caplog):
    src = tmp_path / "raw_caption.json"
    src.write_bytes(b'{"vidA": {"start": [0], "end": [1], "text": ["a b"]}, "vidB": {"start": [nan], "end": [1], '
                    b'"text": ["c"]}, "vidC": {"start": [0], "end": [1], "text": ["d"]}}')
    with caplog.at_level(logging.INFO, logger="builders.sources.transcripts"):
        counts = split_raw_captions(src, tmp_path / "out")
    assert "read with the careful reader" in caplog.text
    assert counts["videos"] == 3 and counts["json_error"] == 0
    store = transcripts.RawCaptionStore(tmp_path / "out")
    assert store.get("vidA").segments == [(0.0, 1.0, "a b")] and store.get("vidC").segments == [(0.0, 1.0, "d")]
