"""The ShowHowTo pipeline (docs/corpora/showhowto.md; Souček et al., CVPR 2025, Sec. 3): one ``videos`` pipeline.

    read_manifest (+ HowTo100M metadata) -> probe -> transcribe (transcript or ASR) -> llm_filter -> length_gate
    -> llm_keysteps -> keyframe_alignment -> extract_images (images config only)

``gate_before_filter`` moves the length gate before the filter (saves LLM calls; filter statistics then cover only
the short videos). Every step is cached per shard and every model request one by one, so a killed build resumes.

Per-item inputs (README.md "Caching and resume"): a manifest row names its video file and its transcript file; ``probe``,
``transcribe``, ``keyframe_alignment`` and ``extract_images`` key each shard by the contents of the files its rows
read (:func:`transcribe.files_digest`), so editing one transcript or one video redoes the shards holding that video.
No stage is global in its data (the request-cache stages' ``fit`` only names the cache folder).
"""

from __future__ import annotations

from collections.abc import Iterator

from ...core.records import Count, Drop, Row
from ...core.step import Pipeline, Source, Step
from ...sources import howto100m
from .align import ExtractImages, KeyframeAlignment
from .config import ShowHowToConfig
from .llm_stages import LengthGate, LLMFilter, LLMKeySteps
from .transcribe import Probe, Transcribe


class ManifestSource(Source):
    """Manifest rows (docs/corpora/showhowto.md) joined with HowTo100M metadata (task id and name, categories; a video
    absent from it gets empty values and can only go to train)."""

    name = "read_manifest"
    version = "1"
    config_keys = ("manifest", "videos", "tasks", "limit")
    input_keys = ("manifest", "videos", "tasks")
    #: a row holds all the manifest and the metadata give its video (values and the paths of its files); the files
    #: themselves (video, transcript) key the shards of the steps that read them (their ``item_digest``). An edit of
    #: these inputs lists them again into the same folder, and only the shards whose rows changed are redone
    rows_carry_content = True

    def read(self) -> Iterator[Row | Drop | Count]:
        from ...sources.video_manifest import read_manifest

        cfg = self.cfg
        meta: dict[str, dict] = {}
        names: dict[int, str] = {}
        if cfg.tasks:
            names, bad = howto100m.read_task_ids(cfg.tasks)
            if bad:
                yield Count("malformed_task_row", len(bad))
        if cfg.videos:
            for rec in howto100m.read_metadata(cfg.videos):
                if isinstance(rec, Drop):  # a metadata row, not a work item: counted
                    yield Count("malformed_metadata_row")
                    continue
                meta.setdefault(rec["video_id"], rec)
        n = 0
        for rec in read_manifest(cfg.manifest):
            if isinstance(rec, Drop):
                yield rec
                continue
            if cfg.limit is not None and n >= cfg.limit:
                yield Count("beyond_limit")
                continue
            n += 1
            m = meta.get(rec["video_id"])
            task_id = m.get("task_id") if m else None
            if cfg.videos and m is None:
                yield Count("not_in_metadata")
            rec.pop("_line", None)
            # a video absent from the metadata gets nulls (and can only go to train)
            yield {**rec, "task_id": None if task_id is None else str(task_id),
                   "task": names.get(task_id) if task_id is not None else None,
                   "category_1": (m or {}).get("category_1") or None, "category_2": (m or {}).get("category_2") or None}


def pipelines(cfg: ShowHowToConfig, shard_size: int) -> list[Pipeline]:
    gate = [LengthGate(cfg)]
    head: list[Step] = [Probe(cfg), Transcribe(cfg)]
    llm: list[Step] = [*(gate if cfg.gate_before_filter else []), LLMFilter(cfg),
                       *([] if cfg.gate_before_filter else gate), LLMKeySteps(cfg)]
    tail: list[Step] = [KeyframeAlignment(cfg), ExtractImages(cfg)]
    return [Pipeline("videos", ManifestSource(cfg), [*head, *llm, *tail], shard_size=shard_size)]


__all__ = ["ManifestSource", "pipelines"]
