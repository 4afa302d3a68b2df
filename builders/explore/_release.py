"""Reading a release folder for the explorer: its Parquet shards, a deterministic sample and look-ups by id.

A release is ``<config>/<split>-xxxxx-of-yyyyy.parquet`` + ``stats.json`` + ``manifest.json`` + ``README.md``
(docs/architecture.md, "The release step"). The explorer never reads a whole config into Python: it reads the id column of row
groups, picks rows by a seeded hash, and decodes only the row groups (and columns) that hold picked rows. The sample
touches at most ``ceil(n / PER_GROUP)`` row groups of the sampled configs (plus as many as needed to fill ``n``), so
its cost is bounded by ``n``, not by the corpus (HTM-370K size included).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PER_GROUP", "Group", "Pick", "Release", "stable_hash"]

#: rows taken from one row group of a sampled config at most (spreads a sample over the corpus)
PER_GROUP = 25
_SHARD = re.compile(r"^(?P<split>[A-Za-z0-9_.]+?)-\d{5}-of-\d{5}\.parquet\Z")


def stable_hash(seed: int, key: Any) -> int:
    """A seeded 64-bit hash of ``key`` that is the same on every machine and Python run (unlike ``hash``)."""
    digest = hashlib.blake2b(f"{seed}\x00{key}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True)
class Group:
    """One row group of one Parquet shard of a config."""

    config: str
    split: str
    path: Path
    index: int
    num_rows: int


@dataclass(frozen=True)
class Pick:
    """One row a sample takes: its row group, its position in the group and its id."""

    group: Group
    row: int
    id: Any


class Release:
    """A release folder on disk (a build's output or a Hub snapshot): its configs, splits and metadata files."""

    def __init__(self, root: str | Path, metadata: dict[str, dict[str, Any]] | None = None) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"not a release folder: {self.root}")
        self._groups: dict[str, list[Group]] = {}
        self._metadata = dict(metadata or {})  # file name -> its content, instead of the file (not yet written)

    # -- metadata -------------------------------------------------------------------------------------------------
    def json(self, name: str) -> dict[str, Any]:
        """``stats.json`` / ``manifest.json`` as a dict ({} when absent or unreadable: a Hub snapshot may lack it)."""
        if name in self._metadata:
            return self._metadata[name]
        try:
            data = json.loads((self.root / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def configs(self) -> list[str]:
        """Config folders that hold Parquet shards, sorted."""
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.parquet")))

    def has(self, config: str) -> bool:
        return bool(self.groups(config))

    def shards(self, config: str) -> list[tuple[str, Path]]:
        """``(split, path)`` of a config's shards, in split then file order."""
        folder = self.root / config
        if not folder.is_dir():
            return []
        out = []
        for p in sorted(folder.glob("*.parquet")):
            m = _SHARD.match(p.name)
            out.append((m.group("split") if m else p.stem, p))
        return out

    def groups(self, config: str) -> list[Group]:
        """Every row group of a config (from the Parquet footers only)."""
        if config not in self._groups:
            import pyarrow.parquet as pq

            groups = []
            for split, path in self.shards(config):
                md = pq.ParquetFile(path).metadata
                groups += [Group(config, split, path, i, md.row_group(i).num_rows) for i in range(md.num_row_groups)]
            self._groups[config] = groups
        return self._groups[config]

    def num_rows(self, config: str) -> dict[str, int]:
        """Rows per split of a config, from the Parquet footers."""
        out: dict[str, int] = {}
        for g in self.groups(config):
            out[g.split] = out.get(g.split, 0) + g.num_rows
        return out

    def columns(self, config: str) -> list[str]:
        """Top-level column names of a config (first shard's schema)."""
        import pyarrow.parquet as pq

        shards = self.shards(config)
        return list(pq.ParquetFile(shards[0][1]).schema_arrow.names) if shards else []

    # -- reading --------------------------------------------------------------------------------------------------
    @staticmethod
    def _read(group: Group, columns: Sequence[str]) -> Any:
        import pyarrow.parquet as pq

        return pq.ParquetFile(group.path).read_row_group(group.index, columns=list(columns))

    @staticmethod
    def _read_rows(group: Group, columns: Sequence[str], rows: Sequence[int], batch: int = 256
                   ) -> Iterator[dict[str, Any]]:
        """The rows ``rows`` (sorted positions in the group) of ``columns``, decoded ``batch`` rows at a time: memory
        stays bounded by a batch even when a row group holds hundreds of MB (the ``images`` config's JPEG bytes)."""
        import pyarrow.parquet as pq

        wanted = sorted(rows)
        k, offset = 0, 0
        for b in pq.ParquetFile(group.path).iter_batches(batch_size=batch, row_groups=[group.index],
                                                          columns=list(columns)):
            local = []
            while k < len(wanted) and wanted[k] < offset + b.num_rows:
                local.append(wanted[k] - offset)
                k += 1
            if local:
                yield from b.take(local).to_pylist()
            offset += b.num_rows
            if k == len(wanted):
                return

    def sample(self, configs: Iterable[str], id_column: str, columns: Sequence[str], n: int, seed: int = 0,
               per_group: int = PER_GROUP) -> list[dict[str, Any]]:
        """``n`` rows (or all when fewer) of ``configs``, chosen deterministically by ``seed``.

        Row groups are visited in the order of a seeded hash of (shard, group index); in each, the rows with the
        smallest seeded hash of their id are taken, ``ceil(n / touched)`` at most, where ``touched`` is
        ``ceil(n / per_group)`` row groups. Every row gets ``_config`` and ``_split``. The result is sorted by
        (config, split, id), so the same release, ``n`` and ``seed`` always give the same rows in the same order.
        """
        return self.read_picks(self.sample_picks(configs, id_column, n, seed, per_group), id_column, columns)

    def sample_picks(self, configs: Iterable[str], id_column: str, n: int, seed: int = 0,
                     per_group: int = PER_GROUP) -> list[Pick]:
        """The rows ``sample`` takes, in its order, as ``Pick``s (group, position, id): only the id columns are
        read."""
        groups = [g for c in configs for g in self.groups(c) if g.num_rows]
        if n <= 0 or not groups:
            return []
        groups.sort(key=lambda g: stable_hash(seed, f"{g.config}/{g.path.name}#{g.index}"))
        quota = math.ceil(n / min(len(groups), max(1, math.ceil(n / per_group))))
        chosen: list[tuple[Group, list[int], list[Any]]] = []   # (group, row indices by id hash, ids) of those read
        taken = 0
        for g in groups:
            if taken >= n:
                break
            ids = self._read(g, [id_column]).column(0).to_pylist()
            order = sorted(range(len(ids)), key=lambda i: (stable_hash(seed, ids[i]), i))
            chosen.append((g, order, ids))
            taken += min(quota, len(order), n - taken)
        # every group is read when the corpus is small; then groups give more than ``quota``, in the same order
        counts = [0] * len(chosen)
        left = n
        for limit in (quota, None):
            for k, (_, order, _) in enumerate(chosen):
                more = min(len(order) - counts[k], left) if limit is None else min(limit, len(order), left)
                more = max(0, more if limit is None else more - counts[k])
                counts[k] += more
                left -= more
        picks = [Pick(g, i, ids[i]) for (g, order, ids), c in zip(chosen, counts) for i in sorted(order[:c])]
        picks.sort(key=lambda p: (p.group.config, p.group.split, str(p.id)))
        return picks

    def read_picks(self, picks: Sequence[Pick], id_column: str, columns: Sequence[str]) -> list[dict[str, Any]]:
        """The rows of ``picks`` (``id_column`` and ``columns``, with ``_config`` and ``_split``), in their order;
        only the row groups that hold them are decoded, each once."""
        cols = list(dict.fromkeys([id_column, *columns]))
        by_group: dict[Group, list[int]] = {}
        for p in picks:
            by_group.setdefault(p.group, []).append(p.row)
        rows: dict[tuple[Group, int], dict[str, Any]] = {}
        for g, positions in by_group.items():
            for pos, r in zip(sorted(positions), self._read_rows(g, cols, positions)):
                rows[(g, pos)] = {**r, "_config": g.config, "_split": g.split}
        return [rows[(p.group, p.row)] for p in picks]

    def _matching(self, config: str, id_column: str, ids: Iterable[Any]) -> Iterator[tuple[Any, list[int]]]:
        """``(row group, positions)`` of each row group of ``config`` holding rows whose ``id_column`` is in ``ids``
        (only the id column is read)."""
        wanted = set(ids)
        if not wanted:
            return
        for g in self.groups(config):
            if not g.num_rows:
                continue
            got = self._read(g, [id_column]).column(0).to_pylist()
            take = [i for i, v in enumerate(got) if v in wanted]
            if take:
                yield g, take

    def lookup(self, config: str, id_column: str, ids: Iterable[Any], columns: Sequence[str],
               limit_per_id: int | None = None) -> dict[Any, list[dict[str, Any]]]:
        """Every row of ``config`` whose ``id_column`` is in ``ids`` (id -> rows, in file order).

        Reads the id column of each row group and decodes only the groups (and ``columns``) that hold wanted ids.
        ``limit_per_id`` caps the rows kept per id (a video with thousands of dropped steps stays small).
        """
        out: dict[Any, list[dict[str, Any]]] = {}
        cols = list(dict.fromkeys([id_column, *columns]))
        for g, take in self._matching(config, id_column, ids):
            for r in self._read_rows(g, cols, take):
                bucket = out.setdefault(r[id_column], [])
                if limit_per_id is None or len(bucket) < limit_per_id:
                    bucket.append({**r, "_split": g.split})
        return out

    def lookup_table(self, config: str, id_column: str, ids: Iterable[Any], columns: Sequence[str],
                     batch: int = 256) -> Any:
        """``lookup`` as one Arrow table (``id_column``, ``columns`` and ``_split``, rows in file order), never
        converted to Python: a view that formats many nested values converts the columns it needs in bulk.
        ``None`` when no row matches. Memory holds one batch of a row group besides the rows taken."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = list(dict.fromkeys([id_column, *columns]))
        tables = []
        for g, take in self._matching(config, id_column, ids):
            k, offset = 0, 0
            for b in pq.ParquetFile(g.path).iter_batches(batch_size=batch, row_groups=[g.index], columns=cols):
                local = []
                while k < len(take) and take[k] < offset + b.num_rows:
                    local.append(take[k] - offset)
                    k += 1
                if local:
                    t = pa.Table.from_batches([b.take(local)])
                    tables.append(t.append_column("_split", pa.array([g.split] * len(local), type=pa.string())))
                offset += b.num_rows
                if k == len(take):
                    break
        return pa.concat_tables(tables, promote_options="permissive") if tables else None

    def iter_column(self, config: str, column: str) -> Iterator[Any]:
        """One column's values across a config, row group by row group."""
        for g in self.groups(config):
            yield from self._read(g, [column]).column(0).to_pylist()
