"""Tests of the HTML-page directory reader and the charset rules (spec marc.md §2.1) on the real recipe_pages fixture
and on pages written here (charsets, gzip, bad files)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from builders.core.records import Drop
from builders.sources.html_pages import (
    STAGE,
    decode_html,
    list_pages,
    meta_charset,
    page_url,
    read_html_page,
    read_html_pages,
    url_detail,
)


def test_fixture_has_175_pages_in_key_order(shared_data: Path):
    folder = shared_data / "recipe_pages"
    pages = list(read_html_pages(folder))
    index = json.loads((folder / "INDEX.json").read_text(encoding="utf-8"))
    assert len(pages) == 175 and all(isinstance(p, dict) for p in pages)
    assert [p["page_id"] for p in pages] == sorted(item["key"] for item in index["items"])
    first = pages[0]
    assert first["page_id"] == "101cookbooks.com__onehundredonecookbooks_1"
    assert first["url"] == "https://www.101cookbooks.com/broccoli-soup-with-coconut-milk/"  # <link rel=canonical>
    assert first["charset"] == "utf-8" and "Broccoli Soup with Coconut Milk" in first["html"]
    assert (first["warc_filename"], first["warc_record_offset"], first["warc_record_id"]) == ("", -1, "")
    assert first["source_path"].endswith("101cookbooks.com__onehundredonecookbooks_1.html.gz")
    assert sum("\ufffd" in p["html"] for p in pages) <= 1  # measured: 1 page (okokorecepten_1) holds U+FFFD itself


def test_canonical_urls_match_recipe_scrapers(shared_data: Path):
    folder = shared_data / "recipe_pages"
    pages = {p["page_id"]: p for p in read_html_pages(folder)}
    same = sum(
        pages[k]["url"] == json.loads((folder / f"{k}.expected.json").read_text(encoding="utf-8"))["canonical_url"]
        for k in pages)
    assert same >= 168  # measured: 168 of 175 (the rest: relative or different canonical links)


def test_decode_by_bom_http_meta_then_utf8():
    text = "<p>café</p>"
    assert decode_html(b"\xef\xbb\xbf" + text.encode("utf-8"), "latin-1") == (text, "utf-8")  # BOM wins
    assert decode_html(text.encode("cp1252"), "windows-1252") == (text, "cp1252")  # HTTP charset
    meta = b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"><p>caf\xe9</p>'
    assert decode_html(meta) == ('<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"><p>café</p>',
                                 "cp1252")
    assert meta_charset(b"<meta charset='koi8-r'>") == "koi8-r"
    assert decode_html(b"<meta charset=utf-16><p>x</p>")[1] == "utf-8"  # a <meta> cannot declare UTF-16
    assert decode_html(b"<p>caf\xe9</p>") == ("<p>caf\ufffd</p>", "utf-8")  # UTF-8 with replacement
    assert decode_html(b"<p>x</p>", "no-such-charset")[1] == "utf-8"
    assert decode_html(b"<meta charset='bogus'><p>x</p>", None)[1] == "utf-8"


def test_page_url_prefers_canonical_then_og():
    assert page_url('<meta property="og:url" content="https://o/x"><link href="https://c/x" rel="canonical">') \
        == "https://c/x"
    assert page_url('<meta property="og:url" content="https://o/x">') == "https://o/x"
    assert page_url("<p>no url</p>") is None


def test_directory_of_pages_with_bad_files(tmp_path):
    (tmp_path / "a.html").write_bytes("<html><link rel='canonical' href='https://a/'>é</html>".encode())
    with gzip.open(tmp_path / "b.html.gz", "wb") as f:
        f.write(b"<html><meta charset='windows-1252'>\xe9</html>")
    (tmp_path / "c.html.gz").write_bytes(b"not gzip at all")
    (tmp_path / "d.html").write_bytes(b"<html>" + b"x" * 200 + b"</html>")
    (tmp_path / "a.expected.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("ignored")
    items = list(read_html_pages(tmp_path, max_bytes=100))
    assert [getattr(i, "reason", None) or i["page_id"] for i in items] == ["a", "b", "page_unreadable",
                                                                           "payload_too_large"]
    a, b, c, d = items
    assert a["url"] == "https://a/" and a["html"].endswith("é</html>")
    assert b["url"] == "page:b" and "é" in b["html"] and b["charset"] == "cp1252"
    assert isinstance(c, Drop) and c.item_id == "c" and c.stage == STAGE
    assert isinstance(d, Drop) and d.item_id == "d"


def test_gz_preferred_over_plain_for_one_key(tmp_path):
    (tmp_path / "k.html").write_text("plain")
    with gzip.open(tmp_path / "k.html.gz", "wb") as f:
        f.write(b"zipped")
    assert [p.name for _, p in list_pages(tmp_path)] == ["k.html.gz"]
    assert next(read_html_pages(tmp_path))["html"] == "zipped"


def test_missing_directory_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_html_pages(tmp_path / "nope")


def test_listing_then_reading_each_page_equals_read_html_pages(tmp_path, shared_data: Path):
    (tmp_path / "a.html").write_bytes(b"<html><link rel='canonical' href='https://a/'>x</html>")
    (tmp_path / "c.html.gz").write_bytes(b"not gzip at all")
    (tmp_path / "d.html").write_bytes(b"<html>" + b"x" * 200 + b"</html>")
    for folder, cap in ((tmp_path, 100), (shared_data / "recipe_pages", 5 * 1024 * 1024)):
        listed = [item for key, path in list_pages(folder) for item in read_html_page(key, str(path), cap)]
        assert listed == list(read_html_pages(folder, cap))


def test_read_html_page_never_raises(tmp_path):
    missing = read_html_page("gone", tmp_path / "gone.html")
    nul = read_html_page("nul", str(tmp_path / "a\x00b.html"))
    for key, items in (("gone", missing), ("nul", nul)):
        assert len(items) == 1 and isinstance(items[0], Drop)
        assert (items[0].item_id, items[0].reason, items[0].stage) == (key, "page_unreadable", STAGE)


def test_drop_detail_starts_with_the_page_url(tmp_path):
    """A page too large is named by the canonical URL of its first bytes; an unreadable one says the URL is unknown."""
    (tmp_path / "big.html").write_bytes(b"<html><head><link rel='canonical' href='https://big.example/p'></head>"
                                        + b"x" * 200 + b"</html>")
    (tmp_path / "bare.html").write_bytes(b"<html>" + b"x" * 200 + b"</html>")
    (tmp_path / "c.html.gz").write_bytes(b"not gzip at all")
    items = list(read_html_pages(tmp_path, max_bytes=100))
    assert [(d.item_id, d.reason, d.detail) for d in items] == [
        ("bare", "payload_too_large",
         "url unknown (no canonical link or og:url in its first bytes); bare.html: more than 100 bytes"),
        ("big", "payload_too_large", "url https://big.example/p; big.html: more than 100 bytes"),
        ("c", "page_unreadable",
         "url unknown (the page could not be read); c.html.gz: BadGzipFile: Not a gzipped file (b'no')"),
    ]


def test_url_detail_puts_the_url_first_and_cuts_a_long_one():
    assert url_detail("https://a/x", "HTTP status 404") == "url https://a/x; HTTP status 404"
    assert url_detail("https://a/x") == "url https://a/x"
    assert url_detail("", "gone", "no header") == "url unknown (no header); gone"
    long = "https://a/" + "y" * 400
    assert url_detail(long, "d") == f"url {long[:297]}...; d"
