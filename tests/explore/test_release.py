"""``builders.explore._release``: the deterministic, bounded sample and the look-ups by id (no browser)."""

from __future__ import annotations

import pytest

from builders.explore._release import Release, stable_hash

from .synthetic import vid, write_howtostep, write_sieve_swap


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """3,000 videos in 1,000-row row groups (3 groups per config)."""
    return Release(write_howtostep(tmp_path_factory.mktemp("rel") / "howtostep", 3000, narrations=3, steps=2))


def test_stable_hash_is_seeded_and_stable():
    assert stable_hash(0, "abc") == stable_hash(0, "abc")
    assert stable_hash(0, "abc") != stable_hash(1, "abc")
    assert stable_hash(0, "abc") == 0x4F6360146E762EA9  # the same on every machine and Python run


def test_sample_is_deterministic_and_seeded(big):
    a = [r["video_id"] for r in big.sample(["steps"], "video_id", [], 40, seed=0)]
    b = [r["video_id"] for r in big.sample(["steps"], "video_id", [], 40, seed=0)]
    c = [r["video_id"] for r in big.sample(["steps"], "video_id", [], 40, seed=7)]
    assert a == b and len(a) == 40 == len(set(a))
    assert a != c
    assert a == sorted(a)


def test_sample_sizes(big):
    assert big.sample(["steps"], "video_id", [], 0) == []
    assert len(big.sample(["steps"], "video_id", [], 3000)) == 3000
    assert len(big.sample(["steps"], "video_id", [], 5000)) == 3000
    rows = big.sample(["steps"], "video_id", ["task_name", "steps"], 10)
    assert set(rows[0]) == {"video_id", "task_name", "steps", "_config", "_split"}


def test_sample_reads_few_row_groups(big, monkeypatch):
    """A small sample decodes whole rows from ceil(n / PER_GROUP) row groups, not from every group."""
    full = []
    real = Release._read_rows

    def spy(group, columns, rows, batch=256):
        full.append(group.index)
        return real(group, columns, rows, batch)

    monkeypatch.setattr(Release, "_read_rows", staticmethod(spy))
    big._groups.clear()
    assert len(big.sample(["steps"], "video_id", ["steps"], 20)) == 20
    assert len(full) == 1
    full.clear()
    assert len(big.sample(["steps"], "video_id", ["steps"], 60)) == 60
    assert len(full) == 3


def test_lookup_returns_every_row_of_the_wanted_ids(big):
    want = [vid(5), vid(1500), vid(2999), "nope"]
    got = big.lookup("dropped_steps", "video_id", want, ["step_index", "reason"])
    assert set(got) == {vid(5), vid(1500), vid(2999)}
    assert all(len(v) == 2 for v in got.values())
    capped = big.lookup("dropped_steps", "video_id", want, ["step_index"], limit_per_id=1)
    assert all(len(v) == 1 for v in capped.values())
    assert big.lookup("dropped_steps", "video_id", [], ["step_index"]) == {}
    # rows decoded batch by batch come back with their own values (positions across batch boundaries)
    got = big.lookup("steps", "video_id", [vid(i) for i in (0, 255, 256, 777, 2999)], ["task_name"])
    assert {k: v[0]["task_name"] for k, v in got.items()} == {vid(i): f"Make dish {i % 50}"
                                                               for i in (0, 255, 256, 777, 2999)}
    rows = big.sample(["steps"], "video_id", ["task_name"], 3000)
    assert all(r["task_name"] == f"Make dish {int(r['video_id'][1:]) % 50}" for r in rows)


def test_metadata(big, tmp_path):
    assert big.configs() == ["dropped_steps", "narrations", "steps"]
    assert big.num_rows("steps") == {"train": 3000}
    assert big.json("stats.json")["corpus"] == "howtostep"
    assert big.json("missing.json") == {}
    (tmp_path / "stats.json").write_text("[not json")
    assert Release(tmp_path).json("stats.json") == {}
    with pytest.raises(FileNotFoundError):
        Release(tmp_path / "absent")


def test_sieve_swap_raw_segments_are_assigned_to_kept_ones(tmp_path):
    from builders.explore.sieve_swap import assign_raw_segments

    kept = [{"start": 10.0, "end": 20.0}, {"start": 30.0, "end": 35.0}]
    raw = [{"start": 0.0, "end": 9.0}, {"start": 10.0, "end": 14.0}, {"start": 14.0, "end": 20.0},
           {"start": 30.0, "end": 35.0}, {"start": 36.0, "end": None}]
    assert assign_raw_segments(kept, raw) == [None, 0, 0, 1, None]
    root = write_sieve_swap(tmp_path / "s", 2, segments=8)
    from builders.explore.sieve_swap import collect

    items = collect(Release(root), 10, 0)["items"]
    assert [sum(r["k"] is None for r in it["raw"]) for it in items] == [6, 6]
