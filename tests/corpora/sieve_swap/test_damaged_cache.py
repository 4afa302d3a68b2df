"""A damaged work shard is recomputed, never used (issue 34, item 1), through the real ``python -m builders.build``.

The issue's scenario: the Sieve & Swap sample is built; one byte inside a text value of a ``clean_transcript`` work
shard is flipped (the file stays readable Parquet: only its sha256 and page checksum tell); the next build that reads
the shard (``--set title_min_shared=2``: the title sieve and everything after it are computed again from the cleaned
transcripts) exits 0, says so in one warning line naming the shard, counts it in ``stats.json`` (``this_build``),
recomputes that one shard and no other of the stages before, and writes a release row-identical to a build with the
same setting into a fresh work directory. A shard cut short gives the same outcome. A damaged *input* of the user is
not a cache: it still stops the build with an ``error:`` line naming it.

Four sample builds in all (base, reference, two rebuilds); the two damage tests put the work directory back as the
base build left it (the ``title_min_shared=2`` stage folders removed) before they damage it, so either runs alone.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import main
from tests.samples.row_digests import release_digests

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "builders" / "samples" / "sieve_swap"
#: the rebuild's setting: title_sieve (and the stages after it) reads every clean_transcript shard again
SETTING = ("--set", "title_min_shared=2")
#: the stages before clean_transcript (both pipelines): a damaged clean_transcript shard recomputes none of them
UPSTREAM = ("read_metadata", "cooking_filter", "exclusion_filter", "load_transcript", "duration_filter",
            "task_size_filter", "read_recipes", "recipe_clean", "recipe_dedup", "recipe_lemmas")


def build(out: Path, work: Path, *extra: str) -> tuple[int, str, Path]:
    """``python -m builders.build sieve_swap --out OUT --work-dir WORK EXTRA`` in-process: (exit, stderr, release)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["sieve_swap", "--out", str(out), "--work-dir", str(work), "--no-progress", "-q", *extra])
    return rc, err.getvalue(), out / "sieve_swap"


def stats(release: Path) -> dict:
    return json.loads((release / "stats.json").read_text(encoding="utf-8"))


def release_rows_text(release: Path) -> str:
    """Every row of every config of a release as one JSON text (to look for a string anywhere in it)."""
    return json.dumps({str(p.relative_to(release)): pq.read_table(p).to_pylist()
                       for p in sorted(release.glob("*/*.parquet"))}, default=str)


def segment_texts(release: Path, config: str = "raw_asr") -> set[str]:
    return {s["text"] for p in sorted((release / config).glob("*.parquet"))
            for r in pq.read_table(p).to_pylist() for s in r["segments"]}


@dataclass
class Base:
    work: Path
    stage_folders: set[Path]        # every stage folder the base build made
    clean: Path                     # its clean_transcript stage folder
    shards: dict[str, bytes]        # part-0000k.parquet -> bytes, as the base build wrote them


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    root = tmp_path_factory.mktemp("sieve_damaged_base")
    rc, err, _ = build(root / "out", root / "work")
    assert rc == 0, err[-3000:]
    work = root / "work"
    clean = next((work / "videos").glob("06_clean_transcript-*"))
    shards = {p.name: p.read_bytes() for p in sorted(clean.glob("part-*.parquet")) if ".drops." not in p.name}
    assert len(shards) == 5  # the sample's videos, in five shards
    folders = {p for pipe in ("videos", "recipes") for p in (work / pipe).iterdir() if p.is_dir()}
    return Base(work, folders, clean, shards)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The sample built with ``title_min_shared=2`` into a fresh work directory: what the rebuilds must give."""
    root = tmp_path_factory.mktemp("sieve_damaged_reference")
    rc, err, release = build(root / "out", root / "work", *SETTING)
    assert rc == 0, err[-3000:]
    return release


def as_base_left_it(base: Base) -> None:
    """Remove the stage folders an earlier rebuild of this module made (the ``title_min_shared=2`` generation), so
    that title_sieve reads clean_transcript again; the base build's folders and shards are untouched."""
    for pipe in ("videos", "recipes"):
        for p in (base.work / pipe).iterdir():
            if p.is_dir() and p not in base.stage_folders:
                shutil.rmtree(p)
    for name, data in base.shards.items():  # an earlier test's damaged shard was recomputed with these bytes
        assert (base.clean / name).read_bytes() == data, name
    assert all(p.is_dir() for p in base.stage_folders), "a base stage folder was garbage-collected"


def shard_holding(base: Base, texts: set[str], avoid: str | None = None) -> tuple[str, str]:
    """A clean_transcript shard (not ``avoid``) holding, as plain bytes once in its file, a segment text of
    ``texts`` (a text the reference release carries): ``(shard file name, text)``."""
    for name, data in base.shards.items():
        if name == avoid:
            continue
        for t in sorted(texts):
            if len(t) >= 20 and data.count(t.encode()) == 1:
                return name, t
    raise AssertionError("no clean_transcript shard holds a released segment text as plain bytes")


def flip_in_text(path: Path, text: str) -> str:
    """Flip the low bit of one letter near the middle of ``text``'s bytes in ``path`` (a letter stays a letter);
    returns the corrupted text."""
    data = bytearray(path.read_bytes())
    start = data.find(text.encode())
    for k in range(len(text) // 2, len(text)):
        c = text[k]
        if c.isascii() and c.islower() and chr(ord(c) ^ 1).islower():
            data[start + k] ^= 0x01
            path.write_bytes(bytes(data))
            return text[:k] + chr(ord(c) ^ 1) + text[k + 1:]
    raise AssertionError(f"no letter to flip in {text!r}")


def check_recomputed(base: Base, reference: Path, release: Path, rc: int, err: str, shard: str,
                     before: dict[str, int]) -> None:
    """The outcome both damages share: exit 0, one warning naming the shard, counted, only that shard of the stages
    up to clean_transcript recomputed (with the bytes it had), a release identical to the reference."""
    assert rc == 0, err[-3000:]
    name = f"videos/{base.clean.name}/{shard}"
    damaged = [line for line in err.splitlines() if "damaged" in line]
    assert len(damaged) == 1, err[-3000:]
    assert damaged[0].startswith(f"warning: damaged cache file {name} (") and damaged[0].endswith(
        "): recomputing it"), damaged[0]
    st = stats(release)
    assert st["this_build"]["damaged_caches_recomputed"] == 1
    assert st["this_build"]["damaged_cache_files"] == [name]
    clean = st["steps"]["clean_transcript"]
    assert (clean["shards"], clean["computed_shards"], clean["cached_shards"]) == (5, 1, 4)
    assert {s: st["steps"][s]["computed_shards"] for s in UPSTREAM} == dict.fromkeys(UPSTREAM, 0)
    for other, data in base.shards.items():  # the damaged shard recomputed bit for bit, no other one touched
        path = base.clean / other
        assert path.read_bytes() == data, other
        if other != shard:
            assert path.stat().st_mtime_ns == before[other], other
    assert (base.clean / shard).stat().st_mtime_ns != before[shard]  # written again
    assert release_digests(release) == release_digests(reference)


def mtimes(base: Base) -> dict[str, int]:
    return {name: (base.clean / name).stat().st_mtime_ns for name in base.shards}


def test_a_flipped_byte_in_a_readable_shard_is_recomputed(base, reference, tmp_path):
    as_base_left_it(base)
    shard, text = shard_holding(base, segment_texts(reference))
    path = base.clean / shard
    before = mtimes(base)
    corrupted = flip_in_text(path, text)
    # the damage is silent to a plain reader: the file is still Parquet and now holds the corrupted text
    read_back = {s["text"] for r in pq.read_table(path).to_pylist() for s in r["asr_segments"]}
    assert corrupted in read_back and text not in read_back
    assert path.read_bytes() != base.shards[shard] and path.stat().st_size == len(base.shards[shard])

    rc, err, release = build(tmp_path / "out", base.work, *SETTING)
    check_recomputed(base, reference, release, rc, err, shard, before)
    # the release carries the segment as the input has it, and the corrupted text nowhere
    assert text in segment_texts(release)
    assert corrupted not in release_rows_text(release)


def test_a_shard_cut_short_is_recomputed(base, reference, tmp_path):
    as_base_left_it(base)
    flipped, _ = shard_holding(base, segment_texts(reference))
    shard, _ = shard_holding(base, segment_texts(reference), avoid=flipped)  # another shard than the flip test's
    path = base.clean / shard
    before = mtimes(base)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception):  # noqa: B017 - not Parquet any more (pyarrow's own error type)
        pq.read_table(path)

    rc, err, release = build(tmp_path / "out", base.work, *SETTING)
    check_recomputed(base, reference, release, rc, err, shard, before)


def test_a_damaged_input_still_fails_clearly(base, tmp_path):
    """The user's recipes CSV replaced by garbage bytes, with the sample's other inputs and the work directory whose
    caches hold the sample: exit 2, one ``error:`` line naming the file, no cache "repair", no release."""
    inputs = tmp_path / "inputs"
    shutil.copytree(SAMPLE, inputs)
    bad = inputs / "recipes.csv"
    bad.write_bytes(bytes(range(256)) * 8)
    flags = ["--videos", "HowTo100M_v1.csv", "--tasks", "task_ids.csv", "--titles", "video_titles.csv",
             "--durations", "video_durations.csv", "--transcripts", "raw_caption.json", "--recipes", "recipes.csv",
             "--exclude", "exclude_ids.txt"]
    args = [str(inputs / f) if not f.startswith("--") else f for f in flags]
    rc, err, release = build(tmp_path / "out", base.work, *args)
    assert rc == 2, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(bad) in errors[0] and "not a RecipeNLG CSV" in errors[0], err[-3000:]
    assert "damaged cache" not in err and "recomputing" not in err and "Traceback" not in err
    assert not release.exists()


def test_a_damaged_recipe_index_is_built_again(base, tmp_path):
    """Issue 36 item 1: a flipped byte in the sieves' recipe index (a memory-mapped cache file) found by a worker
    that opens it (the content sieve's shard left unfinished, as by a kill, its fit done): one warning naming the
    content sieve's fit record, the fit is redone, the index built again, and the release is the base build's."""
    from builders.corpora.sieve_swap import recipe_index

    as_base_left_it(base)
    (folder,) = list((base.work / "cache" / "recipe_index").iterdir())
    path = folder / "body_indices.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    content = next((base.work / "videos").glob("08_content_sieve-*"))
    (content / "part-00000.stats.json").unlink()   # unfinished: its worker opens the index
    built = sum(recipe_index.BUILDS.values())

    rc, err, release = build(tmp_path / "out", base.work)
    assert rc == 0, err[-3000:]
    damaged = [line for line in err.splitlines() if "damaged" in line]
    assert len(damaged) == 1 and f"videos/{content.name}/_fit/_complete.json" in damaged[0], err[-3000:]
    assert sum(recipe_index.BUILDS.values()) == built + 1
    assert recipe_index.RecipeIndex.open(folder).size > 0      # checked again: whole
    st = stats(release)["steps"]["content_sieve"]
    assert st["fit"] == "ran" and st["computed_shards"] == 1
    assert release_digests(release) == release_digests(base.work.parent / "out" / "sieve_swap")
