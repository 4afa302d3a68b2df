"""The HowToStep pipeline (docs/corpora/howtostep.md; Li et al., ECCV 2024, §3.2, supp. Table 6): one ``videos`` pipeline.

    read_metadata -> heldout_split -> transcribe (transcript or ASR) -> narrations (TAN cleaning, sentencification,
    language and length filters) -> llm_steps (10-sentence chunks, prompt, batched cached LLM, step parser) ->
    require_steps -> visual_features -> labeler stages (``grounding.py``) -> require_grounded_steps

Videos run in sorted-id order; every model request (ASR, LLM) is cached one by one in ``<work>/cache``, so changing a
threshold never re-runs a model. Steps that must know the build's cache folder are global stages whose ``fit`` only
names it (the fit is keyed by its input's digest, so it costs nothing on a rerun).
"""

from __future__ import annotations

from typing import Any, Iterator

from ...core.records import Count, Drop, Out, Row
from ...core.step import Pipeline, Source, Step
from ...sources import exclusions, howto100m
from .config import HowToStepConfig
from .grounding import grounding_steps
from .narrate import LLMSteps, Narrations, RequireSteps
from .transcribe import Transcribe


# ============================================================================ source (HowTo100M)
class HowTo100MSource(Source):
    """HowTo100M metadata (optionally restricted to an id list and a category), task names joined, duplicates dropped
    as ``duplicate_video_id`` (first kept), rows in sorted video-id order (docs/corpora/howtostep.md, Inputs)."""

    name = "read_metadata"
    version = "1"
    config_keys = ("videos", "tasks", "video_ids", "category_1", "limit")
    input_keys = ("videos", "tasks", "video_ids")

    def read(self) -> Iterator[Row | Drop | Count]:
        cfg = self.cfg
        tasks: dict[int, str] = {}
        if cfg.tasks:
            tasks, bad = howto100m.read_task_ids(cfg.tasks)
            yield from bad
        wanted: list[str] | None = None
        if cfg.video_ids:
            wanted = sorted(exclusions.read_exclusion_ids([cfg.video_ids]))
        rows: dict[str, Row] = {}
        if cfg.videos:
            for rec in howto100m.read_metadata(cfg.videos):
                if isinstance(rec, Drop):
                    yield rec
                    continue
                vid = rec["video_id"]
                if vid in rows:
                    yield Drop(vid, self.name, "duplicate_video_id", f"row {rec['_ord']} repeats an earlier row")
                    continue
                if cfg.category_1 and rec["category_1"] != cfg.category_1:
                    yield Drop(vid, self.name, "not_in_category", rec["category_1"])
                    continue
                task_id = rec.get("task_id")
                name = tasks.get(task_id, "") if task_id is not None else ""
                if task_id is not None and cfg.tasks and not name:
                    yield Count("unknown_task_id")
                rows[vid] = {"video_id": vid, "task_id": "" if task_id is None else str(task_id), "task_name": name,
                             "category_1": rec.get("category_1") or "", "category_2": rec.get("category_2") or ""}
        if wanted is not None:
            listed = set(wanted)
            for vid in sorted(set(rows) - listed):
                yield Drop(vid, self.name, "not_selected", "not in --video-ids")
            rows = {v: rows.get(v) or {"video_id": v, "task_id": "", "task_name": "", "category_1": "",
                                       "category_2": ""} for v in wanted}
        for n, vid in enumerate(sorted(rows)):
            if cfg.limit is not None and n >= cfg.limit:
                yield Count("beyond_limit", len(rows) - n)
                break
            yield rows[vid]


class HeldoutSplit(Step):
    """docs/corpora/howtostep.md, Inputs (``--exclude``): videos listed in an exclusion list go to ``heldout``
    (processed, never used to train the labeler)."""

    name = "heldout_split"
    id_field = "video_id"
    config_keys = ("exclude",)
    input_keys = ("exclude",)

    def setup(self, state: Any) -> None:
        self.heldout = exclusions.read_exclusion_ids(self.cfg.exclude) if self.cfg.exclude else set()

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            split = "heldout" if r["video_id"] in self.heldout else "train"
            out.count(f"split_{split}")
            out.keep({**r, "split": split})




def pipelines(cfg: HowToStepConfig, shard_size: int) -> list[Pipeline]:
    steps: list[Step] = [HeldoutSplit(cfg), Transcribe(cfg), Narrations(cfg), LLMSteps(cfg), RequireSteps(cfg)]
    steps += grounding_steps(cfg)
    return [Pipeline("videos", HowTo100MSource(cfg), steps, shard_size=shard_size)]


__all__ = ["pipelines", "HowTo100MSource", "HeldoutSplit"]
