"""The release gate (docs/publishing.md, "The release folder"): a release folder is complete and loads back offline as
declared, checked from its files' footers and ``datasets``' own resolution of the folder, in seconds at any size.

``split_info`` (a split's ``SplitInfo`` from its shards' footers), ``split_sizes`` (the same figures without
``datasets``) and ``check_layout`` (configs, splits and default agree) are shared with the card writer
(``builders.release.card``).

``datasets``' resolution of the folder (step 4 of ``gate``) is a function of the README's YAML header less its figures
(fingerprints, sizes, row counts), the names of the release's files, what the gate expects and the library versions
(``resolution_key``). With a release cache (``builders.release.cache``) a passed resolution is recorded under that key,
and a later release with the same key is not resolved again: every other check runs on every file as before, and a
release whose features need decoding is always resolved. That gate imports no ``datasets`` (half a second).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from .writer import shard_name, split_shards

if TYPE_CHECKING:  # datasets (0.5 s to import) only where the gate resolves the folder
    from datasets import Features, SplitInfo

    from .cache import ReleaseCache

__all__ = ["ReleaseGateError", "check_layout", "gate", "quiet_progress", "resolution_key", "split_info",
           "split_sizes"]


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


def split_sizes(root: str | os.PathLike, config: str, split: str) -> tuple[int, int]:
    """``(num_examples, num_bytes)`` of a split from its shards' footers (``split_info`` without ``datasets``).

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
    return (sum(m.num_rows for m in mds),
            sum(m.row_group(j).total_byte_size for m in mds for j in range(m.num_row_groups)))


def split_info(root: str | os.PathLike, config: str, split: str) -> SplitInfo:
    """``SplitInfo`` computed from the shard files on disk (docs/publishing.md); see ``split_sizes``."""
    from datasets import SplitInfo

    num_examples, num_bytes = split_sizes(root, config, split)
    return SplitInfo(name=split, num_examples=num_examples, num_bytes=num_bytes)


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


def _full(features: Any) -> Features:
    """The ``datasets.Features`` of a config (``LightFeatures`` stand for them: converted, importing ``datasets``)."""
    return features.full() if hasattr(features, "full") else features


def _decodes(features: Any) -> bool:
    """Whether a column of the features needs decoding (``Image``, ``Audio``...): its first row is then decoded by
    ``datasets`` in every gate."""
    if hasattr(features, "decodes"):
        return bool(features.decodes)
    from datasets.features.features import require_decoding

    return any(require_decoding(f) for f in features.values())


_GATE_CODE: list[str] = []


def _readme_header(readme: Path) -> Any:
    """The README's YAML header as data (``None`` when it has none)."""
    import yaml

    text = readme.read_text(encoding="utf-8")
    if not text.startswith("---\n") or (end := text.find("\n---\n", 3)) < 0:
        return None
    return yaml.load(text[4:end], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader


def _masked(header: Any) -> Any:
    """The YAML header less its figures: the configs' fingerprints, the splits' sizes and row counts, the size
    category (values ``datasets`` reads into nothing the gate checks), each replaced by its type."""
    import copy
    import re

    if not isinstance(header, dict):
        return header
    h = copy.deepcopy(header)
    if isinstance(h.get("size_categories"), list):
        h["size_categories"] = [type(v).__name__ for v in h["size_categories"]]

    def entries(v: Any) -> list[Any]:
        return [e for e in (v if isinstance(v, list) else [v]) if isinstance(e, dict)]

    for e in entries(h.get("configs")):
        if isinstance(e.get("description"), str):
            e["description"] = re.sub(r"sha256:[0-9a-f]{64}", "sha256:*", e["description"])
    for e in entries(h.get("dataset_info")):
        for k in ("dataset_size", "download_size"):
            if k in e:
                e[k] = type(e[k]).__name__
        for sp in entries(e.get("splits")):
            for k in ("num_bytes", "num_examples"):
                if k in sp:
                    sp[k] = type(sp[k]).__name__
    return h


def _listing(root: Path, configs: Mapping[str, Any]) -> list[Any]:
    """What ``datasets`` may read of the folder besides the README: every top-level name (hidden ones too: a
    ``.huggingface.yaml`` counts) and every path inside the config folders."""
    out: list[Any] = sorted([p.name, p.is_dir()] for p in root.iterdir())
    for cfg in sorted(configs):
        for dirpath, dirs, files in os.walk(root / cfg):
            dirs.sort()
            rel = Path(dirpath).relative_to(root).as_posix()
            out += [f"{rel}/{f}" for f in sorted(files)] + [f"{rel}/{d}/" for d in dirs]
    return out


def resolution_key(root: str | os.PathLike, features_by_config: Mapping[str, Any],
                   splits_by_config: Mapping[str, list[str]], default_config: str) -> str | None:
    """The key of ``datasets``' resolution of the release folder ``root`` as the gate checks it (step 4): the README's
    YAML header less its figures, the names of the files ``datasets`` may read, the expected configs, splits, default
    and features, the library versions and this module's source. ``None`` when the README has no YAML header."""
    import hashlib

    from .cache import ReleaseCache, lib_versions

    root = Path(root)
    header = _readme_header(root / "README.md")
    if header is None:
        return None
    if not _GATE_CODE:
        _GATE_CODE.append(hashlib.sha256(Path(__file__).read_bytes()).hexdigest())
    return ReleaseCache.key("gate", _masked(header), _listing(root, splits_by_config),
                            {c: list(s) for c, s in splits_by_config.items()}, default_config,
                            {c: f.to_dict() for c, f in features_by_config.items()}, lib_versions(), _GATE_CODE[0])


def _first_rows(root: Path, features_by_config: Mapping[str, Any], splits_by_config: Mapping[str, list[str]],
                shard_files: Mapping[str, Mapping[str, set[str]]]) -> None:
    """Step 5 for features that need no decoding (``decode_example`` returns a row as it is): the first row of every
    split reads and holds exactly the declared fields, in their order."""
    for cfg, splits in splits_by_config.items():
        want = list(features_by_config[cfg])
        for s in splits:
            first_shard = root / cfg / shard_name(s, 0, len(shard_files[cfg][s]))
            try:
                row = next(pq.ParquetFile(first_shard).iter_batches(batch_size=1)).to_pylist()[0]
            except Exception as e:  # noqa: BLE001
                raise ReleaseGateError(f"{cfg}/{s}: the first row does not decode: {type(e).__name__}: {e}") from e
            extra = [k for k in row if k not in want]
            if extra:
                raise ReleaseGateError(f"{cfg}/{s}: the first row does not decode: KeyError: {extra[0]!r}")
            if [k for k in want if k in row] != want:
                raise ReleaseGateError(f"{cfg}/{s}: the first row has fields {[k for k in want if k in row]}")


def gate(
    root: str | os.PathLike,
    *,
    features_by_config: Mapping[str, Features],
    splits_by_config: Mapping[str, list[str]],
    default_config: str,
    cache_dir: str | os.PathLike | None = None,
    cache: ReleaseCache | None = None,
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

    With a release ``cache`` (``builders.release.cache``), step 4 is skipped when a resolution of the same
    ``resolution_key`` passed before and no feature needs decoding (step 5 then reads the first rows without
    ``datasets``); a resolution that passes is recorded. Steps 1 to 3 always run on every shard.
    ``features_by_config`` may hold ``LightFeatures`` (``builders.release.light``).
    """
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
        expected[cfg] = {s: split_sizes(root, cfg, s)[0] for s in splits}
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

    key = resolution_key(root, features_by_config, splits_by_config, default_config) if cache else None
    decodes = any(_decodes(f) for f in features_by_config.values())
    if key is not None and not decodes and cache is not None and cache.get("gate", key) is not None:
        _first_rows(root, features_by_config, splits_by_config, shard_files)
        return {c: dict(sp) for c, sp in expected.items()}
    _resolve(root, {c: _full(f) for c, f in features_by_config.items()}, splits_by_config, default_config,
             shard_files, cache_dir)
    if key is not None and cache is not None:
        cache.put("gate", key, {"resolved": True})
    return {c: dict(sp) for c, sp in expected.items()}


def _resolve(root: Path, features_by_config: Mapping[str, Features], splits_by_config: Mapping[str, list[str]],
             default_config: str, shard_files: Mapping[str, Mapping[str, set[str]]],
             cache_dir: str | os.PathLike | None) -> None:
    """Steps 4 and 5 of ``gate``, with ``datasets``."""
    from datasets import get_dataset_config_names, load_dataset_builder
    from datasets.inspect import get_dataset_default_config_name

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
