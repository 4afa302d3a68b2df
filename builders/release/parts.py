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

Parts and scan partials are checked caches (``builders.core.checked``): the sha256 of a part's bytes is
recorded when it is written, in ``DIGESTS_FILE`` beside the parts, and a read hashes the bytes it reads (one pass)
against it; a scan partial carries its sha256 in a header line of its own file. A part or partial that is not what was
written (a flipped byte, cut short, no longer decoding, or with no digest recorded) is treated as missing: one warning
line names it and it is made again from its work shard, with the same bytes as an undamaged one.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.atomic import atomic_write_bytes
from ..core.checked import read_checked_bytes
from ..core.errors import DamagedCache
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

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardedRows:
    """The rows of one release config, made from the complete stage ``data`` one work shard at a time.

    ``make`` turns the rows of one work shard (only ``columns`` of them, all when ``None``) into ``(split, release
    row)`` pairs. It must depend on nothing but those rows and ``key``: everything else it reads (config values, model
    ids, a fitted state's digest) goes into ``key``, which keys the cached parts. Rows come in work-shard order, then
    in ``make``'s order.

    ``shard_key`` (optional): what else one work shard's part depends on, by shard index, for a release whose rows
    take something from a global decision (the ShowHowTo test split: the test ids among that shard's rows); it keys
    that shard's part only, so a decision that moves one row remakes one part.
    """

    data: StageData
    make: Callable[[list[dict[str, Any]]], Iterable[tuple[str, Row]]]
    key: Any = None
    columns: list[str] | None = None
    shard_key: Callable[[int], Any] | None = None


@dataclass
class PartsStats:
    """What building a config's parts did: parts made by this build and parts reused from an earlier one."""

    made: int = 0
    reused: int = 0
    #: the parts and scan partials found damaged and made again (absolute paths; ``flow`` counts them in
    #: ``this_build``)
    damaged: list[str] = field(default_factory=list)


def part_key(rows: ShardedRows, config: str, features: Features, code: Any, shard_digest: str,
             shard: int | None = None) -> str:
    own = () if rows.shard_key is None else (rows.shard_key(shard),)  # none: the key of every other corpus as before
    return hash_obj(PART_FORMAT_VERSION, config, features.to_dict(), code, rows.key, shard_digest, *own)[:24]


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


def write_part(path: Path, table: pa.Table, digests: dict[str, Any] | None = None) -> str:
    """``table`` (with its ``PART_SPLIT`` column) as the part file ``path``: Arrow IPC, LZ4, the splits it holds in
    its schema metadata; written atomically. Returns the sha256 of the bytes written, recorded as the part's entry in
    ``digests`` (the loaded ``DIGESTS_FILE`` of its folder, which the caller saves: ``_save_digests``) or, without
    it, in the folder's ``DIGESTS_FILE`` at once."""
    import json

    splits = sorted(set(table[PART_SPLIT].to_pylist()))
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), _SPLITS_KEY: json.dumps(splits).encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table.replace_schema_metadata(schema.metadata))
    data = sink.getvalue()
    sha = hashlib.sha256(data).hexdigest()  # of the bytes in memory: the file is not read back to hash it
    atomic_write_bytes(path, data.to_pybytes())
    own = digests is None
    if own:
        digests = _load_digests(path.parent)
    digests[path.name] = [file_identity(path), sha]
    if own:
        _save_digests(path.parent, digests)
    return sha


#: the splits of the parts read in this process, by path: (size, mtime_ns, inode) when read, the splits
_SPLITS_SEEN: dict[str, tuple[list[int], list[str]]] = {}


def _read_part(path: Path, split: str, sha256: str | None = None) -> pa.Table | None:
    """The rows of ``split`` in the part ``path`` (``None`` when it holds none: its schema metadata says so, and the
    rows are not decoded; a part read before for another split is not even opened). The bytes are read once, hashed
    against ``sha256`` (the digest recorded when the part was written; ``None``: not checked) and decoded from
    memory; :class:`DamagedCache` when they differ or do not decode."""
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
        data = read_checked_bytes(path, sha256)
        try:
            reader = pa.ipc.open_file(pa.py_buffer(data))
            listed = (reader.schema.metadata or {}).get(_SPLITS_KEY)
            splits = json.loads(listed) if listed is not None else None
            table = reader.read_all() if splits is None or split in splits else None
        except (pa.ArrowException, OSError, ValueError) as err:  # cut short, or bytes that no longer decode
            raise DamagedCache(path, f"not a readable part ({type(err).__name__}: {str(err)[:200]})") from err
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


class PartList(list):
    """The part paths of one config in shard order (a list), with the sha256 recorded for each when it was written
    (``digests``) and ``remake(k)``, which makes part ``k`` again from its work shard (a part found damaged when
    read: ``split_tables``)."""

    def __init__(self, paths: Iterable[Path], digests: list[str | None], remake: Callable[[int], str]) -> None:
        super().__init__(paths)
        self.digests = digests
        self.remake = remake


def _recorded(entry: Any) -> str | None:
    """The sha256 of a ``DIGESTS_FILE`` entry (``[identity, sha256]``), or None when it is not one."""
    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], str) and len(entry[1]) == 64:
        return entry[1]
    return None


def _load_digests(folder: Path) -> dict[str, Any]:
    import json

    try:
        known = json.loads((folder / DIGESTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _save_digests(folder: Path, known: dict[str, Any]) -> None:
    import json

    from ..core.atomic import atomic_write_text

    with contextlib.suppress(OSError):  # a part whose digest is lost is made again: no more
        atomic_write_text(folder / DIGESTS_FILE, json.dumps(known, sort_keys=True))


#: one part made again at a time (the release's shards are written in a thread beside the main one)
_REMAKE_LOCK = threading.Lock()


def build_parts(rows: ShardedRows, config: str, features: Features, splits: tuple[str, ...], code: Any,
                stats: PartsStats | None = None) -> PartList:
    """The part of every work shard of ``rows.data``, made where missing; returns their paths in shard order (a
    :class:`PartList`). A part with no digest recorded in ``DIGESTS_FILE`` (written before its digest, then killed)
    is made again; one whose bytes changed since is found when read (``split_tables``).

    Parts of this config that the list does not name (an earlier build's) are removed.
    """
    folder = rows.data.dir / PARTS_DIR / config
    folder.mkdir(parents=True, exist_ok=True)
    stats = stats if stats is not None else PartsStats()
    known = _load_digests(folder)
    paths: list[Path] = []
    shas: list[str | None] = []

    def make(i: int, path: Path) -> str:
        pairs = list(rows.make(rows.data.shard_rows(i, rows.columns)))
        table = _encode_part(pairs, features, splits, f"{config} (work shard {i} of {rows.data.dir.name})")
        return write_part(path, table, known)

    try:
        for i in range(rows.data.n):
            digest = read_stats(rows.data.dir, i).get("digest")
            if not digest:
                raise RuntimeError(f"work shard {i} of {rows.data.dir} has no row digest: is the stage complete?")
            path = folder / f"{i:05d}-{part_key(rows, config, features, code, digest, i)}{PART_SUFFIX}"
            paths.append(path)
            sha = _recorded(known.get(path.name))
            if sha is not None and path.is_file():
                stats.reused += 1
            else:
                sha = make(i, path)
                stats.made += 1
            shas.append(sha)
        used = {p.name for p in paths}
        for p in folder.iterdir():
            if p.name not in used and p.suffix in _PART_SUFFIXES:
                p.unlink()
        for name in [k for k in known if k not in used]:
            del known[name]
    finally:
        _save_digests(folder, known)

    def remake(k: int) -> str:
        """Part ``k`` made again (it was found damaged); its new sha256."""
        with _REMAKE_LOCK:
            stats.damaged.append(str(paths[k]))
            sha = make(k, paths[k])
            _save_digests(folder, known)
            shas[k] = sha
            stats.made += 1
            stats.reused -= 1
            return sha

    return PartList(paths, shas, remake)


#: the file beside a config's parts that holds their content digests (part name -> sha256 of its bytes)
DIGESTS_FILE = "_digests.json"


def part_digests(parts: list[Path]) -> list[str]:
    """The sha256 of each part's bytes, in order: a part written from the same rows has the same bytes (the encoding
    and the IPC writer are deterministic), whatever key named it. The digest is the one recorded in ``DIGESTS_FILE``
    when the part was written (``write_part``), so a part damaged since keeps the digest of what it should hold (its
    read finds the damage and makes it again, with those bytes); a part not listed there is hashed and listed.
    Entries of parts no longer there are dropped."""
    out: list[str] = []
    by_folder: dict[Path, dict[str, Any]] = {}
    changed: set[Path] = set()
    for path in parts:
        folder = path.parent
        if folder not in by_folder:
            by_folder[folder] = _load_digests(folder)
        known = by_folder[folder]
        sha = _recorded(known.get(path.name))
        if sha is None:
            sha = hashlib.sha256(path.read_bytes()).hexdigest()
            known[path.name] = [file_identity(path), sha]
            changed.add(folder)
        out.append(sha)
    for folder, known in by_folder.items():
        names = {p.name for p in folder.iterdir()}
        stale = [k for k in known if k not in names]
        for k in stale:
            del known[k]
        if stale or folder in changed:
            _save_digests(folder, known)  # only a cache: a full disk costs the hashing again, no more
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
    """The rows of ``split`` in ``parts``, one part's Arrow table at a time, without the split column.

    Each part is checked against the digest recorded when it was written (``parts.digests`` of a :class:`PartList`,
    else its folder's ``DIGESTS_FILE``; a part listed in neither is read unchecked). A damaged part of a
    :class:`PartList` is made again from its work shard (one warning line) and read from there; of a plain list it
    raises :class:`DamagedCache`."""
    names = list(features)
    digests = getattr(parts, "digests", None)
    remake = getattr(parts, "remake", None)
    folders: dict[Path, dict[str, Any]] = {}
    for k, path in enumerate(parts):
        path = Path(path)
        if digests is not None:
            sha = digests[k]
        else:
            if path.parent not in folders:
                folders[path.parent] = _load_digests(path.parent)
            sha = _recorded(folders[path.parent].get(path.name))
        try:
            table = _read_part(path, split, sha)
        except (DamagedCache, FileNotFoundError) as err:
            if remake is None:
                raise
            why = err.why if isinstance(err, DamagedCache) else "missing"
            log.warning("damaged release part %s (%s): made again from its work shard", path, why)
            _SPLITS_SEEN.pop(str(path), None)
            table = _read_part(path, split, remake(k))
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


#: the first line of a cached scan partial: this prefix, then the sha256 (hex) of the pickle that follows the line
_PARTIAL_HEADER = b"procvid-partial sha256:"
_EARLIER_FORMAT = "an earlier format, without a digest"


def _read_partial(path: Path) -> Any:
    """The partial kept in ``path``, its pickle checked against the sha256 in its header line (read once, hashed,
    then unpickled from memory); :class:`DamagedCache` when the header is not there (cut short, or a partial of an
    earlier build without one) or the bytes differ."""
    import pickle

    data = read_checked_bytes(path, None)
    if data[:1] == b"\x80":  # a bare pickle: a partial of an earlier build, written before digests were kept
        raise DamagedCache(path, _EARLIER_FORMAT)
    head, _, payload = data.partition(b"\n")
    if not head.startswith(_PARTIAL_HEADER) or len(head) != len(_PARTIAL_HEADER) + 64:
        raise DamagedCache(path, f"no digest header ({len(data)} bytes)")
    sha = head[len(_PARTIAL_HEADER):].decode("ascii", "replace")
    got = hashlib.sha256(payload).hexdigest()
    if got != sha:
        raise DamagedCache(path, f"sha256 {got[:12]}... differs from the {sha[:12]}... recorded when it was written "
                                 f"({len(data)} bytes)")
    try:
        return pickle.loads(payload)  # noqa: S301 - written by this toolkit into its own work directory, checked
    except Exception as err:  # the digest matched: a pickle that no longer loads is the code's, not the disk's
        raise DamagedCache(path, f"does not unpickle ({type(err).__name__}: {err})") from err


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
            try:
                partial = _read_partial(path)
            except DamagedCache as err:
                if err.why != _EARLIER_FORMAT:  # an earlier build's partial is made again without a word
                    log.warning("damaged release scan partial %s (%s): folded again from its work shard", path,
                                err.why)
                    stats.damaged.append(str(path))
            else:
                stats.reused += 1
                yield partial
                continue
        partial = _compact(scan.fold(scan.data.shard_rows(i, scan.columns)))
        payload = pickle.dumps(partial, protocol=pickle.HIGHEST_PROTOCOL)
        atomic_write_bytes(path, _PARTIAL_HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        stats.made += 1
        yield partial
    for p in folder.iterdir():
        if p.name not in used and p.suffix == ".pkl":
            p.unlink()
