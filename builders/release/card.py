"""The dataset card: ``README.md`` with YAML ``configs:`` and ``dataset_info:`` (``write_readme``), the body filled from
a card template (``render_card``), and the Markdown pieces the corpora's cards share (``md_table``, ``fmt_value``,
``stats_tables``, ``compare_with_paper``) (docs/publishing.md, "The release folder").

``write_readme`` builds the YAML header with ``datasets``' and ``huggingface_hub``'s own helpers. ``readme_skeleton``
takes such a README apart into its header less the figures that change with the rows (the configs' fingerprints, the
splits' sizes and row counts, the size category), and ``render_readme`` puts a README back together from a skeleton
and new figures with PyYAML alone, as ``huggingface_hub`` dumps it; the release flow keeps a skeleton only once it
rendered the very bytes ``write_readme`` wrote (``builders.release.incremental.write_card``), so a later rewrite with
the same features, card and layout writes its README without importing ``datasets``.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.atomic import atomic_write_bytes
from .gate import check_layout, split_sizes
from .card_text import compare_with_paper, fmt_value, md_table, render_card, stats_tables
from .writer import split_shards

if TYPE_CHECKING:  # datasets (0.5 s to import) only where write_readme builds the header with it
    from datasets import Features

__all__ = [
    "FINGERPRINT_FIELD",
    "FINGERPRINT_TEXT",
    "compare_with_paper",
    "config_fingerprint",
    "fmt_value",
    "md_table",
    "readme_figures",
    "readme_skeleton",
    "render_card",
    "render_readme",
    "size_category",
    "stats_tables",
    "write_readme",
]

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
    """The Hub's ``size_categories`` value for a total row count (docs/publishing.md)."""
    for bound, name in _SIZE_CATEGORIES:
        if num_rows < bound:
            return name
    return "n>1T"


FINGERPRINT_FIELD = "description"
"""The key of each ``configs:`` entry that carries the config's content fingerprint (see ``write_readme``)."""

_FINGERPRINT_PREFIX = "sha256:"
#: the words before the fingerprint in the card's ``description``: the Hub shows it, so it says what the hash is
FINGERPRINT_TEXT = "Content fingerprint of this config's Parquet shards (a new value means new rows):"


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
        split_sizes(root, config, split)  # raises ReleaseGateError on an incomplete shard set
        ((_, shards),) = split_shards(root / config, split).items()
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
    fingerprints: Mapping[str, str] | None = None,
) -> Path:
    """Write ``<root>/README.md``: YAML header (card fields, ``configs:``, ``dataset_info:``) + title + body.

    Built with datasets' own helpers exactly as docs/publishing.md: ``MetadataConfigs`` (one config per folder, data_files
    ``<config>/<split>-*``, ``default: true`` on ``default_config``), ``DatasetInfosDict`` (features and split sizes
    from the files on disk, §5) and ``DatasetCardData``; ``size_categories`` from the total row count.
    The shards must be written first. Returns the README path.

    **Content fingerprint.** Each ``configs:`` entry gets ``description: "<FINGERPRINT_TEXT> sha256:<hex>"``, with the
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

    ``fingerprints`` (config -> ``config_fingerprint``) may give fingerprints already known for the files on disk.
    """
    from datasets import Features as DsFeatures
    from datasets import SplitDict, SplitInfo
    from datasets.info import DatasetInfo, DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    check_layout(features_by_config, splits_by_config, default_config)
    root = Path(root)
    configs: dict[str, dict[str, Any]] = {}
    infos: dict[str, DatasetInfo] = {}
    total = 0
    for cfg, splits in splits_by_config.items():
        entry: dict[str, Any] = {"data_files": [{"split": s, "path": f"{cfg}/{s}-*"} for s in splits]}
        if cfg == default_config:
            entry["default"] = True
        sis = {s: SplitInfo(name=s, num_examples=n, num_bytes=b)
               for s in splits for n, b in [split_sizes(root, cfg, s)]}
        fp = (fingerprints or {}).get(cfg) or config_fingerprint(root, cfg, splits)
        entry[FINGERPRINT_FIELD] = f"{FINGERPRINT_TEXT} {fp}"
        configs[cfg] = entry
        total += sum(si.num_examples for si in sis.values())
        features = features_by_config[cfg]
        infos[cfg] = DatasetInfo(features=features if isinstance(features, DsFeatures) else features.full(),
                                 splits=SplitDict(sis))
    card_fields = dict(card)
    card_fields["size_categories"] = [size_category(total)]
    cd = DatasetCardData(**card_fields)
    MetadataConfigs(configs).to_dataset_card_data(cd)
    DatasetInfosDict(infos).to_dataset_card_data(cd)
    content = DatasetCard(f"---\n{cd.to_yaml()}\n---\n\n# {title}\n\n{body.strip()}\n").content
    path = root / "README.md"
    atomic_write_bytes(path, content.encode("utf-8"))
    return path


# ------------------------------------------------------------------------------------------- README without datasets

_CONFIG_KEYS = {"config_name", "data_files", "default", FINGERPRINT_FIELD}
_INFO_KEYS = {"config_name", "features", "splits"}
_SPLIT_KEYS = ["name", "num_bytes", "num_examples"]


def _entries(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def readme_figures(root: str | os.PathLike, splits_by_config: Mapping[str, list[str]],
                   fingerprints: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The figures of a README that change with the rows, read from the shards on disk: per config its fingerprint
    (``fingerprints`` where given) and per split ``[num_examples, num_bytes]``."""
    out: dict[str, Any] = {}
    for cfg, splits in splits_by_config.items():
        fp = (fingerprints or {}).get(cfg) or config_fingerprint(root, cfg, splits)
        out[cfg] = {"fingerprint": fp, "splits": {s: list(split_sizes(root, cfg, s)) for s in splits}}
    return out


def readme_skeleton(content: str, splits_by_config: Mapping[str, list[str]]) -> dict[str, Any] | None:
    """The YAML header of a README that ``write_readme`` wrote, as data, when it holds no figure outside those
    ``render_readme`` fills in (else ``None``: such a README is always written by ``write_readme``)."""
    import yaml

    if not content.startswith("---\n") or (end := content.find("\n---\n", 3)) < 0:
        return None
    header = yaml.load(content[4:end], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe
    if not isinstance(header, dict) or "size_categories" not in header:
        return None
    configs, infos = _entries(header.get("configs")), _entries(header.get("dataset_info"))
    if sorted(e.get("config_name") for e in configs if isinstance(e, dict)) != sorted(splits_by_config):
        return None
    if not all(isinstance(e, dict) and set(e) <= _CONFIG_KEYS and FINGERPRINT_FIELD in e for e in configs):
        return None
    named = [e.get("config_name") for e in infos if isinstance(e, dict)]
    if len(splits_by_config) == 1 and named == [None]:
        named = list(splits_by_config)  # one config named "default" is written without its name
    if sorted(named) != sorted(splits_by_config):
        return None
    for e, cfg in zip(infos, named):
        if not set(e) <= _INFO_KEYS or [s.get("name") if isinstance(s, dict) else None
                                         for s in e.get("splits") or []] != list(splits_by_config[cfg]):
            return None
        if not all(list(s) == _SPLIT_KEYS for s in e["splits"]):
            return None
    return {"header": header, "info_configs": named}


def render_readme(skeleton: Mapping[str, Any], figures: Mapping[str, Any], *, title: str, body: str) -> str:
    """A README from a ``readme_skeleton`` and new ``readme_figures``: the header dumped as ``huggingface_hub``
    dumps a card (``yaml.dump``, ``allow_unicode``, keys in their order), then the title and the body as
    ``write_readme`` puts them."""
    import yaml

    header = copy.deepcopy(skeleton["header"])
    total = sum(n for fig in figures.values() for n, _ in fig["splits"].values())
    header["size_categories"] = [size_category(total)]
    for e in _entries(header.get("configs")):
        e[FINGERPRINT_FIELD] = f"{FINGERPRINT_TEXT} {figures[e['config_name']]['fingerprint']}"
    for e, cfg in zip(_entries(header.get("dataset_info")), skeleton["info_configs"]):
        e["splits"] = [{"name": s, "num_bytes": b, "num_examples": n} for s, (n, b) in figures[cfg]["splits"].items()]
    # huggingface_hub's yaml_dump (allow_unicode, keys in their order); libyaml's emitter when there is one (a
    # skeleton is kept only once this rendered write_readme's very bytes)
    text = yaml.dump(header, stream=None, allow_unicode=True, sort_keys=False,
                     Dumper=getattr(yaml, "CDumper", yaml.Dumper)).strip()
    return f"---\n{text}\n---\n\n# {title}\n\n{body.strip()}\n"
