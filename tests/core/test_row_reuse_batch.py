"""Row reuse of a ``row_wise_batch`` step (builders/core/row_reuse.py, issue 19): the changed rows of a redone shard
are processed in ONE call, each row's counters are its own (``Out.item``), the shard is written in input order as a
full recomputation writes it, and a data error falls back to one row at a time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from builders.core.errors import ShardUnfinished
from builders.core.records import Out
from builders.core.row_reuse import MEMO_KEY
from builders.core.runners import ExecPolicy, StageTask, run_shard
from builders.core.shards import read_drops, read_rows, write_shard
from builders.core.step import Step


@dataclass(eq=False)
class BatchWords(Step):
    """Counts in two loops over the batch, as ``VisualFeatures`` does: drops an empty row (``empty``), counts
    ``words`` in the first loop and ``long`` (more than 3 words) in the second."""

    name = "batch_words"
    row_wise = True
    row_wise_batch = True
    calls: ClassVar[list[list[str]]] = []
    broken: ClassVar[set[str]] = set()
    transient: ClassVar[set[str]] = set()
    attribute: ClassVar[bool] = True

    def process(self, rows, out: Out) -> None:
        BatchWords.calls.append([r["id"] for r in rows])
        done = []
        for r in rows:
            if BatchWords.attribute:
                out.item = r["id"]
            if r["id"] in BatchWords.broken:
                raise ValueError(f"cannot handle {r['id']}")
            if r["id"] in BatchWords.transient:
                raise TimeoutError("the service timed out")
            if not r["words"]:
                out.drop(r["id"], "empty", "no words")
                continue
            out.count("words", len(r["words"]))
            done.append(r)
        for r in done:
            out.item = r["id"]
            if len(r["words"]) > 3:
                out.count("long")
            out.keep({**r, "n": len(r["words"])})


ROWS = [{"id": "a", "words": ["w"] * 5}, {"id": "b", "words": []}, {"id": "c", "words": ["w"] * 2},
        {"id": "d", "words": ["w"] * 4}, {"id": "e", "words": ["w"]}]


@pytest.fixture(autouse=True)
def _reset():
    BatchWords.calls, BatchWords.broken, BatchWords.transient, BatchWords.attribute = [], set(), set(), True
    yield
    BatchWords.calls, BatchWords.broken, BatchWords.transient, BatchWords.attribute = [], set(), set(), True


def _task(root: Path, rows: list[dict[str, Any]], out: str = "out") -> StageTask:
    write_shard(root / "in", 0, rows, [], {"rows_in": len(rows), "kept": len(rows), "dropped": {}, "counters": {}})
    return StageTask(BatchWords(), None, root / "in", root / out, ExecPolicy(retries=0, backoff_s=0.0))


def _shard(task: StageTask, stats: dict[str, Any]) -> tuple[list, list, dict]:
    keep = {k: v for k, v in stats.items() if k not in ("seconds", "rows_reused", "counters_computed")}
    return read_rows(task.out_dir, 0), read_drops(task.out_dir, 0), keep


def test_out_attributes_counts_to_the_item_set():
    out = Out("s")
    out.count("x")                      # no item: as before, only the total
    assert out.item_counters == {} and out.unattributed() == {"x": 1}
    out.item = "v1"
    out.count("x", 2)
    out.count("y", 0)                   # a zero count records nothing
    out.item = 7                        # ids are keyed as strings
    out.count("y", 3)
    assert out.counters == {"x": 3, "y": 3}
    assert out.item_counters == {"v1": {"x": 2}, "7": {"y": 3}}
    assert out.unattributed() == {"x": 1}


def test_a_fresh_shard_is_one_call_and_the_memo_has_each_rows_counters(tmp_path):
    task = _task(tmp_path, ROWS)
    stats = run_shard(task, 0)
    assert BatchWords.calls == [["a", "b", "c", "d", "e"]]
    assert stats["counters"] == {"words": 12, "long": 2} and stats["dropped"] == {"empty": 1}
    memo = {rid: c for rid, (_, c) in stats[MEMO_KEY].items()}
    assert memo == {"a": {"long": 1, "words": 5}, "b": {}, "c": {"words": 2}, "d": {"long": 1, "words": 4},
                    "e": {"words": 1}}
    assert "rows_reused" not in stats


def test_the_changed_rows_are_one_call_and_the_shard_is_a_full_recomputations(tmp_path):
    task = _task(tmp_path, ROWS)
    run_shard(task, 0)
    edited = [ROWS[0], ROWS[1], {"id": "c", "words": ["w"] * 6}, ROWS[3], {"id": "e", "words": []}]
    task = _task(tmp_path, edited)
    BatchWords.calls = []
    stats = run_shard(task, 0)
    assert BatchWords.calls == [["c", "e"]]                        # one call, the changed rows only
    assert stats["rows_reused"] == 3
    assert stats["counters_computed"] == {"words": 6, "long": 1}   # c: 6 words, long; e: dropped
    assert stats["counters"] == {"words": 15, "long": 3}           # a 5 + c 6 + d 4; a, c, d long
    rows, drops, kept_stats = _shard(task, stats)
    assert [r["id"] for r in rows] == ["a", "c", "d"]               # input order, as a full recomputation
    assert [d["item_id"] for d in drops] == ["b", "e"]
    assert stats[MEMO_KEY]["c"][1] == {"long": 1, "words": 6} and stats[MEMO_KEY]["e"][1] == {}

    full = _task(tmp_path, edited, out="full")
    BatchWords.calls = []
    want = run_shard(full, 0)
    assert BatchWords.calls == [["a", "b", "c", "d", "e"]]
    assert (rows, drops, kept_stats) == _shard(full, want)


def test_unattributed_counters_are_a_bug_of_the_step(tmp_path):
    BatchWords.attribute = False        # ``words`` is counted under the previous row's id, or none
    with pytest.raises(RuntimeError, match="'batch_words'.*out.item"):
        run_shard(_task(tmp_path, ROWS), 0)


def test_a_data_error_in_the_batch_falls_back_to_one_row_at_a_time(tmp_path):
    task = _task(tmp_path, ROWS)
    run_shard(task, 0)
    edited = [ROWS[0], ROWS[1], {"id": "c", "words": ["w"] * 6}, ROWS[3], {"id": "e", "words": ["w"] * 3}]
    task = _task(tmp_path, edited)
    BatchWords.calls, BatchWords.broken = [], {"c"}
    stats = run_shard(task, 0)
    assert BatchWords.calls == [["c", "e"], ["c"], ["e"]]
    assert stats["dropped"] == {"empty": 1, "step_error": 1} and stats["rows_reused"] == 3
    assert stats["counters_computed"] == {"words": 3}
    assert "c" not in stats[MEMO_KEY] and stats[MEMO_KEY]["e"][1] == {"words": 3}
    assert [d["item_id"] for d in read_drops(task.out_dir, 0)] == ["b", "c"]

    # c is retried when its shard is redone; e is reused
    BatchWords.calls, BatchWords.broken = [], set()
    run_shard(_task(tmp_path, edited), 0)
    assert BatchWords.calls == [["c"]]


def test_a_shard_where_every_row_fails_alike_raises(tmp_path):
    BatchWords.broken = {r["id"] for r in ROWS}
    with pytest.raises(ValueError, match="cannot handle"):
        run_shard(_task(tmp_path, ROWS), 0)
    assert BatchWords.calls == [["a", "b", "c", "d", "e"], ["a"], ["b"], ["c"], ["d"], ["e"]]


def test_a_persistent_transient_failure_leaves_the_shard_unfinished(tmp_path):
    task = _task(tmp_path, ROWS)
    run_shard(task, 0)
    task = _task(tmp_path, [*ROWS[:4], {"id": "e", "words": ["w"] * 2}])
    BatchWords.calls, BatchWords.transient = [], {"e"}
    with pytest.raises(ShardUnfinished):
        run_shard(task, 0)
    assert BatchWords.calls == [["e"]]                              # no row-by-row fallback
