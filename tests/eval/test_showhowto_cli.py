"""``python eval/run.py showhowto`` (``../shared/specs/showhowto.md`` §11, ``evaluation.md`` §8): the worked values
from a precomputed npz, every ground-truth layout, missing images, bad inputs, and the encoder plug-ins on tiny
random-init models (built here, nothing downloads) with the real fixture image ``img01.jpg`` as an input frame."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eval_cli import run_cli

from eval.run import main


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict | None, str]:
    """``eval/run.py showhowto ARGS --json`` in this process: (exit code, parsed JSON or None, stderr)."""
    rc = main(["showhowto", *map(str, args), "--json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 else None), out.err


# ------------------------------------------------------------------------------------------ ground-truth files

STEP_EXTRA = {"start": 1.0, "end": 2.0, "frame_time": 1.5, "start_sec": 1, "frame_idx": 2, "score": 0.3}


def seq_row(sid: str, n_steps: int, task: str | None, images: list[bytes] | None = None) -> dict:
    row = {"sequence_id": sid, "video_id": sid, "task_id": None if task is None else f"id-{task}", "task": task,
           "aligner": "clip",
           "steps": [{"instruction": f"{sid} step {k}", **STEP_EXTRA} for k in range(n_steps)]}
    if images is not None:
        row["images"] = [{"bytes": b, "path": f"{sid}_{k}.jpg"} for k, b in enumerate(images)]
    return row


STEP_TYPE = pa.struct([("instruction", pa.string()), ("start", pa.float32()), ("end", pa.float32()),
                       ("frame_time", pa.float32()), ("start_sec", pa.int32()), ("frame_idx", pa.int32()),
                       ("score", pa.float32())])
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def write_parquet(path: Path, rows: list[dict]) -> Path:
    fields = [("sequence_id", pa.string()), ("video_id", pa.string()), ("task_id", pa.string()),
              ("task", pa.string()), ("aligner", pa.string()), ("steps", pa.list_(STEP_TYPE))]
    if rows and "images" in rows[0]:
        fields.append(("images", pa.list_(IMAGE_TYPE)))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(fields)), path)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ worked-value npz

SF_ROWS = {"s1": np.array([[.30, .20, .10], [.25, .22, .28], [.10, .15, .31]]), "s2": np.array([[.20, .10],
                                                                                              [.30, .35]])}
SF_GT = [seq_row("s1", 4, "boil water"), seq_row("s2", 3, "boil water")]


def sf_npz(path: Path, drop: str | None = None) -> Path:
    """SF example of spec §11: τ_j = basis vectors, image i = its similarity row (cosine keeps the argmax)."""
    dim = 9
    gen_ids, gen, prompt_ids, prompts = [], [], [], []
    off = 0
    for sid, rows in SF_ROWS.items():
        n = rows.shape[1]
        for j in range(n + 1):
            prompt_ids.append(f"{sid}/{j}")
            prompts.append(np.eye(dim)[off + j])
        for i in range(1, n + 1):
            x = np.zeros(dim)
            x[off + 1:off + 1 + n] = rows[i - 1]
            x[off] = 0.5 if (sid, i) == ("s2", 2) else 0.0  # τ_0 wins s2/2 only with sf_classes=with_input
            if f"{sid}/{i}" != drop:
                gen_ids.append(f"{sid}/{i}")
                gen.append(x)
        off += n + 1
    np.savez(path, gen_ids=np.array(gen_ids), gen_clip=np.array(gen, np.float32), prompt_ids=np.array(prompt_ids),
             prompt_clip=np.array(prompts, np.float32), task_names=np.array(["boil water", "other"]),
             task_clip=np.eye(dim)[[1, 5]])
    return path


SC_GT = [seq_row("A", 3, "t0"), seq_row("B", 3, "t2")]


def sc_tf_fid_npz(path: Path) -> Path:
    """SC, TF and FID examples of spec §11 on sequences A (task t0) and B (task t2), two generated frames each."""
    np.savez(
        path,
        gen_ids=np.array(["A/1", "A/2", "B/1", "B/2"]),
        gen_dino=np.array([[.9, .1, 0], [.2, .7, .1], [.1, .8, .3], [.3, .6, .2]]),
        # gallery: frames of videos A, B, C (C is a test video outside this ground truth) + an input frame A/0
        gallery_ids=np.array(["A/1", "B/1", "C/1", "A/0"]),
        gallery_dino=np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [0.9, 0.1, 0]]),
        gen_clip=np.array([[.8, .6, 0], [.9, .1, 0], [0, .9, .1], [.1, .2, .9]]),
        task_names=np.array(["t0", "t1", "t2"]),
        task_clip=np.eye(3),
        gen_inception=np.array([[1, 1], [5, 1], [1, 5], [5, 5]], np.float32),
        real_inception=np.array([[0, 0], [2, 0], [0, 2], [2, 2]], np.float32),
    )
    return path


def test_worked_values_from_precomputed_embeddings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt = write_jsonl(tmp_path / "test.jsonl", SF_GT)
    npz = sf_npz(tmp_path / "emb.npz")
    rc, out, err = cli(capsys, "--gt", gt, "--variant", f"embeddings={npz}")
    assert rc == 0, err
    assert out["protocol"] == "showhowto"
    assert out["metrics"]["sf"] == pytest.approx(0.833333, abs=1e-6)
    assert out["metrics"]["tf"] == pytest.approx(0.5)  # s1 -> "boil water" (hit), s2 -> "other" (miss)
    assert out["metrics"]["sc"] is None and out["metrics"]["fid"] is None
    assert out["variant"]["sf_classes"] == "generated" and out["variant"]["pooled"] is False
    assert out["variant"]["gt_format"] == "jsonl" and out["variant"]["mode"] == "embeddings"
    c = out["counts"]
    assert (c["items"], c["sequences"], c["images"], c["images_missing"]) == (2, 2, 5, 0)
    assert c["mean_n"] == pytest.approx(2.5) and c["sf_chance"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert set(c["warning_reasons"]) == {"no_dino_features", "no_inception_features"}
    rc, out, _ = cli(capsys, "--gt", gt, "--variant", f"embeddings={npz}", "--variant", "pooled=true")
    assert out["metrics"]["sf"] == pytest.approx(0.8)
    rc, out, _ = cli(capsys, "--gt", gt, "--variant", f"embeddings={npz}", "--variant", "sf_classes=with_input")
    assert out["metrics"]["sf"] == pytest.approx((2 / 3 + 1 / 2) / 2)  # τ_0 takes s2/2
    assert out["counts"]["sf_chance"] == pytest.approx((1 / 4 + 1 / 3) / 2)

    gt2 = write_parquet(tmp_path / "sc.parquet", SC_GT)
    rc, out, err = cli(capsys, "--gt", gt2, "--variant", f"embeddings={sc_tf_fid_npz(tmp_path / 'sc.npz')}")
    assert rc == 0, err
    m = out["metrics"]
    assert m["sf"] is None
    assert m["sc"] == pytest.approx(0.75) and m["tf"] == pytest.approx(0.5)
    assert m["fid"] == pytest.approx(10.6667, abs=1e-4)
    assert out["counts"]["gallery"] == 3 and out["counts"]["gallery_input_frames_excluded"] == 1
    assert out["counts"]["gallery_videos_outside_gt"] == 1 and out["counts"]["tasks"] == 3
    assert out["counts"]["warning_reasons"] == {"no_clip_features": 1}


def test_the_cli_as_a_user_runs_it(tmp_path: Path) -> None:
    gt = write_jsonl(tmp_path / "test.jsonl", SF_GT)
    proc = run_cli("showhowto", "--gt", gt, "--variant", f"embeddings={sf_npz(tmp_path / 'e.npz')}",
                   "--out", tmp_path / "res.json", timeout=120)
    assert "83.33" in proc.stdout and "sf" in proc.stdout  # readable table, x100
    out = json.loads((tmp_path / "res.json").read_text(encoding="utf-8"))
    assert set(out) == {"protocol", "variant", "metrics", "counts"}
    assert out["metrics"]["sf"] == pytest.approx(0.833333, abs=1e-6)


def test_every_ground_truth_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    npz = sf_npz(tmp_path / "emb.npz")
    release = tmp_path / "release"
    write_parquet(release / "sequences" / "test-00000-of-00002.parquet", SF_GT[:1])
    write_parquet(release / "sequences" / "test-00001-of-00002.parquet", SF_GT[1:] + [seq_row("single", 1, "x")])
    write_parquet(release / "sequences" / "train-00000-of-00001.parquet", [seq_row("tr", 3, "boil water")])
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({r["sequence_id"]: [s["instruction"] for s in r["steps"]] for r in SF_GT}),
                       encoding="utf-8")
    for gt, fmt in [(release, "release"), (release / "sequences", "release"),
                    (write_parquet(tmp_path / "t.parquet", SF_GT), "parquet"), (prompts, "prompts_json")]:
        rc, out, err = cli(capsys, "--gt", gt, "--variant", f"embeddings={npz}")
        assert rc == 0, err
        assert out["variant"]["gt_format"] == fmt
        assert out["metrics"]["sf"] == pytest.approx(0.833333, abs=1e-6)
        assert out["counts"]["sequences"] == 2  # the train shard is never read
    assert out["metrics"]["tf"] is None and "no_task" in out["counts"]["warning_reasons"]
    assert "warning: no_task" in err
    rc, out, _ = cli(capsys, "--gt", release, "--variant", f"embeddings={npz}")
    assert out["counts"]["skipped"] == 1 and out["counts"]["skip_reasons"] == {"single_step": 1}
    # a sequence without a task leaves TF (named warning); null/empty task strings both count as no task
    rc, out, _ = cli(capsys, "--gt", write_jsonl(tmp_path / "mixed.jsonl", [SF_GT[0], seq_row("s2", 3, "")]),
                     "--variant", f"embeddings={npz}")
    assert out["metrics"]["tf"] == 1.0 and out["counts"]["warning_reasons"]["missing_task"] == 1


def test_missing_generated_images_score_as_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt = write_jsonl(tmp_path / "test.jsonl", SF_GT)
    rc, out, err = cli(capsys, "--gt", gt, "--variant", f"embeddings={sf_npz(tmp_path / 'e.npz', drop='s1/1')}")
    assert rc == 0, err
    assert out["metrics"]["sf"] == pytest.approx((1 / 3 + 1) / 2)  # s1/1 was a hit; now a miss, n stays 3
    c = out["counts"]
    assert (c["images"], c["images_expected"], c["images_missing"]) == (4, 5, 1)
    assert c["warning_reasons"]["missing_image"] == 1 and "s1/1" in err


@pytest.mark.parametrize("case, message", [
    ("object_ids", "without pickles"),
    ("bad_id", "is not '<sequence_id>/<i>'"),
    ("missing_prompt", "no prompt_clip row for 's2/2'"),
    ("dims", "is 9-d but 'prompt_clip' is 4-d"),
    ("nan", "NaN"),
    ("rows", "has 1 rows for 5"),
    ("unknown_task", "no row for the task 'boil water'"),
    ("not_npz", "not a readable .npz"),
])
def test_malformed_embeddings_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
                                     message: str) -> None:
    gt = write_jsonl(tmp_path / "test.jsonl", SF_GT)
    base = dict(np.load(sf_npz(tmp_path / "ok.npz")))
    if case == "object_ids":
        base["gen_ids"] = base["gen_ids"].astype(object)
    elif case == "bad_id":
        base["gen_ids"] = base["gen_ids"].copy()
        base["gen_ids"][0] = "s1-1"
    elif case == "missing_prompt":
        keep = base["prompt_ids"] != "s2/2"
        base["prompt_ids"], base["prompt_clip"] = base["prompt_ids"][keep], base["prompt_clip"][keep]
    elif case == "dims":
        base["prompt_clip"] = base["prompt_clip"][:, :4]
    elif case == "nan":
        base["gen_clip"][0, 0] = np.nan
    elif case == "rows":
        base["gen_clip"] = base["gen_clip"][:1]
    elif case == "unknown_task":
        base["task_names"] = np.array(["a", "b"])
    path = tmp_path / "bad.npz"
    if case == "not_npz":
        path.write_bytes(b"not a zip")
    else:
        np.savez(path, **base)
    rc, _, err = cli(capsys, "--gt", gt, "--variant", f"embeddings={path}")
    assert rc == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("content, message", [
    ('{"sequence_id": "a", "steps": [{"instruction": "x"}, {"instruction": 3}]}\n', "'instruction' must be a string"),
    ('{"sequence_id": "a/b", "steps": []}\n', "cannot name a folder"),
    ('{"sequence_id": "a", "steps": "x"}\n', "'steps' must be a list"),
    ("not json\n", "line 1: not valid JSON"),
    ('{"sequence_id": "a", "steps": [{"instruction": "x"}]}\n', "no sequence has 2 or more steps"),
    ('{"sequence_id": "a", "steps": ["x", "y"]}\n{"sequence_id": "a", "steps": ["x", "y"]}\n', "appears twice"),
])
def test_malformed_ground_truth_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                       message: str) -> None:
    gt = tmp_path / "gt.jsonl"
    gt.write_text(content, encoding="utf-8")
    rc, _, err = cli(capsys, "--gt", gt, "--variant", f"embeddings={sf_npz(tmp_path / 'e.npz')}")
    assert rc == 2 and message in err and "Traceback" not in err, err


def test_bad_command_lines_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt = write_jsonl(tmp_path / "test.jsonl", SF_GT)
    npz = sf_npz(tmp_path / "e.npz")
    (tmp_path / "pred").mkdir()
    (tmp_path / "notpq.parquet").write_bytes(b"PAR1 garbage")
    (tmp_path / "empty_release").mkdir()
    cases = [
        (["--gt", gt], "needs --pred"),
        (["--gt", gt, "--pred", tmp_path / "pred"], "no encoder given"),
        (["--gt", gt, "--variant", f"embeddings={npz}", "--pred", tmp_path / "pred"], "drop --pred"),
        (["--gt", gt, "--variant", f"embeddings={npz}", "--variant", "clip=/x"], "cannot be combined"),
        (["--gt", gt, "--variant", "sf_classes=all", "--variant", f"embeddings={npz}"], "generated|with_input"),
        (["--gt", tmp_path / "notpq.parquet", "--variant", f"embeddings={npz}"], "not a readable Parquet"),
        (["--gt", tmp_path / "empty_release", "--variant", f"embeddings={npz}"], "no test split found"),
        (["--gt", tmp_path / "gt.csv", "--variant", f"embeddings={npz}"], "not found"),
        (["--gt", gt, "--pred", tmp_path / "pred", "--variant", "clip=/no/such/clip"], "no such file or folder"),
        (["--gt", gt, "--pred", tmp_path / "pred", "--variant", "dino=/no/such"], "not a transformers DINOv2"),
        (["--gt", gt, "--pred", tmp_path / "pred", "--variant", "inception=nosuchmodule_xyz:f"], "cannot import"),
        (["--gt", gt, "--pred", tmp_path / "nope", "--variant", "inception=json:dumps"], "must be a folder"),
        (["--gt", gt, "--pred", tmp_path / "pred", "--variant", "inception=json:dumps"], "no generated image"),
    ]
    for args, message in cases:
        rc, _, err = cli(capsys, *args)
        assert rc == 2 and message in err and "Traceback" not in err, (args, err)


# ------------------------------------------------------------------------------------------ encoder plug-ins


def _jpeg(rgb: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=90)
    return buf.getvalue()


INCEPTION_PY = '''
import numpy as np

def features(batch):
    """uint8 [N, 256, 256, 3] -> [N, 6]: channel means and standard deviations (a stand-in feature extractor)."""
    x = batch.astype(np.float64) / 255.0
    return np.concatenate([x.mean(axis=(1, 2)), x.std(axis=(1, 2))], axis=1)
'''


def test_encoder_plugins_on_tiny_models(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       shared_data: Path) -> None:
    """Tiny random-init CLIP and DINOv2-with-registers folders, a TorchScript and a file.py:function Inception.

    The fixture's inference example is the first test sequence: img01.jpg is I_0, its 8 prompts τ_0..τ_7; source
    frames I_1..I_7 are crops of it, the generated frames are flips of them (one missing, one stray file).
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # width-32 models: one thread avoids thread-pool contention on a busy 2-core runner
    try:
        _encoder_plugins(tmp_path, capsys, shared_data)
    finally:
        torch.set_num_threads(threads)


def _encoder_plugins(tmp_path: Path, capsys: pytest.CaptureFixture[str], shared_data: Path) -> None:
    import torch
    from PIL import Image
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        CLIPConfig,
        CLIPModel,
        Dinov2WithRegistersConfig,
        Dinov2WithRegistersModel,
        PreTrainedTokenizerFast,
    )

    from eval.protocols.showhowto import DinoEncoder, load_inception

    fixture = shared_data / "showhowto"
    _, *prompts = (fixture / "prompt_file.txt").read_text(encoding="utf-8").splitlines()[1].split("|")
    base = np.asarray(Image.open(fixture / "img01.jpg").convert("RGB"))
    h, w = base.shape[:2]
    rng = np.random.default_rng(0)
    frames = [base] + [base[rng.integers(0, h // 4):, rng.integers(0, w // 4):][: h // 2 + 8 * k, : w // 2 + 8 * k]
                       for k in range(1, 8)]
    colours = [np.full((40, 60, 3), c, np.uint8) for c in ([200, 30, 30], [30, 200, 30], [30, 30, 200])]
    rows = [
        {**seq_row("img01", 8, "Peel tomatoes and potatoes", [_jpeg(f) for f in frames]),
         "steps": [{"instruction": p, **STEP_EXTRA} for p in prompts]},
        seq_row("paint", 3, "Paint a fence", [_jpeg(c) for c in colours]),
    ]
    release = tmp_path / "release"
    write_parquet(release / "sequences" / "test-00000-of-00001.parquet", [{k: v for k, v in r.items()
                                                                          if k != "images"} for r in rows])
    write_parquet(release / "images" / "test-00000-of-00001.parquet", rows)
    pred = tmp_path / "pred"
    for sid, imgs in (("img01", frames), ("paint", colours)):
        (pred / sid).mkdir(parents=True)
        for i in range(1, len(imgs)):
            if (sid, i) != ("img01", 4):  # missing
                Image.fromarray(np.ascontiguousarray(imgs[i][:, ::-1])).save(pred / sid / f"{i}.png")
    Image.fromarray(frames[0]).save(pred / "img01" / "0.png")  # stray: I_0 is never generated

    torch.manual_seed(0)
    words = sorted({wd for t in prompts + [r["task"] for r in rows] + [s["instruction"] for s in rows[1]["steps"]]
                    for wd in t.lower().replace(".", " ").replace(",", " ").split()})
    tok = Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1, **{wd: k + 2 for k, wd in enumerate(words)}},
                                     unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    clip_dir = tmp_path / "tiny-clip"
    CLIPModel(CLIPConfig(
        text_config={"vocab_size": len(words) + 2, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77},
        vision_config={"image_size": 32, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 2}, projection_dim=16)).save_pretrained(clip_dir)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(clip_dir)
    dino_dir = tmp_path / "tiny-dino"
    dino = Dinov2WithRegistersModel(Dinov2WithRegistersConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=28,
        patch_size=14, num_register_tokens=4)).eval()
    dino.save_pretrained(dino_dir)
    (dino_dir / "preprocessor_config.json").write_text(json.dumps(
        {"size": {"shortest_edge": 32}, "crop_size": {"height": 28, "width": 28}}), encoding="utf-8")

    class ChannelStats(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([x.mean(dim=(2, 3)), x.std(dim=(2, 3), unbiased=False)], dim=1)

    torch.jit.save(torch.jit.script(ChannelStats()), str(tmp_path / "inception.pt"))
    (tmp_path / "incep_fn.py").write_text(INCEPTION_PY, encoding="utf-8")

    common = ["--gt", release, "--pred", pred, "--variant", f"clip={clip_dir}", "--variant", f"dino={dino_dir}",
              "--variant", "device=cpu", "--variant", "batch_size=4"]
    rc, out, err = cli(capsys, *common, "--variant", f"inception={tmp_path / 'inception.pt'}")
    assert rc == 0, err
    m, c = out["metrics"], out["counts"]
    for key in ("sf", "sc", "tf"):
        assert 0.0 <= m[key] <= 1.0
    assert m["fid"] is not None and m["fid"] >= 0.0
    assert out["variant"]["real_frames"].startswith("images_config:")
    assert (c["sequences"], c["images"], c["images_missing"], c["gallery"], c["real_images"]) == (2, 8, 1, 9, 9)
    assert c["warning_reasons"] == {"missing_image": 1, "unexpected_image": 1}
    assert c["tasks"] == 2 and c["mean_n"] == pytest.approx(4.5)
    # the file.py:function plug-in computes the same features (channel statistics in [0, 1]) -> the same FID
    rc, out2, err = cli(capsys, *common, "--variant", f"inception={tmp_path / 'incep_fn.py'}:features")
    assert rc == 0, err
    assert out2["metrics"]["fid"] == pytest.approx(m["fid"], rel=1e-4, abs=1e-6)
    assert {k: out2["metrics"][k] for k in ("sf", "sc", "tf")} == {k: m[k] for k in ("sf", "sc", "tf")}
    # a real=DIR folder replaces the images config; without real frames SC and FID are null (named warning)
    real = tmp_path / "real"
    for sid, imgs in (("img01", frames), ("paint", colours)):
        (real / sid).mkdir(parents=True)
        for i, img in enumerate(imgs):
            Image.fromarray(img).save(real / sid / f"{i}.png")
    rc, out3, err = cli(capsys, *common, "--variant", f"real={real}")
    assert rc == 0, err
    assert out3["variant"]["real_frames"] == f"folder:{real}" and out3["counts"]["gallery"] == 9
    assert out3["metrics"]["fid"] is None and "no_inception_encoder" in out3["counts"]["warning_reasons"]
    rc, out4, err = cli(capsys, "--gt", release / "sequences" / "test-00000-of-00001.parquet", *common[2:])
    assert rc == 0 and out4["metrics"]["sc"] is None and "no_real_frames" in out4["counts"]["warning_reasons"]
    assert out4["metrics"]["sf"] == m["sf"]

    # DINOv2 pooling: last-layer patch tokens averaged, CLS and the 4 register tokens excluded
    enc = DinoEncoder(str(dino_dir), "cpu", 2)
    assert enc.registers == 4
    feats = enc.images([colours[0], frames[1]])
    with torch.no_grad():
        hidden = dino(pixel_values=torch.from_numpy(np.stack([enc._pixels(colours[0]), enc._pixels(frames[1])])))
    assert np.allclose(feats, hidden.last_hidden_state[:, 5:].mean(1).numpy(), atol=1e-5)
    assert hidden.last_hidden_state.shape[1] == 1 + 4 + 4  # 28/14 = 2x2 patches
    # the TorchScript plug-in receives [0, 1] floats of the 256x256 centre square
    run = load_inception(str(tmp_path / "inception.pt"), "cpu")
    sq = np.full((2, 256, 256, 3), 255, np.uint8)
    assert np.allclose(run(sq), [[1, 1, 1, 0, 0, 0]] * 2)
