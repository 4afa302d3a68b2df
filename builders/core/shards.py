"""Work-directory shards: rows, drops and per-shard statistics written atomically, read back lazily.

A finished shard ``part-00003`` of a stage is ``part-00003.parquet`` (kept rows), ``part-00003.drops.parquet`` (only
when the shard dropped something) and ``part-00003.stats.json``, the last written last, so its presence marks the
shard complete (a killed build leaves no half shard behind: files are written to hidden temp names, then renamed).

``stats.json`` records the shard's ``digest`` (sha256 of its rows file) and the ``input_digest`` of the shard it was
computed from: a shard is done only while its input is the one it was computed from, so redoing an upstream shard
(``--retry-errors``, a transient failure) redoes exactly the downstream shards of the same index.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .atomic import atomic_path, atomic_write_text
from .records import DROP_FIELDS, Drop, Row

DROP_SCHEMA = pa.schema([(f, pa.string()) for f in DROP_FIELDS])


def _atomic_parquet(table: pa.Table, path: Path) -> str:
    """Write ``table`` under a hidden temp name, rename it into place; returns the sha256 of the file."""
    h = hashlib.sha256()
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


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
    digest = _atomic_parquet(pa.Table.from_pylist(rows) if rows else pa.table({}), base.with_suffix(".parquet"))
    drops_path = Path(f"{base}.drops.parquet")
    if drops:  # most shards drop nothing: no file then (fewer files in the work directory)
        _atomic_parquet(pa.Table.from_pylist([d.as_dict() for d in drops], schema=DROP_SCHEMA), drops_path)
    else:
        drops_path.unlink(missing_ok=True)  # a redone shard that no longer drops anything
    stats = {**stats, "digest": digest, "input_digest": input_digest}
    write_json_file(Path(f"{base}.stats.json"), stats)
    return stats


def _named(err: BaseException, path: Path) -> BaseException:
    """``err`` again, of its own type where possible, with a message that names the shard file (a corrupt or cut
    Parquet file; pyarrow's own message does not say which file)."""
    message = (f"{path}: unreadable Parquet shard ({type(err).__name__}: {str(err)[:300]}); "
               "remove it or rerun with --fresh")
    try:
        return type(err)(message)
    except Exception:  # noqa: BLE001 - an exception type that takes other arguments
        return OSError(message)


def _read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One work shard's table (only ``columns``). ``ParquetFile.read``, not ``pq.read_table``: the latter goes
    through ``pyarrow.dataset``, whose import pulls in pandas (0.15 s of every cached rerun)."""
    try:
        with pq.ParquetFile(path) as f:
            return f.read(columns=columns)
    except (pa.ArrowException, OSError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise _named(err, path) from err


def read_rows(stage_dir: Path, i: int, columns: list[str] | None = None) -> list[Row]:
    path = stage_dir / f"{work_shard_name(i)}.parquet"
    if columns is not None:  # read only the columns asked for (the file's other columns are never decoded)
        try:
            names = set(pq.read_schema(path).names)
        except (pa.ArrowException, OSError) as err:
            if isinstance(err, FileNotFoundError):
                raise
            raise _named(err, path) from err
        if not names:
            return []
        return _read_table(path, [c for c in columns if c in names]).to_pylist()
    table = _read_table(path)
    if table.num_columns == 0:
        return []
    return table.to_pylist()


def read_drops(stage_dir: Path, i: int) -> list[dict[str, str]]:
    """The drops of a finished shard (none when it has no drops file)."""
    path = stage_dir / f"{work_shard_name(i)}.drops.parquet"
    if not path.exists():
        return []
    return _read_table(path).to_pylist()


def read_stats(stage_dir: Path, i: int) -> dict[str, Any]:
    return json.loads((stage_dir / f"{work_shard_name(i)}.stats.json").read_text(encoding="utf-8"))


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
