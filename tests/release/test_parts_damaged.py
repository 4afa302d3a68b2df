"""Damaged release parts and scan partials (issue 34): a part or partial whose bytes are not those written (one
byte flipped, the file cut short) is treated as missing: made again from its work shard with one warning line naming
it, never used, and the release equals the one written from undamaged parts."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from builders.core.errors import DamagedCache
from builders.release.flow import write_release
from builders.release.parts import DIGESTS_FILE, PARTS_DIR, ShardedScan, scan_partials, split_tables
from tests.release.test_flow import INFO, ToyConfig, texts, toy_result
from tests.release.test_parts import sharded_spec

#: the toy stage: rows 0..11 in shards of 5, ``test`` every 4th row (tests/release/test_flow.py ``toy_result``)
TRAIN = [f"a row {i}" for i in (1, 2, 3, 5, 6, 7, 9, 10, 11)]
TEST = ["a row 0", "a row 4", "a row 8"]


def flip(path: Path, at: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    k = len(data) // 2 if at is None else at
    data[k] ^= 0x01
    path.write_bytes(bytes(data))


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _warnings(caplog, what: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and what in r.getMessage()]


@pytest.mark.parametrize("damage", ["flip_value", "flip_middle", "cut"])
def test_a_damaged_part_is_made_again_and_the_release_is_unchanged(tmp_path, caplog, damage):
    result = toy_result(tmp_path / "work")
    calls: Counter = Counter()
    write_release(result, ToyConfig(), tmp_path / "a", dict(INFO), sharded_spec(result, tmp_path / "card.md", calls))
    assert calls["make"] == 3 and texts(tmp_path / "a") == {"train": TRAIN, "test": TEST}
    folder = result.outputs["items"].dir / PARTS_DIR / "items"
    part = sorted(folder.glob("00001-*.arrow"))[0]
    good = part.read_bytes()
    recorded = json.loads((folder / DIGESTS_FILE).read_text())[part.name][1]
    if damage == "flip_value":  # one bit of the last text value held by the part ("a row 9"): still Arrow
        flip(part, good.rindex(b"a row 9") + len("a row "))
    elif damage == "flip_middle":
        flip(part)
    else:
        cut(part)
    assert part.read_bytes() != good
    calls.clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="builders.release.parts"):
        write_release(result, ToyConfig(), tmp_path / "b", dict(INFO),
                      sharded_spec(result, tmp_path / "card.md", calls))
    assert calls["make"] == 1  # shard 1 alone, once (its part is read for both splits)
    warned = _warnings(caplog, "damaged release part")
    assert len(warned) == 1 and part.name in warned[0]
    assert texts(tmp_path / "b") == texts(tmp_path / "a") == {"train": TRAIN, "test": TEST}
    assert part.read_bytes() == good  # made again byte for byte, under the digest recorded when first written
    assert json.loads((folder / DIGESTS_FILE).read_text())[part.name][1] == recorded
    stats = json.loads((tmp_path / "b" / "stats.json").read_text())
    assert stats["this_build"]["release_parts"] == {"made": 1, "reused": 2}


def test_a_damaged_part_in_a_plain_list_raises_damaged_cache(tmp_path):
    """Without a way to make it again (a plain list of paths) the damage is raised, naming the part."""
    result = toy_result(tmp_path / "work")
    write_release(result, ToyConfig(), tmp_path / "a", dict(INFO), sharded_spec(result, tmp_path / "card.md", Counter()))
    parts = sorted((result.outputs["items"].dir / PARTS_DIR / "items").glob("*.arrow"))
    flip(parts[2])
    with pytest.raises(DamagedCache, match=parts[2].name):
        list(split_tables(parts, "train", {"id": None, "text": None}))


def test_a_part_without_a_recorded_digest_is_made_again(tmp_path):
    """A part whose digest was never recorded (killed between the part and ``_digests.json``) is not trusted."""
    result = toy_result(tmp_path / "work")
    calls: Counter = Counter()
    write_release(result, ToyConfig(), tmp_path / "a", dict(INFO), sharded_spec(result, tmp_path / "card.md", calls))
    folder = result.outputs["items"].dir / PARTS_DIR / "items"
    known = json.loads((folder / DIGESTS_FILE).read_text())
    name = sorted(known)[0]
    del known[name]
    (folder / DIGESTS_FILE).write_text(json.dumps(known))
    calls.clear()
    write_release(result, ToyConfig(), tmp_path / "b", dict(INFO), sharded_spec(result, tmp_path / "card.md", calls))
    assert calls["make"] == 1 and texts(tmp_path / "b") == {"train": TRAIN, "test": TEST}
    assert name in json.loads((folder / DIGESTS_FILE).read_text())


@pytest.mark.parametrize("damage", ["flip", "cut", "earlier_format"])
def test_a_damaged_scan_partial_is_folded_again(tmp_path, caplog, damage):
    import pickle

    result = toy_result(tmp_path / "work")
    data = result.outputs["items"]
    folds: list[int] = []

    def fold(rows):
        folds.append(len(rows))
        return Counter(r["split"] for r in rows)

    scan = ShardedScan(data, "splits", fold, columns=["split"])
    assert sum(scan_partials(scan, code={}), Counter()) == Counter(train=9, test=3) and folds == [5, 5, 2]
    partial = sorted((data.dir / PARTS_DIR / "_scan-splits").glob("00001-*.pkl"))[0]
    raw = partial.read_bytes()
    if damage == "flip":  # the count of "train" in shard 1 (4): a pickle that still loads, as another Counter
        payload = raw.partition(b"\n")[2]
        assert pickle.loads(payload) == Counter(train=4, test=1)
        flip(partial, raw.rindex(b"train") + len("train") + 1)
    elif damage == "cut":
        cut(partial)
    else:  # a bare pickle, as builds before digests wrote it
        partial.write_bytes(raw.partition(b"\n")[2])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="builders.release.parts"):
        assert sum(scan_partials(scan, code={}), Counter()) == Counter(train=9, test=3)
    assert folds == [5, 5, 2, 5]  # shard 1 folded again, the others read back
    warned = _warnings(caplog, "damaged release scan partial")
    assert len(warned) == (0 if damage == "earlier_format" else 1)
    assert all(partial.name in w for w in warned)
    assert partial.read_bytes() == raw
    assert sum(scan_partials(scan, code={}), Counter()) == Counter(train=9, test=3) and len(folds) == 4
