"""A MARC drop names its page as a user knows it: a WARC record keeps its ``WARC-Record-ID`` as the drop's id, a page
of ``--pages`` its key and a dropped recipe its ``t:<sha1(url)[:16]>`` id (ids of kept rows derive from them), and
the detail starts with ``url <the page's URL>``, or says why the URL is unknown (docs/reason-codes.md).

The inputs are written here: a plain WARC file (a recipe page, a 404 page, a page cut by the end of the file), a
``.warc.gz`` whose only gzip member is corrupt, and a folder of pages (a plain page with and without a canonical link,
a recipe without instructions, a broken gzip file, three Banana Bread recipes, a German recipe and a one-step one)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from builders.build import main
from builders.core.records import Drop, Out
from builders.corpora.marc.extraction import ParseRecipePages, RecipePagesSource
from builders.corpora.marc.text import select_text_recipes

STEPS = ["Preheat the oven to 350 degrees and grease a loaf pan with butter.",
         "Mash the bananas in a large bowl and stir in the melted butter.",
         "Mix in the sugar, the egg and the flour until just combined.",
         "Pour the batter into the pan and bake for one hour."]
GERMAN = ["Den Ofen auf 180 Grad vorheizen und eine Kastenform einfetten.",
          "Die Bananen zerdrücken und mit der geschmolzenen Butter verrühren.",
          "Zucker, Ei und Mehl unterrühren und eine Stunde backen."]
RECORD = "<urn:uuid:00000000-0000-4000-8000-00000000000{}>"
CUT_BYTES = 2000  # cut from the end of a.warc: its last record's "\r\n\r\n" and 1,996 bytes of its payload

#: every drop of the inputs below: item id -> (reason, detail, or its start when the detail ends in "...")
EXPECTED = {
    RECORD.format(2): ("http_status", "url https://gone.example/missing; HTTP status 404"),
    RECORD.format(3): ("warc_truncated", "url https://cut.example/long-page; a.warc: 1996 bytes of the record's "
                       "Content-Length are missing (the file ends inside it, or its Content-Length is too large)"),
    "b.warc.gz@0": ("warc_corrupt", "url unknown (the record's headers could not be read); b.warc.gz: ..."),
    "ripen": ("no_schema_recipe", "url https://plain.example/how-to-ripen-bananas"),
    "nocanon": ("no_schema_recipe", "url unknown (no canonical link or og:url in the page)"),
    "lemon#0": ("no_instructions", "url https://plain.example/lemon-bars; Lemon Bars"),
    "bad": ("page_unreadable", "url unknown (the page could not be read); bad.html.gz: BadGzipFile: ..."),
    # recipe selection: t: + the first 16 hex digits of the sha1 of the URL
    "t:1a794f86a293b807": ("non_english", "url https://de.example/bananenbrot; de: Bananenbrot"),
    "t:238195578e16dbe9": ("too_few_steps", "url https://quick.example/banana-bread; 1 instructions: Banana Bread"),
}
KEPT_URLS = ["https://b.example/banana-bread", "https://c.example/banana-bread", "https://www.example.com/banana-bread"]


def _recipe_page(url: str | None, name: str, steps: list[str], lang: str = "en") -> str:
    node = {"@context": "https://schema.org", "@type": "Recipe", "name": name,
            "recipeIngredient": ["3 bananas", "1 cup flour"],
            "recipeInstructions": [{"@type": "HowToStep", "text": s} for s in steps]}
    link = f'<link rel="canonical" href="{url}">' if url else ""
    return (f'<html lang="{lang}"><head>{link}<script type="application/ld+json">{json.dumps(node)}</script>'
            f"</head><body><h1>{name}</h1></body></html>")


def _response(writer: WARCWriter, k: int, url: str, body: str, status: str = "200 OK"):
    http = StatusAndHeaders(status, [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
    return writer.create_warc_record(url, "response", payload=io.BytesIO(body.encode("utf-8")), http_headers=http,
                                     warc_headers_dict={"WARC-Record-ID": RECORD.format(k)})


def _inputs(root: Path) -> tuple[Path, Path]:
    crawl, pages = root / "crawl", root / "pages"
    crawl.mkdir()
    pages.mkdir()
    with open(crawl / "a.warc", "wb") as f:
        w = WARCWriter(f, gzip=False)
        url = "https://www.example.com/banana-bread"
        w.write_record(_response(w, 1, url, _recipe_page(url, "Banana Bread", STEPS)))
        w.write_record(_response(w, 2, "https://gone.example/missing", "<html>gone</html>", "404 Not Found"))
        url = "https://cut.example/long-page"
        w.write_record(_response(w, 3, url, _recipe_page(url, "Banana Bread", STEPS * 50)))
    data = (crawl / "a.warc").read_bytes()
    (crawl / "a.warc").write_bytes(data[:-CUT_BYTES])
    with open(crawl / "b.warc.gz", "wb") as f:
        w = WARCWriter(f, gzip=True)
        w.write_record(_response(w, 4, "https://lost.example/page", _recipe_page(None, "Banana Bread", STEPS)))
    data = bytearray((crawl / "b.warc.gz").read_bytes())
    for i in range(12, 60):  # inside the deflate stream of the only member, before the end of its headers
        data[i] ^= 0x5A
    (crawl / "b.warc.gz").write_bytes(bytes(data))

    (pages / "ripen.html").write_text('<html><head><link rel="canonical" href="https://plain.example/how-to-ripen-'
                                      'bananas"></head><body>Put them in a paper bag.</body></html>')
    (pages / "nocanon.html").write_text("<html><body>No recipe and no URL here.</body></html>")
    (pages / "lemon.html").write_text(_recipe_page("https://plain.example/lemon-bars", "Lemon Bars", []))
    (pages / "bad.html.gz").write_bytes(b"not gzip at all")
    for key, minutes in (("b", 55), ("c", 50)):
        (pages / f"{key}2.html").write_text(_recipe_page(
            f"https://{key}.example/banana-bread", "Banana Bread", [s.replace("one hour", f"{minutes} minutes")
                                                                    for s in STEPS]))
    (pages / "quick.html").write_text(_recipe_page("https://quick.example/banana-bread", "Banana Bread",
                                                   ["Mix everything together and bake it for an hour."]))
    (pages / "kuchen.html").write_text(_recipe_page("https://de.example/bananenbrot", "Bananenbrot", GERMAN, "de"))
    return crawl, pages


def _check(drops: dict[str, tuple[str, str]]) -> None:
    assert set(drops) == set(EXPECTED)
    for item_id, (reason, detail) in EXPECTED.items():
        got_reason, got_detail = drops[item_id]
        assert got_reason == reason, item_id
        if detail.endswith("..."):
            assert got_detail.startswith(detail[:-3]), (item_id, got_detail)
        else:
            assert got_detail == detail, item_id


def test_every_lost_or_dropped_page_is_named_by_its_url(tmp_path):
    crawl, pages = _inputs(tmp_path)
    listed = list(RecipePagesSource(warc=[str(crawl)], pages=pages).read())
    rows = [x for x in listed if isinstance(x, dict)]
    assert [(r["page_id"], r["url"]) for r in rows if r["kind"] == "warc"] == [
        (RECORD.format(1), "https://www.example.com/banana-bread"), (RECORD.format(3), "https://cut.example/long-page")]
    out = Out("read_recipe_pages")
    ParseRecipePages(pages=pages).process(rows, out)
    selected = select_text_recipes(out.rows)
    assert sorted(r["url"] for r in selected.rows) == KEPT_URLS
    drops = [x for x in listed if isinstance(x, Drop)] + out.drops + selected.drops
    _check({d.item_id: (d.reason, d.detail) for d in drops})


@pytest.mark.slow
def test_the_release_drops_name_each_page_by_its_url(tmp_path):
    crawl, pages = _inputs(tmp_path)
    assert main(["marc", "--out", str(tmp_path / "out"), "--no-progress", "-q", f"--warc={crawl}",
                 f"--pages={pages}"]) == 0
    table = pq.read_table(tmp_path / "out" / "marc" / "drops.parquet").to_pylist()
    _check({d["item_id"]: (d["reason"], d["detail"]) for d in table})
    released = [r for p in (tmp_path / "out" / "marc" / "recipes").glob("*.parquet")
                for r in pq.read_table(p).to_pylist()]
    assert sorted(r["url"] for r in released if r["modality"] == 0) == KEPT_URLS  # 0: text
