"""Tests of the Common Crawl WARC reader (spec marc.md §2.1, §6) on WARC files written here with warcio:
gzip (one member per record) and plain, every named drop, a truncated record and a corrupt gzip member."""

from __future__ import annotations

import gzip
import io
import random
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from builders.core.records import Count, Drop
from builders.sources.warc import STAGE, find_warc_files, read_warc

PAGE = "<html lang='en'><head><title>t</title></head><body><p>{}</p></body></html>"
_RNG = random.Random(0)
LONG_TEXT = " ".join("".join(_RNG.choice("abcdefghij") for _ in range(6)) for _ in range(1500))  # compresses badly


def _response(writer: WARCWriter, url: str, body: bytes, status: str = "200 OK",
              content_type: str | None = "text/html; charset=utf-8", warc_headers: dict | None = None):
    headers = [("Content-Type", content_type)] if content_type is not None else []
    http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
    return writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                     warc_headers_dict=warc_headers)


def _write(path: Path, records: list, gz: bool) -> Path:
    """Write ``records`` (functions of a writer returning a record) to ``path``."""
    with open(path, "wb") as f:
        writer = WARCWriter(f, gzip=gz)
        for make in records:
            writer.write_record(make(writer))
    return path


def _standard(gz: bool, path: Path) -> Path:
    return _write(path, [
        lambda w: w.create_warcinfo_record(path.name, {"software": "test"}),
        lambda w: w.create_warc_record("http://a.example/1", "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n"),
                                       warc_headers_dict={"Content-Type": "application/http; msgtype=request"}),
        lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode()),
        lambda w: _response(w, "http://a.example/404", b"<html>missing</html>", status="404 Not Found"),
        lambda w: _response(w, "http://a.example/img.png", b"\x89PNG....", content_type="image/png"),
        lambda w: _response(w, "http://a.example/2", PAGE.format("caf\xe9").encode("cp1252"),
                            content_type="text/html; charset=windows-1252"),
        lambda w: _response(w, "http://a.example/3", b"<!DOCTYPE html><meta charset='iso-8859-1'><p>na\xefve</p>",
                            content_type=None),
    ], gz)


def _split(items: list):
    rows = [x for x in items if isinstance(x, dict)]
    drops = [x for x in items if isinstance(x, Drop)]
    counts = [x for x in items if isinstance(x, Count)]
    return rows, drops, counts


@pytest.mark.parametrize("gz", [True, False], ids=["warc.gz", "warc"])
def test_html_responses_become_page_records_and_the_rest_named_drops(tmp_path, gz):
    path = _standard(gz, tmp_path / ("a.warc.gz" if gz else "a.warc"))
    rows, drops, counts = _split(list(read_warc(path)))
    assert [r["url"] for r in rows] == ["http://a.example/1", "http://a.example/2", "http://a.example/3"]
    assert [d.reason for d in drops] == ["warc_not_response", "warc_not_response", "http_status", "not_html"]
    assert {d.stage for d in drops} == {STAGE}
    assert "404" in drops[2].detail and "image/png" in drops[3].detail
    assert counts == []
    one, two, three = rows
    assert one["html"] == PAGE.format("one") and one["charset"] == "utf-8"
    assert "café" in two["html"] and two["charset"] == "cp1252"  # HTTP charset
    assert "naïve" in three["html"] and three["charset"] == "cp1252"  # <meta charset> (iso-8859-1 = windows-1252)
    for row in rows:
        assert row["warc_filename"] == path.name and row["truncated"] is False
        assert row["warc_record_id"].startswith("<urn:uuid:") and row["page_id"] == row["warc_record_id"]
    # the offsets point at the records: re-reading from an offset gives that record first
    data = path.read_bytes()
    for row in rows:
        member = data[row["warc_record_offset"]:]
        head = gzip.GzipFile(fileobj=io.BytesIO(member)).read(2000) if gz else member[:2000]
        assert head.startswith(b"WARC/1.") and row["warc_record_id"].encode() in head


def test_offsets_are_increasing_and_distinct(tmp_path):
    rows, _, _ = _split(list(read_warc(_standard(True, tmp_path / "a.warc.gz"))))
    offsets = [r["warc_record_offset"] for r in rows]
    assert offsets == sorted(set(offsets)) and offsets[0] > 0


def test_payload_over_the_cap_is_dropped_without_stopping(tmp_path):
    big = b"<html><body>" + b"x" * 6_000_000 + b"</body></html>"
    path = _write(tmp_path / "big.warc.gz", [
        lambda w: _response(w, "http://a.example/big", big),
        lambda w: _response(w, "http://a.example/small", PAGE.format("small").encode()),
    ], gz=True)
    rows, drops, _ = _split(list(read_warc(path)))
    assert [d.reason for d in drops] == ["payload_too_large"]
    assert [r["url"] for r in rows] == ["http://a.example/small"]
    # a smaller cap: both pages are too large
    _, drops, _ = _split(list(read_warc(path, max_payload_bytes=10)))
    assert [d.reason for d in drops] == ["payload_too_large", "payload_too_large"]


def test_missing_content_type_is_sniffed(tmp_path):
    path = _write(tmp_path / "s.warc", [
        lambda w: _response(w, "http://a.example/html", b"  <html><p>x</p></html>", content_type=None),
        lambda w: _response(w, "http://a.example/bin", b"%PDF-1.4 ...", content_type=None),
    ], gz=False)
    rows, drops, _ = _split(list(read_warc(path)))
    assert [r["url"] for r in rows] == ["http://a.example/html"]
    assert [d.reason for d in drops] == ["not_html"]


def test_record_cut_inside_its_payload_is_parsed_and_flagged(tmp_path):
    for gz in (True, False):
        name = "t.warc.gz" if gz else "t.warc"
        path = _write(tmp_path / name, [
            lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode()),
            lambda w: _response(w, "http://a.example/2", PAGE.format(LONG_TEXT).encode()),
        ], gz=gz)
        rows, _, _ = _split(list(read_warc(path)))
        whole = path.read_bytes()
        second = rows[1]["warc_record_offset"]
        cut = second + (len(whole) - second) // 2
        path.write_bytes(whole[:cut])
        rows, drops, counts = _split(list(read_warc(path)))
        assert [r["url"] for r in rows] == ["http://a.example/1", "http://a.example/2"], name
        assert [r["truncated"] for r in rows] == [False, True]
        assert counts == [Count("warc_truncated")] and drops == []
        assert 0 < len(rows[1]["html"]) < len(PAGE.format(LONG_TEXT))


def test_warc_truncated_header_is_flagged(tmp_path):
    path = _write(tmp_path / "h.warc.gz", [
        lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode(),
                            warc_headers={"WARC-Truncated": "length"}),
    ], gz=True)
    rows, _, counts = _split(list(read_warc(path)))
    assert rows[0]["truncated"] is True and counts == [Count("warc_truncated")]


def test_record_cut_inside_its_headers_is_warc_corrupt(tmp_path):
    path = _write(tmp_path / "c.warc", [
        lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode()),
        lambda w: _response(w, "http://a.example/2", PAGE.format("two").encode()),
    ], gz=False)
    rows, _, _ = _split(list(read_warc(path)))
    whole = path.read_bytes()
    path.write_bytes(whole[:rows[1]["warc_record_offset"] + 40])  # inside the WARC headers of record 2
    rows, drops, _ = _split(list(read_warc(path)))
    assert [r["url"] for r in rows] == ["http://a.example/1"]
    assert [d.reason for d in drops] == ["warc_corrupt"]


def test_corrupt_gzip_member_skips_the_rest_of_that_file_and_reads_the_next(tmp_path):
    folder = tmp_path / "crawl"
    folder.mkdir()
    bad = _write(folder / "a.warc.gz", [
        lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode()),
        lambda w: _response(w, "http://a.example/2", PAGE.format("two").encode()),
        lambda w: _response(w, "http://a.example/3", PAGE.format("three").encode()),
    ], gz=True)
    rows, _, _ = _split(list(read_warc(bad)))
    data = bytearray(bad.read_bytes())
    start = rows[1]["warc_record_offset"]
    for i in range(start + 12, start + 60):  # inside the deflate stream of member 2
        data[i] ^= 0x5A
    bad.write_bytes(bytes(data))
    _write(folder / "b.warc.gz", [lambda w: _response(w, "http://b.example/1", PAGE.format("b").encode())], gz=True)
    (folder / "notes.txt").write_text("not a warc")

    items = list(read_warc(folder))
    rows, drops, _ = _split(items)
    assert [r["url"] for r in rows] == ["http://a.example/1", "http://b.example/1"]
    assert [d.reason for d in drops] == ["warc_corrupt"]
    assert drops[0].item_id == f"a.warc.gz@{start}" and "rest of the file skipped" in drops[0].detail
    assert [r["warc_filename"] for r in rows] == ["a.warc.gz", "b.warc.gz"]


def test_garbage_files_never_raise(tmp_path):
    (tmp_path / "x.warc").write_bytes(b"hello\nnot a warc\n")
    (tmp_path / "y.warc.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 20)
    (tmp_path / "z.warc.gz").write_bytes(b"")
    items = list(read_warc(tmp_path))
    assert [(d.reason, d.item_id) for d in items] == [("warc_corrupt", "x.warc@0"), ("warc_corrupt", "y.warc.gz@0")]


def test_inputs(tmp_path):
    a = _standard(False, tmp_path / "a.warc")
    sub = tmp_path / "sub"
    sub.mkdir()
    b = _standard(True, sub / "b.warc.gz")
    assert find_warc_files(tmp_path) == [(a, "a.warc"), (b, "sub/b.warc.gz")]
    assert find_warc_files([b, a]) == [(b, "b.warc.gz"), (a, "a.warc")]
    with pytest.raises(FileNotFoundError):
        read_warc(tmp_path / "missing.warc.gz")
