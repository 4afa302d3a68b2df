"""Damaged model-output caches (issue 34): a request cache value or a cached embedding whose bytes differ from
those written is a miss (asked again, written again, one warning line); a cache file cut short is moved aside and
the cache starts empty. The results equal those of an undamaged cache."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import pytest

from builders.models.embedding_cache import EmbeddingCache, encode_set_cached
from builders.models.request_cache import RequestCache


def flip_in(path: Path, needle: bytes) -> None:
    data = bytearray(path.read_bytes())
    k = data.index(needle) + len(needle) - 1
    data[k] ^= 0x01
    path.write_bytes(bytes(data))


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


class Model:
    """A stand-in for an LLM: the answer of a prompt, counted."""

    def __init__(self):
        self.calls: list[str] = []

    def answer(self, cache: RequestCache, prompts: list[str]) -> dict[str, str]:
        keys = {p: RequestCache.key(prompt=p) for p in prompts}
        found = cache.get_many(list(keys.values()))
        missing = {keys[p]: p.upper() for p in prompts if keys[p] not in found}
        self.calls.extend(missing.values())
        cache.put_many(missing)
        return {p: found.get(keys[p], missing.get(keys[p])) for p in prompts}


def test_request_cache_stores_the_digest_of_each_value(tmp_path):
    import sqlite3

    cache = RequestCache(tmp_path / "r.sqlite")
    cache.put_many({"a": {"text": "x"}})
    cache.close()
    with sqlite3.connect(tmp_path / "r.sqlite") as db:
        assert db.execute("SELECT sha FROM requests").fetchone()[0] == hashlib.sha256(b'{"text": "x"}').hexdigest()


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_a_damaged_request_cache_entry_is_asked_again(tmp_path, caplog, damage):
    path = tmp_path / "requests.sqlite"
    model = Model()
    prompts = ["boil water", "chop the onions"] + [f"filler prompt number {i} " * 20 for i in range(40)]
    with RequestCache(path) as cache:
        want = model.answer(cache, prompts)
    assert want["boil water"] == "BOIL WATER" and len(model.calls) == 42
    if damage == "flip":  # "BOIL WATER" -> "BOIL WATES": still text, still JSON
        flip_in(path, b'"BOIL WATER')
    else:
        cut(path)
    model.calls.clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="builders.models.request_cache"), RequestCache(path) as cache:
        assert model.answer(cache, prompts) == want
    warned = _warnings(caplog)
    assert len(warned) == 1 and str(path) in warned[0]
    if damage == "flip":
        assert model.calls == ["BOIL WATER"]  # that entry alone
        assert RequestCache.key(prompt="boil water") in warned[0]
    else:
        assert len(model.calls) == 42 and Path(f"{path}.damaged").exists()
    model.calls.clear()
    with RequestCache(path) as cache:  # written again: found as written
        assert model.answer(cache, prompts) == want and model.calls == []


class Encoder:
    model_id = "fake-encoder"
    dim = 3

    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        return np.array([[len(t), 0.5, 1.25] for t in texts], dtype=np.float32)


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_a_damaged_embedding_is_encoded_again(tmp_path, caplog, damage):
    path = tmp_path / "emb.sqlite"
    enc = Encoder()
    texts = ["stir", "boil water", "stir"]
    cache = EmbeddingCache(path)
    want = encode_set_cached(enc, texts, cache)
    cache.close()
    # sorted distinct texts ["boil water", "stir"]: rows [10, .5, 1.25], [4, .5, 1.25], then by the texts' order
    assert want.tolist() == [[4, 0.5, 1.25], [10, 0.5, 1.25], [4, 0.5, 1.25]] and enc.calls == 1
    if damage == "flip":  # a bit of the float 10.0 of the stored vector: another float, the same size
        flip_in(path, np.float32(10.0).tobytes())
    else:
        cut(path)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="builders.models.embedding_cache"):
        cache = EmbeddingCache(path)
        got = encode_set_cached(enc, texts, cache)
        cache.close()
    assert got.tolist() == want.tolist() and enc.calls == 2
    warned = _warnings(caplog)
    assert len(warned) == 1 and str(path) in warned[0]
    cache = EmbeddingCache(path)
    assert encode_set_cached(enc, texts, cache).tolist() == want.tolist() and enc.calls == 2  # written again
    cache.close()
