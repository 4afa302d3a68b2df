"""The careful reader of ``raw_caption.json`` (docs/corpora/sieve_swap.md, "Inputs"), used by
:func:`~builders.sources.transcripts.raw_caption_split.split_raw_captions` for any file that is not plain: ijson
``basic_parse`` events over a stream whose bare non-finite tokens are read as strings (:class:`_NonFiniteAsStrings`),
and one video's value built at a time under a nesting and a size cap (:func:`_build_value`), so memory stays bounded
whatever the file holds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .transcript import BARE_TOKEN_MARK_JSON


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
