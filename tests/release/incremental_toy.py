"""A toy build whose release features and card are lazy (``tests/release/toy_schema.py``, a loading script's
stand-in), written through the release cache of its work directory (``builders.release.cache``): the subject of
``test_incremental.py``. Imports no ``datasets``, so that a subprocess can tell whether the release flow did.

``python -m tests.release.incremental_toy OUT WORK [--no-cache]`` writes the release of the toy stage in ``WORK`` into
``OUT/toy`` and prints ``{"counts", "datasets_imported"}`` as JSON.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders.core.orchestrate import BuildResult, StepStats
from builders.core.records import Drop
from builders.core.shards import StageData, write_shard
from builders.release.flow import ReleaseCounts, ReleaseSpec, write_release
from builders.release.parts import ShardedRows

SCHEMA = Path(__file__).resolve().with_name("toy_schema.py")
INFO = {"sample": True, "engine": "local", "workers": 1, "shard_size": 5}
SPLITS = ("train", "test")


@dataclass
class ToyConfig:
    tag: str = "a"


def schema() -> Any:
    return importlib.import_module("tests.release.toy_schema")


def write_stage(work: Path, n: int = 12, shard_rows: int = 5, edited: int | None = None) -> None:
    """The toy stage: ``n`` rows in shards of ``shard_rows``; shard ``edited`` (if any) has other texts."""
    stage = Path(work) / "toy" / "00_items-000000000000"
    for k, lo in enumerate(range(0, n, shard_rows)):
        rows = [{"id": i, "text": f"row {i}" + (" (edited)" if k == edited else ""),
                 "split": "test" if i % 4 == 0 else "train"} for i in range(lo, min(n, lo + shard_rows))]
        write_shard(stage, k, rows, [Drop(f"gone{k}", "items", "too_short", "x")],
                    {"rows_in": len(rows) + 1, "kept": len(rows), "dropped": {"too_short": 1}, "counters": {},
                     "seconds": 0.01}, input_digest=f"in-{k}-{k == edited}")


def toy_result(work: Path, n: int = 12, shard_rows: int = 5) -> BuildResult:
    stage = Path(work) / "toy" / "00_items-000000000000"
    shards = -(-n // shard_rows)
    data = StageData(stage, shards)
    st = StepStats("toy", rows_in=n + shards, kept=n, dropped=Counter(too_short=shards), shards=shards)
    return BuildResult(outputs={"items": data}, stage_dirs=[("items", data)], steps={"items": st},
                       input_fingerprints={})


def toy_spec(result: BuildResult, work: Path) -> ReleaseSpec:
    """Configs ``items`` (id, text) and ``ids`` (id only), both made per work shard, with lazy features and card."""
    template = Path(work) / "card.md"
    template.write_text("Toy release.\n\n$release_table\n", encoding="utf-8")
    data = result.outputs["items"]
    return ReleaseSpec(
        corpus="toy", title="Toy", report_title="Toy report", features=lambda: schema().FEATURES,
        card=lambda: schema().CARD, default_config="items", card_template=template, split_order=SPLITS,
        rows={"items": ShardedRows(data, lambda rows: ((r["split"], {"id": r["id"], "text": r["text"]}) for r in rows)),
              "ids": ShardedRows(data, lambda rows: ((r["split"], {"id": r["id"]}) for r in rows),
                                 columns=["id", "split"])},
        stats_extra=lambda: {"quantities": {}}, models=lambda: {"none": {}}, key_files=(SCHEMA,))


def run(out: Path, work: Path, cache: bool = True) -> ReleaseCounts:
    """Write the release of the toy stage in ``work`` (its release cache in ``work`` unless ``cache`` is false)."""
    result = toy_result(work)
    info = {**INFO, "work_dir": str(work)} if cache else dict(INFO)
    return write_release(result, ToyConfig(), Path(out) / "toy", info, toy_spec(result, work))


if __name__ == "__main__":
    got = run(Path(sys.argv[1]), Path(sys.argv[2]), cache="--no-cache" not in sys.argv)
    print(json.dumps({"counts": got, "datasets_imported": "datasets" in sys.modules}))
