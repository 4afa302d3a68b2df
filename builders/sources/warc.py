"""Common Crawl WARC reader: HTML responses as page records (docs/corpora/marc.md).

MARC's text recipes are the Schema.org Recipe pages of Common Crawl (Lin et al., ACL 2020,
§2.1, A.1.1). Files are read with ``warcio``'s ``ArchiveIterator``: ``*.warc.gz`` (one gzip member per record, the
Common Crawl layout) and plain ``*.warc``, given as files or directories (searched recursively, sorted by path).

Each record becomes a page record of :func:`builders.sources.html_pages.page_record` (``page_id`` = the
``WARC-Record-ID``, ``url`` = ``WARC-Target-URI``, HTML decoded by HTTP charset, else ``<meta charset>``, else UTF-8
with replacement; ``warc_filename`` relative to the input directory, or the file name for a file input;
``warc_record_offset`` = the byte offset of the record, of its gzip member for ``.warc.gz``), or a :class:`Drop`
(docs/reason-codes.md):

- ``warc_not_response``: ``WARC-Type`` other than ``response`` (warcinfo, request, metadata, revisit, ...);
- ``http_status``: HTTP status other than 200, or no HTTP headers;
- ``not_html``: a content type other than ``text/html`` / ``application/xhtml+xml`` (HTTP ``Content-Type``, else
  ``WARC-Identified-Payload-Type``, else the first bytes must look like HTML);
- ``payload_too_large``: more than ``max_payload_bytes`` (5 MB) after HTTP decoding (never read whole);
- ``warc_corrupt``: a record that cannot be parsed, a corrupt gzip member, or unparseable bytes after the last record
  (the rest of that file is skipped; the next file is read).

A drop's id is the ``WARC-Record-ID`` (``<warc_filename>@<offset>`` when there is none); its detail starts with
``url <WARC-Target-URI>``, the page a user knows, or ``url unknown (<why>)`` when the header is missing or the
record's headers cannot be read.

A record whose payload is shorter than its ``Content-Length`` (the file ends inside it) is a ``warc_truncated`` drop
(its HTML, JSON-LD included, may be cut anywhere); one that carries a ``WARC-Truncated`` header (the crawler cut the
body and said so) is kept with ``truncated=True`` and a :class:`Count` ``warc_truncated`` (parsed, flagged). In a
plain ``.warc``, a record whose ``Content-Length`` runs into the next record is ``warc_corrupt`` and reading resumes
at the next record's header (after bad bytes too); in a ``.warc.gz`` each gzip member is one record.

Reading is split in two so that a build can resume inside a long WARC file: :func:`list_warc_records` is a cheap
listing (headers only; each record is read through to find its end but its payload is never kept) that yields the
header drops above, ``warc_corrupt``, and a small *pointer row* per record that needs its payload::

    {"record_id": str, "warc_filename": str, "path": str, "offset": int, "length": int, "url": str}

and :func:`read_warc_record` reads the one record of a pointer (seek, then one gzip member / one plain record) into
what :func:`read_warc` yields for it. :func:`read_warc` is exactly the listing with every pointer replaced by its read.
A corrupt record found by :func:`read_warc_record` alone (bad HTTP ``Content-Encoding``, a file changed since it was
listed) is a ``warc_corrupt`` drop of that record only.
"""

from __future__ import annotations

import logging
import operator
import re
from collections.abc import Generator, Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.limitreader import LimitReader

from builders.core.records import Count, Drop, Row
from builders.sources.html_pages import (
    MAX_PAGE_BYTES,
    decode_html,
    http_charset,
    page_record,
    url_detail,
)
from builders.sources.dir_entries import entry_problem, unreadable_entry_drop
from builders.sources.safe_open import check_regular_file, whole_input_error

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
        elif path.is_dir():  # entries that are no readable file: drops of list_warc_records (unreadable_warc_entries)
            named = sorted(p for p in path.rglob("*") if p.name.endswith(WARC_SUFFIXES))
            found.extend((p, p.relative_to(path).as_posix()) for p in named if entry_problem(p) is None)
        elif path.exists() or path.is_symlink():
            try:
                check_regular_file(path, "WARC input")
            except OSError as err:
                raise whole_input_error(err, path, "WARC input") from None
        else:
            raise FileNotFoundError(f"WARC input not found: {path}")
    return found


def unreadable_warc_entries(paths: str | Path | Iterable[str | Path]) -> list[Drop]:
    """An ``unreadable_input_entry`` drop for every entry of an input directory named like a WARC file that is no
    readable regular file (a dangling link, a loop of links, a directory, a FIFO, socket or device, a file this
    process may not read), in path order: item = its name relative to the directory, detail = its path and problem.
    :func:`find_warc_files` leaves them out; files given directly are checked there (an error)."""
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    drops: list[Drop] = []
    for item in items:
        path = Path(item)
        if not path.is_dir():
            continue
        for p in sorted(q for q in path.rglob("*") if q.name.endswith(WARC_SUFFIXES)):
            if (problem := entry_problem(p)) is not None:
                drops.append(unreadable_entry_drop(p, p.relative_to(path).as_posix(), STAGE, problem))
    return drops


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


def _url_detail(record: Any, detail: str, url: str = "") -> str:
    """``detail`` led by the record's ``WARC-Target-URI`` (:func:`~builders.sources.html_pages.url_detail`), so that a
    drop kept under its ``WARC-Record-ID`` names the page a user knows; ``url`` (what the listing read) when the
    record's headers cannot be read, else the detail says why the URL is unknown."""
    if record is None:
        return url_detail(url, detail, "the record's headers could not be read")
    return url_detail(record.rec_headers.get_header("WARC-Target-URI") or "", detail, "no WARC-Target-URI header")


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


def _error_text(err: BaseException) -> str:
    message = str(err).strip()[:160].encode("ascii", "backslashreplace").decode("ascii")
    return f"{type(err).__name__}: {message}"


def _pointer(record: Any, rid: str, path: Path, warc_filename: str, offset: int, length: int) -> Row:
    return {"record_id": rid, "warc_filename": warc_filename, "path": str(path), "offset": offset,
            "length": length, "url": record.rec_headers.get_header("WARC-Target-URI") or ""}


_NEXT_HEADER = re.compile(rb"\r?\nWARC/1\.[01]\r?\n")


def _next_header(path: Path, start: int, stop: int | None = None) -> int | None:
    """The offset of the first ``WARC/1.x`` header line that starts a record (a ``WARC-Type`` follows it) in the
    bytes ``[start, stop)`` of a plain WARC file, or ``None``. Read in 1 MiB chunks (never the whole file)."""
    with open(path, "rb") as f:
        pos = start
        f.seek(pos)
        tail = b""
        while stop is None or pos < stop:
            chunk = f.read(1 << 20 if stop is None else min(1 << 20, stop - pos))
            if not chunk:
                return None
            data = tail + chunk
            base = pos - len(tail)
            for m in _NEXT_HEADER.finditer(data):
                at = base + m.end() - len(m.group(0).lstrip(b"\r\n"))
                f2 = data[m.end():m.end() + 4096]
                if b"\nWARC-Type:" in b"\n" + f2 or len(f2) < 4096 and _has_type_after(path, at):
                    return at
            tail = data[-16:]
            pos += len(chunk)
    return None


def _has_type_after(path: Path, at: int) -> bool:
    with open(path, "rb") as f:
        f.seek(at)
        return b"\nWARC-Type:" in f.read(4096)


def _list_file(path: Path, warc_filename: str) -> Iterator[Row | Drop]:
    """The pointer rows / header drops of one WARC file, ``warc_corrupt`` for bad bytes (module docstring).

    Each record is read to its end (decompressed for ``.warc.gz``) to learn where it ends, but never kept. In a plain
    ``.warc`` a record whose ``Content-Length`` runs into the next record (a ``WARC/1.x`` header inside its bytes) is
    ``warc_corrupt`` and listing resumes at that header, so the next page is never absorbed into the wrong one.
    """
    pos = 0
    while pos is not None:
        pos = yield from _list_from(path, warc_filename, pos)


def _list_from(path: Path, warc_filename: str, pos: int) -> Generator[Row | Drop, None, int | None]:
    """List ``path`` from byte ``pos``; returns where to resume (a plain file's next record header) or ``None``."""
    record = None
    end = pos  # end offset of the last record read: where a failing record starts
    is_gz = False
    try:
        with open(path, "rb") as f:
            is_gz = f.read(2) == b"\x1f\x8b"
            f.seek(pos)
            iterator = ArchiveIterator(f)
            for record in iterator:
                skip = _classify(record)
                iterator.read_to_end()  # raises on a corrupt member before anything of the record is yielded
                offset, length = iterator.get_record_offset(), iterator.get_record_length()  # absolute offsets
                rid = _record_id(record, warc_filename, offset)
                if not is_gz and (nxt := _next_header(path, offset + 8, offset + length)) is not None:
                    yield Drop(rid, STAGE, WARC_CORRUPT, _url_detail(
                        record, f"{warc_filename}: the record at offset {offset} (Content-Length "
                        f"{record.rec_headers.get_header('Content-Length')}) runs into the next record at "
                        f"offset {nxt}; record skipped, listing resumes there"))
                    return nxt
                end = offset + length
                yield (Drop(rid, STAGE, skip[0], _url_detail(record, skip[1])) if skip is not None
                       else _pointer(record, rid, path, warc_filename, offset, length))
                record = None
    except Exception as err:  # noqa: BLE001 - warcio and zlib raise many kinds on bad bytes; one file never stops a build
        nxt = None if is_gz else _next_header(path, end + 8)
        rest = f"resuming at the next record at offset {nxt}" if nxt is not None else "rest of the file skipped"
        detail = f"{warc_filename}: {_error_text(err)}; {rest}"
        item_id = _record_id(record, warc_filename, end) if record is not None else f"{warc_filename}@{end}"
        yield Drop(item_id, STAGE, WARC_CORRUPT, _url_detail(record, detail))
        return nxt
    if not _tail_is_clean(path, end, is_gz):
        yield Drop(f"{warc_filename}@{end}", STAGE, WARC_CORRUPT, _url_detail(
            None, f"{warc_filename}: unparseable bytes after offset {end} (record cut inside its headers?)"))
    return None


def list_warc_records(paths: str | Path | Iterable[str | Path],
                      max_payload_bytes: int = MAX_PAGE_BYTES) -> Iterator[Row | Drop | Count]:
    """The cheap listing of WARC files (files or directories): per record, a :class:`Drop` decided from its headers
    (``warc_not_response``, ``http_status``, ``not_html`` by content type), or a *pointer row* for a record whose
    payload must be read::

        {"record_id": str, "warc_filename": str, "path": str, "offset": int, "length": int, "url": str}

    (``record_id`` = the page id :func:`read_warc` gives it; ``offset`` / ``length`` = the record's bytes in the file,
    its gzip member for ``.warc.gz``), and ``warc_corrupt`` drops for broken files exactly as :func:`read_warc`, after
    an ``unreadable_input_entry`` drop for each entry of a folder that is no readable file
    (:func:`unreadable_warc_entries`).
    :func:`read_warc_record` of a pointer gives that record's items. ``max_payload_bytes`` is accepted for symmetry:
    the cap is applied to the decoded payload, by :func:`read_warc_record`.

    Raises ``FileNotFoundError`` at call time for a missing input; never raises on bad bytes.
    """
    del max_payload_bytes  # the cap needs the decoded payload: read_warc_record applies it
    files = find_warc_files(paths)
    bad = unreadable_warc_entries(paths)
    return chain(bad, (item for path, name in files for item in _list_file(path, name)))


def list_warc_file(path: Path, warc_filename: str) -> Iterator[Row | Drop]:
    """The listing of one WARC file found by :func:`find_warc_files` (as :func:`list_warc_records` lists it among
    the others): so that a build may list each file on its own and keep each file's listing."""
    return _list_file(path, warc_filename)


def is_warc_pointer(item: Row | Drop | Count) -> bool:
    """True for a pointer row of :func:`list_warc_records` (as opposed to a drop or a count)."""
    return isinstance(item, dict) and "record_id" in item and "offset" in item and "html" not in item


def _record_items(record: Any, payload: bytes, unread: int, warc_filename: str, offset: int,
                  max_payload_bytes: int) -> list[Row | Drop | Count]:
    """The items of one record whose payload (at most ``max_payload_bytes + 1`` decoded bytes) was read."""
    rid = _record_id(record, warc_filename, offset)
    skip = _classify(record)
    if skip is not None:
        return [Drop(rid, STAGE, skip[0], _url_detail(record, skip[1]))]
    if len(payload) > max_payload_bytes:
        return [Drop(rid, STAGE, PAYLOAD_TOO_LARGE, _url_detail(record, f"payload above {max_payload_bytes} bytes"))]
    http = record.http_headers
    if not media_type(http.get_header("Content-Type")) and not media_type(
            record.rec_headers.get_header("WARC-Identified-Payload-Type")) and not looks_like_html(payload):
        return [Drop(rid, STAGE, NOT_HTML,
                     _url_detail(record, "no content type and the payload does not look like HTML"))]
    if unread > 0:  # the bytes are not there: a page cut anywhere (its JSON-LD too) is a named drop, not a recipe
        return [Drop(rid, STAGE, WARC_TRUNCATED, _url_detail(
            record, f"{warc_filename}: {unread} bytes of the record's Content-Length are missing (the file ends "
            "inside it, or its Content-Length is too large)"))]
    items: list[Row | Drop | Count] = []
    flagged = record.rec_headers.get_header("WARC-Truncated") is not None
    if flagged:  # the crawler cut the HTTP body and said so (Common Crawl: 1 MiB): parsed, flagged, counted
        why = "WARC-Truncated " + str(record.rec_headers.get_header("WARC-Truncated"))
        logger.debug("truncated WARC record %s in %s: %s", rid, warc_filename, why)
        items.append(Count(WARC_TRUNCATED))
    html, charset = decode_html(payload, http_charset(http.get_header("Content-Type")))
    url = record.rec_headers.get_header("WARC-Target-URI") or ""
    items.append(page_record(rid, url, html, charset, source_path=warc_filename, warc_filename=warc_filename,
                             warc_record_offset=offset, warc_record_id=rid, truncated=flagged))
    return items


def read_warc_record(path: str | Path, offset: int, length: int, warc_filename: str,
                     max_payload_bytes: int = MAX_PAGE_BYTES, url: str = "") -> list[Row | Drop | Count]:
    """The items of the one record at ``offset`` (``length`` bytes, as listed by :func:`list_warc_records`) of a
    ``.warc.gz`` (the record's own gzip member) or plain ``.warc`` file: its page record (with a ``warc_truncated``
    count before it when flagged), or a drop ``payload_too_large`` / ``not_html`` (or a header drop when the record is
    not an HTML 200 response) - exactly what :func:`read_warc` yields for it.

    Never raises on bad input: a missing file, an offset that is not a record, bad bytes give ``warc_corrupt``.
    Every drop's detail starts with the record's URL; ``url`` (the listing's ``url``) stands in for it when the
    record's headers can no longer be read.
    """
    record = None
    start: int | None = None
    try:
        start, size = operator.index(offset), operator.index(length)  # numpy / Arrow integers of a stored listing too
        if start < 0 or size <= 0:
            raise ValueError(f"bad record location: offset {start}, length {size}")
        with open(path, "rb") as f:
            f.seek(start)
            iterator = ArchiveIterator(LimitReader(f, size))  # never reads past the listed record
            record = next(iterator, None)
            if record is None:
                raise EOFError(f"no WARC record at offset {start}")
            payload = b""
            if _classify(record) is None:
                payload = _read_capped(record.content_stream(), max_payload_bytes)
            iterator.read_to_end()
            unread = _unread_bytes(record)
        return _record_items(record, payload, unread, warc_filename, start, max_payload_bytes)
    except Exception as err:  # noqa: BLE001 - bad bytes, a changed or missing file: a named drop, never an exception
        where = start if start is not None else repr(offset)
        detail = f"{warc_filename}: {_error_text(err)}; record at offset {where} skipped"
        return [Drop(_record_id(record, warc_filename, start), STAGE, WARC_CORRUPT, _url_detail(record, detail, url))]


def read_warc(paths: str | Path | Iterable[str | Path],
              max_payload_bytes: int = MAX_PAGE_BYTES) -> Iterator[Row | Drop | Count]:
    """Stream WARC files (files or directories) as page records, drops and ``warc_truncated`` counts
    (docs/reason-codes.md): :func:`list_warc_records`, each pointer replaced by :func:`read_warc_record` of it.

    Raises ``FileNotFoundError`` at call time for a missing input; never raises on bad bytes.
    """
    listing = list_warc_records(paths, max_payload_bytes)
    return (item for entry in listing
            for item in (read_warc_record(entry["path"], entry["offset"], entry["length"], entry["warc_filename"],
                                          max_payload_bytes, entry["url"]) if is_warc_pointer(entry) else (entry,)))
