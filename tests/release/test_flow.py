"""The release flow (``builders.release.flow``) on a toy build: streamed configs, the up-to-date skip,
staging cleanup, swap recovery, ``SortedSpill`` and ``write_json_object``.

``toy_result``/``toy_spec``/``run_toy`` are also driven from subprocesses by ``test_swap.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datasets import Features, Value

from builders.core.orchestrate import BuildResult, StepStats
from builders.core.records import Drop
from builders.core.shards import StageData, write_shard
from builders.release import old_path, staging_root
from builders.release.flow import ReleaseSpec, release_key, write_release
from builders.release.streaming import SortedSpill, count_rows, write_json_object

FEATURES = Features({"id": Value("int64"), "text": Value("string")})
INFO = {"sample": True, "engine": "local", "workers": 1, "shard_size": 5}
SPLITS = ("train", "test")


@dataclass
class ToyConfig:
    tag: str = "a"


def toy_result(work: Path, n: int = 12, tag: str = "a", shard_rows: int = 5) -> BuildResult:
    """One final stage of ``n`` rows in shards of ``shard_rows`` rows, one drop per shard."""
    stage = Path(work) / "toy" / "00_items-000000000000"
    rows = [{"id": i, "text": f"{tag} row {i}", "split": "test" if i % 4 == 0 else "train"} for i in range(n)]
    k = 0
    for k, lo in enumerate(range(0, n, shard_rows)):
        part = rows[lo:lo + shard_rows]
        write_shard(stage, k, part, [Drop(f"gone{k}", "items", "too_short", f"{tag}")],
                    {"rows_in": len(part) + 1, "kept": len(part), "dropped": {"too_short": 1}, "counters": {},
                     "seconds": 0.01}, input_digest=f"in-{tag}-{k}")
    data = StageData(stage, k + 1)
    st = StepStats("toy", rows_in=n + k + 1, kept=n, dropped=Counter(too_short=k + 1), shards=k + 1)
    return BuildResult(outputs={"items": data}, stage_dirs=[("items", data)], steps={"items": st},
                       input_fingerprints={})


def _wait_for(path: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not Path(path).exists() and time.time() < deadline:
        time.sleep(0.02)


def toy_spec(result: BuildResult, template: Path, slow: str = "") -> ReleaseSpec:
    """The release of ``toy_result``: config ``items`` (train, test) streamed from the stage. ``slow``: a long write,
    seconds per row, or ``until:<path>``: the first row waits until that path exists."""
    data = result.outputs["items"]
    template.write_text("Toy release.\n\n$release_table\n", encoding="utf-8")

    def rows(split: str):
        for r in data.rows():
            if slow.startswith("until:"):
                _wait_for(slow[len("until:"):])
            elif slow:
                time.sleep(float(slow))
            if r["split"] == split:
                yield {"id": r["id"], "text": r["text"]}

    def videos():
        for r in data.rows(["id"]):
            yield {"video_id": str(r["id"]), "duration": 10.0 + r["id"],
                   "segments": [{"start": 0.0, "end": 1.5, "text": "cut the onion"}]}

    return ReleaseSpec(
        corpus="toy", title="Toy", report_title="Toy report", features={"items": FEATURES}, default_config="items",
        card={"license": "cc-by-4.0", "pretty_name": "Toy"}, card_template=template, split_order=SPLITS,
        rows={"items": {s: (lambda s=s: rows(s)) for s in SPLITS}}, report_videos=videos,
        stats_extra=lambda: {"quantities": {}}, models=lambda: {"none": {}})


def run_toy(out: str, work: str, tag: str, pre_sleep: str = "0", slow: str = "0", kill_between_renames: str = "0"
            ) -> None:
    """A whole toy build in this process (for subprocess tests): "pipelines" (``pre_sleep`` seconds, or until the
    path after ``until:`` exists), then ``write_release`` into ``<out>/toy``; prints the returned counts and whether
    the release was up to date.

    With ``kill_between_renames`` the process SIGKILLs itself between the two renames of ``swap_into_place``.
    """
    import signal

    if pre_sleep.startswith("until:"):
        _wait_for(pre_sleep[len("until:"):])
    else:
        time.sleep(float(pre_sleep))
    result = toy_result(Path(work), tag=tag)
    spec = toy_spec(result, Path(work) / "card.md", slow="" if slow == "0" else slow)
    if kill_between_renames == "1":
        real = os.replace

        def replace(src, dst, *a, **kw):
            if Path(src).parent.name == ".toy.incomplete" and Path(dst).name == "toy":
                os.kill(os.getpid(), signal.SIGKILL)  # the old release is aside, the new one not yet in place
            return real(src, dst, *a, **kw)

        os.replace = replace
    got = write_release(result, ToyConfig(tag), Path(out) / "toy", dict(INFO), spec)
    print(json.dumps({"counts": got, "up_to_date": got.up_to_date}))


def texts(root: Path) -> dict[str, list[str]]:
    """The ``text`` column of each split of the toy release, read from its shards."""
    out: dict[str, list[str]] = {}
    for p in sorted((root / "items").glob("*.parquet")):
        out.setdefault(p.name.split("-")[0], []).extend(pq.read_table(p)["text"].to_pylist())
    return out


def build(tmp_path: Path, tag: str = "a", n: int = 12, work: str = "work") -> tuple[BuildResult, ReleaseSpec]:
    result = toy_result(tmp_path / work, n=n, tag=tag)
    return result, toy_spec(result, tmp_path / work / "card.md")


# --------------------------------------------------------------------------------------------------- the flow


def test_write_release_streams_the_configs_and_records_the_key(tmp_path):
    result, spec = build(tmp_path)
    got = write_release(result, ToyConfig(), tmp_path / "out" / "toy", dict(INFO), spec)
    root = tmp_path / "out" / "toy"
    assert got == {"items": {"train": 9, "test": 3}} and not got.up_to_date
    assert texts(root)["test"] == ["a row 0", "a row 4", "a row 8"]
    man = json.loads((root / "manifest.json").read_text())
    assert man["release_key"] == got.key == release_key(result, ToyConfig(), INFO, spec)
    assert man["release_rows"] == {"items": {"train": 9, "test": 3}}
    assert set(man["release_files"]) >= {"README.md", "items/train-00000-of-00001.parquet", "drops.parquet"}
    assert pq.read_table(root / "drops.parquet").num_rows == 3
    stats = json.loads((root / "stats.json").read_text())
    assert stats["release"] == {"items": {"train": 9, "test": 3}} and "this_build" in stats
    assert "work done by this build" in (root / "report.html").read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".toy.lock", "toy"]  # no staging left


def test_an_unchanged_rerun_does_not_rewrite_the_release(tmp_path, capsys):
    result, spec = build(tmp_path)
    out = tmp_path / "out" / "toy"
    first = write_release(result, ToyConfig(), out, dict(INFO), spec)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    capsys.readouterr()

    def never():
        raise AssertionError("an up-to-date release must not read its rows")

    result, spec = build(tmp_path)  # the same shards again (a cached rerun)
    spec.rows = {"items": {s: never for s in SPLITS}}
    spec.report_videos = spec.stats_extra = spec.models = never
    t0 = time.perf_counter()
    again = write_release(result, ToyConfig(), out, dict(INFO), spec)
    assert time.perf_counter() - t0 < 5
    assert again == first and again.up_to_date
    assert "is up to date" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == stamps


@pytest.mark.parametrize("change", ["shard", "config", "missing_file", "truncated_file"])
def test_the_release_is_rewritten_when_its_key_or_files_differ(tmp_path, change):
    result, spec = build(tmp_path)
    out = tmp_path / "out" / "toy"
    write_release(result, ToyConfig(), out, dict(INFO), spec)
    cfg = ToyConfig()
    if change == "shard":
        result, spec = build(tmp_path, tag="b")  # new final shards: new digests
    elif change == "config":
        cfg = ToyConfig(tag="other")
    elif change == "missing_file":
        (out / "items" / "test-00000-of-00001.parquet").unlink()
    else:
        shard = out / "items" / "train-00000-of-00001.parquet"
        shard.write_bytes(shard.read_bytes()[:-10])
    again = write_release(result, cfg, out, dict(INFO), spec)
    assert not again.up_to_date and again == {"items": {"train": 9, "test": 3}}
    assert texts(out)["train"][0] == ("b row 1" if change == "shard" else "a row 1")


def test_release_key_reads_the_stage_digests_not_the_rows(tmp_path, monkeypatch):
    result, spec = build(tmp_path)
    key = release_key(result, ToyConfig(), INFO, spec)
    monkeypatch.setattr(StageData, "rows", lambda *a, **k: pytest.fail("the key must not read rows"))
    assert release_key(result, ToyConfig(), INFO, spec) == key
    other, _ = build(tmp_path, work="work2")  # same rows written elsewhere: same key
    assert release_key(other, ToyConfig(), INFO, spec) == key
    assert release_key(other, ToyConfig(), {**INFO, "sample": False}, spec) != key


def test_an_empty_build_goes_beside_the_release(tmp_path):
    from builders.release.flow import BuildEmpty

    result, spec = build(tmp_path)
    out = tmp_path / "out" / "toy"
    write_release(result, ToyConfig(), out, dict(INFO), spec)
    spec.empty = "nothing survived"
    with pytest.raises(BuildEmpty, match="nothing survived"):
        write_release(result, ToyConfig(), out, dict(INFO), spec)
    assert (out.parent / "toy.empty-build" / "stats.json").exists() and (out / "README.md").exists()
    assert not staging_root(out).exists()


def test_a_failing_row_source_leaves_the_old_release_and_no_staging(tmp_path):
    result, spec = build(tmp_path)
    out = tmp_path / "out" / "toy"
    write_release(result, ToyConfig(), out, dict(INFO), spec)
    before = texts(out)

    def broken():
        yield {"id": 1, "text": "fine"}
        raise RuntimeError("disk on fire")

    result, spec = build(tmp_path, tag="b")
    spec.rows["items"]["train"] = broken
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_release(result, ToyConfig(), out, dict(INFO), spec)
    assert texts(out) == before
    assert not staging_root(out).exists()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_staging_folders_are_cleaned_and_live_ones_kept(tmp_path):
    from builders.release.swap import _host

    out = tmp_path / "out" / "toy"
    root = staging_root(out)
    dead = root / f"{_host()}-{_dead_pid()}-deadbeef"
    (dead / "items").mkdir(parents=True)
    (root / f"{dead.name}.scratch").mkdir()
    (root / "README.md").parent.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("a leftover of the single staging folder of earlier versions")
    live_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = root / f"{_host()}-{live_proc.pid}-cafecafe"
        live.mkdir()
        elsewhere = root / f"otherhost-{_dead_pid()}-0badf00d"  # another machine's: not ours to judge
        elsewhere.mkdir()
        result, spec = build(tmp_path)
        write_release(result, ToyConfig(), out, dict(INFO), spec)
        assert sorted(p.name for p in root.iterdir()) == sorted([live.name, elsewhere.name])
    finally:
        live_proc.kill()
        live_proc.wait()
    assert texts(out)["test"] == ["a row 0", "a row 4", "a row 8"]


def test_a_swap_killed_between_its_renames_is_restored_before_writing(tmp_path, capsys):
    result, spec = build(tmp_path)
    out = tmp_path / "out" / "toy"
    write_release(result, ToyConfig(), out, dict(INFO), spec)
    os.replace(out, old_path(out))  # what a kill between the two renames of swap_into_place leaves
    again = write_release(result, ToyConfig(), out, dict(INFO), spec)
    assert again.up_to_date  # the restored release is the one this build would write
    assert "restored the previous release" in capsys.readouterr().err
    assert not old_path(out).exists() and texts(out)["test"] == ["a row 0", "a row 4", "a row 8"]


def test_count_rows_reads_the_footers(tmp_path):
    result, _ = build(tmp_path, n=13)
    assert count_rows(result.outputs["items"]) == 13


# -------------------------------------------------------------------------------------------- streaming helpers


def test_sorted_spill_sorts_on_disk_by_parts_and_keeps_ties_in_order(tmp_path):
    rows = [{"k": (i * 7919) % 50, "i": i, "part": i % 3} for i in range(1000)]
    spill = SortedSpill(tmp_path / "s", key=lambda r: r["k"], run_rows=64).extend(rows, part=lambda r: r["part"])
    assert len(list((tmp_path / "s").glob("run-*.pkl"))) > 10  # runs went to disk
    assert list(spill.rows()) == sorted(rows, key=lambda r: r["k"])  # Python's sort is stable: ties in insertion order
    assert list(spill.rows(1, 2)) == sorted((r for r in rows if r["part"] != 0), key=lambda r: r["k"])
    assert list(spill.rows(2)) == list(spill.rows(2))  # read as often as needed
    assert spill.count() == 1000 and spill.count(0) == 334 and list(spill.rows("absent")) == []


@pytest.mark.parametrize("indent", [None, 1])
def test_write_json_object_matches_json_dumps(tmp_path, indent):
    items = {"b": {"x": [1, 2.5, None]}, "a": "é", "c": []}
    p = tmp_path / "o.json"
    assert write_json_object(p, items.items(), indent=indent) == 3
    assert p.read_text(encoding="utf-8") == json.dumps(items, indent=indent, ensure_ascii=False)
    assert write_json_object(p, [], indent=indent) == 0 and p.read_text() == json.dumps({}, indent=indent)
    with pytest.raises(ValueError, match="duplicate key"):
        write_json_object(p, [("a", 1), ("a", 2)])
