"""A damaged release part or scan partial is made again, never used (issue 34, item 1), through the real CLI.

The release of a build is written from per-work-shard parts (``<stage>/_release/<config>/<i>-<key>.arrow``) and
scan partials (``<stage>/_release/_scan-<name>/<i>-<key>.pkl``) kept in the work directory. Here: a tiny HowToStep
build (four bundled transcripts, a replayed LLM, hash encoders, simulated features, two videos a shard), then one part
or partial damaged, the release folder removed and the same build run again in a new process: every stage is reused
and the release is written again from the parts. It exits 0 with one warning line naming the damaged file, makes
that one file again from its work shard (with the bytes it had), reuses every other, and releases the same rows.

The release folder is removed, not only its ``README.md``: a rewrite takes the Parquet shards of a config whose parts
did not change from the release in place (``builders.release.incremental.reuse_outputs``, by the digests recorded
when the parts were written), so it reads no part at all and the damage is neither read nor repaired then.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.corpora.howtostep.conftest import FAST, GOOD, build_ok, make_inputs
from tests.samples.row_digests import release_digests

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Built:
    out: Path
    args: list[str]
    digests: dict
    files: dict[Path, bytes]        # every part and scan partial of the work directory, as written

    @property
    def release(self) -> Path:
        return self.out / "howtostep"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    d = tmp_path_factory.mktemp("damaged_part_build")
    inp = make_inputs(d / "inputs", list(GOOD))
    args = [*inp.args, *FAST, "--set", "epsilon1=0", "--set", "epsilon2=-1", "--shard-size", "2",
            "--work-dir", str(d / "work")]
    release = build_ok(d / "out", *args)
    files = {p: p.read_bytes() for p in sorted((d / "work" / "videos").glob("*/_release/*/*"))
             if p.suffix in (".arrow", ".pkl")}
    # four configs of two parts each (narrations, llm_outputs, dropped_steps, steps), and their scans' partials
    assert sum(p.suffix == ".arrow" for p in files) == 8 and any(p.suffix == ".pkl" for p in files)
    return Built(d / "out", args, release_digests(release), files)


def cli(built: Built) -> subprocess.CompletedProcess:
    """The same build again in its own process (no part is known from an earlier read)."""
    return subprocess.run([sys.executable, "-m", "builders.build", "howtostep", "--out", str(built.out),
                           "--no-progress", "-q", *built.args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)


def target(built: Built, kind: str) -> Path:
    """Shard 1's part of the ``steps`` config, or shard 1's partial of the ``videos`` scan (the final stage's)."""
    pattern = "*_require_grounded_steps-*/_release/steps/00001-*.arrow" if kind == "part" else \
        "*_require_grounded_steps-*/_release/_scan-videos/00001-*.pkl"
    (path,) = [p for p in built.files if p.match(pattern)]
    return path


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x01
    else:
        del data[len(data) // 2:]
    path.write_bytes(bytes(data))


def rebuild_after(built: Built, path: Path, how: str) -> tuple[subprocess.CompletedProcess, dict[Path, int]]:
    """Damage ``path``, remove the release folder, build again: (the run, the other files' mtimes before)."""
    for p, data in built.files.items():  # as the first build wrote them (an earlier test remade its file)
        assert p.read_bytes() == data, p
    before = {p: p.stat().st_mtime_ns for p in built.files if p != path}
    damage(path, how)
    assert path.read_bytes() != built.files[path]
    shutil.rmtree(built.release)
    done = cli(built)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, before


@pytest.mark.parametrize("kind,how", [("part", "flip"), ("part", "cut"), ("partial", "flip")])
def test_a_damaged_part_is_made_again_and_the_release_is_unchanged(built, kind, how):
    path = target(built, kind)
    done, before = rebuild_after(built, path, how)
    what = "damaged release part" if kind == "part" else "damaged release scan partial"
    damaged = [line for line in done.stderr.splitlines() if "damaged" in line.replace(str(built.out.parent), "")]
    assert len(damaged) == 1 and f"{what} {path} (" in damaged[0], done.stderr[-3000:]
    assert path.read_bytes() == built.files[path]  # made again from its work shard, with the same bytes
    assert all(p.stat().st_mtime_ns == t for p, t in before.items()), "another part or partial was written"
    assert release_digests(built.release) == built.digests
    work = json.loads((built.release / "stats.json").read_text(encoding="utf-8"))["this_build"]
    assert work["shards_computed"] == 0  # only the release's cache was damaged: no stage runs again
    if kind == "part":
        assert work["release_parts"] == {"made": 1, "reused": 7}


def test_a_remade_part_is_counted_with_the_damaged_caches(built):
    path = target(built, "part")
    rebuild_after(built, path, "flip")
    assert path.read_bytes() == built.files[path]
    work = json.loads((built.release / "stats.json").read_text(encoding="utf-8"))["this_build"]
    assert work["damaged_caches_recomputed"] == 1
    assert work["damaged_cache_files"] == [path.relative_to(built.out.parent / "work").as_posix()]
