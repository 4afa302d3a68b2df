"""The NaSVA models trained inside a HowToStep build, as global stages (docs/architecture.md, "Caching and resume"):

* ``train_labeler`` (Li et al., ECCV 2024, §3.3 "self-training"): NaSVA trained on the Stage-1 labels (round 1) or on
  the previous round's labels (rounds 2-3) of the ``train`` split only, with ``builders.nasva.train`` and the docs/evaluation.md
  schedule (12 epochs, batch 8, AdamW 1e-4, tau 0.07, seed 2023), fresh initialisation each round.
* ``mptva_long_model`` (Chen et al., ECCV 2024, §3.2.2 S-V-long): a given NaSVA checkpoint, or one trained on the
  narrations (W only, ASR timestamps as labels).

Training runs in ``<work>/cache/labeler/<key>``, keyed by the training data and settings, where the trainer keeps its
per-epoch resume state: a build killed inside training resumes from the last finished epoch (the fit folder itself is
rebuilt from scratch on a rerun). The trainer's features folder links the videos' feature files and names the videos
kept in per-shard store files in one ``features.refs.json`` (``builders.nasva.data.FeatureRef``). The final
``model.pt`` + ``config.json`` are copied into the stage's artefacts; rows carry ``labeler = {checkpoint, sha256,
text_cache}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.config import ConfigError
from ...core.records import Out, Row
from ...core.step import (FitInputs, Requirement, Resources, Step, execution_setting, gpus_for_device,
                          input_path)
from .features import FEATURE_REF, text_encoder_requirements

#: NaSVA is a torch model (torch comes with sentence-transformers, the ``embed`` extra)
TORCH = Requirement("torch", "embed")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _feature_ext(path: str) -> str:
    from ...nasva.data import FEATURE_EXTS

    return max((e for e in FEATURE_EXTS if path.endswith(e)), key=len, default=".npy")


def _feature_sources(rows: list[Row], visual_dim: int) -> list[tuple[str, Any, int]]:
    """Each training video's feature file (a resolved ``Path``) or store reference (a ``FeatureRef`` with a
    resolved path), and the size of that file: what keys the training and what the trainer's folder names."""
    from ...nasva.data import FeatureRef
    from .features import feature_ref

    out = []
    for r in rows:
        ref = feature_ref(r, visual_dim)
        if isinstance(ref, FeatureRef):
            src = Path(ref.path).resolve()
            out.append((r["video_id"], FeatureRef(str(src), ref.start, ref.stop, ref.kind, ref.frames, ref.dim),
                        src.stat().st_size))
        else:
            src = Path(ref).resolve()
            out.append((r["video_id"], src, src.stat().st_size))
    return out


def _link_features(sources: list[tuple[str, Any, int]], folder: Path) -> None:
    """The trainer's features folder: a ``<vid><ext>`` link to each training video's feature file, and the videos
    stored in per-shard files named in one ``features.refs.json`` (the trainer reads both; no file a video)."""
    from ...nasva.data import FEATURE_REFS_FILE, FeatureRef

    folder.mkdir(parents=True, exist_ok=True)
    refs: dict[str, dict[str, Any]] = {}
    for vid, src, _ in sources:
        if isinstance(src, FeatureRef):
            refs[vid] = src.as_dict()
            continue
        link = folder / f"{vid}{_feature_ext(str(src))}"
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(src, link)
    path = folder / FEATURE_REFS_FILE
    text = json.dumps(refs, sort_keys=True)
    if refs and (not path.is_file() or path.read_text(encoding="utf-8") != text):
        path.write_text(text, encoding="utf-8")
    elif not refs:
        path.unlink(missing_ok=True)


def _train(inputs: FitInputs, stage: _NasvaTraining, tag: str, labels: dict[str, list[dict[str, Any]]] | None,
           narrations: dict[str, list[dict[str, Any]]] | None, rows: list[Row]) -> dict[str, Any]:
    """Write the label files, link the features and run (or resume) ``builders.nasva.train.train`` with the
    training parameters of ``stage``."""
    from ...nasva.train import NasvaTrainConfig, train

    cache = Path(inputs.cache_dir)
    train_cfg = NasvaTrainConfig(epochs=stage.labeler_epochs, batch_size=stage.labeler_batch_size, lr=stage.labeler_lr,
                                 seed=stage.seed, max_vlen=stage.max_vlen, text_encoder=stage.nasva_text_encoder,
                                 device=stage.labeler_device)
    blobs = {n: json.dumps(d, sort_keys=True).encode() for n, d in (("labels", labels), ("narrations", narrations))
             if d is not None}
    sources = _feature_sources(rows, stage.visual_dim)
    probe = [[vid, src.as_dict() if not isinstance(src, Path) else str(src), size] for vid, src, size in sources]
    key = hashlib.sha256(json.dumps([tag, {k: hashlib.sha256(b).hexdigest() for k, b in blobs.items()}, probe,
                                     train_cfg.__dict__], sort_keys=True, default=str).encode()).hexdigest()[:16]
    work = cache / "labeler" / f"{tag}-{key}"
    work.mkdir(parents=True, exist_ok=True)
    _link_features(sources, work / "features")
    paths = {}
    for n, b in blobs.items():
        p = work / f"{n}.json"
        if not p.exists() or p.read_bytes() != b:
            p.write_bytes(b)
        paths[n] = p
    summary = train(work / "features", work / "ckpt", labels=paths.get("labels"), narrations=paths.get("narrations"),
                    cfg=train_cfg, text_cache=cache / "nasva_text.sqlite", visual_backbone=stage.visual_backbone,
                    progress=False)
    dest = Path(inputs.artefact_dir) / "labeler"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("model.pt", "config.json", "train_log.jsonl"):
        if (work / "ckpt" / name).exists():
            shutil.copyfile(work / "ckpt" / name, dest / name)
    return {"checkpoint": "labeler", "sha256": _sha256(dest / "model.pt"),
            "text_cache": str(cache / "nasva_text.sqlite"), "train_key": key,
            "num_videos": len(rows), "num_texts": sum(len(v) for v in (labels or narrations or {}).values()),
            "loss_per_epoch": [e.get("loss") for e in summary.get("log", [])],
            "resumed_from_epoch": summary.get("resumed_from")}


@dataclass(eq=False, kw_only=True)
class _NasvaTraining(Step):
    """A global stage that trains (or names) a NaSVA labeler (the docs/evaluation.md schedule) and gives every row
    ``labeler = {checkpoint, sha256, text_cache}``."""

    id_field = "video_id"
    reads = {"video_id": str, "split": str, "narrations": list, **FEATURE_REF}
    writes = {"labeler": dict}
    requires = (TORCH,)

    labeler_epochs: int
    labeler_batch_size: int
    labeler_lr: float
    seed: int
    max_vlen: int                      # texts ending at or after it are excluded by the trainer
    nasva_text_encoder: str
    visual_backbone: str
    visual_dim: int                    # the width of the features the trainer reads
    labeler_device: str = execution_setting("cpu")

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.labeler_device))

    def missing_requirements(self) -> list[Requirement]:
        return [r for r in (*self.requires, *text_encoder_requirements(self.nasva_text_encoder)) if r.missing()]

    def process(self, rows: list[Row], out: Out) -> None:
        st = self.state
        info = {"checkpoint": str(Path(st["_artefacts"]) / st["checkpoint"]) if not os.path.isabs(st["checkpoint"])
                else st["checkpoint"], "sha256": st["sha256"], "text_cache": st["text_cache"]}
        for r in rows:
            out.keep({**r, "labeler": info})


@dataclass(eq=False, kw_only=True)
class LabelerTraining(_NasvaTraining):
    """Li et al., ECCV 2024, §3.3: the round's NaSVA labeler, trained on ``train``-split videos with >= 1 label (texts
    ending at or after ``max_vlen`` are excluded by the trainer); ``labeler_train_text=steps+narrations`` adds the W
    samples."""

    version = "1"

    round: int                         # round 1 trains on the Stage-1 labels, round r on round r-1's kept steps
    labeler_train_text: str            # steps | steps+narrations
    name: str = field(init=False, default="train_labeler")

    def __post_init__(self) -> None:
        self.name = "train_labeler" if self.round == 1 else f"train_labeler_round{self.round}"

    @property
    def reads(self) -> dict[str, Any]:  # type: ignore[override]
        """Round 1 reads the Stage-1 windows of ``steps``, a later round the previous round's ``grounded_steps``."""
        return {**_NasvaTraining.reads, ("steps" if self.round == 1 else "grounded_steps"): list}

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        labels: dict[str, list[dict[str, Any]]] = {}
        narrs: dict[str, list[dict[str, Any]]] = {}
        rows = []
        for r in inputs.data.rows():
            if r["split"] != "train":
                continue  # heldout videos never train the labeler (docs/corpora/howtostep.md)
            if self.round == 1:
                items = [{"text": s["text"], "start": s["stage1_start"], "end": s["stage1_end"]}
                         for s in r["steps"] if s.get("stage1_start") is not None]
            else:
                items = [{"text": s["text"], "start": s["start"], "end": s["end"]} for s in r["grounded_steps"]]
            if not items:
                continue
            labels[r["video_id"]] = items
            if self.labeler_train_text == "steps+narrations":
                narrs[r["video_id"]] = [{"text": n["text"], "start": n["start"], "end": n["end"]}
                                        for n in r["narrations"]]
            rows.append(r)
        if not labels and self.round == 1:
            raise ConfigError("the NaSVA labeler has nothing to train on: no train-split video has a step above "
                              "epsilon1 (Stage 1). Lower --set epsilon1, add inputs, or use --set rounds=0")
        if not labels:  # Li et al., ECCV 2024, §3.3: round r trains on round r-1's kept steps
            raise ConfigError(f"the round-{self.round} NaSVA labeler has nothing to train on: round {self.round - 1} "
                              "kept no step of a train-split video (Stage 2 threshold). Lower the round-1 "
                              f"--set epsilon2, add inputs, or use --set rounds={self.round - 1}")
        return _train(inputs, self, f"round{self.round}", labels, narrs or None, rows)


def has_paired_text_tower(cfg: Any) -> bool:
    """Chen et al., ECCV 2024, §3.2.2 (S-V-short): a text tower paired with the per-second visual features exists for
    the simulated features (P·e(text)) and for CLIP features from the local model at ``vision_model_path`` (its
    ``get_text_features``: computed features, or feature files that the user declares to come from that model).
    ``cfg``: the corpus config or a stage with these two parameters."""
    return cfg.visual_features == "simulated" or bool(cfg.vision_model_path)


def require_mptva_pathways(cfg: Any) -> None:
    """Chen et al., ECCV 2024, §3.2.2: S-V-short needs a paired text tower (:func:`has_paired_text_tower`). Without it
    MPTVA fails before any training, unless ``mptva_allow_missing`` (the two other pathways averaged)."""
    if cfg.labeler == "mptva":
        check_mptva_pathways(cfg.visual_features, cfg.vision_model_path, cfg.mptva_allow_missing)


def check_mptva_pathways(visual_features: str | None, vision_model_path: str | None, allow_missing: bool) -> None:
    """:func:`require_mptva_pathways` for MPTVA's parameters."""
    if not (visual_features == "simulated" or vision_model_path) and not allow_missing:
        raise ConfigError(f"labeler=mptva with visual_features={visual_features}: the S-V-short pathway needs a "
                          "text tower paired with the visual features (Chen et al., ECCV 2024, §3.2.2): "
                          "use --set visual_features=simulated, "
                          "or give the CLIP model the features come from with --set vision_model_path=DIR, or "
                          "--set mptva_allow_missing=true to average S-N-V and S-V-long (recorded in provenance)")


@dataclass(eq=False, kw_only=True)
class MptvaLongModel(_NasvaTraining):
    """S-V-long (Chen et al., ECCV 2024, §3.2.2): ``mptva_long_model`` (a NaSVA checkpoint folder), else a NaSVA trained
    on the narrations of the ``train`` split (W only, ASR timestamps as labels); its sha256 goes into provenance.
    (A missing S-V-short pathway fails when the pipeline is assembled, before a long model is trained for nothing.)"""

    name = "mptva_long_model"
    version = "1"

    mptva_long_model: Path | None = input_path()

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        from ...nasva.data import default_text_cache

        if self.mptva_long_model:
            ckpt = Path(self.mptva_long_model)
            model = ckpt / "model.pt" if ckpt.is_dir() else ckpt
            return {"checkpoint": str(ckpt.resolve()), "sha256": _sha256(model),
                    "text_cache": str(Path(inputs.cache_dir) / "nasva_text.sqlite") if inputs.cache_dir
                    else str(default_text_cache()), "trained": False}
        narrs, rows = {}, []
        for r in inputs.data.rows():
            if r["split"] == "train" and r["narrations"]:
                narrs[r["video_id"]] = [{"text": n["text"], "start": n["start"], "end": n["end"]}
                                        for n in r["narrations"]]
                rows.append(r)
        if not narrs:
            raise ConfigError("MPTVA S-V-long: no train-split video with narrations to train the long-term model on; "
                              "give --set mptva_long_model=CKPT")
        return {**_train(inputs, self, "mptva_long", None, narrs, rows), "trained": True}
