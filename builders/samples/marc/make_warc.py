"""Write ``recipes.warc.gz``, the bundled sample WARC of the ``marc`` builder, from ``pages/*.html``.

Usage (from anywhere)::

    python builders/samples/marc/make_warc.py            # rewrites builders/samples/marc/recipes.warc.gz
    python builders/samples/marc/make_warc.py --out X    # writes X instead

The output is deterministic: the same pages give the same bytes on every run and machine (with a classic zlib).
Every WARC-Date is fixed in the table below, every ``WARC-Record-ID`` is a UUID derived from the SHA-1 of the record's
URL (``uuid5``, with the record type and crawl number so the page crawled twice gets two ids), each record is its own
gzip member (the Common Crawl layout) written by ``warcio``'s ``WARCWriter(gzip=True)`` and then normalised (gzip
MTIME 0, OS byte 255), so no clock, random number or platform code ends up in the file.

All pages and all URLs are made up (``*.example`` domains); see README.md. Licence: CC0-1.0.
"""

from __future__ import annotations

import argparse
import io
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

HERE = Path(__file__).resolve().parent
PAGES = HERE / "pages"
OUTPUT = HERE / "recipes.warc.gz"
WARC_FILENAME = "recipes.warc.gz"
CRAWL_START = datetime(2024, 2, 20, 9, 30, 0, tzinfo=UTC)

#: (page file in pages/ or a special record kind, URL, seconds after CRAWL_START), in WARC order.
#: Special kinds: "@request" (a request record), "@404" (an HTTP 404 response), "@jpeg" (an image/jpeg response).
RECORDS: list[tuple[str, str, int]] = [
    ("@request", "https://crumbandhearth.example/banana-bread/", 0),
    ("banana_bread_graph.html", "https://crumbandhearth.example/banana-bread/", 1),
    ("@jpeg", "https://crumbandhearth.example/wp-content/uploads/2021/03/banana-bread-1.jpg", 2),
    ("how_to_ripen_bananas.html", "https://crumbandhearth.example/how-to-ripen-bananas/", 14),
    ("pancakes_sections.html", "https://griddleandgrain.example/buttermilk-pancakes/", 61),
    ("guacamole_string_list.html", "https://limeandsalt.example/guacamole/", 95),
    ("banana_bread_escape.html", "https://weeknightbakes.example/one-bowl-banana-bread", 133),
    ("cookies_br_string.html", "https://cookiejarjournal.example/chocolate-chip-cookies", 170),
    ("banana_bread_lowercase.html", "https://ovenmitts.example/classic-banana-bread", 212),
    ("guacamole_microdata.html", "https://casitakitchen.example/guacamole", 248),
    ("@404", "https://ovenmitts.example/banana-bread-muffins", 251),
    ("pancakes_main_entity.html", "https://saturdaystack.example/fluffy-buttermilk-pancakes", 290),
    ("bananenbrot_de.html", "https://backstube.example/saftiges-bananenbrot", 331),
    ("cookies_trailing_comma.html", "https://bakeandbrown.example/chocolate-chip-cookies/", 367),
    ("banana_bread_sections.html", "https://sundaycrumbs.example/banana-bread", 402),
    ("guacamole_relative_url.html", "https://tacotuesday.example/easy-guacamole/", 446),
    ("banana_pancakes_little_bites.html", "https://littlebites.example/banana-pancakes", 480),
    ("pancakes_two_recipes.html", "https://mapleporch.example/buttermilk-pancakes/", 517),
    ("lemon_bars_no_instructions.html", "https://sunnyslice.example/lemon-bars/", 553),
    ("cookies_cdata.html", "https://milkanddunk.example/chewy-chocolate-chip-cookies", 590),
    ("banana_bread_long_title.html", "https://kitchenwhisper.example/best-moist-banana-bread/", 628),
    ("guacamole_ingredient_string.html", "https://avocadoalley.example/guacamole", 663),
    ("banana_bread_plain_string.html", "https://pantrynotes.example/easy-banana-bread", 701),
    ("pancakes_html_string.html", "https://flapjackdiaries.example/buttermilk-pancakes-for-two", 742),
    ("guacamole_one_step.html", "https://quickbowl.example/2-minute-guacamole", 779),
    ("banana_pancakes_green_apron.html", "https://greenapron.example/banana-pancakes/", 815),
    ("cookies_step_names.html", "https://brownbutterbakery.example/chocolate-chip-cookies", 856),
    ("smoky_chipotle_guacamole.html", "https://firepitfeasts.example/smoky-chipotle-guacamole/", 893),
    # the same page crawled again three days later: same URL, same recipe -> duplicate_recipe
    ("banana_bread_escape.html", "https://weeknightbakes.example/one-bowl-banana-bread", 3 * 86400 + 57),
]

#: 404 body and a tiny made-up JPEG-looking payload (not a real image)
NOT_FOUND_BODY = (b"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Page not found | Oven Mitts"
                  b"</title></head>\n<body><h1>Oops! That page can't be found.</h1><p>Try the <a href=\"/recipes\">"
                  b"recipe index</a> instead.</p></body></html>\n")
JPEG_BODY = (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x01\x00H\x00H\x00\x00"
             b"\xff\xdb\x00C\x00" + bytes(range(1, 65)) + b"\xff\xd9")


def _date(seconds: int) -> str:
    return (CRAWL_START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record_id(kind: str, url: str, crawl: int) -> str:
    """``<urn:uuid:...>`` from the SHA-1 of the URL (uuid5), the record type and the crawl number."""
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'{kind} {crawl} {url}')}>"


def _ip(url: str) -> str:
    """A made-up documentation address (192.0.2.0/24, RFC 5737) per host."""
    host = url.split("/")[2]
    return f"192.0.2.{uuid.uuid5(uuid.NAMESPACE_DNS, host).int % 250 + 1}"


def _http(status: str, content_type: str, body: bytes, seconds: int) -> StatusAndHeaders:
    http_date = (CRAWL_START + timedelta(seconds=seconds)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers = [("Date", http_date), ("Server", "nginx"), ("Content-Type", content_type),
               ("Content-Length", str(len(body))), ("Cache-Control", "max-age=600"), ("Connection", "close")]
    return StatusAndHeaders(status, headers, protocol="HTTP/1.1")


def _normalise_member(member: bytes) -> bytes:
    """Set the gzip header's MTIME to 0 and OS to 255 (unknown), so the bytes do not depend on the platform."""
    assert member[:3] == b"\x1f\x8b\x08", "not a gzip member"
    flags = member[3]
    assert flags == 0, "unexpected gzip header flags"
    return member[:4] + b"\x00\x00\x00\x00" + member[8:9] + b"\xff" + member[10:]


def _build_records(writer: WARCWriter) -> list:
    records = []
    info = (b"software: builders/samples/marc/make_warc.py (warcio)\r\n"
            b"format: WARC File Format 1.0\r\n"
            b"description: hand-written sample pages for the marc corpus builder (CC0-1.0, not Common Crawl data)\r\n"
            b"isPartOf: MARC-SAMPLE-2024-08\r\n")
    records.append(writer.create_warc_record("", "warcinfo", payload=io.BytesIO(info), length=len(info),
                                             warc_headers_dict={
                                                 "WARC-Date": _date(-1), "WARC-Filename": WARC_FILENAME,
                                                 "WARC-Record-ID": _record_id("warcinfo", WARC_FILENAME, 0),
                                                 "Content-Type": "application/warc-fields"}))
    crawls: dict[tuple[str, str], int] = {}
    for kind, url, seconds in RECORDS:
        crawl = crawls.get((kind, url), 0)
        crawls[(kind, url)] = crawl + 1
        warc_headers = {"WARC-Date": _date(seconds), "WARC-IP-Address": _ip(url)}
        if kind == "@request":
            path = "/" + url.split("/", 3)[3]
            host = url.split("/")[2]
            req = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sample-crawler/1.0 (made up)\r\n"
                   "Accept: text/html,application/xhtml+xml\r\nAccept-Language: en-US,en;q=0.5\r\n\r\n").encode()
            warc_headers["WARC-Record-ID"] = _record_id("request", url, crawl)
            warc_headers["Content-Type"] = "application/http; msgtype=request"
            records.append(writer.create_warc_record(url, "request", payload=io.BytesIO(req), length=len(req),
                                                     warc_headers_dict=warc_headers))
            continue
        if kind == "@404":
            status, ctype, body = "404 Not Found", "text/html; charset=utf-8", NOT_FOUND_BODY
        elif kind == "@jpeg":
            status, ctype, body = "200 OK", "image/jpeg", JPEG_BODY
        else:
            status, ctype, body = "200 OK", "text/html; charset=utf-8", (PAGES / kind).read_bytes()
        warc_headers["WARC-Record-ID"] = _record_id("response", url, crawl)
        warc_headers["WARC-Identified-Payload-Type"] = ctype.split(";")[0]
        records.append(writer.create_warc_record(url, "response", payload=io.BytesIO(body), length=len(body),
                                                 http_headers=_http(status, ctype, body, seconds),
                                                 warc_headers_dict=warc_headers))
    return records


def make_warc(out: Path = OUTPUT) -> Path:
    """Write the sample WARC to ``out`` (one normalised gzip member per record) and return ``out``."""
    factory = WARCWriter(io.BytesIO(), gzip=True, warc_version="1.0")
    members = []
    for record in _build_records(factory):
        buf = io.BytesIO()
        WARCWriter(buf, gzip=True, warc_version="1.0").write_record(record)
        members.append(_normalise_member(buf.getvalue()))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"".join(members))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUTPUT, help=f"output file (default {OUTPUT})")
    args = parser.parse_args(argv)
    path = make_warc(args.out)
    print(f"wrote {path} ({path.stat().st_size} bytes, {len(RECORDS) + 1} records)")


if __name__ == "__main__":
    main()
