"""The generic build flow behind ``python -m builders.build``: config -> inputs -> lock -> pipelines -> release ->
summary."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from . import workdir
from .config import apply_overrides, parse_sets, read_config_file
from .orchestrate import BuildResult, run_pipelines
from .runners import ExecPolicy, make_runner


def resolve_config(corpus: ModuleType, args: argparse.Namespace) -> Any:
    """Paper defaults < ``--config`` file < corpus input flags and ``--limit`` < ``--set`` (errors before any work)."""
    overrides: dict[str, Any] = {}
    if args.config:
        overrides.update(read_config_file(args.config))
    overrides.update(corpus.overrides_from_args(args))
    if args.limit is not None:
        overrides["limit"] = args.limit
    overrides.update(parse_sets(args.sets))
    return apply_overrides(corpus.Config(), overrides)


def run_build(corpus: ModuleType, args: argparse.Namespace) -> str:
    cfg = resolve_config(corpus, args)
    cfg, sample = corpus.resolve_inputs(cfg)
    out_root = Path(args.out)
    work_dir = Path(args.work_dir) if args.work_dir else out_root / ".work" / corpus.NAME
    rate = getattr(args, "max_error_rate", 0.01)
    if rate is not None and not 0 <= rate <= 1:
        raise workdir.WorkDirError(f"--max-error-rate must be within [0, 1], got {rate}")
    keep = getattr(args, "keep_generations", 2)
    if keep < 1:
        raise workdir.WorkDirError(f"--keep-generations must be >= 1, got {keep}")
    workdir.prepare(work_dir, corpus.NAME)
    with workdir.WorkDirLock(work_dir, wait=getattr(args, "wait", False)):
        if args.fresh:
            workdir.fresh(work_dir, protect=[Path.cwd(), out_root / corpus.NAME])
        default_size = getattr(corpus, "SAMPLE_SHARD_SIZE", None) if sample else None
        shard_size = args.shard_size or default_size or corpus.DEFAULT_SHARD_SIZE
        policy = ExecPolicy(retries=getattr(args, "retries", 3), retry_errors=getattr(args, "retry_errors", False))
        runner = make_runner(args.engine, args.workers, args.ray_address, getattr(args, "gpus", None))
        t0 = time.perf_counter()
        try:
            result = run_pipelines(corpus.pipelines(cfg, shard_size), work_dir, runner,
                                   progress=not args.no_progress, policy=policy, max_error_rate=rate,
                                   keep_generations=keep)
        finally:
            runner.close()
        build_seconds = time.perf_counter() - t0
        info = {"sample": sample, "engine": args.engine, "workers": args.workers, "shard_size": shard_size,
                "build_seconds": round(build_seconds, 2), "work_dir": str(work_dir)}
        t1 = time.perf_counter()
        release = corpus.release(result, cfg, out_root / corpus.NAME, info)
        release_seconds = time.perf_counter() - t1
    return format_summary(corpus.NAME, result, release, build_seconds, release_seconds, out_root / corpus.NAME)


def format_summary(name: str, result: BuildResult, release: dict[str, dict[str, int]], build_s: float,
                   release_s: float, out_dir: Path) -> str:
    """The end-of-build table: rows in, kept, dropped per reason and time per step."""
    head = ("step", "rows in", "kept", "dropped (reason: n)", "time s", "cached")
    lines = []
    for step, st in result.steps.items():
        dropped = ", ".join(f"{k}: {v}" for k, v in sorted(st.dropped.items())) or "-"
        cached = f"{st.cached_shards}/{st.shards}" + (" +fit" if st.fit == "cached" else "")
        lines.append((f"{st.pipeline}/{step}", str(st.rows_in), str(st.kept), dropped,
                      f"{st.wall_seconds:.1f}", cached))
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]
    widths[3] = min(widths[3], 70)

    def fmt(r):
        return "  ".join(c.ljust(w) if i in (0, 3) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    out = [fmt(head), "  ".join("-" * w for w in widths), *map(fmt, lines)]
    counters = result.counters()
    if counters:
        out.append("counters (all rows, reused shards included): "
                   + ", ".join(f"{k}: {v}" for k, v in sorted(counters.items())))
    work = result.this_build()
    fits = f"; global stages fitted: {', '.join(work['fits_ran'])}" if work["fits_ran"] else ""
    out.append(f"this build: {work['shards_computed']} shard(s) computed, {work['shards_reused']} reused{fits}; "
               + (", ".join(f"{k}: {v}" for k, v in work["counters"].items()) or "no counter fired"))
    out.append("release: " + "; ".join(f"{c} " + ", ".join(f"{s}={n}" for s, n in sp.items())
                                       for c, sp in release.items()))
    if getattr(release, "up_to_date", False):
        out.append(f"{out_dir} is up to date (same final shards, fitted states and config): not rewritten; "
                   f"{build_s + release_s:.1f} s (pipelines {build_s:.1f} s, release check {release_s:.1f} s)")
    else:
        out.append(f"written to {out_dir} in {build_s + release_s:.1f} s (pipelines {build_s:.1f} s, "
                   f"release {release_s:.1f} s)")
    return "\n".join(out)
