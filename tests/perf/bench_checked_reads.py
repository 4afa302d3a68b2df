"""The cost of checked reads (builders/core/checked.py): every work shard of a work directory read twice, once as the
build reads it (bytes hashed against the digest in ``stats.json``, Parquet pages verified) and once without any check
(``pyarrow.parquet.ParquetFile(path).read()``), in alternating order, best of ``--repeat``. A work directory kept by
``tests/perf/bench_scale.py --keep`` (HowToStep at 20,000 videos) is the intended input.

    python tests/perf/bench_checked_reads.py WORK_DIR [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from builders.core.shards import read_rows, work_shard_name


def shard_dirs(work_dir: Path) -> list[tuple[Path, int]]:
    """(stage folder, shard count) of every stage folder with finished shards."""
    out = []
    for d in sorted(p for p in work_dir.glob("*/*") if p.is_dir()):
        n = len(list(d.glob("part-*.stats.json")))
        if n:
            out.append((d, n))
    return out


def read_checked(stages: list[tuple[Path, int]]) -> int:
    return sum(len(read_rows(d, i)) for d, n in stages for i in range(n))


def read_unchecked(stages: list[tuple[Path, int]]) -> int:
    rows = 0
    for d, n in stages:
        for i in range(n):
            with pq.ParquetFile(d / f"{work_shard_name(i)}.parquet") as f:
                table = f.read()
            rows += len(table.to_pylist()) if table.num_columns else 0
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work_dir", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    stages = shard_dirs(args.work_dir)
    files = [d / f"{work_shard_name(i)}.parquet" for d, n in stages for i in range(n)]
    size = sum(p.stat().st_size for p in files)
    read_unchecked(stages)                      # warm the page cache: both readers then read from memory
    best = {"checked": float("inf"), "unchecked": float("inf")}
    rows = {}
    for _ in range(args.repeat):
        for name, fn in (("unchecked", read_unchecked), ("checked", read_checked)):
            t0 = time.perf_counter()
            rows[name] = fn(stages)
            best[name] = min(best[name], time.perf_counter() - t0)
    if rows["checked"] != rows["unchecked"]:
        print(f"rows differ: {rows}", file=sys.stderr)
        return 1
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    result = {"stages": len(stages), "shards": len(files), "bytes": size, "rows": rows["checked"],
              "unchecked_s": round(best["unchecked"], 3), "checked_s": round(best["checked"], 3),
              "overhead_s": round(best["checked"] - best["unchecked"], 3),
              "overhead_pct": round(100 * (best["checked"] / best["unchecked"] - 1), 1), "loadavg": load}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['shards']} shards in {result['stages']} stages, {size / 2**20:.1f} MiB, {rows['checked']} rows")
        print(f"unchecked {best['unchecked']:.3f} s, checked {best['checked']:.3f} s: "
              f"+{result['overhead_s']:.3f} s ({result['overhead_pct']:+.1f} %), load {' '.join(load)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
