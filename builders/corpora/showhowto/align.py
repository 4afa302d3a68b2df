"""ShowHowTo stage 4 and the images (docs/corpora/showhowto.md; Souček et al., CVPR 2025, Sec. 3 "Cross-modal frame
alignment": one frame per step, temporal order preserved, maximal total DFN-CLIP similarity, windows of ±15 s).

The video is decoded once on the 5-fps grid (``models.media.iter_grid_frames``); with the CLIP aligner only frames
inside some step window are converted and embedded (no frame store), by the decode pipeline
(``models.frame_decode``): ``decode_workers`` CPU processes decode, resize and normalise frames while the encoder
embeds batches of ``vision_batch_size`` frames filled across the videos of a shard. The dynamic programme is the pure
op ``ops.keyframe_alignment.align_keyframes``; the ``middle`` aligner runs it on ``-|g - fps*(s+e)/2|`` (HowToStep-
style middle frames, paper Table 3), so the order is kept either way. Drops: ``video_unreadable`` (no decodable
frame), ``steps_out_of_range`` (steps beyond the last decoded frame of a truncated file), ``alignment_infeasible``.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
from dataclasses import dataclass
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ...core.records import Out, Row
from ...core.step import Requirement, Resources, Step, execution_setting, gpus_for_device
from ...models import media
from ...ops.keyframe_alignment import (
    align_keyframes,
    candidate_mask,
    frame_windows,
    middle_scores,
    start_sec_frame_idx,
)
from ...ops.keystep_parsing import validate_keysteps
from ...steps.asr import PYAV
from .transcribe import files_digest

#: the package each CLIP backend imports (``builders.models.vision_encoder``); a plug-in brings its own
CLIP_BACKENDS = {"hf": Requirement("transformers", "embed"), "open_clip": Requirement("open_clip", "gpu")}


def clip_encoder(params: Any) -> Any:
    """The aligner's model: any object with ``encode_images(pixels)`` / ``encode_texts(texts)`` and ``image_size``
    (``builders.models.vision_encoder``): a transformers CLIPModel folder, or open_clip ``clip_arch`` (DFN5B-CLIP
    ViT-H-14-378 in the paper preset) from a local checkpoint. Nothing downloads. ``params``: the
    :class:`KeyframeAlignment` step (or anything with its ``clip_*`` and ``vision_*`` attributes)."""
    from ...models.vision_encoder import HFClipVisionEncoder, OpenClipVisionEncoder

    if params.clip_backend == "plugin":
        return PluginEncoder.load(params.clip_model_path)
    if params.clip_backend == "open_clip":
        return OpenClipVisionEncoder(params.clip_arch, weights_path=params.clip_model_path,
                                     device=params.vision_device, batch_size=params.vision_batch_size)
    return HFClipVisionEncoder(params.clip_model_path, device=params.vision_device,
                               batch_size=params.vision_batch_size)


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


@dataclass(eq=False)
class KeyframeAlignment(Step):
    """Souček et al., CVPR 2025, App. A: windows ``[max(0, s-eps), min(t_last, e+eps)]`` on the ``fps`` grid, the
    order-preserving DP, and per step ``frame_time``, ``score`` (null for ``middle``), ``start_sec = floor(a_k)`` and
    ``frame_idx`` (toolkit).

    Parameters: ``aligner`` (clip | middle | auto: clip when ``clip_model_path`` is given, else middle), the frame
    grid ``fps``, the window margin ``epsilon``, the step checks ``min_steps`` / ``range_tolerance`` and the CLIP
    model (``clip_backend`` hf | open_clip | plugin, ``clip_model_path``, ``clip_arch``). The CLIP checkpoint (or a
    ``file.py`` plug-in) is fingerprinted (:meth:`input_paths`); each row's video file keys its shard. The device,
    batch size and decode workers say how the model runs (not part of the cache key).

    Row-wise (builders/core/row_reuse.py): a video's alignment depends on its row, its video file and the model, so
    a redone shard decodes only its changed videos, in one call (their CLIP frames share the encoder's full
    batches). Every batch has the same shape (the last one padded: builders/models/frame_decode.py), so a frame's
    embedding does not depend on the frames beside it, and a re-aligned video's row is the fresh build's."""

    name = "keyframe_alignment"
    version = "1"
    id_field = "video_id"
    row_wise = True
    row_wise_batch = True
    item_fields = ("video_id", "video_path")
    reads = {"video_id": str, "video_path": str, "duration": Any, "steps": list}
    writes = {"steps": list, "t_last": float, "num_grid_frames": int, "aligner": str, "alignment_objective": float,
              "mean_score": Any}

    aligner: str
    fps: int
    epsilon: float
    min_steps: int
    range_tolerance: float
    clip_backend: str
    clip_model_path: str | None
    clip_arch: str
    vision_device: str = execution_setting("cpu")
    vision_batch_size: int = execution_setting(64)
    #: CPU processes decoding frames for the CLIP aligner (None: cores minus one; 0: in the step's own process)
    decode_workers: int | None = execution_setting(None)

    @property
    def effective_aligner(self) -> str:
        """``auto`` = ``clip`` when a model path is configured, else ``middle`` (the config's own rule)."""
        if self.aligner == "auto":
            return "clip" if self.clip_model_path else "middle"
        return self.aligner

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        return files_digest(rows, memo, "video_path")

    def input_paths(self) -> list[Path]:
        """The CLIP checkpoint is fingerprinted; a plug-in's ``module:factory`` names code, not a file: a
        ``file.py`` plug-in is fingerprinted by its file. It keys the whole stage."""
        path = self.clip_model_path
        if self.effective_aligner != "clip" or not path:
            return []
        if self.clip_backend == "plugin":
            where = path.rsplit(":", 1)[0]
            return [Path(where)] if where.endswith(".py") else []
        return [Path(path)]

    def stage_input_paths(self) -> list[Path]:
        return self.input_paths()

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.vision_device) if self.effective_aligner == "clip" else 0.0)

    def missing_requirements(self) -> list[Requirement]:
        """PyAV, and the CLIP backend's package when the CLIP aligner runs."""
        clip = CLIP_BACKENDS.get(self.clip_backend) if self.effective_aligner == "clip" else None
        return [r for r in (PYAV, clip) if r is not None and r.missing()]

    def setup(self, state: Any) -> None:
        super().setup(state)
        self.encoder = clip_encoder(self) if self.effective_aligner == "clip" else None
        self._pool: Any = None

    def teardown(self) -> None:
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.close()
        self.encoder = None

    def _decode_pool(self) -> Any:
        """The decode workers (started on first use, kept until :meth:`teardown`); None for ``decode_workers=0``."""
        from ...models.frame_decode import DecodePool, chunk_frames, default_decode_workers

        workers = default_decode_workers() if self.decode_workers is None else int(self.decode_workers)
        if workers < 1:
            return None
        if self._pool is None:
            self._pool = DecodePool(workers, self.fps, int(self.encoder.image_size),
                                    chunk=chunk_frames(workers, self.vision_batch_size))
        return self._pool

    def _decoded(self, rows: list[Row], windows: list[tuple[np.ndarray, np.ndarray]]
                 ) -> Iterator[tuple[int | media.MediaError, dict[int, np.ndarray]]]:
        """Per row, in order: its grid length (or its ``MediaError``) and, with an encoder, the embeddings of the
        grid frames inside some pre-clipping window ``[max(0, s - eps), e + eps]``."""
        if self.encoder is None:  # middle: count the grid, convert no frame
            for r in rows:
                stats: dict[str, int] = {}
                try:
                    for _ in media.iter_grid_frames(r["video_path"], fps=self.fps, stats=stats):
                        pass
                except media.MediaError as e:
                    yield e, {}
                    continue
                yield int(stats.get("frames", 0)), {}
            return
        from ...models.frame_decode import VideoJob, encode_videos

        jobs = [VideoJob(r["video_path"], tuple(np.maximum(0.0, s - self.epsilon).tolist()),
                         tuple((e + self.epsilon).tolist())) for r, (s, e) in zip(rows, windows)]
        for _, res, feats in encode_videos(jobs, self.encoder, self.vision_batch_size, self.fps,
                                           self._decode_pool()):
            yield res, feats

    def process(self, rows: list[Row], out: Out) -> None:
        aligner = self.effective_aligner
        windows = [(np.array([s["start"] for s in r["steps"]], np.float64),
                    np.array([s["end"] for s in r["steps"]], np.float64)) for r in rows]
        for r, (starts, ends), (n, feats) in zip(rows, windows, self._decoded(rows, windows)):
            vid, steps = r["video_id"], r["steps"]
            out.item = vid  # its counters are its own (row_wise_batch)
            if isinstance(n, media.MediaError):
                out.drop(vid, "video_unreadable", n.detail or str(n))
                continue
            t_last = (n - 1) / self.fps
            failure = validate_keysteps([(s["instruction"], s["start"], s["end"]) for s in steps], r.get("duration"),
                                        t_last, min_steps=self.min_steps, tolerance=self.range_tolerance)
            if failure is not None:
                out.drop(vid, str(failure.reason), f"{failure.detail} (t_last {t_last:.1f} s)"[:300])
                continue
            a, b = frame_windows(starts, ends, t_last, epsilon=self.epsilon, fps=self.fps)
            mask = candidate_mask(a, b, n, fps=self.fps)
            if aligner == "middle":
                scores = middle_scores(starts, ends, n, fps=self.fps)
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
            start_sec, frame_idx = start_sec_frame_idx(a, frames, fps=self.fps)
            new_steps = []
            for k, s in enumerate(steps):
                g = int(frames[k])
                new_steps.append({**s, "frame": g, "frame_time": g / self.fps, "start_sec": int(start_sec[k]),
                                  "frame_idx": int(frame_idx[k]),
                                  "score": None if aligner == "middle" else float(scores[k, g])})
            scored = [s["score"] for s in new_steps if s["score"] is not None]
            out.count(f"aligned_{aligner}")
            out.keep({**r, "steps": new_steps, "t_last": t_last, "num_grid_frames": n, "aligner": aligner,
                      "alignment_objective": float(total),
                      "mean_score": float(np.mean(scored)) if scored else None})
        out.item = None


def encode_jpeg(frame: np.ndarray, quality: int = 95, max_side: int | None = None) -> bytes:
    """Native resolution (optionally the longer side capped at ``max_side``), JPEG quality 95."""
    img = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB")
    if max_side and max(img.size) > max_side:
        scale = max_side / max(img.size)
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))),
                         Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


@dataclass(eq=False)
class ExtractImages(Step):
    """``images`` config only: grid frame ``g*_k`` of each step, i.e. what the upstream command
    ``ffmpeg -i V -vf "fps=5,select=gte(t\\,START_SEC),select=eq(n\\,FRAME_IDX)" -vframes 1`` returns for the
    recorded ``start_sec``/``frame_idx``. A failure is ``frame_extraction_failed``: counted, the row stays in
    ``sequences`` without images. Without ``with_images`` it keeps every row as it is. Row-wise: a redone shard
    extracts the frames of its changed videos only."""

    name = "extract_images"
    version = "1"
    id_field = "video_id"
    row_wise = True
    item_fields = ("video_id", "video_path")
    reads = {"video_id": str, "video_path": str, "steps": list}
    #: with ``with_images`` only; ``images_error`` only when the frames could not be extracted (``images`` None)
    writes = {"images": Any, "images_error": str}

    with_images: bool
    fps: int
    jpeg_quality: int
    image_max_side: int | None

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """Each row's video file (when images are extracted)."""
        return files_digest(rows, memo, "video_path") if self.with_images else ""

    def missing_requirements(self) -> list[Requirement]:
        return [PYAV] if self.with_images and PYAV.missing() else []

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            if not self.with_images:
                out.keep(r)
                continue
            wanted = {s["frame"] for s in r["steps"]}
            got: dict[int, bytes] = {}
            try:
                for g, frame in media.iter_grid_frames(r["video_path"], fps=self.fps, wanted=wanted.__contains__):
                    if frame is not None:
                        got[g] = encode_jpeg(frame, self.jpeg_quality, self.image_max_side)
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
