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
With ``spans=True`` each entry also comes with its byte span in the file (from the key's opening quote to the end of
the value), which the incremental re-split (``builders/sources/transcripts/raw_caption_resplit.py``) keys on;
:func:`plain_member` reads entries the same way from a piece of text (the changed middle of a file).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

__all__ = ["NotPlain", "plain_member", "plain_object_entries"]

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


def _make_decoder() -> json.JSONDecoder:
    return json.JSONDecoder(parse_constant=str)


def _check_value(buf: str, start: int, end: int, value: Any, key: str, max_value_chars: int, max_depth: int) -> None:
    """The checks of a decoded value ``buf[start:end]``: not longer than ``max_value_chars``, not nested deeper than
    ``max_depth`` (no more brackets in its text than levels allowed: no deeper; the exact walk only for the rare
    others). Raises :class:`NotPlain`."""
    if end - start > max_value_chars:
        raise NotPlain(f"value of {key[:80]!r}: longer than {max_value_chars} characters")
    if buf.count("[", start, end) + buf.count("{", start, end) > max_depth and _depth(value) > max_depth:
        raise NotPlain(f"value of {key[:80]!r}: nested deeper than {max_depth} levels")


def _raw_decode(decoder: json.JSONDecoder, buf: str, pos: int, what: str) -> tuple[Any, int]:
    try:
        return decoder.raw_decode(buf, pos)
    except (ValueError, RecursionError) as err:
        raise NotPlain(f"{what}: {type(err).__name__}: {str(err)[:200]}") from None


def plain_member(text: str, pos: int, *, max_value_chars: int, max_depth: int,
                  decoder: json.JSONDecoder | None = None) -> tuple[str, Any, int, int]:
    """One entry ``"key": value`` of an object in ``text`` whose key starts at ``pos`` (after any white space):
    ``(key, value, key start, value end)`` in characters, with exactly the checks of :func:`plain_object_entries`.
    Raises :class:`NotPlain`."""
    decoder = decoder or _make_decoder()
    pos = _WS.match(text, pos).end()
    key_start = pos
    key, end = _raw_decode(decoder, text, pos, "key")
    if end - pos > max_value_chars:
        raise NotPlain(f"key: longer than {max_value_chars} characters")
    if not isinstance(key, str):
        raise NotPlain(f"a key that is not a string: {key!r}"[:200])
    pos = _WS.match(text, end).end()
    if pos >= len(text) or text[pos] != ":":
        raise NotPlain(f"expected one of ':' at character {pos}")
    start = _WS.match(text, pos + 1).end()
    value, end = _raw_decode(decoder, text, start, f"value of {key[:80]!r}")
    _check_value(text, start, end, value, key, max_value_chars, max_depth)
    return key, value, key_start, end


def plain_object_entries(f: BinaryIO, *, max_value_chars: int, max_depth: int,
                         spans: bool = False) -> Iterator[tuple[Any, ...]]:
    """``(key, value)`` of each entry of the JSON object that the binary stream ``f`` holds, in file order (a
    repeated key is yielded again); with ``spans``, ``(key, value, start, end)``: the entry's bytes in the file are
    ``[start, end)``, from its key's opening quote to its value's last byte. Text after the object's closing brace is
    not read. Raises :class:`NotPlain`."""
    decoder = _make_decoder()
    text = codecs.getincrementaldecoder("utf-8")("strict")
    buf, pos, eof = "", 0, False
    ahead = max_value_chars + 4096  # a value and the key, colon and spaces before it
    mark_c = mark_b = 0  # (spans) a character index in buf and the file's byte offset where that character starts

    def byte_at(p: int) -> int:
        """(spans) the file's byte offset of character ``p >= mark_c`` of buf; moves the mark there."""
        nonlocal mark_c, mark_b
        if buf.isascii():  # O(1): every character a byte
            mark_b += p - mark_c
        else:
            mark_b += len(buf[mark_c:p].encode("utf-8"))
        mark_c = p
        return mark_b

    def fill() -> None:
        nonlocal buf, pos, eof, mark_c
        if pos > len(buf) // 2:
            if spans:
                byte_at(pos)
                mark_c = 0
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
        value, end = _raw_decode(decoder, buf, pos, what)
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
        if spans:
            first = byte_at(skip_ws())
        key = decode("key")
        if not isinstance(key, str):
            raise NotPlain(f"a key that is not a string: {key!r}"[:200])
        expect(":")
        start = pos
        value = decode(f"value of {key[:80]!r}")
        brackets = buf.count("[", start, pos) + buf.count("{", start, pos)
        if brackets > max_depth and _depth(value) > max_depth:
            raise NotPlain(f"value of {key[:80]!r}: nested deeper than {max_depth} levels")
        if spans:
            yield key, value, first, byte_at(pos)
        else:
            yield key, value
        fill()
        if expect(",}") == "}":
            return
