"""The ShowHowTo release written from per-work-shard parts (issue 35 item 4; docs/corpora/showhowto.md "Test split"):
an edit remakes the release parts of the shards it recomputed and of the shards whose rows the split moved, the rest
are reused, and the release equals a fresh build's. Built from the sample's every-reason manifest without its two ASR
rows (no model runs) and its recorded LLM answers, replayed, as ``test_build`` does."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import main
from builders.ops.showhowto_split import choose_test_split

from .conftest import SAMPLE

pytestmark = pytest.mark.slow

SPLIT = ["--test-tasks", "2", "--test-size", "2", "--min-task-seqs", "1"]


def _copy_sample(root: Path) -> Path:
    """The sample without the rows transcribed by ASR (their videos have no transcript file)."""
    shutil.copytree(SAMPLE, root)
    lines = (root / "manifest_reasons.csv").read_text().splitlines()
    keep = [lines[0]] + [x for x in lines[1:] if "shwAsr" not in x]
    (root / "manifest_reasons.csv").write_text("\n".join(keep) + "\n")
    old = time.time() - 60  # older than the fingerprint memo's racy window, as inputs not just written are
    for p in root.rglob("*"):
        os.utime(p, (old, old))
    return root


def _build(out: Path, root: Path, *extra: str) -> dict:
    args = ["showhowto", "--out", str(out), "--no-progress", "-q", "--shard-size", "2",
            "--manifest", str(root / "manifest_reasons.csv"), "--videos", str(root / "HowTo100M_v1.csv"),
            "--tasks", str(root / "task_ids.csv"), "--set", "llm=replay",
            "--set", f"llm_replay={root / 'llm_outputs.jsonl'}", *extra]
    assert main(args) == 0
    return json.loads((out / "showhowto" / "stats.json").read_text())


def _splits(out: Path) -> dict[str, list[dict]]:
    root = out / "showhowto" / "sequences"
    return {s: [r for p in sorted(root.glob(f"{s}-*.parquet")) for r in pq.read_table(p).to_pylist()]
            for s in ("train", "test")}


def _ids(rows: list[dict]) -> list[str]:
    return [r["video_id"] for r in rows]


def test_the_release_split_is_the_ops_split_and_an_edit_remakes_one_part(tmp_path):
    root = _copy_sample(tmp_path / "sample")
    first = _build(tmp_path / "out", root, *SPLIT)
    parts = first["this_build"]["release_parts"]
    assert parts["reused"] == 0 and parts["made"] >= 5
    before = _splits(tmp_path / "out")
    seqs = before["train"] + before["test"]
    assert len(seqs) == 3 and len(before["test"]) == 2
    # the release's test set is the split op's on the released sequences (hash-order draw of 2 tasks of 3)
    records = [{"sequence_id": r["sequence_id"], "task_id": r["task_id"], "category_1": r["category_1"],
                "num_steps": r["num_steps"], "mean_score": r["mean_score"]} for r in seqs]
    assert set(_ids(before["test"])) == choose_test_split(records, test_tasks=2, min_task_seqs=1, test_size=2)
    assert first["showhowto"]["split"]["test_task_count"] == 2

    # one kept video's title is edited: its shard is recomputed, its part made again, the split stays
    edited = before["train"][0]["video_id"]
    manifest = root / "manifest_reasons.csv"
    text = manifest.read_text()
    line = next(x for x in text.splitlines() if x.startswith(edited + ","))
    fields = line.split(",")
    fields[2] = fields[2] + " Again"
    manifest.write_text(text.replace(line, ",".join(fields)))
    st = _build(tmp_path / "out", root, *SPLIT)
    assert st["this_build"]["release_parts"] == {"made": 1, "reused": parts["made"] - 1}
    after = _splits(tmp_path / "out")
    assert _ids(after["test"]) == _ids(before["test"]) and _ids(after["train"]) == _ids(before["train"])
    changed = [(a, b) for a, b in zip(before["train"], after["train"]) if a != b]
    assert len(changed) == 1 and changed[0][1]["title"] == changed[0][0]["title"] + " Again"

    _build(tmp_path / "fresh", root, *SPLIT)
    assert _splits(tmp_path / "fresh") == after


def test_a_split_that_moves_one_row_remakes_the_part_of_its_shard_only(tmp_path):
    """An official test list that gains one video moves that row from train to test: the part of its work shard is
    made again (keyed by the test ids among its rows), every other part is reused, no pipeline shard is computed."""
    root = _copy_sample(tmp_path / "sample")
    lst = tmp_path / "test_ids.txt"
    lst.write_text("shwRoastVg1\n")
    first = _build(tmp_path / "out", root, "--test-list", str(lst))
    assert _ids(_splits(tmp_path / "out")["test"]) == ["shwRoastVg1"]
    n = first["this_build"]["release_parts"]["made"]
    lst.write_text("shwRoastVg1\nshwShelf001\n")
    st = _build(tmp_path / "out", root, "--test-list", str(lst))
    assert st["this_build"]["release_parts"] == {"made": 1, "reused": n - 1}
    got = _splits(tmp_path / "out")
    assert sorted(_ids(got["test"])) == ["shwRoastVg1", "shwShelf001"] and "shwShelf001" not in _ids(got["train"])
    assert st["showhowto"]["split"] == {"method": "official list", "listed": 2, "found": 2, "test_sequences": 2,
                                        "train_sequences": 1, "test_task_count": 2}
    _build(tmp_path / "fresh", root, "--test-list", str(lst))
    assert _splits(tmp_path / "fresh") == got
