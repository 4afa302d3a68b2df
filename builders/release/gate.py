"""The release gate (docs/publishing.md, "The release folder"): a release folder is complete and loads back offline as
declared, checked from its files' footers and ``datasets``' own resolution of the folder, in seconds at any size.

``split_info`` (a split's ``SplitInfo`` from its shards' footers) and ``check_layout`` (configs, splits and default
agree) are shared with the card writer (``builders.release.card``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Features, SplitInfo

from .writer import shard_name, split_shards

__all__ = ["ReleaseGateError", "check_layout", "gate", "quiet_progress", "split_info"]


class ReleaseGateError(RuntimeError):
    """A release folder is incomplete or does not load as declared (docs/publishing.md)."""


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """Silence datasets' progress bars inside the block and restore the previous setting."""
    import datasets.utils as ds_utils

    was_disabled = ds_utils.are_progress_bars_disabled()
    ds_utils.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            ds_utils.enable_progress_bars()


def split_info(root: str | os.PathLike, config: str, split: str) -> SplitInfo:
    """``SplitInfo`` computed from the shard files on disk (docs/publishing.md).

    Raises ``ReleaseGateError`` when the split has no shards, shards with different totals, or a missing index.
    """
    shards = split_shards(Path(root) / config, split)
    where = f"{config}/{split}"
    if not shards:
        raise ReleaseGateError(f"no shard files for {where} under {root}")
    if len(shards) != 1:
        raise ReleaseGateError(f"incomplete shard set {where}: several totals {sorted(shards)}")
    n, items = next(iter(shards.items()))
    indices = [i for i, _ in items]
    if indices != list(range(n)):
        missing = sorted(set(range(n)) - set(indices))
        raise ReleaseGateError(f"incomplete shard set {where}: n={n}, missing {missing}, found {indices}")
    mds = []
    for _, p in items:
        try:
            mds.append(pq.ParquetFile(p).metadata)
        except Exception as e:  # noqa: BLE001 - a shard whose footer does not read fails the gate, naming it
            raise ReleaseGateError(f"{config}/{p.name}: not a readable Parquet file: {type(e).__name__}: {e}") from e
    return SplitInfo(
        name=split,
        num_examples=sum(m.num_rows for m in mds),
        num_bytes=sum(m.row_group(j).total_byte_size for m in mds for j in range(m.num_row_groups)),
    )


def check_layout(
    features_by_config: Mapping[str, Features], splits_by_config: Mapping[str, list[str]], default_config: str
) -> None:
    if set(features_by_config) != set(splits_by_config):
        raise ValueError(
            f"features and splits name different configs: {sorted(features_by_config)} vs {sorted(splits_by_config)}"
        )
    if default_config not in features_by_config:
        raise ValueError(f"default config {default_config!r} is not among {sorted(features_by_config)}")
    if "data" in features_by_config:
        raise ValueError("config name 'data' is reserved by push_to_hub (docs/publishing.md)")
    for cfg, splits in splits_by_config.items():
        if not splits or len(set(splits)) != len(splits):
            raise ValueError(f"config {cfg!r} needs distinct, non-empty splits, got {splits}")


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` for the duration of the block, then restored (docs/publishing.md).

    The variable is read at import time, so the already-imported constants are switched as well.
    """
    import datasets.config as ds_config
    from huggingface_hub import constants as hub_constants

    old_env = os.environ.get("HF_HUB_OFFLINE")
    old_ds, old_hub = ds_config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"] = "1"
    ds_config.HF_HUB_OFFLINE = True
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env
        ds_config.HF_HUB_OFFLINE = old_ds
        hub_constants.HF_HUB_OFFLINE = old_hub


@contextlib.contextmanager
def _resolve_once() -> Iterator[None]:
    """The gate resolves one local folder seven times (its config names, its default, each config's builder), and
    ``datasets`` re-reads and re-resolves the folder (README YAML, data-file patterns) on every call: 0.1 s each.
    For the duration of the block the folder's ``DatasetModule`` is resolved once per set of arguments and each
    caller gets a deep copy (``load_dataset_builder`` pops keys from the module's ``builder_kwargs``), so each
    caller still sees exactly what its own resolution would return. Where ``datasets`` has moved the function, the
    block does nothing (every call resolves)."""
    import copy

    import datasets.inspect as ds_inspect
    import datasets.load as ds_load

    original = getattr(ds_load, "dataset_module_factory", None)
    if original is None or getattr(ds_inspect, "dataset_module_factory", None) is not original:
        yield
        return
    resolved: dict[str, Any] = {}

    def once(path: str, **kwargs: Any) -> Any:
        key = repr((path, sorted(kwargs.items(), key=lambda kv: kv[0])))
        if key not in resolved:
            resolved[key] = original(path, **kwargs)
        return copy.deepcopy(resolved[key])

    ds_load.dataset_module_factory = ds_inspect.dataset_module_factory = once
    try:
        yield
    finally:
        ds_load.dataset_module_factory = ds_inspect.dataset_module_factory = original


def gate(
    root: str | os.PathLike,
    *,
    features_by_config: Mapping[str, Features],
    splits_by_config: Mapping[str, list[str]],
    default_config: str,
    cache_dir: str | os.PathLike | None = None,
) -> dict[str, dict[str, int]]:
    """The release gate of docs/publishing.md. Returns ``{config: {split: num_rows}}``.

    1. every ``<split>-{i:05d}-of-{n:05d}.parquet`` exists for ``i`` in ``0..n-1``, one ``n`` per split, and no split
       is empty;
    2. nothing else non-hidden sits in a config folder (a leftover ``*.parquet.tmp`` would be read as data);
    3. every shard's Arrow schema, read from its Parquet footer, is the declared features' schema (the types
       ``datasets``' Parquet builder casts to: a shard that would not load fails here);
    4. under ``HF_HUB_OFFLINE=1``, ``datasets`` resolves the folder as a user's ``load_dataset(<root>, cfg)`` would:
       the config names are exactly the expected ones, the default config is ``default_config``, and for every config
       the builder's features are the declared ones and its data files are exactly the shards of each split;
    5. the first row of every split decodes with the loaded features (``Features.decode_example``).
    Raises ``ReleaseGateError`` naming the first failure.

    Row counts come from the Parquet footers. Nothing is converted to Arrow files and no split is read in full, so the
    gate costs seconds and a few MB at any release size (the conversion ``load_dataset`` does on first use grew the
    build's memory and time with the corpus). ``cache_dir`` holds ``datasets``' small module cache (a fresh temp
    folder inside it, removed afterwards; the system temp folder by default).
    """
    from datasets import get_dataset_config_names, load_dataset_builder
    from datasets.inspect import get_dataset_default_config_name

    check_layout(features_by_config, splits_by_config, default_config)
    root = Path(root).resolve()  # an absolute path forces a local load (docs/publishing.md)
    if not (root / "README.md").is_file():
        raise ReleaseGateError(f"{root} has no README.md")

    expected: dict[str, dict[str, int]] = {}
    shard_files: dict[str, dict[str, set[str]]] = {}
    for cfg, splits in splits_by_config.items():
        folder = root / cfg
        if not folder.is_dir():
            raise ReleaseGateError(f"config folder {folder} is missing")
        expected[cfg] = {s: split_info(root, cfg, s).num_examples for s in splits}
        empty = [s for s, k in expected[cfg].items() if k == 0]
        if empty:
            raise ReleaseGateError(
                f"{cfg}: split(s) {empty} have 0 rows; load_dataset cannot load an empty split "
                "('Instruction ... corresponds to no data'): leave them out of splits_by_config and delete their shards"
            )
        shard_files[cfg] = {s: {p.name for ps in split_shards(folder, s).values() for _, p in ps} for s in splits}
        allowed = set().union(*shard_files[cfg].values())
        strays = sorted(p.name for p in folder.iterdir() if not p.name.startswith(".") and p.name not in allowed)
        if strays:
            raise ReleaseGateError(f"unexpected non-hidden entries in {cfg}/: {strays}")
        want = features_by_config[cfg].arrow_schema
        for name in sorted(allowed):
            try:
                got_schema = pq.read_schema(folder / name)
            except Exception as e:  # noqa: BLE001 - an unreadable footer fails the gate
                raise ReleaseGateError(f"{cfg}/{name}: not a readable Parquet file: {type(e).__name__}: {e}") from e
            if not got_schema.remove_metadata().equals(want.remove_metadata()):
                raise ReleaseGateError(f"{cfg}/{name}: its schema differs from the features:\n"
                                       f"  file:     {got_schema.remove_metadata()}\n  expected: {want.remove_metadata()}")

    with quiet_progress(), _hub_offline(), _resolve_once(), tempfile.TemporaryDirectory(
            prefix="release-gate-", dir=None if cache_dir is None else str(cache_dir)) as gate_cache:
        try:
            names = sorted(get_dataset_config_names(str(root)))
            default = get_dataset_default_config_name(str(root))
        except Exception as e:  # noqa: BLE001 - any failure to resolve the folder fails the gate
            raise ReleaseGateError(f"cannot resolve configs of {root}: {type(e).__name__}: {e}") from e
        if names != sorted(splits_by_config):
            raise ReleaseGateError(f"README configs {names} != expected {sorted(splits_by_config)}")
        if default != default_config:
            raise ReleaseGateError(f"default config is {default!r}, expected {default_config!r}")
        for cfg, splits in splits_by_config.items():
            try:
                builder = load_dataset_builder(str(root), cfg, cache_dir=gate_cache)
            except Exception as e:  # noqa: BLE001
                raise ReleaseGateError(f"load_dataset({str(root)!r}, {cfg!r}) failed: {type(e).__name__}: {e}") from e
            if builder.info.features != features_by_config[cfg]:
                raise ReleaseGateError(f"{cfg}: loaded features differ from the schema:\n"
                                       f"  loaded:   {builder.info.features}\n  expected: {features_by_config[cfg]}")
            data_files = builder.config.data_files or {}
            if sorted(data_files) != sorted(splits):
                raise ReleaseGateError(f"{cfg}: loaded splits {sorted(data_files)} != expected {sorted(splits)}")
            for s in splits:
                resolved = {Path(str(f)).name for f in data_files[s]}
                if resolved != shard_files[cfg][s]:
                    raise ReleaseGateError(f"{cfg}/{s}: the loader resolves {sorted(resolved)}, "
                                           f"the release holds {sorted(shard_files[cfg][s])}")
                first_shard = root / cfg / shard_name(s, 0, len(shard_files[cfg][s]))
                try:
                    batch = next(pq.ParquetFile(first_shard).iter_batches(batch_size=1))
                    first = builder.info.features.decode_example(batch.to_pylist()[0])
                except Exception as e:  # noqa: BLE001
                    raise ReleaseGateError(f"{cfg}/{s}: the first row does not decode: {type(e).__name__}: {e}") from e
                if list(first) != list(features_by_config[cfg]):
                    raise ReleaseGateError(f"{cfg}/{s}: the first row has fields {list(first)}")
            del builder
    return {c: dict(sp) for c, sp in expected.items()}
