"""builders.nasva.train / infer: determinism, resume, safe checkpoints, CLIs and bad input (nasva.md §6-§8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from builders.nasva import infer as infer_mod
from builders.nasva import train as train_mod
from builders.nasva.checkpoint import load_checkpoint
from builders.nasva.data import (
    HashTextEncoder,
    NasvaInputError,
    encode_texts,
    read_labels,
)
from builders.nasva.infer import predict_matrices
from builders.nasva.train import NasvaTrainConfig, train

from .toy import TINY, write_toy


@pytest.fixture(autouse=True, scope="module")
def _torch_threads():
    """1 torch thread(s) for this module, restored afterwards: a module-level set_num_threads would change the
    thread count (and so float reductions) of every later test in the session, e.g. the Ray-vs-local identity test."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy")
    write_toy(root, n_videos=10)
    return root


def _cfg(**kw) -> NasvaTrainConfig:
    base = {"epochs": 3, "batch_size": 4, "lr": 1e-3, "text_encoder": "hash:32", "seed": 7}
    base.update(kw)
    return NasvaTrainConfig(**base)


def _train(toy: Path, out: Path, **kw):
    cfg_kw = {k: kw.pop(k) for k in list(kw) if k in NasvaTrainConfig.__dataclass_fields__}
    return train(toy / "features", out, labels=toy / "labels.json", cfg=_cfg(**cfg_kw), model_overrides=TINY,
                 text_cache=toy / "text.sqlite", progress=False, **kw)


def _weights(ckpt: Path) -> dict[str, torch.Tensor]:
    return torch.load(ckpt / "model.pt", map_location="cpu", weights_only=True)


def test_same_seed_same_loss_curve_and_weights(toy, tmp_path):
    a = _train(toy, tmp_path / "a", val_labels=toy / "labels.json")
    b = _train(toy, tmp_path / "b", val_labels=toy / "labels.json")
    losses_a = [e["loss"] for e in a["log"]]
    assert losses_a == [e["loss"] for e in b["log"]]
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    c = _train(toy, tmp_path / "c", seed=8)
    assert [e["loss"] for e in c["log"]] != losses_a
    # the planted toy is learnable: the loss falls; every epoch logs lr, train R@1 and validation R@1
    assert losses_a[-1] < losses_a[0]
    assert {"epoch", "loss", "lr", "train_r1", "val_r1_tan", "val_r1_nsva"} <= set(a["log"][-1])
    assert a["log"][-1]["lr"] == 0.0  # cosine annealed to 0 over all iterations


def test_resume_after_interruption_continues_and_matches(toy, tmp_path):
    full = _train(toy, tmp_path / "full")

    def stop_after_first(epoch: int) -> None:
        if epoch == 1:
            raise KeyboardInterrupt

    out = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        _train(toy, out, on_epoch_end=stop_after_first)
    assert (out / "resume.pt").exists() and not (out / "model.pt").exists()
    assert len((out / "train_log.jsonl").read_text().splitlines()) == 1
    with pytest.raises(NasvaInputError, match="no model.pt.*resume"):
        load_checkpoint(out)
    resumed = _train(toy, out)
    assert resumed["resumed_from"] == 1
    assert [e["epoch"] for e in resumed["log"]] == [1, 2, 3]
    assert [e["loss"] for e in resumed["log"]] == [e["loss"] for e in full["log"]]
    wf, wr = _weights(tmp_path / "full"), _weights(out)
    assert all(torch.equal(wf[k], wr[k]) for k in wf)
    assert len((out / "train_log.jsonl").read_text().splitlines()) == 3
    assert not (out / "resume.pt").exists()  # removed once the run is complete
    # a finished run is not retrained; other settings need --fresh
    again = _train(toy, out)
    assert again["seconds"] == 0.0
    with pytest.raises(NasvaInputError, match="another training run.*train.lr"):
        _train(toy, out, lr=5e-4)
    fresh = _train(toy, out, lr=5e-4, fresh=True)
    assert fresh["resumed_from"] is None and len(fresh["log"]) == 3


def test_killed_cli_run_resumes(toy, tmp_path):
    out = tmp_path / "ck"
    cmd = [sys.executable, "-m", "builders.nasva.train", "--features", str(toy / "features"), "--labels",
           str(toy / "labels.json"), "--out", str(out), "--epochs", "30", "--batch-size", "2", "--lr", "1e-3",
           "--text-encoder", "hash:32", "--text-cache", str(toy / "text.sqlite"), "--threads", "1", "--no-progress",
           "--d-model", "32", "--d-proj", "16", "--nhead", "4", "--enc-layers", "1", "--dec-layers", "2",
           "--dim-feedforward", "64"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "resume.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "model.pt").exists(), "the run finished before it could be killed"
    done = len((out / "train_log.jsonl").read_text().splitlines())
    assert 1 <= done < 30
    res = subprocess.run(cmd, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"resuming {out} after epoch" in res.stderr
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in log] == list(range(1, 31))
    assert (out / "model.pt").exists()


def test_checkpoint_is_weights_only_and_round_trips(toy, tmp_path):
    _train(toy, tmp_path / "m", epochs=1)
    sd = _weights(tmp_path / "m")  # plain torch.load(weights_only=True) works
    assert "visual_pos_enc.pe" in sd and "decoder.norm.weight" in sd
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["format_version"] == 1 and config["model_type"] == "nasva"
    assert config["d_visual_in"] == 16 and config["d_text_in"] == 32 and config["d_model"] == 32
    assert config["text_encoder"] == "hash-bow-32" and config["status"] == "complete"
    assert config["train"]["epochs"] == 1 and config["train"]["train_text"] == "steps"
    assert config["data"]["num_samples"] == 10 and len(config["data"]["samples_sha256"]) == 64
    model, _, ignored = load_checkpoint(tmp_path / "m")
    assert ignored == [] and not model.training
    assert all(torch.equal(model.state_dict()[k], v) for k, v in sd.items())
    # a state dict whose sizes differ from the config is a clear error
    cfg_bad = dict(config, d_visual_in=17)
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg_bad))
    with pytest.raises(NasvaInputError, match="does not match its config.*visual_proj.0.weight"):
        load_checkpoint(tmp_path / "m")


def test_untrained_checkpoint_with_zero_epochs(toy, tmp_path):
    res = _train(toy, tmp_path / "z", epochs=0)
    assert res["log"] == [] and (tmp_path / "z" / "model.pt").exists()


@pytest.fixture(scope="module")
def trained(toy, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trained")
    _train(toy, out, epochs=2)
    return out


def test_infer_cli_writes_htm_align_predictions(toy, trained, tmp_path, capsys):
    pred, mats = tmp_path / "pred.json", tmp_path / "mats"
    rc = infer_mod.main(["--ckpt", str(trained), "--features", str(toy / "features"), "--texts",
                         str(toy / "labels.json"), "--out", str(pred), "--save-matrices", str(mats),
                         "--text-cache", str(toy / "text.sqlite"), "--no-progress"])
    assert rc == 0
    preds = json.loads(pred.read_text())
    labels = read_labels(toy / "labels.json")
    assert set(preds) == set(labels)
    for vid, entries in labels.items():
        p = preds[vid]
        A = np.load(mats / f"{vid}.npy")
        T = np.load(toy / "features" / f"{vid}.npy").shape[0]
        assert A.shape == (len(entries), T) and A.dtype == np.float32
        assert p["pred_time"] == [float(t) for t in A.argmax(1)]
        np.testing.assert_allclose(p["align_score"], A.max(1), atol=1e-6)
    assert "predicted 10 videos" in capsys.readouterr().err
    # the HT-Step result.json shape: integer slots per text
    assert infer_mod.main(["--ckpt", str(trained), "--features", str(toy / "features"), "--texts",
                           str(toy / "labels.json"), "--out", str(tmp_path / "r.json"), "--format", "result",
                           "--text-cache", str(toy / "text.sqlite"), "--no-progress"]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert {v: [float(t) for t in ts] for v, ts in result.items()} == {v: p["pred_time"] for v, p in preds.items()}


def test_batched_inference_equals_one_video_at_a_time(toy, trained):
    model, _, _ = load_checkpoint(trained)
    labels = read_labels(toy / "labels.json")
    vids = sorted(labels)
    table, row = encode_texts(HashTextEncoder(32), [e["text"] for v in vids for e in labels[v]], None)
    vis = [np.load(toy / "features" / f"{v}.npy") for v in vids]
    txt = [table[[row[e["text"]] for e in labels[v]]] for v in vids]
    for narration in (True, False):
        batched = predict_matrices(model, vis, txt, narration, batch_size=4)
        single = predict_matrices(model, vis, txt, narration, batch_size=1)
        for a, b in zip(batched, single):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_narration_texts_beyond_the_pe_table_run_in_blocks(toy, tmp_path):
    out = tmp_path / "small_pe"
    train(toy / "features", out, labels=toy / "labels.json", cfg=_cfg(epochs=1),
          model_overrides={**TINY, "max_text_pe": 5}, text_cache=toy / "text.sqlite", progress=False)
    model, _, _ = load_checkpoint(out)
    vis = np.load(toy / "features" / "toy00.npy")
    txt = np.random.default_rng(0).standard_normal((12, 32)).astype(np.float32)
    (A,) = predict_matrices(model, [vis], [txt], narration=True)
    blocks = [predict_matrices(model, [vis], [txt[a:a + 5]], narration=True)[0] for a in (0, 5, 10)]
    assert A.shape == (12, vis.shape[0])
    np.testing.assert_allclose(A, np.concatenate(blocks), atol=1e-6)


def _write_features(root: Path, dim: int, vids=("toy00",), T: int = 20) -> Path:
    (root / "features").mkdir(parents=True, exist_ok=True)
    for v in vids:
        np.save(root / "features" / f"{v}.npy", np.zeros((T, dim), np.float32))
    return root / "features"


def test_infer_rejects_features_of_another_size(toy, trained, tmp_path, capsys):
    feats = _write_features(tmp_path, dim=24)
    rc = infer_mod.main(["--ckpt", str(trained), "--features", str(feats), "--texts", str(toy / "labels.json"),
                         "--out", str(tmp_path / "p.json"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "feature size 24, expected 16" in err and "expects 16-d" in err
    assert not (tmp_path / "p.json").exists()


def test_infer_bad_inputs(toy, trained, tmp_path, capsys):
    base = ["--ckpt", str(trained), "--features", str(toy / "features"), "--out", str(tmp_path / "p.json"),
            "--no-progress", "--text-cache", str(toy / "text.sqlite")]
    (tmp_path / "bad.json").write_text("[]")
    assert infer_mod.main(base + ["--texts", str(tmp_path / "bad.json")]) == 2
    assert "json object" in capsys.readouterr().err
    (tmp_path / "none.json").write_text(json.dumps({"nope": [{"text": "a", "start": 0, "end": 1}]}))
    assert infer_mod.main(base + ["--texts", str(tmp_path / "none.json")]) == 2
    assert "missing_features=1" in capsys.readouterr().err
    assert infer_mod.main(["--ckpt", str(tmp_path / "no_ckpt")] + base[2:] + ["--texts", str(toy / "labels.json")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
    assert infer_mod.main(base + ["--texts", str(toy / "labels.json"), "--text-encoder", "hash:16"]) == 2
    assert "not interchangeable" in capsys.readouterr().err
    # a video with a malformed text is skipped (its prediction could not keep the input order); the rest is predicted
    mixed = {"toy00": [{"text": "cut the apples"}], "toy01": [{"text": 3}]}
    (tmp_path / "mixed.json").write_text(json.dumps(mixed))
    assert infer_mod.main(base + ["--texts", str(tmp_path / "mixed.json")]) == 0
    assert "bad_label=1" in capsys.readouterr().err
    assert set(json.loads((tmp_path / "p.json").read_text())) == {"toy00"}


def test_train_bad_inputs_are_clear_errors_or_counted_skips(toy, tmp_path, capsys):
    base = ["--features", str(toy / "features"), "--text-encoder", "hash:32", "--no-progress", "--epochs", "1",
            "--text-cache", str(toy / "text.sqlite"), "--d-model", "32", "--nhead", "4", "--dim-feedforward", "64",
            "--enc-layers", "1", "--dec-layers", "1"]
    assert train_mod.main(base + ["--labels", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o1")]) == 2
    assert "labels file not found" in capsys.readouterr().err
    assert train_mod.main(base + ["--out", str(tmp_path / "o2")]) == 2
    assert "give --labels" in capsys.readouterr().err
    (tmp_path / "absent.json").write_text(json.dumps({"x1": [{"text": "a", "start": 0, "end": 1}], "x2": []}))
    assert train_mod.main(base + ["--labels", str(tmp_path / "absent.json"), "--out", str(tmp_path / "o3")]) == 2
    err = capsys.readouterr().err
    assert "no usable training sample" in err and "missing_features=1" in err and "no_texts=1" in err
    # a NaN feature file, a label outside its video and a label past 1200 s are counted skips; training goes on
    root = tmp_path / "mixed"
    write_toy(root, n_videos=4)
    arr = np.load(root / "features" / "toy01.npy")
    arr[3, 0] = np.nan
    np.save(root / "features" / "toy01.npy", arr)
    labels = json.loads((root / "labels.json").read_text())
    labels["toy00"].append({"text": "late", "start": 500.0, "end": 501.0})
    labels["toy02"].append({"text": "very late", "start": 1300.0, "end": 1310.0})
    (root / "labels.json").write_text(json.dumps(labels))
    rc = train_mod.main(base + ["--features", str(root / "features"), "--labels", str(root / "labels.json"),
                                "--out", str(tmp_path / "o4")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "nan_features=1" in err and "label_outside_video=1" in err and "beyond_max_vlen=1" in err
    assert "3 samples (steps 3)" in err and (tmp_path / "o4" / "model.pt").exists()
    assert train_mod.main(base + ["--labels", str(root / "labels.json"), "--out", str(tmp_path / "o5"),
                                  "--device", "cuda"]) == (0 if torch.cuda.is_available() else 2)


def test_narrations_and_steps_mix(toy, tmp_path):
    res = train(toy / "features", tmp_path / "mix", labels=toy / "labels.json", narrations=toy / "labels.json",
                cfg=_cfg(epochs=1, mode_policy="by_source"), model_overrides=TINY, text_cache=toy / "text.sqlite",
                progress=False)
    config = json.loads((tmp_path / "mix" / "config.json").read_text())
    assert config["train"]["train_text"] == "both" and config["data"]["num_samples_by_source"] == {
        "steps": 10, "narrations": 10}
    assert len(res["log"]) == 1


def test_epoch_plan_type_tokens():
    from builders.nasva.data import Sample

    samples = [Sample(f"v{i}", "steps" if i < 5 else "narrations", ["t"], np.zeros(1), np.zeros(1), 3)
               for i in range(10)]
    cfg = _cfg(batch_size=4, mode_policy="by_source")
    plan = train_mod.epoch_plan(samples, cfg, 0)
    assert sorted(i for idx, _ in plan for i in idx) == list(range(10)) and len(plan) == 4
    for idx, narration in plan:  # homogeneous batches: W -> <narration>, S -> <step>
        assert {samples[i].source for i in idx} == {"narrations" if narration else "steps"}
    per_batch = train_mod.epoch_plan(samples, _cfg(batch_size=4), 0)
    assert [len(i) for i, _ in per_batch] == [4, 4, 2] and all(m is None for _, m in per_batch)
    assert train_mod.epoch_plan(samples, _cfg(batch_size=4), 1) != per_batch  # reshuffled every epoch
    assert train_mod.epoch_plan(samples, _cfg(batch_size=4), 0) == per_batch  # reproducible


def test_grounder_matches_the_cli(toy, trained, tmp_path):
    from builders.nasva.infer import Grounder

    mats = tmp_path / "m"
    assert infer_mod.main(["--ckpt", str(trained), "--features", str(toy / "features"), "--texts",
                           str(toy / "labels.json"), "--out", str(tmp_path / "p.json"), "--mode", "step",
                           "--save-matrices", str(mats), "--text-cache", str(toy / "text.sqlite"),
                           "--no-progress"]) == 0
    g = Grounder(trained, text_cache=toy / "text.sqlite")
    labels = read_labels(toy / "labels.json")
    x = np.load(toy / "features" / "toy03.npy")
    texts = [e["text"] for e in labels["toy03"]]
    A, empty = g.matrices([(x, texts), (x, [])], mode="step")
    np.testing.assert_allclose(A, np.load(mats / "toy03.npy"), atol=1e-6)
    assert empty.shape == (0, x.shape[0])
    (short,) = g.matrices([(x, texts)], mode="step", max_rows=10)
    assert short.shape == (len(texts), 10)
    with pytest.raises(NasvaInputError, match="do not fit"):
        g.matrices([(x[:, :5], texts)])
