"""The one release flow every corpus goes through (README.md "The release" and "Caching and resume").

A corpus describes its release in a :class:`ReleaseSpec` (rows per config and split as generators over the final work
shards, lazily computed statistics, models and extra files) and calls :func:`write_release`, which, holding the
release lock (``<out>/.<corpus>.lock``; a second build into the same ``--out`` waits):

    recovers a swap a killed build left half done, removes staging folders whose owner is gone -> computes the
    release key and, if the release in place carries it and is complete, returns its row counts without writing
    anything -> otherwise writes into this build's own staging folder: drops.parquet (streamed, checked against the
    statistics) -> build_config.yaml -> Parquet shards (streamed) -> statistics -> extra files -> stats.json ->
    README.md (card) -> report.html (distributions streamed) -> explore.html (builders/explore, a sample of items) ->
    manifest.json (with the release key and the file listing) -> the gate (load_dataset of every config) -> swap into place (the old release stays until the new one
    is in place).

Nothing here holds a config's rows: every row source is iterated once, batch by batch. ``SortedSpill``
(``builders.release.streaming``) sorts rows on disk when a release needs an order its work shards do not have.

A build with a work directory keeps a release cache there (``builders.release.cache``), so that the rewrite after an
edit does only what the edit changed (``builders.release.incremental``): lazy features and the README header come from
records (no ``datasets`` import), a config whose parts did not change keeps the shards of the release in place, the
gate does not resolve again a layout it resolved, the explorer keeps the items of unchanged videos. Every file is the
one a write without the cache makes.

A build where nothing survives writes its statistics to ``<out>/<corpus>.empty-build/``, beside (never over) the last
release, and raises :class:`BuildEmpty` (exit 3).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import __version__ as TOOLKIT_VERSION
from ..core.atomic import atomic_path, atomic_write_bytes, atomic_write_text
from ..core.config import to_dict
from ..core.fingerprint import file_fingerprint, hash_obj, relative_paths
from ..core.orchestrate import BuildResult, data_digest
from ..core.shards import StageData, read_stats
from .cache import ReleaseCache
from .card_text import render_card, stats_tables
from .drops import write_drops
from .incremental import cached_features, features_key, record_outputs, write_card, write_configs
from .manifest import (
    INPUTS_ROOT_FIELD,
    RELEASE_FILES_FIELD,
    RELEASE_KEY_FIELD,
    RELEASE_ROWS_FIELD,
    git_commit,
    input_paths,
    inputs_root,
    release_listing,
    up_to_date_release,
    write_json_atomic,
)
from .parts import PartsStats, ShardedRows
from .swap import clean_stale_stages, discard_stage, recover_swap, release_lock, stage_release, swap_into_place
from .writer import RowSource

#: bump when a release written from the same final shards, config and toolkit version would differ (layout, writer,
#: card, statistics): a release carrying another format's key is rewritten
RELEASE_FORMAT_VERSION = 2

#: the card body of a corpus that brings none: the release, drop and counter tables
DEFAULT_CARD_TEMPLATE = Path(__file__).resolve().parents[2] / "cards" / "default.md"

#: the release code whose source is part of the release key (with the corpus's own ``ReleaseSpec.key_files``)
_RELEASE_CODE = tuple(sorted(Path(__file__).resolve().parent.glob("*.py")))  # every module of builders/release


class BuildEmpty(RuntimeError):
    """Nothing survived the pipelines: statistics are written beside the last release, which is kept (exit 3)."""


class ReleaseCounts(dict):
    """``{config: {split: rows}}`` of the release in place, and whether it was already up to date (not rewritten)."""

    def __init__(self, counts: Mapping[str, Mapping[str, int]], *, up_to_date: bool, key: str) -> None:
        super().__init__({c: dict(sp) for c, sp in counts.items()})
        self.up_to_date = up_to_date
        self.key = key


ReleaseFiles = dict[str, "Path | bytes | str | Callable[[Path], None]"]


@dataclass
class ReleaseSpec:
    """What a corpus hands the release flow. Everything proportional to the corpus is lazy: ``rows`` sources are
    iterated once while their shards are written, ``stats_extra``, ``models`` and callable ``files`` are evaluated
    after the up-to-date check (``stats_extra`` after the shards are written), ``report_videos`` is streamed once."""

    corpus: str
    # config -> datasets.Features (configs without rows are left out), in the order the release lists its configs; or
    # a zero-arg callable returning them, called only when the release is written (a cached rerun never imports
    # datasets), which needs ``key_files`` to name the file that defines them (it keys the release instead). A config's
    # features may also be a plain mapping of field -> dtype name ({"video_id": "string"}: ``datasets.Value``)
    features: Mapping[str, Any] | Callable[[], Mapping[str, Any]]
    # config -> split -> rows: a list, or a zero-arg callable returning an iterator (a generator over work shards); or
    # config -> ShardedRows (cached per work shard); or a zero-arg callable returning that dict (called when written)
    rows: dict[str, dict[str, RowSource] | ShardedRows] | Callable[[], dict[str, dict[str, RowSource] | ShardedRows]]
    # the card's body, a string.Template; the default shows the release, drop and counter tables (cards/default.md)
    card_template: Path = DEFAULT_CARD_TEMPLATE
    title: str = ""                                       # README title ("": the corpus name)
    report_title: str = ""                                # report.html title ("": "<title> build")
    default_config: str = ""                              # "": the first config of ``features``
    # card YAML fields (license, task_categories, ...), or a zero-arg callable returning them, which must depend on
    # nothing but the release's source (``key_files``, like lazy features): a rewrite may reuse the README header
    # rendered from an earlier call (builders/release/incremental.py)
    card: Mapping[str, Any] | Callable[[], Mapping[str, Any]] = field(default_factory=dict)
    split_order: tuple[str, ...] = ("train", "validation", "test")
    empty: str = ""                                       # non-empty: nothing survived, and why
    stats_extra: dict[str, Any] | Callable[[], dict[str, Any]] = field(default_factory=dict)
    models: dict[str, Any] | Callable[[], dict[str, Any]] = field(default_factory=dict)  # the manifest's
    # the card template's $placeholders from stats.json and the manifest (default: the tables of ``stats_tables``)
    card_context: Callable[[dict[str, Any], dict[str, Any]], Mapping[str, Any]] = lambda stats, man: stats_tables(stats)
    report_videos: Any = ()                               # videos (mappings) or their ReportTallies, or a callable
                                                          # returning either
    # extra files, relative to the release root: a source path, bytes, text, or a callable that writes the file (or
    # folder) at the path it is given; or a callable returning that dict (resolved after the shards are written)
    files: ReleaseFiles | Callable[[], ReleaseFiles] = field(default_factory=dict)
    path_keys: tuple[str, ...] = ()                       # config keys holding paths (made relative in provenance)
    key_files: tuple[Path, ...] = ()                      # source files of the corpus's release (release key)
    scratch: Path | None = None                           # set by write_release while it writes
    _features: Mapping[str, Any] | None = field(default=None, init=False, repr=False)  # lazy features, once called

    def __post_init__(self) -> None:
        self.title = self.title or self.corpus
        self.report_title = self.report_title or f"{self.title} build"
        if callable(self.features) and not self.key_files:
            raise ValueError("ReleaseSpec: lazy features need key_files naming the file that defines them")

    def feature_map(self, cache: ReleaseCache | None = None) -> Mapping[str, Any]:
        """The features by config (a callable is called once; ``features`` itself stays as given, so the release key
        of this spec does not change once the features were needed). With a release ``cache``, lazy features come
        from its record (``LightFeatures``: no ``datasets`` import) when the same source was seen before."""
        if self._features is None:
            def make() -> Mapping[str, Any]:
                return _as_features(self.features() if callable(self.features) else self.features)

            if cache and callable(self.features):
                self._features = cached_features(cache, features_key(self.corpus, code_key(self), self.features), make)
            else:
                self._features = make()
        return self._features

    def scratch_dir(self) -> Path:
        """This build's scratch folder beside its staging folder (external sorts); only while the release is written."""
        if self.scratch is None:
            raise RuntimeError("scratch_dir() is only available while write_release writes the release")
        self.scratch.mkdir(parents=True, exist_ok=True)
        return self.scratch


def _as_features(by_config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Plain ``{field: dtype}`` mappings as ``datasets.Features`` of ``Value``s (other values kept as given)."""
    plain = {c for c, f in by_config.items() if isinstance(f, Mapping) and not hasattr(f, "to_dict")}
    if not plain:
        return by_config
    from datasets import Features, Value

    def value(c: str, k: str, dtype: Any) -> Any:
        if not isinstance(dtype, str):
            return dtype
        try:
            return Value(dtype)
        except ValueError as e:
            raise ValueError(f"release features: config {c!r}, field {k!r}: {dtype!r} is not a dtype name "
                             "(string, int32, float64, bool, ...)") from e

    return {c: Features({k: value(c, k, v) for k, v in f.items()}) if c in plain else f for c, f in by_config.items()}


def _value(x: Any) -> Any:
    return x() if callable(x) else x


# ------------------------------------------------------------------------------------------------------ the flow


def _as_list(v: Any) -> list[str]:
    return [str(x) for x in ([v] if isinstance(v, (str, os.PathLike)) else list(v or [])) if x]


def input_names(conf: Mapping[str, Any], path_keys: tuple[str, ...],
                fingerprints: Mapping[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Every input path of the config (``path_keys``) and of the fingerprints -> its name relative to the inputs'
    common root (``builders.core.fingerprint.relative_paths``): the names the manifest and the drops use."""
    paths = [p for k in path_keys for p in _as_list(conf.get(k))]
    paths += [f["path"] for fps in fingerprints.values() for f in fps]
    return relative_paths(paths)


def portable_inputs(cfg: Any, path_keys: tuple[str, ...],
                    fingerprints: Mapping[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and the input fingerprints with every input path made relative to the inputs' common root."""
    conf = to_dict(cfg)
    rel = input_names(conf, path_keys, fingerprints)
    for k in path_keys:
        v = conf.get(k)
        if isinstance(v, str) and v:
            conf[k] = rel[v]
        elif isinstance(v, list):
            conf[k] = [rel[str(x)] for x in v]
    fps = {stage: [{**f, "path": rel[f["path"]]} for f in items] for stage, items in fingerprints.items()}
    return conf, fps


def _stage_key(data: StageData) -> list[Any]:
    """A complete stage as the release sees it: ``data_digest`` (its shards' row digests) plus, per shard, what its
    drops and counters were computed from (input digest, fitted-state key) and their counts."""
    shards = []
    for i in range(data.n):
        s = read_stats(data.dir, i)
        shards.append([s.get("input_digest", ""), s.get("state_key", ""), s.get("dropped", {}), s.get("counters", {})])
    return [f"{data.dir.parent.name}/{data.dir.name}", data.n, data_digest(data), hash_obj(shards)]


def release_key(result: BuildResult, cfg: Any, info: Mapping[str, Any], spec: ReleaseSpec) -> str:
    """The key of the release a build would write: a hash of every stage's shard digests (``data_digest``, plus each
    shard's drop and counter record), the fitted states' keys, the input fingerprints, the resolved config, the
    toolkit version, ``RELEASE_FORMAT_VERSION``, the features, the card template and the release code. Reads the
    shards' small ``stats.json`` files only: seconds at any size."""
    fits = {}
    for name, rec in sorted(result.fits.items()):
        state = {k: v for k, v in rec.state.items() if k != "_artefacts"} if isinstance(rec.state, dict) else rec.state
        marker = Path(rec.artefact_dir).parent / "_complete.json"
        try:
            fit_key = json.loads(marker.read_text(encoding="utf-8")).get("key")
        except (OSError, ValueError):
            fit_key = None
        fits[name] = [hash_obj(state), fit_key]
    return hash_obj({
        "format": RELEASE_FORMAT_VERSION, "toolkit": TOOLKIT_VERSION, "corpus": spec.corpus,
        "config": to_dict(cfg), "sample": bool(info.get("sample")), "inputs": result.input_fingerprints,
        "stages": [[name, *_stage_key(data)] for name, data in result.stage_dirs],
        "outputs": {k: f"{d.dir.parent.name}/{d.dir.name}" for k, d in sorted(result.outputs.items())},
        "fits": fits,
        # lazy features are keyed by the source that defines them (``key_files``, in ``code``)
        "features": None if callable(spec.features) else
                    {c: f.to_dict() if hasattr(f, "to_dict") else str(f) for c, f in sorted(spec.features.items())},
        "code": code_key(spec),
    })


def schema_files(module: str) -> tuple[Path, ...]:
    """The source files a loading script's features come from (the script and the modules of its package), found
    without importing it: a corpus's release keys them (``ReleaseSpec.key_files``) when its features are lazy."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no loading script {module!r}")
    return tuple(sorted(Path(spec.origin).resolve().parent.glob("*.py")))


def code_key(spec: ReleaseSpec) -> list[list[str]]:
    """``[name, sha256]`` of every source file of the release, sorted: the modules of ``builders/release``, the card
    template and the corpus's ``key_files``. Names without folders, so that the key does not depend on where the
    files are; a list, so that two files of one name (``__init__.py``) are both keyed."""
    code = sorted({*(Path(p).resolve() for p in (*_RELEASE_CODE, spec.card_template, *spec.key_files))})
    return sorted([p.name, file_fingerprint(p)["sha256"]] for p in code if p.is_file())


def _write_report(path: Path, title: str, stats: dict[str, Any], videos: Any, explorer: bool = False) -> None:
    from .report import write_report
    from .tallies import ReportTallies

    videos = _value(videos)
    write_report(path, title=title, stats=stats, explorer=explorer,
                 tallies=videos if isinstance(videos, ReportTallies) else ReportTallies.of(videos))


def _remove_empty_build(out_dir: Path) -> None:
    stale = out_dir.with_name(f"{out_dir.name}.empty-build")
    if stale.exists():
        shutil.rmtree(stale)


def write_release(result: BuildResult, cfg: Any, out_dir: Path, info: dict[str, Any], spec: ReleaseSpec, *,
                  wait: bool = True) -> ReleaseCounts:
    """Write, gate and swap into place the release of ``spec`` at ``out_dir``; returns ``{config: {split: rows}}``.

    Holds the release lock for the whole release phase (``wait=False``: raise ``ReleaseLocked`` instead of waiting).
    When the release in place carries this build's ``release_key`` and is complete, nothing is written: the row
    counts come from the Parquet footers and ``ReleaseCounts.up_to_date`` is true (said on stderr too).
    """
    out_dir = Path(out_dir)
    key = release_key(result, cfg, info, spec)
    with release_lock(out_dir, wait=wait):
        if recover_swap(out_dir) == "restored":
            print(f"restored the previous release {out_dir}: a build was killed while swapping its release in",
                  file=sys.stderr, flush=True)
        clean_stale_stages(out_dir)
        if not spec.empty:
            counts = up_to_date_release(out_dir, key)
            if counts is not None:
                _remove_empty_build(out_dir)
                print(f"release {out_dir} is up to date (same final shards, fitted states, config and toolkit "
                      "version): not rewritten", file=sys.stderr, flush=True)
                return ReleaseCounts(counts, up_to_date=True, key=key)
        stage = stage_release(out_dir)
        spec.scratch = stage.with_name(f"{stage.name}.scratch")
        try:
            got = _write_staged(result, cfg, out_dir, info, spec, stage, key)
        finally:
            spec.scratch = None
            discard_stage(stage)
    return ReleaseCounts(got, up_to_date=False, key=key)


def _in_work_dir(path: str, work_dir: str | None) -> str:
    """``path`` relative to the work directory (a release names no absolute path), else its file name."""
    try:
        return Path(path).resolve().relative_to(Path(work_dir).resolve()).as_posix()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return Path(path).name


def _write_staged(result: BuildResult, cfg: Any, out_dir: Path, info: dict[str, Any], spec: ReleaseSpec,
                  stage: Path, key: str) -> dict[str, dict[str, int]]:
    stats: dict[str, Any] = {
        "corpus": spec.corpus,
        "drops": dict(sorted(result.drop_counts().items())),
        "counters": dict(sorted(result.counters().items())),
        "steps": {k: v.as_dict() for k, v in result.steps.items()},
        "build": {k: v for k, v in info.items() if k != "work_dir"},
        "release": {},
    }
    this_build = getattr(result, "this_build", None)
    if callable(this_build):
        stats["this_build"] = this_build()
    names = input_names(to_dict(cfg), spec.path_keys, result.input_fingerprints)
    n_drops = write_drops(stage / "drops.parquet", result, {os.path.abspath(p): r for p, r in names.items()})
    if n_drops != sum(stats["drops"].values()):  # an invariant of the runner: fail loudly, even under python -O
        raise RuntimeError(f"drops.parquet has {n_drops} rows but stats.json counts {sum(stats['drops'].values())}")
    conf, inputs = portable_inputs(cfg, spec.path_keys, result.input_fingerprints)
    given = input_paths(to_dict(cfg), spec.path_keys)  # absolute, in memory only: the explorer's way to the media
    root = inputs_root(out_dir, [*(p for ps in given.values() for p in ps),
                                 *(f["path"] for fps in result.input_fingerprints.values() for f in fps)])
    man = {
        "corpus": spec.corpus, "toolkit_version": TOOLKIT_VERSION, "git_commit": git_commit(),
        "config": conf, "inputs": inputs, INPUTS_ROOT_FIELD: root, "sample": info["sample"],
        "models": None,  # (below; sorted when written)
        "runtime": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "engine": info["engine"], "workers": info["workers"], "shard_size": info["shard_size"]},
    }
    atomic_write_text(stage / "build_config.yaml", yaml.safe_dump(conf, sort_keys=True))

    if spec.empty:
        man["models"] = _value(spec.models)
        stats.update(_value(spec.stats_extra))
        write_json_atomic(stage / "stats.json", stats)
        _write_report(stage / "report.html", spec.report_title, stats, ())
        write_json_atomic(stage / "manifest.json", man)
        beside = out_dir.with_name(f"{out_dir.name}.empty-build")
        if beside.exists():
            shutil.rmtree(beside)
        os.replace(stage, beside)
        kept = f"; the last release in {out_dir} is untouched" if out_dir.exists() else ""
        raise BuildEmpty(f"{spec.empty}; statistics are in {beside}/stats.json{kept}")

    from .gate import gate

    code = code_key(spec)
    parts_stats = PartsStats()
    cache = ReleaseCache.of_build(info)
    all_features = spec.feature_map(cache)
    rows = _value(spec.rows)
    unknown = sorted(set(rows) - set(all_features))
    if unknown:
        raise ValueError(f"release rows for config(s) {unknown} that have no features")

    def models() -> None:  # Python work that needs no shard: done while the shards are written
        man["models"] = _value(spec.models)

    done = write_configs(stage, out_dir, rows, all_features, spec.split_order, code, cache, parts_stats, models)
    splits, release = done.splits, done.rows
    stats["release"] = release
    if "this_build" in stats and (parts_stats.made or parts_stats.reused):
        stats["this_build"]["release_parts"] = {"made": parts_stats.made, "reused": parts_stats.reused}
    if "this_build" in stats and parts_stats.damaged:  # remade parts are damaged caches recomputed, too
        names = [_in_work_dir(p, info.get("work_dir")) for p in parts_stats.damaged]
        stats["this_build"]["damaged_cache_files"] = [*stats["this_build"].get("damaged_cache_files", []), *names]
        stats["this_build"]["damaged_caches_recomputed"] = len(stats["this_build"]["damaged_cache_files"])
    stats.update(_value(spec.stats_extra))
    for rel, content in _value(spec.files).items():
        target = stage / rel
        if not target.resolve().is_relative_to(stage.resolve()) or target.resolve() == stage.resolve():
            raise ValueError(f"release file {rel!r} escapes the release folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(target)
        elif isinstance(content, Path):
            with atomic_path(target) as tmp:
                shutil.copyfile(content, tmp)
        elif isinstance(content, bytes):
            atomic_write_bytes(target, content)
        else:
            atomic_write_text(target, content)
    write_json_atomic(stage / "stats.json", stats)
    features = {c: all_features[c] for c in splits}
    default_config = spec.default_config or next(iter(all_features), "")
    body = render_card(spec.card_template, spec.card_context(stats, man))
    fingerprints = write_card(stage, cache, features_key(spec.corpus, code, spec.features),
                              features_by_config=features, splits_by_config=splits, default_config=default_config,
                              card=spec.card, title=spec.title, body=body, fingerprints=done.fingerprints)
    from ..explore import CORPORA, write_explorer  # lazy: jinja2 only when a release is written

    explorer = spec.corpus in CORPORA  # the four corpora have a view (docs/explorer.md)
    _write_report(stage / "report.html", spec.report_title, stats, spec.report_videos, explorer=explorer)
    man[RELEASE_KEY_FIELD] = key
    man[RELEASE_ROWS_FIELD] = release
    if explorer:  # before the listing, so that it is listed
        from ..explore.reuse import ItemReuse

        reuse = ItemReuse(cache.root / "explore-items.json", done.parts) if cache.root is not None else None
        write_explorer(stage, corpus=spec.corpus, manifest=man, reuse=reuse, inputs=given)
    man[RELEASE_FILES_FIELD] = release_listing(stage)
    write_json_atomic(stage / "manifest.json", man)
    got = gate(stage, features_by_config=features, splits_by_config=splits, default_config=default_config,
               cache_dir=spec.scratch_dir(), cache=cache)
    swap_into_place(stage, out_dir)
    _remove_empty_build(out_dir)
    for c, (out_key, by_split) in done.outputs.items():
        if c in got:
            record_outputs(cache, out_key, out_dir, c, by_split, fingerprints[c], got[c])
    cache.prune()
    return got
