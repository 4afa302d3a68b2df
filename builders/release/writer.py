"""Parquet shard writing: the rows of one config and split streamed into
``<root>/<config>/<split>-{i:05d}-of-{n:05d}.parquet`` (docs/publishing.md, "The release folder").

Layout (docs/publishing.md)::

    <root>/README.md
    <root>/<config>/<split>-00000-of-00002.parquet
    <root>/<config>/<split>-00001-of-00002.parquet

Shards are streamed: ``write_split_stream`` takes an iterator of rows (a generator over the final work shards) and
holds one batch and one row group in memory, never a split; ``write_split_tables`` does the same for rows already
encoded to Arrow (the release parts, ``builders.release.parts``). Shards are written under hidden names and renamed
once their number is known (``_finish_parts``: the final names are not known while the shards are written, so this
is not ``builders.core.atomic``'s one-file rename); a single shard of ``write_split`` goes through
``builders.core.atomic.atomic_path``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # datasets (0.5 s to import) only when rows are encoded: a cached rerun never imports it
    from datasets import Features

from ..core.atomic import atomic_path

__all__ = [
    "ENCODE_BATCH_ROWS",
    "MAX_SHARD_BYTES",
    "MEDIA_BATCH_ROWS",
    "RowSource",
    "SHARD_RE",
    "encode_rows",
    "shard_name",
    "split_shards",
    "write_split",
    "write_split_stream",
    "write_split_tables",
]

SHARD_RE = re.compile(r"^(?P<split>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.parquet\Z")
"""A release shard's file name: ``<split>-{i:05d}-of-{n:05d}.parquet``."""


def shard_name(split: str, i: int, n: int) -> str:
    """Deterministic shard file name ``<split>-{i:05d}-of-{n:05d}.parquet`` (docs/publishing.md)."""
    return f"{split}-{i:05d}-of-{n:05d}.parquet"


def split_shards(folder: Path, split: str) -> dict[int, list[tuple[int, Path]]]:
    """Shard files of ``split`` in ``folder``, grouped by their total ``n``: ``{n: [(i, path), ...]}``."""
    found: dict[int, list[tuple[int, Path]]] = {}
    if not folder.is_dir():
        return found
    for p in folder.iterdir():
        m = SHARD_RE.match(p.name)
        if m and m["split"] == split and p.is_file():
            found.setdefault(int(m["n"]), []).append((int(m["i"]), p))
    for v in found.values():
        v.sort()
    return found


#: rows encoded into one Arrow batch (datasets' ``DEFAULT_MAX_BATCH_SIZE``); configs with media use ``MEDIA_BATCH_ROWS``
ENCODE_BATCH_ROWS = 1000
MEDIA_BATCH_ROWS = 100
#: a row group closes at this many rows or this many Arrow bytes, whichever comes first. The writer holds one row group
#: in memory, and a reader (the explorer, the gate's first row, ``datasets``' Parquet loader, the Hub's viewer) reads a
#: whole row group to get one row: the release of 20,000 HowTo100M-shaped videos, written again from cached shards,
#: peaked at 257 MiB with 64 MiB row groups and at 228 MiB with 16 MiB ones (``tests/perf/README.md``). ``datasets``
#: itself aims for row groups of at most 100 MB (``config.MAX_ROW_GROUP_SIZE``)
ROW_GROUP_ROWS = 100_000
ROW_GROUP_BYTES = 16 << 20
#: a shard closes at ``max_rows_per_shard`` rows or at this many (uncompressed Arrow) bytes (docs/publishing.md: ~500 MB)
MAX_SHARD_BYTES = 500 << 20

RowSource = Iterable[Mapping[str, Any]] | Callable[[], Iterable[Mapping[str, Any]]]
"""Rows of one split: an iterable, or a zero-argument callable returning an iterator (called exactly once)."""

_PART_RE = re.compile(r"^\.(?P<split>.+)-(?P<i>\d{5})\.parquet\.part\Z")
#: a single shard's temp file: ``.<shard>.tmp.<pid>`` (``atomic_path``) or ``.<shard>.tmp`` (earlier versions)
_TMP_RE = re.compile(r"^\.(?P<shard>.+\.parquet)\.tmp(?:\.\d+)?\Z")


def check_batch(rows: list[Mapping[str, Any]], want: set[str], offset: int) -> None:
    """Every row must have exactly the declared top-level fields (docs/architecture.md, "The release step": rows match the Features)."""
    for idx, row in enumerate(rows, offset):
        keys = set(row)
        if keys != want:
            raise ValueError(
                f"row {idx} does not match the features: missing {sorted(want - keys)}, unexpected {sorted(keys - want)}"
            )


def has_media(features: Features) -> bool:
    if hasattr(features, "media"):  # LightFeatures (builders.release.light)
        return bool(features.media)
    from datasets.features.features import require_storage_embed

    return any(require_storage_embed(f) for f in features.values())


def encode_rows(rows: list[Mapping[str, Any]], features: Features, *, embed: bool | None = None) -> pa.Table:
    """A batch of rows as an Arrow table of ``features.arrow_schema``, columns in the declared order.

    The same encoding as ``Dataset.from_list(rows, features=features)`` (``Features.encode_column`` and
    ``OptimizedTypedSequence``), then ``embed_table_storage`` when a feature holds media (an ``Image`` given by path
    gets its bytes, docs/publishing.md). Features of plain values, lists and dicts holding plain Python values are
    encoded without ``datasets`` (``builders.release.light.encode_light``: the same table), whether they are
    ``datasets.Features`` or ``LightFeatures``; anything else goes through ``datasets``.
    """
    from .light import encode_light

    schema = features.arrow_schema
    media = has_media(features) if embed is None else embed
    if not media:
        table = encode_light(rows, features, schema)
        if table is not None:
            return table
    if hasattr(features, "full"):  # LightFeatures: datasets needs the features themselves
        features = features.full()
    from datasets.arrow_writer import OptimizedTypedSequence
    from datasets.table import embed_table_storage

    arrays = [pa.array(OptimizedTypedSequence(features.encode_column([r[k] for r in rows], k), type=features[k], col=k))
              for k in features]
    table = pa.Table.from_arrays(arrays, schema=schema)
    if media:
        table = embed_table_storage(table)
    return table


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 points at /dev/null inside the block: a native library's messages while a failed writer is
    torn down (the build has its own one-line error for the failure, docs/architecture.md "Failures")."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no fd 2 (an embedding host): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


class _ShardFile:
    """One Parquet file written batch by batch with the writer options of ``Dataset.to_parquet`` (content-defined
    chunking, page index, per-column compression and dictionary options); row groups are bounded in rows and bytes."""

    def __init__(self, path: Path, features: Features) -> None:
        self.path = path
        self.schema = features.arrow_schema
        if hasattr(features, "column_options"):  # LightFeatures: datasets' options as recorded (builders.release.light)
            self._cdc, options = features.cdc, features.column_options
        else:
            from datasets import config as ds_config
            from datasets.arrow_writer import get_parquet_column_options

            self._cdc, options = ds_config.DEFAULT_CDC_OPTIONS, get_parquet_column_options(features, self.schema)
        self._writer = pq.ParquetWriter(str(path), schema=self.schema, use_content_defined_chunking=self._cdc,
                                        write_page_index=True, **options)
        self._buffer: list[pa.Table] = []
        self._buffer_rows = self._buffer_bytes = 0
        self.rows = self.bytes = 0

    def add(self, table: pa.Table) -> None:
        self._buffer.append(table)
        self._buffer_rows += table.num_rows
        self._buffer_bytes += table.nbytes
        self.rows += table.num_rows
        self.bytes += table.nbytes
        if self._buffer_rows >= ROW_GROUP_ROWS or self._buffer_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            table = pa.concat_tables(self._buffer)
            self._writer.write_table(table, row_group_size=table.num_rows)
        self._buffer, self._buffer_rows, self._buffer_bytes = [], 0, 0

    def close(self) -> None:
        self._flush()
        self._writer.add_key_value_metadata({"content_defined_chunking": json.dumps(self._cdc)})
        self._writer.close()

    def abort(self) -> None:
        with native_stderr_silenced(), contextlib.suppress(Exception):
            self._writer.close()  # after a failed write (a full disk) pyarrow's C++ writer may print "Check failed"
            del self._writer
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _check_names(config: str, split: str) -> None:
    if "/" in split or "/" in config or not split or not config or split.startswith("."):
        raise ValueError(f"bad config/split name {config!r}/{split!r}")


def _remove_parts(folder: Path, split: str) -> None:
    """Temp files of ``split`` left by an interrupted write (this writer's ``.part`` files, ``atomic_path``'s
    ``.<shard>.tmp.<pid>`` files and the ``.<shard>.tmp`` files of earlier versions)."""
    for p in folder.iterdir():
        m = _PART_RE.match(p.name)
        if m and m["split"] == split:
            p.unlink()
        elif (t := _TMP_RE.match(p.name)) and (m := SHARD_RE.match(t["shard"])) and m["split"] == split:
            p.unlink()


class _ShardSequence:
    """The shards of one split as they are written: Arrow tables go into the open hidden ``.part`` file, which closes
    at ``max_rows`` rows or ``max_bytes`` Arrow bytes; ``finish`` renames the parts to their final names and
    ``abort`` removes them."""

    def __init__(self, folder: Path, split: str, features: Features, max_rows: int, max_bytes: int | None) -> None:
        self.folder, self.split, self.features = folder, split, features
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.parts: list[Path] = []
        self.shard: _ShardFile | None = None

    def room(self) -> int:
        """Rows the open shard (or a new one) still takes."""
        return self.max_rows - (self.shard.rows if self.shard else 0)

    def add(self, table: pa.Table) -> None:
        """Append ``table`` (at most ``room()`` rows) to the open shard, opening one first when none is."""
        if self.shard is None:
            self.shard = _ShardFile(self.folder / f".{self.split}-{len(self.parts):05d}.parquet.part", self.features)
            self.parts.append(self.shard.path)
        self.shard.add(table)
        if self.shard.rows >= self.max_rows or (self.max_bytes and self.shard.bytes >= self.max_bytes):
            self.shard.close()
            self.shard = None

    def finish(self, keep_empty: bool) -> list[Path]:
        if self.shard is not None:
            self.shard.close()
            self.shard = None
        if not self.parts and keep_empty:
            empty = _ShardFile(self.folder / f".{self.split}-00000.parquet.part", self.features)
            empty.close()
            self.parts.append(empty.path)
        return _finish_parts(self.folder, self.split, self.parts)

    def abort(self) -> None:
        if self.shard is not None:
            self.shard.abort()
        for p in self.parts:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def _split_folder(root: str | os.PathLike, config: str, split: str, max_rows_per_shard: int) -> Path:
    """The config folder a split is written into, with the split's leftover ``.part`` files of a killed write gone;
    checks the names and the shard limit first."""
    if max_rows_per_shard < 1:
        raise ValueError(f"max_rows_per_shard must be >= 1, got {max_rows_per_shard}")
    _check_names(config, split)
    folder = Path(root) / config
    folder.mkdir(parents=True, exist_ok=True)
    _remove_parts(folder, split)
    return folder


def write_split_stream(
    root: str | os.PathLike,
    config: str,
    split: str,
    rows: RowSource,
    features: Features,
    max_rows_per_shard: int = 50_000,
    *,
    max_bytes_per_shard: int | None = MAX_SHARD_BYTES,
    batch_rows: int | None = None,
    keep_empty: bool = True,
) -> list[Path]:
    """Stream ``rows`` into ``<root>/<config>/<split>-{i:05d}-of-{n:05d}.parquet`` (docs/publishing.md).

    Rows are taken ``batch_rows`` at a time (1,000; 100 when a feature holds media), checked against the features,
    encoded to Arrow (``encode_rows``) and appended to the open shard; a shard closes after ``max_rows_per_shard``
    rows or once it holds ``max_bytes_per_shard`` Arrow bytes. Memory holds one batch and one row group (at most
    ``ROW_GROUP_ROWS`` rows / ``ROW_GROUP_BYTES``), never the split. Shards are written to hidden
    ``.<split>-{i:05d}.parquet.part`` files and renamed to their final names once ``n`` is known; then any other shard
    of this split (an earlier layout) is gone. The same rows in the same order give byte-identical files.

    No rows give one valid, empty shard with ``keep_empty`` (``datasets`` cannot load it: ``gate`` rejects it), or no
    file at all without it. ``rows`` may be a zero-argument callable returning the iterator. Returns the shard paths.
    """
    folder = _split_folder(root, config, split, max_rows_per_shard)
    embed = has_media(features)
    size = batch_rows or (MEDIA_BATCH_ROWS if embed else ENCODE_BATCH_ROWS)
    want = set(features)
    source = iter(rows() if callable(rows) else rows)
    seq = _ShardSequence(folder, split, features, max_rows_per_shard, max_bytes_per_shard)
    seen = 0
    try:
        while batch := list(itertools.islice(source, min(size, seq.room()))):
            check_batch(batch, want, seen)
            seen += len(batch)
            seq.add(encode_rows(batch, features, embed=embed))
        return seq.finish(keep_empty)
    except BaseException:
        seq.abort()
        raise


def _finish_parts(folder: Path, split: str, parts: list[Path]) -> list[Path]:
    """Rename the written ``.part`` files to their final ``<split>-{i:05d}-of-{n:05d}.parquet`` names, once every
    other shard of the split (an earlier layout) is gone."""
    n = len(parts)
    finals = [folder / shard_name(split, i, n) for i in range(n)]
    for shards in split_shards(folder, split).values():
        for _, p in shards:
            if p not in finals:
                p.unlink()
    for part, final in zip(parts, finals):
        os.replace(part, final)
    return finals


def write_split_tables(
    root: str | os.PathLike,
    config: str,
    split: str,
    tables: Iterable[pa.Table],
    features: Features,
    max_rows_per_shard: int = 50_000,
    *,
    max_bytes_per_shard: int | None = MAX_SHARD_BYTES,
    keep_empty: bool = True,
) -> list[Path]:
    """``write_split_stream`` for rows already encoded: Arrow tables of ``features.arrow_schema`` (such as the cached
    parts of the release flow) are sliced at the shard limits and appended, one table and one row group in memory.
    The same tables in the same order give byte-identical files."""
    folder = _split_folder(root, config, split, max_rows_per_shard)
    schema = features.arrow_schema
    seq = _ShardSequence(folder, split, features, max_rows_per_shard, max_bytes_per_shard)
    try:
        for table in tables:
            if not table.schema.equals(schema, check_metadata=False):
                raise ValueError(f"{config}/{split}: a table does not match the features:\n  got:      {table.schema}"
                                 f"\n  expected: {schema}")
            table = table.replace_schema_metadata(schema.metadata)
            offset = 0
            while offset < table.num_rows:
                take = min(table.num_rows - offset, seq.room())
                seq.add(table.slice(offset, take))
                offset += take
        return seq.finish(keep_empty)
    except BaseException:
        seq.abort()
        raise


def _write_one_shard(path: Path, rows: list[Mapping[str, Any]], features: Features) -> None:
    """``rows`` as the single Parquet file ``path`` (``atomic_path``: a hidden temp name, then renamed)."""
    embed = has_media(features)
    size = MEDIA_BATCH_ROWS if embed else ENCODE_BATCH_ROWS
    with atomic_path(path) as tmp:  # leading dot: invisible to data_files globs
        shard = _ShardFile(tmp, features)
        try:
            for k in range(0, len(rows), size):
                shard.add(encode_rows(list(rows[k:k + size]), features, embed=embed))
            shard.close()
        except BaseException:
            shard.abort()
            raise


def write_split(
    root: str | os.PathLike,
    config: str,
    split: str,
    rows: list[dict],
    features: Features,
    max_rows_per_shard: int = 50_000,
    resume: bool = False,
) -> list[Path]:
    """Write a list of ``rows`` as ``<root>/<config>/<split>-{i:05d}-of-{n:05d}.parquet`` (docs/publishing.md).

    A thin wrapper over ``write_split_stream`` for rows already in memory: ``n = max(1, ceil(len(rows) /
    max_rows_per_shard))`` and shard ``i`` holds ``rows[i*max_rows_per_shard:(i+1)*max_rows_per_shard]`` (no byte
    limit), so identical input gives byte-identical files. An empty ``rows`` gives one valid, empty shard, but
    ``datasets`` cannot load an empty split, so ``gate`` rejects it: leave such a split out. With ``resume=True`` a
    shard whose final file exists is skipped and only the missing ones are written. Shards of the same split with a
    different ``n`` (a stale earlier layout) are removed. Returns the shard paths in order.
    """
    if not resume:
        return write_split_stream(root, config, split, rows, features, max_rows_per_shard, max_bytes_per_shard=None)
    if max_rows_per_shard < 1:
        raise ValueError(f"max_rows_per_shard must be >= 1, got {max_rows_per_shard}")
    _check_names(config, split)
    check_batch(rows, set(features), 0)
    folder = Path(root) / config
    folder.mkdir(parents=True, exist_ok=True)
    size = max_rows_per_shard
    n = max(1, math.ceil(len(rows) / size))
    for other_n, shards in split_shards(folder, split).items():
        if other_n != n:
            for _, p in shards:
                p.unlink()
    _remove_parts(folder, split)
    paths: list[Path] = []
    for i in range(n):
        final = folder / shard_name(split, i, n)
        paths.append(final)
        if not final.exists():
            _write_one_shard(final, rows[i * size:(i + 1) * size], features)
    return paths
