"""The ``showhowto`` release (docs/corpora/showhowto.md): configs ``sequences`` (default; ids,
timestamps and keyframe positions, no pixels) and ``images`` (``--with-images``), splits ``train`` / ``test`` by the
toolkit's split algorithm (or an official list), ``keyframes.json``, the statistics next to the paper's, and optionally
the upstream training layout.

    <out>/showhowto/README.md  {sequences,images}/<split>-*.parquet  keyframes.json
    <out>/showhowto/stats.json  drops.parquet  report.html  manifest.json  build_config.yaml
    <out>/showhowto/upstream/prompts.json  upstream/imgseqs/<sequence_id>.jpg        (--export-upstream)
"""

from __future__ import annotations

import functools
import importlib
import io
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__ as TOOLKIT_VERSION
from ...core.fingerprint import file_fingerprint
from ...core.orchestrate import BuildResult
from ...release.flow import ReleaseSpec, code_key, schema_files, write_release
from ...release.parts import ShardedRows, ShardedScan, scan_partials
from ...release.streaming import count_rows, write_json_object
from ...release.tallies import ReportTallies, Tally
from ...release import compare_with_paper, md_table, stats_tables
from .config import ShowHowToConfig
from .flags import PATH_KEYS

NAME = "showhowto"
CARD_TEMPLATE = Path(__file__).resolve().parents[3] / "cards" / "showhowto.md"
#: the loading script that defines the release's features, card and splits: imported only when the release is
#: written (it imports datasets, half a second), so that a cached rerun stays fast
SCHEMA = "loading_scripts.showhowto"
schema = functools.partial(importlib.import_module, SCHEMA)

#: the fields the release reads from each pipeline's output rows (``Corpus.RELEASE_READS``): checked against the
#: pipelines' row contracts before any work, and the only fields the release can read
RELEASE_READS: dict[str, dict[str, Any]] = {
    "videos": {"video_id": str, "task_id": Any, "task": Any, "category_1": Any, "category_2": Any, "title": str,
               "wikihow_title": str, "duration": Any, "mean_score": Any, "aligner": str, "steps": list,
               "images": list | None, "parse_repaired": bool | None, "asr_model": str | None},
}

#: Souček et al., CVPR 2025, Sec. 3.2, App. A: 1.24M videos -> 847K instructional (68.4 %) -> 578K sequences, 4.5M
#: steps, 7.7 ± 2.8 steps per sequence (97.6 % with 2-16), 11.4 ± 4.7 words per step, 25K tasks; 3,964 test sequences
#: from 200 tasks (Sec. 5.1)
PAPER_QUANTITIES: dict[str, float | None] = {
    "videos_in": 1_240_000, "judged_instructional": 847_000, "instructional_share": 0.684, "sequences": 578_000,
    "steps": 4_500_000, "steps_per_sequence_mean": 7.7, "steps_per_sequence_std": 2.8,
    "share_2_to_16_steps": 0.976, "words_per_step_mean": 11.4, "words_per_step_std": 4.7, "tasks": 25_000,
    "test_sequences": 3_964, "test_tasks": 200,
}
#: the report's corpus-specific charts: none, since steps per sequence and words per step are the report's own
#: "segments per video" and "words per step" charts (not drawn twice; their summaries stay in stats.json)
HISTOGRAMS: dict[str, str] = {}


def _f32(x: Any) -> float | None:
    return None if x is None else float(np.float32(x))


def _summary(t: Tally) -> dict[str, Any]:
    """Mean and std (ddof=0), min, max and the unit-bin histogram of a streamed distribution."""
    if not t.n:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None, "histogram": []}
    return {"n": t.n, "mean": round(float(t.mean), 3), "std": round(float(t.std), 3),
            "min": float(t.min), "max": float(t.max), "histogram": t.histogram()}


def sequence_row(r: dict[str, Any]) -> dict[str, Any]:
    return {"sequence_id": r["video_id"], "video_id": r["video_id"], "task_id": r["task_id"], "task": r["task"],
            "category_1": r["category_1"], "category_2": r["category_2"], "title": r["title"],
            "wikihow_title": r["wikihow_title"], "duration": _f32(r.get("duration")), "num_steps": len(r["steps"]),
            "mean_score": _f32(r.get("mean_score")), "aligner": r["aligner"],
            "steps": [{"instruction": s["instruction"], "start": _f32(s["start"]), "end": _f32(s["end"]),
                       "frame_time": _f32(s["frame_time"]), "start_sec": int(s["start_sec"]),
                       "frame_idx": int(s["frame_idx"]), "score": _f32(s["score"])} for s in r["steps"]]}


#: the columns of the kept sequences the statistics and the split read (``images`` too with the images config)
SCAN_COLUMNS = ["video_id", "task_id", "category_1", "steps", "mean_score", "aligner", "parse_repaired", "asr_model",
                "duration"]


def split_record(rec: tuple) -> dict[str, Any]:
    """A scan record ``(video_id, task_id, category_1, num_steps, mean_score)`` as ``ops.showhowto_split`` reads it."""
    vid, task, cat, n, score = rec
    return {"sequence_id": vid, "task_id": task or None, "category_1": cat, "num_steps": n, "mean_score": score}


def test_ids(cfg: ShowHowToConfig, records: Callable[[], Iterable[tuple]]) -> tuple[set[str], dict[str, Any], int]:
    """The official list when given, else the toolkit's split algorithm (``ops.showhowto_split``): the test ids, what
    the split records of itself (``stats.json``) and how many tasks the test sequences come from. ``records``
    returns a fresh stream of scan records (:func:`split_record`) each time it is called (read at most twice)."""
    if cfg.test_list:
        from ...sources.exclusions import read_exclusion_ids

        listed = read_exclusion_ids([cfg.test_list])
        ids, tasks = set(), set()
        for vid, task, *_ in records():
            if vid in listed:
                ids.add(vid)
                tasks.add(task)
        return ids, {"method": "official list", "listed": len(listed), "found": len(ids)}, len(tasks)
    from ...ops.showhowto_split import plan_test_split

    scored = False

    def recs() -> Iterator[dict[str, Any]]:
        nonlocal scored
        for rec in records():
            scored = scored or rec[4] is not None
            yield split_record(rec)

    plan = plan_test_split(recs, test_tasks=cfg.test_tasks, min_task_seqs=cfg.min_task_seqs,
                           test_size=cfg.test_size, seed=cfg.seed)
    info = {"method": "toolkit algorithm", "test_tasks": cfg.test_tasks, "min_task_seqs": cfg.min_task_seqs,
            "test_size": cfg.test_size, "seed": cfg.seed, "candidate_tasks": plan.candidates,
            "tasks_per_category": {c: len(t) for c, t in plan.tasks.items()}, "paper_like": scored}
    return set(plan.test_ids), info, plan.test_task_count


def fold_sequences(rows: list[dict[str, Any]], with_images: bool = False) -> dict[str, Any]:
    """One work shard of the kept sequences folded: the split's records (five small fields a sequence), the
    statistics' distributions and counts, the report's distributions (``ReportTallies``)."""
    out: dict[str, Any] = {
        "records": [], "steps_per_sequence": Tally(bins=(30, 0, 30)), "words_per_step": Tally(bins=(40, 0, 40)),
        "mean_score": Tally(resolution=1e-4, bins=(1, 0, 1)), "share_2_to_16": 0, "tasks": set(),
        "aligners": Counter(), "parse_repaired": 0, "asr_used": set(), "images_failed": 0, "report": ReportTallies()}
    for r in rows:
        n = len(r["steps"])
        out["records"].append((r["video_id"], r["task_id"], r["category_1"], n, _f32(r.get("mean_score"))))
        out["steps_per_sequence"].add(n)
        out["share_2_to_16"] += 2 <= n <= 16
        out["words_per_step"].extend(len(s["instruction"].split()) for s in r["steps"])
        out["mean_score"].add(r.get("mean_score"))
        if r["task_id"]:
            out["tasks"].add(r["task_id"])
        out["aligners"][r["aligner"]] += 1
        out["parse_repaired"] += bool(r.get("parse_repaired"))
        if r.get("asr_model"):
            out["asr_used"].add(r["asr_model"])
        if with_images:
            out["images_failed"] += r.get("images") is None
        out["report"].add({"duration": r.get("duration"), "segments": [
            {"start": s["start"], "end": s["end"], "text": s["instruction"]} for s in r["steps"]]})
    return out


@dataclass
class ShowHowToScan:
    """The kept sequences' partials (:func:`fold_sequences`, one a work shard, cached beside the shards:
    ``release/parts.py``) merged: the statistics' distributions and counts, never the rows. ``records()`` streams
    the split's records again from the cached partials, one shard at a time."""

    partials: Callable[[], Iterator[dict[str, Any]]]
    steps_per_sequence: Tally = field(default_factory=lambda: Tally(bins=(30, 0, 30)))
    words_per_step: Tally = field(default_factory=lambda: Tally(bins=(40, 0, 40)))
    mean_score: Tally = field(default_factory=lambda: Tally(resolution=1e-4, bins=(1, 0, 1)))
    share_2_to_16: int = 0
    tasks: set[str] = field(default_factory=set)
    aligners: Counter = field(default_factory=Counter)
    parse_repaired: int = 0
    asr_used: set[str] = field(default_factory=set)
    images_failed: int = 0
    report: ReportTallies = field(default_factory=ReportTallies)

    @classmethod
    def of(cls, partials: Callable[[], Iterator[dict[str, Any]]]) -> ShowHowToScan:
        out = cls(partials)
        for p in partials():
            for k in ("steps_per_sequence", "words_per_step", "mean_score", "report"):
                getattr(out, k).merge(p[k])
            for k in ("share_2_to_16", "parse_repaired", "images_failed"):
                setattr(out, k, getattr(out, k) + p[k])
            out.tasks |= p["tasks"]
            out.asr_used |= p["asr_used"]
            out.aligners.update(p["aligners"])
        return out

    def records(self) -> Iterator[tuple]:
        for p in self.partials():
            yield from p["records"]

    def test_by_shard(self, test: set[str]) -> dict[int, list[str]]:
        """The test ids of each work shard that holds any (what keys that shard's release parts)."""
        out = {}
        for i, p in enumerate(self.partials()):
            ids = sorted(rec[0] for rec in p["records"] if rec[0] in test)
            if ids:
                out[i] = ids
        return out


def statistics(result: BuildResult, sc: ShowHowToScan, answers: Counter, split_info: dict[str, Any],
               test: set[str], test_task_count: int) -> dict[str, Any]:
    """Statistics of this run (as Souček et al., CVPR 2025, Sec. 3.2 reports them) (steps per sequence, words per step
    with ddof=0 std, histograms), the filter's answers (``answers``: of the videos the filter kept), drops by reason and
    the split."""
    src = result.steps["read_manifest"]
    drops = result.drop_counts()
    judged = (sum(result.steps["llm_filter"].dropped.get(k, 0) for k in ("filtered_non_instructional",
                                                                          "filter_ambiguous"))
              + result.steps["llm_filter"].kept) if "llm_filter" in result.steps else 0
    kept = sc.steps_per_sequence.n
    return {
        "videos": {"in": src.kept + sum(src.dropped.values()), "kept": kept, "dropped": dict(sorted(drops.items()))},
        "filter": {"judged": judged, "yes": answers.get("yes", 0),
                   "no": int(drops.get("filtered_non_instructional", 0)) + answers.get("no", 0),
                   "ambiguous": int(drops.get("filter_ambiguous", 0)) + answers.get("ambiguous", 0),
                   "accepted_ambiguous": answers.get("ambiguous", 0), "kept_despite_no": answers.get("no", 0)},
        "steps": {"total": sc.words_per_step.n},
        "steps_per_sequence": _summary(sc.steps_per_sequence),
        "share_2_to_16_steps": round(sc.share_2_to_16 / kept, 4) if kept else None,
        "words_per_step": _summary(sc.words_per_step),
        "tasks": len(sc.tasks),
        "aligners": dict(sc.aligners),
        "mean_score": _summary(sc.mean_score) if sc.mean_score.n else None,
        "parse_repaired": sc.parse_repaired,
        "split": {**split_info, "test_sequences": len(test), "train_sequences": kept - len(test),
                  "test_task_count": test_task_count},
        "stage_seconds": {n: round(st.wall_seconds, 2) for n, st in result.steps.items()},
    }


def quantities(hs: dict[str, Any], sample: bool) -> dict[str, dict[str, Any]]:
    judged = hs["filter"]["judged"]
    value = {"videos_in": hs["videos"]["in"], "judged_instructional": hs["filter"]["yes"]
             + hs["filter"]["accepted_ambiguous"],
             "instructional_share": round((hs["filter"]["yes"] + hs["filter"]["accepted_ambiguous"]) / judged, 4)
             if judged else None,
             "sequences": hs["videos"]["kept"], "steps": hs["steps"]["total"],
             "steps_per_sequence_mean": hs["steps_per_sequence"]["mean"],
             "steps_per_sequence_std": hs["steps_per_sequence"]["std"], "share_2_to_16_steps": hs["share_2_to_16_steps"],
             "words_per_step_mean": hs["words_per_step"]["mean"], "words_per_step_std": hs["words_per_step"]["std"],
             "tasks": hs["tasks"], "test_sequences": hs["split"]["test_sequences"],
             "test_tasks": hs["split"]["test_task_count"]}
    cause = ("sample build: a dozen project-written videos and a 135M-parameter CPU LLM" if sample
             else "check the LLM (paper: Llama-3.1-8B-Instruct), the ASR and the inputs")
    return compare_with_paper(value, PAPER_QUANTITIES, cause)


def _imgseq(images: list[bytes], quality: int) -> bytes:
    """Upstream training layout (``soCzech/ShowHowTo``): the step frames concatenated left to right (heights equalised
    to the first)."""
    from PIL import Image

    frames = [Image.open(io.BytesIO(b)).convert("RGB") for b in images]
    h = frames[0].height
    frames = [f if f.height == h else f.resize((max(1, round(f.width * h / f.height)), h)) for f in frames]
    canvas = Image.new("RGB", (sum(f.width for f in frames), h))
    x = 0
    for f in frames:
        canvas.paste(f, (x, 0))
        x += f.width
    buf = io.BytesIO()
    canvas.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def models_info(cfg: ShowHowToConfig, asr_used: set[str]) -> dict[str, Any]:
    import importlib.metadata as md

    from ...models.llm import make_llm
    from .llm_stages import llm_settings
    from .prompts import FILTER_PROMPT_ID, KEYSTEPS_PROMPT_ID, load_prompt

    def ver(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    used = sorted(asr_used)
    fp = load_prompt(FILTER_PROMPT_ID, cfg.filter_prompt_template)
    kp = load_prompt(KEYSTEPS_PROMPT_ID, cfg.prompt_template)
    aligner = cfg.effective_aligner
    return {
        "llm": {**make_llm(llm_settings(cfg)).info(), "prompt_format": cfg.prompt_format,
                "filter_max_tokens": cfg.filter_max_tokens, "keysteps_max_tokens": cfg.keysteps_max_tokens,
                "constrained_json": cfg.constrained_json},
        "prompts": {"filter": f"{fp.id}@{fp.version}", "keysteps": f"{kp.id}@{kp.version}"},
        "asr": {"backend": cfg.asr, "model_id": ", ".join(used) or "not used (every kept video had a transcript)",
                "faster-whisper": ver("faster-whisper")},
        "aligner": {"aligner": aligner, "requested": cfg.aligner, "fps": cfg.fps, "epsilon": cfg.epsilon,
                    "model": (f"{cfg.clip_backend}:{cfg.clip_arch if cfg.clip_backend == 'open_clip' else ''}"
                              f"{Path(cfg.clip_model_path).name}" if aligner == "clip" and cfg.clip_model_path
                              else "none (middle frames)")},
    }


def card_context(stats: dict[str, Any], man: dict[str, Any], cfg: ShowHowToConfig,
                 hs: dict[str, Any]) -> dict[str, str]:
    m = man["models"]
    middle = hs["aligners"].get("middle", 0)
    return {
        **stats_tables(stats),
        "models_table": md_table(["role", "setting", "value"],
                                 [[role, k, v] for role, d in m.items() for k, v in d.items()
                                  if not isinstance(v, (list, dict))]),
        "aligner_banner": (f"> **Keyframes of {middle} of {hs['videos']['kept']} sequences were chosen by the `middle` "
                           "aligner** (the frame nearest "
                           "each step's midpoint, order kept; no CLIP weights were configured). The paper's Table 3 "
                           "shows this HowToStep-style selection trains a clearly weaker model (SF 0.39 vs 0.52). The "
                           "`aligner` column names the aligner of every row, and `score` is null for those rows.\n"
                           if middle else ""),
        "filter_prompt": m["prompts"]["filter"], "keysteps_prompt": m["prompts"]["keysteps"],
        "llm": m["llm"]["model_id"], "prompt_format": cfg.prompt_format, "aligner": m["aligner"]["aligner"],
        "aligner_model": m["aligner"]["model"], "epsilon": str(cfg.epsilon), "fps": str(cfg.fps),
        "keyframe_method": (
            "the frame nearest each interval's midpoint, order kept (aligner `middle`: no CLIP weights were configured; "
            "the paper's dynamic programme over CLIP similarities runs with `--set aligner=clip`)."
            if m["aligner"]["aligner"] == "middle" else
            "chosen by a dynamic programme that keeps the steps' order and maximises the total CLIP similarity "
            f"(aligner `{m['aligner']['aligner']}`, model {m['aligner']['model']}; Souček et al., CVPR 2025, App. A)."),
        "min_steps": str(cfg.min_steps), "on_ambiguous": cfg.on_ambiguous,
        "filter_mode_note": ("**In this build the filter's answers were recorded but not applied** (`filter_mode="
                             f"record`: {hs['filter']['kept_despite_no']} videos answered No were kept)."
                             if cfg.filter_mode == "record" else ""),
        "constrained_note": (f"decoded under the target JSON shape with at most {cfg.constrained_max_steps} steps, "
                             + ("vLLM structured outputs" if cfg.llm == "vllm" else "regex-guided greedy decoding")
                             if cfg.constrained_json else "free decoding"),
        "split_method": hs["split"]["method"] + ("" if hs["split"].get("paper_like", True) else
                                                 " (no alignment scores: ranked by sequence id, not paper-like)"),
        "sequences": str(hs["videos"]["kept"]), "steps_mean": str(hs["steps_per_sequence"]["mean"]),
        "steps_std": str(hs["steps_per_sequence"]["std"]), "words_mean": str(hs["words_per_step"]["mean"]),
        "words_std": str(hs["words_per_step"]["std"]),
        "toolkit_version": TOOLKIT_VERSION, "git_commit": str(man["git_commit"]),
        "sample_note": ("This release was built from the **bundled project-written sample** (a dozen generated test "
                        "videos with project-written transcripts, SmolLM2-135M on CPU); its numbers are not "
                        "comparable to the paper's." if man["sample"]
                        else "Built from the inputs listed in `manifest.json`."),
    }


def release(result: BuildResult, cfg: ShowHowToConfig, out_dir: Path,
            info: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The ``sequences`` (and ``images``) configs, ``keyframes.json`` and the upstream layout, through the core's
    release flow. The configs are written from per-work-shard release parts (``release/parts.py``), the statistics
    and the split from per-work-shard scan partials: an edit remakes the parts and partials of the shards it
    recomputed, and of the shards whose rows the split moved (one, for one edited video: docs/corpora/showhowto.md
    "Test split")."""
    kept = result.outputs["videos"]
    if cfg.test_list:  # read by the release alone (no step): its contents key the release and the manifest lists it
        result.input_fingerprints.setdefault("release/test_list", [file_fingerprint(cfg.test_list)])
    code = functools.cache(lambda: code_key(spec))
    columns = [*SCAN_COLUMNS, *(["images"] if cfg.with_images else [])]
    seq_scan = ShardedScan(kept, "sequences", functools.partial(fold_sequences, with_images=cfg.with_images),
                           key={"with_images": cfg.with_images}, columns=columns)
    sc = functools.cache(lambda: ShowHowToScan.of(lambda: scan_partials(seq_scan, code())))

    @functools.cache
    def split() -> tuple[set[str], dict[str, Any], int]:
        return test_ids(cfg, sc().records) if sc().steps_per_sequence.n else (set(), {"method": "none"}, 0)

    by_shard = functools.cache(lambda: sc().test_by_shard(split()[0]))

    @functools.cache
    def hs() -> dict[str, Any]:
        answers: Counter = Counter()
        if "llm_filter" in result.steps:
            for part in scan_partials(ShardedScan(result.stage("llm_filter"), "filter_answers", _fold_answers,
                                                  columns=["filter_answer"]), code()):
                answers.update(part)
        out = statistics(result, sc(), answers, split()[1], split()[0], split()[2])
        out["images"] = {"config": cfg.with_images, "frame_extraction_failed": sc().images_failed}
        return out

    seq_cols = ["video_id", "task_id", "task", "category_1", "category_2", "title", "wikihow_title", "duration",
                "mean_score", "aligner", "steps"]

    def split_of(video_id: str) -> str:
        return "test" if video_id in split()[0] else "train"

    def sequence_pairs(rows: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
        return ((split_of(r["video_id"]), sequence_row(r)) for r in rows)

    def image_row(r: dict[str, Any]) -> dict[str, Any]:
        s = sequence_row(r)
        return {**s, "images": [{"bytes": b, "path": f"{s['sequence_id']}_{i}.jpg"} for i, b in enumerate(r["images"])]}

    def image_pairs(rows: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
        return ((split_of(r["video_id"]), image_row(r)) for r in rows if r.get("images"))

    kf_scan = ShardedScan(kept, "keyframes", _fold_keyframes, columns=["video_id", "steps"])

    def keyframes(path: Path) -> None:
        """``keyframes.json`` from its per-work-shard pieces (cached like the parts: an edit makes one again), the
        bytes ``write_json_object(path, items, indent=1, ensure_ascii=True)`` writes."""
        with open(path, "w", encoding="utf-8") as f:
            n = 0
            for piece in scan_partials(kf_scan, code()):
                for text in piece:
                    f.write(("{\n" if not n else ",\n") + text)
                    n += 1
            f.write("{}" if not n else "\n}")

    def upstream(folder: Path) -> None:
        """Upstream training layout: ``prompts.json`` and ``imgseqs/<sequence_id>.jpg`` of the sequences with images."""
        def image_rows() -> Iterator[dict[str, Any]]:
            return (image_row(r) for r in kept.rows([*seq_cols, "images"]) if r.get("images"))

        items = (next(iter(schema().to_upstream_prompts([s]).items())) for s in image_rows())
        folder.mkdir(parents=True, exist_ok=True)
        if not write_json_object(folder / "prompts.json", items, indent=1):
            shutil.rmtree(folder)
            return
        for s in image_rows():
            path = folder / "imgseqs" / f"{s['sequence_id']}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_imgseq([im["bytes"] for im in s["images"]], cfg.jpeg_quality))

    def stats_extra() -> dict[str, Any]:
        return {"showhowto": hs(), "quantities": quantities(hs(), info["sample"]),
                "histograms": {title: hs()[key]["histogram"] for key, title in HISTOGRAMS.items()
                               if hs()[key]["histogram"]}}

    spec = ReleaseSpec(
        corpus=NAME, title="ShowHowTo", report_title="ShowHowTo build report", features=lambda: schema().FEATURES,
        card=lambda: schema().CARD, card_template=CARD_TEMPLATE,
        split_order=("train", "test"), rows={}, models=lambda: models_info(cfg, sc().asr_used),
        stats_extra=stats_extra, card_context=lambda stats, man: card_context(stats, man, cfg, hs()),
        report_videos=lambda: sc().report, path_keys=PATH_KEYS,
        key_files=(Path(__file__).resolve(), *schema_files(SCHEMA)))
    if not count_rows(kept):
        spec.empty = "no sequence survived the pipeline"
        return write_release(result, cfg, out_dir, info, spec)
    # a work shard's part is keyed by its row digest and by the test ids among its rows (the split is global)
    def test_of_shard(i: int) -> list[str]:
        return by_shard().get(i, [])

    spec.rows = {"sequences": ShardedRows(kept, sequence_pairs, columns=seq_cols, shard_key=test_of_shard)}
    if cfg.with_images:
        spec.rows["images"] = ShardedRows(kept, image_pairs, columns=[*seq_cols, "images"], shard_key=test_of_shard)
        if cfg.export_upstream:
            spec.files["upstream"] = upstream
    spec.files["keyframes.json"] = keyframes
    return write_release(result, cfg, out_dir, info, spec)


def _fold_keyframes(rows: list[dict[str, Any]]) -> list[str]:
    """One work shard's items of ``keyframes.json`` as JSON text (``{sequence_id: [{start_sec, frame_idx}, ...]}``,
    indent 1, ASCII), without the braces."""
    import json

    by_id = schema().keyframes_json([{"sequence_id": r["video_id"], "steps": r["steps"]} for r in rows])
    return [json.dumps({k: v}, indent=1, ensure_ascii=True)[2:-2] for k, v in by_id.items()]


def _fold_answers(rows: list[dict[str, Any]]) -> Counter:
    """The filter's answers of one work shard of ``llm_filter`` (the videos it kept)."""
    return Counter(r["filter_answer"] for r in rows)
