"""``Source.ends_shard`` (builders/core/step.py; docs/architecture.md, "Caching"): by default a shard ends every
``shard_size`` records; a source that ends shards at chosen items keeps every other shard when one item is inserted
or removed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from builders.core.orchestrate import run_pipelines
from builders.core.records import Out
from builders.core.runners import LocalRunner
from builders.core.step import Pipeline, Source, Step, input_path


@dataclass(eq=False)
class Items(Source):
    name = "read_items"
    rows_carry_content = True
    ids: Path | None = input_path()  # one integer a line
    cut_at_tens: bool = False

    def read(self) -> Iterator:
        for i in map(int, Path(self.ids).read_text().split()):
            yield {"id": f"i{i}", "value": i}

    def ends_shard(self, record, size, shard_size):
        if not self.cut_at_tens:
            return super().ends_shard(record, size, shard_size)
        return record["value"] % 10 == 9  # a shard ends after an id ending in 9, wherever it stands


@dataclass(eq=False)
class Double(Step):
    name = "double"

    def process(self, rows, out: Out) -> None:
        for r in rows:
            out.keep({**r, "value": 2 * r["value"]})


def _run(tmp_path, ids, cut):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "ids.txt").write_text("\n".join(map(str, ids)))
    pipe = Pipeline("items", Items(ids=tmp_path / "ids.txt", cut_at_tens=cut), [Double()], shard_size=10)
    return run_pipelines([pipe], tmp_path / "work", LocalRunner(), progress=False)


def test_by_default_a_shard_ends_every_shard_size_records(tmp_path):
    res = _run(tmp_path, list(range(25)), cut=False)
    assert res.steps["read_items"].shards == 3  # 10, 10, 5
    assert [r["value"] for r in res.outputs["items"].rows()] == [2 * i for i in range(25)]


def test_a_source_cutting_at_items_keeps_the_later_shards_when_a_row_is_inserted(tmp_path):
    ids = [i for i in range(40) if i != 13]
    first = _run(tmp_path, ids, cut=True)
    assert first.steps["read_items"].shards == 4
    again = _run(tmp_path, list(range(40)), cut=True)  # 13 is back, in the second shard
    assert again.steps["double"].computed_shards == 1 and again.steps["double"].cached_shards == 3
    assert [r["value"] for r in again.outputs["items"].rows()] == [2 * i for i in range(40)]
    by_position = _run(tmp_path / "pos", ids, cut=False)
    assert by_position.steps["read_items"].shards == 4
    moved = _run(tmp_path / "pos", list(range(40)), cut=False)  # by position, every shard after it moves
    assert moved.steps["double"].computed_shards == 3 and moved.steps["double"].cached_shards == 1
