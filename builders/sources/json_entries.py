"""The entries of one large top-level JSON object (HowTo100M ``raw_caption.json``: ``{video_id: {start, end, text}}``),
read at C speed when the file is plain.

:func:`plain_object_entries` decodes each value with the standard library's C scanner (``json.JSONDecoder.raw_decode``
over a sliding text window), a few times faster than building values from ijson events in Python. It accepts only
what the careful reader (``builders/sources/transcripts/careful_reader.py``, used by
:func:`~builders.sources.transcripts.raw_caption_split.split_raw_captions`) reads to the same values, and raises
:class:`NotPlain` at anything else: invalid UTF-8 or JSON, a bare ``nan`` / ``inf``, a value longer than
``max_value_chars`` or nested deeper than ``max_depth``, a truncated file. The caller then reads the whole file again
with the careful reader, which names each problem and keeps the rest of the file.
Python's ``NaN`` / ``Infinity`` / ``-Infinity`` become the strings the careful reader makes of them.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

__all__ = ["NotPlain", "plain_object_entries"]

_WS = re.compile(r"[ \t\n\r]*")
_CHUNK_BYTES = 4 << 20


class NotPlain(Exception):
    """The file needs the careful reader (the message says why)."""


def _depth(value: Any) -> int:
    """The nesting depth of a decoded JSON value (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return deepest


def plain_object_entries(f: BinaryIO, *, max_value_chars: int, max_depth: int) -> Iterator[tuple[Any, Any]]:
    """``(key, value)`` of each entry of the JSON object that the binary stream ``f`` holds, in file order (a
    repeated key is yielded again). Text after the object's closing brace is not read. Raises :class:`NotPlain`."""
    decoder = json.JSONDecoder(parse_constant=str)
    text = codecs.getincrementaldecoder("utf-8")("strict")
    buf, pos, eof = "", 0, False
    ahead = max_value_chars + 4096  # a value and the key, colon and spaces before it

    def fill() -> None:
        nonlocal buf, pos, eof
        if pos > len(buf) // 2:
            buf, pos = buf[pos:], 0
        while not eof and len(buf) - pos < ahead:
            data = f.read(_CHUNK_BYTES)
            try:
                buf += text.decode(data, final=not data)
            except UnicodeDecodeError as err:
                raise NotPlain(f"not UTF-8: {err}") from None
            eof = not data

    def skip_ws() -> int:
        return _WS.match(buf, pos).end()

    def expect(chars: str) -> str:
        nonlocal pos
        pos = skip_ws()
        if pos >= len(buf) or buf[pos] not in chars:
            raise NotPlain(f"expected one of {chars!r} at character {pos}")
        pos += 1
        return buf[pos - 1]

    def decode(what: str) -> Any:
        nonlocal pos
        pos = skip_ws()
        try:
            value, end = decoder.raw_decode(buf, pos)
        except (ValueError, RecursionError) as err:
            raise NotPlain(f"{what}: {type(err).__name__}: {str(err)[:200]}") from None
        if end - pos > max_value_chars:
            raise NotPlain(f"{what}: longer than {max_value_chars} characters")
        pos = end
        return value

    fill()
    if buf.startswith("\ufeff"):
        pos = 1
    expect("{")
    pos = skip_ws()
    if buf.startswith("}", pos):
        return
    while True:
        fill()
        key = decode("key")
        if not isinstance(key, str):
            raise NotPlain(f"a key that is not a string: {key!r}"[:200])
        expect(":")
        start = pos
        value = decode(f"value of {key[:80]!r}")
        # no more brackets in its text than levels allowed: no deeper (the exact walk only for the rare others)
        brackets = buf.count("[", start, pos) + buf.count("{", start, pos)
        if brackets > max_depth and _depth(value) > max_depth:
            raise NotPlain(f"value of {key[:80]!r}: nested deeper than {max_depth} levels")
        yield key, value
        fill()
        if expect(",}") == "}":
            return
