"""Write a release folder: Parquet shards per config and split, the README with ``configs:`` and
``dataset_info:``, and the release gate that loads it back offline (specs/releases.md §1, §4-§6).

Layout (releases.md §1)::

    <root>/README.md
    <root>/<config>/<split>-00000-of-00002.parquet
    <root>/<config>/<split>-00001-of-00002.parquet

Publishing to the Hub is not done here.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import string
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Dataset, Features, SplitDict, SplitInfo
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.table import embed_table_storage
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from .core.atomic import atomic_path, atomic_write_bytes, atomic_write_json

__all__ = [
    "FINGERPRINT_FIELD",
    "ReleaseGateError",
    "config_fingerprint",
    "gate",
    "render_card",
    "shard_name",
    "size_category",
    "split_info",
    "write_json_atomic",
    "write_readme",
    "write_split",
]

_SHARD_RE = re.compile(r"^(?P<split>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.parquet$")


class ReleaseGateError(RuntimeError):
    """A release folder is incomplete or does not load as declared (releases.md §5)."""


def shard_name(split: str, i: int, n: int) -> str:
    """Deterministic shard file name ``<split>-{i:05d}-of-{n:05d}.parquet`` (releases.md §1)."""
    return f"{split}-{i:05d}-of-{n:05d}.parquet"


def _split_shards(folder: Path, split: str) -> dict[int, list[tuple[int, Path]]]:
    """Shard files of ``split`` in ``folder``, grouped by their total ``n``: ``{n: [(i, path), ...]}``."""
    found: dict[int, list[tuple[int, Path]]] = {}
    if not folder.is_dir():
        return found
    for p in folder.iterdir():
        m = _SHARD_RE.match(p.name)
        if m and m["split"] == split and p.is_file():
            found.setdefault(int(m["n"]), []).append((int(m["i"]), p))
    for v in found.values():
        v.sort()
    return found


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence datasets' progress bars inside the block and restore the previous setting."""
    import datasets.utils as ds_utils

    was_disabled = ds_utils.are_progress_bars_disabled()
    ds_utils.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            ds_utils.enable_progress_bars()


def _to_dataset(rows: list[dict], features: Features) -> Dataset:
    """``Dataset.from_list`` with the declared features; an empty list gives an empty table with the schema."""
    if not rows:
        return Dataset.from_dict({k: [] for k in features}, features=features)
    return Dataset.from_list(rows, features=features)


def _check_rows(rows: list[dict], features: Features) -> None:
    """Every row must have exactly the declared top-level fields (ARCHITECTURE.md: rows match the Features)."""
    want = set(features)
    for idx, row in enumerate(rows):
        keys = set(row)
        if keys != want:
            raise ValueError(
                f"row {idx} does not match the features: missing {sorted(want - keys)}, unexpected {sorted(keys - want)}"
            )


def write_split(
    root: str | os.PathLike,
    config: str,
    split: str,
    rows: list[dict],
    features: Features,
    max_rows_per_shard: int = 50_000,
    resume: bool = False,
) -> list[Path]:
    """Write ``rows`` as ``<root>/<config>/<split>-{i:05d}-of-{n:05d}.parquet`` (releases.md §6).

    ``n = max(1, ceil(len(rows) / max_rows_per_shard))`` is fixed before writing and shard ``i`` holds
    ``rows[i*max_rows_per_shard:(i+1)*max_rows_per_shard]``, so identical input gives byte-identical files.
    Each shard goes to a hidden ``.<name>.tmp`` and is renamed into place. An empty ``rows`` gives one valid,
    empty shard, but ``datasets`` cannot load an empty split, so ``gate`` rejects it: leave such a split out. With ``resume=True`` a shard whose final
    file exists is skipped. Shards of the same split with a different ``n`` (a stale earlier layout) are removed.
    Returns the shard paths in order.
    """
    if max_rows_per_shard < 1:
        raise ValueError(f"max_rows_per_shard must be >= 1, got {max_rows_per_shard}")
    if "/" in split or "/" in config or not split or not config:
        raise ValueError(f"bad config/split name {config!r}/{split!r}")
    _check_rows(rows, features)
    folder = Path(root) / config
    folder.mkdir(parents=True, exist_ok=True)
    size = max_rows_per_shard
    n = max(1, math.ceil(len(rows) / size))

    for other_n, shards in _split_shards(folder, split).items():
        if other_n != n:
            for _, p in shards:
                p.unlink()
    for p in folder.iterdir():  # temp files of an interrupted run with another layout
        if p.name.startswith(f".{split}-") and p.name.endswith(".parquet.tmp"):
            m = _SHARD_RE.match(p.name[1:-4])
            if m and m["split"] == split and int(m["n"]) != n:
                p.unlink()

    paths: list[Path] = []
    for i in range(n):
        final = folder / shard_name(split, i, n)
        paths.append(final)
        if resume and final.exists():
            continue
        tmp = folder / f".{final.name}.tmp"  # leading dot: invisible to data_files globs
        with _quiet():
            ds = _to_dataset(rows[i * size : (i + 1) * size], features)
            ds = ds.with_format("arrow").map(embed_table_storage, batched=True).with_format(None)
            ds.to_parquet(str(tmp))
        os.replace(tmp, final)
    return paths


def split_info(root: str | os.PathLike, config: str, split: str) -> SplitInfo:
    """``SplitInfo`` computed from the shard files on disk (releases.md §5).

    Raises ``ReleaseGateError`` when the split has no shards, shards with different totals, or a missing index.
    """
    shards = _split_shards(Path(root) / config, split)
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
    mds = [pq.ParquetFile(p).metadata for _, p in items]
    return SplitInfo(
        name=split,
        num_examples=sum(m.num_rows for m in mds),
        num_bytes=sum(m.row_group(j).total_byte_size for m in mds for j in range(m.num_row_groups)),
    )


_SIZE_CATEGORIES = [
    (10**3, "n<1K"),
    (10**4, "1K<n<10K"),
    (10**5, "10K<n<100K"),
    (10**6, "100K<n<1M"),
    (10**7, "1M<n<10M"),
    (10**8, "10M<n<100M"),
    (10**9, "100M<n<1B"),
    (10**10, "1B<n<10B"),
    (10**11, "10B<n<100B"),
    (10**12, "100B<n<1T"),
]


def size_category(num_rows: int) -> str:
    """The Hub's ``size_categories`` value for a total row count (releases.md §4)."""
    for bound, name in _SIZE_CATEGORIES:
        if num_rows < bound:
            return name
    return "n>1T"


def _check_layout(
    features_by_config: Mapping[str, Features], splits_by_config: Mapping[str, list[str]], default_config: str
) -> None:
    if set(features_by_config) != set(splits_by_config):
        raise ValueError(
            f"features and splits name different configs: {sorted(features_by_config)} vs {sorted(splits_by_config)}"
        )
    if default_config not in features_by_config:
        raise ValueError(f"default config {default_config!r} is not among {sorted(features_by_config)}")
    if "data" in features_by_config:
        raise ValueError("config name 'data' is reserved by push_to_hub (releases.md §1)")
    for cfg, splits in splits_by_config.items():
        if not splits or len(set(splits)) != len(splits):
            raise ValueError(f"config {cfg!r} needs distinct, non-empty splits, got {splits}")


FINGERPRINT_FIELD = "description"
"""The key of each ``configs:`` entry that carries the config's content fingerprint (see ``write_readme``)."""

_FINGERPRINT_PREFIX = "sha256:"


def config_fingerprint(root: str | os.PathLike, config: str, splits: list[str]) -> str:
    """``sha256:<hex>`` over the shard files of ``config`` as they are on disk, read back from the files.

    For each split in the given order and each of its shards in index order, the hash takes the shard's path
    relative to ``root`` (``<config>/<split>-{i:05d}-of-{n:05d}.parquet``), its size and its bytes, so a changed
    value, a renamed split or a different shard layout all give another fingerprint, and identical files the same one.
    The shard set must be complete (``split_info`` checks it).
    """
    root = Path(root)
    h = hashlib.sha256()
    for split in splits:
        split_info(root, config, split)  # raises ReleaseGateError on an incomplete shard set
        ((_, shards),) = _split_shards(root / config, split).items()
        for _, p in shards:
            h.update(f"{config}/{p.name}\0{p.stat().st_size}\0".encode())
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    return _FINGERPRINT_PREFIX + h.hexdigest()


def write_readme(
    root: str | os.PathLike,
    *,
    features_by_config: Mapping[str, Features],
    splits_by_config: Mapping[str, list[str]],
    default_config: str,
    card: Mapping[str, Any],
    title: str,
    body: str,
) -> Path:
    """Write ``<root>/README.md``: YAML header (card fields, ``configs:``, ``dataset_info:``) + title + body.

    Built with datasets' own helpers exactly as releases.md §4: ``MetadataConfigs`` (one config per folder, data_files
    ``<config>/<split>-*``, ``default: true`` on ``default_config``), ``DatasetInfosDict`` (features and split sizes
    from the files on disk, §5) and ``DatasetCardData``; ``size_categories`` from the total row count.
    The shards must be written first. Returns the README path.

    **Content fingerprint.** Each ``configs:`` entry gets ``description: "sha256:<hex>"``, the
    ``config_fingerprint`` of that config's shard files, read from disk. Why: ``datasets`` caches a local folder
    under ``<cache>/<folder name>/<config_id>/<version>/<hash>``, and for a folder whose README has ``configs:`` none
    of these depends on the files' contents. ``<hash>`` is ``Hasher.hash({"dataset_infos": ..., "builder_configs":
    ...})`` in ``LocalDatasetModuleFactory.get_module`` (``datasets/load.py``). The ``builder_configs`` there
    come from ``create_builder_configs_from_metadata_configs`` (same file) and hold the README's glob patterns
    (``DataFilesPatternsDict``), not the resolved files or their mtimes. ``dataset_infos`` is the README's
    ``dataset_info`` (features, split names, ``num_examples``, ``num_bytes``). ``<config_id>`` is
    ``BuilderConfig.create_config_id`` (``datasets/builder.py``), which is just the config name when no config kwargs
    are passed. So a rebuild with new values but the same schema and row counts gets the same cache path, and a warm
    cache returns the old rows. ``create_builder_configs_from_metadata_configs`` passes every ``configs:`` key that is
    an attribute of the builder's config class into that class. ``description`` is a field of
    ``datasets.BuilderConfig``, so it becomes ``ParquetConfig.description`` and goes into ``builder_configs``, and so
    into ``<hash>``. New contents therefore give a new cache folder, and identical files give the same README bytes, so
    the cache is reused. The key is stored as a ``configs:`` item, which ``DatasetCardData`` keeps (extra card keys are
    kept as attributes). Extra builder parameters in ``configs:`` entries (e.g. ``sep`` for CSV) are allowed by the
    Hub's card metadata, and ``description`` is a valid parameter of every builder config.
    ``dataset_info`` is not used for this, because ``DatasetInfo._to_yaml_dict`` writes only
    ``config_name``, sizes, ``features`` and ``splits``.
    """
    _check_layout(features_by_config, splits_by_config, default_config)
    root = Path(root)
    configs: dict[str, dict[str, Any]] = {}
    infos: dict[str, DatasetInfo] = {}
    total = 0
    for cfg, splits in splits_by_config.items():
        entry: dict[str, Any] = {"data_files": [{"split": s, "path": f"{cfg}/{s}-*"} for s in splits]}
        if cfg == default_config:
            entry["default"] = True
        sis = {s: split_info(root, cfg, s) for s in splits}
        entry[FINGERPRINT_FIELD] = config_fingerprint(root, cfg, splits)
        configs[cfg] = entry
        total += sum(si.num_examples for si in sis.values())
        infos[cfg] = DatasetInfo(features=features_by_config[cfg], splits=SplitDict(sis))
    card_fields = dict(card)
    card_fields["size_categories"] = [size_category(total)]
    cd = DatasetCardData(**card_fields)
    MetadataConfigs(configs).to_dataset_card_data(cd)
    DatasetInfosDict(infos).to_dataset_card_data(cd)
    content = DatasetCard(f"---\n{cd.to_yaml()}\n---\n\n# {title}\n\n{body.strip()}\n").content
    path = root / "README.md"
    atomic_write_bytes(path, content.encode("utf-8"))
    return path


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` for the duration of the block, then restored (releases.md §5, §9a).

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


def gate(
    root: str | os.PathLike,
    *,
    features_by_config: Mapping[str, Features],
    splits_by_config: Mapping[str, list[str]],
    default_config: str,
) -> dict[str, dict[str, int]]:
    """The release gate of releases.md §5, run before any upload. Returns ``{config: {split: num_rows}}``.

    1. every ``<split>-{i:05d}-of-{n:05d}.parquet`` exists for ``i`` in ``0..n-1``, one ``n`` per split;
    2. nothing else non-hidden sits in a config folder (a leftover ``*.parquet.tmp`` would be read as data);
    3. under ``HF_HUB_OFFLINE=1``, ``load_dataset(<root>, cfg)`` gives exactly the expected features, splits and
       row counts for every config, the config names are exactly the expected ones, and
       ``datasets.inspect.get_dataset_default_config_name(<root>)`` is ``default_config``.
    Raises ``ReleaseGateError`` naming the first failure.
    """
    from datasets import get_dataset_config_names, load_dataset
    from datasets.inspect import get_dataset_default_config_name

    _check_layout(features_by_config, splits_by_config, default_config)
    root = Path(root).resolve()  # an absolute path forces a local load (releases.md §7)
    if not (root / "README.md").is_file():
        raise ReleaseGateError(f"{root} has no README.md")

    expected: dict[str, dict[str, int]] = {}
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
        allowed = {p.name for s in splits for ps in _split_shards(folder, s).values() for _, p in ps}
        strays = sorted(p.name for p in folder.iterdir() if not p.name.startswith(".") and p.name not in allowed)
        if strays:
            raise ReleaseGateError(f"unexpected non-hidden entries in {cfg}/: {strays}")

    got: dict[str, dict[str, int]] = {}
    with _quiet(), _hub_offline(), tempfile.TemporaryDirectory(prefix="release-gate-") as cache_dir:
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
                dd = load_dataset(str(root), cfg, cache_dir=cache_dir)
            except Exception as e:  # noqa: BLE001
                raise ReleaseGateError(f"load_dataset({str(root)!r}, {cfg!r}) failed: {type(e).__name__}: {e}") from e
            if sorted(dd) != sorted(splits):
                raise ReleaseGateError(f"{cfg}: loaded splits {sorted(dd)} != expected {sorted(splits)}")
            got[cfg] = {}
            for s in splits:
                if dd[s].features != features_by_config[cfg]:
                    raise ReleaseGateError(
                        f"{cfg}/{s}: loaded features differ from the schema:\n"
                        f"  loaded:   {dd[s].features}\n  expected: {features_by_config[cfg]}"
                    )
                if dd[s].num_rows != expected[cfg][s]:
                    raise ReleaseGateError(f"{cfg}/{s}: loaded {dd[s].num_rows} rows, shards hold {expected[cfg][s]}")
                got[cfg][s] = dd[s].num_rows
            del dd
    return got


def render_card(template_path: str | os.PathLike, context: Mapping[str, Any]) -> str:
    """Fill a card template's ``$placeholders`` with ``string.Template.safe_substitute`` (no Jinja, releases.md §4).

    Unknown placeholders are left as they are; ``$$`` is a literal dollar sign.
    """
    template = string.Template(Path(template_path).read_text(encoding="utf-8"))
    return template.safe_substitute({k: str(v) for k, v in context.items()})


def compare_with_paper(values: Mapping[str, Any], paper: Mapping[str, float | None], cause: str,
                       notes: Mapping[str, str] | None = None, tolerance: float = 0.2) -> dict[str, dict[str, Any]]:
    """Each quantity of a build next to the paper's: ``{name: {"value", "paper", "flag"}}``, flagged when it deviates
    by more than ``tolerance`` (relative) with the likely ``cause``; ``notes`` give fixed flags to named quantities."""
    out = {}
    for k, v in values.items():
        ref = paper[k]
        flag = (notes or {}).get(k, "")
        if not flag and v is not None and ref:
            dev = (v - ref) / ref
            if abs(dev) > tolerance:
                flag = f"{dev:+.0%} vs paper ({cause})"
        out[k] = {"value": v, "paper": ref, "flag": flag}
    return out


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON (sorted keys, indent 2) via a hidden temp file and ``os.replace`` (releases.md §6).

    Used for ``stats.json`` and ``manifest.json``. Numpy scalars/arrays, sets and paths are converted.
    """
    return atomic_write_json(path, obj, sort_keys=True, indent=2, ensure_ascii=False, default=_json_default)


# ------------------------------------------------------------------------------- shared by the corpus releases


def git_commit() -> str | None:
    """The toolkit's git commit (``None`` outside a checkout), recorded in manifests and cards."""
    import subprocess

    try:
        root = Path(__file__).resolve().parents[1]
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (``|`` escaped, newlines flattened) for dataset cards."""

    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt_value(x: Any) -> str:
    """A card cell: thousands separators, two decimals for floats, an en dash for a missing value."""
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.2f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def stats_tables(stats: Mapping[str, Any]) -> dict[str, str]:
    """The card tables every corpus shows from ``stats.json``: paper quantities, drops, counters, release rows."""
    q = stats["quantities"]
    return {
        "stats_table": md_table(["quantity", "this build", "paper", "flag"],
                                [[k, fmt_value(v["value"]), fmt_value(v["paper"]), v["flag"] or ""]
                                 for k, v in q.items()]),
        "drops_table": md_table(["reason", "items"], [[k, v] for k, v in sorted(stats["drops"].items())])
        if stats["drops"] else "No item was dropped.",
        "counters_table": md_table(["counter", "count"], [[k, v] for k, v in sorted(stats["counters"].items())])
        if stats["counters"] else "No counter fired.",
        "release_table": md_table(["config", "split", "rows"],
                                  [[c, s, n] for c, sp in stats.get("release", {}).items() for s, n in sp.items()]),
    }


def write_drops(path: str | os.PathLike, result: Any) -> int:
    """``drops.parquet`` (``item_id, stage, reason, detail``) of a build result, written atomically; returns rows."""
    import pyarrow as pa

    from .core.shards import DROP_SCHEMA

    path = Path(path)
    table = pa.Table.from_pylist(list(result.drops()), schema=DROP_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return table.num_rows


def stage_release(out_dir: str | os.PathLike) -> Path:
    """An empty hidden sibling ``.<name>.incomplete`` of ``out_dir`` to write a release into (see ``publish``)."""
    import shutil

    out_dir = Path(out_dir)
    stage = out_dir.with_name(f".{out_dir.name}.incomplete")
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    return stage


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def publish(stage: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Move a finished staged release into place, replacing an older release of the same name.

    The old release is kept until the new one is in place: ``out_dir`` is renamed to the hidden sibling
    ``.<name>.old`` (a leftover of that name is removed first), ``stage`` is renamed to ``out_dir``, and only then the
    old release is deleted. If the second rename fails, the old release is renamed back to ``out_dir`` and the error
    is raised. So ``out_dir`` holds the old or the new release at every point except the moment between the two renames.
    A failure to delete the old copy at the end only warns, because the new release is already in place. The next
    ``publish`` removes what is left.
    """
    import warnings

    stage, out_dir = Path(stage), Path(out_dir)
    old = out_dir.with_name(f".{out_dir.name}.old")
    if old.exists() or old.is_symlink():
        _remove(old)
    had_old = out_dir.exists() or out_dir.is_symlink()
    if had_old:
        os.replace(out_dir, old)
    try:
        os.replace(stage, out_dir)
    except BaseException:
        if had_old:
            os.replace(old, out_dir)
        raise
    if had_old:
        try:
            _remove(old)
        except OSError as e:
            warnings.warn(f"published {out_dir}, but could not delete the previous release at {old}: {e}",
                          RuntimeWarning, stacklevel=2)
    return out_dir
