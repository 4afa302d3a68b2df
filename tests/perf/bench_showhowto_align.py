"""Benchmark of ShowHowTo stage 4 on the CPU (spec showhowto.md §6): grid frames decoded per second, and frames
decoded + preprocessed + embedded per second through the real ``KeyframeAlignment`` step with a tiny random-init CLIP
(2 layers, width 32, 32x32 input; no weights exist offline), on a generated 320x240 video (ffmpeg ``testsrc``-like
pattern, 60 s at 25 fps, decoded on the 5-fps grid). A timing of the code path, not of DFN5B-CLIP: with the paper's
ViT-H-14-378 the encoder dominates (see the README's GPU-hour projection). Also ``--vit-h`` times a random-init
ViT-H-14-378-shaped vision tower (transformers CLIPVisionModel, 32 layers, width 1280, 378 px, patch 14) on whatever
device is there (``--device cuda`` on a GPU host): images per second at batch 64.

    python tests/perf/bench_showhowto_align.py [--seconds 60] [--json] [--vit-h --device cuda]
    python -m pytest tests/perf/bench_showhowto_align.py -s -p no:cacheprovider --override-ini addopts=
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _video(path: Path, seconds: int, fps: int = 25, w: int = 320, h: int = 240) -> Path:
    import av

    with av.open(str(path), "w") as c:
        v = c.add_stream("libx264", rate=fps, options={"crf": "28", "preset": "ultrafast", "g": "50"})
        v.width, v.height, v.pix_fmt = w, h, "yuv420p"
        yy, xx = np.mgrid[0:h, 0:w]
        for i in range(seconds * fps):
            img = np.stack([(xx + 3 * i) % 256, (yy + 2 * i) % 256, ((xx + yy) // 2 + i) % 256], -1).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            c.mux(v.encode(frame))
        c.mux(v.encode())
    return path


def run(seconds: int = 60) -> dict:
    from builders.core.records import Out
    from builders.corpora.showhowto.config import ShowHowToConfig
    from builders.corpora.showhowto.pipeline import steps as pipeline_steps
    from builders.models import media

    sys.path.insert(0, str(REPO / "tests"))
    from corpora.showhowto.conftest import tiny_clip

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        video = _video(d / "v.mp4", seconds)
        t = time.perf_counter()
        n = sum(1 for _ in media.iter_grid_frames(video))
        decode_only = n / (time.perf_counter() - t)
        t = time.perf_counter()
        n_rgb = sum(1 for _, f in media.iter_grid_frames(video, wanted=lambda g: True) if f is not None)
        decode_rgb = n_rgb / (time.perf_counter() - t)
        steps = [f"Do step number {k}." for k in range(8)]
        cfg = ShowHowToConfig(aligner="clip", clip_model_path=str(tiny_clip(d / "clip", steps)), vision_batch_size=64)
        step = next(s for s in pipeline_steps(cfg) if s.name == "keyframe_alignment")
        step.setup(None)
        span = seconds / len(steps)
        row = {"video_id": "abcdefghijk", "video_path": str(video), "duration": float(seconds),
               "steps": [{"instruction": s, "start": k * span, "end": (k + 1) * span} for k, s in enumerate(steps)]}
        out = Out(step.name)
        t = time.perf_counter()
        step.process([row], out)
        aligned = n / (time.perf_counter() - t)
        assert len(out.rows) == 1, out.drops
    return {"grid_frames": n, "decode_grid_frames_per_s": round(decode_only, 1),
            "decode_rgb_frames_per_s": round(decode_rgb, 1), "align_tiny_clip_frames_per_s": round(aligned, 1)}


def vit_h(device: str = "cpu", batch: int = 64, repeats: int = 5) -> dict:
    """Images per second of a random-init ViT-H-14-378-shaped CLIP vision tower (timing only)."""
    import torch
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    cfg = CLIPVisionConfig(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=16,
                           image_size=378, patch_size=14, projection_dim=1024)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = CLIPVisionModelWithProjection(cfg).to(device=device, dtype=dtype).eval()
    x = torch.randn(batch, 3, 378, 378, device=device, dtype=dtype)
    with torch.inference_mode():
        model(pixel_values=x)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(repeats):
            model(pixel_values=x)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return {"vit_h_14_378_images_per_s": round(batch * repeats / (time.perf_counter() - t), 1), "device": device,
            "dtype": str(dtype), "batch": batch}


def test_bench_showhowto_align():
    print(json.dumps(run(20)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--vit-h", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = vit_h(a.device) if a.vit_h else run(a.seconds)
    print(json.dumps(res) if a.json else "\n".join(f"{k}: {v}" for k, v in res.items()))
