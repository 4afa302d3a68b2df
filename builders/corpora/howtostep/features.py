"""One visual feature vector per second for every video (Li et al., ECCV 2024, supp. §6.1; docs/corpora/howtostep.md),
read from files (``visual_features=file``), computed with a CLIP ViT-L/14-class image encoder from the video
(``compute``), or simulated from the narrations (``simulated``: the bundled sample and tests; their numbers say nothing
about real grounding).

Features are stored by reference (lhotse style): rows carry ``features_path``, ``features_rows`` and
``features_kind`` (:func:`feature_ref`) and ``num_frames``. A feature file given as input is referenced where it is
(``features_rows`` null, ``features_digest`` its content, so that the stages reading it rerun when it changes). What
the build makes is stored **one file per work shard** in the build's cache folder, never one per video (issue 19: 5.7
files and 0.7 MB a video): computed and repaired arrays as fp16 rows of ``<digest>.f16.npy`` (``kind`` ``dense``),
and simulated features as what they are defined from, each narration's ``[start, end, g(text)]`` in
``<digest>.sim.npy`` (``kind`` ``simulated``), regenerated bit for bit by :func:`load_row_features` (a quarter of the
bytes or less, and no ``[T, 768]`` product in this step). Store files are named by the digest of their content, so
rows of an earlier result never see a file change under them. The step is ``row_wise_batch``: a shard redone after
one video changed processes that video alone and stores it in a new small block, while its other rows keep naming
the block they were stored in (the features loaded are those of a full recomputation; builders/core/row_reuse.py).

Drops (docs/reason-codes.md): ``missing_features``, ``bad_features`` (also more than ``feature_max_bad_share`` rows
holding NaN/Inf or a value beyond ``feature_max_abs``, in a file or computed), ``feature_duration_mismatch`` (a
file's rows against the container duration, or, without a video file, an empty file or one far longer than the
narrations), ``video_unreadable``; counters ``features_repaired``, ``feature_length_mismatch`` (more than 2 s off,
within the tolerance: the build proceeds with the file's rows).

Without a video file a feature file is the video: the narrations that start at or after its end (``T`` rows:
``T`` s) are dropped from the row (counter ``narration_beyond_video``), and the video is dropped as
``too_few_narrations`` only when fewer than ``min_narrations`` remain (:func:`narrations_within_features`; TAN's
rule, which HowToStep follows: Li et al., ECCV 2024, supp. §6.1).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...core.records import Out, Row
from ...core.step import FitInputs, Requirement, Resources, Step, execution_setting, gpus_for_device, input_path

#: the packages the optional models import (pyproject extras)
SENTENCE_TRANSFORMERS = Requirement("sentence_transformers", "embed")
PYAV = Requirement("av", "asr")
#: the package each ``visual_backbone`` of ``builders.models.vision_encoder.make_vision_encoder`` imports
VISION_BACKBONES = {"open_clip": Requirement("open_clip", "gpu"), "open_clip_vit_l14": Requirement("open_clip", "gpu")}
HF_CLIP = Requirement("transformers", "embed")


def text_encoder_requirements(name: str) -> list[Requirement]:
    """The package a text encoder ``name`` needs (``nasva.text_features.get_text_encoder``): none for ``hash[:DIM]``."""
    return [] if name == "hash" or name.startswith("hash:") else [SENTENCE_TRANSFORMERS]


def vision_requirements(backbone: str) -> list[Requirement]:
    """The package the CLIP model of ``visual_backbone`` needs (transformers, or open_clip)."""
    return [VISION_BACKBONES.get(backbone, HF_CLIP)]


#: the row fields :func:`load_row_features` reads (written by :class:`VisualFeatures`)
FEATURE_REF: dict[str, Any] = {"features_path": str, "features_rows": Any, "features_kind": str, "num_frames": int}
DENSE_SUFFIX, SIMULATED_SUFFIX = ".f16.npy", ".sim.npy"
#: a length more than this far from the container duration (within the tolerance) is counted
#: (``feature_length_mismatch``); beyond the tolerance it is the drop ``feature_duration_mismatch``
LENGTH_COUNTER_S = 2.0


def narrated_end(row: Row) -> float | None:
    """The last finite narration end of a row (seconds), a lower bound of its video's duration; None without one."""
    ends = [float(n["end"]) for n in row.get("narrations") or () if n.get("end") is not None]
    ends = [e for e in ends if math.isfinite(e)]
    return max(ends) if ends else None


def narrations_within_features(narrations: list[dict[str, Any]], rows: int) -> tuple[list[dict[str, Any]], int]:
    """The narrations that start before the end of ``rows`` one-a-second features, and how many start at or after it.

    A narration starting at ``s >= rows`` has no feature second (``floor(s) >= rows``, the rule of
    ``ops.step_timestamps.narration_frame_matrix``); one starting before and ending after is kept (its end is clipped
    there). TAN's pipeline, which HowToStep follows, drops such narrations and keeps the video (Li et al., ECCV 2024,
    supp. §6.1). The kept narrations keep their order and ``index``."""
    kept = [n for n in narrations if float(n["start"]) < rows]
    return kept, len(narrations) - len(kept)


def frame_count(row: Row) -> int:
    """T for computed or simulated features: whole seconds of the container duration, else of the last narration
    end (extractors produce floor(duration) rows, one a second: Li et al., ECCV 2024, supp. §6.1); at least 1."""
    dur = row.get("duration")
    if dur is None or not math.isfinite(dur) or dur <= 0:
        dur = narrated_end(row) or 1.0
    return max(1, int(math.floor(dur)))


def _digest(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16]


def feature_ref(row: Row, visual_dim: int) -> Any:
    """Where a row's features are: its feature file (a ``Path``), or a :class:`builders.nasva.data.FeatureRef` to
    its rows of a per-shard store file (simulated ones are ``visual_dim`` wide, ``num_frames`` long)."""
    from ...nasva.data import DENSE, FeatureRef

    span = row.get("features_rows")
    if span is None:
        return Path(row["features_path"])
    return FeatureRef(str(row["features_path"]), int(span[0]), int(span[1]), row.get("features_kind") or DENSE,
                      int(row["num_frames"]), int(visual_dim))


def load_row_features(row: Row, visual_dim: int) -> np.ndarray:
    """The float32 ``[T, C]`` array of a row's features, as :class:`VisualFeatures` accepted them: a file is
    referenced only when it had no bad row under the build's thresholds (repaired arrays are stored), so it is read
    again without judging its share of bad rows a second time (any NaN/Inf would still be caught and repaired)."""
    from ...sources.visual_features import read_visual_features

    x, _ = read_visual_features(feature_ref(row, visual_dim), visual_dim, max_bad_share=1.0,
                                cache=row.get("features_rows") is not None)
    return x


def shards_naming(stage: Any, path: str | Path) -> list[int]:
    """The work shards of the complete ``visual_features`` stage ``stage`` (``StageData``) whose rows name the store
    file ``path`` (their ``features_path``): those to recompute when it is damaged (the store's reader raises
    ``DamagedCache`` naming it, ``builders.sources.feature_files.check_store_block``; ``builders.core.repair``)."""
    target = str(Path(path).resolve())
    return [i for i in range(stage.n)
            if any(r.get("features_path") and str(Path(r["features_path"]).resolve()) == target
                   for r in stage.shard_rows(i, ["features_path"]))]


@dataclass(eq=False, kw_only=True)
class VisualFeatures(Step):
    """Locate, check and repair (file), compute (CLIP image tower at 1 fps) or simulate each video's features
    (docs/corpora/howtostep.md; drops and thresholds: docs/reason-codes.md, docs/configuration.md).

    A video's feature file (``file``) or media file (``compute``) keys only its own rows (README.md "Caching and
    resume"): ``features`` and ``media`` are per-item inputs; ``media`` is given only to compute (the frames are read
    for nothing else)."""

    name = "visual_features"
    version = "3"
    id_field = "video_id"
    # a redone shard processes only its changed videos, in one call (one store block: builders/core/row_reuse.py)
    row_wise = True
    row_wise_batch = True
    owns_cache = ("features",)   # the feature store's blocks (builders/sources/visual_features.py)
    reads = {"video_id": str, "duration": Any, "narrations": list}
    writes = {"features_path": str, "features_rows": Any, "features_kind": str, "features_digest": Any,
              "num_frames": int, "visual_features": str, "duration": Any, "narrations": list}

    visual_features: str | None            # file | compute | simulated
    visual_dim: int
    visual_backbone: str
    features: Path | None = input_path(per_item=True)
    features_index: Path | None = input_path()
    media: Path | None = input_path(per_item=True)
    vision_model_path: str | None
    text_encoder: str                      # g of the simulated features
    feature_max_bad_share: float
    feature_max_abs: float
    feature_duration_tolerance_s: float
    feature_duration_tolerance_frac: float
    feature_transcript_span_ratio: float
    #: without a video file, a video left with fewer narrations before the features' end is ``too_few_narrations``
    #: (the Narrations stage's threshold, config ``min_narrations``)
    min_narrations: int = 5
    vision_device: str = execution_setting("cpu")

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.vision_device) if self.visual_features == "compute" else 0.0)

    def cache_config(self) -> dict[str, Any]:
        """The cache key's parameters: ``min_narrations`` only keys ``visual_features=file``, the one mode where it can
        drop a video (:meth:`_narrations_within`), so the other modes keep their keys and store folders."""
        config = super().cache_config()
        if self.visual_features != "file":
            config.pop("min_narrations", None)
        return config

    def missing_requirements(self) -> list[Requirement]:
        if self.visual_features == "compute":
            need = [PYAV, *vision_requirements(self.visual_backbone)]
        elif self.visual_features == "file":
            need = []
        else:
            need = text_encoder_requirements(self.text_encoder)
        return [r for r in need if r.missing()]

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        key = hashlib.sha256(json.dumps(self.cache_config(), sort_keys=True, default=str).encode()).hexdigest()
        return {"store": str(Path(inputs.cache_dir) / "features" / key[:16])}

    def shards_naming(self, data: Any, path: Path) -> list[int]:
        return shards_naming(data, path)

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """Each video's feature file (``file``) or media file (``compute``), by content; nothing else varies by
        video (simulated features are a function of the rows)."""
        from ...core.fingerprint import hash_obj, item_file_sha

        vids = [str(r[self.id_field]) for r in rows]
        cache = self.__dict__.setdefault("_items", {})
        if self.visual_features == "file" and self.features:
            if "index" not in cache:
                from ...sources.visual_features import FeatureIndex

                cache["index"] = FeatureIndex(self.features, self.features_index)
            return hash_obj({"features": {v: item_file_sha(cache["index"].lookup(v), memo) for v in vids}})
        if self.visual_features == "compute" and self.media:
            if "media" not in cache:
                from ...models import media

                cache["media"] = media.find_media(self.media)
            return hash_obj({"media": {v: item_file_sha(cache["media"].get(v), memo) for v in vids}})
        return ""

    def __getstate__(self) -> dict[str, Any]:  # the look-up tables of item_digest stay in their process
        return {k: v for k, v in self.__dict__.items() if k != "_items"}

    def setup(self, state: Any) -> None:
        super().setup(state)
        self.store = Path(state["store"])
        self.store.mkdir(parents=True, exist_ok=True)
        self.index = self.encoder = self.text = None
        self.media_files: dict[str, Path] = {}
        if self.visual_features == "file":
            from ...sources.visual_features import FeatureIndex

            self.index = FeatureIndex(self.features, self.features_index)
        elif self.visual_features == "compute":
            from ...models import media
            from ...models.vision_encoder import make_vision_encoder

            self.encoder = make_vision_encoder(self.visual_backbone, self.vision_model_path, self.vision_device)
            self.media_files = media.find_media(self.media) if self.media else {}
        else:
            from ...nasva.data import get_text_encoder

            self.text = get_text_encoder(self.text_encoder)

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models.media import MediaError
        from ...sources.visual_features import FeatureFileError

        done: list[tuple[Row, tuple[Path | str, Any], int, str]] = []
        for r in rows:
            vid = out.item = r["video_id"]  # its counters are its own (row_wise_batch)
            try:
                where, T, source = self._features(r, out)
            except FeatureFileError as e:
                out.drop(vid, e.reason, e.detail)
                continue
            except MediaError as e:  # compute: the frames cannot be decoded (``video_unreadable``)
                out.drop(vid, "video_unreadable", str(e))
                continue
            if source == "file":
                r = self._narrations_within(r, T, out)
                if r is None:
                    continue
            done.append((r, where, T, source))
        refs = self._store([where for _, where, _, _ in done])
        for (r, _, T, source), (path, span, kind, digest) in zip(done, refs):
            out.item = r["video_id"]
            dur = r.get("duration")
            if dur is not None and abs(T - dur) > LENGTH_COUNTER_S:  # within the tolerance: proceed with T
                out.count("feature_length_mismatch")
            out.keep({**r, "features_path": str(path), "features_rows": span, "features_kind": kind,
                      "features_digest": digest, "num_frames": int(T), "visual_features": source,
                      "duration": dur if dur is not None else float(T)})

    def _narrations_within(self, r: Row, T: int, out: Out) -> Row | None:
        """A feature file without a video file is the video: its narrations that start at or after row ``T`` are
        dropped (counter ``narration_beyond_video``), and the video is ``too_few_narrations`` when fewer than
        ``min_narrations`` remain (None returned). TAN's rule, which HowToStep follows (Li et al., ECCV 2024, supp.
        §6.1). With a video file the row is returned as it is (the labelers count what lies beyond T)."""
        from ...sources.visual_features import has_container_duration

        if has_container_duration(r.get("duration")):
            return r
        narr = list(r.get("narrations") or ())
        kept, beyond = narrations_within_features(narr, T)
        if not beyond:
            return r
        if len(kept) < self.min_narrations:
            out.drop(r["video_id"], "too_few_narrations",
                     f"{len(kept)} of {len(narr)} narrations start before the end of the {T} feature rows (1 a "
                     f"second; no video file), fewer than min_narrations={self.min_narrations}")
            return None
        out.count("narration_beyond_video", beyond)
        return {**r, "narrations": kept}

    def _store(self, items: list[tuple[Path | str, Any]]) -> list[tuple[Path, list[int] | None, str, str | None]]:
        """One store file per kind for the shard's arrays (``(kind, rows)`` items); files given (``(path,
        digest)``) stay where they are. Returns each item's ``(path, [start, stop] | None, kind, digest)``: a
        given file's content digest is on its row, so that a later stage reading it reruns when it changes (the
        store files are named by their content)."""
        from ...nasva.data import DENSE, SIMULATED
        from ...sources.visual_features import write_store_block

        out: list[tuple[Path, list[int] | None, str, str | None]] = []
        paths: dict[str, Path] = {}
        for kind, suffix in ((DENSE, DENSE_SUFFIX), (SIMULATED, SIMULATED_SUFFIX)):
            blocks = [x for k, x in items if k == kind]
            if blocks:
                paths[kind] = write_store_block(self.store, np.concatenate(blocks), suffix)
        offsets = dict.fromkeys(paths, 0)
        for kind, x in items:
            if isinstance(kind, Path):
                out.append((kind, None, "file", x))
                continue
            a = offsets[kind]
            offsets[kind] = a + x.shape[0]
            out.append((paths[kind], [a, a + x.shape[0]], kind, None))
        return out

    def _features(self, r: Row, out: Out) -> tuple[tuple[Path | str, Any], int, str]:
        """The video's features: ``(its file, content digest)``, or ``(kind, rows)`` to store (fp16 ``dense``
        features, or the ``simulated`` factors ``[start, end, g(text)]`` per narration), with T and the provenance
        name."""
        from ...nasva.data import DENSE, SIMULATED
        from ...sources.visual_features import (FeatureFileError, check_feature_duration, fp16_features,
                                                read_visual_features, repair_feature_rows)

        vid = r["video_id"]
        if self.visual_features == "file":
            path = self.index.lookup(vid)
            if path is None:
                raise FeatureFileError("missing_features", f"no feature file for {vid} under --features")
            x, counters = read_visual_features(path, self.visual_dim, max_bad_share=self.feature_max_bad_share,
                                               max_abs=self.feature_max_abs)
            check_feature_duration(x.shape[0], r.get("duration"), narrated_end(r),
                                   self.feature_duration_tolerance_s, self.feature_duration_tolerance_frac,
                                   self.feature_transcript_span_ratio)
            if counters.get("features_repaired"):
                out.count("features_repaired", counters["features_repaired"])
                return (DENSE, fp16_features(x)), x.shape[0], "file"
            return (Path(path), _digest(x)), x.shape[0], "file"
        if self.visual_features == "compute":
            from ...models.vision_encoder import extract_video_features

            src = self.media_files.get(vid)
            if src is None:
                raise FeatureFileError("missing_features", "visual_features=compute but no video file under --media")
            x, manifest = extract_video_features(src, self.encoder, num_seconds=frame_count(r))  # MediaError: above
            if manifest.get("padded_rows"):
                out.count("feature_rows_padded", int(manifest["padded_rows"]))
            if x.shape[1] != self.visual_dim:
                raise FeatureFileError("bad_features", f"dimension {x.shape[1]} != visual_dim {self.visual_dim}")
            x, n_repaired = repair_feature_rows(x, self.feature_max_bad_share, self.feature_max_abs)  # NaN/Inf rows
            out.count("features_repaired", n_repaired)
            return (DENSE, fp16_features(x)), x.shape[0], "computed"
        return (SIMULATED, self._simulated_factors(r)), frame_count(r), "simulated"

    def _simulated_factors(self, r: Row) -> np.ndarray:
        """The arguments of a video's simulated features (``ops.simulated_features``), one row a narration: ``[start,
        end, g(text)]`` (float64, exact for the float32 embeddings); :func:`load_row_features` regenerates the features
        from them."""
        narr = r["narrations"]
        emb = np.asarray(self.text.encode([n["text"] for n in narr]), dtype=np.float64)
        if emb.ndim != 2:
            raise ValueError(f"narr_emb must be 2-D (K, D), got shape {emb.shape}")
        if emb.size and not np.isfinite(emb).all():
            raise ValueError("narr_emb contains NaN or Inf")
        times = np.array([[n["start"], n["end"]] for n in narr], dtype=np.float64).reshape(len(narr), 2)
        return np.concatenate([times, emb.reshape(len(narr), -1)], axis=1)
