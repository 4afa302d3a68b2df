"""builders.nasva.synthetic: the synthetic benchmark's files, and a small end-to-end train -> infer -> R@1 run."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from builders.nasva import infer as infer_mod
from builders.nasva import synthetic
from builders.nasva import train as train_mod
from builders.nasva.data import HashTextEncoder, encode_texts


@pytest.fixture(autouse=True, scope="module")
def _torch_threads():
    """1 torch thread(s) for this module, restored afterwards: a module-level set_num_threads would change the
    thread count (and so float reductions) of every later test in the session, e.g. the Ray-vs-local identity test."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def htm_align_r1(gt: dict, pred: dict) -> tuple[float, int]:
    """evaluation.md §1 rule "tan": hit iff floor(start) <= floor(pred_time) <= ceil(end), micro average over the
    alignable texts of all videos; a video without prediction counts its texts as misses."""
    hits = []
    for vid, rows in gt.items():
        times = pred.get(vid, {}).get("pred_time")
        for i, (alignable, s, e, _) in enumerate(rows):
            if alignable == 1:
                t = math.floor(times[i]) if times is not None else -1
                hits.append(math.floor(s) <= t <= math.ceil(e))
    return float(np.mean(hits)), len(hits)


def test_r1_helper_on_evaluation_example_a():
    gt = {"vidA": [[1, 1.2, 3.6, "a0"], [0, 4, 5, "a1"], [1, 6.5, 7.5, "a2"], [1, 8, 9, "a3"], [0, 9, 9.5, "a4"]],
          "vidB": [[1, 2, 3, "b0"], [0, 5, 6, "b1"]]}
    pred = {"vidA": {"pred_time": [4.0, 0.0, 7.0, 2.0, 0.0]}, "vidB": {"pred_time": [3.0, 0.0]}}
    assert htm_align_r1(gt, pred) == (0.75, 4)  # evaluation.md §1(e): 0.75, not the per-video mean 0.8333


def _generate(out: Path, **kw) -> dict:
    cfg = synthetic.SyntheticConfig(**kw)
    return synthetic.generate(out, cfg, text_cache=out.parent / f"{out.name}-text.sqlite")


def test_files_formats_and_determinism(tmp_path):
    kw = {"videos": 10, "min_seconds": 30, "max_seconds": 50, "visual_dim": 24, "text_encoder": "hash:16", "seed": 3}
    m = _generate(tmp_path / "a", **kw)
    _generate(tmp_path / "b", **kw)
    a, b = tmp_path / "a", tmp_path / "b"
    for name in ("train.json", "val.json", "val_htm_align.json"):
        assert (a / name).read_text() == (b / name).read_text()
    train = json.loads((a / "train.json").read_text())
    val = json.loads((a / "val.json").read_text())
    gt = json.loads((a / "val_htm_align.json").read_text())
    assert len(train) == 8 and len(val) == 2 and m["videos"] == {"train": 8, "val": 2}
    assert set(gt) == set(val)
    for vid, rows in gt.items():
        assert rows == [[1, e["start"], e["end"], e["text"]] for e in val[vid]]  # every text alignable
    train_texts = {e["text"] for v in train.values() for e in v}
    assert not train_texts & {e["text"] for v in val.values() for e in v}  # val sentences are new
    readme = (a / "README.txt").read_text()
    assert readme.startswith("SYNTHETIC") and "NOT real video data" in readme and "How it was made" in readme
    assert json.loads((a / "manifest.json").read_text())["synthetic"] is True
    for vid, entries in {**train, **val}.items():
        x = np.load(a / "features" / f"{vid}.npy")
        assert np.array_equal(x, np.load(b / "features" / f"{vid}.npy"))
        assert x.dtype == np.float32 and x.shape[1] == 24 and 30 <= x.shape[0] <= 50
        np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
        starts = [e["start"] for e in entries]
        assert starts == sorted(starts) and all(e["end"] <= x.shape[0] - 1 for e in entries)
        assert all(n["start"] > p["end"] for p, n in itertools.pairwise(entries))  # no overlap
        # the planted signal: frames of one window resemble each other more than frames of another window
        win = [x[math.ceil(e["start"]): math.floor(e["end"]) + 1] for e in entries]
        if len(win) >= 2:
            within = float(np.mean(win[0] @ win[0].T))
            across = float(np.mean(win[0] @ win[1].T))
            assert within > across


def test_features_carry_a_linear_map_of_the_text_embedding(tmp_path):
    """Regressing window frames on the text vectors explains them far better than regressing on shuffled texts."""
    _generate(tmp_path / "s", videos=30, min_seconds=60, max_seconds=90, visual_dim=24, text_encoder="hash:16",
              noise=0.1, background=0.0, distractor_rate=0.0, signal_min=1.0)
    train = json.loads((tmp_path / "s" / "train.json").read_text())
    table, row = encode_texts(HashTextEncoder(16), [e["text"] for v in train.values() for e in v], None)
    X, Y = [], []
    for vid, entries in train.items():
        x = np.load(tmp_path / "s" / "features" / f"{vid}.npy")
        for e in entries:
            X.append(table[row[e["text"]]])
            Y.append(x[math.ceil(e["start"])])
    X, Y = np.array(X), np.array(Y)
    resid = Y - X @ np.linalg.lstsq(X, Y, rcond=None)[0]
    Xs = X[np.random.default_rng(0).permutation(len(X))]
    resid_s = Y - Xs @ np.linalg.lstsq(Xs, Y, rcond=None)[0]
    assert (resid ** 2).sum() < 0.2 * (resid_s ** 2).sum()


def test_cli_rejects_bad_sizes(tmp_path, capsys):
    assert synthetic.main(["--out", str(tmp_path), "--videos", "1"]) == 2
    assert "need --videos >= 2" in capsys.readouterr().err


@pytest.mark.slow
def test_end_to_end_train_infer_r1_beats_untrained(tmp_path, capsys):
    """MiniLM texts, trainer defaults (12 epochs, lr 1e-4, batch 8) on 36 short videos; R@1 on 12 unseen videos."""
    data = tmp_path / "syn"
    cache = tmp_path / "text.sqlite"
    synthetic.generate(data, synthetic.SyntheticConfig(videos=48, val_fraction=0.25, min_seconds=40, max_seconds=80,
                                                       seed=1), text_cache=cache)
    gt = json.loads((data / "val_htm_align.json").read_text())
    r1 = {}
    for name, epochs in (("untrained", "0"), ("trained", "12")):
        ckpt = tmp_path / name
        assert train_mod.main(["--features", str(data / "features"), "--labels", str(data / "train.json"),
                               "--out", str(ckpt), "--epochs", epochs, "--text-cache", str(cache),
                               "--no-progress"]) == 0
        pred = tmp_path / f"{name}.json"
        assert infer_mod.main(["--ckpt", str(ckpt), "--features", str(data / "features"), "--texts",
                               str(data / "val.json"), "--out", str(pred), "--text-cache", str(cache),
                               "--no-progress"]) == 0
        r1[name], n = htm_align_r1(gt, json.loads(pred.read_text()))
    chance = json.loads((data / "manifest.json").read_text())["val_chance_r1_tan"]
    print(f"R@1 untrained {r1['untrained']:.3f}, trained {r1['trained']:.3f}, chance {chance:.3f}, n={n}")
    assert n >= 30
    assert r1["untrained"] < chance + 0.15
    assert r1["trained"] >= 0.45 and r1["trained"] > r1["untrained"] + 0.25
