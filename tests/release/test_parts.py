"""Release rows and statistics made per work shard and cached (``builders.release.parts``): an edit of one shard
re-encodes that shard's part only, the release equals the one written from plain row sources, and stale parts go."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.core.records import Drop
from builders.core.shards import StageData, write_shard
from builders.release.flow import write_release
from builders.release.parts import PARTS_DIR, ShardedRows, ShardedScan, build_parts, scan_partials
from tests.release.test_flow import FEATURES, INFO, SPLITS, ToyConfig, build, texts, toy_result, toy_spec


def sharded_spec(result, template: Path, calls: Counter, key=None):
    spec = toy_spec(result, template)
    data = result.outputs["items"]

    def make(rows):
        calls["make"] += 1
        return ((r["split"], {"id": r["id"], "text": r["text"]}) for r in rows)

    spec.rows = {"items": ShardedRows(data, make, key=key)}
    return spec


def rewrite_shard(result, k: int, text: str) -> None:
    """Shard ``k`` of the toy stage recomputed with other rows (a new row digest), as an edit of its items would."""
    data = result.outputs["items"]
    from builders.core.shards import read_rows

    rows = [{**r, "text": text} for r in read_rows(data.dir, k)]
    write_shard(data.dir, k, rows, [Drop(f"gone{k}", "items", "too_short", "a")],
                {"rows_in": len(rows) + 1, "kept": len(rows), "dropped": {"too_short": 1}, "counters": {},
                 "seconds": 0.01}, input_digest=f"edited-{k}")


def test_sharded_rows_write_the_same_release_as_row_sources(tmp_path):
    result, spec = build(tmp_path / "a")
    write_release(result, ToyConfig(), tmp_path / "a" / "out" / "toy", dict(INFO), spec)
    result_b = toy_result(tmp_path / "b" / "work")
    calls: Counter = Counter()
    got = write_release(result_b, ToyConfig(), tmp_path / "b" / "out" / "toy", dict(INFO),
                        sharded_spec(result_b, tmp_path / "b" / "card.md", calls))
    assert got == {"items": {"train": 9, "test": 3}} and calls["make"] == 3
    assert texts(tmp_path / "b" / "out" / "toy") == texts(tmp_path / "a" / "out" / "toy")
    for split in SPLITS:  # the same rows in the same order, the same Arrow schema (features metadata included)
        name = f"items/{split}-00000-of-00001.parquet"
        a, b = (pq.read_table(tmp_path / x / "out" / "toy" / name) for x in ("a", "b"))
        assert a.equals(b) and a.schema.equals(b.schema, check_metadata=True)
    stats = json.loads((tmp_path / "b" / "out" / "toy" / "stats.json").read_text())
    assert stats["this_build"]["release_parts"] == {"made": 3, "reused": 0}


def test_an_edited_shard_remakes_its_part_only_and_stale_parts_go(tmp_path):
    result = toy_result(tmp_path / "work")
    out = tmp_path / "out" / "toy"
    calls: Counter = Counter()
    write_release(result, ToyConfig(), out, dict(INFO), sharded_spec(result, tmp_path / "card.md", calls))
    parts = sorted((result.outputs["items"].dir / PARTS_DIR / "items").glob("*.arrow"))
    assert len(parts) == 3 and calls["make"] == 3
    rewrite_shard(result, 1, "edited")
    calls.clear()
    write_release(result, ToyConfig(), out, dict(INFO), sharded_spec(result, tmp_path / "card.md", calls))
    assert calls["make"] == 1  # shards 0 and 2 are read back from their parts
    after = sorted((result.outputs["items"].dir / PARTS_DIR / "items").glob("*.arrow"))
    assert len(after) == 3 and after[0] == parts[0] and after[2] == parts[2] and after[1] != parts[1]
    assert texts(out)["train"] == ["a row 1", "a row 2", "a row 3", *["edited"] * 4, "a row 10", "a row 11"]
    assert texts(out)["test"] == ["a row 0", "a row 4", "edited"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["this_build"]["release_parts"] == {"made": 1, "reused": 2}


def test_a_new_key_remakes_every_part(tmp_path):
    result = toy_result(tmp_path / "work")
    calls: Counter = Counter()
    data = result.outputs["items"]
    spec = sharded_spec(result, tmp_path / "card.md", calls, key={"lower": False})
    build_parts(spec.rows["items"], "items", FEATURES, SPLITS, code={})
    build_parts(spec.rows["items"], "items", FEATURES, SPLITS, code={})
    assert calls["make"] == 3
    build_parts(sharded_spec(result, tmp_path / "card.md", calls, key={"lower": True}).rows["items"], "items",
                FEATURES, SPLITS, code={})
    assert calls["make"] == 6
    build_parts(spec.rows["items"], "items", FEATURES, SPLITS, code={"release.py": "other"})  # code changed
    assert calls["make"] == 9
    assert len(list((data.dir / PARTS_DIR / "items").glob("*.arrow"))) == 3


def test_a_row_for_an_unknown_split_or_field_is_refused(tmp_path):
    result = toy_result(tmp_path / "work")
    data = result.outputs["items"]
    with pytest.raises(ValueError, match=r"split\(s\) \['valid'\]"):
        build_parts(ShardedRows(data, lambda rows: (("valid", {"id": r["id"], "text": ""}) for r in rows)),
                    "items", FEATURES, SPLITS, code={})
    with pytest.raises(ValueError, match="unexpected"):
        build_parts(ShardedRows(data, lambda rows: (("train", {**r}) for r in rows)), "items", FEATURES, SPLITS,
                    code={})


def test_sharded_scan_folds_changed_shards_only(tmp_path):
    result = toy_result(tmp_path / "work")
    data: StageData = result.outputs["items"]
    folds: list[int] = []

    def fold(rows):
        folds.append(len(rows))
        return Counter(r["split"] for r in rows)

    scan = ShardedScan(data, "splits", fold, columns=["split"])
    assert sum(scan_partials(scan, code={}), Counter()) == Counter(train=9, test=3)
    assert folds == [5, 5, 2]
    assert sum(scan_partials(scan, code={}), Counter()) == Counter(train=9, test=3) and len(folds) == 3
    rewrite_shard(result, 2, "x")
    assert sum(scan_partials(scan, code={}), Counter()) == Counter(train=9, test=3) and folds == [5, 5, 2, 2]
    assert len(list((data.dir / PARTS_DIR / "_scan-splits").iterdir())) == 3


def test_split_tables_skip_a_part_without_the_split_by_its_metadata(tmp_path, monkeypatch):
    """A part holding only ``train`` rows is not read for ``test`` (its schema metadata lists its splits); a part
    holding both is read for both; the rows are the part's rows of that split, in order."""
    import pyarrow as pa

    from builders.release import parts as release_parts
    from builders.release.parts import PART_SPLIT, split_tables, write_part

    train_only, both = tmp_path / "a.arrow", tmp_path / "b.arrow"
    write_part(train_only, pa.table({"id": ["1", "2"], "text": ["x", "y"], PART_SPLIT: ["train", "train"]}))
    write_part(both, pa.table({"id": ["3", "4", "5"], "text": ["p", "q", "r"], PART_SPLIT: ["train", "test", "train"]}))
    read = []
    real = release_parts.pa.ipc.open_file

    def counted(source, *a, **k):
        reader = real(source, *a, **k)
        return type("Counted", (), {"schema": reader.schema,
                                    "read_all": lambda self: read.append(1) or reader.read_all()})()

    monkeypatch.setattr(release_parts.pa.ipc, "open_file", counted)
    feats = {"id": None, "text": None}
    got = [t.to_pylist() for t in split_tables([train_only, both], "test", feats)]
    assert got == [[{"id": "4", "text": "q"}]] and len(read) == 1
    got = [t.to_pylist() for t in split_tables([train_only, both], "train", feats)]
    assert got == [[{"id": "1", "text": "x"}, {"id": "2", "text": "y"}],
                   [{"id": "3", "text": "p"}, {"id": "5", "text": "r"}]]


def test_a_part_of_the_earlier_parquet_format_is_still_read(tmp_path):
    import pyarrow as pa

    from builders.release.parts import PART_SPLIT, _may_hold, split_tables

    old = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": ["1", "2"], PART_SPLIT: ["train", "test"]}), old)
    assert _may_hold(pq.ParquetFile(old).metadata, "test") and not _may_hold(pq.ParquetFile(old).metadata, "valid")
    assert [t.to_pylist() for t in split_tables([old], "test", {"id": None})] == [[{"id": "2"}]]


def test_part_digests_name_the_content_not_the_key(tmp_path):
    """A part made again under another key from the same rows has the same digest; a changed part another one; the
    digests are kept beside the parts and entries of parts gone are dropped."""
    import pyarrow as pa

    from builders.release.parts import DIGESTS_FILE, PART_SPLIT, part_digests, write_part

    table = pa.table({"id": [1, 2], PART_SPLIT: ["train", "train"]})
    a, b, c = tmp_path / "00000-aaa.arrow", tmp_path / "00000-bbb.arrow", tmp_path / "00001-ccc.arrow"
    write_part(a, table)
    write_part(b, table)
    write_part(c, pa.table({"id": [3, 4], PART_SPLIT: ["train", "test"]}))
    da, db, dc = part_digests([a, b, c])
    assert da == db != dc
    assert set(json.loads((tmp_path / DIGESTS_FILE).read_text())) == {a.name, b.name, c.name}
    b.unlink()
    assert part_digests([a, c]) == [da, dc]
    assert set(json.loads((tmp_path / DIGESTS_FILE).read_text())) == {a.name, c.name}
    write_part(a, pa.table({"id": [9, 9], PART_SPLIT: ["train", "train"]}))  # rewritten: hashed again
    assert part_digests([a])[0] != da
