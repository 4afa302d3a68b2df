"""Checked cache files: what the build writes to reuse later is read back only while it is what was written.

A cache file (a work shard, a release part, a feature block, a model's cached output) is written with its sha256
recorded beside it (in the shard's ``stats.json``, the part's key record, ...) and, for Parquet, with page checksums
(``write_page_checksum``). A read hashes the bytes as it reads them (one pass: the file is read once into memory,
hashed, then decoded from that buffer) and decodes Parquet with ``page_checksum_verification``. A mismatch, a file cut
short or bytes that no longer decode raise :class:`DamagedCache`, which names the file: the caller then treats the
cache entry as missing and recomputes it from its inputs (docs/architecture.md, "Caching and resume"). A damaged
*input* of the user is never a cache: its readers raise their own errors.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .atomic import atomic_path
from .errors import DamagedCache

__all__ = ["DamagedCache", "checked_json", "read_checked_bytes", "read_checked_json", "read_parquet_checked", "sha256_file",
           "write_parquet_checked"]

_CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """The hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def read_checked_bytes(path: str | os.PathLike, sha256: str | None) -> bytes:
    """The bytes of ``path``, checked against ``sha256`` (no check when it is None or empty: a record written before
    digests were kept). A missing file raises ``FileNotFoundError`` as usual; other differences raise
    :class:`DamagedCache`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DamagedCache(path, f"unreadable ({err.strerror or err})") from err
    if sha256:
        got = hashlib.sha256(data).hexdigest()
        if got != sha256:
            raise DamagedCache(path, f"sha256 {got[:12]}... differs from the {sha256[:12]}... recorded when it was "
                                     f"written ({len(data)} bytes)")
    return data


def write_parquet_checked(table: pa.Table, path: str | os.PathLike, **options) -> str:
    """Write ``table`` to ``path`` atomically with page checksums; returns the sha256 of the file written."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, write_page_checksum=True, **options)
        digest = sha256_file(tmp)
    return digest


def _decode(data: bytes, path: str | os.PathLike, columns: list[str] | None) -> pa.Table:
    try:
        with pq.ParquetFile(pa.py_buffer(data), page_checksum_verification=True) as f:
            if columns is not None:
                names = set(f.schema_arrow.names)
                columns = [c for c in columns if c in names]
            return f.read(columns=columns)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise DamagedCache(path, f"not readable Parquet ({type(err).__name__}: {str(err)[:200]})") from err


def read_parquet_checked(path: str | os.PathLike, sha256: str | None, columns: list[str] | None = None) -> pa.Table:
    """The table in ``path`` (only those of ``columns`` it has, when given), after checking its bytes against
    ``sha256`` and its pages against their checksums; :class:`DamagedCache` when either fails."""
    return _decode(read_checked_bytes(path, sha256), Path(path), columns)


_HEAD, _MID = b'{"sha256": "', b'", "record": '


def checked_json(value: Any) -> str:
    """The text of a checked JSON file holding ``value``: ``{"sha256": "<hex>", "record": <JSON of value>}``, the
    digest of the value's JSON text (UTF-8; key order kept). ``TypeError``/``ValueError`` as ``json.dumps``."""
    text = json.dumps(value, ensure_ascii=False)
    return f'{_HEAD.decode()}{hashlib.sha256(text.encode("utf-8")).hexdigest()}{_MID.decode()}{text}}}'


def read_checked_json(path: str | os.PathLike) -> Any:
    """The value of the checked JSON file ``path`` (``checked_json``), its text hashed as read (one pass) against the
    digest it carries. ``FileNotFoundError`` when there is none; :class:`DamagedCache` when the text is not what
    was written (its ``why`` starts with ``"an earlier format"`` for a file of plain JSON, written before digests
    were kept)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DamagedCache(path, f"unreadable ({err.strerror or err})") from err
    start = len(_HEAD) + 64
    if not data.startswith(_HEAD):
        raise DamagedCache(path, "an earlier format, without a digest" if data[:1] == b"{" and
                           not data.startswith(_HEAD[:4]) else f"no digest ({len(data)} bytes)")
    if data[start:start + len(_MID)] != _MID or not data.endswith(b"}"):
        raise DamagedCache(path, f"cut short or not a checked record ({len(data)} bytes)")
    body, sha = data[start + len(_MID):-1], data[len(_HEAD):start].decode("ascii", "replace")
    got = hashlib.sha256(body).hexdigest()
    if got != sha:
        raise DamagedCache(path, f"sha256 {got[:12]}... differs from the {sha[:12]}... recorded when it was written")
    try:
        return json.loads(body.decode("utf-8"))
    except ValueError as err:  # the digest matched: not the disk's doing, but not usable either
        raise DamagedCache(path, f"not JSON ({err})") from err
