"""A rebuilt release folder is never served from a warm ``datasets`` cache (``builders/release/card.py``:
``write_readme``).

``datasets`` caches a local folder with a ``configs:`` README by its README metadata, not by its files' contents
(see ``write_readme``'s docstring). Every test gives ``datasets`` its own cache folder under ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from datasets import Features, Value, load_dataset
from datasets.load import LocalDatasetModuleFactory
from huggingface_hub import DatasetCard, DatasetCardData

from builders.release import (
    FINGERPRINT_FIELD,
    FINGERPRINT_TEXT,
    ReleaseGateError,
    config_fingerprint,
    write_readme,
    write_split,
)
from builders.release.gate import gate

FEATURES = Features({"id": Value("int64"), "x": Value("float64")})
OLD, NEW = 0.75, 0.7500001


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def build(root: Path, x: float, n: int = 4, configs: tuple[str, ...] = ("default",), y: float | None = None) -> Path:
    """A release folder: one split ``train`` of ``n`` rows per config, column ``x`` equal to ``x``.

    With ``y`` given, every config but the first holds ``y`` instead of ``x``.
    """
    for k, cfg in enumerate(configs):
        value = x if k == 0 or y is None else y
        write_split(root, cfg, "train", [{"id": i, "x": value} for i in range(n)], FEATURES)
    write_readme(root, features_by_config={c: FEATURES for c in configs}, splits_by_config={c: ["train"] for c in configs},
                 default_config=configs[0], card={"license": "cc-by-4.0", "pretty_name": "Fresh"}, title="Fresh",
                 body="Rows with a float column.")
    return root


def shard_sizes(root: Path, cfg: str = "default") -> list[int]:
    return sorted(p.stat().st_size for p in (root / cfg).iterdir())


def readme_configs(root: Path) -> dict[str, dict]:
    return {c["config_name"]: c for c in DatasetCard.load(root / "README.md").data.configs}


def test_a_rebuild_with_new_values_is_not_served_from_a_warm_cache(tmp_path):
    root, cache = tmp_path / "rel", tmp_path / "hf_cache"
    build(root, OLD)
    assert load_dataset(str(root), cache_dir=str(cache))["train"]["x"] == [OLD] * 4
    sizes = shard_sizes(root)
    build(root, NEW)  # same rows, same schema, same byte sizes: nothing but the contents changed
    assert shard_sizes(root) == sizes
    ds = load_dataset(str(root), cache_dir=str(cache))["train"]
    assert ds["x"] == [NEW] * 4
    assert ds.features == FEATURES and ds.num_rows == 4


def test_a_plain_load_of_the_folder_name_sees_a_rebuild(tmp_path, monkeypatch):
    # load_dataset("<folder>") with no cache_dir uses datasets.config.HF_DATASETS_CACHE: point it at tmp_path
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "default_cache")
    monkeypatch.chdir(tmp_path)
    build(tmp_path / "fresh", OLD)
    assert load_dataset("fresh")["train"]["x"] == [OLD] * 4
    assert (tmp_path / "default_cache" / "fresh").is_dir()  # the warm default cache
    build(tmp_path / "fresh", NEW)
    assert load_dataset("fresh")["train"]["x"] == [NEW] * 4
    assert load_dataset("fresh", split="train")["x"] == [NEW] * 4


def test_an_unchanged_rebuild_reuses_the_cache(tmp_path):
    root, cache = tmp_path / "rel", tmp_path / "hf_cache"
    build(root, OLD)
    first = load_dataset(str(root), cache_dir=str(cache))["train"]
    files = [Path(f["filename"]) for f in first.cache_files]
    stamps = [f.stat().st_mtime_ns for f in files]
    build(root, OLD)
    again = load_dataset(str(root), cache_dir=str(cache))["train"]
    assert [Path(f["filename"]) for f in again.cache_files] == files
    assert [f.stat().st_mtime_ns for f in files] == stamps  # read from the cache, not prepared again
    assert again["x"] == [OLD] * 4
    assert len([d for d in (cache / "rel" / "default").glob("*/*") if d.is_dir()]) == 1  # one <version>/<hash>


def test_an_identical_rewrite_keeps_the_same_readme_bytes(tmp_path):
    a = build(tmp_path / "a", OLD)
    before = (a / "README.md").read_bytes()
    build(a, OLD)
    assert (a / "README.md").read_bytes() == before
    b = build(tmp_path / "b", OLD)  # another folder, same contents: same README
    assert (b / "README.md").read_bytes() == before
    build(a, NEW)
    assert (a / "README.md").read_bytes() != before
    assert [p.name for p in a.iterdir() if p.name.startswith(".")] == []  # no temp file left by the README write


def test_the_fingerprint_is_in_what_datasets_hashes_and_survives_the_card(tmp_path):
    root = build(tmp_path / "rel", OLD)
    entry = readme_configs(root)["default"]
    fp = config_fingerprint(root, "default", ["train"])
    assert entry[FINGERPRINT_FIELD] == f"{FINGERPRINT_TEXT} {fp}"  # readable on the Hub, and content-bound
    assert fp.startswith("sha256:") and len(fp) == len("sha256:") + 64
    card = DatasetCard.load(root / "README.md")
    kept = DatasetCardData(**card.data.to_dict())  # DatasetCardData keeps the configs entry as it is
    assert kept.configs == card.data.configs
    module = LocalDatasetModuleFactory(str(root)).get_module()
    (bc,) = module.builder_configs_parameters.builder_configs
    assert bc.description == entry[FINGERPRINT_FIELD]
    build(root, OLD)
    assert LocalDatasetModuleFactory(str(root)).get_module().hash == module.hash
    build(root, NEW)
    assert LocalDatasetModuleFactory(str(root)).get_module().hash != module.hash
    assert gate(root, features_by_config={"default": FEATURES}, splits_by_config={"default": ["train"]},
                default_config="default") == {"default": {"train": 4}}


def test_fingerprints_are_per_config(tmp_path):
    root, cache = tmp_path / "rel", tmp_path / "hf_cache"
    build(root, OLD, configs=("main", "extra"), y=OLD)
    fp = {c: e[FINGERPRINT_FIELD] for c, e in readme_configs(root).items()}
    assert load_dataset(str(root), "extra", cache_dir=str(cache))["train"]["x"] == [OLD] * 4
    build(root, OLD, configs=("main", "extra"), y=NEW)  # only "extra" changes
    fp2 = {c: e[FINGERPRINT_FIELD] for c, e in readme_configs(root).items()}
    assert fp2["main"] == fp["main"] and fp2["extra"] != fp["extra"]
    assert load_dataset(str(root), "extra", cache_dir=str(cache))["train"]["x"] == [NEW] * 4
    assert load_dataset(str(root), "main", cache_dir=str(cache))["train"]["x"] == [OLD] * 4


def test_config_fingerprint_reads_the_files_on_disk(tmp_path):
    root = build(tmp_path / "rel", OLD)
    fp = config_fingerprint(root, "default", ["train"])
    shard = root / "default" / "train-00000-of-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[-20] ^= 1  # same size, one bit flipped
    shard.write_bytes(bytes(data))
    assert config_fingerprint(root, "default", ["train"]) != fp
    # the shard layout counts too: the same rows in two shards give another fingerprint
    write_split(root, "default", "train", [{"id": i, "x": OLD} for i in range(4)], FEATURES, max_rows_per_shard=2)
    two = config_fingerprint(root, "default", ["train"])
    assert two != fp
    (root / "default" / "train-00001-of-00002.parquet").unlink()
    with pytest.raises(ReleaseGateError, match="incomplete shard set"):
        config_fingerprint(root, "default", ["train"])
