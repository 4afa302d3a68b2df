"""The five findings of the malformed-input sweep (issue 20), each built from the bundled samples
(``builders/samples/``): every bad item ends as a named drop of that item, and nothing after it is lost
(docs/reason-codes.md)."""

from __future__ import annotations

import json
import logging
import re
import zlib
from pathlib import Path

import pytest

from builders.core.records import Drop
from builders.sources import howto100m, warc
from builders.sources import transcripts as tr

from .conftest import REPO, check_conserved, tally

SIEVE = REPO / "builders" / "samples" / "sieve_swap"
MARC = REPO / "builders" / "samples" / "marc"


def _captions() -> tuple[str, list[str]]:
    text = (SIEVE / "raw_caption.json").read_text(encoding="utf-8")
    return text, list(json.loads(text))


def _read_all(src: Path, work: Path, ids: list[str]) -> list:
    store = tr.open_transcripts(src, work, set(ids))
    out: list = []
    for vid in ids:
        try:
            out.append({"video_id": vid, "segments": store.get(vid).segments})
        except tr.TranscriptError as e:
            out.append(Drop(vid, "load_transcript", e.reason, e.detail))
    return out


def _sample_failures(ids: list[str], tmp_path: Path) -> dict[str, str]:
    """The sample's own transcript drops (it holds malformed videos on purpose), by id."""
    _, drops, _ = tally(_read_all(SIEVE / "raw_caption.json", tmp_path / "clean", ids))
    return {d.item_id: d.reason for d in drops}


def test_metadata_unterminated_quote_is_dropped_under_its_own_id(tmp_path):
    lines = (SIEVE / "HowTo100M_v1.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    ids = [line.split(",")[0] for line in lines]
    at = next(i for i, line in enumerate(lines) if ids.count(ids[i]) == 1 and ",Food and Entertaining," in line)
    vid = ids[at]
    lines[at] = lines[at].replace(",Food and Entertaining,", ',"Food and Entertaining,', 1)
    path = tmp_path / "HowTo100M_v1.csv"
    path.write_text("".join(lines), encoding="utf-8")
    n_sample_bad = sum(isinstance(x, Drop) for x in howto100m.read_metadata(SIEVE / "HowTo100M_v1.csv"))
    rows, drops, _ = check_conserved(howto100m.read_metadata(path), len(lines) - 1,
                                     {"malformed_metadata_row": n_sample_bad + 1})
    quoted = [d for d in drops if "unterminated quoted field" in d.detail]
    assert [d.item_id for d in quoted] == [vid] and vid not in {r["video_id"] for r in rows}


@pytest.mark.parametrize("token", ["nan", "-nan", "NAN", "inf", "+NaN"])
def test_raw_caption_bare_nan_time_drops_that_video_only(tmp_path, token):
    text, ids = _captions()
    expected = _sample_failures(ids, tmp_path)
    vid = next(v for v in ids if v not in expected)
    at = text.index('"start":[', text.index(json.dumps(vid))) + len('"start":[')
    src = tmp_path / "raw_caption.json"
    src.write_text(text[:at] + token + text[text.index(",", at):], encoding="utf-8")
    _, drops, _ = tally(_read_all(src, tmp_path / "work", ids))
    assert {d.item_id: d.reason for d in drops} == {**expected, vid: "malformed_transcript"}
    assert repr(token) in next(d.detail for d in drops if d.item_id == vid)


def test_raw_caption_python_nan_keeps_the_video(tmp_path):
    """Python's own ``NaN`` stays a number: the segment is removed and counted later (``bad_segment``)."""
    text, ids = _captions()
    expected = _sample_failures(ids, tmp_path)
    vid = next(v for v in ids if v not in expected)
    at = text.index('"start":[', text.index(json.dumps(vid))) + len('"start":[')
    src = tmp_path / "raw_caption.json"
    src.write_text(text[:at] + "NaN" + text[text.index(",", at):], encoding="utf-8")
    rows, drops, _ = tally(_read_all(src, tmp_path / "work", ids))
    assert {d.item_id: d.reason for d in drops} == expected
    assert any(s != s for s, _, _ in next(r for r in rows if r["video_id"] == vid)["segments"])


def test_truncated_raw_caption_cut_video_is_malformed_not_absent(tmp_path):
    text, ids = _captions()
    vid = ids[len(ids) // 2]
    cut = text.index('"end":[', text.index(json.dumps(vid))) + 20  # inside the cut video's value
    src = tmp_path / "raw_caption.json"
    src.write_text(text[:cut], encoding="utf-8")
    _, drops, _ = tally(_read_all(src, tmp_path / "work", ids))
    by_id = {d.item_id: d for d in drops}
    assert by_id[vid].reason == "malformed_transcript" and "JSON error" in by_id[vid].detail
    assert all(by_id[v].reason == "malformed_transcript" for v in ids[ids.index(vid):])  # none is no_transcript


@pytest.mark.parametrize("depth", [20, 40, 100_000])
def test_raw_caption_deeply_nested_video_is_dropped_by_the_reader(tmp_path, depth):
    text, ids = _captions()
    expected = _sample_failures(ids, tmp_path)
    vid = next(v for v in ids if v not in expected)
    value = json.dumps(json.loads(text)[vid], separators=(",", ":"))
    assert value in text
    nested = '{"text": ' + "[" * depth + '"x"' + "]" * depth + ', "start": [0], "end": [1]}'
    src = tmp_path / "raw_caption.json"
    src.write_text(text.replace(value, nested, 1), encoding="utf-8")
    rows, drops, _ = tally(_read_all(src, tmp_path / "work", ids))
    assert {d.item_id: d.reason for d in drops} == {**expected, vid: "malformed_transcript"}
    assert all(isinstance(t, str) for r in rows for _, _, t in r["segments"])  # nothing nested reaches the swap


def _members() -> list[bytes]:
    data, out, pos = (MARC / "recipes.warc.gz").read_bytes(), [], 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        out.append(d.decompress(data[pos:]))
        pos = len(data) - len(d.unused_data)
    return out


@pytest.mark.parametrize("extra", [100, 1_000_000])
@pytest.mark.parametrize("gz", [False, True], ids=["warc", "warc_gz"])
def test_warc_content_length_overrun_drops_that_record_and_reads_the_next(tmp_path, extra, gz, caplog):
    members = _members()
    k = 5
    length = int(re.search(rb"Content-Length: (\d+)", members[k]).group(1))
    members[k] = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % (length + extra), members[k], count=1)
    rid = re.search(rb"WARC-Record-ID: (\S+)", members[k]).group(1).decode()
    path = tmp_path / ("bad.warc.gz" if gz else "bad.warc")
    path.write_bytes(b"".join(_gzip(m) if gz else m for m in members))
    caplog.set_level(logging.ERROR)
    baseline = list(warc.read_warc(MARC / "recipes.warc.gz"))
    items = list(warc.read_warc(path))
    rows, drops, _ = tally(items)
    assert len(rows) + len(drops) == len(members)  # one item a record: nothing after the overrun is lost
    bad = [d for d in drops if d.item_id == rid]
    assert len(bad) == 1 and bad[0].reason in ("warc_corrupt", "warc_truncated")
    base_rows, _, _ = tally(baseline)
    assert {r["page_id"] for r in rows} == {r["page_id"] for r in base_rows} - {rid}


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()
