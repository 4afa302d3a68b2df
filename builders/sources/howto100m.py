"""Readers of HowTo100M metadata and its side files (docs/corpora/sieve_swap.md).

- ``HowTo100M_v1.csv``: ``video_id,category_1,category_2,rank,task_id`` (also a CSV or JSONL with at least
  ``video_id``);
- ``task_ids.csv``: ``task_id<TAB>task_name``, with or without a header line;
- ``video_titles``: CSV ``video_id,title`` or JSONL ``{"video_id", "title"}``;
- ``video_durations``: CSV ``video_id,duration`` or YouCook2-style ``vid_id,duration,total_frame``.

The paper (Batra et al., ECCV 2024, §4.2) starts from HowTo100M cooking videos, their task names
and titles. Every reader streams, validates each record and turns a bad one into a :class:`Drop` with a named reason;
a missing file or an unusable header is a configuration error (``FileNotFoundError`` / ``ValueError``) raised at call
time, before any row is read. The generic line / CSV / JSONL helpers here are shared by the other source readers.
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from builders.core.errors import InputError
from builders.core.records import Drop, Row
from builders.sources.safe_open import check_regular_file, open_input, whole_input_error
from builders.sources.transcripts import is_valid_video_id

STAGE = "read_metadata"
TASKS_STAGE = "read_task_ids"
TITLES_STAGE = "read_titles"
DURATIONS_STAGE = "read_durations"

MAX_FIELD_CHARS = 1 << 20  # a CSV field over 1 MiB is a bad record, not a crash
MAX_RECORD_CHARS = 8 * MAX_FIELD_CHARS  # bounds the memory of a runaway quoted field
MAX_LINE_BYTES = 1 << 20  # one JSONL / TSV / id-list line
JSONL_SUFFIXES = frozenset({".jsonl", ".json", ".ndjson"})
METADATA_DEFAULTS: dict[str, Any] = {"category_1": "", "category_2": "", "rank": None, "task_id": -1}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # ids end up in int64 parquet columns
_INT_RE = re.compile(r"\s*[+-]?\d+(?:\.0*)?\s*")
_UNDECODABLE_RE = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, kept by errors="surrogateescape"


# --------------------------------------------------------------------------------------------- generic helpers


def require_file(path: str | Path, what: str = "input file") -> Path:
    """Return ``path`` as a Path when it is an existing regular file (links followed): ``FileNotFoundError`` when it
    does not exist, :class:`InputError` (exit 2, one line) for a FIFO, a device, a directory or a loop of links
    (``builders/sources/safe_open.py``, docs/reason-codes.md)."""
    p = Path(path)
    try:
        check_regular_file(p, what)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {p}") from None
    except OSError as err:
        raise whole_input_error(err, p, what) from None
    return p


def open_whole_input(path: str | Path, *, text: bool = False, what: str = "input file", **kwargs: Any) -> IO[Any]:
    """:func:`~builders.sources.safe_open.open_input` of a whole input (a manifest, a CSV, a JSONL file), streamed
    without a byte cap: a file that is not a regular file is an :class:`InputError` naming it (exit 2)."""
    try:
        return open_input(path, max_bytes=None, what=what, text=text, **kwargs)  # type: ignore[call-overload]
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path}") from None
    except OSError as err:
        raise whole_input_error(err, path, what) from None


def raise_csv_field_limit() -> int:
    """Raise ``csv.field_size_limit`` to the largest value the C ``long`` takes (RecipeNLG rows need it); return it."""
    limit = min(sys.maxsize, 2**31 - 1)  # a C long is 32-bit on Windows
    csv.field_size_limit(limit)
    return limit


def _parse_any_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and len(value) <= 64 and _INT_RE.fullmatch(value):
        return int(value.strip().split(".")[0])  # "6.0" -> 6
    raise ValueError(f"not an integer: {str(value)[:40]!r}")


def parse_int(value: Any) -> int:
    """An int64 from an int, an integral float or a string such as ``"25938"`` / ``"6.0"``; else ``ValueError``."""
    number = _parse_any_int(value)
    if not INT64_MIN <= number <= INT64_MAX:
        raise ValueError(f"integer out of int64 range: {str(number)[:40]}")
    return number


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a text file: the line it starts on, its value (``None`` when unusable) and a problem."""

    line_no: int
    value: Any
    problem: str = ""
    line: str = ""  # the raw first line of a record whose fields could not be split (an unterminated quote)


class _RecordTooLarge(Exception):
    pass


class _RecordSpansLines(Exception):
    pass


class _CappedLines:
    """Line iterator for ``csv.reader`` that refuses a record growing past ``cap`` characters and remembers the lines
    of the current record, so that a record that must be re-read line by line can be pushed back.

    ``csv.reader`` resets its state on the next call after an exception from its input, so a runaway quoted field
    costs one drop and at most ``cap`` characters of memory. ``eof_in_record`` says the file ended inside a record
    (an unterminated quoted field: ``csv`` then returns the rest of the file as its last field, without an error).
    """

    def __init__(self, f: IO[str], cap: int, multiline: bool = True) -> None:
        self._f, self._cap, self.multiline = f, cap, multiline
        self.pending = 0  # characters fed since the current record started
        self.line_no = 0
        self.record_start = 1
        self.record_lines: list[str] = []  # the lines of the current record (bounded by ``cap`` characters)
        self.eof_in_record = False
        self._pushed: list[str] = []  # lines to read again, in reverse order

    def __iter__(self) -> _CappedLines:
        return self

    def new_record(self) -> None:
        self.pending = 0
        self.record_lines = []
        self.eof_in_record = False

    def push_back(self, lines: list[str], first_line_no: int) -> None:
        """Read ``lines`` again (they start at line ``first_line_no``)."""
        self._pushed.extend(reversed(lines))
        self.line_no = first_line_no - 1

    def __next__(self) -> str:
        if not self.multiline and self.record_lines:
            raise _RecordSpansLines("a quoted field runs past the end of its line")
        line = self._pushed.pop() if self._pushed else self._f.readline(self._cap + 1)
        if not line:
            if self.pending:
                self.eof_in_record = True
            raise StopIteration
        if self.pending == 0:
            self.record_start = self.line_no + 1
        self.line_no += 1
        self.pending += len(line)
        self.record_lines.append(line)
        if self.pending > self._cap:
            if not line.endswith(("\n", "\r")):
                self.record_lines.pop()
            while line and not line.endswith(("\n", "\r")):  # skip the rest of an over-long line
                line = self._f.readline(self._cap + 1)
            raise _RecordTooLarge(f"record over {self._cap} characters")
        return line


def _field_problem(fields: list[str], max_field_chars: int) -> str:
    for field in fields:
        if len(field) > max_field_chars:
            return f"field over {max_field_chars} characters"
        if _UNDECODABLE_RE.search(field):
            return "undecodable bytes (not UTF-8)"
    return ""


def iter_csv_records(
    path: str | Path, *, delimiter: str = ",", max_field_chars: int = MAX_FIELD_CHARS, multiline: bool = True,
    columns: int | None = None, header_columns: bool = False,
) -> Iterator[Record]:
    """Stream the non-blank records of a UTF-8 CSV file (header included) as :class:`Record` of ``list[str]``.

    A record with a field over ``max_field_chars``, non-UTF-8 bytes or a CSV syntax error comes with a ``problem``
    (its value is ``None`` when the fields could not be split); reading goes on with the next record.

    A quoted field may span lines only when ``multiline`` (RecipeNLG); a record that spans lines although it may
    not, that runs to the end of the file inside a quote, or (with ``columns``) that spans lines and has another
    number of columns, is an unterminated quote: its first line alone becomes a record with that ``problem`` and
    reading resumes at the line after it, so one stray ``"`` never swallows the rows after it.

    ``header_columns``: the first record is the header, read on its line alone, and its field count is ``columns``
    for the records after it: a quoted field holding a line break (a title written over two lines) is data, read with
    the csv module's own quoting, while a quote left open still costs only its own line.
    """
    raise_csv_field_limit()
    with open_whole_input(path, text=True, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        lines = _CappedLines(f, cap=8 * max_field_chars, multiline=multiline and not header_columns)
        reader = csv.reader(lines, delimiter=delimiter)
        header_pending = header_columns
        while True:
            lines.new_record()
            try:
                fields = next(reader)
            except StopIteration:
                return
            except _RecordSpansLines:
                yield from _resync(lines, "", unterminated=True)
                reader = csv.reader(lines, delimiter=delimiter)
                continue
            except (_RecordTooLarge, csv.Error) as err:
                yield from _resync(lines, f"{type(err).__name__}: {err}")
                reader = csv.reader(lines, delimiter=delimiter)
                continue
            spanned = len(lines.record_lines) > 1
            if spanned and (not multiline or lines.eof_in_record or (columns is not None and len(fields) != columns)):
                yield from _resync(lines, "", unterminated=True)
                reader = csv.reader(lines, delimiter=delimiter)
                continue
            if fields:
                if header_pending:  # the header read on its own line: its width bounds the records after it
                    header_pending, columns, lines.multiline = False, len(fields), multiline
                yield Record(lines.record_start, fields, _field_problem(fields, max_field_chars))


def _resync(lines: _CappedLines, problem: str, unterminated: bool = False) -> Iterator[Record]:
    """The record that just failed as one bad record of its first line; its other lines are pushed back."""
    start, rest = lines.record_start, lines.record_lines[1:]
    if rest or unterminated:
        end = start + len(lines.record_lines) - 1
        where = f"runs to line {end}" if rest else "is not closed on its line"
        problem = (f"unterminated quoted field: the quote opened on line {start} {where}"
                   f"{' (end of file)' if lines.eof_in_record else ''}{f'; {problem}' if problem else ''}; "
                   f"this line is dropped, reading resumes at line {start + 1}")
        lines.push_back(rest, start + 1)
    first = lines.record_lines[0] if lines.record_lines else ""
    yield Record(start, None, problem, first[:MAX_LINE_BYTES])


def read_csv_header(path: str | Path, *, delimiter: str = ",") -> list[str]:
    """The stripped column names of the first record of a CSV file; :class:`InputError` if empty or unreadable."""
    for record in iter_csv_records(path, delimiter=delimiter, multiline=False):
        if record.problem:
            raise InputError(f"{path}: unreadable header line ({record.problem})")
        return check_unique_header(path, [name.strip() for name in record.value])
    raise InputError(f"{path}: empty file, no header")


def check_unique_header(path: str | Path, header: list[str]) -> list[str]:
    """``header`` when no column name appears twice; else :class:`InputError` naming the repeated column (a row
    would silently take the last column of that name; docs/reason-codes.md: an unusable whole input stops the build)."""
    seen: set[str] = set()
    for name in header:
        if name and name in seen:
            raise InputError(f"{path}: the header names column {name!r} twice ({','.join(header)[:200]}): "
                             "rename or remove one")
        seen.add(name)
    return header


def iter_text_lines(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Record]:
    """Stream the non-blank lines of a UTF-8 text file as :class:`Record` of ``str`` (line ending removed).

    A line over ``max_line_bytes`` or with non-UTF-8 bytes comes with a ``problem`` and value ``None``.
    """
    with open_whole_input(path) as f:
        line_no = 0
        while raw := f.readline(max_line_bytes + 1):
            line_no += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):
                    raw = f.readline(max_line_bytes + 1)
                yield Record(line_no, None, f"line over {max_line_bytes} bytes")
                continue
            if line_no == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                yield Record(line_no, None, "undecodable bytes (not UTF-8)")
                continue
            if text.strip():
                yield Record(line_no, text)


def iter_jsonl_records(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Record]:
    """Stream the non-blank lines of a JSONL file as :class:`Record` of parsed JSON values (any type)."""
    for record in iter_text_lines(path, max_line_bytes=max_line_bytes):
        if record.problem:
            yield record
            continue
        try:
            yield Record(record.line_no, json.loads(record.value))
        except (ValueError, RecursionError) as err:
            yield Record(record.line_no, None, f"invalid JSON: {err}")


def is_jsonl(path: str | Path) -> bool:
    """True for a ``.jsonl``/``.json``/``.ndjson`` file or one whose first non-blank character is ``{``."""
    p = Path(path)
    if p.suffix.lower() in JSONL_SUFFIXES:
        return True
    with open_whole_input(p) as f:
        head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()
    return head.startswith(b"{")


# --------------------------------------------------------------------------------------------- metadata


def _text_field(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string: {value!r}")
    return value.strip()


def _metadata_row(record: dict[str, Any], ordinal: int) -> Row:
    """One metadata row from a mapping of raw values (CSV strings or JSON values); ``ValueError`` if malformed."""
    video_id = _text_field(record.get("video_id"), "video_id")
    if not video_id:
        raise ValueError("empty video_id")
    if not is_valid_video_id(video_id):
        raise ValueError(f"video_id {video_id[:80]!r} is not a YouTube id ([A-Za-z0-9_-]{{1,64}})")
    row: Row = {"video_id": video_id, **METADATA_DEFAULTS}
    row["category_1"] = _text_field(record.get("category_1"), "category_1")
    row["category_2"] = _text_field(record.get("category_2"), "category_2")
    rank = record.get("rank")
    if rank is not None and not (isinstance(rank, str) and not rank.strip()):
        row["rank"] = parse_int(rank)
    if "task_id" in record:
        row["task_id"] = parse_int(record["task_id"])  # missing or non-integer -> ValueError
    row["_ord"] = ordinal
    return row


def _metadata_drop(item_id: str, detail: str) -> Drop:
    return Drop(item_id, STAGE, "malformed_metadata_row", detail)


def cut_record_field(rec: Record, col: int, delimiter: str = ",") -> tuple[str, bool]:
    """Field ``col`` (0-based) of a record whose fields could not be split (``rec.value`` is None: an unterminated
    quote), read from its raw first line, and whether it is sure. Sure: the field ends before the quote left open, so
    the csv module reads it whole (``vid,"Food...``, ``"vid","Food...``). Else a best-effort guess: the line split at
    every delimiter, blanks and quotes around the piece removed (``"vid,Food...`` gives ``vid``). ``""`` when the
    line has no such piece."""
    try:
        fields = next(csv.reader([rec.line], delimiter=delimiter), [])
    except csv.Error:  # a NUL byte, a line over the field limit
        fields = []
    if len(fields) > col + 1:  # the last field holds the open quote and the rest of the line
        return fields[col].strip(), True
    pieces = rec.line.split(delimiter)
    return (pieces[col].strip().strip('"').strip() if len(pieces) > col else ""), False


def cut_row_id(rec: Record, id_col: int, valid: Callable[[str], bool] = is_valid_video_id,
               delimiter: str = ",") -> tuple[str, str]:
    """``(item_id, note)`` of a record cut by an unterminated quote: its id field as :func:`cut_record_field` reads
    it, when ``valid``, else ``""`` (the caller then names the row by its ordinal). ``note`` (appended to the drop's
    detail) says that the name is a best-effort guess from the raw line, and quotes a field that is not ``valid``."""
    field, sure = cut_record_field(rec, id_col, delimiter)
    if not field:
        return "", ""
    how = "read before the quote left open" if sure else "split at every delimiter, its quotes removed"
    shown = field[:80].encode("ascii", "backslashreplace").decode("ascii")
    if valid(field):
        return field, f"; the id {shown!r} is a best-effort guess: field {id_col + 1} of the line, {how}"
    return "", f"; field {id_col + 1} of the line reads {shown!r} (best effort: {how}), not a valid id"


def _metadata_from_csv(path: Path, header: list[str]) -> Iterator[Row | Drop]:
    records = iter_csv_records(path, header_columns=True)
    next(records)  # the header, checked by the caller
    id_col = header.index("video_id")
    for ordinal, rec in enumerate(records):
        fields = rec.value or []
        note = ""
        if rec.value is None:  # an unterminated quote: the id field of its raw line names the row (best effort)
            guess, note = cut_row_id(rec, id_col)
        elif rec.problem:
            guess = ""
        else:
            guess = fields[id_col].strip() if len(fields) > id_col else ""
        item_id = guess or f"row:{ordinal}"
        if rec.problem:
            yield _metadata_drop(item_id, f"line {rec.line_no}: {rec.problem}{note}")
        elif len(fields) != len(header):
            yield _metadata_drop(item_id, f"line {rec.line_no}: {len(fields)} columns, expected {len(header)}")
        else:
            try:
                yield _metadata_row(dict(zip(header, fields)), ordinal)
            except ValueError as err:
                yield _metadata_drop(item_id, f"line {rec.line_no}: {err}")


def _metadata_from_jsonl(path: Path) -> Iterator[Row | Drop]:
    for ordinal, rec in enumerate(iter_jsonl_records(path)):
        value = rec.value
        vid = value.get("video_id") if isinstance(value, dict) else None
        item_id = vid.strip() if isinstance(vid, str) and vid.strip() else f"row:{ordinal}"
        if rec.problem:
            yield _metadata_drop(item_id, f"line {rec.line_no}: {rec.problem}")
        elif not isinstance(value, dict):
            yield _metadata_drop(item_id, f"line {rec.line_no}: not a JSON object")
        else:
            try:
                yield _metadata_row(value, ordinal)
            except ValueError as err:
                yield _metadata_drop(item_id, f"line {rec.line_no}: {err}")


def read_metadata(path: str | Path) -> Iterator[Row | Drop]:
    """Stream ``HowTo100M_v1.csv`` (docs/corpora/sieve_swap.md, Inputs) as rows or ``malformed_metadata_row`` drops
    (docs/reason-codes.md).

    Rows: ``{"video_id", "category_1", "category_2", "rank": int | None, "task_id": int, "_ord": int}``, where
    ``_ord`` is the 0-based data-row ordinal (later used to keep the first row of a duplicated video). A CSV or
    JSONL with at least ``video_id`` is accepted too; absent fields take :data:`METADATA_DEFAULTS`. Raises
    ``FileNotFoundError`` / ``ValueError`` (no ``video_id`` column) at call time.
    """
    p = require_file(path)
    if is_jsonl(p):
        return _metadata_from_jsonl(p)
    header = read_csv_header(p)
    if "video_id" not in header:
        raise InputError(f"{p}: no video_id column in header {header} (HowTo100M_v1.csv: "
                         "video_id,category_1,category_2,rank,task_id)")
    return _metadata_from_csv(p, header)


# --------------------------------------------------------------------------------------------- task ids


def read_task_ids(path: str | Path) -> tuple[dict[int, str], list[Drop]]:
    """Read ``task_ids.csv`` (``task_id<TAB>task_name``, docs/corpora/sieve_swap.md, Inputs) into ``{task_id:
    task_name}``.

    The first line is a header when its first field is not an integer. A line without exactly two fields, with a
    non-integer id, an empty name or a repeated id becomes ``Drop(reason="malformed_task_row")`` (first one wins).
    """
    p = require_file(path)
    tasks: dict[int, str] = {}
    drops: list[Drop] = []
    for index, rec in enumerate(iter_text_lines(p)):
        item_id = f"line:{rec.line_no}"
        if rec.problem:
            drops.append(Drop(item_id, TASKS_STAGE, "malformed_task_row", rec.problem))
            continue
        fields = rec.value.split("\t")
        try:
            task_id = parse_int(fields[0])
        except ValueError:
            if index == 0:
                continue  # header line
            drops.append(Drop(item_id, TASKS_STAGE, "malformed_task_row", f"non-integer task id {fields[0]!r}"))
            continue
        name = fields[1].strip() if len(fields) == 2 else ""
        if len(fields) != 2:
            problem = f"{len(fields)} fields, expected 2"
        elif not name:
            problem = "empty task name"
        elif task_id in tasks:
            problem = f"duplicate task id {task_id}"
        else:
            tasks[task_id] = name
            continue
        drops.append(Drop(str(task_id), TASKS_STAGE, "malformed_task_row", f"line {rec.line_no}: {problem}"))
    return tasks, drops


# --------------------------------------------------------------------------------------------- titles


def _titles_csv_columns(path: Path) -> tuple[int, int, int]:
    """``(id column, title column, column count)`` of a titles CSV; ``ValueError`` when a column is missing."""
    header = read_csv_header(path)
    if "video_id" not in header or "title" not in header:
        raise InputError(f"{path}: titles CSV needs video_id and title columns, got {header}")
    return header.index("video_id"), header.index("title"), len(header)


def _title_records(path: Path, columns: tuple[int, int, int] | None) -> Iterator[tuple[int, Any, Any, str]]:
    """``(line_no, video_id, title, problem)`` from a titles JSONL file (``columns=None``) or CSV file."""
    if columns is None:
        for rec in iter_jsonl_records(path):
            value = rec.value if isinstance(rec.value, dict) else {}
            problem = rec.problem or ("" if isinstance(rec.value, dict) else "not a JSON object")
            yield rec.line_no, value.get("video_id"), value.get("title"), problem
        return
    id_col, title_col, n_cols = columns
    records = iter_csv_records(path, header_columns=True)
    next(records)  # the header
    for rec in records:
        if rec.problem or len(rec.value) != n_cols:
            yield rec.line_no, None, None, rec.problem or f"{len(rec.value)} columns, expected {n_cols}"
        else:
            yield rec.line_no, rec.value[id_col], rec.value[title_col], ""


def _title_problem(video_id: str, title: Any, seen: dict[str, str]) -> str:
    if not video_id:
        return "empty or non-string video_id"
    if not isinstance(title, str) or not title.strip():
        return "empty or non-string title"
    if video_id in seen:
        return f"duplicate video_id {video_id}"
    return ""


def read_titles(path: str | Path) -> tuple[dict[str, str], list[Drop]]:
    """Read a ``video_titles`` side file (docs/corpora/sieve_swap.md, Inputs) into ``{video_id: title}`` (whitespace
    stripped).

    CSV with header ``video_id,title`` or JSONL ``{"video_id", "title"}``. A record that is not parseable, lacks
    a string ``video_id`` / non-empty string ``title``, or repeats a video id (the first one wins) becomes
    ``Drop(reason="malformed_title_row")``.
    """
    p = require_file(path)
    columns = None if is_jsonl(p) else _titles_csv_columns(p)
    titles: dict[str, str] = {}
    drops: list[Drop] = []
    for line_no, video_id, title, problem in _title_records(p, columns):
        vid = video_id.strip() if isinstance(video_id, str) else ""
        problem = problem or _title_problem(vid, title, titles)
        if problem:
            detail = f"line {line_no}: {problem}"
            drops.append(Drop(vid or f"line:{line_no}", TITLES_STAGE, "malformed_title_row", detail))
        else:
            titles[vid] = title.strip()
    return titles, drops


# --------------------------------------------------------------------------------------------- durations


def _parse_duration(text: str) -> float:
    value = float(text)  # ValueError on non-numeric text
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"duration not a finite non-negative number: {text!r}")
    return value


def _duration_entry(rec: Record, id_col: int, dur_col: int, n_cols: int, seen: dict[str, float]) -> tuple[str, float]:
    """``(video_id, seconds)`` of one durations record; ``ValueError`` naming the problem otherwise."""
    if rec.problem:
        raise ValueError(rec.problem)
    if len(rec.value) != n_cols:
        raise ValueError(f"{len(rec.value)} columns, expected {n_cols}")
    video_id = rec.value[id_col].strip()
    if not video_id:
        raise ValueError("empty video id")
    if video_id in seen:
        raise ValueError(f"duplicate video id {video_id}")
    return video_id, _parse_duration(rec.value[dur_col])


def read_durations(path: str | Path) -> tuple[dict[str, float], list[Drop]]:
    """Read a ``video_durations`` CSV (docs/corpora/sieve_swap.md, Inputs) into ``{video_id: seconds}``.

    Header ``video_id,duration`` or YouCook2-style ``vid_id,duration,total_frame``. A row with a wrong column
    count, an empty id, a non-numeric / NaN / infinite / negative duration or a repeated id (first one wins)
    becomes ``Drop(reason="malformed_duration_row")``.
    """
    p = require_file(path)
    header = read_csv_header(p)
    id_name = next((name for name in ("video_id", "vid_id") if name in header), None)
    if id_name is None or "duration" not in header:
        raise InputError(f"{p}: durations CSV needs video_id (or vid_id) and duration columns, got {header}")
    id_col, dur_col = header.index(id_name), header.index("duration")
    durations: dict[str, float] = {}
    drops: list[Drop] = []
    records = iter_csv_records(p, header_columns=True)
    next(records)  # the header
    for rec in records:
        try:
            video_id, seconds = _duration_entry(rec, id_col, dur_col, len(header), durations)
        except ValueError as err:
            fields = rec.value if rec.value is not None and not rec.problem else []
            item_id = (fields[id_col].strip() if len(fields) > id_col else "") or f"line:{rec.line_no}"
            drops.append(Drop(item_id, DURATIONS_STAGE, "malformed_duration_row", f"line {rec.line_no}: {err}"))
            continue
        durations[video_id] = seconds
    return durations, drops
