"""Tests of the Common Crawl WARC reader (spec marc.md §2.1, §6) on WARC files written here with warcio:
gzip (one member per record) and plain, every named drop, a truncated record and a corrupt gzip member; and of its
split into a cheap listing (pointer rows) and a per-record read, which together give exactly ``read_warc``."""

from __future__ import annotations

import gzip
import io
import random
from collections import Counter
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from builders.core.records import Count, Drop
from builders.sources import warc as warc_module
from builders.sources.warc import (
    STAGE,
    find_warc_files,
    is_warc_pointer,
    list_warc_records,
    read_warc,
    read_warc_record,
)

SAMPLE_WARC = Path(__file__).resolve().parents[2] / "builders" / "samples" / "marc" / "recipes.warc.gz"
POINTER_FIELDS = {"record_id", "warc_filename", "path", "offset", "length", "url"}

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


def _truncated(path: Path) -> Path:
    """Two pages, the file cut in the middle of the second record's payload (``path`` ends in .gz: gzip)."""
    _write(path, [
        lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode()),
        lambda w: _response(w, "http://a.example/2", PAGE.format(LONG_TEXT).encode()),
    ], gz=path.name.endswith(".gz"))
    rows, _, _ = _split(list(read_warc(path)))
    whole = path.read_bytes()
    second = rows[1]["warc_record_offset"]
    path.write_bytes(whole[:second + (len(whole) - second) // 2])
    return path


def _cut_in_headers(path: Path) -> Path:
    """Two pages in a plain WARC, the file cut inside the WARC headers of the second record."""
    _write(path, [
        lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode()),
        lambda w: _response(w, "http://a.example/2", PAGE.format("two").encode()),
    ], gz=False)
    rows, _, _ = _split(list(read_warc(path)))
    path.write_bytes(path.read_bytes()[:rows[1]["warc_record_offset"] + 40])
    return path


def _corrupt_member_folder(folder: Path) -> int:
    """``folder`` with ``a.warc.gz`` (3 pages, gzip member 2 corrupt), ``b.warc.gz`` (1 page) and a text file;
    returns the offset of the corrupt member."""
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
    return start


def _garbage_folder(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "x.warc").write_bytes(b"hello\nnot a warc\n")
    (folder / "y.warc.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 20)
    (folder / "z.warc.gz").write_bytes(b"")
    return folder


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


def test_record_cut_inside_its_payload_is_a_named_drop(tmp_path):
    """Issue 14: a record whose bytes are missing was only a counter; its page (JSON-LD included) may be cut anywhere,
    so it is a ``warc_truncated`` drop row naming the missing bytes (a ``WARC-Truncated`` header is still parsed)."""
    for name in ("t.warc.gz", "t.warc"):
        path = _truncated(tmp_path / name)
        rows, drops, counts = _split(list(read_warc(path)))
        assert [r["url"] for r in rows] == ["http://a.example/1"], name
        assert [r["truncated"] for r in rows] == [False]
        assert counts == [] and [d.reason for d in drops] == ["warc_truncated"]
        assert "bytes of the record's Content-Length are missing" in drops[0].detail


def test_warc_truncated_header_is_flagged(tmp_path):
    path = _write(tmp_path / "h.warc.gz", [
        lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode(),
                            warc_headers={"WARC-Truncated": "length"}),
    ], gz=True)
    rows, _, counts = _split(list(read_warc(path)))
    assert rows[0]["truncated"] is True and counts == [Count("warc_truncated")]


def test_record_cut_inside_its_headers_is_warc_corrupt(tmp_path):
    path = _cut_in_headers(tmp_path / "c.warc")
    rows, drops, _ = _split(list(read_warc(path)))
    assert [r["url"] for r in rows] == ["http://a.example/1"]
    assert [d.reason for d in drops] == ["warc_corrupt"]


def test_corrupt_gzip_member_skips_the_rest_of_that_file_and_reads_the_next(tmp_path):
    folder = tmp_path / "crawl"
    start = _corrupt_member_folder(folder)
    items = list(read_warc(folder))
    rows, drops, _ = _split(items)
    assert [r["url"] for r in rows] == ["http://a.example/1", "http://b.example/1"]
    assert [d.reason for d in drops] == ["warc_corrupt"]
    assert drops[0].item_id == f"a.warc.gz@{start}" and "rest of the file skipped" in drops[0].detail
    assert [r["warc_filename"] for r in rows] == ["a.warc.gz", "b.warc.gz"]


def test_garbage_files_never_raise(tmp_path):
    items = list(read_warc(_garbage_folder(tmp_path)))
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


# --------------------------------------------------------------------------- listing + per-record read


def _list_then_read(paths, max_payload_bytes: int = warc_module.MAX_PAGE_BYTES) -> list:
    """What a resumable step does: list cheaply, then read each pointer on its own."""
    return [item for entry in list_warc_records(paths, max_payload_bytes)
            for item in (read_warc_record(entry["path"], entry["offset"], entry["length"], entry["warc_filename"],
                                          max_payload_bytes) if is_warc_pointer(entry) else [entry])]


def _case(name: str, tmp_path: Path) -> Path:
    if name == "sample":
        return SAMPLE_WARC
    if name in ("standard.warc.gz", "standard.warc"):
        return _standard(name.endswith(".gz"), tmp_path / name)
    if name in ("truncated.warc.gz", "truncated.warc"):
        return _truncated(tmp_path / name)
    if name == "cut_in_headers":
        return _cut_in_headers(tmp_path / "c.warc")
    if name == "corrupt_member":
        _corrupt_member_folder(tmp_path / "crawl")
        return tmp_path / "crawl"
    if name == "garbage":
        return _garbage_folder(tmp_path / "garbage")
    if name == "warc_truncated_header":
        return _write(tmp_path / "h.warc.gz", [
            lambda w: _response(w, "http://a.example/1", PAGE.format("one").encode(),
                                warc_headers={"WARC-Truncated": "length"})], gz=True)
    if name == "sniffed":
        return _write(tmp_path / "s.warc", [
            lambda w: _response(w, "http://a.example/html", b"  <html><p>x</p></html>", content_type=None),
            lambda w: _response(w, "http://a.example/bin", b"%PDF-1.4 ...", content_type=None)], gz=False)
    if name == "junk_after_last_record":
        path = _standard(False, tmp_path / "j.warc")
        path.write_bytes(path.read_bytes() + b"junk after the last record")
        return path
    raise AssertionError(name)


CASES = ["sample", "standard.warc.gz", "standard.warc", "truncated.warc.gz", "truncated.warc", "cut_in_headers",
         "corrupt_member", "garbage", "warc_truncated_header", "sniffed", "junk_after_last_record"]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("cap", [warc_module.MAX_PAGE_BYTES, 100], ids=["5MB", "100B"])
def test_listing_then_reading_each_pointer_equals_read_warc(tmp_path, name, cap):
    path = _case(name, tmp_path)
    expected = list(read_warc(path, cap))
    assert expected  # every case yields something
    assert _list_then_read(path, cap) == expected


def test_sample_listing_is_small_pointers_and_header_drops():
    listing = list(list_warc_records(SAMPLE_WARC))
    pointers = [e for e in listing if is_warc_pointer(e)]
    assert all(isinstance(e, Drop) for e in listing if not is_warc_pointer(e))
    assert Counter(d.reason for d in listing if isinstance(d, Drop)) == Counter(
        {"warc_not_response": 2, "http_status": 1, "not_html": 1})  # decided from headers alone
    rows = [r for r in read_warc(SAMPLE_WARC) if isinstance(r, dict)]
    assert len(pointers) == len(rows) > 20
    for pointer, row in zip(pointers, rows):
        assert set(pointer) == POINTER_FIELDS
        assert pointer["record_id"] == row["page_id"] and pointer["offset"] == row["warc_record_offset"]
        assert pointer["url"] == row["url"] and pointer["warc_filename"] == "recipes.warc.gz"
        assert pointer["path"] == str(SAMPLE_WARC) and pointer["length"] > 0
    offsets = [p["offset"] for p in pointers]
    assert offsets == sorted(offsets)
    assert all(a["offset"] + a["length"] <= b["offset"] for a, b in zip(pointers, pointers[1:]))


def test_listing_never_reads_a_payload(tmp_path, monkeypatch):
    path = _write(tmp_path / "big.warc.gz", [
        lambda w: _response(w, "http://a.example/big", b"<html>" + b"x" * 6_000_000 + b"</html>"),
        lambda w: _response(w, "http://a.example/bin", b"%PDF-1.4", content_type=None)], gz=True)

    def no_payload(*args, **kwargs):
        raise AssertionError("the listing read a payload")

    monkeypatch.setattr(warc_module, "_read_capped", no_payload)
    listing = list(list_warc_records(path))
    assert [is_warc_pointer(e) for e in listing] == [True, True]  # the cap and sniffing wait for the read
    monkeypatch.undo()
    assert [d.reason for d in _list_then_read(path)] == ["payload_too_large", "not_html"]


def test_records_read_one_by_one_in_any_order(tmp_path):
    """A resumed build reads the pointers it had not finished, in whatever order: same items per record."""
    for path in (SAMPLE_WARC, _standard(False, tmp_path / "a.warc")):
        pointers = [e for e in list_warc_records(path) if is_warc_pointer(e)]
        forward = [read_warc_record(p["path"], p["offset"], p["length"], p["warc_filename"]) for p in pointers]
        backward = [read_warc_record(Path(p["path"]), p["offset"], p["length"], p["warc_filename"])
                    for p in reversed(pointers)]
        assert forward == backward[::-1]
        assert [x for items in forward for x in items] == [x for x in read_warc(path) if isinstance(x, dict)]


def test_read_warc_record_accepts_numpy_and_arrow_integers():
    pointer = next(e for e in list_warc_records(SAMPLE_WARC) if is_warc_pointer(e))
    np = pytest.importorskip("numpy")
    items = read_warc_record(pointer["path"], np.int64(pointer["offset"]), np.int64(pointer["length"]),
                             pointer["warc_filename"])
    assert len(items) == 1 and items[0]["page_id"] == pointer["record_id"]
    assert type(items[0]["warc_record_offset"]) is int


def test_read_warc_record_bad_locations_are_named_drops(tmp_path):
    pointers = [e for e in list_warc_records(SAMPLE_WARC) if is_warc_pointer(e)]
    p = pointers[1]
    name = p["warc_filename"]
    bad = [
        (p["path"], p["offset"] + 5, p["length"]),  # inside a gzip member
        (p["path"], p["offset"], 30),  # a member cut short
        (p["path"], -1, p["length"]),
        (p["path"], p["offset"], 0),
        (p["path"], 10 ** 9, p["length"]),  # past the end of the file
        (tmp_path / "missing.warc.gz", 0, 100),
        (p["path"], "12", p["length"]),
    ]
    for path, offset, length in bad:
        items = read_warc_record(path, offset, length, name)
        assert [(type(x), x.reason, x.stage) for x in items] == [(Drop, "warc_corrupt", STAGE)], (offset, length)
        assert items[0].item_id.startswith(f"{name}@") and "skipped" in items[0].detail
    # a plain WARC: an offset inside a record, and a record cut short by the listed length
    plain = _standard(False, tmp_path / "a.warc")
    q = [e for e in list_warc_records(plain) if is_warc_pointer(e)][0]
    assert [x.reason for x in read_warc_record(q["path"], q["offset"] + 3, q["length"], "a.warc")] == ["warc_corrupt"]
    short = read_warc_record(q["path"], q["offset"], q["length"] - 20, "a.warc")  # the payload's end not listed
    assert [(type(x), x.reason) for x in short] == [(Drop, "warc_truncated")]


def test_read_warc_record_of_a_header_drop_record_gives_that_drop(tmp_path):
    """A record listed as a drop read directly (e.g. a listing from another version): the same drop, not a page."""
    path = _standard(True, tmp_path / "a.warc.gz")
    listing = list(list_warc_records(path))
    # walk the file's members by the pointer offsets: the 404 record follows the first page record
    first = next(e for e in listing if is_warc_pointer(e))
    after = first["offset"] + first["length"]
    items = read_warc_record(path, after, path.stat().st_size - after, "a.warc.gz")
    assert [(x.reason, x.item_id) for x in items] == [
        ("http_status", next(d.item_id for d in listing if isinstance(d, Drop) and d.reason == "http_status"))]


def test_every_drop_detail_starts_with_the_record_url(tmp_path):
    """A drop keeps the record's id; its detail names the page a user knows (``url <WARC-Target-URI>``), or says why
    the URL is unknown: no such header (warcinfo), or headers that cannot be read (a corrupt gzip member)."""
    _, drops, _ = _split(list(read_warc(_standard(True, tmp_path / "a.warc.gz"))))
    assert [d.detail for d in drops] == [
        "url unknown (no WARC-Target-URI header); WARC-Type warcinfo",
        "url http://a.example/1; WARC-Type request",
        "url http://a.example/404; HTTP status 404",
        "url http://a.example/img.png; content type image/png",
    ]
    assert all(d.item_id.startswith("<urn:uuid:") for d in drops)
    _, drops, _ = _split(list(read_warc(_truncated(tmp_path / "t.warc.gz"))))
    assert drops[0].reason == "warc_truncated" and drops[0].detail.startswith("url http://a.example/2; t.warc.gz: ")
    _, drops, _ = _split(list(read_warc(_cut_in_headers(tmp_path / "c.warc"))))
    assert drops[0].detail.startswith("url unknown (the record's headers could not be read); c.warc: ")
    start = _corrupt_member_folder(tmp_path / "crawl")
    _, drops, _ = _split(list(read_warc(tmp_path / "crawl")))
    assert [(d.item_id, d.detail.split(": ", 1)[0]) for d in drops] == [
        (f"a.warc.gz@{start}", "url unknown (the record's headers could not be read); a.warc.gz")]
    big = _write(tmp_path / "big.warc", [lambda w: _response(w, "http://a.example/big", b"<html>" + b"x" * 200)],
                 gz=False)
    _, drops, _ = _split(list(read_warc(big, max_payload_bytes=100)))
    assert [d.detail for d in drops] == ["url http://a.example/big; payload above 100 bytes"]


def test_read_warc_record_names_the_listed_url_when_the_headers_are_gone(tmp_path):
    """The listing read the record's URL; a record whose bytes changed since is a drop under the listed URL."""
    path = _standard(True, tmp_path / "a.warc.gz")
    p = next(e for e in list_warc_records(path) if is_warc_pointer(e))
    assert p["url"] == "http://a.example/1"
    path.write_bytes(b"\x00" * path.stat().st_size)
    items = read_warc_record(path, p["offset"], p["length"], "a.warc.gz", url=p["url"])
    assert [(x.reason, x.detail.split("; ", 1)[0]) for x in items] == [("warc_corrupt", "url http://a.example/1")]
    items = read_warc_record(path, p["offset"], p["length"], "a.warc.gz")  # no listed URL: said so
    assert items[0].detail.startswith("url unknown (the record's headers could not be read); a.warc.gz: ")
