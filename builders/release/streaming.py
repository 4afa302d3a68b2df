"""Streaming helpers for the corpus releases (docs/architecture.md, "The release step"): rows of a stage counted from
its footers (``count_rows``), rows sorted on disk when a release needs an order its work shards do not have
(``SortedSpill``), and a JSON object written item by item (``write_json_object``).
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import pickle
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any


from ..core.shards import StageData, read_stats

__all__ = ["SortedSpill", "count_rows", "write_json_object"]


def count_rows(data: StageData) -> int:
    """Rows of a complete stage from its shards' ``stats.json`` (``kept``: no row is read)."""
    return sum(int(read_stats(data.dir, i)["kept"]) for i in range(data.n))


class SortedSpill:
    """Rows in ``key`` order with bounded memory: sorted runs of at most ``run_rows`` rows are pickled to ``folder``
    and merged (``heapq.merge``) each time the rows are read, which may be done any number of times.

    Ties keep insertion order, so the order is deterministic. Rows may be added to named parts; ``rows(*parts)``
    merges only the runs of those parts (all parts when none is named).
    """

    def __init__(self, folder: str | os.PathLike, key: Callable[[Mapping[str, Any]], Any], run_rows: int = 20_000) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._key, self._run_rows = key, run_rows
        self._buffers: dict[Hashable, list[tuple[Any, int, Mapping[str, Any]]]] = {}
        self._buffered = 0
        self._runs: dict[Hashable, list[Path]] = {}
        self._counts: dict[Hashable, int] = {}
        self._seq = itertools.count()
        self._n_runs = 0

    def add(self, row: Mapping[str, Any], part: Hashable = None) -> None:
        self._buffers.setdefault(part, []).append((self._key(row), next(self._seq), row))
        self._counts[part] = self._counts.get(part, 0) + 1
        self._buffered += 1
        if self._buffered >= self._run_rows:
            self._spill()

    def extend(self, rows: Iterable[Mapping[str, Any]],
               part: Callable[[Mapping[str, Any]], Hashable] | None = None) -> SortedSpill:
        """Add every row (to the part ``part(row)`` when given); returns ``self``."""
        for r in rows:
            self.add(r, part(r) if part else None)
        self._spill()
        return self

    def _spill(self) -> None:
        for part, buf in self._buffers.items():
            if not buf:
                continue
            buf.sort(key=lambda t: (t[0], t[1]))
            path = self.folder / f"run-{self._n_runs:06d}.pkl"
            self._n_runs += 1
            with open(path, "wb") as f:
                for k in range(0, len(buf), 1000):
                    pickle.dump(buf[k:k + 1000], f, protocol=pickle.HIGHEST_PROTOCOL)
            self._runs.setdefault(part, []).append(path)
        self._buffers = {}
        self._buffered = 0

    @staticmethod
    def _read(path: Path) -> Iterator[tuple[Any, int, Mapping[str, Any]]]:
        with open(path, "rb") as f:
            while True:
                try:
                    chunk = pickle.load(f)
                except EOFError:
                    return
                yield from chunk

    def parts(self) -> list[Hashable]:
        return list(self._counts)

    def count(self, *parts: Hashable) -> int:
        return sum(n for p, n in self._counts.items() if not parts or p in parts)

    def rows(self, *parts: Hashable) -> Iterator[Mapping[str, Any]]:
        """The rows of ``parts`` (all when none is named) in key order."""
        self._spill()
        runs = [r for p, rs in self._runs.items() if not parts or p in parts for r in rs]
        for _, _, row in heapq.merge(*(self._read(r) for r in runs), key=lambda t: (t[0], t[1])):
            yield row


def write_json_object(path: str | os.PathLike, items: Iterable[tuple[str, Any]], *, indent: int | None = None,
                      ensure_ascii: bool = False) -> int:
    """Write the JSON object of ``items`` (key, value pairs) item by item, byte-identical to ``json.dumps(dict(items),
    indent=indent, ensure_ascii=ensure_ascii)``; a repeated key raises ``ValueError``. Returns the number of items."""
    seen: set[str] = set()
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for k, v in items:
            if k in seen:
                raise ValueError(f"duplicate key {k!r} in {Path(path).name}")
            seen.add(k)
            text = json.dumps({k: v}, indent=indent, ensure_ascii=ensure_ascii)
            if indent is None:
                f.write(("{" if not n else ", ") + text[1:-1])
            else:
                f.write(("{\n" if not n else ",\n") + text[2:-2])
            n += 1
        f.write("{}" if not n else ("}" if indent is None else "\n}"))
    return n
