"""The files of the ``hmm_ibm1`` stage (builders/corpora/marc/em_files.py): pair shards on disk read one at a time,
fitted tables written as checked ``.npy`` files and memory-mapped when read, a damaged one refused (issue 37)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from builders.core.errors import DamagedCache
from builders.corpora.marc.em_files import DiskPairShards, load_tables, save_tables
from builders.ops.hmm_ibm1 import HmmIbm1, HmmIbm1Config
from builders.ops.pair_shards import PairShardWriter

PAIRS = [([["chop", "onion"], ["fry", "onion", "oil"], ["add", "salt"]],
          [["heat", "oil"], ["chop", "onions", "onion"], ["season", "salt", "pepper"]]),
         ([["boil", "pasta", "water"], ["drain", "pasta"], [], ["bake", "oven", "cheese"]],
          [["cook", "pasta"], ["drain"], ["top", "cheese", "bake"], ["serve"]]),
         ([["mix", "flour", "sugar"], ["add", "egg", "egg"]], [["whisk", "egg"], ["add", "flour", "sugar"]])]


def _vocabulary(pairs):
    words = sorted({w for p in pairs for r in p for ins in r for w in ins})
    return {w: i for i, w in enumerate(words)}


def test_disk_shards_hold_one_shard_at_a_time_and_train_as_in_memory(tmp_path):
    pairs = [(s, t) for _ in range(6) for s, t in PAIRS + [(t, s) for s, t in PAIRS]]
    cfg = HmmIbm1Config.best(chunk_entries=60)
    vocab = _vocabulary(pairs)
    store = DiskPairShards(tmp_path / "shards")
    writer = PairShardWriter(vocab, store.append, cfg.chunk_entries)
    for s, t in pairs:
        writer.add(s, t)
    writer.close()
    assert store.pairs == len(pairs) and len(store) > 4
    assert sorted(p.name for p in (tmp_path / "shards").iterdir())[:2] == ["pairs-00000", "pairs-00001"]
    streamed = HmmIbm1(cfg).fit_streamed(store, vocab)
    # the reader never had more than one shard's pairs alive (each shard lives as long as the pairs laid out from it)
    assert 0 < store.max_resident_pairs <= store.max_shard_pairs < len(pairs)
    assert store.resident_pairs == 0
    memory = HmmIbm1(cfg).fit(pairs, vocabulary=vocab)
    assert np.array_equal(streamed.t, memory.t) and streamed.jump == memory.jump
    one = DiskPairShards(tmp_path / "one")
    writer = PairShardWriter(vocab, one.append, 1 << 22)
    for s, t in pairs:
        writer.add(s, t)
    writer.close()
    whole = HmmIbm1(HmmIbm1Config.best()).fit_streamed(one, vocab)
    assert len(one) == 1 and np.array_equal(whole.t, HmmIbm1(HmmIbm1Config.best()).fit(pairs, vocabulary=vocab).t)
    # a shard folder cut short (no completion mark) is an error, never half-read
    (tmp_path / "shards" / "pairs-00001" / "_complete").unlink()
    with pytest.raises(FileNotFoundError, match="not written completely"):
        store.load(1)


def _tables(tmp_path):
    model = HmmIbm1(HmmIbm1Config.best()).fit(PAIRS * 2)
    arrays, meta = model.to_state()
    save_tables(tmp_path, "model_text_text", arrays, meta)
    return model, arrays


def test_tables_are_mapped_read_only_and_align_as_the_fitted_model(tmp_path):
    model, arrays = _tables(tmp_path)
    assert sorted(p.name for p in (tmp_path / "model_text_text").iterdir()) == sorted(f"{k}.npy" for k in arrays)
    mapped, meta = load_tables(tmp_path, "model_text_text")
    assert all(isinstance(a, np.memmap) and not a.flags.writeable for a in mapped.values())
    loaded = HmmIbm1.from_state(mapped, meta)
    assert loaded.t.base is not None and not loaded.t.flags.writeable  # a view of the map, not a copy
    for a, b in zip(model.align(PAIRS), loaded.align(PAIRS), strict=True):
        assert np.array_equal(a.gamma, b.gamma) and np.array_equal(a.top_indices, b.top_indices)
    record = json.loads((tmp_path / "model_text_text.json").read_text())["record"]
    assert record["files"]["t"]["shape"] == [model.t.size] and record["files"]["keys"]["dtype"] == "<i8"


def test_a_damaged_or_missing_table_is_refused(tmp_path):
    _tables(tmp_path)
    t = tmp_path / "model_text_text" / "t.npy"
    data = bytearray(t.read_bytes())
    data[-3] ^= 0x40  # one bit of one probability
    t.write_bytes(bytes(data))
    with pytest.raises(DamagedCache, match="sha256") as err:
        load_tables(tmp_path, "model_text_text")
    assert err.value.path == str(t)
    t.unlink()
    with pytest.raises(DamagedCache, match="missing") as err:
        load_tables(tmp_path, "model_text_text")
    assert err.value.path == str(t)
    record = tmp_path / "model_text_text.json"
    record.write_text(record.read_text().replace('"window": 5', '"window": 4'))
    with pytest.raises(DamagedCache, match="sha256") as err:
        load_tables(tmp_path, "model_text_text")
    assert err.value.path == str(record)
    record.unlink()
    with pytest.raises(DamagedCache, match="missing"):
        load_tables(tmp_path, "model_text_text")
