"""Common Crawl WARC reader: HTML responses as page records (spec ``marc.md`` §2.1, §6).

MARC's text recipes are the Schema.org Recipe pages of Common Crawl (``../shared/papers/002_dcd14287402b909e.txt``
§2.1, A.1.1). Files are read with ``warcio``'s ``ArchiveIterator``: ``*.warc.gz`` (one gzip member per record, the
Common Crawl layout) and plain ``*.warc``, given as files or directories (searched recursively, sorted by path).

Each record becomes a page record of :func:`builders.sources.html_pages.page_record` (``page_id`` = the
``WARC-Record-ID``, ``url`` = ``WARC-Target-URI``, HTML decoded by HTTP charset, else ``<meta charset>``, else UTF-8
with replacement; ``warc_filename`` relative to the input directory, or the file name for a file input;
``warc_record_offset`` = the byte offset of the record, of its gzip member for ``.warc.gz``), or a :class:`Drop`
(spec §6):

- ``warc_not_response``: ``WARC-Type`` other than ``response`` (warcinfo, request, metadata, revisit, ...);
- ``http_status``: HTTP status other than 200, or no HTTP headers;
- ``not_html``: a content type other than ``text/html`` / ``application/xhtml+xml`` (HTTP ``Content-Type``, else
  ``WARC-Identified-Payload-Type``, else the first bytes must look like HTML);
- ``payload_too_large``: more than ``max_payload_bytes`` (5 MB) after HTTP decoding (never read whole);
- ``warc_corrupt``: a record that cannot be parsed, a corrupt gzip member, or unparseable bytes after the last record
  (the rest of that file is skipped; the next file is read).

A record whose payload is shorter than its ``Content-Length`` (the file ends inside it) or that carries a
``WARC-Truncated`` header is kept with ``truncated=True`` and a :class:`Count` ``warc_truncated`` (parsed, flagged).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator

from builders.core.records import Count, Drop, Row
from builders.sources.html_pages import (
    MAX_PAGE_BYTES,
    decode_html,
    http_charset,
    page_record,
)

logger = logging.getLogger(__name__)

STAGE = "read_warc"
WARC_NOT_RESPONSE = "warc_not_response"
HTTP_STATUS = "http_status"
NOT_HTML = "not_html"
PAYLOAD_TOO_LARGE = "payload_too_large"
WARC_TRUNCATED = "warc_truncated"
WARC_CORRUPT = "warc_corrupt"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
WARC_SUFFIXES = (".warc", ".warc.gz")
_SNIFF = (b"<!doctype html", b"<html", b"<head", b"<body", b"<script", b"<meta")


def find_warc_files(paths: str | Path | Iterable[str | Path]) -> list[tuple[Path, str]]:
    """``(path, warc_filename)`` for every input: a file as given (its name), a directory's ``*.warc`` /
    ``*.warc.gz`` files recursively in path order (relative names). Missing paths raise ``FileNotFoundError``."""
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    found: list[tuple[Path, str]] = []
    for item in items:
        path = Path(item)
        if path.is_file():
            found.append((path, path.name))
        elif path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(WARC_SUFFIXES))
            found.extend((p, p.relative_to(path).as_posix()) for p in files)
        else:
            raise FileNotFoundError(f"WARC input not found: {path}")
    return found


def media_type(content_type: str | None) -> str:
    """``text/html`` of ``text/html; charset=UTF-8`` (lower case, parameters removed)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def looks_like_html(head: bytes) -> bool:
    """True when the first bytes (whitespace and a BOM skipped) start with a typical HTML tag."""
    start = head[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return start.startswith(_SNIFF)


def _read_capped(stream: BinaryIO, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``stream`` (enough to tell that it is longer than ``limit``)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(1 << 16, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _record_id(record: Any, warc_filename: str, offset: int | None) -> str:
    rid = record.rec_headers.get_header("WARC-Record-ID") if record is not None else None
    return rid or f"{warc_filename}@{offset if offset is not None else '?'}"


def _unread_bytes(record: Any) -> int:
    """Bytes of the record's declared ``Content-Length`` that the file did not hold (> 0: truncated record)."""
    limit = getattr(record.raw_stream, "limit", 0)
    return int(limit) if isinstance(limit, int) and limit > 0 else 0


def _classify(record: Any) -> tuple[str, str] | None:
    """``(reason, detail)`` of a record that is not an HTML 200 response, else ``None``."""
    rec_type = record.rec_type
    if rec_type != "response":
        return WARC_NOT_RESPONSE, f"WARC-Type {rec_type}"
    http = record.http_headers
    if http is None:
        return HTTP_STATUS, "no HTTP headers"
    status = http.get_statuscode()
    if status != "200":
        return HTTP_STATUS, f"HTTP status {status}"
    ctype = media_type(http.get_header("Content-Type")) or media_type(
        record.rec_headers.get_header("WARC-Identified-Payload-Type"))
    if ctype and ctype not in HTML_TYPES:
        return NOT_HTML, f"content type {ctype}"
    return None


def _tail_is_clean(path: Path, end: int, gz: bool) -> bool:
    """True when nothing but blank bytes follows the last parsed record (``end`` = its end offset)."""
    try:
        size = path.stat().st_size
        if size <= end:
            return True
        if gz:
            return False
        with open(path, "rb") as f:
            f.seek(end)
            return not f.read(4096).strip()
    except OSError:
        return False


def _records(path: Path, warc_filename: str, max_payload_bytes: int) -> Iterator[Row | Drop | Count]:
    """The page records / drops / counts of one WARC file (see the module docstring)."""
    record = None
    end = 0  # end offset of the last record read: where a failing record starts
    is_gz = False
    try:
        with open(path, "rb") as f:
            is_gz = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            iterator = ArchiveIterator(f)
            for record in iterator:
                out = _process(record, iterator, warc_filename, max_payload_bytes)
                offset = iterator.get_record_offset()
                end = offset + iterator.get_record_length()
                yield from out(offset)
                record = None
    except Exception as err:  # noqa: BLE001 - warcio and zlib raise many kinds on bad bytes; one file never stops a build
        message = str(err).strip()[:160].encode("ascii", "backslashreplace").decode("ascii")
        detail = f"{warc_filename}: {type(err).__name__}: {message}; rest of the file skipped"
        item_id = _record_id(record, warc_filename, end) if record is not None else f"{warc_filename}@{end}"
        yield Drop(item_id, STAGE, WARC_CORRUPT, detail)
        return
    if not _tail_is_clean(path, end, is_gz):
        yield Drop(f"{warc_filename}@{end}", STAGE, WARC_CORRUPT,
                   f"{warc_filename}: unparseable bytes after offset {end} (record cut inside its headers?)")


def _process(record: Any, iterator: ArchiveIterator, warc_filename: str, max_payload_bytes: int):
    """Read one record's payload (capped) and return a function of its offset giving the items to yield.

    The payload must be read before the offset is known (warcio computes it when the record is consumed).
    """
    skip = _classify(record)
    payload = b""
    if skip is None:
        payload = _read_capped(record.content_stream(), max_payload_bytes)
    iterator.read_to_end()
    unread = _unread_bytes(record)
    flagged = unread > 0 or record.rec_headers.get_header("WARC-Truncated") is not None

    def items(offset: int) -> Iterator[Row | Drop | Count]:
        rid = _record_id(record, warc_filename, offset)
        if skip is not None:
            yield Drop(rid, STAGE, skip[0], skip[1])
            return
        if len(payload) > max_payload_bytes:
            yield Drop(rid, STAGE, PAYLOAD_TOO_LARGE, f"payload above {max_payload_bytes} bytes")
            return
        http = record.http_headers
        if not media_type(http.get_header("Content-Type")) and not media_type(
                record.rec_headers.get_header("WARC-Identified-Payload-Type")) and not looks_like_html(payload):
            yield Drop(rid, STAGE, NOT_HTML, "no content type and the payload does not look like HTML")
            return
        if flagged:
            why = f"{unread} bytes missing" if unread else "WARC-Truncated " + str(
                record.rec_headers.get_header("WARC-Truncated"))
            logger.debug("truncated WARC record %s in %s: %s", rid, warc_filename, why)
            yield Count(WARC_TRUNCATED)
        html, charset = decode_html(payload, http_charset(http.get_header("Content-Type")))
        url = record.rec_headers.get_header("WARC-Target-URI") or ""
        yield page_record(rid, url, html, charset, source_path=warc_filename, warc_filename=warc_filename,
                          warc_record_offset=offset, warc_record_id=rid, truncated=flagged)

    return items


def read_warc(paths: str | Path | Iterable[str | Path],
              max_payload_bytes: int = MAX_PAGE_BYTES) -> Iterator[Row | Drop | Count]:
    """Stream WARC files (files or directories) as page records, drops and ``warc_truncated`` counts (spec §2.1, §6).

    Raises ``FileNotFoundError`` at call time for a missing input; never raises on bad bytes.
    """
    files = find_warc_files(paths)
    return (item for path, name in files for item in _records(path, name, max_payload_bytes))
