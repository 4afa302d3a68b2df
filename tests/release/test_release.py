from __future__ import annotations

import os
from pathlib import Path

import pytest
from datasets import load_dataset
from huggingface_hub import DatasetCard

from builders.release import (
    ReleaseGateError,
    render_card,
    split_info,
    write_readme,
    write_split,
)
from builders.release.gate import gate
from loading_scripts import sieve_swap as schema


def video(i: int) -> dict:
    seg = {"start": 1.0 + i, "end": 4.5 + i, "text": "Mix the flour and sugar.", "recipe_id": 7, "step_index": 0,
           "similarity": 0.9, "asr_text": "now mix the flour and the sugar", "num_merged": 1,
           "candidates": [{"text": "Mix the flour and sugar.", "recipe_id": 7, "step_index": 0, "similarity": 0.9},
                          {"text": "Stir in sugar.", "recipe_id": 9, "step_index": 2, "similarity": 0.8}]}
    return {"video_id": f"vid{i:08d}", "title": "Best Cake", "title_source": "youtube_title", "task_id": 1,
            "task_name": "Make Cake", "category_1": "Food and Entertaining", "category_2": "Desserts",
            "duration": 120.5, "duration_source": "metadata", "asr_source": "howto100m_raw_caption",
            "recipe_ids": [7, 9], "recipe_token_iou": [0.3, 0.2], "recipe_token_recall": [0.5, 0.4],
            "max_token_iou": 0.3, "num_asr_segments": 10, "segments": [seg],
            "provenance": {"builder_version": "0.1.0", "embedding_model": "m", "sim_threshold": 0.75,
                           "iou_threshold": 0.1, "recall_threshold": 0.3, "val_iou_threshold": 0.2,
                           "title_match": "any", "retrieval_pool": "global", "top_k": 2}}


def recipe(i: int) -> dict:
    return {"recipe_id": i, "title": f"Cake {i}", "ingredients": ["1 c. flour"], "directions": ["Mix.", "Bake."],
            "ner": ["flour"], "link": "www.example.com/x", "source": "Gathered", "num_segments_top1": i % 3}


def make_release(root, n_train=5, n_val=3, per_shard=2):
    splits = {"default": ["train", "validation"], "raw_asr": ["train"], "recipes": ["train"]}
    write_split(root, "default", "train", [video(i) for i in range(n_train)], schema.FEATURES["default"], per_shard)
    write_split(root, "default", "validation", [video(100 + i) for i in range(n_val)], schema.FEATURES["default"],
                per_shard)
    raw = [{"video_id": f"vid{i:08d}", "duration": 120.5, "asr_source": "whisperx",
            "segments": [{"start": 0.0, "end": 2.0, "text": "hi"}]} for i in range(n_train)]
    write_split(root, "raw_asr", "train", raw, schema.FEATURES["raw_asr"], per_shard)
    write_split(root, "recipes", "train", [recipe(i) for i in range(4)], schema.FEATURES["recipes"], per_shard)
    feats = {c: schema.FEATURES[c] for c in splits}
    write_readme(root, features_by_config=feats, splits_by_config=splits, default_config="default",
                 card=schema.CARD, title="Sieve & Swap", body="body text")
    return feats, splits


def test_release_loads_offline_with_the_declared_features(tmp_path, monkeypatch):
    root = tmp_path / "sieve_swap"
    feats, splits = make_release(root)
    assert sorted(p.name for p in (root / "default").iterdir()) == [
        "train-00000-of-00003.parquet", "train-00001-of-00003.parquet", "train-00002-of-00003.parquet",
        "validation-00000-of-00002.parquet", "validation-00001-of-00002.parquet"]
    assert split_info(root, "default", "train").num_examples == 5
    got = gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")
    assert got == {"default": {"train": 5, "validation": 3}, "raw_asr": {"train": 5}, "recipes": {"train": 4}}
    card = DatasetCard.load(root / "README.md")
    configs = {c["config_name"]: c for c in card.data.configs}
    assert configs["default"]["default"] is True and "default" not in configs["recipes"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load_dataset("sieve_swap")
    assert ds["train"].features == schema.FEATURES["default"]
    row = ds["train"][0]
    assert row["title_source"] == 0 and row["segments"][0]["candidates"][1]["recipe_id"] == 9
    assert load_dataset("sieve_swap", "recipes")["train"].features["source"].names == ["Gathered", "Recipes1M"]


def test_write_split_is_deterministic(tmp_path):
    a = write_split(tmp_path / "a", "recipes", "train", [recipe(i) for i in range(5)], schema.FEATURES["recipes"], 2)
    b = write_split(tmp_path / "b", "recipes", "train", [recipe(i) for i in range(5)], schema.FEATURES["recipes"], 2)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    # a later write with another shard count removes the stale layout
    write_split(tmp_path / "a", "recipes", "train", [recipe(i) for i in range(5)], schema.FEATURES["recipes"], 10)
    assert sorted(p.name for p in (tmp_path / "a" / "recipes").iterdir()) == ["train-00000-of-00001.parquet"]


def test_rows_that_do_not_match_the_features_are_rejected(tmp_path):
    bad = recipe(1)
    del bad["ner"]
    with pytest.raises(ValueError, match="ner"):
        write_split(tmp_path, "recipes", "train", [bad], schema.FEATURES["recipes"])


def test_gate_rejects_a_leftover_file_and_a_missing_shard(tmp_path):
    root = tmp_path / "r"
    feats, splits = make_release(root)
    (root / "default" / "train-00000-of-00003.parquet.tmp").write_bytes(b"junk")
    with pytest.raises(ReleaseGateError, match="unexpected non-hidden"):
        gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")
    (root / "default" / "train-00000-of-00003.parquet.tmp").unlink()
    (root / "default" / ".train-00000-of-00003.parquet.tmp").write_bytes(b"junk")  # hidden: ignored by the globs
    gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")
    (root / "default" / "train-00001-of-00003.parquet").unlink()
    with pytest.raises(ReleaseGateError):
        gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")


def test_gate_reads_footers_and_refuses_a_shard_of_another_schema(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "r"
    feats, splits = make_release(root)
    gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")
    shard = root / "recipes" / "train-00001-of-00002.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.set_column(1, table.schema.names[1], pa.array([1] * table.num_rows)), shard)  # title: int
    with pytest.raises(ReleaseGateError, match="recipes/train-00001-of-00002.parquet: its schema differs"):
        gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")
    shard.write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(ReleaseGateError, match="not a readable Parquet file"):
        gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")


def test_gate_converts_nothing_and_imports_no_torch(tmp_path):
    """The gate resolves the folder with datasets' builder and reads footers: no Arrow copy of the release in its
    cache folder, and no ``torch`` import (datasets' streaming reader imports it: about 100 MB and 2 s a build)."""
    import subprocess
    import sys

    root = tmp_path / "r"
    make_release(root)
    code = ("import sys, json\nfrom loading_scripts import sieve_swap as schema\nfrom builders.release.gate import gate\n"
            "splits = {'default': ['train', 'validation'], 'raw_asr': ['train'], 'recipes': ['train']}\n"
            f"got = gate({str(root)!r}, features_by_config={{c: schema.FEATURES[c] for c in splits}}, "
            f"splits_by_config=splits, default_config='default', cache_dir={str(tmp_path / 'cache')!r})\n"
            "print(json.dumps([got, 'torch' in sys.modules]))")
    (tmp_path / "cache").mkdir()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ, "HF_HOME": str(tmp_path / "hf")})
    got, torch_loaded = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert got == {"default": {"train": 5, "validation": 3}, "raw_asr": {"train": 5}, "recipes": {"train": 4}}
    assert torch_loaded is False
    assert not list((tmp_path / "cache").rglob("*.arrow"))


def test_render_card_fills_placeholders(tmp_path):
    t = tmp_path / "card.md"
    t.write_text("kept $n videos at $$0.75 cost; $unknown stays")
    assert render_card(t, {"n": 16}) == "kept 16 videos at $0.75 cost; $unknown stays"


def test_resume_skips_finished_shards_and_rewrites_missing_ones(tmp_path):
    rows = [recipe(i) for i in range(5)]
    paths = write_split(tmp_path, "recipes", "train", rows, schema.FEATURES["recipes"], 2)
    first = paths[0].read_bytes()
    paths[0].write_bytes(b"kept as is")  # stands for a shard finished by an earlier run
    paths[2].unlink()  # an interrupted run: the last shard is missing
    again = write_split(tmp_path, "recipes", "train", rows, schema.FEATURES["recipes"], 2, resume=True)
    assert again == paths and paths[0].read_bytes() == b"kept as is" and paths[2].exists()
    write_split(tmp_path, "recipes", "train", rows, schema.FEATURES["recipes"], 2)  # no resume: rewritten
    assert paths[0].read_bytes() == first
    assert not [p for p in (tmp_path / "recipes").iterdir() if p.name.endswith(".tmp")]


def test_gate_names_an_empty_split(tmp_path):
    root = tmp_path / "r"
    feats, splits = make_release(root)
    write_split(root, "recipes", "train", [], schema.FEATURES["recipes"])
    with pytest.raises(ReleaseGateError, match="0 rows"):
        gate(root, features_by_config=feats, splits_by_config=splits, default_config="default")


def test_write_json_atomic_sorts_keys(tmp_path):
    import json

    import numpy as np

    from builders.release import write_json_atomic

    path = write_json_atomic(tmp_path / "stats.json", {"b": np.int64(2), "a": [np.float32(0.5)]})
    assert path.read_text() == json.dumps({"a": [0.5], "b": 2}, indent=2, sort_keys=True) + "\n"
    assert [p.name for p in tmp_path.iterdir()] == ["stats.json"]


def test_to_yc2_format_reads_a_loaded_release(tmp_path, monkeypatch):
    root = tmp_path / "sieve_swap"
    make_release(root)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    train = load_dataset(str(root), split="train")
    out = schema.to_yc2_format(train)
    assert out["vid00000000"] == {"duration": 120.5, "timestamps": [[1.0, 4.5]],
                                  "sentences": [["mix the flour and sugar .", "stir in sugar ."]]}
    assert schema.to_yc2_format(train, raw=True)["vid00000004"]["sentences"] == ["now mix the flour and the sugar"]


# ------------------------------------------------------------------------------------- swap_into_place, write_drops


def _release_dir(path, text):
    path.mkdir(parents=True)
    (path / "README.md").write_text(text)
    (path / "default").mkdir()
    (path / "default" / "train-00000-of-00001.parquet").write_text(text)
    return path


def test_swap_replaces_the_old_release_and_leaves_no_hidden_leftovers(tmp_path):
    from builders.release import stage_release, swap_into_place

    out = _release_dir(tmp_path / "sieve_swap", "old")
    (tmp_path / ".sieve_swap.old").mkdir()  # a leftover of an interrupted earlier swap
    (tmp_path / ".sieve_swap.old" / "junk").write_text("x")
    stage = stage_release(out)
    assert stage.parent == tmp_path / ".sieve_swap.incomplete" and stage.is_dir()
    other = stage_release(out)  # another build's: its own folder
    assert other != stage and other.parent == stage.parent
    other.rmdir()
    (stage / "README.md").write_text("new")
    assert swap_into_place(stage, out) == out
    assert (out / "README.md").read_text() == "new" and not (out / "default").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sieve_swap"]


def test_swap_into_an_empty_place(tmp_path):
    from builders.release import stage_release, swap_into_place

    stage = stage_release(tmp_path / "marc")
    (stage / "README.md").write_text("first")
    swap_into_place(stage, tmp_path / "marc")
    assert (tmp_path / "marc" / "README.md").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marc"]


def test_swap_keeps_the_old_release_when_the_new_one_cannot_be_moved_in(tmp_path, monkeypatch):
    import os

    from builders.release import stage_release, swap_into_place

    out = _release_dir(tmp_path / "sieve_swap", "old")
    stage = stage_release(out)
    (stage / "README.md").write_text("new")
    real_replace = os.replace
    calls = []

    def failing_replace(src, dst, *a, **kw):
        calls.append((os.fspath(src), os.fspath(dst)))
        if os.fspath(src) == os.fspath(stage):
            # the old release has been moved aside at this point: it must not be gone
            assert (tmp_path / ".sieve_swap.old" / "README.md").read_text() == "old"
            raise OSError(28, "No space left on device")
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        swap_into_place(stage, out)
    monkeypatch.setattr(os, "replace", real_replace)
    assert (os.fspath(stage), os.fspath(out)) in calls
    assert (out / "README.md").read_text() == "old"
    assert (out / "default" / "train-00000-of-00001.parquet").read_text() == "old"
    assert not (tmp_path / ".sieve_swap.old").exists()
    assert (stage / "README.md").read_text() == "new"  # the finished stage is kept for a retry


def test_write_drops_writes_atomically(tmp_path):
    import pyarrow.parquet as pq

    from builders.core.records import DROP_FIELDS
    from builders.release import write_drops

    class Result:
        def drops(self):
            return [{f: f"{f}-{i}" for f in DROP_FIELDS} for i in range(3)]

    path = tmp_path / "drops.parquet"
    assert write_drops(path, Result()) == 3
    assert pq.read_table(path).column_names == list(DROP_FIELDS)
    assert [p.name for p in tmp_path.iterdir()] == ["drops.parquet"]


def test_write_drops_names_input_paths_as_the_manifest_does(tmp_path):
    """A drop naming a file of an input folder by its absolute path is released under the folder's manifest name; a
    path that only starts like an input is left alone."""
    import pyarrow.parquet as pq

    from builders.release import write_drops

    class Result:
        def drops(self):
            return [{"item_id": "/in/pages/x.html", "stage": "s", "reason": "unreadable_input_entry",
                     "detail": "/in/pages/x.html: dangling symbolic link"},
                    {"item_id": "v1", "stage": "s", "reason": "bad_features",
                     "detail": "/in/feats/v1.npy: shape (0,); see /in/pagesx and /in/raw.json"}]

    path = tmp_path / "drops.parquet"
    write_drops(path, Result(), {"/in/pages": "pages", "/in/feats": "feats", "/in/raw.json": "raw.json"})
    assert pq.read_table(path).select(["item_id", "detail"]).to_pylist() == [
        {"item_id": "pages/x.html", "detail": "pages/x.html: dangling symbolic link"},
        {"item_id": "v1", "detail": "feats/v1.npy: shape (0,); see /in/pagesx and raw.json"}]


def test_swap_restores_a_release_left_aside_by_a_killed_swap_before_replacing_it(tmp_path):
    from builders.release import stage_release, swap_into_place

    _release_dir(tmp_path / ".sieve_swap.old", "old")  # killed between the renames: no sieve_swap, the old aside
    stage = stage_release(tmp_path / "sieve_swap")
    (stage / "README.md").write_text("new")
    real = os.replace
    seen = []

    def spy(src, dst, *a, **kw):
        seen.append((Path(src).name, Path(dst).name))
        return real(src, dst, *a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "replace", spy)
        swap_into_place(stage, tmp_path / "sieve_swap")
    # the old release came back first, then was moved aside and replaced: it was never deleted before that
    assert seen == [(".sieve_swap.old", "sieve_swap"), ("sieve_swap", ".sieve_swap.old"), (stage.name, "sieve_swap")]
    assert (tmp_path / "sieve_swap" / "README.md").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sieve_swap"]


# ------------------------------------------------------------------------------------------- the streaming writer


def _old_writer(path, rows, features):
    """The list writer this project used before streaming: ``Dataset.from_list`` + ``embed_table_storage`` +
    ``to_parquet`` (the reference for the streamed files' contents)."""
    from datasets import Dataset
    from datasets.table import embed_table_storage

    ds = Dataset.from_list(rows, features=features)
    ds.with_format("arrow").map(embed_table_storage, batched=True).with_format(None).to_parquet(str(path))


def _image_rows(n):
    import io

    from PIL import Image

    out = []
    for i in range(n):
        buf = io.BytesIO()
        Image.new("RGB", (4 + i, 3), (i * 40 % 256, 10, 200)).save(buf, format="PNG")
        out.append({"sequence_id": f"s{i}", "images": [{"bytes": buf.getvalue(), "path": f"s{i}_0.png"}]})
    return out


def test_the_streaming_writer_gives_the_old_writers_content(tmp_path):
    import pyarrow.parquet as pq
    from datasets import Features, Image, List, Value

    from builders.release import write_split_stream

    image_features = Features({"sequence_id": Value("string"), "images": List(Image())})
    cases = [("default", [video(i) for i in range(7)], schema.FEATURES["default"]),
             ("recipes", [recipe(i) for i in range(5)], schema.FEATURES["recipes"]),
             ("images", _image_rows(3), image_features)]
    for cfg, rows, features in cases:
        paths = write_split_stream(tmp_path / "new", cfg, "train", iter(rows), features)
        _old_writer(tmp_path / f"{cfg}-old.parquet", rows, features)
        new, old = pq.read_table(paths[0]), pq.read_table(tmp_path / f"{cfg}-old.parquet")
        assert new.to_pylist() == old.to_pylist(), cfg
        assert new.schema.metadata == old.schema.metadata  # the huggingface features
        assert Features.from_arrow_schema(new.schema) == features
    stored = pq.read_table(tmp_path / "new" / "images" / "train-00000-of-00001.parquet").to_pylist()
    assert stored[2]["images"][0]["bytes"].startswith(b"\x89PNG")  # embedded, not a path


def test_streamed_shards_are_named_after_their_count_and_deterministic(tmp_path):
    import pyarrow.parquet as pq

    from builders.release import write_split_stream

    def gen():
        return (recipe(i) for i in range(23))

    a = write_split_stream(tmp_path / "a", "recipes", "train", gen, schema.FEATURES["recipes"], 5, batch_rows=3)
    assert [p.name for p in a] == [f"train-{i:05d}-of-00005.parquet" for i in range(5)]
    assert [pq.ParquetFile(p).metadata.num_rows for p in a] == [5, 5, 5, 5, 3]
    assert [r["recipe_id"] for p in a for r in pq.read_table(p).to_pylist()] == list(range(23))
    b = write_split_stream(tmp_path / "b", "recipes", "train", gen(), schema.FEATURES["recipes"], 5, batch_rows=3)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    # a byte limit closes shards early, deterministically
    c = write_split_stream(tmp_path / "c", "recipes", "train", gen, schema.FEATURES["recipes"], 1000, batch_rows=4,
                           max_bytes_per_shard=1)
    assert [pq.ParquetFile(p).metadata.num_rows for p in c] == [4, 4, 4, 4, 4, 3]
    # a rewrite with another layout leaves only the new shards; no temp file is left
    write_split_stream(tmp_path / "a", "recipes", "train", gen, schema.FEATURES["recipes"], 50)
    assert sorted(p.name for p in (tmp_path / "a" / "recipes").iterdir()) == ["train-00000-of-00001.parquet"]
    assert write_split_stream(tmp_path / "d", "recipes", "train", iter(()), schema.FEATURES["recipes"],
                              keep_empty=False) == []


def test_a_stream_that_fails_leaves_the_previous_shards(tmp_path):
    from builders.release import write_split_stream

    before = write_split(tmp_path, "recipes", "train", [recipe(i) for i in range(5)], schema.FEATURES["recipes"], 2)
    data = [p.read_bytes() for p in before]

    def broken():
        yield from (recipe(i) for i in range(3))
        raise OSError("input vanished")

    with pytest.raises(OSError, match="vanished"):
        write_split_stream(tmp_path, "recipes", "train", broken, schema.FEATURES["recipes"], 2, batch_rows=1)
    assert sorted((tmp_path / "recipes").iterdir()) == before and [p.read_bytes() for p in before] == data
    bad = recipe(9)
    del bad["ner"]
    with pytest.raises(ValueError, match="row 4 does not match"):
        write_split_stream(tmp_path, "recipes", "train", [recipe(i) for i in range(4)] + [bad],
                           schema.FEATURES["recipes"])


_MEMORY_SCRIPT = """
import os, sys, threading, time
from pathlib import Path
from datasets import Features, List, Value
from builders.release import write_split, write_split_stream
F = Features({"id": Value("int64"), "text": Value("string"), "values": List(Value("float32"))})
PAGE = os.sysconf("SC_PAGE_SIZE")
def rss():  # the current resident set (not the high-water mark, which an import's peak may already hold)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE
def rows(n):
    for i in range(n):
        yield {"id": i, "text": f"{i:08d} " + "chop the onions finely " * 20, "values": [i * 0.5] * 8}
mode, n, tmp = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
write_split_stream(tmp / "warm", "c", "train", rows(3000), F)  # imports and Arrow pools
base = peak = rss()
done = threading.Event()
def sample():
    global peak
    while not done.is_set():
        peak = max(peak, rss())
        time.sleep(0.005)
t = threading.Thread(target=sample, daemon=True)
t.start()
if mode == "stream":
    paths = write_split_stream(tmp / "out", "c", "train", rows(n), F)
else:
    paths = write_split(tmp / "out", "c", "train", list(rows(n)), F)
peak = max(peak, rss())
done.set()
t.join()
print((peak - base) // (1 << 20), len(paths))
"""


@pytest.mark.timeout(300)
def test_streaming_200000_rows_keeps_memory_bounded(tmp_path):
    """200,000 rows of ~500 bytes (about 100 MB of text): the streamed write's peak RSS grows by one row group,
    holding them (the list writer) by several times that."""
    import subprocess
    import sys

    def growth(mode):
        r = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, mode, "200000", str(tmp_path / mode)],
                           capture_output=True, text=True, timeout=240, check=True)
        mib, shards = map(int, r.stdout.split())
        return mib, shards

    stream, shards = growth("stream")
    assert shards == 4  # 50,000 rows per shard
    held, _ = growth("list")
    assert stream < 100, f"streaming 200,000 rows grew the peak RSS by {stream} MiB"
    assert held > 2 * stream, (held, stream)
