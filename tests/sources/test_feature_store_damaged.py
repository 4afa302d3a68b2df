"""Damaged feature store blocks (issue 34): a per-shard store file is named by the digest of its content; a reader
checks it once per process and raises ``DamagedCache`` naming it when it is cut short, missing or its bytes changed
(the shard that wrote it is recomputed); writing the block again replaces the damaged file. A store given as input
stays a per-video ``bad_features``."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from builders.core.errors import DamagedCache
from builders.sources import feature_files
from builders.sources.feature_files import FeatureRef
from builders.sources.visual_features import FeatureFileError, read_visual_features, write_store_block

BLOCK = (np.arange(24, dtype=np.float32).reshape(6, 4) + 1).astype(np.float16)  # 1..24, exact in fp16


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch):
    monkeypatch.setattr(feature_files, "_CHECKED_BLOCKS", {})


def test_the_name_is_the_content_digest(tmp_path):
    path = write_store_block(tmp_path, BLOCK, ".f16.npy")
    h = hashlib.sha256(b"<f2(6, 4)" + BLOCK.tobytes()).hexdigest()[:16]  # dtype.str, shape, bytes
    assert path.name == f"{h}.f16.npy"
    x, _ = read_visual_features(FeatureRef(str(path), 2, 4), 4, cache=True)
    assert x.tolist() == [[9, 10, 11, 12], [13, 14, 15, 16]]


def _damage(path, how):
    data = path.read_bytes()
    if how == "flip":  # the last value (24 in fp16: 0x4E00): one bit of it, the file stays a readable .npy
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0x01]))
        assert np.load(path)[-1, -1] != 24
    elif how == "cut":
        path.write_bytes(data[: len(data) - 10])
    else:
        path.unlink()


@pytest.mark.parametrize("how", ["flip", "cut", "missing"])
def test_a_damaged_block_raises_damaged_cache_and_is_written_again(tmp_path, how):
    path = write_store_block(tmp_path, BLOCK, ".f16.npy")
    good = path.read_bytes()
    _damage(path, how)
    ref = FeatureRef(str(path), 0, 2)
    with pytest.raises(DamagedCache) as caught:
        read_visual_features(ref, 4, cache=True)
    assert caught.value.path == str(path)
    # the shard that wrote it recomputes it: the same block, written again in place of the damaged file
    assert write_store_block(tmp_path, BLOCK, ".f16.npy") == path and path.read_bytes() == good
    x, _ = read_visual_features(ref, 4, cache=True)
    assert x.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]


def test_a_damaged_store_given_as_input_is_bad_features(tmp_path):
    path = write_store_block(tmp_path, BLOCK, ".f16.npy")
    _damage(path, "flip")
    with pytest.raises(FeatureFileError) as caught:
        read_visual_features(FeatureRef(str(path), 0, 2), 4)  # not the build's own store: an input
    assert caught.value.reason == "bad_features"


def test_a_block_is_hashed_once_per_process(tmp_path, monkeypatch):
    path = write_store_block(tmp_path, BLOCK, ".f16.npy")
    calls = []
    real = feature_files.store_block_digest
    monkeypatch.setattr(feature_files, "store_block_digest", lambda b: calls.append(1) or real(b))
    for k in range(3):  # three videos of one block
        read_visual_features(FeatureRef(str(path), 2 * k, 2 * k + 2), 4, cache=True)
    assert len(calls) == 1
