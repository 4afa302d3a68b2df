"""Tests of the per-second visual feature reader (spec howtostep.md §2.4 formats and lookup, §7 bad features)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from builders.sources.visual_features import (
    fp16_features,
    write_store_block,
    DEFAULT_MAX_BYTES,
    FeatureFileError,
    FeatureIndex,
    bad_row_mask,
    read_visual_features,
    repair_feature_rows,
    write_feature_npy,
)



def ramp(t: int, c: int) -> np.ndarray:
    """Row i holds i + 1 in every column (exact in fp16), so a repaired row shows which row it came from."""
    return np.repeat(np.arange(1, t + 1, dtype=np.float32)[:, None], c, axis=1)


def write(path: Path, x: np.ndarray, dtype: torch.dtype | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    name = path.name
    if name.endswith((".pth.tar", ".pth", ".pt")):
        torch.save(torch.from_numpy(x).to(dtype or torch.float32), path)
    elif name.endswith(".npz"):
        np.savez(path, features=x)
    else:
        with open(path, "wb") as f:
            np.save(f, x)
    return path


# ------------------------------------------------------------------------------------------- formats (§2.4)
@pytest.mark.parametrize("ext", [".npy", ".mp4.npy", ".npz", ".pt", ".pth", ".pth.tar"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_each_format_reads_as_float32(tmp_path, ext, dtype):
    x = ramp(6, 4) / 8  # multiples of 1/8: exact in fp16
    torch_dtype = torch.float16 if dtype == "fp16" else torch.float32
    path = write(tmp_path / f"vid{ext}", x.astype(np.float16) if dtype == "fp16" else x, torch_dtype)
    got, counters = read_visual_features(path, visual_dim=4)
    assert got.dtype == np.float32 and got.shape == (6, 4)
    np.testing.assert_array_equal(got, x)
    assert counters == {"features_repaired": 0}


def test_torch_dict_with_features_key(tmp_path):
    path = tmp_path / "a.pth.tar"
    torch.save({"features": torch.ones(3, 2)}, path)
    got, _ = read_visual_features(path, visual_dim=2)
    np.testing.assert_array_equal(got, np.ones((3, 2), np.float32))


# ------------------------------------------------------------------------------------------- lookup
def test_index_scans_recursively_and_prefers_earlier_extensions(tmp_path):
    write(tmp_path / "a" / "b" / "-dashId_001.pth.tar", ramp(2, 3))
    write(tmp_path / "c" / "-dashId_001.npy", ramp(2, 3))
    write(tmp_path / "s3d" / "vid2.mp4.npy", ramp(2, 3))
    write(tmp_path / "vid3.npz", ramp(2, 3))
    (tmp_path / "notes.txt").write_text("x")
    index = FeatureIndex(tmp_path)
    assert index.lookup("-dashId_001") == tmp_path / "a" / "b" / "-dashId_001.pth.tar"
    assert index.lookup("vid2") == tmp_path / "s3d" / "vid2.mp4.npy"  # the id is the name before ".mp4.npy"
    assert index.lookup("vid3") == tmp_path / "vid3.npz"
    assert index.lookup("absent") is None
    assert index.ids() == {"-dashId_001", "vid2", "vid3"} and len(index) == 3


def test_index_json_subfolder_path_and_stem(tmp_path):
    root = tmp_path / "feats"
    write(root / "shard_07" / "vidA.npy", ramp(2, 3))
    write(root / "shard_07" / "vidA.pt", ramp(2, 3))
    write(root / "x" / "any_name.npz", ramp(2, 3))
    write(root / "y" / "vidC.mp4.npy", ramp(2, 3))
    absolute = write(tmp_path / "elsewhere" / "vidD.npy", ramp(2, 3))
    entries = {"vidA": "shard_07", "vidB": "x/any_name.npz", "vidC": "y/vidC", "vidD": str(absolute),
               "vidE": "shard_07", "../up": "shard_07"}
    index_path = tmp_path / "index.json"
    index_path.write_text(json.dumps(entries))
    index = FeatureIndex(root, index_json=index_path)
    assert index.lookup("vidA") == root / "shard_07" / "vidA.pt"  # .pt comes before .npy
    assert index.lookup("vidB") == root / "x" / "any_name.npz"
    assert index.lookup("vidC") == root / "y" / "vidC.mp4.npy"
    assert index.lookup("vidD") == absolute
    assert index.lookup("vidE") is None  # listed, but no file in the folder
    assert index.lookup("../up") is None  # not a video id: never joined into a path
    assert index.lookup("vidZ") is None  # not listed: the json is the whole index, nothing is scanned
    # without a root, relative values are taken from the json's folder
    assert FeatureIndex(None, index_json=index_path).lookup("vidC") is None
    (tmp_path / "y").mkdir()
    write(tmp_path / "y" / "vidC.npy", ramp(2, 3))
    assert FeatureIndex(None, index_json=index_path).lookup("vidC") == tmp_path / "y" / "vidC.npy"


def test_index_configuration_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        FeatureIndex(tmp_path / "nope")
    with pytest.raises(FileNotFoundError):
        FeatureIndex(tmp_path, index_json=tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    for text in ("[1, 2]", '{"v": 3}', "{not json"):
        bad.write_text(text)
        with pytest.raises(ValueError):
            FeatureIndex(tmp_path, index_json=bad)


def test_missing_file_is_missing_features(tmp_path):
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(tmp_path / "gone.npy", visual_dim=4)
    assert err.value.reason == "missing_features"


# ------------------------------------------------------------------------------------------- bad features (§7)
def test_wrong_dimension(tmp_path):
    path = write(tmp_path / "v.pth.tar", np.ones((5, 512), np.float32), torch.float16)
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(path, visual_dim=768)
    assert err.value.reason == "bad_features"
    assert err.value.detail == "dimension 512 != visual_dim 768"


@pytest.mark.parametrize("ext", [".npy", ".pt", ".npz"])
def test_zero_rows_is_bad(tmp_path, ext):
    path = write(tmp_path / f"v{ext}", np.zeros((0, 8), np.float32))
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(path, visual_dim=8)
    assert err.value.reason == "bad_features"


def test_wrong_rank_is_bad(tmp_path):
    path = write(tmp_path / "v.npy", np.ones((4, 2, 2), np.float32))
    with pytest.raises(FeatureFileError, match="bad_features"):
        read_visual_features(path, visual_dim=2)


def test_repair_three_percent_nan_rows_by_hand():
    x = ramp(100, 3)
    x[0, 1] = np.nan  # leading row: backward fill from row 1 (value 2)
    x[50] = np.inf  # rows 50 and 51: forward fill from row 49 (value 50)
    x[51] = 0.0  # all-zero counts as bad too
    got, n = repair_feature_rows(x)
    assert n == 3
    np.testing.assert_array_equal(got[0], [2, 2, 2])
    np.testing.assert_array_equal(got[50], [50, 50, 50])
    np.testing.assert_array_equal(got[51], [50, 50, 50])
    np.testing.assert_array_equal(got[52], [53, 53, 53])
    np.testing.assert_array_equal(np.delete(got, [0, 50, 51], 0), np.delete(ramp(100, 3), [0, 50, 51], 0))
    assert np.isnan(x[0, 1])  # the input is not changed


def test_five_percent_is_repaired_more_is_rejected():
    x = ramp(20, 2)
    x[19] = np.nan  # 1 of 20 = exactly 5%: repaired from row 18 (value 19)
    got, n = repair_feature_rows(x)
    assert n == 1 and got[19].tolist() == [19.0, 19.0]
    x[3] = np.nan  # 2 of 20 = 10%
    with pytest.raises(FeatureFileError) as err:
        repair_feature_rows(x)
    assert err.value.reason == "bad_features" and "2 of 20 rows" in err.value.detail
    got, n = repair_feature_rows(x, max_bad_share=0.1)
    assert n == 2 and got[3].tolist() == [3.0, 3.0]


def test_all_rows_bad_cannot_be_repaired():
    with pytest.raises(FeatureFileError, match="bad_features"):
        repair_feature_rows(np.zeros((3, 2)), max_bad_share=1.0)


def test_bad_row_mask():
    x = np.array([[0, 0], [0, 1], [np.nan, 1], [-np.inf, 1], [1e-30, 0]], np.float32)
    assert bad_row_mask(x).tolist() == [True, False, True, True, False]


def test_all_zero_rows_in_a_file_are_repaired(tmp_path):
    x = ramp(40, 4)
    x[[0, 20]] = 0.0  # 2 of 40 = 5%
    path = write(tmp_path / "v.pth", x, torch.float16)
    got, counters = read_visual_features(path, visual_dim=4)
    assert counters == {"features_repaired": 2}
    assert got[0].tolist() == [2.0] * 4 and got[20].tolist() == [20.0] * 4


def test_ten_percent_zero_rows_in_a_file_is_bad(tmp_path):
    x = ramp(20, 4)
    x[[5, 6]] = 0.0
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(write(tmp_path / "v.npy", x), visual_dim=4)
    assert err.value.reason == "bad_features"


def test_nan_rows_are_repaired_up_to_five_percent_and_rejected_above(tmp_path):
    x = ramp(100, 3)
    x[[10, 11, 12]] = np.nan  # 3%: rows 10-12 become row 9 (value 10)
    got, counters = read_visual_features(write(tmp_path / "v.npy", x), visual_dim=3)
    assert counters == {"features_repaired": 3}
    assert got[10:13].tolist() == [[10.0] * 3] * 3
    x[20:30] = np.nan  # 13%
    with pytest.raises(FeatureFileError, match="bad_features"):
        read_visual_features(write(tmp_path / "w.npy", x), visual_dim=3)


@pytest.mark.parametrize("ext", [".npy", ".pth.tar"])
def test_three_percent_nan_file_repaired(tmp_path, ext):
    x = ramp(100, 3)
    x[[0, 40, 41]] = np.nan
    got, counters = read_visual_features(write(tmp_path / f"v{ext}", x, torch.float16), visual_dim=3)
    assert counters == {"features_repaired": 3}
    assert got[0].tolist() == [2.0] * 3 and got[40].tolist() == got[41].tolist() == [40.0] * 3


def test_ten_percent_nan_file_is_bad(tmp_path):
    x = ramp(50, 3)
    x[:5] = np.nan
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(write(tmp_path / "v.pt", x), visual_dim=3)
    assert err.value.reason == "bad_features"


@pytest.mark.parametrize("name", ["v.npy", "v.mp4.npy", "v.npz", "v.pt", "v.pth.tar"])
def test_corrupt_bytes_are_bad(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x93NUMPY garbage \x00\x01 not a real file" * 3)
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(path, visual_dim=3)
    assert err.value.reason == "bad_features"


def test_truncated_torch_file_is_bad(tmp_path):
    path = write(tmp_path / "v.pth.tar", ramp(50, 8))
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(FeatureFileError, match="bad_features"):
        read_visual_features(path, visual_dim=8)


class _Payload:
    """Unpickling this would create a file: ``weights_only=True`` must refuse it before running anything."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_pickle_only_torch_file_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "v.pt"
    torch.save({"features": _Payload(marker)}, path)
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(path, visual_dim=3)
    assert err.value.reason == "bad_features"
    assert not marker.exists()


def test_pickled_numpy_object_array_is_refused(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(FeatureFileError, match="bad_features"):
        read_visual_features(path, visual_dim=1)


def test_file_over_the_size_cap_is_bad(tmp_path):
    path = write(tmp_path / "v.npy", ramp(10, 4))
    assert DEFAULT_MAX_BYTES == 4 << 30
    with pytest.raises(FeatureFileError) as err:
        read_visual_features(path, visual_dim=4, max_bytes=100)
    assert err.value.reason == "bad_features" and "over the 100-byte limit" in err.value.detail
    assert read_visual_features(path, visual_dim=4, max_bytes=path.stat().st_size)[0].shape == (10, 4)


def test_error_reasons_are_checked():
    with pytest.raises(ValueError):
        FeatureFileError("nan_features", "x")


# ------------------------------------------------------------------------------------------- writing
def test_write_feature_npy_fp16_round_trip(tmp_path):
    x = np.array([[0.1, -2.5], [3.0, 1e-3]], np.float32)
    path = tmp_path / "out" / "deep" / "-vid.npy"
    write_feature_npy(path, x)
    raw = np.load(path)
    assert raw.dtype == np.float16 and raw.shape == (2, 2)
    np.testing.assert_array_equal(raw, x.astype(np.float16))
    assert [p.name for p in path.parent.iterdir()] == ["-vid.npy"]  # no temporary file left
    got, _ = read_visual_features(path, visual_dim=2)
    np.testing.assert_allclose(got, x, rtol=1e-3)
    assert FeatureIndex(tmp_path).lookup("-vid") == path


def test_write_feature_npy_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError):
        write_feature_npy(tmp_path / "a.npy", np.ones(3))
    with pytest.raises(ValueError, match="fp16"):
        write_feature_npy(tmp_path / "b.npy", np.full((2, 2), 1e6))
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------- per-shard store
def test_store_block_is_one_content_named_file_read_by_reference(tmp_path):
    """Issue 19: a work shard's features are one file (rows of several videos), named by its content; a video is a
    ``FeatureRef`` (its rows) that reads, is checked and is repaired like a file of its own."""
    from builders.nasva.data import FeatureRef

    a = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((40, 4)).astype(np.float32)
    b[1] = 0.0  # an all-zero row (2.5 %): repaired on read (spec §7)
    block = np.concatenate([fp16_features(a), fp16_features(b)])
    path = write_store_block(tmp_path, block, ".f16.npy")
    assert path.name.endswith(".f16.npy") and [p.name for p in tmp_path.iterdir()] == [path.name]
    mtime = path.stat().st_mtime_ns
    assert write_store_block(tmp_path, block, ".f16.npy") == path and path.stat().st_mtime_ns == mtime
    other = write_store_block(tmp_path, block[::-1].copy(), ".f16.npy")
    assert other != path and len(list(tmp_path.iterdir())) == 2  # new content: a new file, the old one untouched
    got, counters = read_visual_features(FeatureRef(str(path), 0, 5), visual_dim=4)
    assert np.array_equal(got, a.astype(np.float16).astype(np.float32)) and counters == {"features_repaired": 0}
    got, counters = read_visual_features(FeatureRef(str(path), 5, 45), visual_dim=4)
    assert counters == {"features_repaired": 1} and np.array_equal(got[1], got[0]) and got.shape == (40, 4)
    for ref, reason in ((FeatureRef(str(path), 5, 46), "bad_features"), (FeatureRef(str(path), 5, 5), "bad_features"),
                        (FeatureRef(str(tmp_path / "gone.f16.npy"), 0, 2), "missing_features")):
        with pytest.raises(FeatureFileError) as err:
            read_visual_features(ref, visual_dim=4)
        assert err.value.reason == reason
    with pytest.raises(FeatureFileError, match="dimension"):
        read_visual_features(FeatureRef(str(path), 0, 5), visual_dim=8)
