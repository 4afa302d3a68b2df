"""Readers of timed transcripts: HowTo100M ``raw_caption.json`` and WhisperX per-video JSON
(docs/corpora/sieve_swap.md, "Inputs").

Both give a :class:`Transcript` of ``(start, end, text)`` segments in seconds, the input of the sieve and swap of
the paper (Batra et al., ECCV 2024, §4.2: transcript segments keep their ASR timestamps).
The raw-caption file is large (one JSON object over all videos), so :func:`split_raw_captions` streams it once with
``ijson`` into blocks of 1,000 videos with an id index (:class:`SplitIndex`); the stores then read one video at a
time. A video that cannot be read
raises :class:`TranscriptError` with its reason code (``no_transcript`` / ``malformed_transcript``), which the
pipeline turns into a counted drop.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import ijson

from builders.core.errors import InputError
from builders.sources.safe_open import (
    InputTooLarge,
    NotRegularFile,
    check_regular_file,
    open_input,
    read_input_bytes,
    whole_input_error,
)

logger = logging.getLogger(__name__)

Segment = tuple[float, float, str]

RAW_CAPTION_SOURCE = "howto100m_raw_caption"
WHISPERX_SOURCE = "whisperx"
NO_TRANSCRIPT = "no_transcript"
MALFORMED_TRANSCRIPT = "malformed_transcript"
MAX_TRANSCRIPT_BYTES = 64 << 20  # one video's transcript file; larger ones are malformed, not read
MAX_JSON_DEPTH = 32  # one video's JSON nesting (WhisperX nests 5 levels, raw_caption.json 3); deeper: malformed
STOPWORD_CHECK_MIN_TOKENS = 50  # caption.json (stop words removed) instead of raw_caption.json?
SPLIT_MARKER = "_split_done.json"
RAW_CAPTIONS_DIR = "raw_captions"
SPLIT_LAYOUT = "blocks-v1"  # block-NNNNN.jsonl + index.sqlite (a split of another layout is made again)
BLOCK_VIDEOS = 1000  # videos a block file of a split
INDEX_FILE = "index.sqlite"
_VIDEO_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOKEN_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass
class Transcript:
    """One video's timed transcript: ``segments`` are ``(start, end, text)`` in seconds, in file order."""

    video_id: str
    segments: list[Segment]
    source: str  # RAW_CAPTION_SOURCE | WHISPERX_SOURCE
    language: str | None = None
    length_mismatch: bool = False  # raw captions with text/start/end lists of unequal length (truncated)


class TranscriptError(Exception):
    """A video whose transcript cannot be used; ``reason`` is ``no_transcript`` or ``malformed_transcript``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in (NO_TRANSCRIPT, MALFORMED_TRANSCRIPT):
            raise ValueError(f"unknown transcript error reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def is_valid_video_id(video_id: Any) -> bool:
    """True for a string of 1–64 characters from ``[A-Za-z0-9_-]`` (YouTube ids), safe as a file name."""
    return isinstance(video_id, str) and _VIDEO_ID_RE.fullmatch(video_id) is not None


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


#: the prefix of a bare non-JSON token read as a string by :class:`_NonFiniteAsStrings` (a NUL: never a number)
BARE_TOKEN_MARK = "\x00bare:"
BARE_TOKEN_MARK_JSON = b"\\u0000bare:"


class _NonFiniteAsStrings:
    """A read-only binary stream over a JSON file that turns the bare tokens ``NaN``, ``Infinity`` and
    ``-Infinity`` (written by Python's ``json.dumps``; not JSON, so ijson stops at them) into the strings
    ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, which :func:`_as_time` reads back as floats, so the segment reaches
    the cleaning step and is dropped there as ``bad_segment`` (docs/reason-codes.md) instead of ending the split.

    Tokens inside strings are left alone: the in-string state is carried across chunks (escaped quotes and
    backslashes removed, then quotes counted); only a chunk holding a candidate token is rewritten token by token.
    """

    _CHUNK = 1 << 20
    _HOLD = 16  # bytes held back so that a token or an escape is never cut by a chunk border
    _WORD = frozenset(bytes([b]) for b in b"\\+-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    _TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*(")?|[+-]?[A-Za-z]+', re.DOTALL)
    #: a chunk that may hold a bare non-finite token (any case, signed): only such a chunk is rewritten
    _CANDIDATE = re.compile(rb'(?:\A|[\[,:])\s*[+-]?(?:[Nn][Aa][Nn]|[Ii][Nn][Ff])')
    _PYTHON_TOKENS = frozenset({b"NaN", b"Infinity", b"-Infinity"})  # what Python's json.dumps writes
    _OTHER_NON_FINITE = frozenset({b"nan", b"inf", b"infinity"})  # other spellings (C printf, numpy), any case

    def __init__(self, f: Any) -> None:
        self._f = f
        self._carry = b""
        self._in_string = False
        self._eof = False
        self._out = b""
        self.bytes_read = 0

    def _next_chunk(self) -> bytes:
        data = self._carry + (b"" if self._eof else self._f.read(self._CHUNK))
        if len(data) <= len(self._carry):
            self._eof = True
        if self._eof:
            self._carry, chunk = b"", data
        else:
            cut = stop = max(len(data) - self._HOLD, 0)
            while cut > max(stop - self._HOLD, 0) and data[cut - 1:cut] in self._WORD:
                cut -= 1  # never end a chunk inside a token or an escape
            self._carry, chunk = data[cut:], data[:cut]
        self.bytes_read += len(chunk)
        return self._rewrite(chunk) if self._CANDIDATE.search(chunk) else self._advance(chunk)

    def _advance(self, chunk: bytes) -> bytes:
        quotes = chunk.replace(b"\\\\", b"").replace(b'\\"', b"").count(b'"')
        self._in_string ^= bool(quotes % 2)
        return chunk

    def _rewrite(self, chunk: bytes) -> bytes:
        prefix = b'"' if self._in_string else b""
        text = prefix + chunk
        out: list[bytes] = []
        pos = 0
        in_string = False
        for m in self._TOKENS.finditer(text):
            out.append(text[pos:m.start()])
            token = m.group(0)
            if token.startswith(b'"'):
                in_string = m.group(1) is None
                out.append(token)
            else:
                in_string = False
                out.append(self._word(token))
            pos = m.end()
        out.append(text[pos:])
        self._in_string = in_string
        return b"".join(out)[len(prefix):]

    @classmethod
    def _word(cls, token: bytes) -> bytes:
        """A bare word outside strings: Python's ``NaN`` / ``Infinity`` / ``-Infinity`` become strings that read back
        as floats; another spelling of a non-finite number (``nan``, ``-inf``, ``+NaN``, any case) becomes a string
        starting with :data:`BARE_TOKEN_MARK`, which :func:`_as_time` refuses, so that video alone is
        ``malformed_transcript`` (docs/reason-codes.md) and the rest of the file is read; ``true`` / ``false`` /
        ``null`` and any other word are left to the parser."""
        if token in cls._PYTHON_TOKENS:
            return b'"' + token + b'"'
        if token.lstrip(b"+-").lower() in cls._OTHER_NON_FINITE:
            return b'"' + BARE_TOKEN_MARK_JSON + token + b'"'
        return token

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all that is buffered or the next chunk when ``n < 0``); ``read(0)`` is ``b""``."""
        if n == 0:
            return b""
        while not self._out and not (self._eof and not self._carry):
            self._out = self._next_chunk()
        if n < 0 or n >= len(self._out):
            data, self._out = self._out, b""
        else:
            data, self._out = self._out[:n], self._out[n:]
        return data


class _ValueTooBig(Exception):
    pass


def _skip_value(events: Iterator[tuple[str, Any]], depth: int) -> None:
    """Consume the events of a value whose container was opened ``depth`` levels deep (O(1) memory)."""
    while depth:
        event, _ = next(events)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1


def _build_value(events: Iterator[tuple[str, Any]], event: str, value: Any, max_depth: int,
                 max_bytes: int) -> tuple[Any, str]:
    """One JSON value from ijson ``basic_parse`` events (its first event given): ``(value, "")``, or
    ``(None, problem)`` for a value nested deeper than ``max_depth`` or estimated above ``max_bytes`` (the rest of
    the value is then consumed without being built, so memory stays bounded whatever the file holds)."""
    if event not in ("start_map", "start_array"):
        return value, ""
    root: Any = {} if event == "start_map" else []
    stack: list[Any] = [root]
    keys: list[str | None] = [None]
    size = 2
    while stack:
        event, value = next(events)
        if event in ("end_map", "end_array"):
            stack.pop()
            keys.pop()
            continue
        if event == "map_key":
            keys[-1] = value
            size += len(value) + 3
            continue
        if event in ("start_map", "start_array"):
            if len(stack) >= max_depth:
                _skip_value(events, len(stack) + 1)
                return None, f"JSON nested deeper than {max_depth} levels"
            item: Any = {} if event == "start_map" else []
        else:
            item = value
            size += len(value) + 2 if isinstance(value, str) else 8
        parent = stack[-1]
        if isinstance(parent, dict):
            parent[keys[-1]] = item
        else:
            parent.append(item)
        if event in ("start_map", "start_array"):
            stack.append(item)
            keys.append(None)
            size += 2
        if size > max_bytes:
            _skip_value(events, len(stack))
            return None, f"more than {max_bytes} bytes of JSON"
    return root, ""


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


def _write_index(root: Path, entries: dict[str, tuple[int, int, int, str, str]]) -> None:
    """The split's ``index.sqlite``: ``video_id -> (block, offset, length, sha256, error)``, written atomically."""
    import sqlite3

    tmp = root / f".{INDEX_FILE}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.execute("CREATE TABLE videos (video_id TEXT PRIMARY KEY, block INTEGER, offset INTEGER, "
                    "length INTEGER, sha256 TEXT, error TEXT) WITHOUT ROWID")
        con.executemany("INSERT INTO videos VALUES (?, ?, ?, ?, ?, ?)",
                        ((vid, *e) for vid, e in sorted(entries.items())))
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
    The careful reader streams ijson ``basic_parse`` events (the file is never loaded whole) and builds one video's
    value at a time, capped at :data:`MAX_JSON_DEPTH` levels and :data:`MAX_TRANSCRIPT_BYTES` (read at call time): a
    video over a cap is not written; its index entry records why, which makes it a ``malformed_transcript`` drop
    (counted as ``too_big``), so a 200 KB file of 100,000 nested arrays costs no memory. ``NaN`` / ``Infinity``
    tokens are read as strings (see :class:`_NonFiniteAsStrings`): the segment, not the rest of the file, is lost.
    Ids that are not ``[A-Za-z0-9_-]{1,64}`` are never used and are counted as ``bad_id``; ids outside
    ``wanted_ids`` (when given) as ``skipped_unwanted``; a repeated id keeps its last value (as ``json.load`` does).
    Every file is written atomically; re-running rewrites the same files (idempotent). A JSON syntax error (e.g. a
    truncated download) stops the split: what was read is kept, ``json_error`` is 1, the video being read is
    recorded as malformed, the marker records the error and every video not found is then ``malformed_transcript``
    (the file could not be read to its end), not ``no_transcript``. A marker ``SPLIT_MARKER`` with the source's
    size/mtime, the layout, the counts and the error is written last. Raises
    :class:`~builders.core.errors.InputError` for a file that is not a JSON object. Returns the counts.
    """
    src = Path(path)
    _require_raw_caption_file(src)
    _check_json_object_file(src)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / SPLIT_MARKER).unlink(missing_ok=True)  # a split that is cut short is never taken for a finished one
    max_bytes = MAX_TRANSCRIPT_BYTES
    fast = _split_plain(src, out, wanted_ids, max_bytes)
    if fast is not None:
        entries, counts, too_big, last_block = fast
        return _finish_split(src, out, wanted_ids, entries, counts, too_big, last_block, "")
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
                        entries[video_id] = (*blocks.add(json.dumps(obj).encode("utf-8")), "")
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
    if not is_valid_video_id(video_id):
        counts["bad_id"] += 1
        if counts["bad_id"] <= 10:
            logger.warning("raw captions: ignoring unsafe video id %r", str(video_id)[:80])
        return True
    if wanted_ids is not None and video_id not in wanted_ids:
        counts["skipped_unwanted"] += 1
        return True
    return False


def _split_plain(src: Path, out: Path, wanted_ids: set[str] | None, max_bytes: int) -> tuple[
        dict[str, tuple[int, int, int, str, str]], dict[str, int], int, int] | None:
    """The split of a plain file at C speed (``builders/sources/json_entries.py``): ``(entries, counts, too_big,
    last block)``, or None when the file needs the careful reader (its blocks are then written again). A value is
    taken here only when it is far below ``max_bytes`` (at most an eighth, in characters: the careful reader's size
    estimate is at most four times a value's length), so both readers keep and refuse the same videos."""
    from .json_entries import NotPlain, plain_object_entries

    counts = {"videos": 0, "skipped_unwanted": 0, "bad_id": 0, "json_error": 0}
    entries: dict[str, tuple[int, int, int, str, str]] = {}
    blocks = _BlockWriter(out)
    try:
        with _open_raw_captions(src) as f:
            for video_id, value in plain_object_entries(f, max_value_chars=min(8 << 20, max_bytes // 8),
                                                        max_depth=MAX_JSON_DEPTH):
                if _skip_video(video_id, wanted_ids, counts):
                    continue
                entries[video_id] = (*blocks.add(json.dumps(value).encode("utf-8")), "")
                counts["videos"] += 1
        blocks.close()
    except NotPlain as why:
        blocks.abort()
        logger.info("raw captions %s: read with the careful reader (%s)", src.name, why)
        return None
    except BaseException:
        blocks.abort()
        raise
    return entries, counts, 0, blocks.block


def _finish_split(src: Path, out: Path, wanted_ids: set[str] | None,
                  entries: dict[str, tuple[int, int, int, str, str]], counts: dict[str, int], too_big: int,
                  last_block: int, error: str) -> dict[str, int]:
    """Remove blocks past ``last_block``, write the index and then the marker; returns the counts."""
    for stale in out.glob("block-*.jsonl"):  # blocks of an earlier, longer split of another file
        if stale.name > block_path(out, last_block).name:
            stale.unlink()
    _write_index(out, entries)
    if too_big:
        counts["too_big"] = too_big
    marker = _split_marker(src, wanted_ids, counts)
    marker["error"] = error
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
        for i in range(0, len(ids), 500):  # SQLite's limit of bound parameters
            part = ids[i:i + 500]
            q = f"SELECT * FROM videos WHERE video_id IN ({','.join('?' * len(part))})"
            out.update({r[0]: tuple(r[1:]) for r in db.execute(q, part)})
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
        if length > MAX_TRANSCRIPT_BYTES:
            raise TranscriptError(MALFORMED_TRANSCRIPT, f"{video_id}: {length} bytes > {MAX_TRANSCRIPT_BYTES}")
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


# --------------------------------------------------------------------------------------------- parsing


def read_transcript_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of one video's transcript file (``builders/sources/safe_open.py``): ``no_transcript`` when absent;
    ``malformed_transcript`` for a FIFO, device or directory (refused unread: never a hang), a loop of links, more than
    ``max_bytes`` bytes read (whatever ``stat`` says) or a read error (docs/reason-codes.md)."""
    try:
        return read_input_bytes(path, max_bytes=max_bytes, what="transcript")
    except FileNotFoundError:
        raise TranscriptError(NO_TRANSCRIPT, f"no file {path.name}") from None
    except InputTooLarge:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{path.name}: more than {max_bytes} bytes") from None
    except NotRegularFile as err:
        raise TranscriptError(MALFORMED_TRANSCRIPT, str(err)[:300]) from None
    except (OSError, ValueError) as err:  # ValueError: a path with a NUL byte
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{path.name}: unreadable: {err}"[:300]) from None


def _load_json_file(path: Path) -> Any:
    """Parse one transcript file; ``no_transcript`` when absent, ``malformed_transcript`` when not a regular file, too
    big or invalid."""
    return _parse_json_bytes(path.name, read_transcript_file(path, MAX_TRANSCRIPT_BYTES))


def _parse_json_bytes(name: str, data: bytes) -> Any:
    """One video's JSON value from its bytes; ``malformed_transcript`` when not UTF-8 JSON."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"{name}: invalid JSON: {err}") from None


def _as_time(value: Any) -> float:
    """A segment time as float; NaN/inf floats pass (the cleaning step drops them as ``bad_segment``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        if value.startswith(BARE_TOKEN_MARK):
            raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment time is a bare {value[len(BARE_TOKEN_MARK):]!r}, "
                                                        "not JSON (only NaN, Infinity and -Infinity are read)"[:200])
        try:
            return float(value)
        except ValueError:
            pass
    raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment time is not a number: {value!r}"[:200])


def _as_text(value: Any) -> str:
    if not isinstance(value, str) or value.startswith(BARE_TOKEN_MARK):
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"segment text is not a string: {value!r}"[:200])
    return value


def parse_raw_caption(video_id: str, obj: Any) -> Transcript:
    """A transcript from one raw-caption value ``{"text": [str], "start": [num], "end": [num]}``.

    Lists of unequal length are truncated to the shortest and flagged ``length_mismatch`` (docs/reason-codes.md).
    """
    if not isinstance(obj, dict):
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"not a JSON object but {type(obj).__name__}")
    lists = {key: obj.get(key) for key in ("text", "start", "end")}
    bad = [key for key, value in lists.items() if not isinstance(value, list)]
    if bad:
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"missing or non-list field(s): {', '.join(bad)}")
    texts, starts, ends = lists["text"], lists["start"], lists["end"]
    n = min(len(texts), len(starts), len(ends))
    segments = [(_as_time(s), _as_time(e), _as_text(t)) for s, e, t in zip(starts[:n], ends[:n], texts[:n])]
    mismatch = not (len(texts) == len(starts) == len(ends))
    return Transcript(video_id, segments, RAW_CAPTION_SOURCE, None, mismatch)


def _whisperx_segment(seg: Any) -> Segment:
    if not isinstance(seg, dict) or not {"start", "end", "text"} <= seg.keys():
        raise TranscriptError(MALFORMED_TRANSCRIPT, "segment is not an object with start, end and text")
    return _as_time(seg["start"]), _as_time(seg["end"]), _as_text(seg["text"])


def parse_whisperx(video_id: str, obj: Any) -> Transcript:
    """A transcript from a WhisperX output: ``segments[*].start/end/text`` and top-level ``language``
    (docs/corpora/sieve_swap.md, Inputs).

    Word-level entries are ignored (words may lack times); a non-string ``language`` is read as unknown.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list):
        raise TranscriptError(MALFORMED_TRANSCRIPT, "not a JSON object with a 'segments' list")
    segments = [_whisperx_segment(seg) for seg in obj["segments"]]
    language = obj.get("language")
    return Transcript(video_id, segments, WHISPERX_SOURCE, language if isinstance(language, str) else None)


@cache
def english_stop_words() -> frozenset[str]:
    """spaCy's English stop words (a plain set; no model is loaded), or empty when spaCy is not installed.

    The list is a plain module (``spacy/lang/en/stop_words.py``, no import inside) loaded by path: importing it
    through the package runs ``spacy/__init__`` (2.4 s of CPU in every worker, issue 19). If it cannot be loaded so,
    the package import is the fallback."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("spacy")  # finds the package without running its __init__
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "lang" / "en" / "stop_words.py"
        mod_spec = importlib.util.spec_from_file_location("_procvid_spacy_en_stop_words", path)
        if path.is_file() and mod_spec is not None and mod_spec.loader is not None:
            module = importlib.util.module_from_spec(mod_spec)
            try:
                mod_spec.loader.exec_module(module)
                return frozenset(module.STOP_WORDS)
            except Exception:  # noqa: BLE001 - a changed layout: the package import below
                pass
    try:
        from spacy.lang.en.stop_words import (
            STOP_WORDS,  # imported lazily: importing spacy takes seconds
        )
    except ImportError:
        logger.warning("spaCy is not installed: the caption.json stop-word check is skipped")
        return frozenset()
    return frozenset(STOP_WORDS)


def lacks_stop_words(segments: Iterable[Segment], min_tokens: int = STOPWORD_CHECK_MIN_TOKENS) -> bool:
    """True when the text has at least ``min_tokens`` tokens and none is an English stop word (spaCy's list).

    The sign of HowTo100M ``caption.json`` (stop words removed) passed instead of ``raw_caption.json``
    (docs/corpora/sieve_swap.md, Inputs). Always False when the stop-word list is unavailable.
    """
    tokens = _TOKEN_RE.findall(" ".join(text for _, _, text in segments).lower())
    if len(tokens) < min_tokens or not (stop_words := english_stop_words()):
        return False
    return not any(token in stop_words for token in tokens)


# --------------------------------------------------------------------------------------------- stores


def _require_dir(root: str | Path) -> Path:
    p = Path(root)
    if not p.is_dir():
        raise FileNotFoundError(f"transcript directory not found: {p}")
    return p


def _checked_id(video_id: Any) -> str:
    if not is_valid_video_id(video_id):
        raise TranscriptError(NO_TRANSCRIPT, f"invalid video id {str(video_id)[:80]!r}")
    return video_id


class RawCaptionStore:
    """Per-video raw captions of a split written by :func:`split_raw_captions` (``split_counts`` from its marker)."""

    def __init__(self, root: str | Path) -> None:
        self.root = _require_dir(root)
        self.index = SplitIndex(self.root)
        self.split_counts: dict[str, int] | None = self.index.counts
        self.split_error: str = self.index.error
        self._warned: set[str] = set()

    def get(self, video_id: str) -> Transcript:
        """The video's transcript; raises :class:`TranscriptError`. Warns once per video on stop-word-free text."""
        vid = _checked_id(video_id)
        transcript = parse_raw_caption(vid, _parse_json_bytes(vid, self.index.read_bytes(vid)))
        if vid not in self._warned and lacks_stop_words(transcript.segments):
            self._warned.add(vid)
            logger.warning(
                "video %s: %d+ caption tokens and no English stop word; is this caption.json (stop words "
                "removed) instead of raw_caption.json? (docs/corpora/sieve_swap.md, Inputs)", vid,
                STOPWORD_CHECK_MIN_TOKENS,
            )
        return transcript


class WhisperXStore:
    """A directory of WhisperX outputs named ``<video_id>.json``."""

    def __init__(self, root: str | Path) -> None:
        self.root = _require_dir(root)

    def get(self, video_id: str) -> Transcript:
        """The video's transcript; raises :class:`TranscriptError`."""
        vid = _checked_id(video_id)
        return parse_whisperx(vid, _load_json_file(self.root / f"{vid}.json"))


def open_transcripts(
    path: str | Path, work_dir: str | Path, wanted_ids: set[str] | None = None
) -> RawCaptionStore | WhisperXStore:
    """A store over ``path``: a directory is read as WhisperX outputs; a file as HowTo100M ``raw_caption.json``,
    split once into ``work_dir/raw_captions`` (re-split only when the source file or ``wanted_ids`` changed).
    """
    src = Path(path)
    if src.is_dir():
        return WhisperXStore(src)
    if not src.exists():
        raise FileNotFoundError(f"transcripts not found: {src}")
    _require_raw_caption_file(src)
    out = Path(work_dir) / RAW_CAPTIONS_DIR
    if _marker_key(_read_marker(out)) != _marker_key(_split_marker(src, wanted_ids, None)):
        split_raw_captions(src, out, wanted_ids)
    return RawCaptionStore(out)


def transcript_item_digests(video_ids: list[str], split_root: str | Path | None, whisperx_dir: str | Path | None,
                            memo: Any = None) -> list[str]:
    """What each video's transcript contributes to its rows, for a step's ``item_digest`` (README.md "Caching and resume": an
    edit reruns one video's shards): its entry of a ``raw_caption.json`` split under ``split_root``
    (:meth:`SplitIndex.digest`: the sha256 of its bytes, its error, ``-`` when absent), else the content sha256 of its
    WhisperX file ``<whisperx_dir>/<id>.json`` through the fingerprint ``memo`` (a ``stat`` and a look-up while
    unchanged; ``-`` when absent, the error's name when it cannot be read, e.g. a folder in its place). An id that is
    not a safe file name is refused unread by the stores: ``-``. Whether a split stopped at a JSON error (every video
    it did not reach is then ``malformed_transcript``) is not in these digests: key the whole stage on it."""
    from ..core.fingerprint import item_file_sha

    if split_root is not None:
        index = SplitIndex(split_root)
        try:
            entries = index.entries(video_ids)
            return [index.digest(v, entries.get(v)) for v in video_ids]
        finally:
            index.close()
    out = []
    for v in video_ids:
        if not is_valid_video_id(v) or not whisperx_dir:
            out.append("-")
            continue
        try:
            out.append(item_file_sha(Path(whisperx_dir) / f"{v}.json", memo))
        except OSError as e:
            out.append(f"!{type(e).__name__}")
    return out
