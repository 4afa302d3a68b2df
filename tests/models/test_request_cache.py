"""RequestCache (builders/models/request_cache.py): canonical keys, JSON values, several processes at once."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import pickle
import sqlite3

import pytest

from builders.models.request_cache import RequestCache


def test_key_is_sha256_of_canonical_json_whatever_the_argument_order():
    k = RequestCache.key(b=[1, "é"], a={"y": 2, "x": 1})
    expected = hashlib.sha256('{"a":{"x":1,"y":2},"b":[1,"é"]}'.encode()).hexdigest()
    assert k == expected == RequestCache.key(a={"x": 1, "y": 2}, b=[1, "é"])
    assert RequestCache.key(a=1) != RequestCache.key(a="1")
    with pytest.raises(ValueError):  # NaN is not JSON
        RequestCache.key(a=float("nan"))


def test_put_get_roundtrip_json_values_replace_and_absent_keys(tmp_path):
    cache = RequestCache(tmp_path / "sub" / "r.sqlite")
    cache.put_many({"a": {"text": "1. Boil water"}, "b": [1, 2.5, None], "c": "plain"})
    cache.put_many({"a": {"text": "replaced"}})
    cache.put_many({})
    assert cache.get_many(["a", "b", "c", "zz", "a"]) == {"a": {"text": "replaced"}, "b": [1, 2.5, None], "c": "plain"}
    assert cache.get_many([]) == {}
    assert len(cache) == 3
    cache.close()
    with sqlite3.connect(tmp_path / "sub" / "r.sqlite") as db:  # JSON text on disk, WAL journal
        assert db.execute("SELECT value FROM requests WHERE key='a'").fetchone()[0] == '{"text": "replaced"}'
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reopened = RequestCache(tmp_path / "sub" / "r.sqlite")
    assert reopened.get_many(["c"]) == {"c": "plain"}
    reopened.close()


def test_many_keys_beyond_one_select_and_non_json_rejected(tmp_path):
    with RequestCache(tmp_path / "r.sqlite") as cache:
        cache.put_many({f"k{i}": i for i in range(1234)})
        got = cache.get_many([f"k{i}" for i in range(1300)])
        assert len(got) == 1234 and got["k1233"] == 1233
        with pytest.raises(TypeError):
            cache.put_many({"x": object()})
        assert cache.get_many(["x"]) == {}


def test_pickled_copy_opens_its_own_connection(tmp_path):
    cache = RequestCache(tmp_path / "r.sqlite")
    cache.put_many({"a": 1})
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.get_many(["a"]) == {"a": 1}
    copy.put_many({"b": 2})
    assert cache.get_many(["b"]) == {"b": 2}
    copy.close()
    cache.close()


def _worker(path: str, wid: int, rounds: int, queue, barrier) -> None:
    try:
        barrier.wait(timeout=60)
        cache = RequestCache(path)  # every process creates/opens the file at the same moment
        for r in range(rounds):
            # overlapping keys: "shared-*" is written by every worker (same value), "own-*" by this one only
            cache.put_many({f"shared-{r % 7}": {"text": f"s{r % 7}"}, f"own-{wid}-{r}": {"text": f"{wid}:{r}"}})
            got = cache.get_many([f"shared-{r % 7}", f"own-{wid}-{r}"])
            assert got[f"own-{wid}-{r}"] == {"text": f"{wid}:{r}"}, got
            assert got[f"shared-{r % 7}"] == {"text": f"s{r % 7}"}, got
        cache.close()
        queue.put((wid, "ok"))
    except Exception as exc:  # noqa: BLE001 - report to the parent rather than die silently
        queue.put((wid, repr(exc)))


def test_three_processes_write_and_read_overlapping_keys_at_once(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("spawn")  # fresh interpreters: nothing inherited, like Ray workers
    queue, barrier = ctx.Queue(), ctx.Barrier(3)
    procs = [ctx.Process(target=_worker, args=(path, w, 150, queue, barrier)) for w in range(3)]
    for p in procs:
        p.start()
    reports = sorted(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert reports == [(0, "ok"), (1, "ok"), (2, "ok")]
    with RequestCache(path) as cache:
        everything = cache.get_many([f"own-{w}-{r}" for w in range(3) for r in range(150)] +
                                    [f"shared-{i}" for i in range(7)])
        assert len(everything) == 3 * 150 + 7
        assert everything["own-2-149"] == {"text": "2:149"} and everything["shared-6"] == {"text": "s6"}


def test_forked_child_does_not_reuse_the_parent_connection(tmp_path):
    cache = RequestCache(tmp_path / "r.sqlite")
    cache.put_many({"parent": 1})
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_fork_child, args=(cache, queue))
    proc.start()
    assert queue.get(timeout=60) == "ok"
    proc.join(timeout=30)
    assert cache.get_many(["parent", "child"]) == {"parent": 1, "child": 2}  # parent connection still usable
    cache.close()


def _fork_child(cache: RequestCache, queue) -> None:
    try:
        parent_db = cache._db
        assert cache.get_many(["parent"]) == {"parent": 1}
        cache.put_many({"child": 2})
        assert cache._db is not parent_db
        queue.put("ok")
    except Exception as exc:  # noqa: BLE001
        queue.put(repr(exc))
