"""The one release flow every corpus goes through (specs/releases.md §1, §4-§6; ARCHITECTURE.md "Release").

A corpus builds its rows per config and split, its quantities and card context, and calls :func:`write_release`,
which writes, in a hidden staging folder beside the release:

    statistics (drops, counters, per-step stats) -> drops.parquet (checked against the statistics) -> manifest.json
    and build_config.yaml (input paths relative to their common root, with content fingerprints: no absolute path or
    user name) -> Parquet shards -> extra files -> stats.json -> README.md (card) -> report.html -> the gate
    (load_dataset of every config) -> swap into place (the old release stays until the new one is in place).

A build where nothing survives writes its statistics to ``<out>/<corpus>.empty-build/``, beside (never over) the last
release, and raises :class:`BuildEmpty` (exit 3).
"""

from __future__ import annotations

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
from ..release import (
    gate,
    git_commit,
    publish,
    render_card,
    stage_release,
    write_drops,
    write_json_atomic,
    write_readme,
    write_split,
)
from .atomic import atomic_path, atomic_write_bytes, atomic_write_text
from .config import to_dict
from .fingerprint import relative_paths
from .orchestrate import BuildResult


class BuildEmpty(RuntimeError):
    """Nothing survived the pipelines: statistics are written beside the last release, which is kept (exit 3)."""


@dataclass
class ReleaseSpec:
    """What a corpus hands the release flow."""

    corpus: str
    title: str                                            # README title
    report_title: str
    features: Mapping[str, Any]                           # config -> datasets.Features
    default_config: str
    card: Mapping[str, Any]                               # card YAML fields (license, task_categories, ...)
    card_template: Path
    split_order: tuple[str, ...]
    rows: dict[str, dict[str, list[dict[str, Any]]]]      # config -> split -> rows
    empty: str = ""                                       # non-empty: nothing survived, and why
    stats_extra: dict[str, Any] = field(default_factory=dict)
    models: dict[str, Any] = field(default_factory=dict)  # the manifest's "models"
    card_context: Callable[[dict[str, Any], dict[str, Any]], Mapping[str, Any]] = lambda stats, man: {}
    report_videos: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, Path | bytes | str] = field(default_factory=dict)   # extra files, relative to the release root
    input_keys: tuple[str, ...] = ()                      # config keys holding input paths


def _as_list(v: Any) -> list[str]:
    return [str(x) for x in ([v] if isinstance(v, (str, os.PathLike)) else list(v or [])) if x]


def portable_inputs(cfg: Any, input_keys: tuple[str, ...],
                    fingerprints: Mapping[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and the input fingerprints with every input path made relative to the inputs' common root."""
    conf = to_dict(cfg)
    paths = [p for k in input_keys for p in _as_list(conf.get(k))]
    paths += [f["path"] for fps in fingerprints.values() for f in fps]
    rel = relative_paths(paths)
    for k in input_keys:
        v = conf.get(k)
        if isinstance(v, str) and v:
            conf[k] = rel[v]
        elif isinstance(v, list):
            conf[k] = [rel[str(x)] for x in v]
    fps = {stage: [{**f, "path": rel[f["path"]]} for f in items] for stage, items in fingerprints.items()}
    return conf, fps


def _write_report(path: Path, title: str, stats: dict[str, Any], videos: list[dict[str, Any]]) -> None:
    from .report import write_report

    write_report(path, title=title, stats=stats, videos=videos)


def write_release(result: BuildResult, cfg: Any, out_dir: Path, info: dict[str, Any],
                  spec: ReleaseSpec) -> dict[str, dict[str, int]]:
    """Write, gate and publish the release of ``spec`` at ``out_dir``; returns ``{config: {split: rows}}``."""
    out_dir = Path(out_dir)
    stage = stage_release(out_dir)
    stats: dict[str, Any] = {
        "corpus": spec.corpus,
        "drops": dict(sorted(result.drop_counts().items())),
        "counters": dict(sorted(result.counters().items())),
        "steps": {k: v.as_dict() for k, v in result.steps.items()},
        "build": {k: v for k, v in info.items() if k != "work_dir"},
        "release": {},
        **spec.stats_extra,
    }
    n_drops = write_drops(stage / "drops.parquet", result)
    if n_drops != sum(stats["drops"].values()):  # an invariant of the runner: fail loudly, even under python -O
        raise RuntimeError(f"drops.parquet has {n_drops} rows but stats.json counts {sum(stats['drops'].values())}")
    conf, inputs = portable_inputs(cfg, spec.input_keys, result.input_fingerprints)
    man = {
        "corpus": spec.corpus, "toolkit_version": TOOLKIT_VERSION, "git_commit": git_commit(),
        "config": conf, "inputs": inputs, "sample": info["sample"], "models": spec.models,
        "runtime": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "engine": info["engine"], "workers": info["workers"], "shard_size": info["shard_size"]},
    }
    write_json_atomic(stage / "manifest.json", man)
    atomic_write_text(stage / "build_config.yaml", yaml.safe_dump(conf, sort_keys=True))

    if spec.empty:
        write_json_atomic(stage / "stats.json", stats)
        _write_report(stage / "report.html", spec.report_title, stats, [])
        beside = out_dir.with_name(f"{out_dir.name}.empty-build")
        if beside.exists():
            shutil.rmtree(beside)
        os.replace(stage, beside)
        kept = f"; the last release in {out_dir} is untouched" if out_dir.exists() else ""
        raise BuildEmpty(f"{spec.empty}; statistics are in {beside}/stats.json{kept}")

    splits = {c: [s for s in spec.split_order if spec.rows[c].get(s)] for c in spec.rows}
    splits = {c: s for c, s in splits.items() if s}
    for c, sp in splits.items():
        for s in sp:
            write_split(stage, c, s, spec.rows[c][s], spec.features[c])
    stats["release"] = {c: {s: len(spec.rows[c][s]) for s in splits[c]} for c in splits}
    for rel, content in spec.files.items():
        target = stage / rel
        if not target.resolve().is_relative_to(stage.resolve()):
            raise ValueError(f"release file {rel!r} escapes the release folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            with atomic_path(target) as tmp:
                shutil.copyfile(content, tmp)
        elif isinstance(content, bytes):
            atomic_write_bytes(target, content)
        else:
            atomic_write_text(target, content)
    write_json_atomic(stage / "stats.json", stats)
    features = {c: spec.features[c] for c in splits}
    body = render_card(spec.card_template, spec.card_context(stats, man))
    write_readme(stage, features_by_config=features, splits_by_config=splits, default_config=spec.default_config,
                 card=spec.card, title=spec.title, body=body)
    _write_report(stage / "report.html", spec.report_title, stats, spec.report_videos)
    got = gate(stage, features_by_config=features, splits_by_config=splits, default_config=spec.default_config)
    publish(stage, out_dir)
    stale = out_dir.with_name(f"{out_dir.name}.empty-build")
    if stale.exists():
        shutil.rmtree(stale)
    return got
