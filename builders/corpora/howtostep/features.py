"""Spec §2.4, §6: one visual feature vector per second for every video, read from files (``visual_features=file``),
computed with a CLIP ViT-L/14-class image encoder from the video (``compute``), or simulated from the narrations
(``simulated``: the bundled sample and tests; their numbers say nothing about real grounding).

Features are stored by reference (lhotse style): rows carry ``features_path`` and ``num_frames``; computed, simulated
and repaired arrays are fp16 ``.npy`` files in the build's cache folder. Drops: ``missing_features``,
``bad_features``, ``video_unreadable`` (spec §7); counters ``features_repaired``, ``feature_length_mismatch``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from ...core.config import to_dict
from ...core.records import Out, Row
from ...core.step import FitInputs, Step, gpus_for_device

FEATURE_KEYS = ("visual_features", "visual_dim", "visual_backbone", "features", "features_index",
                "vision_model_path", "text_encoder", "seed", "media")


def frame_count(row: Row) -> int:
    """T for computed or simulated features: whole seconds of the container duration, else of the last narration
    end (spec §2.4: extractors produce floor(duration) rows); at least 1."""
    dur = row.get("duration")
    if dur is None or not math.isfinite(dur) or dur <= 0:
        dur = max((n["end"] for n in row["narrations"]), default=1.0)
    return max(1, int(math.floor(dur)))


def load_row_features(row: Row, visual_dim: int) -> np.ndarray:
    """The float32 ``[T, C]`` array a row's ``features_path`` points to (validated again; repaired copies are used)."""
    from ...sources.visual_features import read_visual_features

    x, _ = read_visual_features(row["features_path"], visual_dim)
    return x


class VisualFeatures(Step):
    """Locate, check and repair (file), compute (CLIP image tower at 1 fps) or simulate (§6) each video's features."""

    name = "visual_features"
    version = "1"
    id_field = "video_id"
    uses_model = True
    config_keys = FEATURE_KEYS
    input_keys = ("features", "features_index")

    def gpus(self) -> float:
        return gpus_for_device(self.cfg.vision_device) if self.cfg.visual_features == "compute" else 0.0

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        key = hashlib.sha256(repr(sorted((k, to_dict(self.cfg)[k]) for k in FEATURE_KEYS)).encode()).hexdigest()
        return {"store": str(Path(inputs.cache_dir) / "features" / key[:16])}

    def setup(self, state: Any) -> None:
        super().setup(state)
        self.store = Path(state["store"])
        self.store.mkdir(parents=True, exist_ok=True)
        cfg = self.cfg
        self.index = self.encoder = self.text = None
        self.media_files: dict[str, Path] = {}
        if cfg.visual_features == "file":
            from ...sources.visual_features import FeatureIndex

            self.index = FeatureIndex(cfg.features, cfg.features_index)
        elif cfg.visual_features == "compute":
            from ...models import media
            from ...models.vision_encoder import make_vision_encoder

            self.encoder = make_vision_encoder(cfg.visual_backbone, cfg.vision_model_path, cfg.vision_device)
            self.media_files = media.find_media(cfg.media) if cfg.media else {}
        else:
            from ...nasva.data import get_text_encoder

            self.text = get_text_encoder(cfg.text_encoder)

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models.media import MediaError
        from ...sources.visual_features import FeatureFileError

        for r in rows:
            vid = r["video_id"]
            try:
                path, T, source = self._features(r, out)
            except FeatureFileError as e:
                out.drop(vid, e.reason, e.detail)
                continue
            except MediaError as e:  # compute: the frames cannot be decoded (spec §7 ``video_unreadable``)
                out.drop(vid, "video_unreadable", str(e))
                continue
            dur = r.get("duration")
            if dur is not None and abs(T - dur) > 2.0:  # spec §7: proceed with T
                out.count("feature_length_mismatch")
            out.keep({**r, "features_path": str(path), "num_frames": int(T), "visual_features": source,
                      "duration": dur if dur is not None else float(T)})

    def _write(self, vid: str, x: np.ndarray) -> Path:
        from ...sources.visual_features import write_feature_npy

        safe = hashlib.sha256(vid.encode()).hexdigest()[:8]
        path = self.store / f"{vid}.{safe}.npy"  # the id is validated upstream; the hash keeps names unique per case
        write_feature_npy(path, x)
        return path

    def _features(self, r: Row, out: Out) -> tuple[Path, int, str]:
        from ...sources.visual_features import FeatureFileError, read_visual_features

        cfg, vid = self.cfg, r["video_id"]
        if cfg.visual_features == "file":
            path = self.index.lookup(vid)
            if path is None:
                raise FeatureFileError("missing_features", f"no feature file for {vid} under --features")
            x, counters = read_visual_features(path, cfg.visual_dim)
            if counters.get("features_repaired"):
                out.count("features_repaired", counters["features_repaired"])
                path = self._write(vid, x)
            return Path(path), x.shape[0], "file"
        if cfg.visual_features == "compute":
            from ...models.vision_encoder import extract_video_features

            src = self.media_files.get(vid)
            if src is None:
                raise FeatureFileError("missing_features", "visual_features=compute but no video file under --media")
            x, manifest = extract_video_features(src, self.encoder, num_seconds=frame_count(r))  # MediaError: above
            if manifest.get("padded_rows"):
                out.count("feature_rows_padded", int(manifest["padded_rows"]))
            if x.shape[1] != cfg.visual_dim:
                raise FeatureFileError("bad_features", f"dimension {x.shape[1]} != visual_dim {cfg.visual_dim}")
            return self._write(vid, x), x.shape[0], "computed"
        from ...ops.simulated_features import simulated_features

        T = frame_count(r)
        narr = r["narrations"]
        emb = self.text.encode([n["text"] for n in narr])
        x = simulated_features(emb, np.array([n["start"] for n in narr]), np.array([n["end"] for n in narr]), T,
                               dim=cfg.visual_dim, seed=0)
        return self._write(vid, x), T, "simulated"
