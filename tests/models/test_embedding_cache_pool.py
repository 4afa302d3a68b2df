"""The swap pool on disk (builders/models/embedding_cache.py): content-keyed blocks, one memory-mapped matrix shared
by the workers of a machine, checked when read."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from builders.core.errors import DamagedCache
from builders.models.embedding_cache import MAX_BLOCK_FACTOR, PoolBlocks, content_blocks, encode_pool, open_pool

REPO = Path(__file__).resolve().parents[2]


class FakeEncoder:
    """Deterministic vectors that, like a transformer's, depend in their last bits on the call they were computed in
    (here: on the number of texts of the call); records every call; raises a kill after ``fail_after`` calls."""

    model_id = "fake/encoder"

    def __init__(self, dim: int = 4, fail_after: int | None = None) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []
        self.fail_after = fail_after

    def encode(self, texts):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.calls.append(list(texts))
        base = np.array([[b / 255.0 for b in hashlib.sha256(t.encode()).digest()[:self.dim]] for t in texts],
                        dtype=np.float32)
        return (base + np.float32(1e-6) * len(texts)).astype(np.float32)


def is_cut(text: str, chunk_size: int) -> bool:
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big") % chunk_size == 0


STEPS = [f"step {i:04d} of the recipe" for i in range(600)]
POOL = STEPS[::-1] + STEPS[:40]  # pool rows: unsorted, with repeats (one step in several recipes)
CHUNK = 25


def reference(texts: list[str], chunk_size: int) -> np.ndarray:
    """Each content block encoded in its own call, rows gathered in the input order: what encode_pool must write."""
    unique = sorted(set(texts))
    enc, table = FakeEncoder(), []
    for a, b in content_blocks(unique, chunk_size):
        table.append(enc.encode(unique[a:b]))
    table = np.concatenate(table)
    return table[[unique.index(t) for t in texts]]


def build(tmp_path: Path, texts: list[str], enc: FakeEncoder, name: str = "pool.npy", chunk: int = CHUNK):
    out = tmp_path / name
    digest = encode_pool(enc, texts, PoolBlocks(tmp_path / "blocks"), out, chunk_size=chunk)
    return open_pool(out, digest, len(texts)), digest


def test_content_blocks_cut_after_hash_points_and_at_the_cap():
    unique = sorted(STEPS)
    blocks = content_blocks(unique, CHUNK)
    assert blocks[0][0] == 0 and blocks[-1][1] == len(unique)
    assert all(a < b for a, b in blocks) and all(b == a2 for (_, b), (a2, _) in zip(blocks, blocks[1:]))
    for a, b in blocks[:-1]:
        assert is_cut(unique[b - 1], CHUNK) or b - a == MAX_BLOCK_FACTOR * CHUNK
    assert not any(is_cut(t, CHUNK) for a, b in blocks for t in unique[a:b - 1])
    assert 600 / CHUNK / 3 < len(blocks) < 600 / CHUNK * 3  # about chunk_size texts a block
    assert content_blocks(unique, 1) == [(i, i + 1) for i in range(600)]
    assert content_blocks([], 5) == []
    with pytest.raises(ValueError):
        content_blocks(unique, 0)


def test_pool_rows_follow_the_input_and_each_block_is_one_call(tmp_path):
    enc = FakeEncoder()
    pool, _ = build(tmp_path, POOL, enc)
    assert isinstance(pool, np.memmap) and pool.dtype == np.float32 and pool.shape == (640, 4)
    assert np.array_equal(pool, reference(POOL, CHUNK))
    unique = sorted(set(POOL))
    assert enc.calls == [unique[a:b] for a, b in content_blocks(unique, CHUNK)]
    assert np.array_equal(pool[POOL.index(STEPS[3])], pool[600 + 3])  # a repeated step: the same vector
    # a pool smaller than the block size and without a cut point is one call: the vectors of one encoder call
    few = [t for t in STEPS if not is_cut(t, 10_000)][:50]
    enc = FakeEncoder()
    small, _ = build(tmp_path, few, enc, "small.npy", chunk=10_000)
    assert enc.calls == [sorted(few)] and np.array_equal(small, FakeEncoder().encode(few))
    empty, _ = build(tmp_path, [], FakeEncoder(), "empty.npy")
    assert empty.shape == (0, 4)


def test_one_added_or_removed_step_embeds_one_block_again(tmp_path):
    enc = FakeEncoder()
    build(tmp_path, POOL, enc, "v1.npy")
    n_blocks = len(enc.calls)
    assert n_blocks > 10
    added = next(t for t in (f"step {i:04d} and a new one" for i in range(100)) if not is_cut(t, CHUNK))
    enc = FakeEncoder()
    pool, _ = build(tmp_path, POOL + [added], enc, "v2.npy")
    assert len(enc.calls) == 1 and added in enc.calls[0]  # only the block it falls in
    assert np.array_equal(pool, reference(POOL + [added], CHUNK))
    removed = [t for t in POOL if t != STEPS[300]] if not is_cut(STEPS[300], CHUNK) else None
    assert removed is not None
    enc = FakeEncoder()
    pool, _ = build(tmp_path, removed, enc, "v3.npy")
    assert len(enc.calls) == 1 and STEPS[301] in enc.calls[0]  # the rest of the block it was in
    assert np.array_equal(pool, reference(removed, CHUNK))
    enc = FakeEncoder()
    build(tmp_path, list(reversed(POOL)), enc, "v4.npy")  # the same steps in another order: nothing embedded
    assert enc.calls == []


def test_a_killed_run_resumes_with_its_finished_blocks(tmp_path):
    killed = FakeEncoder(fail_after=3)
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path, POOL, killed)
    assert not (tmp_path / "pool.npy").exists() and not list(tmp_path.glob(".pool.npy.tmp.*"))
    resumed = FakeEncoder()
    pool, _ = build(tmp_path, POOL, resumed)
    unique = sorted(set(POOL))
    blocks = [unique[a:b] for a, b in content_blocks(unique, CHUNK)]
    assert resumed.calls == blocks[3:]
    assert np.array_equal(pool, reference(POOL, CHUNK))


def _block_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "blocks").rglob("*.npy"))


@pytest.mark.parametrize("damage", ["flip", "cut", "no digest"])
def test_a_damaged_block_is_encoded_again_never_used(tmp_path, caplog, damage):
    want, digest = build(tmp_path, POOL, FakeEncoder(), "first.npy")
    want = np.array(want)
    victim = _block_files(tmp_path)[2]
    if damage == "flip":  # one bit of a float: the file still loads as an .npy of the same shape
        data = bytearray(victim.read_bytes())
        data[-3] ^= 0x10
        victim.write_bytes(bytes(data))
    elif damage == "cut":
        victim.write_bytes(victim.read_bytes()[:-16])
    else:
        victim.with_suffix(".sha256").unlink()
    caplog.clear()
    enc = FakeEncoder()
    with caplog.at_level(logging.WARNING, logger="builders.models.embedding_cache"):
        pool, digest2 = build(tmp_path, POOL, enc, "second.npy")
    assert len(enc.calls) == 1  # that block only
    assert np.array_equal(pool, want) and digest2 == digest
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and str(victim) in warned[0]
    enc = FakeEncoder()
    build(tmp_path, POOL, enc, "third.npy")
    assert enc.calls == []  # written again, whole


def test_a_damaged_pool_is_not_mapped(tmp_path):
    pool, digest = build(tmp_path, POOL, FakeEncoder())
    del pool
    path = tmp_path / "pool.npy"
    data = bytearray(path.read_bytes())
    data[200] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedCache, match="sha256"):
        open_pool(path, digest, len(POOL))
    with pytest.raises(FileNotFoundError):
        open_pool(tmp_path / "missing.npy", digest, len(POOL))


WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from builders.models.embedding_cache import open_pool

    def status():
        fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
        return {k: int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssFile")}

    path, digest, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    before = status()
    pool = open_pool(path, digest, rows)
    total = float(np.asarray(pool[:, 0], dtype=np.float64).sum() + pool.sum(dtype=np.float64))  # every page read
    after = status()
    maps = [line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith(path)]
    print(json.dumps({"memmap": isinstance(pool, np.memmap), "anon": after["RssAnon"] - before["RssAnon"],
                      "file": after["RssFile"] - before["RssFile"], "mapped": maps, "total": total}))
    sys.stdout.flush()
    sys.stdin.read()  # stay alive (the pool mapped) until the test is done
""")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_two_workers_map_one_pool_copy_and_do_not_load_it(tmp_path):
    rows, dim = 24_000, 384  # a 35 MiB pool
    texts = [f"pool step {i}" for i in range(rows)]
    enc = FakeEncoder(dim=32)
    enc.encode = lambda block: np.tile(np.linspace(0, 1, dim, dtype=np.float32), (len(block), 1))
    path = tmp_path / "pool.npy"
    digest = encode_pool(enc, texts, PoolBlocks(tmp_path / "blocks"), path, chunk_size=4096)
    size = rows * dim * 4
    assert path.stat().st_size >= size
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), digest, str(rows)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    try:
        seen = [json.loads(w.stdout.readline()) for w in workers]  # the second maps while the first holds its map
    finally:
        for w in workers:
            w.communicate("", timeout=60)
    for s in seen:
        assert s["memmap"] and s["mapped"]  # a file mapping of the pool, read-only
        assert s["anon"] < size / 8, s  # not loaded: no private copy of the pool (35 MiB) in either process
        assert s["file"] > size / 2, s  # its pages are the file's, shared through the page cache
        assert s["total"] == seen[0]["total"]


def test_a_full_disk_is_an_enospc_error_naming_the_pool_not_a_crash(tmp_path):
    """The pool file is allocated before it is mapped: writing a page of a map on a full disk would kill the process
    (SIGBUS); allocating raises ENOSPC, naming the file, and leaves no temp file."""
    import errno
    import os

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        with pytest.raises(OSError) as err:  # 40,000 rows of 32 floats: 5 MB on a 1 MB disk
            encode_pool(type("Wide", (), {"model_id": "w", "dim": 32,
                                          "encode": lambda self, t: np.ones((len(t), 32), np.float32)})(),
                        [f"t{i}" for i in range(40_000)], PoolBlocks(tmp_path / "blocks"), mnt / "pool.npy",
                        chunk_size=1 << 20)
        assert err.value.errno == errno.ENOSPC and "pool.npy" in str(err.value.filename)
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)
