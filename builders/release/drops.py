"""``drops.parquet``: every item a build dropped (``item_id, stage, reason, detail``), streamed from the build result
(docs/publishing.md, "The release folder")."""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.atomic import atomic_path
from .writer import native_stderr_silenced

__all__ = ["DROPS_BATCH_ROWS", "write_drops"]

#: drops per Parquet batch of ``write_drops``
DROPS_BATCH_ROWS = 50_000


def write_drops(path: str | os.PathLike, result: Any) -> int:
    """``drops.parquet`` (``item_id, stage, reason, detail``) of a build result, streamed from ``result.drops()`` in
    batches of ``DROPS_BATCH_ROWS`` and written atomically; returns the number of rows."""
    from ..core.shards import DROP_SCHEMA

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
            with native_stderr_silenced(), contextlib.suppress(Exception):
                writer.close()
            raise
        writer.close()
    return n
