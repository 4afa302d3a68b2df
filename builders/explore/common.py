"""Small helpers shared by the explorer's views: numbers and texts for the embedded JSON, the JSON itself made safe
inside a ``<script>`` element, and JPEG thumbnails."""

from __future__ import annotations

import base64
import io
import json
import math
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["MAX_TEXT", "clip_text", "json_for_script", "num", "path_within", "thumbnail_data_uri"]

#: characters of one text (a step, a narration, a transcript segment) embedded at most
MAX_TEXT = 2000


def num(x: Any, digits: int = 3) -> float | int | None:
    """A number for the page: rounded to ``digits`` decimals; ``None`` for null, NaN and infinities."""
    if x is None or isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return round(f, digits) if math.isfinite(f) else None


def clip_text(x: Any, limit: int = MAX_TEXT) -> str:
    """A text for the page (``""`` for null), cut to ``limit`` characters with an ellipsis."""
    s = "" if x is None else str(x)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def json_for_script(payload: Any) -> str:
    """``payload`` as JSON that is inert inside ``<script type="application/json">``: ``<``, ``>`` and ``&`` are
    written as ``\\u003c`` etc., so no ``</script>`` or ``<!--`` can close or change the element (JSON.parse reads
    the escapes back), and U+2028/U+2029 are escaped too."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def path_within(root: str | os.PathLike[str], relative: str) -> Path | None:
    """``root / relative`` for a ``/``-separated ``relative`` path that stays inside ``root`` (not absolute, no
    drive, no ``..``, no backslash or NUL); ``None`` otherwise: a path a release records never leads the explorer
    out of the folder it is relative to."""
    if not isinstance(relative, str) or not relative or "\\" in relative or "\x00" in relative:
        return None
    p = PurePosixPath(relative)
    if p.is_absolute() or ".." in p.parts or re.match(r"^[A-Za-z]:", relative):
        return None
    return Path(root, *p.parts)


def thumbnail_data_uri(data: bytes, width: int = 160, quality: int = 70) -> str | None:
    """A ``data:image/jpeg`` URI of the image ``data`` scaled to ``width`` pixels (never enlarged); ``None`` when
    the bytes are not an image Pillow can read."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is a core dependency (pyproject.toml)
        return None
    try:
        with Image.open(io.BytesIO(data)) as im:
            im = im.convert("RGB")
            if im.width > width:
                im = im.resize((width, max(1, round(im.height * width / im.width))), Image.Resampling.BILINEAR)
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=quality, optimize=True)
    except Exception:  # noqa: BLE001 - a broken image in a release is shown as a placeholder, not a crash
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
