"""The file keys of ShowHowTo's per-item inputs (builders/corpora/showhowto/identity.py): size and first and last
MiB under the (size, mtime, inode) identity, the full sha256 only when the identity changes under the same size and
edges; a damaged memo is never trusted."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path

import pytest

from builders.corpora.showhowto import identity
from builders.corpora.showhowto.identity import EDGE, IdentityMemo

MIB = 1024 * 1024


@pytest.fixture
def reads(monkeypatch) -> dict[str, int]:
    """How often the edges and the whole file are read."""
    n = {"edges": 0, "full": 0}
    edges, full = identity._edges, identity._full

    def count_edges(path, size):
        n["edges"] += 1
        return edges(path, size)

    def count_full(path):
        n["full"] += 1
        return full(path)

    monkeypatch.setattr(identity, "_edges", count_edges)
    monkeypatch.setattr(identity, "_full", count_full)
    return n


def _old(p: Path, seconds: float = 60.0) -> None:
    """Set the mtime back (a file not written just now, as inputs usually are)."""
    t = time.time() - seconds
    os.utime(p, (t, t))


def _key(memo: IdentityMemo, p: Path) -> str:
    return memo.key(str(p), os.stat(p))


def _big(p: Path, middle: bytes = b"m") -> Path:
    p.write_bytes(b"a" * EDGE + middle * MIB + b"z" * EDGE)  # 3 MiB: the middle MiB is not in the edges
    _old(p)
    return p


def test_a_small_file_is_keyed_by_its_whole_content(tmp_path, reads):
    memo = IdentityMemo(tmp_path / "m.sqlite")
    t = tmp_path / "t.json"
    t.write_text('[{"start": 0, "end": 1, "text": "hi"}]')
    _old(t)
    k = _key(memo, t)
    assert k == "e:" + hashlib.sha256(f"{t.stat().st_size}:{hashlib.sha256(t.read_bytes()).hexdigest()}"
                                      .encode()).hexdigest()
    assert _key(memo, t) == k and reads == {"edges": 1, "full": 0}  # unchanged: a stat, no read
    _old(t, 30)  # touched: read again, same content, same key
    assert _key(memo, t) == k and reads == {"edges": 2, "full": 0}
    t.write_text('[{"start": 0, "end": 1, "text": "ho"}]')
    _old(t, 20)
    assert _key(memo, t) != k


def test_a_large_file_is_hashed_in_full_only_when_its_identity_changes_under_the_same_edges(tmp_path, reads):
    memo = IdentityMemo(tmp_path / "m.sqlite")
    v = _big(tmp_path / "v.mp4")
    k = _key(memo, v)
    assert k.startswith("e:") and reads == {"edges": 1, "full": 0}  # first sight: 2 MiB read, not 3
    assert _key(memo, v) == k and reads == {"edges": 1, "full": 0}

    _old(v, 30)  # touched: same size and edges, so the content decides; never seen in full, so a new key once
    k2 = _key(memo, v)
    assert k2 == "f:" + hashlib.sha256(v.read_bytes()).hexdigest() and reads == {"edges": 2, "full": 1}
    _old(v, 20)  # touched again: the full hash equals the one remembered, the key stays
    assert _key(memo, v) == k2 and reads == {"edges": 3, "full": 2}

    _big(v, b"M")  # an edit inside the file, same size and edges, new mtime
    _old(v, 10)
    k3 = _key(memo, v)
    assert k3 not in (k, k2) and reads["full"] == 3

    v.write_bytes(v.read_bytes() + b"\0" * 64)  # other size: other content, no full read needed
    _old(v, 5)
    assert _key(memo, v) not in (k, k2, k3) and reads["full"] == 3


def test_a_file_read_just_after_it_was_written_is_checked_in_full_next_time(tmp_path, reads):
    """A rewrite within the mtime's tick keeps (size, mtime, inode): a racily read entry is not trusted."""
    memo = IdentityMemo(tmp_path / "m.sqlite")
    v = tmp_path / "v.mp4"
    v.write_bytes(b"a" * EDGE + b"m" * MIB + b"z" * EDGE)
    st = os.stat(v)
    k = _key(memo, v)
    assert reads == {"edges": 1, "full": 1}  # written just now: its full hash is kept to compare with
    with open(v, "r+b") as f:  # the middle rewritten in place, the mtime set back: the same identity
        f.seek(EDGE + 10)
        f.write(b"X")
    os.utime(v, ns=(st.st_atime_ns, st.st_mtime_ns))
    s2 = os.stat(v)
    assert (s2.st_size, s2.st_mtime_ns, s2.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert _key(memo, v) != k


def test_a_damaged_memo_is_never_trusted(tmp_path, reads):
    path = tmp_path / "m.sqlite"
    memo = IdentityMemo(path)
    v = _big(tmp_path / "v.mp4")
    k = _key(memo, v)
    with sqlite3.connect(path) as con:  # an entry whose values no longer match their sha: as if unknown
        con.execute("UPDATE files SET key = 'e:0000'")
    k2 = _key(memo, v)
    assert k2 == "f:" + hashlib.sha256(v.read_bytes()).hexdigest() and k2 != "e:0000" and reads["full"] == 1
    assert _key(memo, v) == k2 and reads["full"] == 1  # remembered again

    path.with_name("n.sqlite").write_bytes(b"not a database" * 100)
    again = IdentityMemo(path.with_name("n.sqlite"))
    assert _key(again, v) == k2 and again.recovered and reads["full"] == 2  # replaced, the content decides
    assert k != k2  # (first-sight key of a large file: sampled, so a memo lost costs one rerun, never a wrong key)
