"""encode_set_cached (builders/models/embedding_cache.py): per-set keys, and chunked sets that survive a kill."""

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


def test_chunked_run_killed_then_resumed_equals_an_uninterrupted_run(tmp_path):
    reference = encode_set_cached(FakeEncoder(), TEXTS, None, chunk_size=5)
    assert reference.shape == (25, 4)
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    killed = FakeEncoder(fail_after=3)
    with pytest.raises(KeyboardInterrupt):
        encode_set_cached(killed, TEXTS, cache, chunk_size=5)
    unique = sorted(set(TEXTS))
    blocks = [unique[i:i + 5] for i in range(0, 23, 5)]  # 5 blocks: 5, 5, 5, 5, 3
    assert killed.calls == blocks[:3]
    resumed = FakeEncoder()
    out = encode_set_cached(resumed, TEXTS, cache, chunk_size=5)
    assert resumed.calls == blocks[3:]  # only the blocks the killed run had not finished
    assert np.array_equal(out, reference) and out.dtype == np.float32
    again = FakeEncoder()
    assert np.array_equal(encode_set_cached(again, list(reversed(TEXTS)), cache, chunk_size=5),
                          reference[::-1]) and again.calls == []
    # rows follow the input: repeats get the same vector
    assert np.array_equal(out[TEXTS.index("step 005")], out[-2])


def test_chunk_size_none_or_large_is_the_single_set_path(tmp_path):
    unique = sorted(set(TEXTS))
    old = FakeEncoder().encode(unique)[[unique.index(t) for t in TEXTS]]
    for chunk_size in (None, 23, 24, 10_000):
        cache = EmbeddingCache(tmp_path / f"e{chunk_size}.sqlite")
        enc = FakeEncoder()
        out = encode_set_cached(enc, TEXTS, cache, chunk_size=chunk_size)
        assert enc.calls == [unique] and np.array_equal(out, old)
        key = "set:" + hashlib.sha1("\n".join(unique).encode("utf-8")).hexdigest()
        stored = cache.get(FakeEncoder.model_id, [key])
        assert list(stored) == [key] and np.array_equal(stored[key].reshape(23, 4), FakeEncoder().encode(unique))
    # a set cached unchunked is found by a later call with a large chunk_size, and the other way round
    enc = FakeEncoder()
    assert np.array_equal(encode_set_cached(enc, TEXTS, cache, chunk_size=None), old) and enc.calls == []
    # a smaller chunk_size is another result (other calls, other last bits), never mixed with the whole-set entry
    enc = FakeEncoder()
    chunked = encode_set_cached(enc, TEXTS, cache, chunk_size=7)
    assert [len(c) for c in enc.calls] == [7, 7, 7, 2] and not np.array_equal(chunked, old)
    np.testing.assert_allclose(chunked, old, atol=1e-4)


def test_chunk_size_edge_cases(tmp_path):
    enc = FakeEncoder()
    assert encode_set_cached(enc, [], None, chunk_size=3).shape == (0, 4) and enc.calls == []
    out = encode_set_cached(enc, ["b", "a", "c"], None, chunk_size=1)
    assert enc.calls == [["a"], ["b"], ["c"]] and out.shape == (3, 4)
    with pytest.raises(ValueError):
        encode_set_cached(enc, ["a"], None, chunk_size=0)
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    encode_set_cached(FakeEncoder(), ["a", "b", "c", "d"], cache, chunk_size=2)
    key = "set:" + hashlib.sha1("c\nd".encode("utf-8")).hexdigest()
    cache.put(FakeEncoder.model_id, [key], np.zeros((1, 7), dtype=np.float32))  # a corrupt block
    with pytest.raises(RuntimeError, match="corrupt"):
        encode_set_cached(FakeEncoder(), ["a", "b", "c", "d"], cache, chunk_size=2)


def test_minilm_chunk_size_at_least_n_equals_the_unchunked_path_exactly(tmp_path):
    from builders.models.text_encoder import get_encoder

    minilm = get_encoder("minilm")
    texts = ["stir the soup", "add salt", "stir the soup", "Preheat the oven to 350 degrees F (175 degrees C).",
             "Chop the onions finely", "whisk eggs and sugar until pale", "add salt", "serve hot"]
    unique = sorted(set(texts))
    old_path = minilm.encode(unique)[[unique.index(t) for t in texts]]  # what encode_set_cached did before chunks
    plain = encode_set_cached(minilm, texts, EmbeddingCache(tmp_path / "plain.sqlite"))
    assert np.array_equal(plain, old_path)
    for chunk_size in (len(unique), len(unique) + 1, 1000):
        cache = EmbeddingCache(tmp_path / f"c{chunk_size}.sqlite")
        out = encode_set_cached(minilm, texts, cache, chunk_size=chunk_size)
        assert np.array_equal(out, old_path) and out.dtype == np.float32
        key = "set:" + hashlib.sha1("\n".join(unique).encode("utf-8")).hexdigest()
        assert list(cache.get(minilm.model_id, [key])) == [key]  # the same single key as the unchunked path
    chunked = encode_set_cached(minilm, texts, None, chunk_size=2)  # other cuts: equal up to float noise
    np.testing.assert_allclose(chunked, old_path, atol=1e-5)
