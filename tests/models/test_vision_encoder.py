"""builders.models.vision_encoder: CLIP preprocessing by hand, the tiny random-init CLIPModel of offline_models.md §5 on
a generated video (spec §2.4), the open_clip path through a fake module, and lazy imports (PLAN import rules)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from builders.models import media
from builders.models.vision_encoder import (
    CLIP_MEAN,
    CLIP_STD,
    HFClipVisionEncoder,
    OpenClipVisionEncoder,
    clip_preprocess,
    extract_video_features,
    make_vision_encoder,
)

av = pytest.importorskip("av")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
MEAN, STD = np.array(CLIP_MEAN), np.array(CLIP_STD)


def norm(rgb) -> np.ndarray:
    """The normalised value of one RGB pixel, by hand."""
    return (np.asarray(rgb, np.float64) / 255.0 - MEAN) / STD


def test_constant_image_normalises_exactly():
    img = np.empty((48, 64, 3), np.uint8)
    img[:] = (200, 100, 50)
    x = clip_preprocess(img, size=32)
    assert x.shape == (1, 3, 32, 32) and x.dtype == np.float32
    for c in range(3):
        assert np.allclose(x[0, c], norm((200, 100, 50))[c], atol=1e-6)
    assert clip_preprocess(np.stack([img, img])).shape == (2, 3, 224, 224)  # default size 224 (spec §2.4)


def test_centre_crop_of_the_shorter_side_then_resize():
    """A 2x4 landscape frame, size 2: the crop keeps columns 1-2 and the resize is the identity."""
    img = np.zeros((2, 4, 3), np.uint8)
    img[0, :, 0] = [10, 20, 30, 40]
    img[1, :, 0] = [50, 60, 70, 80]
    img[:, :, 1] = 255
    x = clip_preprocess(img, size=2)
    assert np.allclose(x[0, 0], [[norm((20, 0, 0))[0], norm((30, 0, 0))[0]],
                                 [norm((60, 0, 0))[0], norm((70, 0, 0))[0]]], atol=1e-6)
    assert np.allclose(x[0, 1], (1.0 - CLIP_MEAN[1]) / CLIP_STD[1], atol=1e-6)
    assert np.allclose(x[0, 2], -CLIP_MEAN[2] / CLIP_STD[2], atol=1e-6)
    portrait = np.transpose(img, (1, 0, 2))  # 4x2: rows 1-2 survive
    assert np.allclose(clip_preprocess(portrait, size=2)[0, 0], x[0, 0].T, atol=1e-6)
    odd = np.zeros((2, 5, 3), np.uint8)
    odd[:, :, 0] = [0, 1, 2, 3, 4]  # offset (5-2)/2 = 1.5 rounds to 2 like torchvision CenterCrop: columns 2-3
    assert np.allclose(clip_preprocess(odd, size=2)[0, 0, 0], [norm((2, 0, 0))[0], norm((3, 0, 0))[0]], atol=1e-6)
    with pytest.raises(ValueError):
        clip_preprocess(np.zeros((2, 2), np.uint8))


def test_bicubic_resize_matches_pil():
    from PIL import Image

    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    ref = Image.fromarray(img[:, 5:25]).resize((8, 8), Image.Resampling.BICUBIC)
    expected = ((np.asarray(ref, np.float64) / 255.0 - MEAN) / STD).transpose(2, 0, 1)
    assert np.allclose(clip_preprocess(img, size=8)[0], expected, atol=1e-6)


@pytest.fixture(scope="module")
def tiny_clip():
    """offline_models.md §5: a tiny random-init CLIPModel (image_size 32, projection 16)."""
    from transformers import CLIPConfig, CLIPModel

    cfg = CLIPConfig(text_config={"vocab_size": 1000, "hidden_size": 32, "intermediate_size": 64,
                                  "num_hidden_layers": 2, "num_attention_heads": 2, "max_position_embeddings": 77},
                     vision_config={"image_size": 32, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64,
                                    "num_hidden_layers": 2, "num_attention_heads": 2}, projection_dim=16)
    torch.manual_seed(0)
    return CLIPModel(cfg).eval()


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    """5 s of 64x48 colour frames at 4 fps (a new colour each second) + a 440 Hz tone."""
    path = tmp_path_factory.mktemp("vis") / "clip_a.mp4"
    colours = [(220, 40, 40), (40, 200, 60), (40, 60, 220), (230, 220, 40), (200, 60, 200)]
    with av.open(str(path), "w") as c:
        v = c.add_stream("mpeg4", rate=4, options={"qscale": "2"})
        v.width, v.height, v.pix_fmt = 64, 48, "yuv420p"
        a = c.add_stream("aac", rate=16000)
        a.layout = "mono"
        for i in range(20):
            img = np.empty((48, 64, 3), np.uint8)
            img[:] = colours[i // 4]
            img[20:28, 3 * i:3 * i + 8] = 255
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            c.mux(v.encode(frame))
        c.mux(v.encode())
        tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(80000) / 16000)).astype(np.float32)
        for k in range(0, tone.size, 1024):
            frame = av.AudioFrame.from_ndarray(tone[None, k:k + 1024].copy(), format="flt", layout="mono")
            frame.sample_rate, frame.pts = 16000, k
            c.mux(a.encode(frame))
        c.mux(a.encode())
    return path


def test_hf_encoder_matches_the_model(tiny_clip):
    enc = HFClipVisionEncoder(tiny_clip, batch_size=2)
    assert (enc.dim, enc.image_size) == (16, 32) and enc.model_id.startswith("transformers CLIPModel")
    pixels = np.random.default_rng(1).standard_normal((5, 3, 32, 32)).astype(np.float32)
    out = enc.encode_images(pixels)
    with torch.no_grad():
        ref = tiny_clip.get_image_features(pixel_values=torch.from_numpy(pixels))
    ref = ref if torch.is_tensor(ref) else ref.pooler_output
    assert out.shape == (5, 16) and out.dtype == np.float32
    assert np.allclose(out, ref.numpy(), atol=1e-5)  # batches of 2 == one batch of 5


def test_extract_video_features(video, tiny_clip):
    enc = HFClipVisionEncoder(tiny_clip)
    feats, manifest = extract_video_features(video, enc)
    assert feats.shape == (5, 16) and feats.dtype == np.float16
    assert manifest == {"vid": "clip_a", "backbone": enc.model_id, "dim": 16, "fps": 1, "T": 5, "padded_rows": 0,
                        "source": "computed"}
    frames, padded = media.frames_1fps(video)
    expected = enc.encode_images(clip_preprocess(frames, size=32)).astype(np.float16)
    assert padded == 0 and np.array_equal(feats, expected)
    assert len({feats[t].tobytes() for t in range(5)}) == 5  # one colour per second -> distinct rows
    again, _ = extract_video_features(video, HFClipVisionEncoder(tiny_clip, batch_size=3), batch_frames=2)
    assert np.array_equal(again, feats)  # deterministic, independent of batching
    longer, m7 = extract_video_features(video, enc, num_seconds=7)
    assert longer.shape == (7, 16) and m7["padded_rows"] == 1 and m7["T"] == 7  # tick 5 = frame at 4.75 s; 6 pads
    assert np.array_equal(longer[:5], feats) and np.array_equal(longer[5], longer[6])


def test_unreadable_video_raises_media_error(tmp_path, tiny_clip):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 100)
    with pytest.raises(media.MediaError) as err:
        extract_video_features(bad, HFClipVisionEncoder(tiny_clip))
    assert err.value.reason == "video_unreadable"


def test_load_from_a_local_folder(tmp_path, tiny_clip, video):
    tiny_clip.save_pretrained(tmp_path / "tiny-clip")
    enc = make_vision_encoder("clip_vit_l14", str(tmp_path / "tiny-clip"), "cpu")
    assert enc.model_id == "transformers CLIPModel tiny-clip" and enc.dim == 16
    a, _ = extract_video_features(video, enc)
    b, _ = extract_video_features(video, HFClipVisionEncoder(tiny_clip))
    assert np.array_equal(a, b)


def test_missing_weights_name_the_config_key(tmp_path):
    for kind in ("clip_vit_l14", "open_clip"):
        with pytest.raises(ValueError, match="vision_model_path"):
            make_vision_encoder(kind, None, "cpu")
    with pytest.raises(ValueError, match="vision_model_path"):
        make_vision_encoder("clip_vit_l14", str(tmp_path), "cpu")  # no config.json: never a hub download
    with pytest.raises(ValueError, match="vision_model_path"):
        OpenClipVisionEncoder(weights_path=tmp_path)  # folder without a checkpoint
    with pytest.raises(ValueError, match="unknown vision encoder"):
        make_vision_encoder("dinov2", "/x", "cpu")


def test_open_clip_path_with_a_fake_module(tmp_path, monkeypatch):
    calls = {}

    class Visual:
        image_size, output_dim = (32, 32), 4

    class FakeClip(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = Visual()
            self.proj = torch.nn.Linear(3, 4, bias=False)

        def encode_image(self, x):
            return self.proj(x.mean(dim=(2, 3)))

    def create_model(name, pretrained=None, force_quick_gelu=False, device="cpu", **kw):
        calls.update(name=name, pretrained=pretrained, force_quick_gelu=force_quick_gelu, device=device)
        return FakeClip()

    monkeypatch.setitem(sys.modules, "open_clip", types.SimpleNamespace(create_model=create_model))
    ckpt = tmp_path / "open_clip_pytorch_model.bin"
    ckpt.write_bytes(b"x")
    enc = make_vision_encoder("open_clip", str(tmp_path), "cpu")
    assert calls == {"name": "ViT-L-14", "pretrained": str(ckpt), "force_quick_gelu": True, "device": "cpu"}
    assert (enc.dim, enc.image_size, enc.model_id) == (4, 32, "open_clip ViT-L-14 open_clip_pytorch_model.bin")
    pixels = np.ones((3, 3, 32, 32), np.float32)
    expected = enc.model.proj.weight.detach().numpy().sum(axis=1)
    assert np.allclose(enc.encode_images(pixels), np.tile(expected, (3, 1)), atol=1e-6)


def test_modules_import_no_heavy_library():
    code = ("import sys, builders.models.media, builders.models.asr, builders.models.vision_encoder; "
            "print(sorted(m for m in ('av', 'torch', 'transformers', 'faster_whisper', 'ctranslate2', 'open_clip', "
            "'whisperx', 'PIL') if m in sys.modules))")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "[]"


def test_the_paired_text_tower_is_get_text_features(tiny_clip, tmp_path):
    """``encode_texts`` (MPTVA S-V-short, step_video) = CLIPModel.get_text_features on the folder's tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1, "boil": 2, "water": 3, "the": 4}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "tiny-clip"
    tiny_clip.save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(folder)
    enc = HFClipVisionEncoder(folder)
    got = enc.encode_texts(["boil the water", "water"])
    assert got.shape == (2, 16) and got.dtype == np.float32
    with torch.no_grad():
        ids = torch.tensor([[2, 4, 3]])
        want = tiny_clip.get_text_features(input_ids=ids, attention_mask=torch.ones_like(ids))
    want = want if torch.is_tensor(want) else want.pooler_output
    np.testing.assert_allclose(got[0], want[0].numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="tokenizer"):
        HFClipVisionEncoder(tiny_clip).encode_texts(["water"])
