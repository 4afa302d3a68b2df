"""ShowHowTo stages 2-3 (docs/corpora/showhowto.md; Souček et al., CVPR 2025, Sec. 3 "Filtering of irrelevant videos"
and "Extracting key steps", App. A Fig. 19-20): the LLM filter and its Yes/No parser, the length gate, and LLM key-step
extraction with robust JSON parsing and validation.

Both prompts go through the shared backends (``builders.models.llm``: SmolLM2 on CPU, vLLM on GPU, ``replay``) and
the build's request cache, one request per video and stage (``stage`` = ``"filter"`` | ``"keysteps"``, the replay
key). The requests of a shard that the cache does not answer go to the engine in calls of ``llm_batch_size``
prompts (the shard's last call holds the rest), whatever the shard size: the shard only bounds how many a call can
hold (docs/corpora/showhowto.md, "Shards, batching and caching"). A transient backend failure leaves the shard
unfinished (the rerun retries it); a per-request failure is an ``llm_error`` drop, never cached.

Every stage here is row-wise (``builders/core/row_reuse.py``): a redone shard sends only its changed videos to the
model, and each video's counters are its own (``Out.item``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...core.records import Out, Row
from ...core.step import Requirement, Resources, Step, execution_setting, gpus_for_device, input_path
from ...models.llm.backend import SMOLLM2_BACKENDS
from ...ops.keystep_parsing import parse_filter_answer, parse_keysteps, validate_keysteps
from ...steps.request_cache import CacheDirStep
from .prompts import (
    FILTER_PROMPT_ID,
    KEYSTEPS_PROMPT_ID,
    filter_message,
    keysteps_message,
    keysteps_regex,
    keysteps_schema,
    load_prompt,
)

#: bump when a request (messages, decoding) or its post-processing changes: part of the request-cache key
LLM_CODE_VERSION = "1"
#: [toolkit] stop strings for raw (completion) prompts, where the model would otherwise go on writing the next
#: few-shot example: the filter ends before a new example or query block; the key steps at the closing fence (the
#: prompt opened it). Chat prompts get none (a chat answer may open its own fence; the parser handles it).
RAW_STOP = {"filter": ("\nExample", "\nNow the video", "\nTitle:"), "keysteps": ("```",)}
#: the packages each backend imports (``builders.models.llm``); replayed answers need none
LLM_BACKENDS = {"smollm2": (Requirement("transformers", "llm"), Requirement("gguf", "llm")),
                "smollm2-ct2": (Requirement("transformers", "llm"), Requirement("gguf", "llm"),
                                Requirement("ctranslate2", "llm")),
                "vllm": (Requirement("vllm", "gpu"),), "replay": ()}


def _dedup_key(r: Any, located: bool) -> str:
    """What makes two requests of one call one cache key (``generate_cached`` sends such a pair once)."""
    return json.dumps([r.messages, r.max_tokens, r.json_schema, list(r.stop), r.guided_regex,
                       [r.video_id, r.stage] if located else None], sort_keys=True, default=str)


def llm_settings(cfg: Any):
    """The backend settings of the key-step stage from the corpus config (the release's model record)."""
    from ...models.llm import LLMSettings

    return LLMSettings(backend=cfg.llm, model_path=cfg.llm_model_path, max_tokens=cfg.keysteps_max_tokens,
                       temperature=cfg.llm_temperature, seed=cfg.seed, n_ctx=cfg.llm_n_ctx,
                       max_model_len=cfg.llm_max_model_len, batch_size=cfg.llm_batch_size,
                       replay_path=cfg.llm_replay, device=cfg.llm_device, prompt_format=cfg.prompt_format)


@dataclass(eq=False, kw_only=True)
class _LLMStage(CacheDirStep):
    """One request per video (its title and transcript in the stage's prompt). Parameters: the backend and its
    decoding (``builders.models.llm.LLMSettings``: ``llm`` smollm2 | smollm2-ct2 | vllm | replay, ``prompt_format``
    chat | raw), the prompt file replacing the packaged one (``prompt_template``, fingerprinted) and the stage's answer cap
    (``max_tokens``). ``backend_max_tokens`` is the backend's default cap: every request here sets its own, so it
    changes no answer; it enters the request-cache key only (both stages use the key-step cap, so cached requests
    stay valid). The batch size and device say how the model runs (not part of the cache key)."""

    id_field = "video_id"
    stage = ""
    prompt_id = ""
    row_wise = True
    row_wise_batch = True

    llm: str
    llm_model_path: str | None
    llm_replay: str | None = input_path()
    prompt_format: str
    llm_temperature: float
    llm_n_ctx: int
    llm_max_model_len: int
    seed: int
    max_tokens: int
    prompt_template: str | None = input_path()
    backend_max_tokens: int | None = execution_setting(None)
    llm_batch_size: int = execution_setting(8)
    llm_device: str = execution_setting("cpu")

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.llm_device) if self.llm == "vllm" else 0.0)

    def missing_requirements(self) -> list[Requirement]:
        return [r for r in LLM_BACKENDS.get(self.llm, ()) if r.missing()]

    def setup(self, state: Any) -> None:
        super().setup(state)
        from ...models.llm import LLMSettings, make_llm

        self.backend = make_llm(LLMSettings(
            backend=self.llm, model_path=self.llm_model_path,
            max_tokens=self.max_tokens if self.backend_max_tokens is None else self.backend_max_tokens,
            temperature=self.llm_temperature, seed=self.seed, n_ctx=self.llm_n_ctx,
            max_model_len=self.llm_max_model_len, batch_size=self.llm_batch_size, replay_path=self.llm_replay,
            device=self.llm_device, prompt_format=self.prompt_format))
        self.cache = self.request_cache()
        self.prompt = load_prompt(self.prompt_id, self.prompt_template)

    def teardown(self) -> None:
        self.backend = None
        if getattr(self, "cache", None) is not None:
            self.cache.close()

    def _generate(self, rows: list[Row], render: Any, out: Out, schema: dict | None = None,
                  regex: str | None = None) -> dict[str, Any]:
        from ...models.llm import LLMRequest, generate_cached

        prompt = self.prompt
        requests = [LLMRequest(request_id=f"{r['video_id']}/{self.stage}", video_id=r["video_id"], chunk_index=0,
                               prompt_id=f"{prompt.id}@{prompt.version}", messages=render(prompt, r["title"],
                                                                                          r["segments"]),
                               stage=self.stage, max_tokens=self.max_tokens, json_schema=schema, guided_regex=regex,
                               stop=RAW_STOP[self.stage] if self.prompt_format == "raw" and not regex else ())
                    for r in rows]
        results, _ = generate_cached(self.backend, requests, self.cache, LLM_CODE_VERSION,
                                     batch_size=self.llm_batch_size)
        # each video's own counters (row_wise_batch): a cache hit, or the request sent for it; a video whose request
        # equals an earlier one's in this call (de-duplicated by the cache key) counts as neither, as before
        seen: set[Any] = set()
        for r, req, res in zip(rows, requests, results):
            out.item = r["video_id"]
            if res.cached:
                out.count("llm_cache_hits")
            elif (key := _dedup_key(req, self.backend.keyed_by_location)) not in seen:
                seen.add(key)
                out.count("llm_requests")
        return {res.request_id.rsplit("/", 1)[0]: res for res in results}


@dataclass(eq=False)
class LLMFilter(_LLMStage):
    """LLM filter (Souček et al., CVPR 2025, Sec. 3.1, App. A): the prompt, then the Yes/No parser; ``No`` ->
    ``filtered_non_instructional``, unparseable -> ``filter_ambiguous`` (kept with ``on_ambiguous=accept``). The
    explanation line is kept.

    ``filter_mode=record`` [toolkit] runs the prompt and keeps every answer (counted: ``filter_yes``/``_no``/
    ``_ambiguous``, ``filter_not_applied``) without dropping a video: for inputs already known to be instructional,
    and for the CPU sample, whose 135M model answers No to nearly everything (docs/corpora/showhowto.md: its answers are
    unreliable)."""

    name = "llm_filter"
    version = "1"
    stage = "filter"
    prompt_id = FILTER_PROMPT_ID
    reads = {"video_id": str, "title": str, "segments": list}
    writes = {"filter_answer": str, "filter_explanation": str, "filter_raw": str, "filter_prompt": str}

    on_ambiguous: str
    filter_mode: str

    def process(self, rows: list[Row], out: Out) -> None:
        results = self._generate(rows, filter_message, out)
        for r in rows:
            vid, res = r["video_id"], results[r["video_id"]]
            out.item = vid
            if res.error is not None or res.text is None:
                out.drop(vid, "llm_error", (res.error or "no output")[:300])
                continue
            answer, explanation = parse_filter_answer(res.text)
            out.count(f"filter_{answer}")
            row = {**r, "filter_answer": answer, "filter_explanation": explanation, "filter_raw": res.text,
                   "filter_prompt": f"{self.prompt.id}@{self.prompt.version}"}
            if self.filter_mode == "record" and answer != "yes":
                out.count("filter_not_applied")
                out.keep(row)
            elif answer == "no":
                out.drop(vid, "filtered_non_instructional", explanation[:300])
            elif answer == "ambiguous" and self.on_ambiguous == "reject":
                out.drop(vid, "filter_ambiguous", res.text.strip()[:300])
            else:
                out.keep(row)


@dataclass(eq=False)
class LengthGate(Step):
    """Souček et al., CVPR 2025, Sec. 3.1: duration < ``max_duration`` (600 s, "videos under 10 minutes" [paper]) else
    ``too_long``. It runs after the filter (filter statistics cover all videos) unless ``gate_before_filter``."""

    name = "length_gate"
    version = "1"
    id_field = "video_id"
    row_wise = True
    row_wise_batch = True  # it counts nothing
    reads = {"video_id": str, "duration": Any}
    writes = {}  # none: it only drops

    max_duration: float

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            d = r.get("duration")
            if d is not None and d >= self.max_duration:
                out.drop(r["video_id"], "too_long", f"{d:.1f} s >= {self.max_duration:.0f} s")
            else:
                out.keep(r)


@dataclass(eq=False)
class LLMKeySteps(_LLMStage):
    """Key steps (Souček et al., CVPR 2025, Sec. 3.1, App. A): the prompt (``constrained_json`` on vLLM), then the
    robust JSON parser and validation against the container duration (the frame grid's ``t_last`` is checked again when
    frames are decoded). Drops: ``llm_error``, ``llm_truncated``, ``llm_no_json``, ``llm_malformed``,
    ``steps_out_of_range``, ``steps_not_ordered``, ``too_few_steps``."""

    name = "llm_keysteps"
    version = "1"
    stage = "keysteps"
    prompt_id = KEYSTEPS_PROMPT_ID
    reads = {"video_id": str, "title": str, "segments": list, "duration": Any}
    writes = {"wikihow_title": str, "keysteps_raw": str, "keysteps_prompt": str, "parse_repaired": bool,
              "steps": list}

    constrained_json: bool
    constrained_max_steps: int
    min_steps: int
    range_tolerance: float

    def process(self, rows: list[Row], out: Out) -> None:
        schema = keysteps_schema(self.constrained_max_steps) if self.constrained_json else None
        guided = self.constrained_json and self.llm in SMOLLM2_BACKENDS  # smollm2-ct2 hands these to transformers
        regex = keysteps_regex(self.constrained_max_steps) if guided else None
        results = self._generate(rows, keysteps_message, out, schema, regex)
        for r in rows:
            vid, res = r["video_id"], results[r["video_id"]]
            out.item = vid
            if res.error is not None or res.text is None:
                out.drop(vid, "llm_error", (res.error or "no output")[:300])
                continue
            if res.finish_reason == "length":
                out.drop(vid, "llm_truncated", f"the answer reached max_tokens={self.max_tokens}")
                continue
            parsed = parse_keysteps(res.text)
            if isinstance(parsed, str):  # a Failure: its reason code
                out.drop(vid, str(parsed.reason), parsed.detail[:300])
                continue
            steps = [(s.instruction, s.start, s.end) for s in parsed.steps]
            last_end = r["segments"][-1]["end"] if r["segments"] else None
            failure = validate_keysteps(steps, r.get("duration"), None, min_steps=self.min_steps,
                                        tolerance=self.range_tolerance, last_segment_end=last_end)
            if failure is not None:
                out.drop(vid, str(failure.reason), failure.detail[:300])
                continue
            if parsed.parse_repaired:
                out.count("parse_repaired")
            out.keep({**r, "wikihow_title": parsed.wikihow_title or "", "keysteps_raw": res.text,
                      "keysteps_prompt": f"{self.prompt.id}@{self.prompt.version}",
                      "parse_repaired": bool(parsed.parse_repaired),
                      "steps": [{"instruction": i, "start": float(s), "end": float(e)} for i, s, e in steps]})
