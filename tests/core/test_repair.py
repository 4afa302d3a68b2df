"""A damaged cache file is recomputed, never used (builders/core/checked.py, builders/core/repair.py): a toy corpus
built through ``run_build``, one of its work files damaged on disk, built again. The rebuild exits normally, says so
on stderr, recomputes exactly the shard that owned the file and releases what an undamaged build releases."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from builders.core.atomic import atomic_write_bytes, atomic_write_text
from builders.core.checked import read_checked_bytes
from builders.core.driver import BuildOptions, run_build
from builders.core.errors import DamagedCache, InputError
from builders.core.repair import Repairs, damaged_in
from builders.core.step import Pipeline, Source, Step, input_path

SHARD = 4


@dataclass(frozen=True)
class Config:
    numbers: str = ""
    suffix: str = "!"          # a parameter of the last step: changing it re-reads the middle stage
    tag: str = ""              # a parameter of the first step: changing it re-reads the source
    limit: int | None = None


@dataclass(eq=False)
class Numbers(Source):
    """``n`` integers from a JSON list (the user's input); 10 of them: shards of 4, 4 and 2 rows."""

    name = "read_numbers"
    numbers: Path = input_path()

    def read(self):
        try:
            values = json.loads(self.numbers.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"{self.numbers}: not a JSON list of numbers ({e})") from None
        for v in values:
            yield {"id": f"n{v}", "value": v}


def text_of(value: int) -> str:
    """A text that Parquet's compression leaves as it is (so a byte of it can be found and flipped in the file)."""
    return hashlib.sha1(str(value).encode()).hexdigest()


@dataclass(eq=False)
class Spell(Step):
    """Text for each number; multiples of 5 are dropped (a shard with a drops file)."""

    name = "spell"
    tag: str = ""
    calls: ClassVar[list[str]] = []

    def process(self, rows, out) -> None:
        for r in rows:
            Spell.calls.append(r["id"])
            if r["value"] % 5 == 0:
                out.drop(r["id"], "multiple_of_five", f"value {r['value']}")
            else:
                out.keep({**r, "text": self.tag + text_of(r["value"])})


@dataclass(eq=False)
class Blob(Step):
    """Writes each row's text to a content-named file under ``<work_dir>/cache/blobs`` and names it in the row (as
    the HowToStep feature store does): a file the rows of this stage own."""

    name = "blob"
    owns_cache = ("blobs",)
    folder: str = ""
    calls: ClassVar[list[str]] = []

    def process(self, rows, out) -> None:
        for r in rows:
            Blob.calls.append(r["id"])
            data = r["text"].encode()
            sha = hashlib.sha256(data).hexdigest()
            path = Path(self.folder) / f"{sha[:16]}.bin"
            atomic_write_bytes(path, data)
            out.keep({**r, "blob": str(path), "blob_sha": sha})

    def shards_naming(self, data, path: Path) -> list[int]:
        return [i for i in range(data.n) if any(r["blob"] == str(path) for r in data.shard_rows(i, ["blob"]))]


@dataclass(eq=False)
class Shout(Step):
    name = "shout"
    suffix: str = "!"

    def process(self, rows, out) -> None:
        for r in rows:
            text = read_checked_bytes(r["blob"], r["blob_sha"]).decode()
            out.keep({"id": r["id"], "shout": text.upper() + self.suffix})


def make_corpus(work_dir: Path) -> types.ModuleType:
    corpus = types.ModuleType("toy_repair")
    corpus.NAME = "toy_repair"
    corpus.DEFAULT_SHARD_SIZE = SHARD
    corpus.Config = Config
    corpus.add_arguments = lambda p: None
    corpus.overrides_from_args = lambda args: {}
    corpus.resolve_inputs = lambda cfg: (cfg, False)

    def pipelines(cfg: Config, shard_size: int) -> list[Pipeline]:
        return [Pipeline("numbers", Numbers(numbers=Path(cfg.numbers)),
                         [Spell(tag=cfg.tag), Blob(folder=str(work_dir / "cache" / "blobs")), Shout(suffix=cfg.suffix)],
                         shard_size)]

    def release(result, cfg, out_dir: Path, info) -> dict:
        rows = list(result.outputs["numbers"].rows())
        drops = sorted(d["item_id"] for d in result.drops())
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / "rows.json", json.dumps({"rows": rows, "drops": drops}))
        atomic_write_text(out_dir / "stats.json", json.dumps({"this_build": result.this_build()}))
        return {"default": {"train": len(rows)}}

    corpus.pipelines, corpus.release = pipelines, release
    return corpus


VALUES = [1, 2, 3, 5, 6, 7, 8, 9, 11, 15]   # shards: [1 2 3 5] [6 7 8 9] [11 15]


def build(tmp: Path, suffix: str = "!", name: str = "a", tag: str = "", engine: str = "local") -> tuple[dict, dict]:
    work = tmp / f"work-{name}"
    numbers = tmp / "numbers.json"
    if not numbers.exists():
        numbers.write_text(json.dumps(VALUES))
    Spell.calls.clear()
    Blob.calls.clear()
    opts = BuildOptions(out=tmp / f"out-{name}", work_dir=work, sets={"numbers": str(numbers), "suffix": suffix, "tag": tag},
                        progress=False, quiet=True, engine=engine, workers=2 if engine == "ray" else 1)
    run_build(make_corpus(work), opts)
    release = tmp / f"out-{name}" / "toy_repair"
    return (json.loads((release / "rows.json").read_text()),
            json.loads((release / "stats.json").read_text())["this_build"])


def stage_dir(tmp: Path, step: str, name: str = "a") -> Path:
    (d,) = (tmp / f"work-{name}" / "numbers").glob(f"*_{step}-*")
    return d


def flip(path: Path, needle: bytes | None = None) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(needle) if needle else len(data) // 2
    assert at >= 0, f"{needle!r} not in {path.name}"
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def built(tmp_path):
    rows, work = build(tmp_path)
    assert work["damaged_caches_recomputed"] == 0 and work["damaged_cache_files"] == []
    assert rows["drops"] == ["n15", "n5"]
    assert [r["shout"] for r in rows["rows"]][:2] == [text_of(1).upper() + "!", text_of(2).upper() + "!"]
    return tmp_path


def expected(tmp: Path, suffix: str, tag: str = "") -> dict:
    rows, _ = build(tmp, suffix=suffix, name="clean", tag=tag)
    return rows


@pytest.mark.parametrize("damage", ["flip_text", "cut", "stats", "drops"])
def test_a_damaged_work_shard_is_recomputed_alone(built, capfd, damage):
    """Shard 1 of ``blob`` (n6..n9) damaged; ``shout``'s new suffix makes the build read it again. The drops of
    ``spell``'s shard 0 (n5) are read by the release."""
    blob = stage_dir(built, "blob")
    if damage == "flip_text":
        target = blob / "part-00001.parquet"
        flip(target, text_of(7).encode())                  # one byte of one text value
    elif damage == "cut":
        target = blob / "part-00001.parquet"
        target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    elif damage == "stats":
        target = blob / "part-00001.stats.json"
        target.write_text('{"kept": 4, "dig')
    else:
        target = stage_dir(built, "spell") / "part-00000.drops.parquet"
        flip(target, b"n5")
    capfd.readouterr()
    rows, work = build(built, suffix="?")
    err = capfd.readouterr().err
    redone = {"spell": sorted(Spell.calls), "blob": sorted(Blob.calls)}
    assert rows == expected(built, "?")
    name = target.relative_to(built / "work-a").as_posix()
    assert work["damaged_cache_files"] == [name] and work["damaged_caches_recomputed"] == 1
    assert err.count("warning: damaged cache file") == 1 and name in err
    if damage == "drops":   # spell's shard 0 alone; it comes out byte-identical, so blob's shard 0 stays done
        assert redone == {"spell": ["n1", "n2", "n3", "n5"], "blob": []}
    else:                   # blob's shard 1 alone, from spell's intact shard
        assert redone == {"spell": [], "blob": ["n6", "n7", "n8", "n9"]}


def test_a_damaged_final_shard_is_recomputed_for_the_release(built, capfd):
    """The release reads the last stage: its damaged shard is recomputed, nothing upstream of it."""
    flip(stage_dir(built, "shout") / "part-00002.parquet", text_of(11).upper().encode())
    capfd.readouterr()
    rows, work = build(built)
    assert work["damaged_caches_recomputed"] == 1 and Spell.calls == [] and Blob.calls == []
    assert rows == expected(built, "!")
    assert "part-00002.parquet" in capfd.readouterr().err


def test_a_damaged_source_shard_is_listed_again(built, capfd):
    """A source is listed whole: its shards come out byte-identical, and ``spell`` (new tag) reads them all."""
    target = stage_dir(built, "read_numbers") / "part-00001.parquet"
    flip(target)
    capfd.readouterr()
    rows, work = build(built, tag="t-")
    assert work["damaged_cache_files"] == [target.relative_to(built / "work-a").as_posix()]
    assert capfd.readouterr().err.count("warning: damaged cache file") == 1
    assert rows == expected(built, "!", tag="t-")


def test_a_damaged_file_that_rows_name_recomputes_the_shards_naming_it(built, capfd):
    (blob,) = [p for p in (built / "work-a" / "cache" / "blobs").iterdir() if p.read_bytes() == text_of(11).encode()]
    flip(blob)
    capfd.readouterr()
    rows, work = build(built, suffix="?")
    assert sorted(Blob.calls) == ["n11"] and Spell.calls == []   # blob's shard 2 (n11; n15 was dropped) alone
    assert rows == expected(built, "?")
    assert work["damaged_cache_files"] == [blob.relative_to(built / "work-a").as_posix()]
    assert blob.read_bytes() == text_of(11).encode()
    assert capfd.readouterr().err.count("warning: damaged cache file") == 1


@pytest.mark.ray
def test_a_damaged_shard_read_in_a_ray_actor_is_recomputed(built):
    """Under ``--engine ray`` the damage is found inside an actor: Ray's task error still leads to the shard."""
    pytest.importorskip("ray")
    target = stage_dir(built, "blob") / "part-00001.parquet"
    flip(target, text_of(7).encode())
    rows, work = build(built, suffix="?", engine="ray")
    assert work["damaged_cache_files"] == [target.relative_to(built / "work-a").as_posix()]
    assert rows == expected(built, "?")


def test_a_damaged_input_of_the_user_is_an_error_not_a_repair(built):
    (built / "numbers.json").write_bytes(b"[1, 2, \xff")
    with pytest.raises(InputError, match="not a JSON list"):
        build(built)


def test_a_file_outside_the_work_directory_is_never_removed(tmp_path):
    outside = tmp_path / "elsewhere.parquet"
    outside.write_bytes(b"x")
    err = DamagedCache(outside, "sha256 differs")
    with pytest.raises(DamagedCache):
        Repairs(tmp_path / "work").forget(err, err)
    assert outside.exists()


def test_a_file_damaged_again_or_too_many_is_an_error(tmp_path):
    work = tmp_path / "work"
    shard = work / "p" / "01_s-0123456789ab" / "part-00000.parquet"
    shard.parent.mkdir(parents=True)
    repairs = Repairs(work, max_repairs=2)
    err = DamagedCache(shard, "cut")
    assert repairs.forget(err, err) == "p/01_s-0123456789ab/part-00000.parquet"
    with pytest.raises(RuntimeError, match="damaged again"):
        repairs.forget(err, err)
    other = DamagedCache(shard.with_name("part-00001.parquet"), "cut")
    repairs.forget(other, other)
    with pytest.raises(RuntimeError, match="more than 2 damaged cache files.*--fresh"):
        repairs.forget(DamagedCache(shard.with_name("part-00002.parquet"), "cut"), other)


def test_damaged_in_finds_a_wrapped_cause():
    cause = DamagedCache("x", "cut")

    class Wrapper(Exception):
        def __init__(self, cause: Any):
            super().__init__("worker failed")
            self.cause = cause

    assert damaged_in(Wrapper(cause)) is cause
    try:
        try:
            raise cause
        except DamagedCache as e:
            raise RuntimeError("in the release") from e
    except RuntimeError as e:
        assert damaged_in(e) is cause
    assert damaged_in(ValueError("other")) is None
    assert sys.modules[__name__]  # the module is importable under its package (no side effects at import)
