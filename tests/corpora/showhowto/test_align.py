"""Stage 4 on generated videos (spec showhowto.md §6-§7, §9-§10): the 5-fps grid (ffmpeg ``fps=5`` semantics, checked
against the ffmpeg command line when it is installed), truncated and unreadable files, the tiny-CLIP aligner path and
the middle aligner through the real step, and image re-extraction."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from builders.core.records import Out
from builders.corpora.showhowto.config import ShowHowToConfig
from builders.corpora.showhowto.pipeline import steps
from builders.models import media

from .conftest import make_video, tiny_clip

STEPS = ["Cut the red paper.", "Glue the green card.", "Paint the blue box.", "Fold the yellow sheet."]


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    return make_video(tmp_path_factory.mktemp("v") / "v.mp4", seconds=24.0)


def row(path: Path, steps: list[tuple[str, float, float]], duration: float = 24.0) -> dict:
    return {"video_id": "abcdefghijk", "video_path": str(path), "duration": duration,
            "steps": [{"instruction": t, "start": s, "end": e} for t, s, e in steps]}


def stage(cfg: ShowHowToConfig, name: str):
    """The step ``name`` as the pipeline constructs it from ``cfg``."""
    return next(s for s in steps(cfg) if s.name == name)


def run(step, rows: list[dict]) -> Out:
    out = Out(step.name)
    step.setup(None)
    step.process(rows, out)
    step.teardown()
    return out


def test_grid_has_five_frames_per_second_and_ends_at_the_last_frame(video):
    stats: dict[str, int] = {}
    got = [(g, f) for g, f in media.iter_grid_frames(video, fps=5, wanted=lambda g: g % 40 == 0, stats=stats)]
    assert [g for g, _ in got] == list(range(120)) and stats["frames"] == 120  # 24 s at 5 fps
    assert [g for g, f in got if f is not None] == [0, 40, 80]
    assert got[40][1].shape == (48, 64, 3)
    # scene k (6 s) has its own colour: grid frame 40 (8.0 s) lies in scene 1 (green)
    assert np.abs(got[40][1][2, 2].astype(int) - [40, 200, 60]).max() < 30


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the ffmpeg command line is not installed")
def test_grid_frames_equal_the_upstream_ffmpeg_command(video, tmp_path):
    """Spec §7: ``fps=5,select=gte(t\\,START_SEC),select=eq(n\\,FRAME_IDX)`` returns grid frame 5*start_sec+frame_idx."""
    for start_sec, frame_idx in ((0, 7), (3, 18), (9, 40)):
        out = tmp_path / f"{start_sec}_{frame_idx}.png"
        subprocess.run(["ffmpeg", "-v", "error", "-i", str(video), "-vf",
                        f"fps=5,select=gte(t\\,{start_sec}),select=eq(n\\,{frame_idx})", "-vframes", "1", str(out)],
                       check=True)
        from PIL import Image

        ref = np.asarray(Image.open(out).convert("RGB")).astype(int)
        g = 5 * start_sec + frame_idx
        ours = next(f for k, f in media.iter_grid_frames(video, wanted=g.__eq__) if f is not None)
        assert np.abs(ours.astype(int) - ref).mean() < 2.0


def test_truncated_video_ends_its_grid_early_and_steps_beyond_it_are_out_of_range(video, tmp_path):
    data = video.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    assert media.probe(cut).duration == pytest.approx(24.0, abs=0.5)  # the header still promises 24 s
    stats: dict[str, int] = {}
    n = sum(1 for _ in media.iter_grid_frames(cut, stats=stats))
    assert 0 < n == stats["frames"] < 120
    cfg = ShowHowToConfig(aligner="middle")
    out = run(stage(cfg, "keyframe_alignment"), [row(cut, [("a", 1.0, 4.0), ("b", 18.0, 23.0)])])
    assert [d.reason for d in out.drops] == ["steps_out_of_range"] and "t_last" in out.drops[0].detail


def test_unreadable_files_are_named_drops(tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(np.random.default_rng(1).integers(0, 256, 3000, np.uint8).tobytes())
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    cfg = ShowHowToConfig(aligner="middle")
    out = run(stage(cfg, "keyframe_alignment"), [row(junk, [("a", 1, 2), ("b", 3, 4)]), row(empty, [("a", 1, 2), ("b", 3, 4)])])
    assert [d.reason for d in out.drops] == ["video_unreadable", "video_unreadable"] and not out.rows
    assert "empty file" in out.drops[1].detail


def test_middle_aligner_picks_the_midpoint_frames_in_order(video):
    cfg = ShowHowToConfig(aligner="middle")
    out = run(stage(cfg, "keyframe_alignment"), [row(video, [("a", 2.0, 4.0), ("b", 10.0, 20.0), ("c", 10.0, 20.0)])])
    [r] = out.rows
    assert [s["frame"] for s in r["steps"]] == [15, 74, 75]  # 3.0 s; two equal intervals: 14.8 s and 15.0 s (§6)
    assert [s["score"] for s in r["steps"]] == [None] * 3 and r["aligner"] == "middle" and r["mean_score"] is None
    assert [(s["start_sec"], s["frame_idx"]) for s in r["steps"]] == [(0, 15), (0, 74), (0, 75)]
    assert r["t_last"] == pytest.approx(119 / 5)


def test_alignment_infeasible_when_steps_outnumber_the_frames(tmp_path):
    short = make_video(tmp_path / "short.mp4", seconds=1.0, scene_s=1.0)
    cfg = ShowHowToConfig(aligner="middle")
    out = run(stage(cfg, "keyframe_alignment"), [row(short, [(f"s{i}", 0.0, 1.0) for i in range(6)], duration=1.0)])
    assert [d.reason for d in out.drops] == ["alignment_infeasible"]


def test_tiny_clip_aligner_embeds_only_window_frames_and_keeps_the_order(video, tmp_path):
    """Spec §9: the CLIP path with a tiny random-init model: shapes, the DP call, finite scores, frames in order and
    inside their windows, and only frames inside some window are embedded."""
    folder = tiny_clip(tmp_path / "clip", STEPS)
    cfg = ShowHowToConfig(aligner="clip", clip_model_path=str(folder), epsilon=2.0, vision_batch_size=16)
    step = stage(cfg, "keyframe_alignment")
    step.setup(None)
    calls: list[int] = []
    encode = step.encoder.encode_images
    step.encoder.encode_images = lambda px: (calls.append(len(px)), encode(px))[1]
    out = Out(step.name)
    spans = [(STEPS[0], 0.5, 2.0), (STEPS[1], 8.0, 9.0), (STEPS[2], 14.0, 15.0), (STEPS[3], 20.0, 21.0)]
    step.process([row(video, spans)], out)
    [r] = out.rows
    frames = [s["frame"] for s in r["steps"]]
    assert frames == sorted(frames) and len(set(frames)) == 4
    for (_, s, e), st in zip(spans, r["steps"]):
        assert max(0.0, s - 2.0) - 1e-6 <= st["frame_time"] <= min(r["t_last"], e + 2.0) + 1e-6
        assert np.isfinite(st["score"]) and -1.0 <= st["score"] <= 1.0
    assert r["aligner"] == "clip" and r["mean_score"] == pytest.approx(np.mean([s["score"] for s in r["steps"]]))
    union = {g for _, s, e in spans for g in range(120) if max(0.0, s - 2.0) - 1e-6 <= g / 5 <= e + 2.0 + 1e-6}
    # only window frames, in full batches of vision_batch_size (the last padded): 99 frames -> 7 batches of 16
    assert len(union) == 99 and calls == [16] * 7


def test_images_are_the_aligned_grid_frames(video, tmp_path):
    cfg = ShowHowToConfig(aligner="middle", with_images=True, image_max_side=32)
    aligned = run(stage(cfg, "keyframe_alignment"), [row(video, [("a", 2.0, 4.0), ("b", 10.0, 14.0)])]).rows
    out = run(stage(cfg, "extract_images"), aligned)
    [r] = out.rows
    from io import BytesIO

    from PIL import Image

    imgs = [np.asarray(Image.open(BytesIO(b)).convert("RGB")) for b in r["images"]]
    assert [im.shape for im in imgs] == [(24, 32, 3)] * 2  # 64x48 capped at 32 on the longer side
    assert np.abs(imgs[1][4, 4].astype(int) - [40, 60, 220]).max() < 40  # 12.0 s: scene 2, blue
    broken = dict(r, video_path=str(tmp_path / "gone.mp4"))
    out = run(stage(cfg, "extract_images"), [broken])
    assert out.rows[0]["images"] is None and out.counters["frame_extraction_failed"] == 1 and not out.drops
    off = run(stage(dataclasses.replace(cfg, with_images=False), "extract_images"), aligned)
    assert "images" not in off.rows[0]


def test_any_model_with_encode_image_and_encode_text_is_a_plugin(video, tmp_path):
    """Spec §6: the aligner takes any object with ``encode_image``/``encode_text``. This one scores a frame by how
    green it is and every text the same, so the DP picks the greenest frame of each window: scene 1 (6-12 s)."""
    plugin = tmp_path / "greenness.py"
    plugin.write_text(
        "import numpy as np\n"
        "class Green:\n"
        "    image_size = 8\n"
        "    def encode_image(self, px):\n"
        "        g = px[:, 1].mean(axis=(1, 2)) - px[:, 0].mean(axis=(1, 2))\n"
        "        return np.stack([g, np.ones_like(g)], 1)\n"
        "    def encode_text(self, texts):\n"
        "        return np.tile([[1.0, 0.0]], (len(texts), 1))\n"
        "def make():\n"
        "    return Green()\n")
    cfg = ShowHowToConfig(aligner="clip", clip_backend="plugin", clip_model_path=f"{plugin}:make", epsilon=4.0)
    step = stage(cfg, "keyframe_alignment")
    assert step.input_paths() == [plugin]
    out = run(step, [row(video, [("a", 2.0, 4.0), ("b", 8.0, 10.0)])])
    [r] = out.rows
    assert all(6.0 <= s["frame_time"] < 12.0 for s in r["steps"])  # both in the green scene, in order
    assert r["steps"][0]["frame_time"] < r["steps"][1]["frame_time"]


def test_paper_preset_aligner_builds_dfn5b_through_open_clip(video, tmp_path, monkeypatch):
    """Contract of the paper path (spec §6: open_clip ``ViT-H-14-378-quickgelu`` from a local DFN5B checkpoint), with a
    fake ``open_clip`` module (open_clip is a [gpu] extra): the architecture and checkpoint reach ``create_model``, the
    text tower goes through ``get_tokenizer(arch)``, frames are preprocessed at the model's own size, and the DP runs."""
    import sys
    import types

    import torch

    calls: dict = {}

    class Visual:
        image_size, output_dim = (14, 14), 3

    class FakeDFN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = Visual()

        def encode_image(self, x):
            calls.setdefault("image_shapes", set()).add(tuple(x.shape[1:]))
            return x.mean(dim=(2, 3))  # the mean colour (normalised) as a 3-d embedding

        def encode_text(self, tokens):
            return torch.tensor([[-1.0, 2.0, -1.0]]).repeat(len(tokens), 1)  # "green"

    def create_model(name, pretrained=None, force_quick_gelu=False, device="cpu", **kw):
        calls.update(name=name, pretrained=pretrained)
        return FakeDFN()

    def get_tokenizer(name):
        calls["tokenizer"] = name
        return lambda texts: torch.zeros((len(texts), 4), dtype=torch.long)

    monkeypatch.setitem(sys.modules, "open_clip", types.SimpleNamespace(create_model=create_model,
                                                                         get_tokenizer=get_tokenizer))
    ckpt = tmp_path / "dfn5b" / "open_clip_pytorch_model.bin"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"x")
    from builders.corpora.showhowto.config import apply_preset

    cfg = apply_preset(ShowHowToConfig(preset="paper", clip_model_path=str(ckpt.parent), vision_device="cpu",
                                       asr_model_path="a", asr_align_model_path="b", llm_model_path="c"),
                       explicit={"vision_device"})
    assert (cfg.aligner, cfg.clip_backend, cfg.clip_arch) == ("clip", "open_clip", "ViT-H-14-378-quickgelu")
    out = run(stage(cfg, "keyframe_alignment"), [row(video, [("a", 2.0, 4.0), ("b", 8.0, 10.0)])])
    [r] = out.rows
    assert calls["name"] == calls["tokenizer"] == "ViT-H-14-378-quickgelu" and calls["pretrained"] == str(ckpt)
    assert calls["image_shapes"] == {(3, 14, 14)}
    assert r["aligner"] == "clip" and all(6.0 <= s["frame_time"] < 12.0 for s in r["steps"])  # the green scene


def _old_decode(step, path: str, lo: np.ndarray, hi: np.ndarray) -> tuple[int, dict[int, np.ndarray]]:
    """The keyframe stage's decoding before the decode pipeline: one video at a time in the step's process, batches
    of ``vision_batch_size`` frames cut at the video's end."""
    from builders.models.vision_encoder import clip_preprocess

    def wanted(g: int) -> bool:
        return bool(np.any((lo - 1e-6 <= g / step.fps) & (g / step.fps <= hi + 1e-6)))

    stats: dict[str, int] = {}
    feats: dict[int, np.ndarray] = {}
    batch: list[tuple[int, np.ndarray]] = []

    def flush() -> None:
        if batch:
            px = clip_preprocess(np.stack([f for _, f in batch]), size=step.encoder.image_size)
            feats.update(zip([g for g, _ in batch], step.encoder.encode_images(px)))
            batch.clear()

    for g, frame in media.iter_grid_frames(path, fps=step.fps, wanted=wanted, stats=stats):
        if frame is not None:
            batch.append((g, frame))
            if len(batch) >= step.vision_batch_size:
                flush()
    flush()
    return stats["frames"], feats


@pytest.fixture(scope="module")
def shard(video, tmp_path_factory) -> list[dict]:
    """Four rows: three readable videos (one twice) and a file that is no video."""
    d = tmp_path_factory.mktemp("shard")
    other = make_video(d / "o.mp4", seconds=12.0, scene_s=3.0, audio=False)
    junk = d / "junk.mp4"
    junk.write_bytes(np.random.default_rng(2).integers(0, 256, 4000, np.uint8).tobytes())
    spans = [(STEPS[0], 0.5, 2.0), (STEPS[1], 8.0, 9.0), (STEPS[2], 14.0, 15.0), (STEPS[3], 20.0, 21.0)]
    rows = [row(video, spans), row(other, [(STEPS[2], 1.0, 2.0), (STEPS[0], 6.0, 7.0)], duration=12.0),
            row(junk, spans), row(video, [(STEPS[3], 3.0, 5.0), (STEPS[1], 16.0, 17.0)])]
    return [dict(r, video_id=f"vid{i:08d}") for i, r in enumerate(rows)]


def test_decode_pipeline_rows_equal_the_one_process_decode(shard, tmp_path):
    """The decode pipeline (0, 1 and 2 decode workers) gives the rows of decoding each video in the step's own
    process as before: the same grid, the same frames embedded (each within float rounding of its embedding in a
    batch cut at its video's end), the same keyframes; and rows that do not depend on the number of workers."""
    folder = tiny_clip(tmp_path / "clip", STEPS)
    outs = {}
    for workers in (0, 1, 2):
        cfg = ShowHowToConfig(aligner="clip", clip_model_path=str(folder), epsilon=2.0, vision_batch_size=16,
                              decode_workers=workers)
        step = stage(cfg, "keyframe_alignment")
        assert step.decode_workers == workers
        outs[workers] = run(step, shard)
    ref = outs[0]
    for workers in (1, 2):
        assert outs[workers].rows == ref.rows and [(d.item_id, d.reason, d.detail) for d in outs[workers].drops] == [
            (d.item_id, d.reason, d.detail) for d in ref.drops]
    assert [d.reason for d in ref.drops] == ["video_unreadable"] and ref.drops[0].item_id == "vid00000002"
    # against the decode before the pipeline, video by video
    step = stage(ShowHowToConfig(aligner="clip", clip_model_path=str(folder), epsilon=2.0, vision_batch_size=16,
                                 decode_workers=0), "keyframe_alignment")
    step.setup(None)
    windows = [(np.array([s["start"] for s in r["steps"]]), np.array([s["end"] for s in r["steps"]])) for r in shard]
    new = list(step._decoded(shard, windows))
    for r, (s, e), (n, feats) in zip(shard, windows, new):
        if isinstance(n, media.MediaError):
            assert r["video_id"] == "vid00000002"
            continue
        old_n, old_feats = _old_decode(step, r["video_path"], np.maximum(0.0, s - 2.0), e + 2.0)
        assert n == old_n and sorted(feats) == sorted(old_feats)
        assert max(float(np.abs(feats[g] - old_feats[g]).max()) for g in feats) < 1e-5
    # the same rows from the old embeddings: the same keyframes, scores within float rounding
    def old(rows, wins):
        for r, (s_, e_) in zip(rows, wins):
            try:
                yield _old_decode(step, r["video_path"], np.maximum(0.0, s_ - 2.0), e_ + 2.0)
            except media.MediaError as err:
                yield err, {}

    step._decoded = old
    before = Out(step.name)
    step.process(shard, before)
    step.teardown()
    assert [r["video_id"] for r in ref.rows] == [r["video_id"] for r in before.rows] == [
        "vid00000000", "vid00000001", "vid00000003"]
    for r, b in zip(ref.rows, before.rows):
        assert [s_["frame"] for s_ in r["steps"]] == [s_["frame"] for s_ in b["steps"]]
        assert [s_["score"] for s_ in r["steps"]] == pytest.approx([s_["score"] for s_ in b["steps"]], abs=1e-5)
        assert {k: v for k, v in r.items() if k not in ("steps", "alignment_objective", "mean_score")} == {
            k: v for k, v in b.items() if k not in ("steps", "alignment_objective", "mean_score")}
    assert [(d.item_id, d.reason, d.detail) for d in before.drops] == [(d.item_id, d.reason, d.detail)
                                                                       for d in ref.drops]


def test_decode_workers_is_an_execution_setting(shard):
    from builders.core.config import ConfigError

    a = stage(ShowHowToConfig(aligner="middle"), "keyframe_alignment")
    b = stage(ShowHowToConfig(aligner="middle", decode_workers=3), "keyframe_alignment")
    assert b.decode_workers == 3 and a.decode_workers is None
    assert a.cache_config() == b.cache_config() and a.params() != b.params()
    with pytest.raises(ConfigError, match="decode_workers"):
        ShowHowToConfig(decode_workers=-1).validate()


def test_decode_workers_flag_sets_the_key():
    import argparse

    from builders.corpora.showhowto import flags

    p = argparse.ArgumentParser()
    flags.add_arguments(p)
    assert flags.overrides_from_args(p.parse_args(["--decode-workers", "0"])) == {"decode_workers": 0}
    assert "decode_workers" not in flags.overrides_from_args(p.parse_args([]))


@pytest.mark.slow
def test_a_clip_build_has_the_same_release_with_and_without_decode_workers(tmp_path):
    """The bundled sample built with the (tiny) CLIP aligner: in series (``decode_workers=0``, one build worker) and
    through the decode pipeline inside two build worker processes (default workers: cores minus one) give the same
    keyframe rows and drops."""
    from .test_build import build, rows, stats

    folder = tiny_clip(tmp_path / "clip", STEPS)
    clip = ["--aligner", "clip", "--set", f"clip_model_path={folder}", "--set", "vision_batch_size=8"]
    serial = build(tmp_path / "a", *clip, "--set", "decode_workers=0")
    piped = build(tmp_path / "b", *clip, "--workers", "2")
    a, b = rows(serial, "sequences"), rows(piped, "sequences")
    assert a == b and len(a) == 5 and {r["aligner"] for r in a} == {"clip"}
    assert all(s["score"] is not None for r in a for s in r["steps"])
    assert stats(serial)["drops"] == stats(piped)["drops"]
