"""The release cache: small JSON records in ``<work_dir>/cache/release/`` that let a rewrite of the release skip work
whose inputs it has already seen (README.md "Caching and resume"; issue 19, the edit rerun). Every record is keyed by
a hash of everything its content depends on, so a stale record is never found, only left behind (``prune``).

=================  ===================================================================================================
kind               what the record holds, and its key
=================  ===================================================================================================
``features``       a corpus's lazy features (``builders.release.light.feature_record`` per config): the source of its
                   release code and loading script (``code_key``), the library versions
``readme``         the README's YAML header less its figures (``builders.release.incremental.write_card``): the
                   ``features`` key, the card fields when they are not lazy, the configs' splits and the default config
``gate``           that ``datasets``' resolution of a release folder passed the gate: the README's YAML header less its
                   figures, the names of the release's files, what the gate expected, the library versions
``outputs``        a config's Parquet shards as the release in place holds them (names, sizes, stat identity, content
                   fingerprint, rows): the parts' content digests, the features, the splits, the release code, the
                   library versions
``llm``            a corpus's memo (``ReleaseCache.memo``: the replay LLM's ``info()`` of ``howtostep``)
=================  ===================================================================================================

The explorer keeps its items beside them (``explore-items.json``, ``builders.explore.reuse``).

A build without a work directory (``info["work_dir"]`` unset: tests, direct calls) has no cache: everything is done
as if each record were missing. A record that cannot be read is missing; writing one is atomic.

A record is checked when read: its file is ``{"sha256": "<hex>", "record": <the record's JSON>}``, the
digest of the record's JSON text as written (``builders.core.checked.checked_json``). A record whose text no longer has that digest (a
flipped byte that still parses, a file cut short) is missing, with one warning line naming it, and is written again
by the build that recomputes it; a record of an earlier format (no digest) is missing without a word.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.atomic import atomic_write_text
from ..core.checked import checked_json, read_checked_json
from ..core.errors import DamagedCache
from ..core.fingerprint import hash_obj

__all__ = ["CACHE_FORMAT", "ReleaseCache", "lib_versions"]

log = logging.getLogger(__name__)

#: bump when records of the same key would differ
CACHE_FORMAT = 1
#: records of one kind kept beyond those this build used (earlier builds' records, newest first)
KEEP_PER_KIND = 8
_NAME = re.compile(r"^(?P<kind>[a-z]+)-(?P<key>[0-9a-f]{24})\.json\Z")

_VERSIONS: dict[str, str | None] = {}


def file_identity(path: Path) -> list[int]:
    """``[size, mtime_ns, inode]`` of a file: what the release's records compare to trust a file they describe is the
    one they were made from (a list, as it is stored in JSON records)."""
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def lib_versions() -> dict[str, str | None]:
    """The versions of the libraries whose output a record describes (``datasets``, ``huggingface_hub``, ``pyarrow``,
    ``PyYAML``), read from the installed metadata without importing them."""
    if not _VERSIONS:
        import importlib.metadata as md

        for pkg in ("datasets", "huggingface_hub", "pyarrow", "PyYAML"):
            try:
                _VERSIONS[pkg] = md.version(pkg)
            except md.PackageNotFoundError:
                _VERSIONS[pkg] = None
    return dict(_VERSIONS)


class ReleaseCache:
    """The records of one work directory (``root`` ``None``: no cache, every ``get`` misses, ``put`` does nothing)."""

    def __init__(self, root: str | os.PathLike | None) -> None:
        self.root = Path(root) if root is not None else None
        self.used: set[str] = set()

    @classmethod
    def of_build(cls, info: Mapping[str, Any]) -> ReleaseCache:
        """The cache of a build's work directory (``info["work_dir"]``), or no cache."""
        work = info.get("work_dir")
        return cls(Path(work) / "cache" / "release" if work else None)

    def __bool__(self) -> bool:
        return self.root is not None

    @staticmethod
    def key(kind: str, *parts: Any) -> str:
        """The key of a record of ``kind`` from everything its content depends on."""
        return hash_obj(CACHE_FORMAT, kind, *parts)[:24]

    def _path(self, kind: str, key: str) -> Path | None:
        return None if self.root is None else self.root / f"{kind}-{key}.json"

    def get(self, kind: str, key: str) -> Any:
        """The record, or ``None`` when there is none (or no cache)."""
        path = self._path(kind, key)
        if path is None:
            return None
        try:
            record = read_checked_json(path)
        except OSError:
            return None
        except DamagedCache as err:
            if not err.why.startswith("an earlier format"):
                log.warning("damaged release cache record %s (%s): recomputed", path, err.why)
            return None
        self.used.add(path.name)
        return record

    def put(self, kind: str, key: str, record: Any) -> None:
        """Write the record (atomically; a cache that cannot be written is no error: it is only a cache)."""
        path = self._path(kind, key)
        if path is None:
            return
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, checked_json(record))  # key order kept: it is meaningful
            self.used.add(path.name)

    def memo(self, kind: str, key: str | None, compute: Any) -> Any:
        """``compute()``, kept under ``key`` (``None``: not kept): a value seen before is returned from its record. Only
        a value that JSON gives back equal (no tuples, no other types) is kept."""
        record = self.get(kind, key) if key is not None else None
        if isinstance(record, dict) and "value" in record:
            return record["value"]
        value = compute()
        if key is not None and self:
            with contextlib.suppress(TypeError, ValueError):
                if json.loads(json.dumps(value)) == value:
                    self.put(kind, key, {"value": value})
        return value

    def prune(self, keep: int = KEEP_PER_KIND) -> None:
        """Remove the records of each kind that this build did not use, beyond the ``keep`` newest."""
        if self.root is None or not self.root.is_dir():
            return
        by_kind: dict[str, list[tuple[float, Path]]] = {}
        for p in self.root.iterdir():
            m = _NAME.match(p.name)
            if m and p.name not in self.used:
                with contextlib.suppress(OSError):
                    by_kind.setdefault(m["kind"], []).append((p.stat().st_mtime, p))
        for items in by_kind.values():
            for _, p in sorted(items, reverse=True)[keep:]:
                with contextlib.suppress(OSError):
                    p.unlink()
