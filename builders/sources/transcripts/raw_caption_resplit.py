"""The incremental re-split of an edited HowTo100M ``raw_caption.json`` (:func:`resplit_raw_captions`).

A split of a plain file (:func:`~builders.sources.transcripts.raw_caption_split.split_raw_captions`) records what an
edit needs: in its marker, the sha1 of each :data:`CHUNK_BYTES` piece of the source, and in its index (table
``spans``), each entry's bytes in the source, from its key's opening quote to its value's end. When the same source
path changes, the longest common prefix of whole chunks and the longest common suffix (the old file's chunks compared
at their offsets shifted by the size difference) are found without parsing; the entries wholly inside either keep
their index rows, and only the entries between them (the middle) are parsed, with the same checks as the full split.
A middle video whose normalized bytes are unchanged keeps its row too; the others go to one new block file; the index
is rewritten under a temporary name and renamed; blocks no longer referenced are removed; the marker comes last.

Whenever anything does not line up exactly the full split runs instead (never a wrong split): see
:func:`resplit_raw_captions` for the rules.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import sqlite3
from pathlib import Path
from collections.abc import Iterator
from typing import Any, BinaryIO
from urllib.parse import quote

from builders.sources.json_entries import plain_member

from . import raw_caption_split as rcs
from . import transcript

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20  # the source is compared in pieces of 1 MiB (sha1 each, kept in the marker)
BLOCK_GROWTH = 2  # at most BLOCK_GROWTH x the blocks a full split makes, plus BLOCK_SLACK, else a full split
BLOCK_SLACK = 2
MAX_MIDDLE_BYTES = 16 << 20  # a changed middle larger than this is split whole (streamed, not held in memory)

_BLOCK_NAME = re.compile(r"block-(\d{5,})\.jsonl")
_WS = re.compile(r"[ \t\n\r]*")
_COUNT_KEYS = ("videos", "skipped_unwanted", "bad_id", "json_error")
_VIDEO_COLUMNS = "video_id, block, offset, length, sha256, error"

Span = tuple[int, int, "str | None", str]


class _Whole(Exception):
    """The edit cannot be re-split in part (the message says why): the full split runs."""


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha1(data).hexdigest()


class ChunkHasher:
    """A binary stream that passes reads through and keeps the sha1 of each :data:`CHUNK_BYTES` piece of what was
    read (read at construction); :meth:`finish` reads the rest and returns the digests."""

    def __init__(self, f: BinaryIO, chunk_bytes: int | None = None) -> None:
        self.f = f
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.chunks: list[str] = []
        self._h = hashlib.sha1()
        self._n = 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        view = memoryview(data)
        while view:
            piece = view[:self.chunk_bytes - self._n]
            self._h.update(piece)
            self._n += len(piece)
            view = view[len(piece):]
            if self._n == self.chunk_bytes:
                self.chunks.append(self._h.hexdigest())
                self._h, self._n = hashlib.sha1(), 0
        return data

    def finish(self) -> list[str]:
        """The digests of the whole stream (the rest is read here)."""
        while self.read(4 << 20):
            pass
        if self._n:
            self.chunks.append(self._h.hexdigest())
            self._h, self._n = hashlib.sha1(), 0
        return self.chunks


def _read_at(f: BinaryIO, offset: int, n: int) -> bytes:
    f.seek(offset)
    return f.read(n)


def _common_prefix(f: BinaryIO, old: list[str], old_size: int, new_size: int) -> int:
    """Bytes at the start of the new file that are the old file's, in whole chunks (or all of a shorter last one)."""
    same = 0
    for k, digest in enumerate(old):
        n = min(CHUNK_BYTES, old_size - k * CHUNK_BYTES)
        if k * CHUNK_BYTES + n > new_size or _digest(_read_at(f, k * CHUNK_BYTES, n)) != digest:
            break
        same += n
    return same


def _common_suffix(f: BinaryIO, old: list[str], old_size: int, new_size: int, prefix: int) -> int:
    """Bytes at the end of the new file that are the old file's last bytes, in the old file's chunks (compared at
    their offsets shifted by the size difference), never overlapping ``prefix`` in either file."""
    delta, same = new_size - old_size, 0
    room = min(old_size, new_size) - prefix
    for k in range(len(old) - 1, -1, -1):
        n = min(CHUNK_BYTES, old_size - k * CHUNK_BYTES)
        if same + n > room or _digest(_read_at(f, k * CHUNK_BYTES + delta, n)) != old[k]:
            break
        same += n
    return same


def _new_chunks(f: BinaryIO, old: list[str], old_size: int, new_size: int, prefix: int, suffix: int) -> list[str]:
    """The chunk digests of the new file: the old ones where the bytes are the same at the same offsets."""
    out = []
    for k in range(math.ceil(new_size / CHUNK_BYTES)):
        lo, hi = k * CHUNK_BYTES, min((k + 1) * CHUNK_BYTES, new_size)
        same_len = k < len(old) and min(CHUNK_BYTES, old_size - lo) == hi - lo
        if same_len and (hi <= prefix or (old_size == new_size and lo >= new_size - suffix)):
            out.append(old[k])
        else:
            out.append(_digest(_read_at(f, lo, hi - lo)))
    return out


def _parse_middle(text: str, base: int, after_entry: bool, before_entry: bool, limits: dict[str, int]
                  ) -> Iterator[tuple[str, Any, int, int]]:
    """The entries of the changed middle ``text`` (the new file's bytes from ``base``): ``(key, value, start, end)``
    with byte offsets in the file. ``after_entry``: the text starts right after an unchanged entry (so with ``,`` or
    the closing ``}``), else at the start of the file (``{``). ``before_entry``: it ends exactly where an unchanged
    entry starts (after a ``,``), else it runs to the end of the file (the object must close). Raises :class:`_Whole`
    (or :class:`~builders.sources.json_entries.NotPlain`) when it does not line up."""
    decoder = json.JSONDecoder(parse_constant=str)
    n, p = len(text), 0
    ascii_text = text.isascii()
    mark_c, mark_b = 0, base

    def byte_at(c: int) -> int:
        nonlocal mark_c, mark_b
        mark_b += (c - mark_c) if ascii_text else len(text[mark_c:c].encode("utf-8"))
        mark_c = c
        return mark_b

    first = not after_entry
    if first:
        p = _WS.match(text, 1 if text.startswith("\ufeff") else 0).end()
        if p >= n or text[p] != "{":
            raise _Whole("the file no longer starts a JSON object")
        p += 1
    while True:
        p = _WS.match(text, p).end()
        if p < n and text[p] == "}":  # right after "{" or an entry: the object closes
            if before_entry:
                raise _Whole("the object closes before the unchanged end")
            return
        if not first:
            if p >= n or text[p] != ",":
                raise _Whole(f"the changed bytes do not line up at byte {byte_at(p)}")
            p = _WS.match(text, p + 1).end()
        first = False
        if before_entry and p == n:
            return
        key, value, start, end = plain_member(text, p, decoder=decoder, **limits)
        yield key, value, byte_at(start), byte_at(end)
        p = end


def resplit_raw_captions(src: str | Path, out: str | Path, wanted_ids: set[str] | None) -> dict[str, int] | None:
    """Re-split only the changed part of ``src`` into the split in ``out``; the counts (equal to a full split's), or
    None when the full split must run. It does when: there is no finished split in ``out`` or its marker or index is
    unreadable or inconsistent; the split was of another source path, wanted-id set, layout
    (:data:`~builders.sources.transcripts.raw_caption_split.SPLIT_LAYOUT`), chunk size or caps; the earlier file was
    not read by the C-speed reader (the careful reader, a JSON error) or held a repeated kept id (the last value wins,
    which depends on the whole file), or the middle repeats one; the middle is over :data:`MAX_MIDDLE_BYTES`, is not
    plain JSON or does not join the unchanged entries exactly; the split would hold more than
    ``BLOCK_GROWTH x ceil(videos / BLOCK_VIDEOS) + BLOCK_SLACK`` blocks; the file changes while it is read."""
    src, out = Path(src), Path(out)
    try:
        return _resplit(src, out, wanted_ids)
    except _Whole as why:
        logger.info("raw captions %s: split whole (%s)", src.name, why)
    except Exception as err:  # a corrupt split, an unreadable file: the full split names any real problem
        logger.warning("raw captions %s: split whole (the earlier split could not be updated: %s: %s)", src.name,
                       type(err).__name__, str(err)[:200])
    return None


def _earlier(out: Path, src: Path, wanted_ids: set[str] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The earlier split's marker and the new one (no counts yet), checked for an incremental re-split."""
    marker = rcs._read_marker(out)
    new = rcs._split_marker(src, wanted_ids, None)
    if marker is None or not (out / rcs.INDEX_FILE).is_file():
        raise _Whole("no finished split")
    for key in ("layout", "source", "wanted"):
        if marker.get(key) != new[key]:
            raise _Whole(f"the split has another {key}")
    plain, counts = marker.get("plain"), marker.get("counts")
    if not isinstance(plain, dict) or marker.get("error") or not isinstance(counts, dict):
        raise _Whole("the earlier file was not read by the C-speed reader")
    if sorted(counts) != sorted(_COUNT_KEYS) or counts["json_error"]:
        raise _Whole("the earlier split's counts are not a plain split's")
    if plain.get("limits") != rcs.plain_limits(transcript.MAX_TRANSCRIPT_BYTES):
        raise _Whole("the caps changed")
    if plain.get("chunk_bytes") != CHUNK_BYTES or len(plain["chunks"]) != math.ceil(marker["size"] / CHUNK_BYTES):
        raise _Whole("another chunk size")
    if plain.get("repeated_ids") != 0:
        raise _Whole("the earlier file repeats an id")
    return marker, new


def _resplit(src: Path, out: Path, wanted_ids: set[str] | None) -> dict[str, int] | None:
    marker, new_marker = _earlier(out, src, wanted_ids)
    rcs._require_raw_caption_file(src)
    old_chunks, old_size, new_size = marker["plain"]["chunks"], marker["size"], new_marker["size"]
    delta = new_size - old_size
    limits = rcs.plain_limits(transcript.MAX_TRANSCRIPT_BYTES)
    index = out / rcs.INDEX_FILE
    with rcs._open_raw_captions(src) as f:
        prefix = _common_prefix(f, old_chunks, old_size, new_size)
        suffix = _common_suffix(f, old_chunks, old_size, new_size, prefix)
        con = sqlite3.connect(f"file:{quote(str(index.resolve()))}?mode=ro", uri=True)
        try:
            plan = _plan(con, marker["counts"], prefix, suffix, old_size)
            a_old, s_old, old_rows, old_videos = plan
            if a_old is None:  # the start changed: the full split's whole-file check (else it saw these bytes)
                rcs._check_json_object_file(src)
            a_new = 0 if a_old is None else a_old
            b_new = new_size if s_old is None else s_old + delta
            if b_new - a_new > MAX_MIDDLE_BYTES:
                raise _Whole(f"{b_new - a_new} bytes changed, over {MAX_MIDDLE_BYTES}")
            region = _read_at(f, a_new, b_new - a_new)
            if len(region) != b_new - a_new:
                raise _Whole("the file is shorter than its size")
            text = region.decode("utf-8")
            del region
            middle = _parse_middle(text, a_new, a_old is not None, s_old is not None, limits)
            counts = dict(marker["counts"])
            for _, _, _, kind in old_rows:
                counts[kind or "videos"] -= 1
            rows = _classify(con, middle, wanted_ids, counts, old_videos)
            del text
        finally:
            con.close()
        chunks = _new_chunks(f, old_chunks, old_size, new_size, prefix, suffix)
    changed = sum(1 for r in rows if r[4] is None and not r[3])
    if old_rows or rows or delta:
        _update(out, plan, rows, delta, counts["videos"])
    new = rcs._split_marker(src, wanted_ids, counts)
    if (new["size"], new["mtime_ns"]) != (new_marker["size"], new_marker["mtime_ns"]):
        (out / rcs.SPLIT_MARKER).unlink(missing_ok=True)
        raise _Whole("the file changed while it was read")
    new["error"] = ""
    new["plain"] = {**marker["plain"], "chunks": chunks}
    rcs._write_atomic(out / rcs.SPLIT_MARKER, json.dumps(new).encode("utf-8"))
    logger.info("raw captions %s: re-split %d of %d videos: bytes %d..%d changed", src.name, changed,
                counts["videos"], prefix, new_size - suffix)
    return counts


def _plan(con: sqlite3.Connection, counts: dict[str, int], prefix: int, suffix: int, old_size: int) -> tuple[
        int | None, int | None, list[Span], dict[str, tuple[Any, ...]]]:
    """``(end of the last entry wholly in the prefix, start of the first wholly in the suffix (old offsets), the old
    middle's spans, the old middle's video rows)`` from the earlier index, after checking it matches the counts."""
    (spans,) = con.execute("SELECT COUNT(*) FROM spans").fetchone()
    (videos,) = con.execute("SELECT COUNT(*) FROM videos").fetchone()
    if spans != counts["videos"] + counts["bad_id"] + counts["skipped_unwanted"] or videos != counts["videos"]:
        raise _Whole("the index does not match the marker's counts")
    last = "SELECT start, end FROM spans WHERE start < ? ORDER BY start DESC LIMIT 1"
    row = con.execute(last, (prefix,)).fetchone()
    if row is not None and row[1] > prefix:
        row = con.execute(last, (row[0],)).fetchone()
    a_old = None if row is None else int(row[1])
    row = con.execute("SELECT start FROM spans WHERE start >= ? ORDER BY start LIMIT 1",
                      (old_size - suffix,)).fetchone() if suffix else None
    s_old = None if row is None else int(row[0])
    old_rows: list[Span] = [tuple(r) for r in con.execute(  # type: ignore[misc]
        "SELECT start, end, video_id, kind FROM spans WHERE start >= ? AND start < ? ORDER BY start",
        (a_old or 0, old_size + 1 if s_old is None else s_old))]
    ids = [r[2] for r in old_rows if not r[3]]
    query = f"SELECT {_VIDEO_COLUMNS} FROM videos"
    old_videos: dict[str, tuple[Any, ...]] = {r[0]: tuple(r[1:]) for r in rcs.videos_where_in(con, query, ids)}
    if len(old_videos) != len(ids):
        raise _Whole("the index lacks a video of its spans")
    return a_old, s_old, old_rows, old_videos


def _classify(con: sqlite3.Connection, middle: Iterator[tuple[str, Any, int, int]], wanted_ids: set[str] | None,
              counts: dict[str, int], old_videos: dict[str, tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The middle's rows ``(start, end, video_id, kind, old row or None, bytes)``, counted into ``counts`` as the full
    split counts them; a video whose bytes are unchanged keeps its old row."""
    rows: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    for key, value, start, end in middle:
        kind = rcs._skip_reason(key, wanted_ids, counts)
        if kind:
            rows.append((start, end, None, kind, None, b""))
            continue
        if key in seen:
            raise _Whole(f"the id {key!r} is repeated")
        seen.add(key)
        counts["videos"] += 1
        data = rcs.video_bytes(value)
        old = old_videos.get(key)
        keep = old if old is not None and not old[4] and old[3] == hashlib.sha256(data).hexdigest() else None
        rows.append((start, end, key, "", keep, data))
    others = sorted(seen - set(old_videos))
    if any(True for _ in rcs.videos_where_in(con, "SELECT 1 FROM videos", others)):
        raise _Whole("a changed video repeats an unchanged one's id")
    return rows


def _update(out: Path, plan: tuple[Any, ...], rows: list[tuple[Any, ...]], delta: int, videos: int) -> None:
    """Write the changed videos to new blocks and the index under a temporary name, rename it, remove blocks no
    longer referenced. The marker is removed first (a re-split cut short is never taken for a finished one)."""
    a_old, s_old, old_rows, old_videos = plan
    tmp = out / f".{rcs.INDEX_FILE}.{os.getpid()}.resplit.tmp"
    blocks = rcs._BlockWriter(out)
    try:
        shutil.copyfile(out / rcs.INDEX_FILE, tmp)
        con = sqlite3.connect(tmp)
        try:
            if old_rows:
                con.execute("DELETE FROM spans WHERE start >= ? AND start <= ?", (old_rows[0][0], old_rows[-1][0]))
                con.executemany("DELETE FROM videos WHERE video_id = ?", ((v,) for v in old_videos))
            if delta and s_old is not None:  # shift the suffix's spans, through negative starts (no collision)
                con.execute("UPDATE spans SET start = -(start + ?) - 1 WHERE start >= ?", (delta, s_old))
                con.execute("UPDATE spans SET start = -start - 1, end = end + ? WHERE start < 0", (delta,))
            new = [r for r in rows if r[3] == "" and r[4] is None]
            (kept,) = con.execute("SELECT COUNT(DISTINCT block) FROM videos WHERE error = ''").fetchone()
            kept_blocks = kept + len({r[4][0] for r in rows if r[4] is not None} - _blocks(con))
            limit = BLOCK_GROWTH * math.ceil(videos / rcs.BLOCK_VIDEOS) + BLOCK_SLACK
            if kept_blocks + math.ceil(len(new) / rcs.BLOCK_VIDEOS) > limit:
                raise _Whole(f"more than {limit} blocks for {videos} videos")
            (out / rcs.SPLIT_MARKER).unlink(missing_ok=True)
            top = con.execute("SELECT MAX(block) FROM videos").fetchone()[0]
            files = [int(m[1]) for p in out.iterdir() if (m := _BLOCK_NAME.fullmatch(p.name))]
            blocks.block = max([-1, top if top is not None else -1, *files])
            con.executemany("INSERT INTO spans VALUES (?, ?, ?, ?)", (r[:4] for r in rows))
            con.executemany(f"INSERT INTO videos ({_VIDEO_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                            ((r[2], *(r[4] if r[4] is not None else (*blocks.add(r[5]), ""))) for r in rows
                             if not r[3]))
            blocks.close()
            con.commit()
            used = _blocks(con)
        finally:
            con.close()
        os.replace(tmp, out / rcs.INDEX_FILE)
    except BaseException:
        blocks.abort()
        raise
    finally:
        tmp.unlink(missing_ok=True)
    for p in out.iterdir():  # blocks no longer referenced (names made by block_path only)
        m = _BLOCK_NAME.fullmatch(p.name)
        if m and int(m[1]) not in used:
            p.unlink(missing_ok=True)


def _blocks(con: sqlite3.Connection) -> set[int]:
    return {b for (b,) in con.execute("SELECT DISTINCT block FROM videos WHERE error = ''")}
