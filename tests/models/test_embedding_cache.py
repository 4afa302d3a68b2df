"""encode_set_cached (builders/models/embedding_cache.py): one key and one encoder call per set of texts."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from builders.models.embedding_cache import EmbeddingCache, encode_set_cached


class FakeEncoder:
    """Deterministic vectors that, like a transformer's, depend in their last bits on the call they were computed in
    (here: on the number of texts of the call), and a record of every call; ``fail_after`` calls then it raises."""

    model_id = "fake/encoder"
    dim = 4

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_after = fail_after

    def encode(self, texts):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("killed")  # a kill, not an ordinary error
        self.calls.append(list(texts))
        base = np.array([[b / 255.0 for b in hashlib.sha1(t.encode()).digest()[:4]] for t in texts], dtype=np.float32)
        return (base + np.float32(1e-6) * len(texts)).astype(np.float32)


TEXTS = [f"step {i:03d}" for i in range(23)][::-1] + ["step 005", "step 017"]  # 23 distinct, unsorted, repeats


def test_one_set_is_one_call_and_one_key(tmp_path):
    unique = sorted(set(TEXTS))
    old = FakeEncoder().encode(unique)[[unique.index(t) for t in TEXTS]]
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    enc = FakeEncoder()
    out = encode_set_cached(enc, TEXTS, cache)
    assert enc.calls == [unique] and np.array_equal(out, old) and out.dtype == np.float32
    key = "set:" + hashlib.sha1("\n".join(unique).encode("utf-8")).hexdigest()
    stored = cache.get(FakeEncoder.model_id, [key])
    assert list(stored) == [key] and np.array_equal(stored[key].reshape(23, 4), FakeEncoder().encode(unique))
    again = FakeEncoder()  # the same set in another order: from the cache, rows follow the input
    assert np.array_equal(encode_set_cached(again, list(reversed(TEXTS)), cache), old[::-1]) and again.calls == []
    assert np.array_equal(out[TEXTS.index("step 005")], out[-2])
    assert encode_set_cached(enc, [], None).shape == (0, 4)


def test_a_corrupt_set_entry_is_an_error(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    encode_set_cached(FakeEncoder(), ["a", "b", "c"], cache)
    key = "set:" + hashlib.sha1("a\nb\nc".encode("utf-8")).hexdigest()
    cache.put(FakeEncoder.model_id, [key], np.zeros((1, 7), dtype=np.float32))  # 7 floats for 3 texts
    with pytest.raises(RuntimeError, match="corrupt"):
        encode_set_cached(FakeEncoder(), ["a", "b", "c"], cache)


def test_minilm_set_equals_one_encoder_call(tmp_path):
    from builders.models.text_encoder import get_encoder

    minilm = get_encoder("minilm")
    texts = ["stir the soup", "add salt", "stir the soup", "Preheat the oven to 350 degrees F (175 degrees C).",
             "Chop the onions finely", "whisk eggs and sugar until pale", "add salt", "serve hot"]
    unique = sorted(set(texts))
    direct = minilm.encode(unique)[[unique.index(t) for t in texts]]
    cache = EmbeddingCache(tmp_path / "plain.sqlite")
    assert np.array_equal(encode_set_cached(minilm, texts, cache), direct)
    assert np.array_equal(encode_set_cached(minilm, texts, cache), direct)  # read back: the same bits
