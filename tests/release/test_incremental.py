"""A rewrite of the release through the release cache (``builders.release.cache``, ``builders.release.incremental``;
issue 19, the edit rerun): it imports no ``datasets``, writes the very release a rewrite without the cache writes,
takes the shards of an unchanged config from the release in place (and only when they are untouched), and its gate
still checks every shard."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.release import gate as gate_module
from builders.release.cache import ReleaseCache
from builders.release.gate import ReleaseGateError, gate

from .incremental_toy import run, schema, write_stage

ROOT = Path(__file__).resolve().parents[2]


def _same_release(a: Path, b: Path) -> None:
    """Every file of ``a`` and ``b`` is the same, ``stats.json`` apart from the work this build did."""
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for rel in files:
        if rel == "stats.json":
            sa, sb = (json.loads((x / rel).read_text()) for x in (a, b))
            sa.pop("this_build", None), sb.pop("this_build", None)
            assert sa == sb
        else:
            assert filecmp.cmp(a / rel, b / rel, shallow=False), rel


def _rewrite_in_subprocess(out: Path, work: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.release.incremental_toy", str(out), str(work)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def edited(tmp_path):
    """A toy release written with its cache, then shard 1 of its stage edited; and the reference: the edited stage's
    release written without a cache (``datasets`` all the way)."""
    work, out = tmp_path / "work", tmp_path / "out"
    write_stage(work)
    run(out, work)
    ids_shard = out / "toy" / "ids" / "train-00000-of-00001.parquet"
    before = ids_shard.stat().st_ino
    write_stage(work, edited=1)
    ref_work = tmp_path / "ref"
    write_stage(ref_work, edited=1)
    run(tmp_path / "ref-out", ref_work, cache=False)
    return work, out, tmp_path / "ref-out" / "toy", before


def test_a_rewrite_through_the_cache_imports_no_datasets_and_writes_the_same_release(edited):
    work, out, reference, ids_inode = edited
    got = _rewrite_in_subprocess(out, work)
    assert got == {"counts": {"items": {"train": 9, "test": 3}, "ids": {"train": 9, "test": 3}},
                   "datasets_imported": False}
    _same_release(out / "toy", reference)
    assert "(edited)" in "".join(pq.read_table(out / "toy" / "items").column("text").to_pylist())
    # ``ids`` did not change (its part was made again from the same values): its shard is the one in place, linked
    assert (out / "toy" / "ids" / "train-00000-of-00001.parquet").stat().st_ino == ids_inode
    kinds = {p.name.split("-")[0] for p in (work / "cache" / "release").iterdir()}
    assert {"features", "readme", "gate", "outputs"} <= kinds


def test_a_shard_changed_in_place_is_written_again_not_reused(edited):
    work, out, reference, ids_inode = edited
    shard = out / "toy" / "ids" / "train-00000-of-00001.parquet"
    shard.write_bytes(b"\0" * shard.stat().st_size)  # corrupted, same size (a new mtime)
    got = run(out, work)
    assert not got.up_to_date
    _same_release(out / "toy", reference)
    assert pq.read_table(out / "toy" / "ids").num_rows == 12


def test_without_a_work_directory_there_is_no_cache(tmp_path):
    assert not ReleaseCache.of_build({"sample": True})
    assert ReleaseCache.of_build({"work_dir": str(tmp_path)}).root == tmp_path / "cache" / "release"
    assert ReleaseCache(None).get("gate", "0" * 24) is None


def _gate(release: Path, cache: ReleaseCache) -> dict:
    features = schema().FEATURES
    return gate(release, features_by_config=features, splits_by_config={c: ["train", "test"] for c in features},
                default_config="items", cache=cache)


def test_the_gate_skips_only_a_resolution_it_passed_and_checks_every_shard(tmp_path, monkeypatch):
    work, out = tmp_path / "work", tmp_path / "out"
    write_stage(work)
    run(out, work)  # the release flow's gate resolved this layout and recorded it
    release, cache = out / "toy", ReleaseCache(work / "cache" / "release")
    calls = []
    real = gate_module._resolve
    monkeypatch.setattr(gate_module, "_resolve", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert _gate(release, cache) == {"items": {"train": 9, "test": 3}, "ids": {"train": 9, "test": 3}}
    assert calls == []  # the same README less its figures, the same files: not resolved again

    readme = release / "README.md"
    readme.write_text(readme.read_text().replace("pretty_name: Toy", "pretty_name: Other toy"), encoding="utf-8")
    _gate(release, cache)
    assert calls == [1]  # another header: resolved (and recorded)
    _gate(release, cache)
    assert calls == [1]

    shard = release / "ids" / "test-00000-of-00001.parquet"
    shard.write_bytes(shard.read_bytes()[:-12])  # a broken footer
    with pytest.raises(ReleaseGateError, match="not a readable Parquet file"):
        _gate(release, cache)
    assert calls == [1]


def test_a_stray_file_changes_the_resolution_key(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    write_stage(work)
    run(out, work)
    release = out / "toy"
    features, splits = schema().FEATURES, {"items": ["train", "test"], "ids": ["train", "test"]}
    key = gate_module.resolution_key(release, features, splits, "items")
    assert key == gate_module.resolution_key(release, features, splits, "items")
    (release / "dataset_infos.json").write_text("{}", encoding="utf-8")  # a file datasets reads
    assert gate_module.resolution_key(release, features, splits, "items") != key
