"""Extraction, the first stage of the ``text`` pipeline (Lin et al., ACL 2020, §2.1; docs/corpora/marc.md, Pipeline
step 1): the web pages are listed as cheap pointers (a WARC record's offset, an HTML file), then each page is read and
its Schema.org recipes extracted (JSON-LD with repairs, then microdata).

Drops name the page a user knows: a WARC record keeps its ``WARC-Record-ID`` (a page of ``--pages`` its key) as the
drop's id, the ids of kept rows derive from it, and the detail starts with ``url <the page's URL>``, or says why the
URL is unknown (:func:`builders.sources.html_pages.url_detail`).

Per-item invalidation (README.md "Caching and resume"): a WARC record's pointer row carries the sha256 of the
record's bytes, and a page of ``--pages`` keys its shard of ``read_recipe_pages`` by its content, so editing one page
parses again only the shard holding it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from ...core.atomic import atomic_write_bytes, atomic_write_json
from ...core.checked import read_checked_bytes
from ...core.errors import DamagedCache
from ...core.fingerprint import hash_obj, item_file_sha
from ...core.records import Count, Drop, Out, Row
from ...core.step import Source, Step, input_path
from ...sources.html_pages import list_pages, read_html_page, url_detail
from ...sources.schema_org import read_schema_recipes
from ...sources.warc import find_warc_files, list_warc_file as _list_warc_file, read_warc_record, \
    unreadable_warc_entries

#: a listed page: a WARC record (``kind`` ``warc``: its file, offset and length, its ``WARC-Target-URI`` as ``url``)
#: or an HTML file (``page``: offset -1, ``url`` "": it is known once the page is read)
PAGE_FIELDS: dict[str, Any] = {"page_id": str, "kind": str, "path": str, "offset": int, "length": int,
                               "warc_filename": str, "url": str, "_sha": str}
#: an extracted recipe (``builders.sources.schema_org.records.recipe_rows``), ``steps`` made storable, and ``_key``
#: (``<page_id>#<index in page>``)
EXTRACTED_FIELDS: dict[str, Any] = {
    "page_id": str, "recipe_index_in_page": int, "title": Any, "ingredients": list, "steps": list, "url": Any,
    "page_url": str, "language": Any, "extraction": str, "warc_filename": Any, "warc_record_offset": Any,
    "warc_record_id": Any, "truncated": bool, "_key": str}


def _steps_storable(steps: Any) -> list[dict[str, Any]]:
    out = []
    for s in steps:
        text, section, name = (list(s) + [None, None, None])[:3]
        out.append({"text": str(text or ""), "section": section, "step_name": name})
    return out


@dataclass(eq=False)
class RecipePagesSource(Source):
    """Lists the web pages (docs/corpora/marc.md, Inputs): one cheap pointer per WARC record (file, offset, length;
    warcio reads only headers and skips payloads) and per HTML file of ``pages``; records refused on their headers are
    drops here. Parsing is the next step's, so a killed build resumes inside a long WARC file. ``limit`` keeps the first
    N pages."""

    name = "list_recipe_pages"
    version = "4"
    writes = PAGE_FIELDS
    #: a WARC pointer row carries ``_sha``, the sha256 of the record's bytes; a page row names its file, whose content
    #: keys its shard of ``read_recipe_pages`` (:meth:`ParseRecipePages.item_digest`): the listing is made again
    #: into the same folder when an input changes, and only the shards of changed records or pages are parsed again
    rows_carry_content = True

    warc: list[str] = input_path(default=[])
    pages: Path | None = input_path()
    limit: int | None = None

    def input_paths(self) -> list[Path]:
        """The files the listing reads: the WARC files found under ``warc`` and the page files of ``pages``."""
        paths = [p for p, _ in find_warc_files(self.warc)] if self.warc else []
        if self.pages:  # a listed entry that is no file (a directory, a dangling link) is a drop, not an input
            paths += [p for _, p in list_pages(self.pages) if p.is_file()]
        return paths

    def read(self) -> Iterator[Row | Drop | Count]:
        warc = self._warc_items() if self.warc else iter(())
        pages = ({"page_id": key, "kind": "page", "path": str(path), "offset": -1, "length": -1, "warc_filename": "",
                  "url": "", "_sha": ""} for key, path in (list_pages(self.pages) if self.pages else ()))
        n = 0
        for item in chain(warc, pages):
            if isinstance(item, dict):
                if self.limit is not None and n >= self.limit:
                    yield Count("limit_reached")
                    break
                n += 1
            yield item

    def _warc_items(self) -> Iterator[Row | Drop | Count]:
        """The WARC inputs file by file: a file whose size, mtime and inode are those of its cached listing is not
        read again (its pointer rows and drops come from the listing, checked against its sha256), so a new crawl
        segment lists that file alone (:class:`WarcListings`)."""
        files = find_warc_files(self.warc)
        yield from unreadable_warc_entries(self.warc)
        listings = WarcListings(self.cache_dir)
        for path, name in files:
            yield from listings.items(path, name)


def _pointer_row(x: Row, sha: str) -> Row:
    return {"page_id": x["record_id"], "kind": "warc", "path": x["path"], "offset": int(x["offset"]),
            "length": int(x["length"]), "warc_filename": x["warc_filename"], "url": x["url"], "_sha": sha}


class WarcListings:
    """The listing of each WARC file on its own (docs/corpora/marc.md, "Inputs"): its pointer rows (with the sha256 of
    each record's bytes) and header drops, kept under ``<cache>/warc_listing`` keyed by the file's path, name, size,
    mtime and inode, with the sha256 of the listing (the digest of the file's index) recorded beside it. A listing
    found damaged is made again (counted ``warc_listing_damaged``); without a cache folder every file is listed."""

    VERSION = "1"

    def __init__(self, cache_dir: Path | None):
        self.root = Path(cache_dir) / "warc_listing" if cache_dir is not None else None

    def items(self, path: Path, name: str) -> Iterator[Row | Drop | Count]:
        st = path.stat()
        key = {"path": str(path.resolve()), "given": str(path), "name": name, "size": st.st_size,
               "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "version": self.VERSION}
        stem = hashlib.sha1(f"{key['path']}\0{name}".encode("utf-8", "surrogatepass")).hexdigest()[:24]
        if self.root is not None:
            cached = self._cached(stem, key)
            if isinstance(cached, list):
                yield from cached
                return
            if cached == "damaged":
                yield Count("warc_listing_damaged")
        items = list(self._list(path, name))
        if self.root is not None:
            self._store(stem, key, items)
        yield from items

    @staticmethod
    def _list(path: Path, name: str) -> Iterator[Row | Drop]:
        record_sha = _RecordSha()
        try:
            for x in _list_warc_file(path, name):
                yield (_pointer_row(x, record_sha(x["path"], int(x["offset"]), int(x["length"])))
                       if isinstance(x, dict) else x)
        finally:
            record_sha.close()

    def _cached(self, stem: str, key: dict[str, Any]) -> list[Row | Drop] | str | None:
        try:
            meta = json.loads((self.root / f"{stem}.key.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        try:
            data = json.loads(read_checked_bytes(self.root / f"{stem}.json", meta.get("sha256") or "x"))
        except (OSError, ValueError, DamagedCache):
            return "damaged"
        return [Drop(*x["drop"]) if "drop" in x else x for x in data]

    def _store(self, stem: str, key: dict[str, Any], items: list[Row | Drop]) -> None:
        data = json.dumps([{"drop": [x.item_id, x.stage, x.reason, x.detail]} if isinstance(x, Drop) else x
                           for x in items], ensure_ascii=True).encode("ascii")
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.root / f"{stem}.json", data)
        atomic_write_json(self.root / f"{stem}.key.json", {"key": key, "sha256": hashlib.sha256(data).hexdigest(),
                                                            "records": len(items)})


class _RecordSha:
    """The sha256 of the bytes ``[offset, offset + length)`` of a file (a WARC record, its gzip member for
    ``.warc.gz``), the file kept open from one record to the next (the listing reads them in file order, and has just
    read those bytes: they come from the page cache). A file that cannot be read gives ``!<error>``: the record is then
    a ``warc_corrupt`` drop of the parse step, whose shard is redone when the file is listed again."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.f: Any = None

    def __call__(self, path: str, offset: int, length: int) -> str:
        try:
            if self.path != path:
                self.close()
                self.f, self.path = open(path, "rb"), path
            self.f.seek(offset)
            h = hashlib.sha256()
            left = length
            while left > 0:
                chunk = self.f.read(min(left, 1 << 20))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
            return h.hexdigest()
        except OSError as e:
            self.close()
            return f"!{type(e).__name__}"

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
        self.f = self.path = None


def page_drop_detail(url: str, detail: str) -> str:
    """The detail of a drop of a page's extraction, led by the page's URL (``url <url>; ...``); a page of ``--pages``
    without a canonical link or ``og:url`` (its ``url`` is ``page:<key>``, the drop's id is its key) has none. A detail
    that is the URL alone (``no_schema_recipe``) is not repeated."""
    if url.startswith("page:"):
        return url_detail("", "" if detail == url else detail, "no canonical link or og:url in the page")
    return url_detail(url, "" if detail == url else detail)


@dataclass(eq=False)
class ParseRecipePages(Step):
    """Extraction (Lin et al., ACL 2020, §2.1): reads each listed page (one WARC record by offset, or one HTML file) and
    extracts its Schema.org recipes (JSON-LD with repairs, microdata); a page gives one row per recipe, or a named
    drop (its detail led by the page's URL)."""

    name = "read_recipe_pages"
    version = "3"
    id_field = "page_id"
    parent_field = "page_id"
    fan_out = True
    item_fields = ("page_id", "kind", "path")
    reads = {"page_id": str, "kind": str, "path": str, "offset": int, "length": int, "warc_filename": str,
             "url": str}
    writes = EXTRACTED_FIELDS
    replaces = True

    #: a page of ``--pages`` feeds its own rows: its content keys its shard (a WARC record's is in its row, ``_sha``)
    pages: Path | None = input_path(per_item=True)

    def parent_id(self, item_id: str) -> str:
        return item_id.split("#", 1)[0]

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        shas = []
        for r in rows:
            if r["kind"] != "page":
                continue
            try:
                shas.append((r["page_id"], item_file_sha(r["path"], memo)))
            except OSError as e:  # a folder named like a page: read_html_page drops it, the same way each time
                shas.append((r["page_id"], f"!{type(e).__name__}"))
        return hash_obj(shas) if shas else ""

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            if r["kind"] == "warc":
                items = read_warc_record(r["path"], r["offset"], r["length"], r["warc_filename"], url=r["url"])
            else:
                items = read_html_page(r["page_id"], r["path"])
            # the page's URL, for the extraction's drops (a reader's drop has it in its detail already)
            url = next((str(x.get("url") or "") for x in items if isinstance(x, dict)), None)
            for item in read_schema_recipes(items):
                if isinstance(item, Count):
                    out.count(item.name, item.n)
                elif isinstance(item, Drop):
                    detail = item.detail if url is None else page_drop_detail(url, item.detail)
                    out.drop(item.item_id, item.reason, detail)
                else:
                    out.keep({**item, "steps": _steps_storable(item["steps"]),
                              "_key": f"{item['page_id']}#{item['recipe_index_in_page']}"})
