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

from typing import Any

import numpy as np

from ...core.records import Out, Row
from ...core.step import Step, gpus_for_device
from .features import VisualFeatures, load_row_features
from .labeler import LabelerTraining, MptvaLongModel, require_mptva_pathways


def _drop_step(row_drops: list[dict[str, Any]], step: dict[str, Any], stage: str, reason: str,
               score: float | None) -> None:
    row_drops.append({"step_index": step["step_index"], "chunk_index": step["chunk_index"], "text": step["text"],
                      "stage": stage, "reason": reason, "score": None if score is None else float(score)})


class PairedTextTower:
    """The text tower paired with the visual features, for MPTVA's S-V-short and ``step_video``: P·e(text)
    for simulated features, else the CLIP model at ``vision_model_path`` (``encode_texts``), loaded once."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self._clip = None

    def encode(self, row: Row, texts: list[str], g_emb: np.ndarray) -> np.ndarray | None:
        from .labeler import has_paired_text_tower

        if row["visual_features"] == "simulated":
            from ...ops.simulated_features import simulated_text_tower

            return simulated_text_tower(g_emb, dim=self.cfg.visual_dim, seed=0)
        if not has_paired_text_tower(self.cfg):
            return None
        if self._clip is None:
            from ...models.vision_encoder import make_vision_encoder

            self._clip = make_vision_encoder(self.cfg.visual_backbone, self.cfg.vision_model_path,
                                             self.cfg.vision_device)
        return self._clip.encode_texts(texts)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    an = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    bn = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return an @ bn.T


def _t_eff(row: Row, max_vlen: int) -> int:
    return int(min(row["num_frames"], max_vlen))


class Stage1(Step):
    """Li et al., ECCV 2024, §3.1 (``ops.step_timestamps.stage1_timestamps``): T_SN = softmax_n(g(S)·g(N)/nu), Y_SV =
    T_SN·Y_NV, centre, window grown with zeta, keep iff score >= epsilon1 (kept steps become the labeler's training
    labels)."""

    name = "stage1"
    version = "1"
    id_field = "video_id"
    uses_model = True
    config_keys = ("text_encoder", "stage1_method", "nu", "zeta", "epsilon1", "max_vlen", "visual_dim",
                   "vision_model_path", "visual_backbone")

    def setup(self, state: Any) -> None:
        super().setup(state)
        from ...nasva.data import get_text_encoder

        self.g = get_text_encoder(self.cfg.text_encoder)
        self.tower = PairedTextTower(self.cfg)

    def process(self, rows: list[Row], out: Out) -> None:
        from threadpoolctl import threadpool_limits

        # small per-video matrix products: one BLAS thread each (bench_stage1: 2,144 vs <= 365 videos/s on 2 cores)
        with threadpool_limits(1, "blas"):
            self._process(rows, out)

    def _process(self, rows: list[Row], out: Out) -> None:
        from ...ops import step_timestamps as st

        cfg = self.cfg
        for r in rows:
            steps, narr = r["steps"], r["narrations"]
            T = _t_eff(r, cfg.max_vlen)
            s_emb = self.g.encode([s["text"] for s in steps])
            starts = np.array([n["start"] for n in narr], dtype=np.float64)
            ends = np.array([n["end"] for n in narr], dtype=np.float64)
            if cfg.stage1_method == "step_video":
                tower = self.tower.encode(r, [s["text"] for s in steps], s_emb)
                if tower is None:
                    raise ValueError("stage1_method=step_video needs a text tower paired with the visual features "
                                     "(visual_features=simulated or vision_model_path)")
                frames = load_row_features(r, cfg.visual_dim)[:T]
                res = st.stage1_step_video(tower, frames, zeta=cfg.zeta, eps1=cfg.epsilon1)
            else:
                n_emb = self.g.encode([n["text"] for n in narr])
                res = st.stage1_timestamps(s_emb, n_emb, starts, ends, T, nu=cfg.nu, zeta=cfg.zeta, eps1=cfg.epsilon1)
                out.count("narration_beyond_video", int(res.beyond))
            new = []
            for k, s in enumerate(steps):
                keep = bool(res.keep[k])
                out.count("stage1_kept" if keep else "stage1_below_eps1")
                new.append({**s, "stage1_start": float(res.start[k]) if keep else None,
                            "stage1_end": float(res.end[k]) if keep else None,
                            "stage1_score": float(res.score[k])})
            out.keep({**r, "steps": new})


class Stage1Final(Step):
    """``rounds=0`` (Table 9 round 0): the Stage-1 windows are the final labels; steps below epsilon1 are dropped as
    ``stage1_below_eps1``."""

    name = "stage1_labels"
    id_field = "video_id"
    config_keys = ()

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            drops, kept = list(r["dropped_steps"]), []
            for s in r["steps"]:
                if s["stage1_start"] is None:
                    _drop_step(drops, s, "stage1", "stage1_below_eps1", s["stage1_score"])
                else:
                    kept.append({**s, "start": s["stage1_start"], "end": s["stage1_end"], "score": s["stage1_score"]})
            out.keep({**r, "grounded_steps": kept, "dropped_steps": drops, "anchor": "stage1_window"})


class Stage2(Step):
    """Li et al., ECCV 2024, §3.3 (``ops.step_timestamps.stage2_timestamps``): the round's labeler grounds every parsed
    step in ``<step>`` mode; keep iff the cosine at t* >= epsilon2, anchor ``start`` with ``delta_sec`` (Table 8 best);
    rounds >= 2 use the Table 9 settings of ``round_settings``."""

    version = "1"
    id_field = "video_id"
    uses_model = True

    def __init__(self, cfg: Any, round_: int = 1):
        super().__init__(cfg)
        self.round = round_
        self.name = "stage2" if round_ == 1 else f"stage2_round{round_}"
        self.config_keys = ("epsilon2", "anchor", "delta_sec", "zeta", "max_vlen", "visual_dim", "nasva_text_encoder")

    def gpus(self) -> float:
        return gpus_for_device(self.cfg.labeler_device)

    def setup(self, state: Any) -> None:
        super().setup(state)
        self._grounders: dict[str, Any] = {}

    def teardown(self) -> None:
        self._grounders = {}

    def grounder(self, ckpt: str, cache: str):
        if ckpt not in self._grounders:
            from ...nasva.infer import Grounder

            self._grounders[ckpt] = Grounder(ckpt, device=self.cfg.labeler_device, text_cache=cache)
        return self._grounders[ckpt]

    def settings(self) -> tuple[float, str, float | None]:
        if self.round == 1:
            return self.cfg.epsilon2, self.cfg.anchor, self.cfg.delta_sec
        from ...ops.step_timestamps import round_settings

        eps, anchor, delta = round_settings(self.round)
        return eps, anchor, delta

    def process(self, rows: list[Row], out: Out) -> None:
        from ...ops.step_timestamps import stage2_timestamps

        cfg = self.cfg
        eps, anchor, delta = self.settings()
        for r in rows:
            T = _t_eff(r, cfg.max_vlen)
            g = self.grounder(r["labeler"]["checkpoint"], r["labeler"]["text_cache"])
            steps = r["steps"]  # every parsed step, every round (Li et al., ECCV 2024, §3.3)
            feats = load_row_features(r, cfg.visual_dim)[:T]
            A = g.matrices([(feats, [s["text"] for s in steps])], mode="step", max_rows=cfg.max_vlen)[0]
            res = stage2_timestamps(A, eps2=eps, anchor=anchor, delta=delta or 0.0, zeta=cfg.zeta)
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


class MptvaLabels(Step):
    """Chen et al., ECCV 2024, §3.2.2: A_mult = mean(A_SNV, A_long, A_short); k* = argmax; frames |t - k*| <= W
    positive; keep iff A_mult[k*] >= gamma (``mptva_below_gamma``). A missing pathway fails unless
    ``mptva_allow_missing``."""

    name = "mptva_labels"
    version = "1"
    id_field = "video_id"
    uses_model = True
    config_keys = ("text_encoder", "tau", "mptva_w", "mptva_gamma", "mptva_gamma_mode", "mptva_keep_ratio",
                   "mptva_allow_missing", "max_vlen", "visual_dim", "vision_model_path", "visual_backbone")

    def gpus(self) -> float:
        return gpus_for_device(self.cfg.labeler_device)

    def setup(self, state: Any) -> None:
        super().setup(state)
        from ...nasva.data import get_text_encoder

        require_mptva_pathways(self.cfg)  # also when the long model's fit was cached
        self.g = get_text_encoder(self.cfg.text_encoder)
        self.tower = PairedTextTower(self.cfg)
        self._long = None

    def process(self, rows: list[Row], out: Out) -> None:
        from ...nasva.infer import Grounder
        from ...ops import step_timestamps as st
        from ...ops.mptva import mptva_fuse, snv_matrix

        cfg = self.cfg
        for r in rows:
            steps, narr = r["steps"], r["narrations"]
            T = _t_eff(r, cfg.max_vlen)
            s_emb = self.g.encode([s["text"] for s in steps])
            n_emb = self.g.encode([n["text"] for n in narr])
            Y, beyond = st.narration_frame_matrix(np.array([n["start"] for n in narr]),
                                                  np.array([n["end"] for n in narr]), T)
            out.count("narration_beyond_video", int(beyond))
            a_snv = snv_matrix(s_emb, n_emb, Y, tau=cfg.tau)
            feats = load_row_features(r, cfg.visual_dim)[:T]
            if self._long is None:
                self._long = Grounder(r["labeler"]["checkpoint"], device=cfg.labeler_device,
                                      text_cache=r["labeler"]["text_cache"])
            a_long = self._long.matrices([(feats, [s["text"] for s in steps])], mode="step", max_rows=cfg.max_vlen)[0]
            tower = self.tower.encode(r, [s["text"] for s in steps], s_emb)
            a_short = None if tower is None else _cosines(tower, feats)  # S-V-short: cos(E_t(s_k), E_v(v_t))
            res = mptva_fuse(a_snv, a_long, a_short, W=cfg.mptva_w, gamma=cfg.mptva_gamma,
                             gamma_mode=cfg.mptva_gamma_mode, keep_ratio=cfg.mptva_keep_ratio,
                             allow_missing=cfg.mptva_allow_missing)
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


class LLMTimestampLabels(Step):
    """``labeler=llm_timestamps`` (Li et al., ECCV 2024, supp. Table 6 row 1, 19.6 R@1): the LLM's timestamp is
    ``start``, ``end = start + delta_sec``; no Stage 1/2; a step without one is dropped as ``no_llm_timestamp``."""

    name = "llm_timestamp_labels"
    id_field = "video_id"
    config_keys = ("delta_sec", "max_vlen")

    def process(self, rows: list[Row], out: Out) -> None:
        cfg = self.cfg
        for r in rows:
            T = _t_eff(r, cfg.max_vlen)
            drops, kept = list(r["dropped_steps"]), []
            for s in r["steps"]:
                t = s.get("llm_time")
                if t is None or not np.isfinite(t) or t < 0:
                    _drop_step(drops, s, self.name, "no_llm_timestamp", None)
                    continue
                start = float(min(t, T - 1))
                kept.append({**s, "start": start, "end": float(min(start + cfg.delta_sec, T - 1)), "score": None})
            out.keep({**r, "grounded_steps": kept, "dropped_steps": drops, "anchor": "llm_timestamp"})


class RequireGroundedSteps(Step):
    """A video with no step left is dropped as ``all_steps_dropped``; kept steps are sorted by
    (start, step_index) as in the released files (docs/corpora/howtostep.md, Outputs)."""

    name = "require_grounded_steps"
    id_field = "video_id"
    config_keys = ()

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            steps = r["grounded_steps"] if "grounded_steps" in r else r["steps"]
            if not steps:
                out.drop(r["video_id"], "all_steps_dropped", f"{len(r['dropped_steps'])} steps dropped")
                continue
            final = sorted(steps, key=lambda s: (s["start"], s["step_index"]))
            out.count("final_steps", len(final))
            out.keep({**r, "final_steps": final})


def grounding_steps(cfg: Any) -> list[Step]:
    """The labeler's stages for ``cfg.labeler`` and ``cfg.rounds`` (docs/corpora/howtostep.md, Pipeline)."""
    steps: list[Step] = [VisualFeatures(cfg)]
    if cfg.labeler == "llm_timestamps":
        steps.append(LLMTimestampLabels(cfg))
    elif cfg.labeler == "mptva":
        steps += [MptvaLongModel(cfg), MptvaLabels(cfg)]
    else:
        steps.append(Stage1(cfg))
        if cfg.rounds == 0:
            steps.append(Stage1Final(cfg))
        for r in range(1, cfg.rounds + 1):
            steps += [LabelerTraining(cfg, r), Stage2(cfg, r)]
    steps.append(RequireGroundedSteps(cfg))
    return steps
