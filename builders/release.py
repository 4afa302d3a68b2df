"""Write a release folder: Parquet shards per config and split, the README with ``configs:`` and
``dataset_info:``, and the release gate that loads it back offline (docs/publishing.md, "The release folder").

Layout (docs/publishing.md)::

    <root>/README.md
    <root>/<config>/<split>-00000-of-00002.parquet
    <root>/<config>/<split>-00001-of-00002.parquet

Shards are streamed: ``write_split_stream`` takes an iterator of rows (a generator over the final work shards) and
holds one batch and one row group in memory, never a split. A build writes its release into its own staging folder
beside ``<root>`` and swaps it into place under an exclusive lock (``release_lock``, ``publish``); a swap killed
half-way is undone or finished by ``recover_swap``. ``up_to_date_release`` tells, from ``manifest.json`` and the
Parquet footers alone, that a release in place is the one a build would write.

Publishing to the Hub is not done here.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import string
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features, SplitDict, SplitInfo
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.table import embed_table_storage
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from .core.atomic import atomic_path, atomic_write_bytes, atomic_write_json

__all__ = [
    "FINGERPRINT_FIELD",
    "FINGERPRINT_TEXT",
    "ReleaseGateError",
    "ReleaseLocked",
    "clean_stale_stages",
    "config_fingerprint",
    "encode_rows",
    "gate",
    "publish",
    "recover_swap",
    "release_lock",
    "render_card",
    "shard_name",
    "size_category",
    "split_info",
    "stage_release",
    "up_to_date_release",
    "write_drops",
    "write_json_atomic",
    "write_readme",
    "write_split",
    "write_split_stream",
    "write_split_tables",
]

_SHARD_RE = re.compile(r"^(?P<split>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.parquet\Z")


class ReleaseGateError(RuntimeError):
    """A release folder is incomplete or does not load as declared (docs/publishing.md)."""


def shard_name(split: str, i: int, n: int) -> str:
    """Deterministic shard file name ``<split>-{i:05d}-of-{n:05d}.parquet`` (docs/publishing.md)."""
    return f"{split}-{i:05d}-of-{n:05d}.parquet"


def _split_shards(folder: Path, split: str) -> dict[int, list[tuple[int, Path]]]:
    """Shard files of ``split`` in ``folder``, grouped by their total ``n``: ``{n: [(i, path), ...]}``."""
    found: dict[int, list[tuple[int, Path]]] = {}
    if not folder.is_dir():
        return found
    for p in folder.iterdir():
        m = _SHARD_RE.match(p.name)
        if m and m["split"] == split and p.is_file():
            found.setdefault(int(m["n"]), []).append((int(m["i"]), p))
    for v in found.values():
        v.sort()
    return found


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence datasets' progress bars inside the block and restore the previous setting."""
    import datasets.utils as ds_utils

    was_disabled = ds_utils.are_progress_bars_disabled()
    ds_utils.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            ds_utils.enable_progress_bars()


#: rows encoded into one Arrow batch (datasets' ``DEFAULT_MAX_BATCH_SIZE``); configs with media use ``MEDIA_BATCH_ROWS``
ENCODE_BATCH_ROWS = 1000
MEDIA_BATCH_ROWS = 100
#: a row group closes at this many rows or this many Arrow bytes, whichever comes first
ROW_GROUP_ROWS = 100_000
ROW_GROUP_BYTES = 64 << 20
#: a shard closes at ``max_rows_per_shard`` rows or at this many (uncompressed Arrow) bytes (docs/publishing.md: ~500 MB)
MAX_SHARD_BYTES = 500 << 20

RowSource = Iterable[Mapping[str, Any]] | Callable[[], Iterable[Mapping[str, Any]]]
"""Rows of one split: an iterable, or a zero-argument callable returning an iterator (called exactly once)."""

_PART_RE = re.compile(r"^\.(?P<split>.+)-(?P<i>\d{5})\.parquet\.part\Z")


def _check_batch(rows: list[Mapping[str, Any]], want: set[str], offset: int) -> None:
    """Every row must have exactly the declared top-level fields (docs/architecture.md, "The release step": rows match the Features)."""
    for idx, row in enumerate(rows, offset):
        keys = set(row)
        if keys != want:
            raise ValueError(
                f"row {idx} does not match the features: missing {sorted(want - keys)}, unexpected {sorted(keys - want)}"
            )


def _has_media(features: Features) -> bool:
    from datasets.features.features import require_storage_embed

    return any(require_storage_embed(f) for f in features.values())


def encode_rows(rows: list[Mapping[str, Any]], features: Features, *, embed: bool | None = None) -> pa.Table:
    """A batch of rows as an Arrow table of ``features.arrow_schema``, columns in the declared order.

    The same encoding as ``Dataset.from_list(rows, features=features)`` (``Features.encode_column`` and
    ``OptimizedTypedSequence``), then ``embed_table_storage`` when a feature holds media (an ``Image`` given by path
    gets its bytes, docs/publishing.md).
    """
    from datasets.arrow_writer import OptimizedTypedSequence

    schema = features.arrow_schema
    arrays = [pa.array(OptimizedTypedSequence(features.encode_column([r[k] for r in rows], k), type=features[k], col=k))
              for k in features]
    table = pa.Table.from_arrays(arrays, schema=schema)
    if _has_media(features) if embed is None else embed:
        table = embed_table_storage(table)
    return table


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
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
        from datasets import config as ds_config
        from datasets.arrow_writer import get_parquet_column_options

        self.path = path
        self.schema = features.arrow_schema
        self._cdc = ds_config.DEFAULT_CDC_OPTIONS
        self._writer = pq.ParquetWriter(str(path), schema=self.schema, use_content_defined_chunking=self._cdc,
                                        write_page_index=True, **get_parquet_column_options(features, self.schema))
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
        with _native_stderr_silenced(), contextlib.suppress(Exception):
            self._writer.close()  # after a failed write (a full disk) pyarrow's C++ writer may print "Check failed"
            del self._writer
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _check_names(config: str, split: str) -> None:
    if "/" in split or "/" in config or not split or not config or split.startswith("."):
        raise ValueError(f"bad config/split name {config!r}/{split!r}")


def _remove_parts(folder: Path, split: str) -> None:
    """Temp files of ``split`` left by an interrupted write (this writer's ``.part`` files, older ``.tmp`` files)."""
    for p in folder.iterdir():
        m = _PART_RE.match(p.name)
        if m and m["split"] == split:
            p.unlink()
        elif p.name.startswith(".") and p.name.endswith(".parquet.tmp"):
            m = _SHARD_RE.match(p.name[1:-4])
            if m and m["split"] == split:
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
    if max_rows_per_shard < 1:
        raise ValueError(f"max_rows_per_shard must be >= 1, got {max_rows_per_shard}")
    _check_names(config, split)
    folder = Path(root) / config
    folder.mkdir(parents=True, exist_ok=True)
    _remove_parts(folder, split)
    embed = _has_media(features)
    size = batch_rows or (MEDIA_BATCH_ROWS if embed else ENCODE_BATCH_ROWS)
    want = set(features)
    source = iter(rows() if callable(rows) else rows)
    seq = _ShardSequence(folder, split, features, max_rows_per_shard, max_bytes_per_shard)
    seen = 0
    try:
        while batch := list(itertools.islice(source, min(size, seq.room()))):
            _check_batch(batch, want, seen)
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
    for shards in _split_shards(folder, split).values():
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
    if max_rows_per_shard < 1:
        raise ValueError(f"max_rows_per_shard must be >= 1, got {max_rows_per_shard}")
    _check_names(config, split)
    folder = Path(root) / config
    folder.mkdir(parents=True, exist_ok=True)
    _remove_parts(folder, split)
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
    """``rows`` as the single Parquet file ``path`` (hidden temp name, then renamed)."""
    embed = _has_media(features)
    size = MEDIA_BATCH_ROWS if embed else ENCODE_BATCH_ROWS
    tmp = path.with_name(f".{path.name}.tmp")  # leading dot: invisible to data_files globs
    shard = _ShardFile(tmp, features)
    try:
        for k in range(0, len(rows), size):
            shard.add(encode_rows(list(rows[k:k + size]), features, embed=embed))
        shard.close()
    except BaseException:
        shard.abort()
        raise
    os.replace(tmp, path)


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
    _check_batch(rows, set(features), 0)
    folder = Path(root) / config
    folder.mkdir(parents=True, exist_ok=True)
    size = max_rows_per_shard
    n = max(1, math.ceil(len(rows) / size))
    for other_n, shards in _split_shards(folder, split).items():
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


def split_info(root: str | os.PathLike, config: str, split: str) -> SplitInfo:
    """``SplitInfo`` computed from the shard files on disk (docs/publishing.md).

    Raises ``ReleaseGateError`` when the split has no shards, shards with different totals, or a missing index.
    """
    shards = _split_shards(Path(root) / config, split)
    where = f"{config}/{split}"
    if not shards:
        raise ReleaseGateError(f"no shard files for {where} under {root}")
    if len(shards) != 1:
        raise ReleaseGateError(f"incomplete shard set {where}: several totals {sorted(shards)}")
    n, items = next(iter(shards.items()))
    indices = [i for i, _ in items]
    if indices != list(range(n)):
        missing = sorted(set(range(n)) - set(indices))
        raise ReleaseGateError(f"incomplete shard set {where}: n={n}, missing {missing}, found {indices}")
    mds = []
    for _, p in items:
        try:
            mds.append(pq.ParquetFile(p).metadata)
        except Exception as e:  # noqa: BLE001 - a shard whose footer does not read fails the gate, naming it
            raise ReleaseGateError(f"{config}/{p.name}: not a readable Parquet file: {type(e).__name__}: {e}") from e
    return SplitInfo(
        name=split,
        num_examples=sum(m.num_rows for m in mds),
        num_bytes=sum(m.row_group(j).total_byte_size for m in mds for j in range(m.num_row_groups)),
    )


_SIZE_CATEGORIES = [
    (10**3, "n<1K"),
    (10**4, "1K<n<10K"),
    (10**5, "10K<n<100K"),
    (10**6, "100K<n<1M"),
    (10**7, "1M<n<10M"),
    (10**8, "10M<n<100M"),
    (10**9, "100M<n<1B"),
    (10**10, "1B<n<10B"),
    (10**11, "10B<n<100B"),
    (10**12, "100B<n<1T"),
]


def size_category(num_rows: int) -> str:
    """The Hub's ``size_categories`` value for a total row count (docs/publishing.md)."""
    for bound, name in _SIZE_CATEGORIES:
        if num_rows < bound:
            return name
    return "n>1T"


def _check_layout(
    features_by_config: Mapping[str, Features], splits_by_config: Mapping[str, list[str]], default_config: str
) -> None:
    if set(features_by_config) != set(splits_by_config):
        raise ValueError(
            f"features and splits name different configs: {sorted(features_by_config)} vs {sorted(splits_by_config)}"
        )
    if default_config not in features_by_config:
        raise ValueError(f"default config {default_config!r} is not among {sorted(features_by_config)}")
    if "data" in features_by_config:
        raise ValueError("config name 'data' is reserved by push_to_hub (docs/publishing.md)")
    for cfg, splits in splits_by_config.items():
        if not splits or len(set(splits)) != len(splits):
            raise ValueError(f"config {cfg!r} needs distinct, non-empty splits, got {splits}")


FINGERPRINT_FIELD = "description"
"""The key of each ``configs:`` entry that carries the config's content fingerprint (see ``write_readme``)."""

_FINGERPRINT_PREFIX = "sha256:"
#: the words before the fingerprint in the card's ``description``: the Hub shows it, so it says what the hash is
FINGERPRINT_TEXT = "Content fingerprint of this config's Parquet shards (a new value means new rows):"


def config_fingerprint(root: str | os.PathLike, config: str, splits: list[str]) -> str:
    """``sha256:<hex>`` over the shard files of ``config`` as they are on disk, read back from the files.

    For each split in the given order and each of its shards in index order, the hash takes the shard's path
    relative to ``root`` (``<config>/<split>-{i:05d}-of-{n:05d}.parquet``), its size and its bytes, so a changed
    value, a renamed split or a different shard layout all give another fingerprint, and identical files the same one.
    The shard set must be complete (``split_info`` checks it).
    """
    root = Path(root)
    h = hashlib.sha256()
    for split in splits:
        split_info(root, config, split)  # raises ReleaseGateError on an incomplete shard set
        ((_, shards),) = _split_shards(root / config, split).items()
        for _, p in shards:
            h.update(f"{config}/{p.name}\0{p.stat().st_size}\0".encode())
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    return _FINGERPRINT_PREFIX + h.hexdigest()


def write_readme(
    root: str | os.PathLike,
    *,
    features_by_config: Mapping[str, Features],
    splits_by_config: Mapping[str, list[str]],
    default_config: str,
    card: Mapping[str, Any],
    title: str,
    body: str,
) -> Path:
    """Write ``<root>/README.md``: YAML header (card fields, ``configs:``, ``dataset_info:``) + title + body.

    Built with datasets' own helpers exactly as docs/publishing.md: ``MetadataConfigs`` (one config per folder, data_files
    ``<config>/<split>-*``, ``default: true`` on ``default_config``), ``DatasetInfosDict`` (features and split sizes
    from the files on disk, §5) and ``DatasetCardData``; ``size_categories`` from the total row count.
    The shards must be written first. Returns the README path.

    **Content fingerprint.** Each ``configs:`` entry gets ``description: "<FINGERPRINT_TEXT> sha256:<hex>"``, with the
    ``config_fingerprint`` of that config's shard files, read from disk. Why: ``datasets`` caches a local folder
    under ``<cache>/<folder name>/<config_id>/<version>/<hash>``, and for a folder whose README has ``configs:`` none
    of these depends on the files' contents. ``<hash>`` is ``Hasher.hash({"dataset_infos": ..., "builder_configs":
    ...})`` in ``LocalDatasetModuleFactory.get_module`` (``datasets/load.py``). The ``builder_configs`` there
    come from ``create_builder_configs_from_metadata_configs`` (same file) and hold the README's glob patterns
    (``DataFilesPatternsDict``), not the resolved files or their mtimes. ``dataset_infos`` is the README's
    ``dataset_info`` (features, split names, ``num_examples``, ``num_bytes``). ``<config_id>`` is
    ``BuilderConfig.create_config_id`` (``datasets/builder.py``), which is just the config name when no config kwargs
    are passed. So a rebuild with new values but the same schema and row counts gets the same cache path, and a warm
    cache returns the old rows. ``create_builder_configs_from_metadata_configs`` passes every ``configs:`` key that is
    an attribute of the builder's config class into that class. ``description`` is a field of
    ``datasets.BuilderConfig``, so it becomes ``ParquetConfig.description`` and goes into ``builder_configs``, and so
    into ``<hash>``. New contents therefore give a new cache folder, and identical files give the same README bytes, so
    the cache is reused. The key is stored as a ``configs:`` item, which ``DatasetCardData`` keeps (extra card keys are
    kept as attributes). Extra builder parameters in ``configs:`` entries (e.g. ``sep`` for CSV) are allowed by the
    Hub's card metadata, and ``description`` is a valid parameter of every builder config.
    ``dataset_info`` is not used for this, because ``DatasetInfo._to_yaml_dict`` writes only
    ``config_name``, sizes, ``features`` and ``splits``.
    """
    _check_layout(features_by_config, splits_by_config, default_config)
    root = Path(root)
    configs: dict[str, dict[str, Any]] = {}
    infos: dict[str, DatasetInfo] = {}
    total = 0
    for cfg, splits in splits_by_config.items():
        entry: dict[str, Any] = {"data_files": [{"split": s, "path": f"{cfg}/{s}-*"} for s in splits]}
        if cfg == default_config:
            entry["default"] = True
        sis = {s: split_info(root, cfg, s) for s in splits}
        entry[FINGERPRINT_FIELD] = f"{FINGERPRINT_TEXT} {config_fingerprint(root, cfg, splits)}"
        configs[cfg] = entry
        total += sum(si.num_examples for si in sis.values())
        infos[cfg] = DatasetInfo(features=features_by_config[cfg], splits=SplitDict(sis))
    card_fields = dict(card)
    card_fields["size_categories"] = [size_category(total)]
    cd = DatasetCardData(**card_fields)
    MetadataConfigs(configs).to_dataset_card_data(cd)
    DatasetInfosDict(infos).to_dataset_card_data(cd)
    content = DatasetCard(f"---\n{cd.to_yaml()}\n---\n\n# {title}\n\n{body.strip()}\n").content
    path = root / "README.md"
    atomic_write_bytes(path, content.encode("utf-8"))
    return path


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` for the duration of the block, then restored (docs/publishing.md).

    The variable is read at import time, so the already-imported constants are switched as well.
    """
    import datasets.config as ds_config
    from huggingface_hub import constants as hub_constants

    old_env = os.environ.get("HF_HUB_OFFLINE")
    old_ds, old_hub = ds_config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"] = "1"
    ds_config.HF_HUB_OFFLINE = True
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env
        ds_config.HF_HUB_OFFLINE = old_ds
        hub_constants.HF_HUB_OFFLINE = old_hub


@contextlib.contextmanager
def _resolve_once() -> Iterator[None]:
    """The gate resolves one local folder seven times (its config names, its default, each config's builder), and
    ``datasets`` re-reads and re-resolves the folder (README YAML, data-file patterns) on every call: 0.1 s each.
    For the duration of the block the folder's ``DatasetModule`` is resolved once per set of arguments and each
    caller gets a deep copy (``load_dataset_builder`` pops keys from the module's ``builder_kwargs``), so each
    caller still sees exactly what its own resolution would return. Where ``datasets`` has moved the function, the
    block does nothing (every call resolves)."""
    import copy

    import datasets.inspect as ds_inspect
    import datasets.load as ds_load

    original = getattr(ds_load, "dataset_module_factory", None)
    if original is None or getattr(ds_inspect, "dataset_module_factory", None) is not original:
        yield
        return
    resolved: dict[str, Any] = {}

    def once(path: str, **kwargs: Any) -> Any:
        key = repr((path, sorted(kwargs.items(), key=lambda kv: kv[0])))
        if key not in resolved:
            resolved[key] = original(path, **kwargs)
        return copy.deepcopy(resolved[key])

    ds_load.dataset_module_factory = ds_inspect.dataset_module_factory = once
    try:
        yield
    finally:
        ds_load.dataset_module_factory = ds_inspect.dataset_module_factory = original


def gate(
    root: str | os.PathLike,
    *,
    features_by_config: Mapping[str, Features],
    splits_by_config: Mapping[str, list[str]],
    default_config: str,
    cache_dir: str | os.PathLike | None = None,
) -> dict[str, dict[str, int]]:
    """The release gate of docs/publishing.md. Returns ``{config: {split: num_rows}}``.

    1. every ``<split>-{i:05d}-of-{n:05d}.parquet`` exists for ``i`` in ``0..n-1``, one ``n`` per split, and no split
       is empty;
    2. nothing else non-hidden sits in a config folder (a leftover ``*.parquet.tmp`` would be read as data);
    3. every shard's Arrow schema, read from its Parquet footer, is the declared features' schema (the types
       ``datasets``' Parquet builder casts to: a shard that would not load fails here);
    4. under ``HF_HUB_OFFLINE=1``, ``datasets`` resolves the folder as a user's ``load_dataset(<root>, cfg)`` would:
       the config names are exactly the expected ones, the default config is ``default_config``, and for every config
       the builder's features are the declared ones and its data files are exactly the shards of each split;
    5. the first row of every split decodes with the loaded features (``Features.decode_example``).
    Raises ``ReleaseGateError`` naming the first failure.

    Row counts come from the Parquet footers. Nothing is converted to Arrow files and no split is read in full, so the
    gate costs seconds and a few MB at any release size (the conversion ``load_dataset`` does on first use grew the
    build's memory and time with the corpus). ``cache_dir`` holds ``datasets``' small module cache (a fresh temp
    folder inside it, removed afterwards; the system temp folder by default).
    """
    from datasets import get_dataset_config_names, load_dataset_builder
    from datasets.inspect import get_dataset_default_config_name

    _check_layout(features_by_config, splits_by_config, default_config)
    root = Path(root).resolve()  # an absolute path forces a local load (docs/publishing.md)
    if not (root / "README.md").is_file():
        raise ReleaseGateError(f"{root} has no README.md")

    expected: dict[str, dict[str, int]] = {}
    shard_files: dict[str, dict[str, set[str]]] = {}
    for cfg, splits in splits_by_config.items():
        folder = root / cfg
        if not folder.is_dir():
            raise ReleaseGateError(f"config folder {folder} is missing")
        expected[cfg] = {s: split_info(root, cfg, s).num_examples for s in splits}
        empty = [s for s, k in expected[cfg].items() if k == 0]
        if empty:
            raise ReleaseGateError(
                f"{cfg}: split(s) {empty} have 0 rows; load_dataset cannot load an empty split "
                "('Instruction ... corresponds to no data'): leave them out of splits_by_config and delete their shards"
            )
        shard_files[cfg] = {s: {p.name for ps in _split_shards(folder, s).values() for _, p in ps} for s in splits}
        allowed = set().union(*shard_files[cfg].values())
        strays = sorted(p.name for p in folder.iterdir() if not p.name.startswith(".") and p.name not in allowed)
        if strays:
            raise ReleaseGateError(f"unexpected non-hidden entries in {cfg}/: {strays}")
        want = features_by_config[cfg].arrow_schema
        for name in sorted(allowed):
            try:
                got_schema = pq.read_schema(folder / name)
            except Exception as e:  # noqa: BLE001 - an unreadable footer fails the gate
                raise ReleaseGateError(f"{cfg}/{name}: not a readable Parquet file: {type(e).__name__}: {e}") from e
            if not got_schema.remove_metadata().equals(want.remove_metadata()):
                raise ReleaseGateError(f"{cfg}/{name}: its schema differs from the features:\n"
                                       f"  file:     {got_schema.remove_metadata()}\n  expected: {want.remove_metadata()}")

    with _quiet(), _hub_offline(), _resolve_once(), tempfile.TemporaryDirectory(
            prefix="release-gate-", dir=None if cache_dir is None else str(cache_dir)) as gate_cache:
        try:
            names = sorted(get_dataset_config_names(str(root)))
            default = get_dataset_default_config_name(str(root))
        except Exception as e:  # noqa: BLE001 - any failure to resolve the folder fails the gate
            raise ReleaseGateError(f"cannot resolve configs of {root}: {type(e).__name__}: {e}") from e
        if names != sorted(splits_by_config):
            raise ReleaseGateError(f"README configs {names} != expected {sorted(splits_by_config)}")
        if default != default_config:
            raise ReleaseGateError(f"default config is {default!r}, expected {default_config!r}")
        for cfg, splits in splits_by_config.items():
            try:
                builder = load_dataset_builder(str(root), cfg, cache_dir=gate_cache)
            except Exception as e:  # noqa: BLE001
                raise ReleaseGateError(f"load_dataset({str(root)!r}, {cfg!r}) failed: {type(e).__name__}: {e}") from e
            if builder.info.features != features_by_config[cfg]:
                raise ReleaseGateError(f"{cfg}: loaded features differ from the schema:\n"
                                       f"  loaded:   {builder.info.features}\n  expected: {features_by_config[cfg]}")
            data_files = builder.config.data_files or {}
            if sorted(data_files) != sorted(splits):
                raise ReleaseGateError(f"{cfg}: loaded splits {sorted(data_files)} != expected {sorted(splits)}")
            for s in splits:
                resolved = {Path(str(f)).name for f in data_files[s]}
                if resolved != shard_files[cfg][s]:
                    raise ReleaseGateError(f"{cfg}/{s}: the loader resolves {sorted(resolved)}, "
                                           f"the release holds {sorted(shard_files[cfg][s])}")
                first_shard = root / cfg / shard_name(s, 0, len(shard_files[cfg][s]))
                try:
                    batch = next(pq.ParquetFile(first_shard).iter_batches(batch_size=1))
                    first = builder.info.features.decode_example(batch.to_pylist()[0])
                except Exception as e:  # noqa: BLE001
                    raise ReleaseGateError(f"{cfg}/{s}: the first row does not decode: {type(e).__name__}: {e}") from e
                if list(first) != list(features_by_config[cfg]):
                    raise ReleaseGateError(f"{cfg}/{s}: the first row has fields {list(first)}")
            del builder
    return {c: dict(sp) for c, sp in expected.items()}


def render_card(template_path: str | os.PathLike, context: Mapping[str, Any]) -> str:
    """Fill a card template's ``$placeholders`` with ``string.Template.safe_substitute`` (no Jinja, docs/publishing.md).

    Unknown placeholders are left as they are; ``$$`` is a literal dollar sign.
    """
    template = string.Template(Path(template_path).read_text(encoding="utf-8"))
    return template.safe_substitute({k: str(v) for k, v in context.items()})


def compare_with_paper(values: Mapping[str, Any], paper: Mapping[str, float | None], cause: str,
                       notes: Mapping[str, str] | None = None, tolerance: float = 0.2) -> dict[str, dict[str, Any]]:
    """Each quantity of a build next to the paper's: ``{name: {"value", "paper", "flag"}}``, flagged when it deviates
    by more than ``tolerance`` (relative) with the likely ``cause``; ``notes`` give fixed flags to named quantities."""
    out = {}
    for k, v in values.items():
        ref = paper[k]
        flag = (notes or {}).get(k, "")
        if not flag and v is not None and ref:
            dev = (v - ref) / ref
            if abs(dev) > tolerance:
                flag = f"{dev:+.0%} vs paper ({cause})"
        out[k] = {"value": v, "paper": ref, "flag": flag}
    return out


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON (sorted keys, indent 2) via a hidden temp file and ``os.replace`` (docs/publishing.md).

    Used for ``stats.json`` and ``manifest.json``. Numpy scalars/arrays, sets and paths are converted.
    """
    return atomic_write_json(path, obj, sort_keys=True, indent=2, ensure_ascii=False, default=_json_default)


# ------------------------------------------------------------------------------- shared by the corpus releases


def git_commit() -> str | None:
    """The toolkit's git commit (``None`` outside a checkout), recorded in manifests and cards."""
    import subprocess

    try:
        root = Path(__file__).resolve().parents[1]
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (``|`` escaped, newlines flattened) for dataset cards."""

    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt_value(x: Any) -> str:
    """A card cell: thousands separators, two decimals for floats, an en dash for a missing value."""
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.2f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def stats_tables(stats: Mapping[str, Any]) -> dict[str, str]:
    """The card tables every corpus shows from ``stats.json``: paper quantities, drops, counters, release rows."""
    q = stats["quantities"]
    return {
        "stats_table": md_table(["quantity", "this build", "paper", "flag"],
                                [[k, fmt_value(v["value"]), fmt_value(v["paper"]), v["flag"] or ""]
                                 for k, v in q.items()]),
        "drops_table": md_table(["reason", "items"], [[k, v] for k, v in sorted(stats["drops"].items())])
        if stats["drops"] else "No item was dropped.",
        "counters_table": md_table(["counter", "count"], [[k, v] for k, v in sorted(stats["counters"].items())])
        if stats["counters"] else "No counter fired.",
        "release_table": md_table(["config", "split", "rows"],
                                  [[c, s, n] for c, sp in stats.get("release", {}).items() for s, n in sp.items()]),
    }


#: drops per Parquet batch of ``write_drops``
DROPS_BATCH_ROWS = 50_000


def write_drops(path: str | os.PathLike, result: Any) -> int:
    """``drops.parquet`` (``item_id, stage, reason, detail``) of a build result, streamed from ``result.drops()`` in
    batches of ``DROPS_BATCH_ROWS`` and written atomically; returns the number of rows."""
    from .core.shards import DROP_SCHEMA

    path = Path(path)
    n = 0
    with atomic_path(path) as tmp:
        writer = pq.ParquetWriter(str(tmp), schema=DROP_SCHEMA)
        try:
            it = iter(result.drops())
            while batch := list(itertools.islice(it, DROPS_BATCH_ROWS)):
                writer.write_table(pa.Table.from_pylist(batch, schema=DROP_SCHEMA))
                n += len(batch)
        except BaseException:
            with _native_stderr_silenced(), contextlib.suppress(Exception):
                writer.close()
            raise
        writer.close()
    return n


# ------------------------------------------------------------------------------- staging, lock, swap, recovery
#
#   <out>/<corpus>/                              the release in place
#   <out>/.<corpus>.lock                         flock'ed by the build that writes or swaps the release
#   <out>/.<corpus>.incomplete/<owner>/          a build's staging folder, <owner> = <host>-<pid>-<random>
#   <out>/.<corpus>.incomplete/<owner>.scratch/  its scratch space (external sorts, the gate's datasets cache)
#   <out>/.<corpus>.old/                         the previous release, only during (or after a kill in) a swap


class ReleaseLocked(RuntimeError):
    """Another build holds the release lock and the caller asked not to wait."""


def _host() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"


def staging_root(out_dir: str | os.PathLike) -> Path:
    """The hidden folder beside ``out_dir`` that holds the staging folders of builds: ``.<name>.incomplete``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f".{out_dir.name}.incomplete")


def lock_path(out_dir: str | os.PathLike) -> Path:
    """The lock file beside ``out_dir``: ``.<name>.lock`` (hidden, never uploaded)."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f".{out_dir.name}.lock")


def old_path(out_dir: str | os.PathLike) -> Path:
    """Where ``publish`` keeps the previous release during a swap: ``.<name>.old``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f".{out_dir.name}.old")


def stage_release(out_dir: str | os.PathLike) -> Path:
    """A new, empty staging folder owned by this build: ``.<name>.incomplete/<host>-<pid>-<random>`` (see ``publish``).

    Unique per build, so two builds into the same ``--out`` never write into (or delete) each other's files.
    """
    import secrets

    stage = staging_root(out_dir) / f"{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir(parents=True)
    return stage


def scratch_dir(stage: str | os.PathLike) -> Path:
    """The scratch folder of a staging folder (``<owner>.scratch``), created on first use."""
    stage = Path(stage)
    path = stage.with_name(f"{stage.name}.scratch")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def clean_stale_stages(out_dir: str | os.PathLike) -> list[Path]:
    """Remove staging folders whose owner is gone; returns what was removed. Call it holding ``release_lock``.

    An entry of ``.<name>.incomplete`` named ``<host>-<pid>-<random>`` (or ``...scratch``) is stale when ``<host>`` is
    this machine and process ``<pid>`` is this one (an earlier, failed release of the same process) or no longer runs.
    Entries of other machines are left alone. Anything else in there is a leftover of the single staging folder of
    earlier toolkit versions and is removed. The folder itself goes when it is empty.
    """
    import shutil

    root = staging_root(out_dir)
    if not root.is_dir():
        return []
    removed = []
    host = _host()
    for p in sorted(root.iterdir()):
        base = p.name.split(".", 1)[0]
        parts = base.rsplit("-", 2)
        if len(parts) == 3 and parts[1].isdigit():
            owner_host, pid = parts[0], int(parts[1])
            if owner_host != host or (pid != os.getpid() and _pid_alive(pid)):
                continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        removed.append(p)
    with contextlib.suppress(OSError):
        root.rmdir()
    return removed


def discard_stage(stage: str | os.PathLike) -> None:
    """Remove a staging folder and its scratch folder, and the staging root when nothing else is in it."""
    import shutil

    stage = Path(stage)
    for p in (stage, stage.with_name(f"{stage.name}.scratch")):
        shutil.rmtree(p, ignore_errors=True)
    with contextlib.suppress(OSError):
        stage.parent.rmdir()


@contextlib.contextmanager
def release_lock(out_dir: str | os.PathLike, *, wait: bool = True) -> Iterator[Path]:
    """Hold the exclusive lock of the release at ``out_dir`` (``fcntl.flock`` on ``.<name>.lock``) in the block.

    A second build into the same ``--out`` waits for the first one to release it (and says so on stderr), or, with
    ``wait=False``, raises ``ReleaseLocked``. The lock goes with the process: a killed build never leaves it held.
    The lock file holds the owner's ``<host> <pid>`` for that message and is never deleted (deleting a lock file
    races with a process that has just opened it). Without ``fcntl`` (Windows) the block runs unlocked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield lock_path(out_dir)
        return
    path = lock_path(out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown process"
            if not wait:
                raise ReleaseLocked(f"another build ({holder}) is writing the release {out_dir}") from None
            print(f"another build ({holder}) is writing the release {out_dir}: waiting for it to finish",
                  file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{_host()} pid {os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def recover_swap(out_dir: str | os.PathLike) -> str | None:
    """Finish or undo a swap that a killed ``publish`` left half done; returns what it did, or ``None``.

    ``.<name>.old`` without ``<name>``: the build was killed between the two renames, so the previous release is
    renamed back (``"restored"``). Both present: the new release was already in place and only the removal of the
    old one was cut short (``"removed"``). Call it holding ``release_lock``.
    """
    out_dir = Path(out_dir)
    old = old_path(out_dir)
    if not (old.exists() or old.is_symlink()):
        return None
    if out_dir.exists() or out_dir.is_symlink():
        _remove(old)
        return "removed"
    os.replace(old, out_dir)
    return "restored"


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def publish(stage: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Move a finished staged release into place, replacing an older release of the same name.

    The old release is kept until the new one is in place: ``out_dir`` is renamed to the hidden sibling
    ``.<name>.old``, ``stage`` is renamed to ``out_dir``, and only then the old release is deleted. If the second
    rename fails, the old release is renamed back to ``out_dir`` and the error is raised. A process killed between the
    two renames leaves ``.<name>.old`` and no ``out_dir``: ``recover_swap`` (run first here, and by every build and the
    ``loading_scripts`` loaders) renames it back, so ``out_dir`` always ends up holding a complete release. A failure
    to delete the old copy at the end only warns, because the new release is already in place; the next build
    removes what is left. Run it holding ``release_lock``.
    """
    import warnings

    stage, out_dir = Path(stage), Path(out_dir)
    old = old_path(out_dir)
    recover_swap(out_dir)
    had_old = out_dir.exists() or out_dir.is_symlink()
    if had_old:
        os.replace(out_dir, old)
    try:
        os.replace(stage, out_dir)
    except BaseException:
        if had_old:
            os.replace(old, out_dir)
        raise
    if had_old:
        try:
            _remove(old)
        except OSError as e:
            warnings.warn(f"published {out_dir}, but could not delete the previous release at {old}: {e}",
                          RuntimeWarning, stacklevel=2)
    if stage.parent == staging_root(out_dir):
        with contextlib.suppress(OSError):  # the staging root goes once no other build stages there
            stage.parent.rmdir()
    return out_dir


# ------------------------------------------------------------------------------------- an up-to-date release

RELEASE_KEY_FIELD = "release_key"
RELEASE_FILES_FIELD = "release_files"
RELEASE_ROWS_FIELD = "release_rows"


def release_listing(root: str | os.PathLike) -> dict[str, int | None]:
    """What ``up_to_date_release`` checks later: ``README.md`` and every Parquet shard of a config folder with their
    sizes in bytes, plus every other top-level entry by name (size ``None``; ``manifest.json`` left out)."""
    root = Path(root)
    out: dict[str, int | None] = {}
    for p in sorted(root.iterdir()):
        if p.name.startswith(".") or p.name == "manifest.json":
            continue
        if p.name == "README.md":
            out[p.name] = p.stat().st_size
        elif p.is_dir() and any(_SHARD_RE.match(q.name) for q in p.iterdir()):
            for q in sorted(p.iterdir()):
                if _SHARD_RE.match(q.name):
                    out[f"{p.name}/{q.name}"] = q.stat().st_size
        else:
            out[p.name] = None
    return out


def up_to_date_release(out_dir: str | os.PathLike, key: str) -> dict[str, dict[str, int]] | None:
    """``{config: {split: rows}}`` of the release at ``out_dir`` when its ``manifest.json`` carries ``release_key ==
    key`` and every file it lists is present (shards and ``README.md`` with their recorded sizes); else ``None``.

    Reads the manifest and the Parquet footers only: seconds at any size.
    """
    out_dir = Path(out_dir)
    try:
        man = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    listing = man.get(RELEASE_FILES_FIELD) if isinstance(man, dict) else None
    if man.get(RELEASE_KEY_FIELD) != key or not isinstance(listing, dict) or "README.md" not in listing:
        return None
    counts: dict[str, dict[str, int]] = {}
    for rel, size in listing.items():
        p = out_dir / rel
        if not p.exists() or (size is not None and (not p.is_file() or p.stat().st_size != size)):
            return None
        cfg, _, name = rel.partition("/")
        m = _SHARD_RE.match(name) if name else None
        if m:
            try:
                rows = pq.ParquetFile(p).metadata.num_rows
            except Exception:  # noqa: BLE001 - an unreadable shard means the release must be rewritten
                return None
            counts.setdefault(cfg, {})
            counts[cfg][m["split"]] = counts[cfg].get(m["split"], 0) + rows
    recorded = man.get(RELEASE_ROWS_FIELD)
    if recorded != counts:  # dict equality: the same configs, splits and row counts (the order is the manifest's)
        return None
    return {c: dict(sp) for c, sp in recorded.items()}
