"""Work-directory shards: rows, drops and per-shard statistics written atomically, read back lazily.

A finished shard ``part-00003`` of a stage is ``part-00003.parquet`` (kept rows), ``part-00003.drops.parquet`` (only
when the shard dropped something) and ``part-00003.stats.json``, the last written last, so its presence marks the
shard complete (a killed build leaves no half shard behind: files are written to hidden temp names, then renamed).

``stats.json`` records the shard's ``digest`` (sha256 of its rows file), ``drops_digest`` (of its drops file) and the
``input_digest`` of the shard it was computed from: a shard is done only while its input is the one it was computed
from, so redoing an upstream shard (``--retry-errors``, a transient failure) redoes exactly the downstream shards of
the same index.

Every read is checked (``builders.core.checked``): the bytes against the recorded digests, the Parquet pages against
their checksums. A shard whose files are not what was written raises :class:`~builders.core.errors.DamagedCache`
naming the file; the build then recomputes that shard (``builders.core.repair``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from .atomic import atomic_write_text
from .checked import read_parquet_checked, write_parquet_checked
from .errors import DamagedCache
from .records import DROP_FIELDS, Drop, Row

DROP_SCHEMA = pa.schema([(f, pa.string()) for f in DROP_FIELDS])


def write_json_file(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, sort_keys=True, indent=1, default=str))


def work_shard_name(i: int) -> str:
    """The base name ``part-{i:05d}`` of work shard ``i`` (a release shard is ``builders.release.writer.shard_name``)."""
    return f"part-{i:05d}"


def write_shard(stage_dir: Path, i: int, rows: list[Row], drops: list[Drop], stats: dict[str, Any],
                input_digest: str = "") -> dict[str, Any]:
    """Write shard ``i`` (rows, drops, then stats with ``digest`` and ``input_digest``); returns the stats."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    base = stage_dir / work_shard_name(i)
    digest = write_parquet_checked(pa.Table.from_pylist(rows) if rows else pa.table({}), base.with_suffix(".parquet"))
    drops_path = Path(f"{base}.drops.parquet")
    stats = {**stats, "digest": digest, "input_digest": input_digest}
    if drops:  # most shards drop nothing: no file then (fewer files in the work directory)
        stats["drops_digest"] = write_parquet_checked(
            pa.Table.from_pylist([d.as_dict() for d in drops], schema=DROP_SCHEMA), drops_path)
    else:
        drops_path.unlink(missing_ok=True)  # a redone shard that no longer drops anything
    write_json_file(Path(f"{base}.stats.json"), stats)
    return stats


def read_rows(stage_dir: Path, i: int, columns: list[str] | None = None) -> list[Row]:
    """The kept rows of finished shard ``i`` (only ``columns``, those the file has, when given), checked against the
    digest its ``stats.json`` records."""
    path = stage_dir / f"{work_shard_name(i)}.parquet"
    table = read_parquet_checked(path, read_stats(stage_dir, i).get("digest"), columns)
    if table.num_columns == 0:
        return []
    return table.to_pylist()


def read_drops(stage_dir: Path, i: int) -> list[dict[str, str]]:
    """The drops of a finished shard (none when it has no drops file), checked like its rows."""
    path = stage_dir / f"{work_shard_name(i)}.drops.parquet"
    expected = read_stats(stage_dir, i).get("drops_digest")
    if not path.exists():
        if expected:
            raise DamagedCache(path, "missing, although the shard recorded drops")
        return []
    return read_parquet_checked(path, expected).to_pylist()


def read_stats(stage_dir: Path, i: int) -> dict[str, Any]:
    """The ``stats.json`` of finished shard ``i``; :class:`DamagedCache` when it is there but not a JSON object."""
    path = stage_dir / f"{work_shard_name(i)}.stats.json"
    try:
        stats = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DamagedCache(path, f"not JSON ({err})") from err
    if not isinstance(stats, dict):
        raise DamagedCache(path, f"not a JSON object ({type(stats).__name__})")
    return stats


class StageData:
    """The complete output of one stage: ``n`` shards in ``stage_dir``. ``columns``: the only fields a reader may
    read (a pipeline's output as its release declared it, ``Corpus.RELEASE_READS``); None = all of them."""

    def __init__(self, stage_dir: Path, n: int, columns: list[str] | None = None):
        self.dir = Path(stage_dir)
        self.n = n
        self.columns = columns

    def _allowed(self, columns: list[str] | None) -> list[str] | None:
        if self.columns is None:
            return columns
        if columns is None:
            return list(self.columns)
        undeclared = [c for c in columns if c not in self.columns]
        if undeclared:
            raise KeyError(f"{undeclared} of {self.dir.parent.name}/{self.dir.name} are not among the fields its "
                           f"reader declared ({sorted(self.columns)})")
        return columns

    def shard_rows(self, i: int, columns: list[str] | None = None) -> list[Row]:
        """The rows of shard ``i`` (only ``columns``; the declared columns when None)."""
        return read_rows(self.dir, i, self._allowed(columns))

    def rows(self, columns: list[str] | None = None) -> Iterator[Row]:
        columns = self._allowed(columns)
        for i in range(self.n):
            yield from read_rows(self.dir, i, columns)

    def drops(self) -> Iterator[dict[str, str]]:
        for i in range(self.n):
            yield from read_drops(self.dir, i)

    def __repr__(self) -> str:
        return f"StageData({str(self.dir)!r}, n={self.n})"
