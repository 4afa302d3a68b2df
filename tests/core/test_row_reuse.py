"""Per-row reuse in a redone shard (builders/core/row_reuse.py, issue 19 item 2): a ``row_wise`` step processes only
the rows whose content or per-item input changed, and writes the shard a full recomputation writes."""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from builders.core.orchestrate import run_pipelines
from builders.core.records import Out
from builders.core.row_reuse import MEMO_KEY
from builders.core.runners import LocalRunner, StageTask, run_shard
from builders.core.shards import read_rows, read_stats, write_shard
from builders.core.step import FitInputs, Pipeline, Step

from .test_invalidation import Ids, ReadText


@dataclass(eq=False)
class RowRead(ReadText):
    """Reads each item's own file (a per-item input, digested as ``ReadText`` does), one row at a time; drops an
    item without a file."""

    name = "row_read"
    row_wise = True
    calls: ClassVar[list[str]] = []

    def process(self, rows, out: Out) -> None:
        for r in rows:
            RowRead.calls.append(r["id"])
            p = self.texts / f"{r['id']}.txt"
            if not p.exists():
                out.drop(r["id"], "no_text", "no file")
                continue
            words = p.read_text().split()
            out.keep({**r, "words": words})
            out.count("texts_read")
            out.count("words_read", len(words))


@dataclass(eq=False)
class RowFlaky(Step):
    """Row-wise; raises a data error on the ids in ``broken`` (the runner drops them as ``step_error``)."""

    name = "row_flaky"
    row_wise = True
    calls: ClassVar[list[str]] = []
    broken: ClassVar[set[str]] = set()

    def process(self, rows, out: Out) -> None:
        for r in rows:
            RowFlaky.calls.append(r["id"])
            if r["id"] in RowFlaky.broken:
                raise ValueError(f"cannot handle {r['id']}")
            out.keep({**r, "n": len(r["words"])})
            out.count("long" if len(r["words"]) > 3 else "short")


@dataclass(eq=False)
class Plain(Step):
    """Not row-wise: a redone shard processes every row."""

    name = "plain"
    calls: ClassVar[list[str]] = []

    def process(self, rows, out: Out) -> None:
        for r in rows:
            Plain.calls.append(r["id"])
            out.keep({**r, "double": 2 * r["n"]})


@dataclass(eq=False)
class Scaled(Step):
    """A row-wise global stage: its fitted state (the longest item) is in every row."""

    name = "scaled"
    row_wise = True
    calls: ClassVar[list[str]] = []

    def fit(self, inputs: FitInputs) -> int:
        return max((r["n"] for r in inputs.data.rows(["n"])), default=0)

    def process(self, rows, out: Out) -> None:
        for r in rows:
            Scaled.calls.append(r["id"])
            out.keep({**r, "longest": self.state})


def _inputs(root: Path, n: int = 12) -> tuple[Path, Path]:
    texts = root / "texts"
    texts.mkdir(parents=True)
    for i in range(n):
        (texts / f"v{i:02d}.txt").write_text(" ".join(["w"] * (i % 5 + 1)))
    ids = root / "ids.txt"
    ids.write_text("\n".join(f"v{i:02d}" for i in range(n)))
    old = 1_700_000_000  # older than the fingerprint memo's racy window
    import os

    for p in [ids, *texts.iterdir()]:
        os.utime(p, (old, old))
    return ids, texts


def _run(ids: Path, texts: Path, work: Path, with_global: bool = False):
    for cls in (RowRead, RowFlaky, Plain, Scaled):
        cls.calls = []
    steps: list[Step] = [RowRead(texts=texts), RowFlaky(), Plain()]
    if with_global:
        steps.append(Scaled())
    return run_pipelines([Pipeline("items", Ids(ids_file=ids), steps, shard_size=4)], work, LocalRunner(),
                         progress=False, log=lambda *_: None)


def _shards(work: Path, step: str) -> list[dict[str, Any]]:
    (folder,) = (work / "items").glob(f"*_{step}-*")
    return [{k: v for k, v in read_stats(folder, i).items() if k not in ("seconds",)} for i in range(3)]


def _edit(path: Path, text: str) -> None:
    import os

    path.write_text(text)
    os.utime(path, (1_700_000_100, 1_700_000_100))


def test_an_edited_item_is_the_only_row_processed_again(tmp_path):
    ids, texts = _inputs(tmp_path / "in")
    first = _run(ids, texts, tmp_path / "w")
    assert sorted(RowRead.calls) == [f"v{i:02d}" for i in range(12)]
    assert first.this_build()["rows_reused"] == 0

    _edit(texts / "v05.txt", "one two three four five six seven")
    edited = _run(ids, texts, tmp_path / "w")
    assert RowRead.calls == ["v05"] and RowFlaky.calls == ["v05"]     # not v04, v06, v07 of its shard
    assert sorted(Plain.calls) == ["v04", "v05", "v06", "v07"]         # a step that is not row-wise redoes the shard
    assert edited.steps["row_read"].computed_shards == 1
    assert edited.steps["row_read"].rows_reused == 3 and edited.this_build()["rows_reused"] == 6
    # this build's counters are those of the row computed now; the shard's are those of all its rows
    assert edited.this_build()["counters"] == {"texts_read": 1, "words_read": 7, "long": 1}
    assert edited.counters()["texts_read"] == 12
    rows = {r["id"]: r for r in edited.outputs["items"].rows()}
    assert rows["v05"]["n"] == 7 and rows["v05"]["double"] == 14 and rows["v04"]["double"] == 10

    # the shards are those a build of the edited inputs from scratch writes: rows, drops, counters, memo
    fresh = tmp_path / "fresh"
    _run(ids, texts, fresh)
    for step in ("row_read", "row_flaky", "plain"):
        got, want = _shards(tmp_path / "w", step), _shards(fresh, step)
        for g, w in zip(got, want):
            g.pop("rows_reused", None), g.pop("counters_computed", None)
            assert g == w


def test_a_dropped_row_is_reused_as_a_drop(tmp_path):
    ids, texts = _inputs(tmp_path / "in")
    (texts / "v06.txt").unlink()
    first = _run(ids, texts, tmp_path / "w")
    assert first.steps["row_read"].dropped == {"no_text": 1}
    _edit(texts / "v05.txt", "a b")
    again = _run(ids, texts, tmp_path / "w")
    assert RowRead.calls == ["v05"]
    assert again.steps["row_read"].dropped == {"no_text": 1} and again.steps["row_read"].kept == 11
    assert again.drop_counts() == first.drop_counts()


def test_rows_dropped_with_step_error_are_retried_when_their_shard_is_redone(tmp_path):
    ids, texts = _inputs(tmp_path / "in")
    RowFlaky.broken = {"v06"}
    try:
        first = _run(ids, texts, tmp_path / "w")
        assert first.steps["row_flaky"].dropped == {"step_error": 1}
        RowFlaky.broken = set()
        _edit(texts / "v05.txt", "a b c d e f")
        again = _run(ids, texts, tmp_path / "w")
    finally:
        RowFlaky.broken = set()
    assert sorted(RowFlaky.calls) == ["v05", "v06"]      # v06 failed before: never reused
    assert again.steps["row_flaky"].dropped == {} and again.steps["row_flaky"].kept == 12


def test_a_shard_where_every_row_fails_alike_raises(tmp_path):
    ids, texts = _inputs(tmp_path / "in", n=4)
    RowFlaky.broken = {"v00", "v01", "v02", "v03"}
    try:
        with pytest.raises(ValueError, match="cannot handle"):
            _run(ids, texts, tmp_path / "w")
    finally:
        RowFlaky.broken = set()


def test_a_refitted_state_redoes_every_row(tmp_path):
    ids, texts = _inputs(tmp_path / "in")
    _run(ids, texts, tmp_path / "w", with_global=True)
    _edit(texts / "v00.txt", " ".join(["w"] * 9))            # the longest item changes: a new fitted state
    res = _run(ids, texts, tmp_path / "w", with_global=True)
    assert RowRead.calls == ["v00"]
    assert sorted(Scaled.calls) == [f"v{i:02d}" for i in range(12)]
    assert {r["longest"] for r in res.outputs["items"].rows()} == {9}


def test_duplicate_ids_keep_no_memo_and_are_recomputed(tmp_path):
    step = RowFlaky()
    src, dst = tmp_path / "in", tmp_path / "out"
    rows = [{"id": "a", "words": ["x"]}, {"id": "a", "words": ["y", "z"]}, {"id": "b", "words": []}]
    write_shard(src, 0, rows, [], {"rows_in": 3, "kept": 3, "dropped": {}, "counters": {}})
    task = StageTask(step, None, src, dst)
    RowFlaky.calls = []
    stats = run_shard(task, 0)
    assert MEMO_KEY not in stats and stats["kept"] == 3
    run_shard(task, 0)
    assert RowFlaky.calls == ["a", "a", "b", "a", "a", "b"]


def test_the_memo_records_each_rows_digest_and_counters(tmp_path):
    step = RowFlaky()
    src, dst = tmp_path / "in", tmp_path / "out"
    rows = [{"id": "a", "words": ["x"] * 5}, {"id": "b", "words": []}]
    write_shard(src, 0, rows, [], {"rows_in": 2, "kept": 2, "dropped": {}, "counters": {}})
    task = StageTask(step, None, src, dst)
    stats = run_shard(task, 0)
    memo = stats[MEMO_KEY]
    assert set(memo) == {"a", "b"} and memo["a"][1] == {"long": 1} and memo["b"][1] == {"short": 1}
    # the digest of the row as the shard reader returns it: its pickle (protocol 5)
    as_read = read_rows(src, 0)[0]
    assert as_read == rows[0] and list(as_read) == ["id", "words"]
    want = hashlib.sha256(pickle.dumps(as_read, protocol=5)).hexdigest()[:32]
    assert memo["a"][0] == want
    # a changed row: only it is processed; the other's counters come from the memo
    write_shard(src, 0, [rows[0], {"id": "b", "words": ["p", "q", "r", "s"]}], [],
                {"rows_in": 2, "kept": 2, "dropped": {}, "counters": {}})
    RowFlaky.calls = []
    stats = run_shard(task, 0)
    assert RowFlaky.calls == ["b"]
    assert stats["counters"] == {"long": 2} and stats["counters_computed"] == {"long": 1}
    assert stats["rows_reused"] == 1
