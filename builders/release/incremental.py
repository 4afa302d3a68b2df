"""What a rewrite of the release takes from the release cache (``builders.release.cache``) instead of redoing it
(README.md "Caching and resume"; issue 19, the edit rerun): the features of a corpus without importing ``datasets``
(``cached_features``), the Parquet shards of a config whose parts did not change (``reuse_outputs``, recorded by
``record_outputs`` once a release is in place), and the README's YAML header (``write_card``). ``write_configs``
writes the configs' shards, reusing what it can.

Each of them gives the bytes the full path would give: features are the same records, reused shards are the files of
the release in place that an identical write produced (linked, or copied where a link is not possible, after their
size, mtime and inode were found unchanged since that write), a README is rendered from a skeleton only once the
skeleton rendered the very bytes ``write_readme`` wrote.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..core.atomic import atomic_write_bytes
from .cache import ReleaseCache, file_identity, lib_versions
from .light import LIGHT_FORMAT, LightFeatures, feature_record

__all__ = ["ConfigsWritten", "cached_features", "features_key", "record_outputs", "reuse_outputs", "write_card",
           "write_configs"]


def features_key(corpus: str, code: Any, features: Any) -> str:
    """The key of a corpus's features (and of its README skeleton): its release code and loading script (``code``,
    ``flow.code_key``), the features themselves when they are not lazy, the library versions."""
    eager = None if callable(features) else {c: f.to_dict() if hasattr(f, "to_dict") else str(f)
                                             for c, f in features.items()}
    return ReleaseCache.key("features", LIGHT_FORMAT, corpus, code, eager, lib_versions())


def cached_features(cache: ReleaseCache, key: str, make: Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
    """The features by config: ``LightFeatures`` from the record under ``key``, else ``make()`` (which imports
    ``datasets``), recorded when every config's features can be."""
    record = cache.get("features", key)
    if isinstance(record, dict) and isinstance(record.get("order"), list):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return {c: LightFeatures(record["configs"][c]) for c in record["order"]}
    features = make()
    if cache:
        records = {c: feature_record(f) if hasattr(f, "arrow_schema") else None for c, f in features.items()}
        if all(r is not None for r in records.values()):
            cache.put("features", key, {"order": list(features), "configs": records})
    return features


# ------------------------------------------------------------------------------------------- reused Parquet shards


def outputs_key(config: str, parts: list[Path], features: Any, splits: tuple[str, ...], code: Any) -> str:
    """The key of a config's shards written from ``parts``: the parts' contents (``part_digests``: a part made again
    from rows that did not change keeps its key), the features, the splits, the release code and the library versions
    that write them."""
    from .parts import part_digests

    return ReleaseCache.key("outputs", config, part_digests(parts), features.to_dict(), list(splits), code,
                            lib_versions())


def reuse_outputs(cache: ReleaseCache, key: str, release: Path, stage: Path, config: str
                  ) -> tuple[dict[str, list[Path]], dict[str, Any]] | None:
    """The shards of ``config`` taken from the release in place into ``stage`` when the record under ``key`` names
    them and every one still has the size, mtime and inode it had when written: ``({split: paths}, record)``;
    ``None`` (nothing taken) otherwise."""
    record = cache.get("outputs", key) if cache else None
    if not (isinstance(record, dict) and isinstance(record.get("files"), dict) and record["files"]
            and isinstance(record.get("splits_of"), dict) and set(record["splits_of"]) == set(record["files"])
            and isinstance(record.get("fingerprint"), str)):
        return None
    try:
        for rel, st in record["files"].items():
            if rel.split("/", 1)[0] != config or file_identity(release / rel) != st:
                return None
    except OSError:
        return None
    (stage / config).mkdir(parents=True, exist_ok=True)
    by_split: dict[str, list[Path]] = {}
    for rel in sorted(record["files"]):
        target = stage / rel
        try:
            os.link(release / rel, target)
        except OSError:
            shutil.copyfile(release / rel, target)
        by_split.setdefault(record["splits_of"][rel], []).append(target)
    return by_split, record


def record_outputs(cache: ReleaseCache, key: str, release: Path, config: str, by_split: Mapping[str, list[Path]],
                   fingerprint: str, rows: Mapping[str, int]) -> None:
    """Record the shards of ``config`` as they are now in the release in place (after the swap)."""
    if not cache:
        return
    files, splits_of = {}, {}
    with contextlib.suppress(OSError):
        for split, paths in by_split.items():
            for p in paths:
                rel = f"{config}/{p.name}"
                files[rel], splits_of[rel] = file_identity(release / rel), split
        cache.put("outputs", key, {"files": files, "splits_of": splits_of, "fingerprint": fingerprint,
                                   "rows": dict(rows)})


# ------------------------------------------------------------------------------------------------------ the README


def write_card(stage: Path, cache: ReleaseCache, key: str | None, *, features_by_config: Mapping[str, Any],
               splits_by_config: Mapping[str, list[str]], default_config: str, card: Any,
               title: str, body: str, fingerprints: Mapping[str, str]) -> dict[str, str]:
    """Write ``stage/README.md``: from the skeleton recorded under the README key (``key``, the card fields when they
    are not lazy, the layout) when there is one, else with ``write_readme`` (``datasets``), recording its skeleton
    when it renders those very bytes. ``card`` is the card fields or a zero-arg callable returning them (a lazy card
    is keyed by ``key``, like lazy features). Returns the configs' fingerprints."""
    from .card import readme_figures, readme_skeleton, render_readme
    from .gate import check_layout

    check_layout(features_by_config, splits_by_config, default_config)
    figures = readme_figures(stage, splits_by_config, fingerprints)
    readme_key = (ReleaseCache.key("readme", key, None if callable(card) else card,
                                   {c: list(s) for c, s in splits_by_config.items()}, default_config)
                  if key is not None and cache else None)
    skeleton = cache.get("readme", readme_key) if readme_key else None
    if isinstance(skeleton, dict):
        with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
            content = render_readme(skeleton, figures, title=title, body=body)
            atomic_write_bytes(stage / "README.md", content.encode("utf-8"))
            return {c: f["fingerprint"] for c, f in figures.items()}
    from .card import write_readme

    path = write_readme(stage, features_by_config=features_by_config, splits_by_config=splits_by_config,
                        default_config=default_config, card=card() if callable(card) else card, title=title, body=body,
                        fingerprints={c: f["fingerprint"] for c, f in figures.items()})
    if readme_key:
        content = path.read_text(encoding="utf-8")
        skeleton = readme_skeleton(content, splits_by_config)
        if skeleton is not None and render_readme(skeleton, figures, title=title, body=body) == content:
            cache.put("readme", readme_key, skeleton)
    return {c: f["fingerprint"] for c, f in figures.items()}


# ------------------------------------------------------------------------------------------ the configs' shards


@dataclass
class ConfigsWritten:
    """What ``write_configs`` wrote: the splits and row counts of each config (in the order of the configs, then of
    the splits), and for the configs written from parts their parts, their outputs key and shards by split
    (``record_outputs``) and the fingerprints of those whose shards were reused."""

    splits: dict[str, list[str]] = field(default_factory=dict)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    outputs: dict[str, tuple[str, dict[str, list[Path]]]] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    parts: dict[str, list[Path]] = field(default_factory=dict)   # the parts of each config written from parts


def write_configs(stage: Path, release: Path, rows: Mapping[str, Any], features: Mapping[str, Any],
                  split_order: tuple[str, ...], code: Any, cache: ReleaseCache, parts_stats: Any,
                  meanwhile: Callable[[], None] = lambda: None) -> ConfigsWritten:
    """Write the Parquet shards of every config of ``rows`` (in the order of ``features``) into ``stage``.

    A config given as ``ShardedRows`` goes through its parts (``build_parts``); its shards are taken from the release
    in place (``release``) when an identical write made them (``reuse_outputs``), else written from the parts in a
    background thread (Arrow and Parquet work, which holds no GIL) while this thread makes the next config's parts,
    encodes the streamed configs and then runs ``meanwhile`` (work of the caller that needs no shard). Each file is
    written by one thread, in order: the bytes do not depend on the threads.
    """
    from .parts import ShardedRows, build_parts, split_tables
    from .writer import write_split_stream, write_split_tables

    out = ConfigsWritten()
    pending: list[tuple[str, str, Future | list[Path]]] = []
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="release-shards")
    try:
        for c in [c for c in features if c in rows]:
            by_split, feats = rows[c], features[c]
            parts = (build_parts(by_split, c, feats, split_order, code, parts_stats)
                     if isinstance(by_split, ShardedRows) else None)
            reused: dict[str, list[Path]] = {}
            if parts is not None:
                out.parts[c] = parts
            if parts is not None and cache:
                key = outputs_key(c, parts, feats, split_order, code)
                found = reuse_outputs(cache, key, release, stage, c)
                if found is not None:
                    reused, record = found
                    out.fingerprints[c] = record["fingerprint"]
                out.outputs[c] = (key, {})
            for s in split_order:
                if s in reused:
                    pending.append((c, s, reused[s]))
                elif parts is not None:
                    if c not in out.fingerprints:
                        pending.append((c, s, pool.submit(write_split_tables, stage, c, s,
                                                          split_tables(parts, s, feats), feats, keep_empty=False)))
                elif (source := by_split.get(s)) is not None:
                    pending.append((c, s, write_split_stream(stage, c, s, source, feats, keep_empty=False)))
        meanwhile()
        for c, s, got in pending:
            paths = got.result() if isinstance(got, Future) else got
            if paths:
                if c in out.outputs:
                    out.outputs[c][1][s] = paths
                out.splits.setdefault(c, []).append(s)
                out.rows.setdefault(c, {})[s] = sum(pq.ParquetFile(p).metadata.num_rows for p in paths)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out
