"""ShowHowTo stage 4 and the images (docs/corpora/showhowto.md; Souček et al., CVPR 2025, Sec. 3 "Cross-modal frame
alignment": one frame per step, temporal order preserved, maximal total DFN-CLIP similarity, windows of ±15 s).

The video is decoded once on the 5-fps grid (``models.media.iter_grid_frames``); with the CLIP aligner only frames
inside some step window are converted and embedded, in batches (no frame store). The dynamic programme is the pure
op ``ops.keyframe_alignment.align_keyframes``; the ``middle`` aligner runs it on ``-|g - fps*(s+e)/2|`` (HowToStep-
style middle frames, paper Table 3), so the order is kept either way. Drops: ``video_unreadable`` (no decodable
frame), ``steps_out_of_range`` (steps beyond the last decoded frame of a truncated file), ``alignment_infeasible``.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from ...core.records import Out, Row
from ...core.step import Step, gpus_for_device
from .transcribe import ITEM_INPUT_KEYS, files_digest


def clip_encoder(cfg: Any) -> Any:
    """The aligner's model: any object with ``encode_images(pixels)`` / ``encode_texts(texts)`` and ``image_size``
    (``builders.models.vision_encoder``): a transformers CLIPModel folder, or open_clip ``clip_arch`` (DFN5B-CLIP
    ViT-H-14-378 in the paper preset) from a local checkpoint. Nothing downloads."""
    from ...models.vision_encoder import HFClipVisionEncoder, OpenClipVisionEncoder

    if cfg.clip_backend == "plugin":
        return PluginEncoder.load(cfg.clip_model_path)
    if cfg.clip_backend == "open_clip":
        return OpenClipVisionEncoder(cfg.clip_arch, weights_path=cfg.clip_model_path, device=cfg.vision_device,
                                     batch_size=cfg.vision_batch_size)
    return HFClipVisionEncoder(cfg.clip_model_path, device=cfg.vision_device, batch_size=cfg.vision_batch_size)


class PluginEncoder:
    """The CLIP model as a plug-in (docs/corpora/showhowto.md): ``clip_backend=plugin`` with
    ``clip_model_path=module:factory`` (or ``file.py:factory``); the factory returns an object with
    ``encode_image(pixels [B, 3, S, S] float32) -> [B, d]``, ``encode_text(list[str]) -> [K, d]`` and ``image_size`` (S;
    CLIP normalisation is applied to the pixels)."""

    def __init__(self, model: Any):
        for attr in ("encode_image", "encode_text", "image_size"):
            if not hasattr(model, attr):
                raise ValueError(f"clip plug-in {type(model).__name__} has no {attr}")
        self.model, self.image_size = model, int(model.image_size)
        self.model_id = f"plugin {type(model).__name__}"

    @classmethod
    def load(cls, spec: str | None) -> PluginEncoder:
        import importlib
        import importlib.util

        if not spec or ":" not in spec:
            raise ValueError("clip_backend=plugin needs --set clip_model_path=module:factory (or file.py:factory)")
        where, name = spec.rsplit(":", 1)
        if where.endswith(".py"):
            mspec = importlib.util.spec_from_file_location("showhowto_clip_plugin", where)
            if mspec is None or mspec.loader is None:
                raise ValueError(f"clip plug-in file {where} cannot be loaded")
            module = importlib.util.module_from_spec(mspec)
            mspec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        return cls(getattr(module, name)())

    def encode_images(self, pixels: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.encode_image(pixels), np.float32)

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode_text(list(texts)), np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


class KeyframeAlignment(Step):
    """Souček et al., CVPR 2025, App. A: windows ``[max(0, s-eps), min(t_last, e+eps)]`` on the ``fps`` grid, the
    order-preserving DP, and per step ``frame_time``, ``score`` (null for ``middle``), ``start_sec = floor(a_k)`` and
    ``frame_idx`` (toolkit)."""

    name = "keyframe_alignment"
    version = "1"
    id_field = "video_id"
    uses_model = True
    config_keys = ("aligner", "fps", "epsilon", "clip_backend", "clip_model_path", "clip_arch", "min_steps",
                   "range_tolerance")
    input_keys = ("clip_model_path",)
    item_input_keys = ITEM_INPUT_KEYS  # each row's video file keys its shard
    item_fields = ("video_id", "video_path")

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        return files_digest(rows, memo, "video_path")

    def input_paths(self) -> list:
        """The CLIP checkpoint is fingerprinted; a plug-in's ``module:factory`` names code, not a file: a
        ``file.py`` plug-in is fingerprinted by its file."""
        from pathlib import Path

        path = self.cfg.clip_model_path
        if self.cfg.effective_aligner != "clip" or not path:
            return []
        if self.cfg.clip_backend == "plugin":
            where = path.rsplit(":", 1)[0]
            return [Path(where)] if where.endswith(".py") else []
        return [Path(path)]

    def gpus(self) -> float:
        return gpus_for_device(self.cfg.vision_device) if self.cfg.effective_aligner == "clip" else 0.0

    def setup(self, state: Any) -> None:
        super().setup(state)
        self.encoder = clip_encoder(self.cfg) if self.cfg.effective_aligner == "clip" else None

    def teardown(self) -> None:
        self.encoder = None

    def _decode(self, path: str, lo: np.ndarray, hi: np.ndarray) -> tuple[int, dict[int, np.ndarray]]:
        """Decode the grid once; with an encoder, embed (in batches) the frames inside some pre-clipping window."""
        from ...models import media
        from ...models.vision_encoder import clip_preprocess

        fps = self.cfg.fps
        enc = self.encoder

        def wanted(g: int) -> bool:
            t = g / fps
            return bool(np.any((lo - 1e-6 <= t) & (t <= hi + 1e-6)))

        stats: dict[str, int] = {}
        feats: dict[int, np.ndarray] = {}
        batch: list[tuple[int, np.ndarray]] = []

        def flush() -> None:
            if batch:
                pixels = clip_preprocess(np.stack([f for _, f in batch]), size=enc.image_size)
                for (g, _), e in zip(batch, enc.encode_images(pixels)):
                    feats[g] = e
                batch.clear()

        for g, frame in media.iter_grid_frames(path, fps=fps, wanted=wanted if enc is not None else None, stats=stats):
            if frame is not None:
                batch.append((g, frame))
                if len(batch) >= self.cfg.vision_batch_size:
                    flush()
        if enc is not None:
            flush()
        return int(stats.get("frames", 0)), feats

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models import media
        from ...ops.keyframe_alignment import (
            align_keyframes,
            candidate_mask,
            frame_windows,
            middle_scores,
            start_sec_frame_idx,
        )
        from ...ops.keystep_parsing import validate_keysteps

        cfg, aligner = self.cfg, self.cfg.effective_aligner
        for r in rows:
            vid, steps = r["video_id"], r["steps"]
            starts = np.array([s["start"] for s in steps], np.float64)
            ends = np.array([s["end"] for s in steps], np.float64)
            try:
                n, feats = self._decode(r["video_path"], np.maximum(0.0, starts - cfg.epsilon), ends + cfg.epsilon)
            except media.MediaError as e:
                out.drop(vid, "video_unreadable", e.detail or str(e))
                continue
            t_last = (n - 1) / cfg.fps
            failure = validate_keysteps([(s["instruction"], s["start"], s["end"]) for s in steps], r.get("duration"),
                                        t_last, min_steps=cfg.min_steps, tolerance=cfg.range_tolerance)
            if failure is not None:
                out.drop(vid, str(failure.reason), f"{failure.detail} (t_last {t_last:.1f} s)"[:300])
                continue
            a, b = frame_windows(starts, ends, t_last, epsilon=cfg.epsilon, fps=cfg.fps)
            mask = candidate_mask(a, b, n, fps=cfg.fps)
            if aligner == "middle":
                scores = middle_scores(starts, ends, n, fps=cfg.fps)
            else:
                cols = np.flatnonzero(mask.any(axis=0))
                missing = [int(g) for g in cols if int(g) not in feats]
                if missing:  # cannot happen: every candidate lies inside a pre-clipping window
                    raise RuntimeError(f"{vid}: frames {missing[:5]} were not embedded")
                text = _unit(self.encoder.encode_texts([s["instruction"] for s in steps]))
                img = _unit(np.stack([feats[int(g)] for g in cols])) if len(cols) else np.zeros((0, text.shape[1]))
                scores = np.full((len(steps), n), np.nan)
                scores[:, cols] = text @ img.T
            frames, total = align_keyframes(scores, mask)
            if frames is None:
                out.drop(vid, "alignment_infeasible", f"{len(steps)} steps, {int(mask.any(axis=0).sum())} candidate "
                                                      f"frames: no strictly increasing assignment")
                continue
            start_sec, frame_idx = start_sec_frame_idx(a, frames, fps=cfg.fps)
            new_steps = []
            for k, s in enumerate(steps):
                g = int(frames[k])
                new_steps.append({**s, "frame": g, "frame_time": g / cfg.fps, "start_sec": int(start_sec[k]),
                                  "frame_idx": int(frame_idx[k]),
                                  "score": None if aligner == "middle" else float(scores[k, g])})
            scored = [s["score"] for s in new_steps if s["score"] is not None]
            out.count(f"aligned_{aligner}")
            out.keep({**r, "steps": new_steps, "t_last": t_last, "num_grid_frames": n, "aligner": aligner,
                      "alignment_objective": float(total),
                      "mean_score": float(np.mean(scored)) if scored else None})


def encode_jpeg(frame: np.ndarray, quality: int = 95, max_side: int | None = None) -> bytes:
    """Native resolution (optionally the longer side capped at ``max_side``), JPEG quality 95."""
    from PIL import Image

    img = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB")
    if max_side and max(img.size) > max_side:
        scale = max_side / max(img.size)
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))),
                         Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


class ExtractImages(Step):
    """``images`` config only: grid frame ``g*_k`` of each step, i.e. what the upstream command
    ``ffmpeg -i V -vf "fps=5,select=gte(t\\,START_SEC),select=eq(n\\,FRAME_IDX)" -vframes 1`` returns for the
    recorded ``start_sec``/``frame_idx``. A failure is ``frame_extraction_failed``: counted, the row stays in
    ``sequences`` without images."""

    name = "extract_images"
    version = "1"
    id_field = "video_id"
    config_keys = ("with_images", "fps", "jpeg_quality", "image_max_side")
    item_input_keys = ITEM_INPUT_KEYS  # each row's video file keys its shard (when images are extracted)
    item_fields = ("video_id", "video_path")

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        return files_digest(rows, memo, "video_path") if self.cfg.with_images else ""

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models import media

        cfg = self.cfg
        for r in rows:
            if not cfg.with_images:
                out.keep(r)
                continue
            wanted = {s["frame"] for s in r["steps"]}
            got: dict[int, bytes] = {}
            try:
                for g, frame in media.iter_grid_frames(r["video_path"], fps=cfg.fps, wanted=wanted.__contains__):
                    if frame is not None:
                        got[g] = encode_jpeg(frame, cfg.jpeg_quality, cfg.image_max_side)
                    if len(got) == len(wanted):
                        break
            except media.MediaError as e:
                got, detail = {}, e.detail or str(e)
            else:
                detail = f"frames {sorted(wanted - set(got))[:5]} not decoded"
            if len(got) != len(wanted):
                out.count("frame_extraction_failed")
                out.keep({**r, "images": None, "images_error": detail[:300]})
                continue
            out.keep({**r, "images": [got[s["frame"]] for s in r["steps"]]})
