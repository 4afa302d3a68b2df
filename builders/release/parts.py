"""Release rows made one work shard at a time and cached, so that an edit re-encodes only what it changed (README.md
"The release" and "Caching and resume").

A corpus gives a config's rows as :class:`ShardedRows`: a complete stage and a function from one work shard's rows to
``(split, release row)`` pairs. For every work shard the release flow encodes those pairs into Arrow with the declared
features once and keeps them as a *part*, ``<stage dir>/_release/<config>/<i>-<key>.parquet``, where ``<key>`` hashes
the shard's row digest (from its ``stats.json``), ``ShardedRows.key`` (what else ``make`` reads: config values, model
ids), the features, the release code and ``PART_FORMAT_VERSION``. The release's Parquet shards are then written from
the parts (``write_split_tables``), split by split, one part in memory at a time.

After an edit of one video only the parts of the work shards the edit recomputed are made again; the rest are read
back as Arrow (C++, no Python per row). Parts a build no longer uses are removed when its release is written, and the
stage folder's garbage collection removes the rest with the stage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.atomic import atomic_path
from ..core.fingerprint import hash_obj
from ..core.shards import StageData, read_stats
from .writer import ENCODE_BATCH_ROWS, MEDIA_BATCH_ROWS, check_batch, encode_rows, has_media

if TYPE_CHECKING:  # datasets only when rows are encoded (builders/release/writer.py)
    from datasets import Features

#: bump when the parts written for the same rows, key, features and code would differ
PART_FORMAT_VERSION = 1
#: the column of a part that holds each row's split (dropped when the release is written)
PART_SPLIT = "__split"
PARTS_DIR = "_release"

Row = Mapping[str, Any]


@dataclass(frozen=True)
class ShardedRows:
    """The rows of one release config, made from the complete stage ``data`` one work shard at a time.

    ``make`` turns the rows of one work shard (only ``columns`` of them, all when ``None``) into ``(split, release
    row)`` pairs. It must depend on nothing but those rows and ``key``: everything else it reads (config values, model
    ids, a fitted state's digest) goes into ``key``, which keys the cached parts. Rows come in work-shard order, then
    in ``make``'s order.
    """

    data: StageData
    make: Callable[[list[dict[str, Any]]], Iterable[tuple[str, Row]]]
    key: Any = None
    columns: list[str] | None = None


@dataclass
class PartsStats:
    """What building a config's parts did: parts made by this build and parts reused from an earlier one."""

    made: int = 0
    reused: int = 0


def part_key(rows: ShardedRows, config: str, features: Features, code: Any, shard_digest: str) -> str:
    return hash_obj(PART_FORMAT_VERSION, config, features.to_dict(), code, rows.key, shard_digest)[:24]


def _encode_part(pairs: list[tuple[str, Row]], features: Features, splits: tuple[str, ...], where: str) -> pa.Table:
    """``(split, row)`` pairs as one Arrow table of the features' schema plus the ``PART_SPLIT`` column."""
    bad = sorted({s for s, _ in pairs} - set(splits))
    if bad:
        raise ValueError(f"{where}: rows for split(s) {bad}, the release has {list(splits)}")
    embed = has_media(features)
    size = MEDIA_BATCH_ROWS if embed else ENCODE_BATCH_ROWS
    want = set(features)
    tables = []
    for k in range(0, len(pairs), size):
        batch = [r for _, r in pairs[k:k + size]]
        check_batch(batch, want, k)
        tables.append(encode_rows(batch, features, embed=embed))
    table = pa.concat_tables(tables) if tables else features.arrow_schema.empty_table()
    return table.append_column(PART_SPLIT, pa.array([s for s, _ in pairs], type=pa.string()))


def build_parts(rows: ShardedRows, config: str, features: Features, splits: tuple[str, ...], code: Any,
                stats: PartsStats | None = None) -> list[Path]:
    """The part of every work shard of ``rows.data``, made where missing; returns their paths in shard order.

    Parts of this config that the list does not name (an earlier build's) are removed.
    """
    folder = rows.data.dir / PARTS_DIR / config
    folder.mkdir(parents=True, exist_ok=True)
    stats = stats if stats is not None else PartsStats()
    paths = []
    for i in range(rows.data.n):
        digest = read_stats(rows.data.dir, i).get("digest")
        if not digest:
            raise RuntimeError(f"work shard {i} of {rows.data.dir} has no row digest: is the stage complete?")
        path = folder / f"{i:05d}-{part_key(rows, config, features, code, digest)}.parquet"
        paths.append(path)
        if path.is_file():
            stats.reused += 1
            continue
        pairs = list(rows.make(rows.data.shard_rows(i, rows.columns)))
        table = _encode_part(pairs, features, splits, f"{config} (work shard {i} of {rows.data.dir.name})")
        with atomic_path(path) as tmp:
            pq.write_table(table, str(tmp))
        stats.made += 1
    used = {p.name for p in paths}
    for p in folder.iterdir():
        if p.name not in used and p.suffix == ".parquet":
            p.unlink()
    return paths


def _may_hold(meta: pq.FileMetaData, split: str) -> bool:
    """Whether a part may hold rows of ``split``, from its footer's min/max statistics of the split column (a part
    of one split is then skipped for the other without being read; no statistics: it may)."""
    paths = [meta.schema.column(i).path for i in range(len(meta.schema))]
    column = paths.index(PART_SPLIT) if PART_SPLIT in paths else None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics if column is not None else None
        if stats is None or not stats.has_min_max or stats.min <= split <= stats.max:
            return True
    return False


def split_tables(parts: list[Path], split: str, features: Features) -> Iterator[pa.Table]:
    """The rows of ``split`` in ``parts``, one part's Arrow table at a time, without the split column."""
    names = list(features)
    for path in parts:
        part = pq.ParquetFile(str(path))
        if not _may_hold(part.metadata, split):
            continue
        table = part.read()
        table = table.filter(pc.equal(table[PART_SPLIT], split))
        if table.num_rows:
            yield table.select(names)


@dataclass(frozen=True)
class ShardedScan:
    """A summary of a complete stage made one work shard at a time and cached like the parts (statistics, report
    distributions): ``fold`` turns one work shard's rows into a picklable partial summary, which the caller merges in
    shard order. ``fold`` may depend on nothing but those rows and ``key``."""

    data: StageData
    name: str
    fold: Callable[[list[dict[str, Any]]], Any]
    key: Any = None
    columns: list[str] | None = None


def scan_partials(scan: ShardedScan, code: Any, stats: PartsStats | None = None) -> Iterator[Any]:
    """The partial summary of every work shard of ``scan.data`` in shard order, folded where not cached
    (``<stage dir>/_release/_scan-<name>/<i>-<key>.pkl``). Cached partials of this scan that the build no longer uses
    are removed once every shard was read."""
    import pickle

    folder = scan.data.dir / PARTS_DIR / f"_scan-{scan.name}"
    folder.mkdir(parents=True, exist_ok=True)
    stats = stats if stats is not None else PartsStats()
    used = set()
    for i in range(scan.data.n):
        digest = read_stats(scan.data.dir, i).get("digest")
        if not digest:
            raise RuntimeError(f"work shard {i} of {scan.data.dir} has no row digest: is the stage complete?")
        key = hash_obj(PART_FORMAT_VERSION, "scan", scan.name, code, scan.key, digest)[:24]
        path = folder / f"{i:05d}-{key}.pkl"
        used.add(path.name)
        if path.is_file():
            stats.reused += 1
            with open(path, "rb") as f:
                yield pickle.load(f)  # noqa: S301 - written by this toolkit into its own work directory
            continue
        partial = scan.fold(scan.data.shard_rows(i, scan.columns))
        with atomic_path(path) as tmp:
            tmp.write_bytes(pickle.dumps(partial, protocol=pickle.HIGHEST_PROTOCOL))
        stats.made += 1
        yield partial
    for p in folder.iterdir():
        if p.name not in used and p.suffix == ".pkl":
            p.unlink()
