"""Release rows made one work shard at a time and cached, so that an edit re-encodes only what it changed (README.md
"The release" and "Caching and resume").

A corpus gives a config's rows as :class:`ShardedRows`: a complete stage and a function from one work shard's rows to
``(split, release row)`` pairs. For every work shard the release flow encodes those pairs into Arrow with the declared
features once and keeps them as a *part*, ``<stage dir>/_release/<config>/<i>-<key>.arrow``, where ``<key>`` hashes
the shard's row digest (from its ``stats.json``), ``ShardedRows.key`` (what else ``make`` reads: config values, model
ids), the features, the release code and ``PART_FORMAT_VERSION``. The release's Parquet shards are then written from
the parts (``write_split_tables``), split by split, one part in memory at a time.

A part is an Arrow IPC file (LZ4-compressed, about the size of the Parquet it replaced) whose schema metadata names
the splits it holds: it is read back memory-mapped, with no Parquet decoding, and skipped without being read for a
split it does not hold. After an edit of one video only the parts of the work shards the edit recomputed are made
again; the rest are read back as Arrow (C++, no Python per row). Parts a build no longer uses are removed when its
release is written, and the stage folder's garbage collection removes the rest with the stage.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.atomic import atomic_path
from ..core.fingerprint import hash_obj
from ..core.shards import StageData, read_stats
from .cache import file_identity
from .writer import ENCODE_BATCH_ROWS, MEDIA_BATCH_ROWS, check_batch, encode_rows, has_media

if TYPE_CHECKING:  # datasets only when rows are encoded (builders/release/writer.py)
    from datasets import Features

#: bump when the parts written for the same rows, key, features and code would differ
PART_FORMAT_VERSION = 2
#: the column of a part that holds each row's split (dropped when the release is written)
PART_SPLIT = "__split"
PARTS_DIR = "_release"
#: a part's file suffix, and the suffixes of earlier formats (removed with the stale parts)
PART_SUFFIX = ".arrow"
_PART_SUFFIXES = (".arrow", ".parquet")
#: the schema metadata key of a part that lists its splits (JSON)
_SPLITS_KEY = b"procvid_part_splits"

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


def write_part(path: Path, table: pa.Table) -> None:
    """``table`` (with its ``PART_SPLIT`` column) as the part file ``path``: Arrow IPC, LZ4, the splits it holds in
    its schema metadata; written atomically."""
    import json

    splits = sorted(set(table[PART_SPLIT].to_pylist()))
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), _SPLITS_KEY: json.dumps(splits).encode()})
    with atomic_path(path) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(
                sink, schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
            writer.write_table(table.replace_schema_metadata(schema.metadata))


#: the splits of the parts read in this process, by path: (size, mtime_ns, inode) when read, the splits
_SPLITS_SEEN: dict[str, tuple[list[int], list[str]]] = {}


def _read_part(path: Path, split: str) -> pa.Table | None:
    """The rows of ``split`` in the part ``path`` (``None`` when it holds none: its schema metadata says so, and the
    rows are not read; a part read before for another split is not even opened)."""
    import json

    splits = None
    if path.suffix == ".parquet":  # a part of an earlier format (PART_FORMAT_VERSION 1)
        part = pq.ParquetFile(str(path))
        table = part.read() if _may_hold(part.metadata, split) else None
    else:
        ident = file_identity(path)
        seen = _SPLITS_SEEN.get(str(path))
        if seen is not None and seen[0] == ident and split not in seen[1]:
            return None
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            listed = (reader.schema.metadata or {}).get(_SPLITS_KEY)
            splits = json.loads(listed) if listed is not None else None
            table = reader.read_all() if splits is None or split in splits else None
        if splits is not None:
            if len(_SPLITS_SEEN) > 100_000:
                _SPLITS_SEEN.clear()
            _SPLITS_SEEN[str(path)] = (ident, splits)
    if table is None:
        return None
    if splits == [split]:  # every row is of this split: nothing to filter (no copy of the part)
        return table
    import pyarrow.compute as pc  # here: 20-40 ms of import that a release of one split never needs

    return table.filter(pc.equal(table[PART_SPLIT], split))


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
        path = folder / f"{i:05d}-{part_key(rows, config, features, code, digest)}{PART_SUFFIX}"
        paths.append(path)
        if path.is_file():
            stats.reused += 1
            continue
        pairs = list(rows.make(rows.data.shard_rows(i, rows.columns)))
        table = _encode_part(pairs, features, splits, f"{config} (work shard {i} of {rows.data.dir.name})")
        write_part(path, table)
        stats.made += 1
    used = {p.name for p in paths}
    for p in folder.iterdir():
        if p.name not in used and p.suffix in _PART_SUFFIXES:
            p.unlink()
    return paths


#: the file beside a config's parts that holds their content digests (part name -> sha256 of its bytes)
DIGESTS_FILE = "_digests.json"


def part_digests(parts: list[Path]) -> list[str]:
    """The sha256 of each part's bytes, in order: a part written from the same rows has the same bytes (the encoding
    and the IPC writer are deterministic), whatever key named it. Kept in ``DIGESTS_FILE`` beside the parts by (name,
    size, mtime_ns, inode); a part not listed there, or changed since, is hashed. Entries of parts no longer there
    are dropped."""
    import hashlib
    import json

    from ..core.atomic import atomic_write_text

    out: list[str] = []
    by_folder: dict[Path, dict[str, Any]] = {}
    changed: set[Path] = set()
    for path in parts:
        folder = path.parent
        if folder not in by_folder:
            try:
                known = json.loads((folder / DIGESTS_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                known = {}
            by_folder[folder] = known if isinstance(known, dict) else {}
        known = by_folder[folder]
        ident = file_identity(path)
        entry = known.get(path.name)
        if not (isinstance(entry, list) and len(entry) == 2 and entry[0] == ident):
            entry = [ident, hashlib.sha256(path.read_bytes()).hexdigest()]
            known[path.name] = entry
            changed.add(folder)
        out.append(entry[1])
    for folder, known in by_folder.items():
        names = {p.name for p in folder.iterdir()}
        stale = [k for k in known if k not in names]
        for k in stale:
            del known[k]
        if stale or folder in changed:
            with contextlib.suppress(OSError):  # only a cache: a full disk costs the hashing again, no more
                atomic_write_text(folder / DIGESTS_FILE, json.dumps(known, sort_keys=True))
    return out


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
        table = _read_part(Path(path), split)
        if table is not None and table.num_rows:
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


def _compact(partial: Any) -> Any:
    """A partial with its summaries' buffers folded in (``Tally.compact``, ``ReportTallies.compact``: the same state a
    merge would reach), in itself or in the values of a dict; returns it."""
    if callable(getattr(partial, "compact", None)):
        partial.compact()
    elif isinstance(partial, dict):
        for v in partial.values():
            _compact(v)
    return partial


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
        partial = _compact(scan.fold(scan.data.shard_rows(i, scan.columns)))
        with atomic_path(path) as tmp:
            tmp.write_bytes(pickle.dumps(partial, protocol=pickle.HIGHEST_PROTOCOL))
        stats.made += 1
        yield partial
    for p in folder.iterdir():
        if p.name not in used and p.suffix == ".pkl":
            p.unlink()
