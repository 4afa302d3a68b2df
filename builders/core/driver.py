"""The generic build flow behind ``python -m builders.build`` and ``builders.api.build_corpus``: config -> checks ->
inputs -> lock -> pipelines -> release -> summary.

:class:`BuildOptions` holds every option of a build (the CLI's flags, with their defaults defined here once; the CLI's
argparse defaults are read from it) and :func:`run_build` takes a corpus (:class:`~builders.core.corpus.Corpus`) and
the options and returns a :class:`BuildOutcome`.

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
import json
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import workdir
from .config import ConfigError, apply_overrides, parse_sets, read_config_file
from .corpus import Corpus, sample_shard_size
from .repair import Repairs, damaged_in

if TYPE_CHECKING:
    from .orchestrate import BuildResult

#: the runners of ``--engine``
ENGINES = ("local", "ray")
#: the model-output cache's folder in ``OUT/.work`` when ``--model-outputs`` is not given: beside every corpus's
#: default work directory (``OUT/.work/<corpus>``), so the builds of several corpora into one ``--out`` share it
MODEL_OUTPUTS_DIR = "model-outputs"


@dataclass(frozen=True)
class BuildOptions:
    """Every option of a build: the flags of ``python -m builders.build <corpus>`` by their ``dest`` (``--work-dir``
    is ``work_dir``, ``--no-progress`` is ``progress=False``), with the CLI's defaults, which are defined here only.

    The corpus config is made of ``config`` (a YAML file), ``inputs`` (the corpus's own flags) and ``limit``, and
    ``sets``, in that order of precedence, lowest first, after the paper defaults (docs/configuration.md).
    """

    # ---- where
    out: str | os.PathLike[str] = "."               # --out: the release goes to OUT/<corpus>/
    work_dir: str | os.PathLike[str] | None = None  # --work-dir: caches and work shards (None: OUT/.work/<corpus>)
    model_outputs: str | os.PathLike[str] | None = None  # --model-outputs: shared (None: OUT/.work/model-outputs)
    # ---- the corpus config
    config: str | os.PathLike[str] | None = None    # --config: a YAML file of config overrides
    sets: Mapping[str, Any] = field(default_factory=dict)    # --set KEY=VALUE (parsed values): any config key
    inputs: Mapping[str, Any] = field(default_factory=dict)  # the corpus's flags by dest: {"videos": "v.csv"}
    limit: int | None = None                        # --limit: only the first N videos (marc: pages), trial builds
    # ---- how
    engine: str = "local"                           # --engine: local (in process or a pool) or ray
    workers: int = 1                                # --workers: worker processes / Ray actors
    ray_address: str | None = None                  # --ray-address: a Ray cluster (None: start a local Ray)
    gpus: int | None = None                         # --gpus: GPUs for GPU steps (None: all visible)
    shard_size: int | None = None                   # --shard-size: rows per work shard (None: the corpus's)
    retries: int = 3                                # --retries: of a transient failure, before a shard is left
    retry_errors: bool = False                      # --retry-errors: rerun shards with step_error drops
    max_error_rate: float = 0.01                    # --max-error-rate: a step's step_error share that fails it
    keep_generations: int = 2                       # --keep-generations: stage folders kept per stage
    fresh: bool = False                             # --fresh: empty this corpus's work directory first
    wait: bool = False                              # --wait: wait for another build holding the work directory
    # ---- what is shown
    progress: bool = True                           # --no-progress: progress bars
    quiet: bool = False                             # -q/--quiet: no summary table
    debug: bool = False                             # --debug: the CLI prints the traceback of a failure
    # ---- publish after the build (builders.publish)
    push: str | None = None                         # --push ORG/NAME: publish the release to this Hub repo
    version: str | None = None                      # --version vX.Y.Z: the release tag (with push)
    private: bool = False                           # --private: create the Hub repo private
    push_timeout: float | None = None               # --push-timeout: per request (None: builders.publish's default)
    push_deadline: float | None = None              # --push-deadline: whole publish (None: builders.publish's)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BuildOptions:
        """The options of a parsed ``python -m builders.build <corpus>`` command line (``--set`` strings parsed
        as YAML values; every other attribute but ``corpus`` is one of the corpus's flags: ``inputs``, those given)."""
        values = dict(vars(args))
        values.pop("corpus", None)
        names = {f.name for f in dataclasses.fields(cls)} - {"sets", "inputs"}
        options = {name: values.pop(name) for name in names}
        sets = parse_sets(values.pop("sets"))
        inputs = {k: v for k, v in values.items() if v is not None}
        return cls(**options, sets=sets, inputs=inputs)


@dataclass(frozen=True)
class BuildOutcome:
    """What a build made: the release folder, its row counts and statistics, and the end-of-build table."""

    corpus: str                       # the corpus name
    release: Path                     # the release folder, OUT/<corpus>
    rows: dict[str, dict[str, int]]   # rows per config and split: {"recipes": {"train": 17, ...}, ...}
    stats: dict[str, Any] = field(repr=False)   # the release's stats.json ({} for a release that writes none)
    summary: str = field(repr=False)  # the table the CLI prints: rows in, kept, dropped per reason, time per step
    up_to_date: bool = False          # the release in place was current (same shards, states, config): not rewritten
    sample: bool = False              # the bundled sample was built (no input given)
    work_dir: Path | None = None      # the caches and work shards

    def __str__(self) -> str:
        return self.summary

    def load(self, config: str | None = None, **kwargs: Any) -> Any:
        """``datasets.load_dataset`` of the release folder (``config``: one of ``rows``; None: the default one);
        ``kwargs`` go to ``load_dataset`` (``split=``, ``cache_dir=``)."""
        import datasets

        return datasets.load_dataset(str(self.release), config, **kwargs)


def _flag_value(corpus: Corpus, key: str, action: argparse.Action, value: Any) -> Any:
    """``value`` given for the corpus flag of ``action`` as ``argparse`` would have stored it."""
    flag = "/".join(action.option_strings)
    if value is None:
        return action.default
    if action.nargs == 0:   # a switch (store_true, store_const): True sets it, False leaves it unset
        if not isinstance(value, bool):
            raise ConfigError(f"{corpus.NAME} input {key!r} ({flag}) is a switch: give True or False, got {value!r}")
        return action.const if value else action.default

    def one(v: Any) -> Any:
        v = os.fspath(v) if isinstance(v, os.PathLike) else v
        if isinstance(v, str) and callable(action.type):
            try:
                v = action.type(v)
            except (TypeError, ValueError):
                raise ConfigError(f"{corpus.NAME} input {key!r} ({flag}): invalid value {v!r}") from None
        if action.choices is not None and v not in action.choices:
            raise ConfigError(f"{corpus.NAME} input {key!r} ({flag}): {v!r} is not one of "
                              + ", ".join(map(str, action.choices)))
        return v

    if isinstance(action, argparse._AppendAction):   # a repeatable flag: one value or a list of them
        return [one(v) for v in ([value] if isinstance(value, (str, os.PathLike)) else list(value))]
    return one(value)


def corpus_flags(corpus: Corpus) -> dict[str, argparse.Action]:
    """The corpus's own flags by every name ``inputs`` may use for them: the dest (``video_ids``) and the option
    names without dashes (``video-ids``)."""
    parser = argparse.ArgumentParser(add_help=False)
    corpus.add_arguments(parser)
    out: dict[str, argparse.Action] = {}
    for action in parser._actions:
        out[action.dest] = action
        for option in action.option_strings:
            out[option.lstrip("-")] = action
    return out


def input_overrides(corpus: Corpus, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The config overrides of the corpus flags in ``inputs`` (``{"videos": path, "exclude": [a, b]}``), through
    the corpus's own ``overrides_from_args``, exactly as for the same flags on the command line. An unknown name or
    a value the flag refuses is a ``ConfigError``."""
    return dict(corpus.overrides_from_args(_flag_namespace(corpus, inputs)))


def _flag_namespace(corpus: Corpus, inputs: Mapping[str, Any]) -> argparse.Namespace:
    flags = corpus_flags(corpus)
    args = argparse.Namespace(**{a.dest: a.default for a in flags.values()})
    for key, value in inputs.items():
        action = flags.get(str(key).lstrip("-"))
        if action is None:
            known = sorted({a.dest for a in flags.values()})
            raise ConfigError(f"unknown input {key!r} for {corpus.NAME}; its flags: {', '.join(known) or 'none'}")
        setattr(args, action.dest, _flag_value(corpus, str(key), action, value))
    return args


def resolve_config(corpus: Corpus, options: BuildOptions | argparse.Namespace) -> Any:
    """Paper defaults < ``--config`` file < corpus input flags and ``--limit`` < ``--set`` (errors before any work).
    ``options`` may be a parsed command line (``make_parser().parse_args(...)``)."""
    if isinstance(options, argparse.Namespace):
        options = BuildOptions.from_args(options)
    overrides: dict[str, Any] = {}
    if options.config:
        overrides.update(read_config_file(options.config))
    overrides.update(input_overrides(corpus, options.inputs))
    if options.limit is not None:
        overrides["limit"] = options.limit
    overrides.update(options.sets)
    return apply_overrides(corpus.Config(), overrides)


#: config keys naming a sentence encoder: (key, whether ``hash:<dim>`` is allowed there)
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


def check_corpus_config(corpus: Corpus, cfg: Any) -> None:
    """The corpus's own checks of its resolved config (models, prompts), before any work: its optional
    ``check_config(cfg)`` raises ``ConfigError`` (exit 2)."""
    check = getattr(corpus, "check_config", None)
    if callable(check):
        check(cfg)


def run_build(corpus: Corpus, options: BuildOptions) -> BuildOutcome:
    """Build ``corpus`` with ``options`` into ``options.out/<corpus>``: resolve and check the config (before any
    work), take the work directory's lock, run the pipelines, write the release. Publishing (``options.push``) and
    printing the summary (``options.quiet``) are the caller's (``builders.api``)."""
    if options.engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {options.engine!r}")
    cfg = resolve_config(corpus, options)
    check_paths(cfg)                       # before resolve_inputs reads a header: a FIFO would block it
    cfg, sample = corpus.resolve_inputs(cfg)
    check_paths(cfg)                       # the sample's paths, or paths resolve_inputs filled in
    check_corpus_config(corpus, cfg)
    out_root = Path(options.out)
    work_dir = Path(options.work_dir) if options.work_dir else out_root / ".work" / corpus.NAME
    model_outputs = model_outputs_dir(options)
    rate = options.max_error_rate
    if rate is not None and not 0 <= rate <= 1:
        raise workdir.WorkDirError(f"--max-error-rate must be within [0, 1], got {rate}")
    keep = options.keep_generations
    if keep < 1:
        raise workdir.WorkDirError(f"--keep-generations must be >= 1, got {keep}")
    from .step import check_release_reads

    workdir.prepare(work_dir, corpus.NAME)
    with workdir.WorkDirLock(work_dir, wait=options.wait):
        if options.fresh:
            workdir.fresh(work_dir, protect=[Path.cwd(), out_root / corpus.NAME])
        default_size = sample_shard_size(corpus) if sample else None
        shard_size = options.shard_size or default_size or corpus.DEFAULT_SHARD_SIZE
        pipes = share_model_outputs(corpus.pipelines(cfg, shard_size), model_outputs)   # assembled, checked
        reads = getattr(corpus, "RELEASE_READS", None)
        check_release_reads(pipes, reads)
        repairs = Repairs(work_dir)
        t0 = time.perf_counter()
        while True:   # a damaged cache file found on the way is forgotten, and the build goes again (core/repair.py)
            try:
                result, release, build_seconds, release_seconds = _build_once(
                    corpus, cfg, options, pipes, reads, work_dir, out_root, sample, shard_size, repairs)
                break
            except Exception as err:  # noqa: BLE001 - only a damaged cache is handled; the rest is raised as it came
                damaged = damaged_in(err)
                if damaged is None:
                    raise
                repairs.forget(damaged, err)
                pipes = share_model_outputs(corpus.pipelines(cfg, shard_size), model_outputs)   # fresh steps
        build_seconds = time.perf_counter() - t0 - release_seconds
    out_dir = out_root / corpus.NAME
    stats_file = out_dir / "stats.json"
    stats = json.loads(stats_file.read_text(encoding="utf-8")) if stats_file.is_file() else {}
    return BuildOutcome(
        corpus=corpus.NAME, release=out_dir, rows={c: dict(splits) for c, splits in release.items()}, stats=stats,
        summary=format_summary(corpus.NAME, result, release, build_seconds, release_seconds, out_dir),
        up_to_date=bool(getattr(release, "up_to_date", False)), sample=sample, work_dir=work_dir)


def model_outputs_dir(options: BuildOptions) -> Path:
    """The model-output cache folder of a build (``--model-outputs``, default ``OUT/.work/model-outputs``), absolute
    (workers may run elsewhere); ``ConfigError`` when a file is in its place."""
    default = Path(options.out) / ".work" / MODEL_OUTPUTS_DIR
    folder = Path(options.model_outputs) if options.model_outputs else default
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--model-outputs: {folder} is not a directory")
    return Path(os.path.abspath(folder))


def share_model_outputs(pipes: list, folder: Path) -> list:
    """``pipes`` with every step naming the build's model-output cache (:attr:`Step.model_outputs
    <builders.core.step.Step.model_outputs>`): not a parameter, so no cache key changes with it."""
    for pipe in pipes:
        for step in pipe.steps:
            step.model_outputs = str(folder)
    return pipes


def _build_once(corpus: Corpus, cfg: Any, options: BuildOptions, pipes: list, reads: Mapping[str, Any] | None,
                work_dir: Path, out_root: Path, sample: bool, shard_size: int, repairs: Repairs) -> tuple:
    """One pass of the pipelines and the release: ``(result, release, build seconds, release seconds)``."""
    from .orchestrate import run_pipelines   # pyarrow and the runners: imported when a build runs
    from .runners import ExecPolicy, make_runner
    from .shards import StageData

    policy = ExecPolicy(retries=options.retries, retry_errors=options.retry_errors)
    runner = make_runner(options.engine, options.workers, options.ray_address, options.gpus)
    t0 = time.perf_counter()
    try:
        result = run_pipelines(pipes, work_dir, runner, progress=options.progress, policy=policy,
                               max_error_rate=options.max_error_rate, keep_generations=options.keep_generations)
    finally:
        runner.close()
    result.repaired = list(repairs.files)
    for name, fields in (reads or {}).items():   # the release reads what it declared, and nothing else
        out = result.outputs[name]
        result.outputs[name] = StageData(out.dir, out.n, columns=list(fields))
    build_seconds = time.perf_counter() - t0
    info = {"sample": sample, "engine": options.engine, "workers": options.workers, "shard_size": shard_size,
            "build_seconds": round(build_seconds, 2), "work_dir": str(work_dir)}
    t1 = time.perf_counter()
    release = corpus.release(result, cfg, out_root / corpus.NAME, info)
    return result, release, build_seconds, time.perf_counter() - t1


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
    rows = f" ({work['rows_reused']} of their rows reused)" if work.get("rows_reused") else ""
    out.append(f"this build: {work['shards_computed']} shard(s) computed{rows}, {work['shards_reused']} reused{fits}; "
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
