"""``drops.parquet``: every item a build dropped (``item_id, stage, reason, detail``), streamed from the build result
(docs/publishing.md, "The release folder")."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.atomic import atomic_path
from .writer import native_stderr_silenced

__all__ = ["DROPS_BATCH_ROWS", "write_drops"]

#: drops per Parquet batch of ``write_drops``
DROPS_BATCH_ROWS = 50_000


def _portable(drops: Iterator[dict[str, str]], inputs: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """``drops`` with every absolute input path in ``item_id`` and ``detail`` written as the manifest names it
    (``inputs``: absolute path -> relative name; a path inside an input folder keeps its name below the folder)."""
    if not inputs:
        yield from drops
        return
    # the longest first; a path ends where the text does or at a separator, space or punctuation mark
    pattern = re.compile("(?:" + "|".join(f"({re.escape(a)})" for a in sorted(inputs, key=len, reverse=True))
                         + r")(?=[/\\\s:;,)'\"]|$)")
    names = [inputs[a] for a in sorted(inputs, key=len, reverse=True)]

    def portable(text: str) -> str:
        return pattern.sub(lambda m: names[m.lastindex - 1], text)

    for d in drops:
        yield {k: portable(v) if k in ("item_id", "detail") and isinstance(v, str) else v for k, v in d.items()}


def write_drops(path: str | os.PathLike, result: Any, inputs: Mapping[str, str] | None = None) -> int:
    """``drops.parquet`` (``item_id, stage, reason, detail``) of a build result, streamed from ``result.drops()`` in
    batches of ``DROPS_BATCH_ROWS`` and written atomically; returns the number of rows. ``inputs`` (absolute input
    path -> its name in the manifest) makes the paths a drop names relative, as the manifest's are: a release holds
    no absolute path."""
    from ..core.shards import DROP_SCHEMA

    path = Path(path)
    n = 0
    with atomic_path(path) as tmp:
        writer = pq.ParquetWriter(str(tmp), schema=DROP_SCHEMA)
        try:
            it = _portable(iter(result.drops()), inputs or {})
            while batch := list(itertools.islice(it, DROPS_BATCH_ROWS)):
                writer.write_table(pa.Table.from_pylist(batch, schema=DROP_SCHEMA))
                n += len(batch)
        except BaseException:
            with native_stderr_silenced(), contextlib.suppress(Exception):
                writer.close()
            raise
        writer.close()
    return n
