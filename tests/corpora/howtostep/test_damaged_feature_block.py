"""A damaged block of the HowToStep feature store is recomputed, never used (issue 34, item 1), through the real CLI.

``visual_features`` stores the features it makes one block per work shard under ``<work_dir>/cache/features/<key>/``
(``<digest>.sim.npy`` for simulated features, named by the digest of their content); the later stages read a video's
rows of it (``load_row_features``). Here: a tiny build (four bundled transcripts, a replayed LLM, hash encoders,
simulated features, two videos a shard, so two blocks), then one byte of one block flipped (its size, mtime and inode
kept, as bit rot leaves them) or the block cut short, then a rebuild with another ``epsilon2``: ``stage2`` grounds
every video again and reads every block. The rebuild exits 0 with one warning naming the block, recomputes the one
``visual_features`` shard whose rows name it, writes the block again byte for byte, and releases the rows of an
undamaged build with the same settings. A last test shows the flipped byte matters: read unchecked, it changes the
released rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from builders.sources import feature_files
from tests.samples.row_digests import release_digests

from .conftest import FAST, GOOD, Inputs, build_ok, make_inputs

REPO = Path(__file__).resolve().parents[3]
#: two videos a shard: two visual_features shards, one store block each; every step kept (no threshold drops)
SETTINGS = (*FAST, "--set", "epsilon1=0", "--shard-size", "2")
BASE = ("--set", "epsilon2=-1")
#: the rebuild: a new stage2 (train_labeler is reused), which loads every video's features from the store
CHANGED = ("--set", "epsilon2=-0.5")
#: the stages before visual_features: a damaged block recomputes none of them
UPSTREAM = ("read_metadata", "heldout_split", "transcribe", "narrations", "llm_steps", "require_steps")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Inputs:
    return make_inputs(tmp_path_factory.mktemp("damaged_block_inputs"), list(GOOD))


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory) -> Path:
    """The release of a build with the rebuild's settings into a fresh work directory."""
    d = tmp_path_factory.mktemp("damaged_block_reference")
    return build_ok(d / "out", *inputs.args, *SETTINGS, *CHANGED, "--work-dir", str(d / "work"))


def cli(out: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m builders.build howtostep`` in its own process (nothing checked by an earlier build is trusted)."""
    return subprocess.run([sys.executable, "-m", "builders.build", "howtostep", "--out", str(out), "--work-dir",
                           str(work), "--no-progress", "-q", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)


def stats(release: Path) -> dict:
    return json.loads((release / "stats.json").read_text(encoding="utf-8"))


def features_stage(work: Path) -> Path:
    (stage,) = (work / "videos").glob("*_visual_features-*")
    return stage


def block_named_by(work: Path, shard: int) -> Path:
    """The one store block the rows of ``visual_features`` shard ``shard`` name."""
    rows = pq.read_table(features_stage(work) / f"part-{shard:05d}.parquet", columns=["features_path"]).to_pylist()
    (path,) = {r["features_path"] for r in rows}
    return Path(path)


def flip_sign(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Flip the sign bit of element [0, 2] (the first narration's first text-embedding value: a simulated block
    holds ``[start, end, g(text)...]`` rows as float64) in place, keeping size, mtime and inode; (before, after)."""
    before = np.load(path)
    assert before.dtype == np.float64 and before.ndim == 2 and before[0, 2] != 0
    data = bytearray(path.read_bytes())
    # the data follow the .npy header; element [0, 2] is the third float64; little-endian: its last byte holds the sign
    offset = len(data) - before.nbytes + 2 * 8 + 7
    data[offset] ^= 0x80
    st = path.stat()
    with open(path, "r+b") as f:  # in place: the inode stays
        f.write(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = np.load(path)
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (st.st_size, st.st_mtime_ns,
                                                                                    st.st_ino)
    return before, after


def base_build(inputs: Inputs, root: Path) -> Path:
    build_ok(root / "out0", *inputs.args, *SETTINGS, *BASE, "--work-dir", str(root / "work"))
    return root / "work"


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_a_damaged_feature_block_is_recomputed(inputs, reference, tmp_path, damage):
    work = base_build(inputs, tmp_path)
    stage = features_stage(work)
    assert sorted(p.name for p in stage.glob("part-*.stats.json")) == ["part-00000.stats.json",
                                                                        "part-00001.stats.json"]
    block, other = block_named_by(work, 1), block_named_by(work, 0)
    assert block != other and block.parent.parent == work / "cache" / "features"
    good, other_good = block.read_bytes(), other.read_bytes()
    stats_mtimes = {i: (stage / f"part-{i:05d}.stats.json").stat().st_mtime_ns for i in (0, 1)}
    if damage == "flip":
        before, after = flip_sign(block)
        changed = np.argwhere(before != after).tolist()
        assert changed == [[0, 2]] and after[0, 2] == -before[0, 2]  # still a .npy, one value of another sign
    else:
        block.write_bytes(good[: len(good) // 2])

    done = cli(tmp_path / "out", work, *inputs.args, *SETTINGS, *CHANGED)
    assert done.returncode == 0, done.stderr[-3000:]
    name = block.relative_to(work).as_posix()
    damaged = [line for line in done.stderr.splitlines() if "damaged" in line]
    assert len(damaged) == 1, done.stderr[-3000:]
    assert damaged[0].startswith(f"warning: damaged cache file {name} (") and damaged[0].endswith(
        "): recomputing it"), damaged[0]
    assert block.read_bytes() == good and other.read_bytes() == other_good  # written again, byte for byte
    release = tmp_path / "out" / "howtostep"
    st = stats(release)
    assert st["this_build"]["damaged_caches_recomputed"] == 1
    assert st["this_build"]["damaged_cache_files"] == [name]
    steps = st["steps"]
    # exactly the shard whose rows name the block; stage1 reads an identical shard, so it is reused
    assert (steps["visual_features"]["shards"], steps["visual_features"]["computed_shards"]) == (2, 1)
    assert (stage / "part-00000.stats.json").stat().st_mtime_ns == stats_mtimes[0]
    assert (stage / "part-00001.stats.json").stat().st_mtime_ns != stats_mtimes[1]
    assert {s: steps[s]["computed_shards"] for s in (*UPSTREAM, "stage1")} == dict.fromkeys((*UPSTREAM, "stage1"), 0)
    assert "train_labeler" in st["this_build"]["fits_reused"]
    # stage2 is new: its shard 0 may be computed in the pass that found the damage, then reused by the pass after
    # it (``steps`` counts the last pass)
    assert steps["stage2"]["shards"] == 2 and steps["stage2"]["computed_shards"] >= 1
    assert release_digests(release) == release_digests(reference)


def test_the_flipped_byte_would_change_the_release(inputs, reference, tmp_path, monkeypatch):
    """The same flip with the store's check taken out (the block read as it is): the rows released differ from the
    reference, so the test above would fail if the damaged block were used."""
    work = base_build(inputs, tmp_path)
    flip_sign(block_named_by(work, 1))
    monkeypatch.setattr(feature_files, "check_store_block",
                        lambda path: np.load(str(path), mmap_mode="r", allow_pickle=False))
    release = build_ok(tmp_path / "out", *inputs.args, *SETTINGS, *CHANGED, "--work-dir", str(work))
    assert stats(release)["this_build"]["damaged_caches_recomputed"] == 0
    got, want = release_digests(release), release_digests(reference)
    assert got["steps/train"]["rows"] == want["steps/train"]["rows"]
    assert got["steps/train"]["sha256"] != want["steps/train"]["sha256"]
