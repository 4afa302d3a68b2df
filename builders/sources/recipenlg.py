"""Streaming reader of RecipeNLG ``full_dataset.csv`` (docs/corpora/sieve_swap.md).

RecipeNLG is the text-recipe collection R that the paper sieves videos against and swaps transcript segments
with (Batra et al., ECCV 2024, §4.2). The CSV has 2,231,142 rows (~2.2 GB) with header
``,title,ingredients,directions,link,source,NER``; the first, unnamed column is the integer row id (``recipe_id``) and
``ingredients``/``directions``/``NER`` are JSON-encoded lists of strings inside quoted fields.

This reader only parses and validates; it does not clean titles or drop empty recipes (the recipe-database step
does, with reasons ``no_title`` / ``no_directions`` / ``duplicate_recipe``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from builders.core.errors import InputError
from builders.core.records import Drop, Row
from builders.sources.howto100m import (
    Record,
    cut_row_id,
    iter_csv_records,
    read_csv_header,
    require_file,
)

STAGE = "read_recipes"
HEADER = ("title", "ingredients", "directions", "link", "source", "NER")  # after the unnamed id column
SOURCES = frozenset({"Gathered", "Recipes1M"})
_ID_RE = re.compile(r"\d{1,18}")  # a row id that fits int64


def _check_header(path: Path) -> None:
    header = read_csv_header(path)
    if tuple(header[1:]) != HEADER:
        raise InputError(f"{path}: not a RecipeNLG CSV, header {header} (expected ',{','.join(HEADER)}')")


def _is_row_id(text: str) -> bool:
    return _ID_RE.fullmatch(text) is not None


def _json_str_list(text: str) -> list[str] | None:
    """The list of strings JSON-encoded in ``text``, or ``None`` when it is not one."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _recipe(rec: Record, ordinal: int) -> Row | Drop:
    """One recipe row, or a drop with ``malformed_csv_row`` / ``malformed_recipe_json`` (docs/reason-codes.md)."""
    fields = rec.value
    if fields is None:  # an unterminated quote: the id field of its raw line names the row (best effort)
        guess, note = cut_row_id(rec, 0, _is_row_id)
        item_id = str(int(guess)) if guess else f"row:{ordinal}"
        return Drop(item_id, STAGE, "malformed_csv_row", f"line {rec.line_no}: {rec.problem}{note}")
    if rec.problem:
        return Drop(f"row:{ordinal}", STAGE, "malformed_csv_row", f"line {rec.line_no}: {rec.problem}")
    if len(fields) != len(HEADER) + 1:  # split, but a column short or too many: its first field still names it
        item_id = str(int(fields[0])) if fields and _is_row_id(fields[0].strip()) else f"row:{ordinal}"
        return Drop(item_id, STAGE, "malformed_csv_row",
                    f"line {rec.line_no}: {len(fields)} columns, expected {len(HEADER) + 1}")
    raw_id, title, ingredients, directions, link, source, ner = fields
    if not _ID_RE.fullmatch(raw_id.strip()):
        return Drop(f"row:{ordinal}", STAGE, "malformed_csv_row", f"line {rec.line_no}: non-integer id {raw_id[:40]!r}")
    recipe_id = int(raw_id)
    if source not in SOURCES:
        return Drop(str(recipe_id), STAGE, "malformed_csv_row", f"line {rec.line_no}: unknown source {source[:40]!r}")
    lists = {"ingredients": ingredients, "directions": directions, "ner": ner}
    parsed = {name: _json_str_list(text) for name, text in lists.items()}
    bad = [name for name, value in parsed.items() if value is None]
    if bad:
        detail = f"line {rec.line_no}: not a JSON list of strings: {', '.join(bad)}"
        return Drop(str(recipe_id), STAGE, "malformed_recipe_json", detail)
    return {"recipe_id": recipe_id, "title": title, **parsed, "link": link, "source": source}


def read_recipenlg(path: str | Path) -> Iterator[Row | Drop]:
    """Stream RecipeNLG ``full_dataset.csv`` (docs/corpora/sieve_swap.md, Inputs) as recipe rows or drops.

    Rows: ``{"recipe_id": int, "title": str, "ingredients": [str], "directions": [str], "ner": [str],
    "link": str, "source": str}``, values as in the file (JSON escapes such as ``\\u00b0`` decoded). Drops
    (docs/reason-codes.md): ``malformed_csv_row`` (wrong column count, non-integer id, unknown ``source``, a field over
    1 MiB, non-UTF-8 bytes, CSV syntax error) and ``malformed_recipe_json``; a drop's ``item_id`` is the recipe id, or
    ``row:<n>`` (0-based data-row ordinal) when the id is unusable (or a field was not UTF-8). A row cut by an unterminated quote is named by
    the first field of its raw line when that is an integer (a best-effort guess, said in the detail).
    ``csv.field_size_limit`` is raised to the maximum.
    Raises ``FileNotFoundError`` / :class:`~builders.core.errors.InputError` (empty file, wrong header) at call time. A
    quoted field left open swallows no recipe: its line is one ``malformed_csv_row`` and reading resumes after it.
    """
    p = require_file(path)
    _check_header(p)
    return _recipes(p)


def _recipes(path: Path) -> Iterator[Row | Drop]:
    records = iter_csv_records(path, columns=len(HEADER) + 1)
    next(records)  # the header, checked by the caller
    for ordinal, rec in enumerate(records):
        yield _recipe(rec, ordinal)
