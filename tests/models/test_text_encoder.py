from __future__ import annotations

import numpy as np
import pytest

from builders.models.embedding_cache import EmbeddingCache, encode_set_cached
from builders.models.text_encoder import MODEL_IDS, SentenceEncoder, get_encoder, resolve_model


@pytest.fixture(scope="module")
def minilm():
    return get_encoder("minilm")


def test_minilm_vectors_are_unit_and_semantic(minilm):
    v = minilm.encode(["Chop the onions finely", "Dice the onion", "Preheat the oven to 350 degrees"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2  # paraphrase much closer than an unrelated step
    assert minilm.model_id == MODEL_IDS["minilm"]
    assert minilm.encode([]).shape == (0, 384)


def test_mpnet_is_the_paper_default_and_loads_offline():
    enc = get_encoder("mpnet")
    v = enc.encode(["Chop the onions finely", "Dice the onion"])
    assert v.shape == (2, 768) and enc.model_id == "sentence-transformers/all-mpnet-base-v2"
    assert 0.6 < float(v[0] @ v[1]) < 1.0


def test_unknown_model_path_does_not_download(tmp_path):
    model_id, path = resolve_model(str(tmp_path))
    assert model_id.startswith("local:") and path == str(tmp_path)


def test_set_cache_roundtrip_and_reuse(minilm, tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    texts = ["stir the soup", "add salt", "stir the soup"]
    first = encode_set_cached(minilm, texts, cache)
    assert first.shape == (3, 384) and np.array_equal(first[0], first[2])
    assert np.allclose(first[1], minilm.encode(["add salt"])[0], atol=1e-5)
    calls = []
    monkeypatch.setattr(SentenceEncoder, "encode", lambda self, t: calls.append(list(t)) or np.zeros((len(t), 384)))
    again = encode_set_cached(minilm, ["add salt", "stir the soup"], cache)  # same set, other order: from the cache
    assert calls == [] and np.array_equal(again, first[[1, 0]])
    encode_set_cached(minilm, ["add pepper", "add salt"], cache)  # another set is embedded as a whole, sorted
    assert calls == [["add pepper", "add salt"]]
    assert encode_set_cached(minilm, [], cache).shape == (0, 384)
