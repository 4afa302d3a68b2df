"""The generic build flow behind ``python -m builders.build``: config -> checks -> inputs -> lock -> pipelines ->
release -> summary.

What can be checked before any work is checked here, offline and without loading a model (docs/architecture.md,
"Failures": exit 2 for bad config or input): every path in the config that exists must be a regular file or a
directory this process may read (a FIFO would block a reader forever; a symlink loop or a permission error would
stop the build half-way), sentence-encoder names resolve to a known model, ``hash:<dim>``, a local folder or a cached
Hub id (never a Hub look-up), an LLM replay file parses line by line, and the prompt ids and templates exist.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import importlib
import os
import stat
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from . import workdir
from .config import ConfigError, apply_overrides, parse_sets, read_config_file
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


#: config keys naming a sentence encoder: (key, whether ``hash:<dim>`` is allowed there)
ENCODER_KEYS = (("text_encoder", True), ("nasva_text_encoder", True), ("embedding_model", False))
_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"))


def _config_paths(cfg: Any) -> list[tuple[str, str]]:
    """``(key, value)`` of every string (or list-of-strings) config value that names an existing path."""
    out = []
    values = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(vars(cfg))
    for key, value in values.items():
        for v in ([value] if isinstance(value, (str, os.PathLike)) else
                  list(value) if isinstance(value, (list, tuple)) else []):
            if isinstance(v, (str, os.PathLike)) and str(v) and "\0" not in str(v) and os.path.lexists(v):
                out.append((key, os.fspath(v)))
    return out


def check_paths(cfg: Any) -> None:
    """Every existing path in the config is a readable regular file or directory (``ConfigError`` otherwise):
    FIFOs, sockets and devices, symlink loops, dangling links and unreadable paths are refused before any work."""
    for key, path in _config_paths(cfg):
        try:
            st = os.stat(path)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise ConfigError(f"{key}: {path} is a symlink loop (too many levels of symbolic links)") from None
            if e.errno == errno.ENOENT:
                raise ConfigError(f"{key}: {path} is a dangling symbolic link") from None
            raise ConfigError(f"{key}: {path} cannot be read: {e.strerror or e}") from None
        for test, what in _SPECIAL:
            if test(st.st_mode):
                raise ConfigError(f"{key}: {path} is {what}, not a regular file or directory")
        mode = os.R_OK | (os.X_OK if stat.S_ISDIR(st.st_mode) else 0)
        if not os.access(path, mode):
            raise ConfigError(f"{key}: {path}: permission denied (this process may not read it)")


def check_models_and_prompts(corpus: ModuleType, cfg: Any) -> None:
    """Encoder names, the LLM replay source and the prompts, resolved before any work (``ConfigError``)."""
    from ..models.text_encoder import check_encoder_name

    for key, allow_hash in ENCODER_KEYS:
        name = getattr(cfg, key, None)
        if isinstance(name, str):
            try:
                check_encoder_name(name, allow_hash=allow_hash)
            except ValueError as e:
                raise ConfigError(f"{key}: {e}") from None
    if getattr(cfg, "llm", None) == "replay" and getattr(cfg, "llm_replay", None):
        from ..models.llm import check_replay_source

        try:
            check_replay_source(cfg.llm_replay)
        except ValueError as e:
            raise ConfigError(f"llm_replay: {e}") from None
    try:   # the corpus's own prompt module, when it has one (a corpus package's ``prompts.check_config``)
        prompts = importlib.import_module(f"{getattr(corpus, '__name__', '')}.prompts")
    except ImportError:
        prompts = None
    check = getattr(prompts, "check_config", None)
    if callable(check):
        try:
            check(cfg)
        except ValueError as e:
            raise ConfigError(str(e)) from None


def run_build(corpus: ModuleType, args: argparse.Namespace) -> str:
    cfg = resolve_config(corpus, args)
    check_paths(cfg)                       # before resolve_inputs reads a header: a FIFO would block it
    cfg, sample = corpus.resolve_inputs(cfg)
    check_paths(cfg)                       # the sample's paths, or paths resolve_inputs filled in
    check_models_and_prompts(corpus, cfg)
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
