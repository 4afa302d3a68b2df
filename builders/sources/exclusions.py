"""Readers of video-id lists to exclude from a corpus (docs/corpora/sieve_swap.md).

The paper removes the YouTube ids of YouCook2 from its HowTo100M pre-training videos
(Batra et al., ECCV 2024, supplementary E.1): all keys of ``youcookii_annotations_trainval.json``
plus the ids of ``test_list.txt``; further lists may be given. Accepted files:

- ``.json``: YouCook2 annotations ``{"database": {video_id: ...}}`` (its keys) or a JSON list of ids;
- ``.csv``: a header with a ``video_id`` (or ``vid_id``) column;
- any other file: text, one entry per line, either ``recipe_type/video_id`` (YouCook2 ``*_list.txt``, the part after
  the last ``/`` is kept) or a bare id; blank lines and ``#`` comments are ignored.

Entries that are not valid video ids (``[A-Za-z0-9_-]{1,64}``) are skipped with a logged warning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from builders.core.errors import InputError
from builders.sources.howto100m import (
    iter_csv_records,
    iter_text_lines,
    read_csv_header,
    require_file,
)
from builders.sources.safe_open import read_input_bytes, whole_input_error
from builders.sources.transcripts import is_valid_video_id

logger = logging.getLogger(__name__)

ID_COLUMNS = ("video_id", "vid_id")


MAX_JSON_LIST_BYTES = 256 << 20  # an exclusion json (YouCook2's annotations are 4 MB); more is not such a list


def _ids_from_json(path: Path) -> Iterator[Any]:
    try:
        raw = read_input_bytes(path, max_bytes=MAX_JSON_LIST_BYTES, what="exclusion list")
    except OSError as err:
        raise whole_input_error(err, path, "exclusion list") from None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"{path}: exclusion list is not valid JSON: {' '.join(str(err).split())[:200]}") from None
    if isinstance(data, dict) and isinstance(data.get("database"), dict):
        return iter(data["database"])
    if isinstance(data, list):
        return iter(data)
    shape = f"a JSON {type(data).__name__}" + (f" with keys {sorted(data)[:5]}" if isinstance(data, dict) else "")
    raise InputError(f"{path}: exclusion list must be {{'database': {{video_id: ...}}}} (YouCook2 annotations) or a "
                     f"JSON list of ids, not {shape}")


def _ids_from_csv(path: Path) -> Iterator[Any]:
    header = read_csv_header(path)
    column = next((header.index(name) for name in ID_COLUMNS if name in header), None)
    if column is None:
        raise InputError(f"{path}: no video_id / vid_id column in header {header}")
    records = iter_csv_records(path, header_columns=True)
    next(records)  # the header
    for rec in records:
        yield rec.value[column].strip() if not rec.problem and len(rec.value) > column else None


def _ids_from_text(path: Path) -> Iterator[Any]:
    for rec in iter_text_lines(path):
        line = rec.value.split("#", 1)[0].strip() if rec.value is not None else None
        if line == "":
            continue  # comment-only line
        yield line.rsplit("/", 1)[-1].strip() if line is not None else None


def _ids_from_file(path: Path) -> Iterator[Any]:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _ids_from_json(path)
    if suffix == ".csv":
        return _ids_from_csv(path)
    return _ids_from_text(path)


def read_exclusion_ids(paths: Iterable[str | Path]) -> set[str]:
    """The union of the video ids listed in ``paths`` (docs/corpora/sieve_swap.md, Inputs; Batra et al., ECCV 2024,
    supp. E.1).

    Every path is checked first: a missing file raises ``FileNotFoundError`` before anything is read; an
    unrecognised JSON shape, invalid JSON or a CSV without an id column raises
    :class:`~builders.core.errors.InputError` (exit 2 before any work: the corpora call this when checking inputs).
    """
    files = [require_file(p, "exclusion list") for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    ids: set[str] = set()
    for path in files:
        invalid = 0
        for entry in _ids_from_file(path):
            if is_valid_video_id(entry):
                ids.add(entry)
            else:
                invalid += 1
        if invalid:
            logger.warning("%s: skipped %d entries that are not video ids", path, invalid)
    return ids
