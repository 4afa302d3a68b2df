"""builders.nasva.data: feature files, labels validation with named skips, text cache, collate (nasva.md §2, §4)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from builders.nasva.data import (
    FeatureError,
    FeatureStore,
    HashTextEncoder,
    NasvaInputError,
    SkipCounts,
    build_samples,
    collate,
    encode_texts,
    index_feature_files,
    load_feature_file,
    read_labels,
)


class _Evil:  # a pickled object that weights_only loading must refuse
    pass


def test_feature_formats(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.save(tmp_path / "v_npy.npy", a)
    np.save(tmp_path / "v_s3d.mp4.npy", a.astype(np.float16))
    np.savez(tmp_path / "v_npz.npz", features=a)
    torch.save(torch.from_numpy(a).half(), tmp_path / "v_pt.pt")
    torch.save({"features": torch.from_numpy(a), "note": "x"}, tmp_path / "v_dict.pth.tar")
    (tmp_path / "sub").mkdir()
    torch.save(torch.from_numpy(a + 1), tmp_path / "sub" / "v_npy.pth")  # .pth ranks before .npy
    idx = index_feature_files(tmp_path)
    assert set(idx) == {"v_npy", "v_s3d", "v_npz", "v_pt", "v_dict"}
    assert idx["v_npy"].name == "v_npy.pth" and idx["v_s3d"].name == "v_s3d.mp4.npy"
    for vid in idx:
        arr = load_feature_file(idx[vid])
        assert arr.dtype == np.float32 and arr.shape == (4, 3)
        np.testing.assert_array_equal(arr, a + (1 if vid == "v_npy" else 0))


@pytest.mark.parametrize("make, reason", [
    (lambda p: np.save(p / "x.npy", np.array([[0.0, np.nan]], dtype=np.float32)), "nan_features"),
    (lambda p: np.save(p / "x.npy", np.array([[0.0, np.inf]], dtype=np.float32)), "nan_features"),
    (lambda p: np.save(p / "x.npy", np.zeros(5, dtype=np.float32)), "bad_features"),
    (lambda p: np.save(p / "x.npy", np.zeros((0, 4), dtype=np.float32)), "empty_features"),
    (lambda p: (p / "x.npy").write_bytes(b"not a numpy file"), "unreadable_features"),
    (lambda p: torch.save({"feats": torch.zeros(2, 2)}, p / "x.pt"), "bad_features"),
    (lambda p: torch.save(_Evil(), p / "x.pt"), "unreadable_features"),
    (lambda p: np.savez(p / "x.npz", other=np.zeros((2, 2))), "bad_features"),
])
def test_bad_feature_files_have_named_reasons(tmp_path, make, reason):
    make(tmp_path)
    path = index_feature_files(tmp_path)["x"]
    with pytest.raises(FeatureError) as err:
        load_feature_file(path)
    assert err.value.reason == reason


def test_missing_features_dir_is_an_input_error(tmp_path):
    with pytest.raises(NasvaInputError, match="not found"):
        FeatureStore(tmp_path / "nope")


def test_labels_validation_counts_every_skip(tmp_path):
    np.save(tmp_path / "good.npy", np.zeros((10, 4), np.float32))
    np.save(tmp_path / "long.npy", np.zeros((1500, 4), np.float32))
    np.save(tmp_path / "nan.npy", np.full((10, 4), np.nan, np.float32))
    np.save(tmp_path / "wide.npy", np.zeros((10, 5), np.float32))
    np.save(tmp_path / "allbad.npy", np.zeros((10, 4), np.float32))
    labels = {
        "good": [{"text": "a", "start": 0.0, "end": 2.0},
                 {"text": "", "start": 0, "end": 1},  # bad_label: empty text
                 {"text": "b", "start": 5, "end": 3},  # bad_label: end < start
                 {"text": "c", "start": "x", "end": 3},  # bad_label: not a number
                 {"text": "d", "start": float("nan"), "end": 3},  # bad_label
                 {"text": "e", "start": 10.5, "end": 12},  # label_outside_video (start after the last frame 9)
                 {"text": "f", "start": 3.2, "end": 3.9},  # kept, note no_positive_frame
                 [1, 4.0, 6.0, "g"]],  # HTM-Align row accepted
        "long": [{"text": "h", "start": 1100, "end": 1199.9}, {"text": "i", "start": 1190, "end": 1200}],
        "nan": [{"text": "j", "start": 0, "end": 1}],
        "wide": [{"text": "k", "start": 0, "end": 1}],
        "absent": [{"text": "l", "start": 0, "end": 1}],
        "empty": [],
        "notalist": {"text": "m"},
        "allbad": [{"text": "n", "start": 2000, "end": 2001}],
    }
    store = FeatureStore(tmp_path, expected_dim=4, max_rows=1200)
    skips = SkipCounts()
    samples = build_samples(labels, "steps", store, skips, max_vlen=1200)
    assert [s.video_id for s in samples] == ["good", "long"]
    good, long = samples
    assert good.texts == ["a", "f", "g"] and good.start.tolist() == [0.0, 3.2, 4.0] and good.n_frames == 10
    assert long.texts == ["h"] and long.n_frames == 1200  # end 1200 is not < 1200: dropped (official, strict)
    assert skips.texts == {"bad_label": 4, "label_outside_video": 1, "beyond_max_vlen": 2}
    assert skips.videos == {"nan_features": 1, "feature_dim_mismatch": 1, "missing_features": 1, "no_texts": 1,
                            "bad_labels": 1, "no_texts_left": 1}
    assert skips.notes == {"no_positive_frame": 1}
    text = skips.summary("train")
    assert "missing_features=1 (e.g. absent" in text and "beyond_max_vlen=2" in text


def test_text_pe_cap_truncates_with_a_note(tmp_path):
    np.save(tmp_path / "v.npy", np.zeros((20, 2), np.float32))
    labels = {"v": [{"text": f"t{i}", "start": i, "end": i + 1} for i in range(6)]}
    skips = SkipCounts()
    (s,) = build_samples(labels, "narrations", FeatureStore(tmp_path), skips, 1200, max_texts=4)
    assert s.texts == ["t0", "t1", "t2", "t3"] and skips.notes == {"texts_beyond_text_pe": 2}


@pytest.mark.parametrize("content, match", [("{not json", "not valid json"), ("[1, 2]", "json object")])
def test_unreadable_labels_file(tmp_path, content, match):
    (tmp_path / "l.json").write_text(content)
    with pytest.raises(NasvaInputError, match=match):
        read_labels(tmp_path / "l.json")
    with pytest.raises(NasvaInputError, match="not found"):
        read_labels(tmp_path / "missing.json")


def test_text_cache_per_sentence(tmp_path, monkeypatch):
    enc = HashTextEncoder(8)
    table, row = encode_texts(enc, ["b", "a", "b"], tmp_path / "c.sqlite")
    assert table.shape == (2, 8) and row == {"a": 0, "b": 1}
    np.testing.assert_allclose(np.linalg.norm(table, axis=1), 1.0, atol=1e-6)
    calls = []
    monkeypatch.setattr(HashTextEncoder, "encode", lambda self, t: calls.append(list(t)) or np.ones((len(t), 8)))
    again, _ = encode_texts(enc, ["a", "b"], tmp_path / "c.sqlite")
    assert calls == [] and np.array_equal(again, table)  # both from the cache
    third, row3 = encode_texts(enc, ["c", "a"], tmp_path / "c.sqlite")
    assert calls == [["c"]] and np.array_equal(third[row3["a"]], table[0]) and np.all(third[row3["c"]] == 1)
    encode_texts(HashTextEncoder(4), ["a"], tmp_path / "c.sqlite")  # another encoder id misses the cache
    assert calls == [["c"], ["a"]]


def test_collate_pads_by_repeating_and_masks():
    v0 = np.arange(6, dtype=np.float32).reshape(3, 2)
    v1 = np.arange(10, dtype=np.float32).reshape(5, 2)
    t0 = np.eye(3, dtype=np.float32)[:1]
    t1 = np.eye(3, dtype=np.float32)
    b = collate([v0, v1], [t0, t1], [np.array([0.5]), np.array([0.0, 2.0, 3.5])],
                [np.array([2.0]), np.array([1.0, 2.0, 9.0])], [["x"], ["p", "q", "r"]], ["a", "b"], narration=True)
    assert b.visual.shape == (2, 5, 2) and b.text.shape == (2, 3, 3)
    assert torch.equal(b.visual[0, 3:], torch.tensor([[4.0, 5.0], [4.0, 5.0]]))  # last frame repeated
    assert torch.equal(b.text[0, 1:], torch.tensor([[1.0, 0, 0], [1.0, 0, 0]]))  # last text repeated
    assert b.visual_padding_mask.tolist() == [[False] * 3 + [True] * 2, [False] * 5]
    assert b.text_padding_mask.tolist() == [[False, True, True], [False] * 3]
    assert b.time_mask[0].int().tolist() == [[0, 1, 1, 0, 0], [0] * 5, [0] * 5]  # end-inclusive, pads False
    assert b.time_mask[1].int().tolist() == [[1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 1]]
    assert b.narration and b.texts == [["x"], ["p", "q", "r"]]


def test_step_mode_shuffles_texts_masks_and_strings_together():
    v = np.zeros((6, 2), np.float32)
    t = np.eye(4, dtype=np.float32)
    s, e = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 1.0, 2.0, 3.0])
    names = ["t0", "t1", "t2", "t3"]
    b = collate([v], [t], [s], [e], [names], ["v"], narration=False, shuffle_rng=random.Random(5))
    order = b.orders[0]
    assert sorted(order.tolist()) == [0, 1, 2, 3] and order.tolist() != [0, 1, 2, 3]
    assert b.texts[0] == [names[i] for i in order]
    for k, i in enumerate(order):
        assert int(b.text[0, k].argmax()) == i and b.time_mask[0, k].nonzero().flatten().tolist() == [i]
    same = collate([v], [t], [s], [e], [names], ["v"], narration=True, shuffle_rng=random.Random(5))
    assert same.orders[0].tolist() == [0, 1, 2, 3]  # <narration>: stored order


def test_labels_file_roundtrip_format(tmp_path):
    (tmp_path / "l.json").write_text(json.dumps({"v": [{"text": "a", "start": 1, "end": 2}]}))
    assert read_labels(tmp_path / "l.json") == {"v": [{"text": "a", "start": 1, "end": 2}]}


def _hash_reference(texts: list[str], dim: int) -> np.ndarray:
    """The hash encoder as first written: a Generator drawn per word occurrence, added word by word."""
    import hashlib
    import re

    out = np.zeros((len(texts), dim), dtype=np.float64)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z0-9']+", t.lower()) or [""]:
            seed = int.from_bytes(hashlib.sha1(w.encode("utf-8")).digest()[:8], "little")
            out[i] += np.random.default_rng(seed).standard_normal(dim)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out.astype(np.float32)


def test_hash_encoder_is_bit_identical_to_word_by_word_sums(monkeypatch):
    """Issue 19: the word vectors are kept and summed with one ``np.add.at`` (in word order), the same bits."""
    rng = random.Random(0)
    words = ["the", "add", "flour", "bowl", "whisk", "it's", "3", "Now", "SALT"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(200)]
    texts += ["", "!!", "a A a"]
    for dim in (8, 64):
        enc = HashTextEncoder(dim)
        assert np.array_equal(enc.encode(texts), _hash_reference(texts, dim))
        assert np.array_equal(enc.encode(texts[::-1]), _hash_reference(texts[::-1], dim))  # from the kept vectors
    monkeypatch.setattr(HashTextEncoder, "CACHE_BYTES", 8 * 8 * 3)  # a full table starts again at the next batch
    enc = HashTextEncoder(8)
    for part in (texts[:50], texts[50:], texts):
        assert np.array_equal(enc.encode(part), _hash_reference(part, 8))
        vocab = {w for t in part for w in (HashTextEncoder._WORD_RE.findall(t.lower()) or [""])}
        assert set(enc._row) == vocab and enc._table.shape == (len(vocab), 8)  # this batch's words only


def test_features_stored_per_shard_are_read_through_references(tmp_path):
    """Issue 19: a folder may name videos kept in per-shard store files (``features.refs.json``); the store reads
    their rows, and simulated ones (howtostep.md §6) are regenerated from the narration factors, fp16-rounded."""
    from builders.nasva.data import FEATURE_REFS_FILE, FeatureRef
    from builders.ops.simulated_features import simulated_features

    dense = np.random.default_rng(0).standard_normal((9, 6)).astype(np.float16)
    np.save(tmp_path / "block.f16.npy", dense)
    emb = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    times = np.array([[0.0, 2.5], [2.0, 4.0], [6.0, 9.0], [8.5, 12.0]])
    np.save(tmp_path / "block.sim.npy", np.concatenate([times, emb.astype(np.float64)], axis=1))
    feats = tmp_path / "features"
    feats.mkdir()
    np.save(feats / "plain.npy", np.ones((3, 6), np.float32))
    refs = {"d1": FeatureRef(str(tmp_path / "block.f16.npy"), 0, 4).as_dict(),
            "d2": FeatureRef(str(tmp_path / "block.f16.npy"), 4, 9).as_dict(),
            "s1": FeatureRef(str(tmp_path / "block.sim.npy"), 0, 4, "simulated", frames=11, dim=6).as_dict(),
            "bad": FeatureRef(str(tmp_path / "block.f16.npy"), 7, 12).as_dict()}
    (feats / FEATURE_REFS_FILE).write_text(json.dumps(refs))
    idx = index_feature_files(feats)
    assert set(idx) == {"plain", "d1", "d2", "s1", "bad"} and isinstance(idx["s1"], FeatureRef)
    store = FeatureStore(feats, expected_dim=6)
    assert np.array_equal(store.get("d2"), dense[4:9].astype(np.float32)) and store.probe("d1") == 4
    want = simulated_features(emb, times[:, 0], times[:, 1], 11, dim=6, seed=0).astype(np.float16)
    assert np.array_equal(store.get("s1"), want.astype(np.float32)) and store.probe("s1") == 11
    with pytest.raises(FeatureError) as err:
        store.get("bad")
    assert err.value.reason == "bad_features"
    (feats / FEATURE_REFS_FILE).write_text("{not json")
    with pytest.raises(NasvaInputError, match="feature references"):
        index_feature_files(feats)
