"""Per-second CLIP image features computed from video files (docs/corpora/howtostep.md; docs/getting-started.md).

Frames at 1 fps (:func:`builders.models.media.iter_frames_1fps`, ffmpeg ``fps=1`` semantics) -> :func:`clip_preprocess`
(centre-crop the shorter side to a square, resize to 224 bicubic, CLIP mean/std; PIL, no torchvision) -> CLIP ViT-L/14
image embedding (``transformers`` ``CLIPModel.get_image_features`` or ``open_clip`` ``encode_image``) -> un-normalised
fp16 ``[T, 768]``. Li et al., ECCV 2024, supp. §6.1: "the original video is first center cropped to a shorter
side and then resized to 224 x 224 resolution ... we decode the video into 1fps and extract one visual feature (768-d)
per second with OpenAI's ViT/L-14". No CLIP weights exist offline: a local path is required and nothing downloads; CI
runs this path with a tiny random-initialised ``CLIPModel``. torch/transformers/open_clip are imported lazily.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

#: OpenAI CLIP normalisation (open_clip OPENAI_DATASET_MEAN/STD; CLIPImageProcessor defaults)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGE_SIZE = 224                    # Li et al., ECCV 2024, supp. §6.1
CONFIG_KEY = "vision_model_path"    # HowToStep config key naming the local weights (docs/corpora/howtostep.md, Presets)


def clip_preprocess(frames: np.ndarray, size: int = IMAGE_SIZE) -> np.ndarray:
    """uint8 RGB ``[N, H, W, 3]`` (or one ``[H, W, 3]``) -> float32 ``[N, 3, size, size]``.

    Order (Li et al., ECCV 2024, supp. §6.1; docs/corpora/howtostep.md): centre-crop the shorter side to a square
    (offsets rounded like torchvision ``CenterCrop``), resize to ``size`` with PIL bicubic, scale to [0, 1], subtract
    :data:`CLIP_MEAN`, divide by :data:`CLIP_STD`. (OpenAI's own transform resizes the shorter side first and crops
    after; the two differ only by resampling.)
    """
    from PIL import Image

    frames = np.asarray(frames)
    if frames.ndim == 3:
        frames = frames[None]
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"expected uint8 frames [N, H, W, 3], got shape {frames.shape}")
    out = np.empty((frames.shape[0], 3, size, size), np.float32)
    mean = np.asarray(CLIP_MEAN, np.float32)
    std = np.asarray(CLIP_STD, np.float32)
    for i, frame in enumerate(frames):
        h, w = frame.shape[:2]
        side = min(h, w)
        top, left = round((h - side) / 2.0), round((w - side) / 2.0)  # torchvision CenterCrop rounding
        img = Image.fromarray(np.ascontiguousarray(frame[top:top + side, left:left + side], dtype=np.uint8), "RGB")
        if img.size != (size, size):
            img = img.resize((size, size), Image.Resampling.BICUBIC)
        x = np.asarray(img, np.float32) / 255.0
        out[i] = ((x - mean) / std).transpose(2, 0, 1)
    return out


class VisionEncoder(Protocol):
    """What the callers of a CLIP encoder use (:func:`extract_video_features`; HowToStep's paired text tower calls
    ``encode_texts``): :class:`HFClipVisionEncoder` and :class:`OpenClipVisionEncoder` implement all of it."""

    model_id: str
    dim: int
    image_size: int

    def encode_images(self, pixels: np.ndarray) -> np.ndarray: ...

    def encode_texts(self, texts: list[str], tokenizer: Any = None) -> np.ndarray: ...


def _batches(n: int, size: int) -> Iterator[slice]:
    for i in range(0, n, size):
        yield slice(i, min(i + size, n))


def _torch_dtype(torch: Any, dtype: str | None, device: str) -> Any:
    name = dtype or ("float16" if str(device).startswith("cuda") else "float32")
    return getattr(torch, name)


class HFClipVisionEncoder:
    """transformers ``CLIPModel.get_image_features`` (a local copy of ``openai/clip-vit-large-patch14``).

    ``path_or_model``: a local folder (loaded with ``local_files_only=True``) or an already built ``CLIPModel``.
    """

    def __init__(self, path_or_model: str | Path | Any, device: str = "cpu", batch_size: int = 64,
                 dtype: str | None = None):
        import torch

        self._torch = torch
        if isinstance(path_or_model, (str, Path)):
            path = Path(path_or_model)
            if not (path / "config.json").is_file():
                raise ValueError(f"`{CONFIG_KEY}`: no CLIPModel folder (config.json) at {path}; nothing is downloaded")
            from transformers import CLIPModel

            model = CLIPModel.from_pretrained(str(path), local_files_only=True)
            self.model_id = f"transformers CLIPModel {path.name}"
            self._tok_path = path
        else:
            self._tok_path = None
            model = path_or_model
            name = getattr(model.config, "_name_or_path", "") or "random-init"
            self.model_id = f"transformers CLIPModel {Path(name).name if name else 'random-init'}"
        self.device, self.batch_size = device, int(batch_size)
        self.dtype = _torch_dtype(torch, dtype, device)
        self.model = model.to(device=device, dtype=self.dtype).eval()
        self.dim = int(model.config.projection_dim)
        self.image_size = int(model.config.vision_config.image_size)

    def encode_images(self, pixels: np.ndarray) -> np.ndarray:
        """float32 ``[N, 3, S, S]`` preprocessed pixels -> float32 ``[N, dim]`` un-normalised image embeddings (copied
        to the device asynchronously when they lie in page-locked memory, as ``models.frame_decode``'s batches)."""
        torch = self._torch
        out = np.empty((len(pixels), self.dim), np.float32)
        with torch.inference_mode():
            for sl in _batches(len(pixels), self.batch_size):
                x = torch.from_numpy(np.ascontiguousarray(pixels[sl])).to(self.device, self.dtype, non_blocking=True)
                feats = self.model.get_image_features(pixel_values=x)
                if not torch.is_tensor(feats):  # transformers 5 returns an output object with the projection
                    feats = feats.pooler_output
                out[sl] = feats.float().cpu().numpy()
        return out

    def encode_texts(self, texts: list[str], tokenizer: Any = None) -> np.ndarray:
        """The paired text tower (``get_text_features``): float32 ``[N, dim]`` un-normalised, in the image space.

        HowToStep uses it for MPTVA's S-V-short pathway and ``stage1_method=step_video`` (Chen et al., ECCV 2024,
        §3.2.2; Li et al., ECCV 2024, Table 3); the tokenizer
        comes from the model folder (``local_files_only``) unless one is given."""
        torch = self._torch
        if tokenizer is None:
            if self._tok_path is None:
                raise ValueError("encode_texts needs a tokenizer for a CLIPModel built in memory")
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(self._tok_path), local_files_only=True)
        max_len = int(self.model.config.text_config.max_position_embeddings)
        out = np.empty((len(texts), self.dim), np.float32)
        with torch.inference_mode():
            for sl in _batches(len(texts), self.batch_size):
                enc = tokenizer(list(texts[sl]), padding=True, truncation=True, max_length=max_len,
                                return_tensors="pt")
                feats = self.model.get_text_features(input_ids=enc["input_ids"].to(self.device),
                                                     attention_mask=enc["attention_mask"].to(self.device))
                if not torch.is_tensor(feats):
                    feats = feats.pooler_output
                out[sl] = feats.float().cpu().numpy()
        return out


class OpenClipVisionEncoder:
    """open_clip ``encode_image`` from a local checkpoint file (docs/getting-started.md; never downloads).

    OpenAI weights were trained with QuickGELU; open_clip switches it on only for the ``openai`` tag, so a local file
    of those weights needs ``quick_gelu=True`` (the default here).
    """

    def __init__(self, arch: str = "ViT-L-14", weights_path: str | Path | None = None, device: str = "cuda",
                 batch_size: int = 64, quick_gelu: bool = True, dtype: str | None = None):
        if not weights_path:
            raise ValueError(f"open_clip needs local weights: set `{CONFIG_KEY}` (nothing is downloaded)")
        path = Path(weights_path)
        if path.is_dir():
            candidates = sorted(path.glob("open_clip_pytorch_model.bin")) + sorted(path.glob("*.safetensors"))
            if not candidates:
                raise ValueError(f"`{CONFIG_KEY}`: no open_clip checkpoint in {path}")
            path = candidates[0]
        if not path.is_file():
            raise ValueError(f"`{CONFIG_KEY}`: {path} does not exist")
        import open_clip
        import torch

        self._torch = torch
        model = open_clip.create_model(arch, pretrained=str(path), force_quick_gelu=quick_gelu, device=device)
        self.device, self.batch_size = device, int(batch_size)
        self.dtype = _torch_dtype(torch, dtype, device)
        self.model = model.to(device=device, dtype=self.dtype).eval()
        size = model.visual.image_size
        self.image_size = int(size[0] if isinstance(size, (tuple, list)) else size)
        self.dim = int(model.visual.output_dim)
        self.model_id = f"open_clip {arch} {path.name}"
        self.arch = arch

    def encode_images(self, pixels: np.ndarray) -> np.ndarray:
        torch = self._torch
        out = np.empty((len(pixels), self.dim), np.float32)
        with torch.inference_mode():
            for sl in _batches(len(pixels), self.batch_size):
                x = torch.from_numpy(np.ascontiguousarray(pixels[sl])).to(self.device, self.dtype, non_blocking=True)
                out[sl] = self.model.encode_image(x).float().cpu().numpy()
        return out

    def encode_texts(self, texts: list[str], tokenizer: Any = None) -> np.ndarray:
        """open_clip ``encode_text`` (the paired text tower), float32 ``[N, dim]`` un-normalised."""
        import open_clip

        torch = self._torch
        tokenizer = tokenizer or open_clip.get_tokenizer(self.arch)
        out = np.empty((len(texts), self.dim), np.float32)
        with torch.inference_mode():
            for sl in _batches(len(texts), self.batch_size):
                out[sl] = self.model.encode_text(tokenizer(list(texts[sl])).to(self.device)).float().cpu().numpy()
        return out


def make_vision_encoder(kind: str, path: str | None, device: str) -> VisionEncoder:
    """``kind``: ``clip_vit_l14``/``hf_clip`` (transformers CLIPModel folder) or ``open_clip`` (checkpoint file).

    No ``path`` -> ValueError naming the config key (docs/corpora/howtostep.md: the paper preset fails loudly, nothing
    downloads).
    """
    if not path:
        raise ValueError(f"visual_features=compute needs local CLIP ViT-L/14 weights: set `{CONFIG_KEY}` "
                         "(no CLIP weights exist offline; nothing is downloaded)")
    if kind in ("clip_vit_l14", "hf_clip", "transformers"):
        return HFClipVisionEncoder(path, device=device)
    if kind in ("open_clip", "open_clip_vit_l14"):
        return OpenClipVisionEncoder("ViT-L-14", weights_path=path, device=device)
    raise ValueError(f"unknown vision encoder {kind!r}: use clip_vit_l14 (transformers) or open_clip")


def extract_video_features(video_path: str | Path, encoder: VisionEncoder, num_seconds: int | None = None,
                           batch_frames: int = 64) -> tuple[np.ndarray, dict]:
    """fp16 ``[T, dim]`` un-normalised CLIP features at 1 fps plus the manifest line of the computed features.

    Frames stream in batches of ``batch_frames`` (memory stays bounded for long videos). Raises
    :class:`builders.models.media.MediaError` for unreadable files. ``T`` may be 0 (a video shorter than 1 s).
    """
    from . import media

    stats: dict[str, int] = {}
    rows: list[np.ndarray] = []
    batch: list[np.ndarray] = []

    def flush() -> None:
        if batch:
            rows.append(encoder.encode_images(clip_preprocess(np.stack(batch), size=encoder.image_size)))
            batch.clear()

    for frame in media.iter_frames_1fps(video_path, num_seconds, stats=stats):
        batch.append(frame)
        if len(batch) >= batch_frames:
            flush()
    flush()
    feats = np.concatenate(rows) if rows else np.zeros((0, encoder.dim), np.float32)
    feats = feats.astype(np.float16)
    manifest = {"vid": Path(video_path).name.rsplit(".", 1)[0], "backbone": encoder.model_id, "dim": int(encoder.dim),
                "fps": 1, "T": int(feats.shape[0]), "padded_rows": int(stats.get("padded_rows", 0)),
                "source": "computed"}
    return feats, manifest
