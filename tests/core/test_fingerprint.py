"""Content fingerprints of input files and directories, memoised by (path, size, mtime_ns, inode)."""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import multiprocessing
import os
import pickle
import threading
import time
from pathlib import Path

import pytest

from builders.core import fingerprint as fp
from builders.core.fingerprint import (
    FingerprintMemo,
    file_fingerprint,
    fingerprints,
    relative_inputs,
)

HOUR_NS = 3600 * 10**9


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _age(root: Path) -> None:
    """Set every file's mtime an hour back, so memo entries are not "racily clean" (see ``fp.RACY_NS``)."""
    old = time.time_ns() - HOUR_NS
    for p in [root, *root.rglob("*")] if root.is_dir() else [root]:
        if p.is_file() and not p.is_symlink():
            os.utime(p, ns=(old, old))


def _tree(root: Path) -> Path:
    (root / "b" / "d").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"alpha")
    (root / "z.txt").write_bytes(b"zeta")
    (root / "b" / "c.txt").write_bytes(b"gamma")
    (root / "b" / "d" / "e.txt").write_bytes(b"epsilon")
    _age(root)
    return root


def _old_file_fingerprint(path):
    """The implementation before the memo (git history), verbatim: the values must not change."""
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
        if st.st_size <= fp.FULL_HASH_LIMIT:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            mode = "content"
        else:
            h.update(f.read(fp._EDGE))
            f.seek(-fp._EDGE, os.SEEK_END)
            h.update(f.read(fp._EDGE))
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
            mode = "size+mtime+edges"
    return {"path": str(p), "kind": "file", "bytes": st.st_size, "mode": mode, "sha256": h.hexdigest()}


# ------------------------------------------------------------------------------------------ values (cache keys)


def test_file_hash_is_the_sha256_of_its_bytes(tmp_path):
    f = tmp_path / "x.json"
    f.write_bytes(b'{"a": 1}')
    want = {"path": str(f), "kind": "file", "bytes": 8, "mode": "content",
            "sha256": "f9d86028c6e0d64e225186f96acb69338b2c59764df79162107f5c4bb34d1310"}
    assert want["sha256"] == _sha(b'{"a": 1}')
    assert file_fingerprint(f) == want
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        assert file_fingerprint(f, memo) == want == file_fingerprint(str(f), memo=memo)


def test_directory_hash_matches_the_hand_computed_one(tmp_path):
    root = _tree(tmp_path / "d")
    h = hashlib.sha256()
    # os.walk order: a folder's files (sorted), then its sub-folders (sorted), depth first
    for rel, data in (("a.txt", b"alpha"), ("z.txt", b"zeta"), ("b/c.txt", b"gamma"), ("b/d/e.txt", b"epsilon")):
        h.update(rel.replace("/", os.sep).encode())
        h.update(_sha(data).encode())
    want = {"path": str(root), "kind": "dir", "files": 4, "sha256": h.hexdigest()}
    assert file_fingerprint(root) == want
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        assert file_fingerprint(root, memo) == want  # cold
        assert file_fingerprint(root, memo) == want  # warm
        assert (memo.misses, memo.hits) == (4, 4)
    assert file_fingerprint(str(root) + "/") == want  # the path is reported as pathlib normalises it


def test_values_equal_the_first_implementation_on_a_mixed_tree(tmp_path):
    root = tmp_path / "mixed"
    names = ["Zeta.txt", "alpha.txt", "é-accent.txt", "日本.txt", "b-1.txt", "b.txt", "b_", "empty"]
    for k, sub in enumerate(["", "b", "b/x", "B", "é", "b-1", "b.d"]):
        d = root / sub
        d.mkdir(parents=True, exist_ok=True)
        for j, name in enumerate(names):
            (d / name).write_bytes(b"" if name == "empty" else f"{k}:{j}".encode() * (j + 1))
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        want = _old_file_fingerprint(root)
        assert want["files"] == 7 * len(names)
        assert file_fingerprint(root) == want == file_fingerprint(root, memo) == file_fingerprint(root, memo)
        for f in (root / "b" / "日本.txt", root / "é" / "empty"):
            assert file_fingerprint(f) == _old_file_fingerprint(f) == file_fingerprint(f, memo)


def test_big_files_are_hashed_by_size_mtime_and_edges(tmp_path, monkeypatch):
    monkeypatch.setattr(fp, "FULL_HASH_LIMIT", 2 * fp._EDGE)
    f = tmp_path / "big.bin"
    data = os.urandom(3 * fp._EDGE + 17)
    f.write_bytes(data)
    st = f.stat()
    h = hashlib.sha256(data[:fp._EDGE] + data[-fp._EDGE:] + f"{st.st_size}:{st.st_mtime_ns}".encode())
    want = {"path": str(f), "kind": "file", "bytes": len(data), "mode": "size+mtime+edges", "sha256": h.hexdigest()}
    assert file_fingerprint(f) == want == _old_file_fingerprint(f)
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        assert file_fingerprint(f, memo) == want == file_fingerprint(f, memo)


# ---------------------------------------------------------------------------------------------- the memo


@pytest.mark.parametrize("change", ["edit_same_size", "edit_other_size", "add", "add_in_new_folder", "remove",
                                    "remove_folder", "rename", "rename_folder", "replace_same_size_same_mtime"])
def test_any_change_inside_a_directory_changes_its_fingerprint_through_the_memo(tmp_path, change):
    root = _tree(tmp_path / "d")
    memo = FingerprintMemo(tmp_path / "memo.sqlite")
    before = file_fingerprint(root, memo)
    assert file_fingerprint(root, memo) == before and memo.hits == 4  # trusted: the files are an hour old
    c = root / "b" / "c.txt"
    if change == "edit_same_size":
        with open(c, "r+b") as f:  # in place: same inode, same size, new mtime
            f.write(b"GAMMA")
    elif change == "edit_other_size":
        c.write_bytes(b"gamma!")
    elif change == "add":
        (root / "b" / "d.txt").write_bytes(b"delta")
    elif change == "add_in_new_folder":
        (root / "new").mkdir()
        (root / "new" / "n.txt").write_bytes(b"")
    elif change == "remove":
        (root / "a.txt").unlink()
    elif change == "remove_folder":
        (root / "b" / "d" / "e.txt").unlink()
        (root / "b" / "d").rmdir()
    elif change == "rename":
        (root / "a.txt").rename(root / "y.txt")
    elif change == "rename_folder":
        (root / "b").rename(root / "c")
    else:  # another file moved over it: same size and mtime, only the inode tells
        st = c.stat()
        (tmp_path / "other").write_bytes(b"GAMMA")
        os.utime(tmp_path / "other", ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp_path / "other", c)
        assert c.stat().st_ino != st.st_ino and c.stat().st_mtime_ns == st.st_mtime_ns
    memo.hits = memo.misses = 0
    after = file_fingerprint(root, memo)
    assert after["sha256"] != before["sha256"]
    assert after == file_fingerprint(root) == _old_file_fingerprint(root)
    # at most the changed file was read again (a renamed folder: its files, as the memo is keyed by path)
    assert memo.misses <= (2 if change == "rename_folder" else 1)
    memo.close()


def test_the_memo_reads_only_changed_files_and_outlives_the_process(tmp_path, monkeypatch):
    root = tmp_path / "d"
    root.mkdir()
    for i in range(50):
        (root / f"{i:02d}.txt").write_text(str(i))
    _age(root)
    reads = []
    real = fp._read_hash
    monkeypatch.setattr(fp, "_read_hash", lambda p, st: reads.append(os.path.basename(p)) or real(p, st))
    memo = FingerprintMemo(tmp_path / "memo.sqlite")
    first = file_fingerprint(root, memo)
    assert len(reads) == 50 and len(memo) == 50
    reads.clear()
    assert file_fingerprint(root, memo) == first and reads == []
    (root / "07.txt").write_text("seven")
    second = file_fingerprint(root, memo)
    assert second != first and reads == [b"07.txt"]
    memo.close()
    with pytest.raises(ValueError, match="closed"):
        file_fingerprint(root, memo)
    _age(root / "07.txt")
    reads.clear()
    memo2 = FingerprintMemo(tmp_path / "memo.sqlite")  # a new process would see the same file
    assert file_fingerprint(root, memo2) == second and reads == [b"07.txt"]  # 07 was racily clean: read once more
    reads.clear()
    assert file_fingerprint(root, memo2) == second and reads == []
    single = file_fingerprint(root / "03.txt", memo2)  # a single file: its own row of the same memo
    assert reads == [] and single == file_fingerprint(root / "03.txt") == _old_file_fingerprint(root / "03.txt")
    memo2.close()


def test_a_rewrite_within_the_timestamp_granularity_is_not_missed(tmp_path):
    """A file written just before it is hashed may be rewritten in the same mtime tick (same size, same mtime):
    such "racily clean" entries are not trusted until the file is older than ``RACY_NS``."""
    f = tmp_path / "x.txt"
    f.write_bytes(b"one")
    memo = FingerprintMemo(tmp_path / "memo.sqlite")
    first = file_fingerprint(f, memo)
    st = f.stat()
    with open(f, "r+b") as h:
        h.write(b"two")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # what a coarse clock does: the mtime did not move
    assert (f.stat().st_size, f.stat().st_mtime_ns, f.stat().st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    second = file_fingerprint(f, memo)
    assert second["sha256"] == _sha(b"two") != first["sha256"]
    # the same trick on an old file (mtime set back too: documented limit) shows that old entries are trusted
    old = time.time_ns() - HOUR_NS
    os.utime(f, ns=(old, old))
    assert file_fingerprint(f, memo)["sha256"] == _sha(b"two") and memo.hits == 0
    assert file_fingerprint(f, memo)["sha256"] == _sha(b"two") and memo.hits == 1
    memo.close()


def test_removed_files_and_folders_leave_the_memo(tmp_path):
    root = _tree(tmp_path / "d")
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        file_fingerprint(root, memo)
        assert len(memo) == 4
        (root / "a.txt").unlink()
        (root / "b" / "d" / "e.txt").unlink()
        (root / "b" / "d").rmdir()
        file_fingerprint(root, memo)
        assert len(memo) == 2


def _fingerprint_in_a_process(args):
    root, memo_path = args
    with FingerprintMemo(memo_path, timeout=120) as memo:
        out = [file_fingerprint(root, memo)["sha256"] for _ in range(3)]
        return out, memo.hits, memo.misses


def test_several_processes_share_one_memo(tmp_path):
    root = tmp_path / "d"
    for i in range(20):
        (root / f"s{i:02d}").mkdir(parents=True)
        for j in range(30):
            (root / f"s{i:02d}" / f"{j}.txt").write_text(f"{i}/{j}")
    _age(root)
    want = file_fingerprint(root)["sha256"]
    memo_path = tmp_path / "cache" / "fingerprints.sqlite"
    with cf.ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_fingerprint_in_a_process, [(root, memo_path)] * 6))
    assert all(shas == [want] * 3 for shas, _, _ in results)
    assert all(hits >= 2 * 600 for _, hits, _ in results)  # each process read the tree at most once
    with FingerprintMemo(memo_path) as memo:
        assert len(memo) == 600
        assert file_fingerprint(root, memo)["sha256"] == want and memo.misses == 0
        with open(memo_path, "rb") as f:
            assert f.read(16) == b"SQLite format 3\x00"
        assert memo._db().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_memo_survives_pickling_fork_and_threads(tmp_path):
    root = _tree(tmp_path / "d")
    memo = FingerprintMemo(tmp_path / "memo.sqlite")
    want = file_fingerprint(root, memo)
    clone = pickle.loads(pickle.dumps(memo))
    assert file_fingerprint(root, clone) == want and clone.hits == 4
    clone.close()
    results = []
    threads = [threading.Thread(target=lambda: results.append(file_fingerprint(root, memo))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 4
    if hasattr(os, "fork"):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child uses the inherited object: it must open its own connection
            try:
                ok = file_fingerprint(root, memo) == want
            except BaseException:  # noqa: BLE001 - the child must always reach os._exit
                ok = False
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
        os.close(w)
        assert os.read(r, 1) == b"1"
        os.waitpid(pid, 0)
        os.close(r)
    assert file_fingerprint(root, memo) == want  # the parent's connection still works
    memo.close()


def test_fingerprints_keeps_the_order_and_shares_the_memo(tmp_path):
    root = _tree(tmp_path / "d")
    paths = [root / "z.txt", root, str(root / "a.txt")]
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        got = fingerprints(paths, memo)
        assert [f["kind"] for f in got] == ["file", "dir", "file"]
        assert got == [file_fingerprint(p) for p in paths] == fingerprints(iter(paths))
        assert memo.hits == 2  # z.txt and a.txt, remembered again inside the directory
    assert fingerprints([]) == []


# -------------------------------------------------------------------------------------- links and errors


def test_links_to_files_are_followed_and_links_to_folders_are_not(tmp_path):
    root = _tree(tmp_path / "d")
    base = file_fingerprint(root)
    os.symlink(root, root / "b" / "loop")  # a cycle: must not be descended
    os.symlink(tmp_path, root / "up")  # a link to a folder holding the tree
    assert file_fingerprint(root) == base
    (tmp_path / "outside.txt").write_bytes(b"outside")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        got = file_fingerprint(root, memo)
        assert got["files"] == 5 and got == _old_file_fingerprint(root) == file_fingerprint(root, memo)
        (tmp_path / "outside.txt").write_bytes(b"OUTSIDE")  # the target's content counts
        assert file_fingerprint(root, memo)["sha256"] != got["sha256"]
        os.symlink(root, tmp_path / "d-link")  # the folder given may itself be a link
        assert file_fingerprint(tmp_path / "d-link", memo)["sha256"] == file_fingerprint(root)["sha256"]


def test_special_files_are_skipped(tmp_path):
    root = _tree(tmp_path / "d")
    base = file_fingerprint(root)
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(root / "b" / "pipe")  # the old code blocked forever opening it
    assert file_fingerprint(root) == base
    with pytest.raises(OSError, match="not a regular file or directory"):
        file_fingerprint(root / "b" / "pipe")


def test_missing_inputs_and_dangling_links_given_directly_raise_naming_them(tmp_path):
    root = _tree(tmp_path / "d")
    os.symlink(tmp_path / "missing", root / "b" / "dangling")
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        for m in (None, memo):
            with pytest.raises(FileNotFoundError, match=r"cannot fingerprint input .*b/dangling: dangling symbolic"):
                file_fingerprint(root / "b" / "dangling", m)
            with pytest.raises(FileNotFoundError, match=r"cannot fingerprint input .*nowhere\.txt: No such file"):
                file_fingerprint(tmp_path / "nowhere.txt", m)


def _flat(root: Path) -> Path:
    root.mkdir()
    (root / "a.txt").write_bytes(b"alpha")
    (root / "m.txt").write_bytes(b"mu")
    _age(root)
    return root


def test_bad_entries_are_hashed_by_name_and_problem_and_listed(tmp_path):
    """A dangling link and a loop of links count as ``name + "!" + problem``; the good files as always."""
    root = _flat(tmp_path / "d")
    base = file_fingerprint(root)
    assert base == _old_file_fingerprint(root)
    os.symlink(tmp_path / "missing", root / "k.txt")  # dangling
    os.symlink(root / "loop2", root / "loop1")
    os.symlink(root / "loop1", root / "loop2")
    want = hashlib.sha256(b"a.txt" + _sha(b"alpha").encode() + b"k.txt!dangling symbolic link"
                          + b"loop1!loop of symbolic links" + b"loop2!loop of symbolic links"
                          + b"m.txt" + _sha(b"mu").encode()).hexdigest()
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        for m in (None, memo, memo):
            got = file_fingerprint(root, m)
            assert got == {"path": str(root), "kind": "dir", "files": 2, "sha256": want, "unreadable": [
                {"path": "k.txt", "problem": "dangling symbolic link"},
                {"path": "loop1", "problem": "loop of symbolic links"},
                {"path": "loop2", "problem": "loop of symbolic links"}]}
        # fixing the dangling link makes it a file like any other; removing the loops restores the old value
        (tmp_path / "missing").write_bytes(b"kappa")
        os.remove(root / "loop1")
        os.remove(root / "loop2")
        fixed = file_fingerprint(root, memo)
        assert fixed == _old_file_fingerprint(root) and fixed["files"] == 3 and "unreadable" not in fixed
        os.remove(root / "k.txt")
        assert file_fingerprint(root, memo) == base


def test_unreadable_files_in_a_directory_are_bad_entries_and_raise_when_given_directly(tmp_path, monkeypatch):
    root = _tree(tmp_path / "d")
    secret = root / "b" / "c.txt"
    real_open = os.open

    def fake_open(path, *a, **k):
        if os.fsdecode(path) == str(secret):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(fp.os, "open", fake_open)
    want = hashlib.sha256(b"a.txt" + _sha(b"alpha").encode() + b"z.txt" + _sha(b"zeta").encode()
                          + b"b/c.txt!permission denied" + b"b/d/e.txt" + _sha(b"epsilon").encode()).hexdigest()
    with FingerprintMemo(tmp_path / "memo.sqlite") as memo:
        for m in (None, memo):
            got = file_fingerprint(root, m)
            assert got["sha256"] == want and got["files"] == 3
            assert got["unreadable"] == [{"path": "b/c.txt", "problem": "permission denied"}]
            with pytest.raises(PermissionError, match=r"cannot fingerprint input file .*d/b/c\.txt: "
                                                      r"Permission denied"):
                file_fingerprint(secret, m)


def test_unreadable_folders_are_bad_entries_the_top_one_raises(tmp_path, monkeypatch):
    root = _tree(tmp_path / "d")
    hidden = os.fsencode(root / "b" / "d")
    real_scandir = os.scandir

    def fake_scandir(path=".", *a):
        if path in (hidden, os.fsencode(tmp_path / "locked")):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_scandir(path, *a)

    monkeypatch.setattr(fp.os, "scandir", fake_scandir)
    want = hashlib.sha256(b"a.txt" + _sha(b"alpha").encode() + b"z.txt" + _sha(b"zeta").encode()
                          + b"b/c.txt" + _sha(b"gamma").encode() + b"b/d!permission denied").hexdigest()
    got = file_fingerprint(root)
    assert got["sha256"] == want and got["unreadable"] == [{"path": "b/d", "problem": "permission denied"}]
    (tmp_path / "locked").mkdir()
    with pytest.raises(PermissionError, match=r"cannot fingerprint input folder .*locked: Permission denied"):
        file_fingerprint(tmp_path / "locked")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_chmod_000_file_is_a_bad_entry_and_raises_given_directly(tmp_path):
    root = _tree(tmp_path / "d")
    (root / "a.txt").chmod(0)
    try:
        assert file_fingerprint(root)["unreadable"] == [{"path": "a.txt", "problem": "permission denied"}]
        with pytest.raises(PermissionError, match="a.txt"):
            file_fingerprint(root / "a.txt")
    finally:
        (root / "a.txt").chmod(0o644)


def test_a_memo_that_cannot_be_written_only_warns(tmp_path):
    import sqlite3

    root = _tree(tmp_path / "d")
    want = file_fingerprint(root)
    memo = FingerprintMemo(tmp_path / "memo.sqlite", timeout=0.1)
    other = sqlite3.connect(tmp_path / "memo.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the timeout
    with pytest.warns(RuntimeWarning, match="4 hash.*not remembered"):
        assert file_fingerprint(root, memo) == want
    other.execute("ROLLBACK")
    other.close()
    assert len(memo) == 0
    assert file_fingerprint(root, memo) == want and len(memo) == 4
    memo.close()


def test_a_corrupt_memo_file_is_named(tmp_path):
    bad = tmp_path / "memo.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(OSError, match=r"fingerprint memo .*memo\.sqlite.*delete it"):
        FingerprintMemo(bad)


# ----------------------------------------------------------------------------------------- relative_inputs


def test_relative_inputs_strips_the_common_root():
    fps = {
        "source": [{"path": "/home/alice/data/htm/captions.json", "kind": "file", "sha256": "1"},
                   {"path": "/home/alice/data/htm/meta.csv", "kind": "file", "sha256": "2"}],
        "swap": [{"path": "/home/alice/data/recipes/", "kind": "dir", "files": 3, "sha256": "3"}],
        "empty": [],
    }
    snapshot = pickle.dumps(fps)
    got = relative_inputs(fps)
    assert got == {
        "source": [{"path": "htm/captions.json", "kind": "file", "sha256": "1"},
                   {"path": "htm/meta.csv", "kind": "file", "sha256": "2"}],
        "swap": [{"path": "recipes", "kind": "dir", "files": 3, "sha256": "3"}],
        "empty": [],
    }
    assert pickle.dumps(fps) == snapshot  # not modified


def test_relative_inputs_keeps_every_name():
    one = relative_inputs({"s": [{"path": "/home/bob/in/recipes.csv", "sha256": "x"}]})
    assert one == {"s": [{"path": "recipes.csv", "sha256": "x"}]}
    folder = relative_inputs({"s": [{"path": "/srv/feats"}], "t": [{"path": "/srv/feats/x.npy"}]})
    assert folder == {"s": [{"path": "feats"}], "t": [{"path": "feats/x.npy"}]}
    same = relative_inputs({"s": [{"path": "/srv/a.txt"}], "t": [{"path": "/srv/a.txt"}]})
    assert same == {"s": [{"path": "a.txt"}], "t": [{"path": "a.txt"}]}
    top = relative_inputs({"s": [{"path": "/a.txt"}, {"path": "/b/c.txt"}]})
    assert top == {"s": [{"path": "a.txt"}, {"path": "b/c.txt"}]}
    assert relative_inputs({}) == {} and relative_inputs({"s": [{"sha256": "x"}]}) == {"s": [{"sha256": "x"}]}


def test_relative_inputs_of_real_fingerprints(tmp_path, monkeypatch):
    root = _tree(tmp_path / "inputs")
    monkeypatch.chdir(tmp_path)
    fps = {"a": fingerprints(["inputs/a.txt", root / "b"]), "b": [file_fingerprint(root / "b" / "d" / "e.txt")]}
    got = relative_inputs(fps)
    assert [f["path"] for f in got["a"] + got["b"]] == ["a.txt", "b", "b/d/e.txt"]
    assert [f["sha256"] for f in got["a"] + got["b"]] == [f["sha256"] for f in fps["a"] + fps["b"]]
    assert not any(str(tmp_path) in f["path"] or f["path"].startswith(("/", "..")) for f in got["a"] + got["b"])


def test_item_file_sha_names_special_files_without_opening_them(tmp_path):
    """A FIFO would block a read forever, /dev/zero never ends: a per-item input that is not a regular file keys its
    shard by what it is, and the step's reader drops the item by name (issue 20)."""
    import os

    from builders.core.fingerprint import item_file_sha

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    (tmp_path / "a.json").write_text("{}")
    assert item_file_sha(fifo, None) == "special:10000"
    assert item_file_sha("/dev/zero", None) == "special:20000"
    assert item_file_sha(tmp_path, None) == "special:40000"
    assert item_file_sha(loop, None) == "symlink-loop"
    assert item_file_sha(tmp_path / "missing", None) == "-"
    assert len(item_file_sha(tmp_path / "a.json", None)) == 64
