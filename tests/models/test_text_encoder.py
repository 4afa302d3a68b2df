from __future__ import annotations

import numpy as np
import pytest

from builders.models.embedding_cache import EmbeddingCache, encode_cached, text_key
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


def test_cache_roundtrip_and_reuse(minilm, tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    texts = ["stir the soup", "add salt", "stir the soup"]
    first = encode_cached(minilm, texts, cache)
    assert np.array_equal(first[0], first[2])
    assert set(cache.get(minilm.model_id, [text_key(t) for t in texts])) == {text_key("stir the soup"),
                                                                              text_key("add salt")}
    calls = []
    monkeypatch.setattr(SentenceEncoder, "encode", lambda self, t: calls.append(list(t)) or np.zeros((len(t), 384)))
    again = encode_cached(minilm, ["add salt", "stir the soup"], cache)
    assert calls == []  # both from the cache
    assert np.array_equal(again, first[[1, 0]])
    encode_cached(minilm, ["add pepper", "add salt"], cache)
    assert calls == [["add pepper"]]  # only the new text is embedded
    assert cache.get("another-model", [text_key("add salt")]) == {}
