"""Damaged release cache records (issue 34): a record carries the sha256 of its JSON text; one whose text changed
(a flipped byte that still parses, a file cut short) is missing, with one warning line naming it, and the value is
computed again and written again."""

from __future__ import annotations

import json
import logging

import pytest

from builders.release.cache import ReleaseCache, checked_json


def _record_file(cache: ReleaseCache, kind: str, key: str):
    return cache.root / f"{kind}-{key}.json"


def test_a_record_holds_its_digest_and_reads_back():
    text = checked_json({"value": "abc"})
    # sha256 of '{"value": "abc"}', computed by hand with hashlib in a shell
    import hashlib

    assert hashlib.sha256(b'{"value": "abc"}').hexdigest() in text
    assert json.loads(text)["record"] == {"value": "abc"}


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_a_damaged_record_is_recomputed_once_with_one_warning(tmp_path, caplog, damage):
    cache = ReleaseCache(tmp_path / "cache" / "release")
    key = ReleaseCache.key("llm", "model-a")
    calls = []

    def compute():
        calls.append(1)
        return {"model": "model-a", "n": 41}

    assert cache.memo("llm", key, compute) == {"model": "model-a", "n": 41} and len(calls) == 1
    assert cache.memo("llm", key, compute) == {"model": "model-a", "n": 41} and len(calls) == 1
    path = _record_file(cache, "llm", key)
    good = path.read_bytes()
    if damage == "flip":  # "n": 41 -> "n": 40: still JSON, and would be used as it is without the digest
        bad = good.replace(b'"n": 41', b'"n": 40')
        assert bad != good and json.loads(bad)["record"]["value"]["n"] == 40
        path.write_bytes(bad)
    else:
        path.write_bytes(good[: len(good) // 2])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="builders.release.cache"):
        assert cache.memo("llm", key, compute) == {"model": "model-a", "n": 41}
    assert len(calls) == 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and path.name in warned[0]
    assert path.read_bytes() == good  # written again as it was
    assert cache.memo("llm", key, compute) == {"model": "model-a", "n": 41} and len(calls) == 2


def test_a_record_of_the_earlier_format_is_missing_without_a_warning(tmp_path, caplog):
    cache = ReleaseCache(tmp_path)
    key = ReleaseCache.key("gate", 1)
    _record_file(cache, "gate", key).write_text(json.dumps({"ok": True}))
    with caplog.at_level(logging.WARNING):
        assert cache.get("gate", key) is None
    assert not caplog.records
    cache.put("gate", key, {"ok": True})
    assert cache.get("gate", key) == {"ok": True}
