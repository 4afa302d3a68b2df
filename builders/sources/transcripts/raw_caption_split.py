"""The split of HowTo100M ``raw_caption.json`` (docs/corpora/sieve_swap.md, "Inputs"; docs/corpora/howtostep.md,
"Inputs") and its read side.

The raw-caption file is large (one JSON object over all videos), so :func:`split_raw_captions` streams it once (at C
speed when plain, else with ``ijson``) into blocks of 1,000 videos with an id index (:class:`SplitIndex`); the stores
then read one video at a time. The whole-file check (:func:`check_raw_caption_file`) runs before any work: an unusable
file stops the build (docs/reason-codes.md). An edited plain file is re-split only where it changed
(:mod:`.raw_caption_resplit`, called by :func:`split_once`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import ijson

from builders.core.errors import InputError
from builders.sources.safe_open import check_regular_file, open_input, whole_input_error

from . import transcript
from .careful_reader import _build_value, _NonFiniteAsStrings, _skip_value
from .transcript import (
    MALFORMED_TRANSCRIPT,
    MAX_JSON_DEPTH,
    NO_TRANSCRIPT,
    TranscriptError,
    is_valid_video_id,
)

logger = logging.getLogger(__name__)

SPLIT_MARKER = "_split_done.json"
RAW_CAPTIONS_DIR = "raw_captions"
SPLIT_LAYOUT = "blocks-v2"  # block-NNNNN.jsonl + index.sqlite with spans (a split of another layout is made again)
BLOCK_VIDEOS = 1000  # videos a block file of a split
INDEX_FILE = "index.sqlite"


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _check_json_object_file(path: Path) -> None:
    """A whole-file check of ``raw_caption.json`` (docs/reason-codes.md: an unusable file stops the build), before any
    work: it must start a JSON object whose first entry parses (``{}`` is a valid, empty file). Raises
    :class:`~builders.core.errors.InputError` naming the problem (empty, not UTF-8 JSON, a top-level list or other
    value, garbage after ``{``)."""
    with _open_raw_captions(path) as f:
        head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()
    expected = "a JSON object {video_id: {text, start, end}} (raw_caption.json)"
    if not head:
        raise InputError(f"{path}: empty file; expected {expected}")
    if not head.startswith(b"{"):
        what = "a JSON list" if head.startswith(b"[") else f"it starts with {head[:20]!r}"
        raise InputError(f"{path}: not {expected}: {what}")
    try:
        with _open_raw_captions(path) as f:
            events = ijson.basic_parse(_NonFiniteAsStrings(f), use_float=True)
            next(events)  # start_map
            event, _ = next(events)
            if event == "map_key":
                next(events)  # the first value starts
    except StopIteration:
        raise InputError(f"{path}: the JSON object ends before its first entry (truncated?)") from None
    except (ijson.JSONError, ValueError) as err:
        raise InputError(f"{path}: not {expected}: invalid JSON at the start: {' '.join(str(err).split())[:200]}") from None


def _require_raw_caption_file(src: Path) -> None:
    """``FileNotFoundError`` when absent; :class:`~builders.core.errors.InputError` for a FIFO, a device or a loop of
    links in place of ``raw_caption.json`` (``builders/sources/safe_open.py``: refused unread, never a hang)."""
    try:
        check_regular_file(src, "raw captions file")
    except FileNotFoundError:
        raise FileNotFoundError(f"raw captions file not found: {src}") from None
    except OSError as err:
        raise whole_input_error(err, src, "raw captions file") from None


def _open_raw_captions(path: Path) -> Any:
    """The whole ``raw_caption.json``, opened by :func:`~builders.sources.safe_open.open_input` (streamed, no cap)."""
    try:
        return open_input(path, max_bytes=None, what="raw captions file")
    except FileNotFoundError:
        raise FileNotFoundError(f"raw captions file not found: {path}") from None
    except OSError as err:
        raise whole_input_error(err, path, "raw captions file") from None


def check_raw_caption_file(path: str | Path) -> None:
    """The whole-file check of a ``raw_caption.json`` given as transcripts (a directory is WhisperX: not checked
    here). ``FileNotFoundError`` when absent, :class:`~builders.core.errors.InputError` when unusable or not a regular
    file."""
    src = Path(path)
    if src.is_dir():
        return
    _require_raw_caption_file(src)
    _check_json_object_file(src)


def videos_where_in(con: Any, select: str, video_ids: list[str]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``select`` (a query of the index's ``videos`` table) ``WHERE video_id IN (video_ids)``, at most
    500 ids a query (SQLite's limit of bound parameters), fetched lazily."""
    for i in range(0, len(video_ids), 500):
        part = video_ids[i:i + 500]
        yield from con.execute(f"{select} WHERE video_id IN ({','.join('?' * len(part))})", part)


def video_bytes(value: Any) -> bytes:
    """A video's value as the split stores it (and as its sha256 keys its rows): compact-enough JSON, UTF-8. Every
    reader of the split (the C-speed one, the careful one, the incremental re-split) writes through here, so an
    unchanged value keeps its digest whichever read it."""
    return json.dumps(value).encode("utf-8")


def block_path(root: str | Path, block: int) -> Path:
    """Block ``block`` of a split made by :func:`split_raw_captions`: ``root/block-00000.jsonl``."""
    return Path(root) / f"block-{block:05d}.jsonl"


class _BlockWriter:
    """Appends videos to ``block-NNNNN.jsonl`` files of at most ``BLOCK_VIDEOS`` videos, each written under a hidden
    temporary name and renamed when full; returns each video's ``(block, offset, length, sha256)``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.block = -1
        self.videos = BLOCK_VIDEOS
        self.offset = 0
        self._f: Any = None
        self._tmp: Path | None = None

    def add(self, data: bytes) -> tuple[int, int, int, str]:
        if self.videos >= BLOCK_VIDEOS:
            self.close()
            self.block += 1
            self._tmp = self.root / f".{block_path(self.root, self.block).name}.{os.getpid()}.tmp"
            self._f = open(self._tmp, "wb")
            self.videos = self.offset = 0
        where = (self.block, self.offset, len(data), hashlib.sha256(data).hexdigest())
        self._f.write(data + b"\n")
        self.offset += len(data) + 1
        self.videos += 1
        return where

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            os.replace(self._tmp, block_path(self.root, self.block))
            self._f = self._tmp = None

    def abort(self) -> None:
        if self._f is not None:
            self._f.close()
            self._tmp.unlink(missing_ok=True)
            self._f = self._tmp = None


SPANS_TABLE = ("CREATE TABLE spans (start INTEGER PRIMARY KEY, end INTEGER NOT NULL, video_id TEXT, "
               "kind TEXT NOT NULL)")


def _write_index(root: Path, entries: dict[str, tuple[int, int, int, str, str]],
                 spans: Iterable[tuple[int, int, str | None, str]] = ()) -> None:
    """The split's ``index.sqlite``: ``video_id -> (block, offset, length, sha256, error)`` (table ``videos``) and,
    for a plain file, each entry's bytes in the source (table ``spans``: ``start, end, video_id, kind``; ``kind`` is
    ``''`` for a video kept, else the count it went to, ``bad_id`` or ``skipped_unwanted``, with no id), written
    atomically. The spans let :mod:`.raw_caption_resplit` re-split only the changed part of an edited file."""
    import sqlite3

    tmp = root / f".{INDEX_FILE}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.execute("CREATE TABLE videos (video_id TEXT PRIMARY KEY, block INTEGER, offset INTEGER, "
                    "length INTEGER, sha256 TEXT, error TEXT) WITHOUT ROWID")
        con.executemany("INSERT INTO videos VALUES (?, ?, ?, ?, ?, ?)",
                        ((vid, *e) for vid, e in sorted(entries.items())))
        con.execute(SPANS_TABLE)
        con.executemany("INSERT INTO spans VALUES (?, ?, ?, ?)", spans)
        con.commit()
    finally:
        con.close()
    os.replace(tmp, root / INDEX_FILE)


def split_raw_captions(
    path: str | Path, out_dir: str | Path, wanted_ids: set[str] | None = None
) -> dict[str, int]:
    """Stream HowTo100M ``raw_caption.json`` (docs/corpora/sieve_swap.md, Inputs) into blocks of videos under
    ``out_dir``.

    Layout (``SPLIT_LAYOUT``): ``block-00000.jsonl``, ... hold :data:`BLOCK_VIDEOS` videos each, one JSON value a
    line, and ``index.sqlite`` maps each video id to its ``(block, offset, length, sha256)`` or to the ``error`` that
    kept it out, so a reader seeks one video without reading the rest and a split of 370,000 videos is a few hundred
    files (one file a video made the work directory grow by a file and a filesystem block per video). The sha256 of
    a video's bytes keys its rows' cache (README.md "Caching and resume": an edit reruns one video's shards).

    A plain file (valid UTF-8 JSON, every value well under the caps) is read at C speed by
    :func:`~builders.sources.json_entries.plain_object_entries`, one video at a time; any other file is read again
    from the start by the careful reader described next, which gives the same values for a plain file.
    The careful reader (:mod:`builders.sources.transcripts.careful_reader`) streams ijson ``basic_parse`` events (the
    file is never loaded whole) and builds one video's value at a time, capped at :data:`MAX_JSON_DEPTH` levels and
    :data:`MAX_TRANSCRIPT_BYTES` (read at call time): a video over a cap is not written; its index entry records why,
    which makes it a ``malformed_transcript`` drop (counted as ``too_big``), so a 200 KB file of 100,000 nested arrays
    costs no memory. ``NaN`` / ``Infinity`` tokens are read as strings (see ``_NonFiniteAsStrings``): the segment, not
    the rest of the file, is lost.
    Ids that are not ``[A-Za-z0-9_-]{1,64}`` are never used and are counted as ``bad_id``; ids outside
    ``wanted_ids`` (when given) as ``skipped_unwanted``; a repeated id keeps its last value (as ``json.load`` does).
    Every file is written atomically; re-running rewrites the same files (idempotent). A JSON syntax error (e.g. a
    truncated download) stops the split: what was read is kept, ``json_error`` is 1, the video being read is
    recorded as malformed, the marker records the error and every video not found is then ``malformed_transcript``
    (the file could not be read to its end), not ``no_transcript``. A marker ``SPLIT_MARKER`` with the source's
    size/mtime, the layout, the counts and the error is written last; for a plain file it also holds the sha1 of each
    chunk of the source, the caps and the number of repeated ids, and the index each entry's bytes in the source
    (table ``spans``), which let :mod:`.raw_caption_resplit` re-split an edit in part. Raises
    :class:`~builders.core.errors.InputError` for a file that is not a JSON object. Returns the counts.
    """
    src = Path(path)
    _require_raw_caption_file(src)
    _check_json_object_file(src)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / SPLIT_MARKER).unlink(missing_ok=True)  # a split that is cut short is never taken for a finished one
    max_bytes = transcript.MAX_TRANSCRIPT_BYTES
    fast = _split_plain(src, out, wanted_ids, max_bytes)
    if fast is not None:
        entries, counts, last_block, spans, plain = fast
        return _finish_split(src, out, wanted_ids, entries, counts, 0, last_block, "", spans, plain)
    counts = {"videos": 0, "skipped_unwanted": 0, "bad_id": 0, "json_error": 0}
    too_big = 0
    error = ""
    current: str | None = None
    entries: dict[str, tuple[int, int, int, str, str]] = {}
    blocks = _BlockWriter(out)
    try:
        with _open_raw_captions(src) as f:
            stream = _NonFiniteAsStrings(f)
            events = ijson.basic_parse(stream, use_float=True)
            try:
                next(events)  # start_map, checked above
                for event, video_id in events:
                    if event != "map_key":
                        break  # end_map
                    event, value = next(events)
                    if _skip_video(video_id, wanted_ids, counts):
                        if event.startswith("start_"):
                            _skip_value(events, 1)
                        continue
                    current = video_id
                    obj, problem = _build_value(events, event, value, MAX_JSON_DEPTH, max_bytes)
                    current = None
                    if problem:
                        too_big += 1
                        entries[video_id] = (-1, 0, 0, "", problem)
                    else:
                        entries[video_id] = (*blocks.add(video_bytes(obj)), "")
                    counts["videos"] += 1
            except (ijson.JSONError, ValueError, StopIteration) as err:  # ValueError: bad bytes (pure Python)
                counts["json_error"] = 1
                why = "unexpected end of file" if isinstance(err, StopIteration) else " ".join(str(err).split())[:200]
                error = (f"{src.name}: JSON error near byte {stream.bytes_read} after {counts['videos']} videos, the "
                         f"rest was not read: {why}")
                if current is not None:
                    entries[current] = (-1, 0, 0, "", f"invalid JSON: {error}")
                logger.error("raw captions %s: JSON error after %d videos, rest not read: %s", src, counts["videos"],
                             why)
        blocks.close()
    except BaseException:
        blocks.abort()
        raise
    return _finish_split(src, out, wanted_ids, entries, counts, too_big, blocks.block, error)


def _skip_video(video_id: Any, wanted_ids: set[str] | None, counts: dict[str, int]) -> bool:
    """Whether the split leaves this entry out (an unsafe id or one not wanted), counting it."""
    return bool(_skip_reason(video_id, wanted_ids, counts))


def _skip_reason(video_id: Any, wanted_ids: Iterable[str] | None, counts: dict[str, int]) -> str:
    """Why the split leaves this entry out, counted under that name (``bad_id``: an unsafe id, logged for the first
    ten; ``skipped_unwanted``: one not wanted), or ``''`` when it is kept."""
    if not is_valid_video_id(video_id):
        counts["bad_id"] += 1
        if counts["bad_id"] <= 10:
            logger.warning("raw captions: ignoring unsafe video id %r", str(video_id)[:80])
        return "bad_id"
    if wanted_ids is not None and video_id not in wanted_ids:
        counts["skipped_unwanted"] += 1
        return "skipped_unwanted"
    return ""


def plain_limits(max_bytes: int) -> dict[str, int]:
    """The caps of the C-speed reader for a ``MAX_TRANSCRIPT_BYTES`` of ``max_bytes`` (kept in the marker: a split
    made under other caps is never re-split in part)."""
    return {"max_value_chars": min(8 << 20, max_bytes // 8), "max_depth": MAX_JSON_DEPTH}


def _split_plain(src: Path, out: Path, wanted_ids: set[str] | None, max_bytes: int) -> tuple[
        dict[str, tuple[int, int, int, str, str]], dict[str, int], int, Iterable[tuple[int, int, str | None, str]],
        dict[str, Any]] | None:
    """The split of a plain file at C speed (``builders/sources/json_entries.py``): ``(entries, counts, last block,
    spans, plain)`` (``spans``: each entry's bytes in the file, see :func:`_write_index`; ``plain``: the marker's
    record for an incremental re-split, see :mod:`.raw_caption_resplit`), or None when the file needs the careful
    reader (its blocks are then written again). A value is taken here only when it is far below ``max_bytes`` (at most
    an eighth, in characters: the careful reader's size estimate is at most four times a value's length), so both
    readers keep and refuse the same videos."""
    from builders.sources.json_entries import NotPlain, plain_object_entries

    from . import raw_caption_resplit as resplit

    counts = {"videos": 0, "skipped_unwanted": 0, "bad_id": 0, "json_error": 0}
    entries: dict[str, tuple[int, int, int, str, str]] = {}
    starts, ends = array("q"), array("q")  # the spans, 32 bytes an entry (not a tuple each: 370,000 entries)
    span_ids: list[str | None] = []
    kinds: list[str] = []
    repeated = 0
    limits = plain_limits(max_bytes)
    blocks = _BlockWriter(out)
    try:
        with _open_raw_captions(src) as f:
            hashed = resplit.ChunkHasher(f)
            for video_id, value, start, end in plain_object_entries(hashed, spans=True, **limits):
                why = _skip_reason(video_id, wanted_ids, counts)
                starts.append(start)
                ends.append(end)
                kinds.append(why)
                if why:
                    span_ids.append(None)
                    continue
                span_ids.append(video_id)
                repeated += video_id in entries
                entries[video_id] = (*blocks.add(video_bytes(value)), "")
                counts["videos"] += 1
            chunks = hashed.finish()
        blocks.close()
    except NotPlain as why:
        blocks.abort()
        logger.info("raw captions %s: read with the careful reader (%s)", src.name, why)
        return None
    except BaseException:
        blocks.abort()
        raise
    plain = {"chunk_bytes": hashed.chunk_bytes, "chunks": chunks, "repeated_ids": repeated, "limits": limits}
    return entries, counts, blocks.block, zip(starts, ends, span_ids, kinds), plain


def _finish_split(src: Path, out: Path, wanted_ids: set[str] | None,
                  entries: dict[str, tuple[int, int, int, str, str]], counts: dict[str, int], too_big: int,
                  last_block: int, error: str, spans: Iterable[tuple[int, int, str | None, str]] = (),
                  plain: dict[str, Any] | None = None) -> dict[str, int]:
    """Remove blocks past ``last_block``, write the index and then the marker (with ``plain``, the record of a plain
    file's split that lets a later edit be re-split in part); returns the counts."""
    for stale in out.glob("block-*.jsonl"):  # blocks of an earlier, longer split of another file
        if stale.name > block_path(out, last_block).name:
            stale.unlink()
    _write_index(out, entries, spans)
    if too_big:
        counts["too_big"] = too_big
    marker = _split_marker(src, wanted_ids, counts)
    marker["error"] = error
    marker["plain"] = plain
    _write_atomic(out / SPLIT_MARKER, json.dumps(marker).encode("utf-8"))
    return counts


class SplitIndex:
    """The read side of a split made by :func:`split_raw_captions`: one index look-up and one ``seek`` a video,
    memory bounded by one video whatever the number of videos (the index stays on disk, in SQLite)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._con: Any = None
        self._key: tuple[int, int] | None = None
        self._read_marker()

    def _read_marker(self) -> None:
        marker = _read_marker(self.root)
        self.counts: dict[str, int] | None = marker.get("counts") if marker else None
        self.error: str = str(marker.get("error") or "") if marker else ""

    def __getstate__(self) -> dict[str, Any]:  # a step holding one is pickled to workers: reopen there
        return {**self.__dict__, "_con": None, "_key": None}

    def _db(self) -> Any:
        import sqlite3
        from urllib.parse import quote

        path = self.root / INDEX_FILE
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns)
        if self._con is None or self._key != key:  # re-split since it was opened: read the new index
            if self._con is not None:
                self._con.close()
                self._read_marker()
            self._con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True,
                                        check_same_thread=False)
            self._key = key
        return self._con

    def entries(self, video_ids: Iterable[str]) -> dict[str, tuple[int, int, int, str, str]]:
        """``{video_id: (block, offset, length, sha256, error)}`` of those of ``video_ids`` the split holds."""
        db = self._db()
        ids = [v for v in dict.fromkeys(video_ids) if is_valid_video_id(v)]
        if db is None or not ids:
            return {}
        out: dict[str, tuple[int, int, int, str, str]] = {}
        out.update({r[0]: tuple(r[1:]) for r in videos_where_in(db, "SELECT * FROM videos", ids)})
        return out

    def has(self, video_id: str) -> bool:
        """The split holds the video (its bytes, or the reason it could not keep them)."""
        return bool(self.entries([video_id]))

    def ids(self) -> set[str]:
        """The ids whose value was written (not those recorded as malformed)."""
        db = self._db()
        return set() if db is None else {r[0] for r in db.execute("SELECT video_id FROM videos WHERE error = ''")}

    def digest(self, video_id: str, entry: tuple[int, int, int, str, str] | None) -> str:
        """What keys the video's rows: the sha256 of its bytes, its error, or ``-`` when absent."""
        if entry is None:
            return "-"
        return entry[3] or "error:" + entry[4]

    def read_bytes(self, video_id: str) -> bytes:
        """The video's JSON bytes, or :class:`TranscriptError`: ``malformed_transcript`` for a video whose value was
        over a cap or cut by a JSON error, over :data:`MAX_TRANSCRIPT_BYTES` (read at call time), or absent from a
        split that stopped at a JSON error (it may be in the part that could not be read); ``no_transcript`` for a
        video absent from a complete file."""
        entry = self.entries([video_id]).get(video_id)
        if entry is None:
            if self.error:
                raise TranscriptError(MALFORMED_TRANSCRIPT, f"not in the readable part of the transcripts: "
                                                            f"{self.error}")
            raise TranscriptError(NO_TRANSCRIPT, f"no transcript for {video_id} in {self.root.name}")
        block, offset, length, _, error = entry
        if error:
            raise TranscriptError(MALFORMED_TRANSCRIPT, error[:300])
        if length > transcript.MAX_TRANSCRIPT_BYTES:
            raise TranscriptError(MALFORMED_TRANSCRIPT,
                                  f"{video_id}: {length} bytes > {transcript.MAX_TRANSCRIPT_BYTES}")
        try:
            with open(block_path(self.root, block), "rb") as f:
                f.seek(offset)
                data = f.read(length)
        except OSError as err:
            raise TranscriptError(MALFORMED_TRANSCRIPT, f"{video_id}: unreadable split block: {err}") from None
        if len(data) != length:
            raise TranscriptError(MALFORMED_TRANSCRIPT, f"{video_id}: split block {block} is cut short")
        return data

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def _split_marker(src: Path, wanted_ids: Iterable[str] | None, counts: dict[str, int] | None) -> dict[str, Any]:
    stat = src.stat()
    wanted = None if wanted_ids is None else hashlib.sha1("\n".join(sorted(wanted_ids)).encode()).hexdigest()
    return {"source": str(src.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "wanted": wanted,
            "layout": SPLIT_LAYOUT, "counts": counts}


def _marker_key(marker: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What identifies a split: the source file (path, size, mtime), the wanted-id set and the layout."""
    if marker is None:
        return None
    return tuple(marker.get(key) for key in ("source", "size", "mtime_ns", "wanted", "layout"))


def _read_marker(root: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((root / SPLIT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def split_once(src: Path, out: Path, wanted_ids: Iterable[str] | None) -> None:
    """Split a one-file input into ``out`` unless the split there already comes from the same file and ids (the
    split caps each video's nesting depth and size while streaming: one bad video is ``malformed_transcript``). A
    plain file edited since its split is re-split in part when it can be
    (:func:`~builders.sources.transcripts.raw_caption_resplit.resplit_raw_captions`), else whole."""
    from .raw_caption_resplit import resplit_raw_captions

    wanted = None if wanted_ids is None else set(wanted_ids)
    if _marker_key(_read_marker(out)) == _marker_key(_split_marker(src, wanted, None)):
        return
    if resplit_raw_captions(src, out, wanted) is None:
        split_raw_captions(src, out, wanted)
