"""YouCook2 annotations for the MARC chat/content classifier (docs/corpora/marc.md; Lin et al., ACL 2020, A.1.3).

``youcookii_annotations_trainval.json`` is ``{"database": {vid: {"duration", "subset", "recipe_type", "video_url",
"annotations": [{"segment": [start, end], "id", "sentence"}]}}}`` (1,790 videos, 89 recipe types, 13,829 segments in
integer seconds). A video whose entry cannot be used becomes a named drop (``malformed_annotation``), never a crash;
a file that is not such an object at all raises ``ValueError``. ``label_foodtype.csv`` maps recipe types to names.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.records import Drop
from .safe_open import InputTooLarge, open_input, read_input_bytes, whole_input_error
from .transcripts import is_valid_video_id

STAGE = "youcook2"
MALFORMED_ANNOTATION = "malformed_annotation"
MAX_ANNOTATION_BYTES = 200 << 20  # the real file is 4 MB
SUBSETS = ("training", "validation", "testing")


@dataclass
class YouCook2Video:
    """One annotated video: ``segments`` ``[(start, end)]`` in seconds and their ``sentences``, in file order."""

    video_id: str
    duration: float
    subset: str
    recipe_type: str
    segments: list[tuple[float, float]] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    video_url: str = ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _parse_video(video_id: Any, entry: Any) -> YouCook2Video | str:
    """The video, or why it is malformed."""
    if not is_valid_video_id(video_id):
        return "video id is not [A-Za-z0-9_-]{1,64}"
    if not isinstance(entry, dict):
        return f"entry is a {type(entry).__name__}, not an object"
    duration = _number(entry.get("duration"))
    if duration is None or duration <= 0:
        return f"duration {entry.get('duration')!r} is not a positive number"
    subset = entry.get("subset")
    if subset not in SUBSETS:
        return f"subset {subset!r} is not one of {', '.join(SUBSETS)}"
    recipe_type = entry.get("recipe_type")
    if isinstance(recipe_type, int) and not isinstance(recipe_type, bool):
        recipe_type = str(recipe_type)
    if not isinstance(recipe_type, str) or not recipe_type.strip():
        return f"recipe_type {recipe_type!r} is not a non-empty string"
    annotations = entry.get("annotations")
    if not isinstance(annotations, list) or not annotations:
        return "annotations is not a non-empty list"
    segments, sentences = [], []
    for k, ann in enumerate(annotations):
        if not isinstance(ann, dict):
            return f"annotation {k} is not an object"
        seg = ann.get("segment")
        bounds = [_number(x) for x in seg] if isinstance(seg, list) and len(seg) == 2 else [None]
        if None in bounds or bounds[0] < 0 or bounds[1] < bounds[0]:  # type: ignore[operator]
            return f"annotation {k}: segment {seg!r} is not [start, end] with 0 <= start <= end"
        sentence = ann.get("sentence")
        if not isinstance(sentence, str):
            return f"annotation {k}: sentence is not a string"
        segments.append((bounds[0], bounds[1]))
        sentences.append(sentence)
    url = entry.get("video_url")
    return YouCook2Video(video_id, duration, subset, recipe_type.strip(), segments, sentences,
                         url if isinstance(url, str) else "")


def read_youcook2_annotations(path: str | Path,
                              max_bytes: int = MAX_ANNOTATION_BYTES) -> tuple[dict[str, YouCook2Video], list[Drop]]:
    """Videos by id (file order) and one ``malformed_annotation`` drop per unusable entry (docs/reason-codes.md).

    A video is dropped whole when any of its annotations is malformed: a missing segment would turn content
    sentences into chat. Raises ``FileNotFoundError`` / ``ValueError`` for a missing, oversized or non-JSON file or
    one without a ``database`` object.
    """
    src = Path(path)
    try:
        raw = read_input_bytes(src, max_bytes=max_bytes, what="YouCook2 annotations")
    except FileNotFoundError:
        raise FileNotFoundError(f"YouCook2 annotations not found: {src}") from None
    except InputTooLarge:
        raise InputError(f"{src}: exceeds the {max_bytes}-byte limit for YouCook2 annotations "
                         "(youcookii_annotations_trainval.json is about 4 MB)") from None
    except OSError as err:
        raise whole_input_error(err, src, "YouCook2 annotations") from None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"{src}: not valid JSON: {' '.join(str(err).split())[:200]}") from None
    database = data.get("database") if isinstance(data, dict) else None
    has_database = isinstance(database, dict)
    if not has_database:
        raise InputError(f"{src}: expected {{\"database\": {{video_id: {{...}}}}}} "
                         "(youcookii_annotations_trainval.json)")
    videos: dict[str, YouCook2Video] = {}
    drops: list[Drop] = []
    for video_id, entry in database.items():
        parsed = _parse_video(video_id, entry)
        if isinstance(parsed, str):
            drops.append(Drop(str(video_id)[:80], STAGE, MALFORMED_ANNOTATION, parsed[:300]))
        else:
            videos[parsed.video_id] = parsed
    return videos, drops


def read_food_types(path: str | Path) -> dict[str, str]:
    """``label_foodtype.csv`` (``101,BLT`` lines) -> ``{recipe_type: name}``; lines without both fields are
    skipped. Raises ``FileNotFoundError`` when absent."""
    src = Path(path)
    out: dict[str, str] = {}
    try:
        f = open_input(src, max_bytes=MAX_ANNOTATION_BYTES, what="YouCook2 food types", text=True,
                       encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise FileNotFoundError(f"YouCook2 food types not found: {src}") from None
    except OSError as err:
        raise whole_input_error(err, src, "YouCook2 food types") from None
    with f:
        for row in csv.reader(f):
            if len(row) >= 2 and row[0].strip() and row[1].strip():
                out[row[0].strip()] = ",".join(row[1:]).strip()
    return out
