"""Web pages as *page records*: byte decoding shared with the WARC reader, and a reader of a directory of
``<key>.html`` / ``<key>.html.gz`` files (docs/corpora/marc.md; the ``recipe_pages/`` fixture of tests/fixtures.json).

A page record is the input of the Schema.org Recipe extraction (:mod:`builders.sources.schema_org`),
the same shape whichever reader made it::

    {"page_id": str, "url": str, "html": str, "charset": str, "truncated": bool, "source_path": str,
     "warc_filename": str, "warc_record_offset": int, "warc_record_id": str}

For a directory of pages ``page_id`` is the key, ``warc_filename`` is ``""``, ``warc_record_offset`` is ``-1`` and
``warc_record_id`` is ``""``; ``url`` is the page's ``<link rel="canonical">``, else its ``og:url``, else
``page:<key>`` (deterministic, so that ids hashed from it do not depend on the machine).

Charset: a byte-order mark, else the HTTP ``Content-Type`` charset (WARC only), else ``<meta charset>`` /
``<meta http-equiv="Content-Type" content="...; charset=...">`` in the first 8 KiB, else UTF-8; always decoded with
replacement characters, never an exception. Labels are mapped as browsers do (WHATWG Encoding): ``iso-8859-1``,
``latin1`` and ``ascii`` mean windows-1252, a ``<meta>`` that declares UTF-16 on an ASCII-compatible page means UTF-8.
"""

from __future__ import annotations

import codecs
import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from builders.core.records import Count, Drop, Row

STAGE = "read_html_pages"
MAX_PAGE_BYTES = 5 * 1024 * 1024  # docs/reason-codes.md: a payload above 5 MB is dropped as ``payload_too_large``
PAYLOAD_TOO_LARGE = "payload_too_large"
PAGE_UNREADABLE = "page_unreadable"  # a file that cannot be read or un-gzipped (this reader only)
META_SNIFF_BYTES = 8192
URL_SNIFF_CHARS = 512 * 1024

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_META_CHARSET_RE = re.compile(rb"<meta\b[^>]*?\bcharset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]{1,40})", re.IGNORECASE)
_HTTP_CHARSET_RE = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]{1,40})", re.IGNORECASE)
_WINDOWS_1252_ALIASES = frozenset({"iso-8859-1", "iso8859-1", "latin-1", "latin1", "l1", "ascii", "us-ascii",
                                   "iso_8859-1", "cp819", "ibm819"})
_TAG_RE = re.compile(r"<(link|meta)\b([^>]*)>", re.IGNORECASE)
_ATTR_RE = re.compile(r"""([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+)""")
_KEY_SUFFIXES = (".html.gz", ".html")
#: the longest URL a drop's detail shows (a longer one is cut and ends in "..."): the detail holds 500 characters
MAX_DETAIL_URL_CHARS = 300


def codec_for(label: str | None) -> str | None:
    """The Python codec of an encoding label, or ``None`` when the label is unknown (WHATWG aliases applied)."""
    if not label:
        return None
    low = label.strip().strip("\"'").lower()
    if low in _WINDOWS_1252_ALIASES:
        return "cp1252"
    try:
        return codecs.lookup(low).name
    except LookupError:
        return None


def http_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of an HTTP ``Content-Type`` value, or ``None``."""
    if not content_type:
        return None
    match = _HTTP_CHARSET_RE.search(content_type)
    return match.group(1) if match else None


def meta_charset(body: bytes) -> str | None:
    """The charset declared by a ``<meta>`` element in the first 8 KiB of ``body``, or ``None``."""
    match = _META_CHARSET_RE.search(body[:META_SNIFF_BYTES])
    return match.group(1).decode("ascii", "replace") if match else None


def decode_html(body: bytes, declared_charset: str | None = None) -> tuple[str, str]:
    """``(text, codec)``: ``body`` decoded by BOM, else the HTTP charset, else ``<meta charset>``, else UTF-8
    (docs/corpora/marc.md), with replacement characters for undecodable bytes."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(name, errors="replace"), name
    codec = codec_for(declared_charset)
    if codec is None:
        codec = codec_for(meta_charset(body))
        if codec is not None and codec.startswith("utf-16"):
            codec = "utf-8"  # a <meta> read as ASCII cannot be right about UTF-16
    if codec is None:
        codec = "utf-8"
    try:
        return body.decode(codec, errors="replace"), codec
    except (LookupError, TypeError):  # a codec that is not a text encoding (e.g. "rot13" via an alias)
        return body.decode("utf-8", errors="replace"), "utf-8"


def _attrs(text: str) -> dict[str, str]:
    return {k.lower(): v.strip("\"'") for k, v in _ATTR_RE.findall(text)}


def page_url(html: str) -> str | None:
    """The page's canonical URL: ``<link rel="canonical" href>``, else ``<meta property="og:url" content>``."""
    og = None
    for match in _TAG_RE.finditer(html[:URL_SNIFF_CHARS]):
        tag, attrs = match.group(1).lower(), _attrs(match.group(2))
        if tag == "link" and "canonical" in attrs.get("rel", "").lower().split() and attrs.get("href", "").strip():
            return attrs["href"].strip()
        if tag == "meta" and og is None and attrs.get("property", "").lower() == "og:url":
            og = attrs.get("content", "").strip() or None
    return og


def url_detail(url: str | None, detail: str = "", unknown: str = "") -> str:
    """A drop's ``detail`` that names the page by the URL a user knows (drops.parquet, docs/reason-codes.md):
    ``url <url>; <detail>``, or ``url unknown (<unknown>); <detail>`` when there is no URL. The URL comes first so
    that the 500-character cut of a detail never hides it; one over 300 characters is cut and ends in ``...``."""
    if url:
        shown = url if len(url) <= MAX_DETAIL_URL_CHARS else url[:MAX_DETAIL_URL_CHARS - 3] + "..."
        head = f"url {shown}"
    else:
        head = f"url unknown ({unknown or 'not known'})"
    return f"{head}; {detail}" if detail else head


def page_record(page_id: str, url: str, html: str, charset: str, *, source_path: str = "", warc_filename: str = "",
                warc_record_offset: int = -1, warc_record_id: str = "", truncated: bool = False) -> Row:
    """One page record (the shape of the module docstring)."""
    return {"page_id": page_id, "url": url, "html": html, "charset": charset, "truncated": truncated,
            "source_path": source_path, "warc_filename": warc_filename, "warc_record_offset": warc_record_offset,
            "warc_record_id": warc_record_id}


def page_key(path: Path) -> str | None:
    """``<key>`` of ``<key>.html`` / ``<key>.html.gz``; ``None`` for other files (e.g. ``<key>.expected.json``)."""
    name = path.name
    for suffix in _KEY_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def list_pages(directory: str | Path) -> list[tuple[str, Path]]:
    """``(key, path)`` of the pages of ``directory`` (not recursive), sorted by key; ``.html.gz`` before ``.html``
    when both exist for one key (the second is ignored). An entry named like a page that is not a readable file (a
    directory, a dangling symlink) is listed too, unless a real file has its key: reading it gives a named
    ``page_unreadable`` drop, so it is counted, never skipped silently (issue 14)."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"pages directory not found: {root}")
    found: dict[str, Path] = {}
    for path in sorted(root.iterdir()):
        key = page_key(path)
        if key is None:
            continue
        old = found.get(key)
        rank = (path.is_file(), path.name.endswith(".gz"))
        if old is None or rank > (old.is_file(), old.name.endswith(".gz")):
            found[key] = path
    return sorted(found.items())


def read_page_bytes(path: Path, max_bytes: int = MAX_PAGE_BYTES) -> bytes:
    """At most ``max_bytes + 1`` bytes of a page file, un-gzipped when its name ends in ``.gz``.

    Raises ``OSError`` / ``EOFError`` / ``zlib.error`` for unreadable or broken files, and
    :class:`~builders.sources.safe_open.NotRegularFile` (an ``OSError``) for a FIFO, a device or a directory.
    """
    from .safe_open import open_input

    with open_input(path, max_bytes=None, what="page") as raw:  # a FIFO or a device: refused unread, never a hang
        if not path.name.endswith(".gz"):
            return raw.read(max_bytes + 1)
        with gzip.GzipFile(fileobj=raw, mode="rb") as f:  # the decoded bytes are capped: a gzip bomb reads max + 1
            return f.read(max_bytes + 1)


def read_page(key: str, path: str | Path, max_bytes: int = MAX_PAGE_BYTES) -> Row | Drop:
    """One page record, or a drop ``payload_too_large`` / ``page_unreadable`` under the page's key, its detail led
    by the page's URL (:func:`url_detail`: read from the first bytes of a page too large; unknown for an unreadable
    one)."""
    path = Path(path)
    try:
        body = read_page_bytes(path, max_bytes)
    except (OSError, EOFError, zlib.error, ValueError) as err:  # ValueError: a path with a NUL byte
        return Drop(key, STAGE, PAGE_UNREADABLE,
                    url_detail("", f"{path.name}: {type(err).__name__}: {err}", "the page could not be read"))
    if len(body) > max_bytes:
        head, _ = decode_html(body[:4 * URL_SNIFF_CHARS])  # the canonical link is near the top
        detail = url_detail(page_url(head), f"{path.name}: more than {max_bytes} bytes",
                            "no canonical link or og:url in its first bytes")
        return Drop(key, STAGE, PAYLOAD_TOO_LARGE, detail)
    html, charset = decode_html(body)
    return page_record(key, page_url(html) or f"page:{key}", html, charset, source_path=str(path))


def read_html_page(key: str, path: str | Path, max_bytes: int = MAX_PAGE_BYTES) -> list[Row | Drop | Count]:
    """The items of one listed page (``(key, path)`` of :func:`list_pages`, the path as a ``Path`` or a ``str``):
    ``[page record]`` or ``[Drop]`` (``payload_too_large`` / ``page_unreadable``; never an exception on bad bytes or
    a missing file). The per-item read of :func:`read_html_pages`, for a step that reads pages one by one."""
    return [read_page(key, path, max_bytes)]


def read_html_pages(directory: str | Path, max_bytes: int = MAX_PAGE_BYTES) -> Iterator[Row | Drop]:
    """Stream the pages of a directory of ``<key>.html`` / ``<key>.html.gz`` files as page records or drops:
    :func:`list_pages` (the cheap listing), then :func:`read_html_page` of each.

    Other files are ignored. Raises ``FileNotFoundError`` at call time when the directory does not exist.
    """
    pages = list_pages(directory)
    return (item for key, path in pages for item in read_html_page(key, path, max_bytes))

