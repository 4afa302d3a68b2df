"""Helpers of the ShowHowTo tests (spec showhowto.md §9): media generated in the test with PyAV (test patterns, with
and without a sine track, random bytes, a truncated mp4) and a tiny randomly initialised CLIP saved to a folder (no
weights exist offline; the aligner path is exercised with it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SAMPLE = Path(__file__).resolve().parents[3] / "builders" / "samples" / "showhowto"
COLOURS = [(220, 40, 40), (40, 200, 60), (40, 60, 220), (230, 200, 40), (160, 60, 170)]


def make_video(path: Path, seconds: float = 30.0, fps: int = 5, scene_s: float = 6.0, audio: bool = True,
               width: int = 64, height: int = 48) -> Path:
    """``testsrc``-like pattern: one colour per scene plus a moving square; an optional 220 Hz sine track."""
    import av

    n = round(seconds * fps)
    rate = 16000
    with av.open(str(path), "w", options={"movflags": "faststart"}) as c:
        v = c.add_stream("libx264", rate=fps, options={"crf": "35", "preset": "ultrafast", "g": str(2 * fps)})
        v.width, v.height, v.pix_fmt = width, height, "yuv420p"
        a = None
        if audio:
            a = c.add_stream("aac", rate=rate)
            a.layout = "mono"
        size, done = (a.codec_context.frame_size or 1024) if a else 1024, 0
        tone = (0.1 * np.sin(2 * np.pi * 220 * np.arange(int(seconds * rate)) / rate)).astype(np.float32)
        for i in range(n):
            k = int((i / fps) // scene_s)
            img = np.empty((height, width, 3), np.uint8)
            img[:] = COLOURS[k % len(COLOURS)]
            x0 = (i * 3) % (width - 12)
            img[18:30, x0:x0 + 12] = 255
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            c.mux(v.encode(frame))
            while a is not None and done < min(tone.size, int((i + 1) * rate / fps)):
                af = av.AudioFrame.from_ndarray(tone[None, done:done + size].copy(), format="flt", layout="mono")
                af.sample_rate, af.pts = rate, done
                c.mux(a.encode(af))
                done += size
        c.mux(v.encode())
        if a is not None:
            c.mux(a.encode())
    return path


def tiny_clip(folder: Path, texts: list[str]) -> Path:
    """A 2-layer CLIPModel (width 32, 32x32 images, projection 16) with a word-level tokenizer over ``texts``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import CLIPConfig, CLIPModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    words = sorted({w for t in texts for w in t.lower().replace(".", " ").replace(",", " ").split()})
    tok = Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1, **{w: k + 2 for k, w in enumerate(words)}},
                                     unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    CLIPModel(CLIPConfig(
        text_config={"vocab_size": len(words) + 2, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77},
        vision_config={"image_size": 32, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 2}, projection_dim=16)).save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(folder)
    return folder
