"""Benchmark of input fingerprints (``builders/core/fingerprint.py``): a directory of 100,000 small files.

A temporary tree of ``folders x per_folder`` files (default 200 x 500, 100 bytes each, the shape of a per-video
feature directory) is fingerprinted five ways, each timed once, in this order:

a. **old**: the implementation before the memo (``_old_file_fingerprint`` below, copied verbatim from git history:
   ``os.walk`` + ``pathlib``, every file opened and read on every run);
a'. **new, no memo**: ``file_fingerprint(root)`` (``os.scandir`` walk, every file read);
b. **new, cold memo**: a fresh ``FingerprintMemo`` (SQLite file) is opened and filled (every file read, 100,000
   rows written);
c. **new, warm memo**: the memo is closed and opened again, as the next build does, and the unchanged tree is
   fingerprinted (every file ``stat``-ed, none read);
d. **warm memo after editing 10 files**: 10 files in 10 folders are rewritten in place (same size, new content),
   the memo is opened again and the tree fingerprinted (10 files read).

Every variant must give the same sha256 as the old code for the same tree (the edited tree too), and (d) must read
exactly the 10 edited files. Before (b) the run waits until the newest file is older than
``fingerprint.RACY_NS`` (2 s): the memo does not trust an entry whose file was modified within that window of being
read (see the module docstring), and a real input tree is not written seconds before a build. The files are in the
page cache throughout (they were just written): the figures measure the walk, ``stat``, ``open``/``read`` and
hashing, not a cold disk.

    python -m pytest tests/perf/bench_fingerprint.py -s -p no:cacheprovider --override-ini addopts=
    python tests/perf/bench_fingerprint.py [--folders 200] [--per-folder 500] [--json]

``BENCH_TMP=dir`` (or ``--tmp``) moves the temporary tree (about 400 MB of 4 KiB blocks for 100,000 files).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builders.core import fingerprint as fp_mod
from builders.core.fingerprint import FULL_HASH_LIMIT, FingerprintMemo, file_fingerprint

_EDGE = fp_mod._EDGE
EDITED = 10


def _old_file_fingerprint(path: str | Path) -> dict[str, Any]:
    """Content fingerprint of a file or of a directory (every regular file below it, sorted)."""
    p = Path(path)
    if p.is_dir():
        h = hashlib.sha256()
        n = 0
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(files):
                f = Path(root) / name
                h.update(str(f.relative_to(p)).encode())
                h.update(_old_file_fingerprint(f)["sha256"].encode())
                n += 1
        return {"path": str(p), "kind": "dir", "files": n, "sha256": h.hexdigest()}
    st = p.stat()
    h = hashlib.sha256()
    with open(p, "rb") as f:
        if st.st_size <= FULL_HASH_LIMIT:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            mode = "content"
        else:
            h.update(f.read(_EDGE))
            f.seek(-_EDGE, os.SEEK_END)
            h.update(f.read(_EDGE))
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
            mode = "size+mtime+edges"
    return {"path": str(p), "kind": "file", "bytes": st.st_size, "mode": mode, "sha256": h.hexdigest()}


def make_tree(root: Path, folders: int, per_folder: int, size: int = 100) -> int:
    for i in range(folders):
        d = root / f"video_{i:05d}"
        d.mkdir(parents=True)
        for j in range(per_folder):
            head = f"{i}:{j}:".encode()
            (d / f"feat_{j:05d}.npy").write_bytes(head + b"x" * (size - len(head)))
    return folders * per_folder


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run_bench(folders: int = 200, per_folder: int = 500, *, tmp_root: str | None = None, log=print) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_fingerprint_", dir=tmp_root) as tmp:
        root = Path(tmp) / "features"
        memo_path = Path(tmp) / "cache" / "fingerprints.sqlite"
        _, make_s = _timed(lambda: make_tree(root, folders, per_folder))
        made_at = time.time()
        n = folders * per_folder
        log(f"[bench_fingerprint] {n:,} files ({folders} folders x {per_folder}) written in {make_s:.1f} s "
            "(not counted)")
        r: dict[str, Any] = {"benchmark": "fingerprint", "files": n, "folders": folders, "per_folder": per_folder,
                             "load_avg_1m_start": os.getloadavg()[0]}

        old, r["old_s"] = _timed(lambda: _old_file_fingerprint(root))
        new, r["new_no_memo_s"] = _timed(lambda: file_fingerprint(root))
        assert new == old, (new, old)
        assert old["files"] == n

        wait = made_at + fp_mod.RACY_NS / 1e9 + 0.1 - time.time()
        if wait > 0:  # see the docstring: entries of files modified < RACY_NS before the read are not trusted
            time.sleep(wait)

        def with_memo() -> tuple[dict[str, Any], FingerprintMemo]:
            memo = FingerprintMemo(memo_path)  # opened inside the timing: the next build opens it too
            return file_fingerprint(root, memo), memo

        (cold, memo), r["memo_cold_s"] = _timed(with_memo)
        assert cold == old and memo.misses == n and len(memo) == n
        memo.close()
        (warm, memo), r["memo_warm_s"] = _timed(with_memo)
        assert warm == old and (memo.hits, memo.misses) == (n, 0), (memo.hits, memo.misses)
        memo.close()
        r["memo_file_mb"] = round(sum(p.stat().st_size for p in memo_path.parent.iterdir()) / 1e6, 1)

        step = max(1, folders // EDITED)
        edited = [root / f"video_{(k * step) % folders:05d}" / f"feat_{(k * 37) % per_folder:05d}.npy"
                  for k in range(EDITED)]
        for f in edited:  # in place: same inode, same size, new content and mtime
            with open(f, "r+b") as h:
                h.seek(-1, os.SEEK_END)
                h.write(b"E")
        (after, memo), r["memo_after_edits_s"] = _timed(with_memo)
        r["edited_files_read"] = memo.misses
        memo.close()
        assert after["sha256"] != old["sha256"]
        assert after == _old_file_fingerprint(root), "the memo missed an edit"
        assert r["edited_files_read"] == len(set(edited)), r["edited_files_read"]
        r["load_avg_1m_end"] = os.getloadavg()[0]
    r.update(python=platform.python_version(), cpus=os.cpu_count(), machine=platform.machine())
    log(format_result(r))
    return r


def format_result(r: dict[str, Any]) -> str:
    base = r["old_s"]
    rows = [("a. old implementation (every file read)", r["old_s"]),
            ("a'. new, no memo (every file read)", r["new_no_memo_s"]),
            ("b. new, cold memo (every file read, memo filled)", r["memo_cold_s"]),
            ("c. new, warm memo (nothing read)", r["memo_warm_s"]),
            (f"d. warm memo after editing {EDITED} files ({r['edited_files_read']} read)", r["memo_after_edits_s"])]
    head = (f"fingerprint benchmark: {r['files']:,} files ({r['folders']} x {r['per_folder']}), "
            f"{r['cpus']} CPUs, Python {r['python']}, load avg {r['load_avg_1m_start']:.1f} -> "
            f"{r['load_avg_1m_end']:.1f}; memo file {r['memo_file_mb']} MB")
    lines = [head]
    lines += [f"  {name:<58} {s:7.2f} s   {base / s:5.1f}x vs old" for name, s in rows]
    return "\n".join(lines)


def test_fingerprint_100k_files():
    r = run_bench(tmp_root=os.environ.get("BENCH_TMP"))
    assert r["edited_files_read"] == EDITED
    assert r["memo_warm_s"] < r["old_s"] and r["memo_after_edits_s"] < r["old_s"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folders", type=int, default=200)
    ap.add_argument("--per-folder", type=int, default=500)
    ap.add_argument("--tmp", default=os.environ.get("BENCH_TMP"), help="where to write the temporary tree")
    ap.add_argument("--json", action="store_true", help="print the result as JSON as well")
    a = ap.parse_args(argv)
    r = run_bench(a.folders, a.per_folder, tmp_root=a.tmp)
    if a.json:
        print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
