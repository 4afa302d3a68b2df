"""The labelers that give every LLM step its window.

* ``two_stage`` (default, Li et al., ECCV 2024, §3.1-§3.3): Stage 1 (step -> narration -> time,
  ``ops.step_timestamps``), then a NaSVA labeler trained inside the build on the Stage-1 labels of the ``train`` split
  (``builders.nasva``; a global stage, seeded and resumable) re-grounds every parsed step (Stage 2); ``rounds`` 0-3
  (Table 9).
* ``mptva`` (Chen et al., ECCV 2024, §3.2.2): S-N-V, S-V-long (a NaSVA trained on the narrations when no checkpoint is
  given) and S-V-short pathways fused by ``ops.mptva.mptva_fuse``.
* ``llm_timestamps`` (Table 6 row 1): the LLM's own timestamps, ``end = start + delta_sec``.

Every step keeps its row; per-step drops go to ``dropped_steps`` (stage, reason, score), and
``require_grounded_steps`` finally drops the videos with no step left (``all_steps_dropped``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.records import Out, Row
from ...core.step import Requirement, Resources, Step, execution_setting, gpus_for_device
from .features import FEATURE_REF, load_row_features, text_encoder_requirements, vision_requirements
from .labeler import TORCH, check_mptva_pathways, has_paired_text_tower


#: rows per ``Grounder.matrices`` call of :class:`Stage2` (its forward passes take 8 videos each): bounds the
#: features held at once (a 1200 s video of 768-d features is 3.7 MB) in a shard of up to ``shard_size`` rows
GROUND_ROWS = 32


def _drop_step(row_drops: list[dict[str, Any]], step: dict[str, Any], stage: str, reason: str,
               score: float | None) -> None:
    row_drops.append({"step_index": step["step_index"], "chunk_index": step["chunk_index"], "text": step["text"],
                      "stage": stage, "reason": reason, "score": None if score is None else float(score)})


class PairedTextTower:
    """The text tower paired with the visual features, for MPTVA's S-V-short and ``step_video``: P·e(text)
    for simulated features, else the CLIP model at ``vision_model_path`` (``encode_texts``), loaded once.
    ``step``: a :class:`_TowerStep` (its visual-feature parameters)."""

    def __init__(self, step: _TowerStep):
        self.step = step
        self._clip = None

    def encode(self, row: Row, texts: list[str], g_emb: np.ndarray) -> np.ndarray | None:
        p = self.step
        if row["visual_features"] == "simulated":
            from ...ops.simulated_features import simulated_text_tower

            return simulated_text_tower(g_emb, dim=p.visual_dim, seed=0)
        if not has_paired_text_tower(p):
            return None
        if self._clip is None:
            from ...models.vision_encoder import make_vision_encoder

            self._clip = make_vision_encoder(p.visual_backbone, p.vision_model_path, p.vision_device)
        return self._clip.encode_texts(texts)


@dataclass(eq=False, kw_only=True)
class _TowerStep(Step):
    """What the stages that embed step texts share: the text encoder g and the visual features' parameters of the
    paired text tower (:class:`PairedTextTower`)."""

    id_field = "video_id"

    text_encoder: str                  # g (Li et al., ECCV 2024, §3.1)
    max_vlen: int                      # frames beyond it are not grounded (paper supp. §6.1: 1200 s)
    visual_features: str | None        # file | compute | simulated (the tower of simulated features is P·e(text))
    visual_dim: int
    visual_backbone: str
    vision_model_path: str | None      # the CLIP model the features come from: its text tower
    vision_device: str = execution_setting("cpu")

    def _tower_requirements(self) -> list[Requirement]:
        need = text_encoder_requirements(self.text_encoder)
        if self.visual_features != "simulated" and self.vision_model_path:
            need += vision_requirements(self.visual_backbone)
        return need


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    an = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    bn = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return an @ bn.T


def _t_eff(row: Row, max_vlen: int) -> int:
    return int(min(row["num_frames"], max_vlen))


@dataclass(eq=False, kw_only=True)
class Stage1(_TowerStep):
    """Li et al., ECCV 2024, §3.1 (``ops.step_timestamps.stage1_timestamps``): T_SN = softmax_n(g(S)·g(N)/nu), Y_SV =
    T_SN·Y_NV, centre, window grown with zeta, keep iff score >= epsilon1 (kept steps become the labeler's training
    labels)."""

    name = "stage1"
    version = "1"
    # each video's windows depend on its row alone (its features by content-named reference): a redone shard
    # processes only its changed videos, in one call (builders/core/row_reuse.py)
    row_wise = True
    row_wise_batch = True
    reads = {"video_id": str, "steps": list, "narrations": list, "visual_features": str, **FEATURE_REF}
    writes = {"steps": list}

    stage1_method: str                 # step_asr (paper default) | step_video (Table 3 "Step-Video")
    nu: float
    zeta: float
    epsilon1: float

    def missing_requirements(self) -> list[Requirement]:
        need = self._tower_requirements() if self.stage1_method == "step_video" else \
            text_encoder_requirements(self.text_encoder)
        return [r for r in need if r.missing()]

    def setup(self, state: Any) -> None:
        super().setup(state)
        from ...nasva.data import get_text_encoder

        self.g = get_text_encoder(self.text_encoder)
        self.tower = PairedTextTower(self)

    def process(self, rows: list[Row], out: Out) -> None:
        from threadpoolctl import threadpool_limits

        # small per-video matrix products: one BLAS thread each (bench_stage1: 2,144 vs <= 365 videos/s on 2 cores)
        with threadpool_limits(1, "blas"):
            self._process(rows, out)

    def _process(self, rows: list[Row], out: Out) -> None:
        from ...ops import step_timestamps as st

        for r in rows:
            out.item = r["video_id"]  # its counters are its own (row_wise_batch)
            steps, narr = r["steps"], r["narrations"]
            T = _t_eff(r, self.max_vlen)
            s_emb = self.g.encode([s["text"] for s in steps])
            starts = np.array([n["start"] for n in narr], dtype=np.float64)
            ends = np.array([n["end"] for n in narr], dtype=np.float64)
            if self.stage1_method == "step_video":
                tower = self.tower.encode(r, [s["text"] for s in steps], s_emb)
                if tower is None:
                    raise ValueError("stage1_method=step_video needs a text tower paired with the visual features "
                                     "(visual_features=simulated or vision_model_path)")
                frames = load_row_features(r, self.visual_dim)[:T]
                res = st.stage1_step_video(tower, frames, zeta=self.zeta, eps1=self.epsilon1)
            else:
                n_emb = self.g.encode([n["text"] for n in narr])
                res = st.stage1_timestamps(s_emb, n_emb, starts, ends, T, nu=self.nu, zeta=self.zeta,
                                           eps1=self.epsilon1)
                out.count("narration_beyond_video", int(res.beyond))
            new = []
            for k, s in enumerate(steps):
                keep = bool(res.keep[k])
                out.count("stage1_kept" if keep else "stage1_below_eps1")
                new.append({**s, "stage1_start": float(res.start[k]) if keep else None,
                            "stage1_end": float(res.end[k]) if keep else None,
                            "stage1_score": float(res.score[k])})
            out.keep({**r, "steps": new})


@dataclass(eq=False)
class Stage1Final(Step):
    """``rounds=0`` (Table 9 round 0): the Stage-1 windows are the final labels; steps below epsilon1 are dropped as
    ``stage1_below_eps1``."""

    name = "stage1_labels"
    id_field = "video_id"
    reads = {"video_id": str, "steps": list, "dropped_steps": list}
    writes = {"grounded_steps": list, "dropped_steps": list, "anchor": str}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            drops, kept = list(r["dropped_steps"]), []
            for s in r["steps"]:
                if s["stage1_start"] is None:
                    _drop_step(drops, s, "stage1", "stage1_below_eps1", s["stage1_score"])
                else:
                    kept.append({**s, "start": s["stage1_start"], "end": s["stage1_end"], "score": s["stage1_score"]})
            out.keep({**r, "grounded_steps": kept, "dropped_steps": drops, "anchor": "stage1_window"})


@dataclass(eq=False, kw_only=True)
class Stage2(Step):
    """Li et al., ECCV 2024, §3.3 (``ops.step_timestamps.stage2_timestamps``): the round's labeler grounds every parsed
    step in ``<step>`` mode; keep iff the cosine at t* >= epsilon2, anchor ``start`` with ``delta_sec`` (Table 8 best);
    rounds >= 2 use the Table 9 settings of ``round_settings`` (the pipeline gives each round its own)."""

    version = "1"
    id_field = "video_id"
    reads = {"video_id": str, "steps": list, "dropped_steps": list, "labeler": dict, **FEATURE_REF}
    writes = {"grounded_steps": list, "dropped_steps": list, "anchor": str, "labeler_sha256": str}
    requires = (TORCH,)

    round: int                         # the self-training round (Table 9): its stage is ``stage2_round<r>`` from 2
    epsilon2: float                    # the round's keep threshold on the cosine at t*
    anchor: str                        # start | centre | grown
    delta_sec: float | None            # the window's length from the anchor (None: grown with zeta)
    zeta: float
    max_vlen: int
    visual_dim: int
    nasva_text_encoder: str            # the labeler's text encoder (its package)
    labeler_device: str = execution_setting("cpu")
    name: str = field(init=False, default="stage2")

    def __post_init__(self) -> None:
        self.name = "stage2" if self.round == 1 else f"stage2_round{self.round}"

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.labeler_device))

    def missing_requirements(self) -> list[Requirement]:
        return [r for r in (*self.requires, *text_encoder_requirements(self.nasva_text_encoder)) if r.missing()]

    def setup(self, state: Any) -> None:
        super().setup(state)
        self._grounders: dict[str, Any] = {}

    def teardown(self) -> None:
        self._grounders = {}

    def grounder(self, ckpt: str, cache: str):
        if ckpt not in self._grounders:
            from ...nasva.infer import Grounder

            self._grounders[ckpt] = Grounder(ckpt, device=self.labeler_device, text_cache=cache)
        return self._grounders[ckpt]

    def process(self, rows: list[Row], out: Out) -> None:
        from ...ops.step_timestamps import stage2_timestamps

        eps, anchor, delta = self.epsilon2, self.anchor, self.delta_sec
        for r, A in zip(rows, self._matrices(rows)):
            steps = r["steps"]  # every parsed step, every round (Li et al., ECCV 2024, §3.3)
            res = stage2_timestamps(A, eps2=eps, anchor=anchor, delta=delta or 0.0, zeta=self.zeta)
            drops = [d for d in r["dropped_steps"] if not d["stage"].startswith("stage2")]  # an earlier round's
            kept = []
            for k, s in enumerate(steps):
                if res.keep[k]:
                    kept.append({**s, "start": float(res.start[k]), "end": float(res.end[k]),
                                 "score": float(res.score[k])})
                else:
                    _drop_step(drops, s, self.name, "stage2_below_eps2", res.score[k])
                    out.count("stage2_below_eps2")
            out.keep({**r, "grounded_steps": kept, "dropped_steps": drops, "anchor": anchor,
                      "labeler_sha256": r["labeler"]["sha256"]})

    def _matrices(self, rows: list[Row]) -> list[np.ndarray]:
        """A ``[K, T_eff]`` per row, in row order: the rows of one labeler checkpoint go through
        ``Grounder.matrices`` together, :data:`GROUND_ROWS` at a time (it batches videos with padding masks, and
        padding never changes A: ``builders.nasva.infer.predict_matrices``), not one video per call (issue 24: 1.5-3x
        the bare engine on 8 videos). Any error (a missing or bad feature file, features that do not fit the
        checkpoint) propagates as it did one video at a time: the runner then reruns the shard row by row and drops
        only the failing rows as ``step_error`` (``builders.core.runners._process_isolated``)."""
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            groups.setdefault(r["labeler"]["checkpoint"], []).append(i)
        mats: list[Any] = [None] * len(rows)
        for idx in groups.values():
            for a in range(0, len(idx), GROUND_ROWS):
                chunk = idx[a: a + GROUND_ROWS]
                for i, A in zip(chunk, self._ground([rows[i] for i in chunk])):
                    mats[i] = A
        return mats

    def _ground(self, rows: list[Row]) -> list[np.ndarray]:
        """One ``Grounder.matrices`` call on rows of one checkpoint (the grounder of the first row's text cache, as
        when it was loaded one row at a time: one grounder per checkpoint)."""
        lab = rows[0]["labeler"]
        g = self.grounder(lab["checkpoint"], lab["text_cache"])
        videos = [(load_row_features(r, self.visual_dim)[:_t_eff(r, self.max_vlen)], [s["text"] for s in r["steps"]])
                  for r in rows]
        return g.matrices(videos, mode="step", max_rows=self.max_vlen)


@dataclass(eq=False, kw_only=True)
class MptvaLabels(_TowerStep):
    """Chen et al., ECCV 2024, §3.2.2: A_mult = mean(A_SNV, A_long, A_short); k* = argmax; frames |t - k*| <= W
    positive; keep iff A_mult[k*] >= gamma (``mptva_below_gamma``). A missing pathway fails unless
    ``mptva_allow_missing``."""

    name = "mptva_labels"
    version = "1"
    reads = {"video_id": str, "steps": list, "narrations": list, "dropped_steps": list, "labeler": dict,
             "visual_features": str, **FEATURE_REF}
    writes = {"grounded_steps": list, "dropped_steps": list, "anchor": str, "labeler_sha256": str,
              "mptva_pathways": int}

    tau: float
    mptva_w: int
    mptva_gamma: float
    mptva_gamma_mode: str
    mptva_keep_ratio: float
    mptva_allow_missing: bool
    labeler_device: str = execution_setting("cpu")

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.labeler_device))

    def missing_requirements(self) -> list[Requirement]:
        return [r for r in (TORCH, *self._tower_requirements()) if r.missing()]

    def setup(self, state: Any) -> None:
        super().setup(state)
        from ...nasva.data import get_text_encoder

        # also when the long model's fit was cached
        check_mptva_pathways(self.visual_features, self.vision_model_path, self.mptva_allow_missing)
        self.g = get_text_encoder(self.text_encoder)
        self.tower = PairedTextTower(self)
        self._long = None

    def process(self, rows: list[Row], out: Out) -> None:
        from ...nasva.infer import Grounder
        from ...ops import step_timestamps as st
        from ...ops.mptva import mptva_fuse, snv_matrix

        for r in rows:
            steps, narr = r["steps"], r["narrations"]
            T = _t_eff(r, self.max_vlen)
            s_emb = self.g.encode([s["text"] for s in steps])
            n_emb = self.g.encode([n["text"] for n in narr])
            Y, beyond = st.narration_frame_matrix(np.array([n["start"] for n in narr]),
                                                  np.array([n["end"] for n in narr]), T)
            out.count("narration_beyond_video", int(beyond))
            a_snv = snv_matrix(s_emb, n_emb, Y, tau=self.tau)
            feats = load_row_features(r, self.visual_dim)[:T]
            if self._long is None:
                self._long = Grounder(r["labeler"]["checkpoint"], device=self.labeler_device,
                                      text_cache=r["labeler"]["text_cache"])
            a_long = self._long.matrices([(feats, [s["text"] for s in steps])], mode="step",
                                         max_rows=self.max_vlen)[0]
            tower = self.tower.encode(r, [s["text"] for s in steps], s_emb)
            a_short = None if tower is None else _cosines(tower, feats)  # S-V-short: cos(E_t(s_k), E_v(v_t))
            res = mptva_fuse(a_snv, a_long, a_short, W=self.mptva_w, gamma=self.mptva_gamma,
                             gamma_mode=self.mptva_gamma_mode, keep_ratio=self.mptva_keep_ratio,
                             allow_missing=self.mptva_allow_missing)
            drops, kept = list(r["dropped_steps"]), []
            for k, s in enumerate(steps):
                ps = [None if not np.isfinite(v) else float(v) for v in res.pathway_scores[k]]
                if res.keep[k]:
                    kept.append({**s, "start": float(res.start[k]), "end": float(res.end[k]),
                                 "score": float(res.score[k]), "pathway_scores": ps})
                else:
                    _drop_step(drops, s, self.name, "mptva_below_gamma", res.score[k])
                    out.count("mptva_below_gamma")
            out.keep({**r, "grounded_steps": kept, "dropped_steps": drops, "anchor": "mptva_window",
                      "labeler_sha256": r["labeler"]["sha256"], "mptva_pathways": 3 if a_short is not None else 2})


@dataclass(eq=False)
class LLMTimestampLabels(Step):
    """``labeler=llm_timestamps`` (Li et al., ECCV 2024, supp. Table 6 row 1, 19.6 R@1): the LLM's timestamp is
    ``start``, ``end = start + delta_sec``; no Stage 1/2; a step without one is dropped as ``no_llm_timestamp``."""

    name = "llm_timestamp_labels"
    id_field = "video_id"
    reads = {"video_id": str, "steps": list, "dropped_steps": list, "num_frames": int}
    writes = {"grounded_steps": list, "dropped_steps": list, "anchor": str}

    delta_sec: float
    max_vlen: int

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            T = _t_eff(r, self.max_vlen)
            drops, kept = list(r["dropped_steps"]), []
            for s in r["steps"]:
                t = s.get("llm_time")
                if t is None or not np.isfinite(t) or t < 0:
                    _drop_step(drops, s, self.name, "no_llm_timestamp", None)
                    continue
                start = float(min(t, T - 1))
                kept.append({**s, "start": start, "end": float(min(start + self.delta_sec, T - 1)), "score": None})
            out.keep({**r, "grounded_steps": kept, "dropped_steps": drops, "anchor": "llm_timestamp"})


@dataclass(eq=False)
class RequireGroundedSteps(Step):
    """A video with no step left is dropped as ``all_steps_dropped``; kept steps are sorted by
    (start, step_index) as in the released files (docs/corpora/howtostep.md, Outputs)."""

    name = "require_grounded_steps"
    id_field = "video_id"
    reads = {"video_id": str, "grounded_steps": list, "dropped_steps": list}
    writes = {"final_steps": list}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            steps = r["grounded_steps"] if "grounded_steps" in r else r["steps"]
            if not steps:
                out.drop(r["video_id"], "all_steps_dropped", f"{len(r['dropped_steps'])} steps dropped")
                continue
            final = sorted(steps, key=lambda s: (s["start"], s["step_index"]))
            out.count("final_steps", len(final))
            out.keep({**r, "final_steps": final})

