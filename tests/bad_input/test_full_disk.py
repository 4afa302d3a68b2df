"""A full disk under ``--out`` or ``--work-dir`` (issue 20; docs/architecture.md, "Failures"): the real
``python -m builders.build`` CLI, with a small corpus whose release goes through the real release flow
(``builders.release.flow.write_release``: staging folder, gate, swap), on a 2 MiB tmpfs. Expected: exit 2, one
``error:`` line naming the full disk, no traceback, no staging folder left, and the previous release in ``--out``
byte for byte as it was.

Mounting needs root and a kernel that allows it here; otherwise the tests are skipped, saying why.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import REPO
from .toy_corpus import add_arguments, overrides_from_args, resolve_inputs  # noqa: F401 - the corpus hooks

# ------------------------------------------------------------------------- the corpus (module-level interface)

NAME = "diskfill"
DEFAULT_SHARD_SIZE = 50
ROW_BYTES = 4096          # random hex text per row: Parquet cannot compress it below the tmpfs size


@dataclass(frozen=True)
class Config:
    n: int = 20             # rows; 20 fit a 2 MiB tmpfs with room, 800 do not
    tag: str = "a"          # changes every row (a new release key)
    limit: int | None = None


def pipelines(cfg: Config, shard_size: int):
    from builders.core.step import Pipeline, Source, Step

    @dataclass(eq=False)
    class Rows(Source):
        name = "make_rows"
        n: int
        tag: str

        def read(self):
            for i in range(self.n):
                seed = hashlib.sha256(f"{self.tag}-{i}".encode()).digest()
                text = b"".join(hashlib.sha256(seed + bytes([k])).digest() for k in range(ROW_BYTES // 64)).hex()
                yield {"id": i, "text": text, "split": "test" if i % 5 == 0 else "train"}

    @dataclass(eq=False)
    class Keep(Step):
        name = "keep"

        def process(self, rows, out) -> None:
            for r in rows:
                out.keep(r)

    return [Pipeline("items", Rows(n=cfg.n, tag=cfg.tag), [Keep()], shard_size)]


def release(result, cfg: Config, out_dir: Path, info) -> dict:
    from datasets import Features, Value

    from builders.release.flow import ReleaseSpec, write_release

    data = result.outputs["items"]
    template = Path(os.environ["DISKFILL_TEMPLATE"])

    def rows(split: str):
        for r in data.rows():
            if r["split"] == split:
                yield {"id": r["id"], "text": r["text"]}

    spec = ReleaseSpec(
        corpus=NAME, title="Disk fill", report_title="Disk fill", default_config="items",
        features={"items": Features({"id": Value("int64"), "text": Value("string")})},
        card={"license": "cc-by-4.0", "pretty_name": "Disk fill"}, card_template=template,
        split_order=("train", "test"), rows={"items": {s: (lambda s=s: rows(s)) for s in ("train", "test")}},
        report_videos=(), stats_extra=lambda: {"quantities": {}}, models=lambda: {})
    return write_release(result, cfg, out_dir, dict(info), spec)


# ------------------------------------------------------------------------------------------------ helpers


@pytest.fixture
def tiny_disk(tmp_path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted under ``tmp_path`` (skipped when this process may not mount); unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


def _build(tmp_path: Path, out: Path, work: Path, *sets: str) -> subprocess.CompletedProcess:
    """``python -m builders.build`` (its ``main``) with this module as the corpus."""
    code = ("import sys; sys.path.insert(0, {tests!r}); import builders.build as b; "
            "from bad_input import test_full_disk as corpus; b.load_corpus = lambda name: corpus; "
            "sys.exit(b.main(['sieve_swap', '--out', {out!r}, '--work-dir', {work!r}, '--no-progress', '-q', "
            "*{sets!r}]))").format(tests=str(REPO / "tests"), out=str(out), work=str(work),
                                   sets=[a for s in sets for a in ("--set", s)])
    template = tmp_path / "card.md"
    template.write_text("Disk fill.\n\n$release_table\n", encoding="utf-8")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "DISKFILL_TEMPLATE": str(template)})


def _files(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root``."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _assert_one_disk_full_line(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert "no space left on the device" in errors[0], errors[0]
    assert "Check failed" not in done.stderr, done.stderr[-3000:]  # pyarrow's teardown noise is silenced


# ------------------------------------------------------------------------------------------------ the cases


def test_full_disk_under_out_keeps_the_previous_release(tmp_path, tiny_disk):
    out, work = tiny_disk, tmp_path / "work"
    first = _build(tmp_path, out, work)
    assert first.returncode == 0, first.stderr[-3000:]
    before = _files(out / NAME)
    assert "items/train-00000-of-00001.parquet" in before

    done = _build(tmp_path, out, work, "n=800", "tag=b")        # about 6 MiB of Parquet: the release cannot fit
    _assert_one_disk_full_line(done)
    assert _files(out / NAME) == before                          # the previous release, byte for byte
    assert sorted(p.name for p in out.iterdir()) == [f".{NAME}.lock", NAME]   # no staging or .old folder left


def test_full_disk_under_work_dir(tmp_path, tiny_disk):
    out, work = tmp_path / "out", tiny_disk / "work"
    first = _build(tmp_path, out, tmp_path / "work0")
    assert first.returncode == 0, first.stderr[-3000:]
    before = _files(out / NAME)

    done = _build(tmp_path, out, work, "n=800", "tag=b")
    _assert_one_disk_full_line(done)
    assert _files(out / NAME) == before
    assert sorted(p.name for p in out.iterdir()) == [f".{NAME}.lock", NAME]
