"""The ShowHowTo pipeline (docs/corpora/showhowto.md; Souček et al., CVPR 2025, Sec. 3): one ``videos`` pipeline, the
corpus config mapped onto the steps.

    read_manifest (+ HowTo100M metadata) -> probe -> transcribe (transcript or ASR) -> llm_filter -> length_gate
    -> llm_keysteps -> keyframe_alignment -> extract_images (images config only)

``gate_before_filter`` moves the length gate before the filter (saves LLM calls; filter statistics then cover only
the short videos). Every step is cached per shard and every model request one by one, so a killed build resumes.

Per-item inputs (README.md "Caching and resume"): a manifest row names its video file and its transcript file;
``probe``, ``transcribe``, ``keyframe_alignment`` and ``extract_images`` key each shard by the contents of the files
its rows read (:func:`transcribe.files_digest`), so editing one transcript or one video redoes the shards holding
that video, and inside them the row-wise steps redo that video alone. No stage is global in its data (the
request-cache stages' ``fit`` only names the cache folder).

Shards (docs/corpora/showhowto.md, "Shards, batching and caching"): the manifest is cut after each video whose id
hashes to a boundary (one id in ``shard_size``), not every ``shard_size`` rows, so inserting or removing a manifest
row changes the one shard that holds it and every later shard keeps its rows (and its cached outputs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...core.records import Count, Drop, Row
from ...core.step import Pipeline, Source, Step, input_path
from ...sources import howto100m
from ...sources.video_manifest import read_manifest
from .align import ExtractImages, KeyframeAlignment
from .config import ShowHowToConfig
from .llm_stages import LengthGate, LLMFilter, LLMKeySteps
from .transcribe import Probe, Transcribe

#: videos per work shard on average (``--shard-size``): 20,000 videos make about 40 shards, under 0.05 work files a
#: video, and a shard holds enough prompts for the LLM engine's batches (``llm_batch_size``; the paper preset's vLLM
#: batch is as large). A shard's rows are in memory at once: at most ``MAX_SHARD_FACTOR`` times this
DEFAULT_SHARD_SIZE = 512
#: the bundled sample's 4-video shards, so that its kill-and-resume tests have shards to resume (as HowToStep's 8)
SAMPLE_SHARD_SIZE = 4
#: a shard ends after this many times ``shard_size`` records even without a boundary id (a run of ids without one,
#: probability e^-4 a shard): it bounds a shard's memory; such a cut is by position until the next boundary id
MAX_SHARD_FACTOR = 4


def is_boundary(item_id: str, shard_size: int) -> bool:
    """Whether a shard ends after the video ``item_id``: its id's sha256, as a number, is a multiple of
    ``shard_size`` (one id in ``shard_size``; every id when it is 1). Independent of the row's position."""
    return int.from_bytes(hashlib.sha256(str(item_id).encode("utf-8")).digest()[:8], "big") % shard_size == 0


@dataclass(eq=False)
class ManifestSource(Source):
    """Manifest rows (docs/corpora/showhowto.md) joined with HowTo100M metadata (task id and name, categories; a video
    absent from it gets empty values and can only go to train). ``limit``: the first N manifest rows only."""

    name = "read_manifest"
    version = "1"
    writes = {"video_id": str, "video_path": str, "title": str, "transcript_path": Any, "task_id": Any, "task": Any,
              "category_1": Any, "category_2": Any}
    #: a row holds all the manifest and the metadata give its video (values and the paths of its files); the files
    #: themselves (video, transcript) key the shards of the steps that read them (their ``item_digest``). An edit of
    #: these inputs lists them again into the same folder, and only the shards whose rows changed are redone
    rows_carry_content = True

    manifest: str | None = input_path()
    videos: str | None = input_path()
    tasks: str | None = input_path()
    limit: int | None = None

    def read(self) -> Iterator[Row | Drop | Count]:
        meta: dict[str, dict] = {}
        names: dict[int, str] = {}
        if self.tasks:
            names, bad = howto100m.read_task_ids(self.tasks)
            if bad:
                yield Count("malformed_task_row", len(bad))
        if self.videos:
            for rec in howto100m.read_metadata(self.videos):
                if isinstance(rec, Drop):  # a metadata row, not a work item: counted
                    yield Count("malformed_metadata_row")
                    continue
                meta.setdefault(rec["video_id"], rec)
        n = 0
        for rec in read_manifest(self.manifest):
            if isinstance(rec, Drop):
                yield rec
                continue
            if self.limit is not None and n >= self.limit:
                yield Count("beyond_limit")
                continue
            n += 1
            m = meta.get(rec["video_id"])
            task_id = m.get("task_id") if m else None
            if self.videos and m is None:
                yield Count("not_in_metadata")
            rec.pop("_line", None)
            # a video absent from the metadata gets nulls (and can only go to train)
            yield {**rec, "task_id": None if task_id is None else str(task_id),
                   "task": names.get(task_id) if task_id is not None else None,
                   "category_1": (m or {}).get("category_1") or None, "category_2": (m or {}).get("category_2") or None}

    def ends_shard(self, record: Row | Drop, size: int, shard_size: int) -> bool:
        """A shard ends after a video whose id is a boundary (:func:`is_boundary`), or at ``MAX_SHARD_FACTOR`` times
        ``shard_size`` records."""
        item_id = record.item_id if isinstance(record, Drop) else record["video_id"]
        return size >= MAX_SHARD_FACTOR * shard_size or is_boundary(item_id, shard_size)


def steps(cfg: ShowHowToConfig) -> list[Step]:
    """The steps in run order, each given the config keys whose value changes its output (and its execution
    settings): stage 1 (probe, transcript or ASR), the LLM filter and length gate, the LLM key steps, the keyframe
    alignment and the images (Souček et al., CVPR 2025, Sec. 3)."""
    llm = dict(llm=cfg.llm, llm_model_path=cfg.llm_model_path, llm_replay=cfg.llm_replay,
               prompt_format=cfg.prompt_format, llm_temperature=cfg.llm_temperature, llm_n_ctx=cfg.llm_n_ctx,
               llm_max_model_len=cfg.llm_max_model_len, seed=cfg.seed, backend_max_tokens=cfg.keysteps_max_tokens,
               llm_batch_size=cfg.llm_batch_size, llm_device=cfg.llm_device)
    gate = [LengthGate(max_duration=cfg.max_duration)]
    return [
        Probe(),
        Transcribe(asr=cfg.asr, asr_model_path=cfg.asr_model_path, asr_align_model_path=cfg.asr_align_model_path,
                   asr_compute_type=cfg.asr_compute_type, asr_batch_size=cfg.asr_batch_size,
                   asr_language=cfg.asr_language, any_language=cfg.any_language, asr_device=cfg.asr_device),
        *(gate if cfg.gate_before_filter else []),
        LLMFilter(**llm, max_tokens=cfg.filter_max_tokens, prompt_template=cfg.filter_prompt_template,
                  on_ambiguous=cfg.on_ambiguous, filter_mode=cfg.filter_mode),
        *([] if cfg.gate_before_filter else gate),
        LLMKeySteps(**llm, max_tokens=cfg.keysteps_max_tokens, prompt_template=cfg.prompt_template,
                    constrained_json=cfg.constrained_json, constrained_max_steps=cfg.constrained_max_steps,
                    min_steps=cfg.min_steps, range_tolerance=cfg.range_tolerance),
        KeyframeAlignment(aligner=cfg.aligner, fps=cfg.fps, epsilon=cfg.epsilon, min_steps=cfg.min_steps,
                          range_tolerance=cfg.range_tolerance, clip_backend=cfg.clip_backend,
                          clip_model_path=cfg.clip_model_path, clip_arch=cfg.clip_arch,
                          vision_device=cfg.vision_device, vision_batch_size=cfg.vision_batch_size,
                          decode_workers=cfg.decode_workers),
        ExtractImages(with_images=cfg.with_images, fps=cfg.fps, jpeg_quality=cfg.jpeg_quality,
                      image_max_side=cfg.image_max_side),
    ]


def pipelines(cfg: ShowHowToConfig, shard_size: int = DEFAULT_SHARD_SIZE) -> list[Pipeline]:
    """The one pipeline of the corpus: the manifest (and HowTo100M metadata) through :func:`steps`."""
    source = ManifestSource(manifest=cfg.manifest, videos=cfg.videos, tasks=cfg.tasks, limit=cfg.limit)
    return [Pipeline("videos", source, steps(cfg), shard_size=shard_size)]


__all__ = ["DEFAULT_SHARD_SIZE", "SAMPLE_SHARD_SIZE", "MAX_SHARD_FACTOR", "ManifestSource", "is_boundary", "pipelines",
           "steps"]
