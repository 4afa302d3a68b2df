"""docs/corpora/howtostep.md, Pipeline: narrations (TAN cleaning, sentencification, language and length filters),
10-sentence chunks, the prompt, the batched and cached LLM, and the numbered-step parser (Li et al., ECCV 2024, §3.1 and
supp. Table 6).

``llm_steps`` keeps every video that reached the LLM (with its raw outputs: the ``llm_outputs`` config, and what
``llm=replay`` reads back); ``require_steps`` then drops the videos with no usable step (``llm_unparsable``,
``llm_error``), so the raw outputs of those videos are released too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.records import Out, Row
from ...core.step import Requirement, Resources, Step, execution_setting, gpus_for_device, input_path
from ...steps.request_cache import CacheDirStep

#: the packages the optional models import (pyproject extras)
TRANSFORMERS = Requirement("transformers", "llm")
LLM_BACKENDS = {"smollm2": (TRANSFORMERS, Requirement("gguf", "llm")),
                "smollm2-ct2": (TRANSFORMERS, Requirement("gguf", "llm"), Requirement("ctranslate2", "llm")),
                "vllm": (Requirement("vllm", "gpu"),), "replay": ()}

#: bump when the LLM request (messages, decoding) or its post-processing changes: part of the request-cache key
LLM_CODE_VERSION = "1"


@dataclass(eq=False)
class Narrations(Step):
    """The narration list N of a video (sentences with ASR times), or a drop: ``not_english``,
    ``too_few_narrations``, ``no_speech``; sentences with bad times are removed (counter ``bad_timestamp``).

    ``sentencify_mode=bert`` restores the punctuation of ``htm_raw`` captions with TAN's BERT model
    (``punctuation_model_path``, on ``device``) before sentencification (Han et al., CVPR 2022)."""

    name = "narrations"
    version = "1"
    id_field = "video_id"
    reads = {"video_id": str, "language": str, "segments": list, "words": Any, "transcript_source": str}
    writes = {"language": str, "sentencify_mode": str, "narrations": list}
    removes = ("segments", "words")
    #: a video's narrations depend on its transcript alone: an edited shard redoes only the videos that changed
    row_wise = True

    seed: int
    min_narrations: int
    language_threshold: float
    sentencify_mode: str
    punctuation_model_path: str | None
    transcript_format: str | None
    device: str = execution_setting("cpu")

    @property
    def punctuates(self) -> bool:
        return self.sentencify_mode == "bert" and self.transcript_format == "htm_raw"

    def missing_requirements(self) -> list[Requirement]:
        return [TRANSFORMERS] if self.punctuates and TRANSFORMERS.missing() else []

    def setup(self, state: Any) -> None:
        super().setup(state)
        self.punctuate = None
        if self.punctuates:
            from ...models.punctuation import BertPunctuator

            self.punctuate = BertPunctuator(self.punctuation_model_path, device=self.device)

    def teardown(self) -> None:
        self.punctuate = None

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models.language import tan_language_filter
        from ...ops.sentencify import narrations_from_transcript

        def english(texts: list[str]) -> tuple[bool, float]:
            return tan_language_filter(texts, seed=self.seed, threshold=self.language_threshold)

        for r in rows:
            vid = r["video_id"]
            lang = (r.get("language") or "").lower()
            segments = [(s["text"], s["start"], s["end"]) for s in r["segments"]]
            words = None
            if r.get("words") is not None:
                words = [[(w["word"], w["start"], w["end"]) for w in seg] for seg in r["words"]]
            # WhisperX ``language`` decides when present; langdetect (TAN filter (a)) runs otherwise (Han et al., CVPR
            # 2022)
            res = narrations_from_transcript(r["transcript_source"], segments, words, seed=self.seed,
                                             language=lang or None, english_check=english,
                                             min_narrations=self.min_narrations, punctuate=self.punctuate)
            for k, v in res.counters.items():
                out.count(k, v)
            if res.reason:
                out.drop(vid, res.reason, res.detail)
                continue
            narr = [{"index": i, "text": t, "start": float(s), "end": float(e)}
                    for i, (t, s, e) in enumerate(res.sentences)]
            row = {k: v for k, v in r.items() if k not in ("segments", "words")}
            out.keep({**row, "language": lang or "en", "sentencify_mode": res.mode, "narrations": narr})


def llm_settings(cfg: Any):
    """The LLM backend's settings from the config keys ``llm*`` (the corpus config, or an :class:`LLMSteps`: its
    fields have the keys' names)."""
    from ...models.llm import LLMSettings

    return LLMSettings(backend=cfg.llm, model_path=cfg.llm_model_path, max_tokens=cfg.llm_max_tokens,
                       temperature=cfg.llm_temperature, seed=0, n_ctx=cfg.llm_n_ctx,
                       max_model_len=cfg.llm_max_model_len, batch_size=cfg.llm_batch_size,
                       replay_path=cfg.llm_replay, device=cfg.llm_device)


def _fits(backend: Any, prompt: Any, sentences: list[tuple[str, float, float]]) -> bool:
    """Toolkit rule: a chunk must fit the LLM's input budget (n_ctx - max_new_tokens - prompt)."""
    from .prompts import render_chunk

    budget = backend.context_budget()  # None: the backend has no budget (replay)
    if budget is None or len(sentences) <= 1:
        return True
    return backend.count_tokens(render_chunk(prompt, sentences)) <= budget


@dataclass(eq=False, kw_only=True)
class LLMSteps(CacheDirStep):
    """Li et al., ECCV 2024, §3.1: chunks of ``chunk_size`` sentences (halved recursively while over the input budget),
    one batched request per shard through the request cache, then the numbered-step parser.

    ``prompt_id`` is the prompt in use (the config's ``effective_prompt_id``: the labeler's own unless one is named);
    ``llm_batch_size`` and ``llm_device`` say how the backend runs, not what it answers (not keyed)."""

    name = "llm_steps"
    version = "1"
    id_field = "video_id"
    reads = {"video_id": str, "narrations": list}
    writes = {"chunks": list, "steps": list, "dropped_steps": list, "num_raw_steps": int, "llm_status": str,
              "llm_detail": str, "llm_model": str, "llm_runtime": Any}

    chunk_size: int
    prompt_id: str
    prompt_template: Path | None = input_path()
    llm: str                              # smollm2 | smollm2-ct2 | vllm | replay
    llm_model_path: str | None
    llm_replay: Path | None = input_path()  # replay: the recorded outputs
    llm_max_tokens: int
    llm_temperature: float
    llm_n_ctx: int
    llm_max_model_len: int
    max_step_words: int
    max_steps_per_chunk: int
    max_vlen: int                         # chunks starting at or after it are dropped (``beyond_max_vlen``)
    llm_batch_size: int = execution_setting(8)
    llm_device: str = execution_setting("cpu")

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.llm_device) if self.llm == "vllm" else 0.0)

    def missing_requirements(self) -> list[Requirement]:
        return [r for r in LLM_BACKENDS.get(self.llm, ()) if r.missing()]  # a replayed LLM needs no package

    def setup(self, state: Any) -> None:
        super().setup(state)
        from ...models.llm import make_llm
        from .prompts import load_prompt

        self.prompt = load_prompt(self.prompt_id, self.prompt_template)
        self.backend = make_llm(llm_settings(self))
        self.cache = self.request_cache()

    def teardown(self) -> None:
        self.backend = None
        if getattr(self, "cache", None) is not None:
            self.cache.close()

    def _chunks(self, narr: list[dict[str, Any]]) -> list[tuple[int, int]]:
        from ...ops.step_parser import chunk_ranges, halve_ranges

        todo = list(chunk_ranges(len(narr), self.chunk_size))
        done: list[tuple[int, int]] = []
        while todo:
            a, b = todo.pop(0)
            sents = [(n["text"], n["start"], n["end"]) for n in narr[a:b + 1]]
            if _fits(self.backend, self.prompt, sents):
                done.append((a, b))
            else:
                todo[:0] = list(halve_ranges(a, b))
        return done

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models.llm import LLMRequest, generate_cached
        from .prompts import messages_for

        plans = []
        requests = []
        for r in rows:
            narr = r["narrations"]
            ranges = self._chunks(narr)
            expected = -(-len(narr) // self.chunk_size)
            if len(ranges) > expected:  # chunks over the LLM's input budget were halved
                out.count("chunks_halved", len(ranges) - expected)
            plans.append(ranges)
            for ci, (a, b) in enumerate(ranges):
                sents = [(n["text"], n["start"], n["end"]) for n in narr[a:b + 1]]
                requests.append(LLMRequest(request_id=f"{r['video_id']}/{ci}", video_id=r["video_id"], chunk_index=ci,
                                           prompt_id=self.prompt.id, messages=messages_for(self.prompt, sents)))
        results, counters = generate_cached(self.backend, requests, self.cache, LLM_CODE_VERSION)
        for k, v in counters.items():
            out.count(k, v)
        by_id = {res.request_id: res for res in results}
        for r, ranges in zip(rows, plans):
            out.keep(self._parse_video(r, ranges, by_id, out))

    def _parse_video(self, r: Row, ranges: list[tuple[int, int]], by_id: dict[str, Any], out: Out) -> Row:
        from ...ops.step_parser import parse_steps

        vid, narr = r["video_id"], r["narrations"]
        chunks, steps, dropped, errors = [], [], [], []
        for ci, (a, b) in enumerate(ranges):
            res = by_id[f"{vid}/{ci}"]
            if res.error is not None or res.text is None:
                errors.append(res.error or "no output")
                chunks.append({"chunk_index": ci, "first_narration": a, "last_narration": b,
                               "prompt_id": self.prompt.id, "raw_output": "", "parse_mode": "error", "num_steps": 0})
                continue
            words = sum(len(n["text"].split()) for n in narr[a:b + 1])
            parsed = parse_steps(res.text, numbered=self.prompt.numbered, input_words=words,
                                 max_step_words=self.max_step_words, max_steps_per_chunk=self.max_steps_per_chunk,
                                 with_timestamps=self.prompt.timestamped_output)
            out.count(f"parse_mode_{parsed.parse_mode}")
            if not parsed.steps:
                out.count("llm_chunk_unparsable")
            beyond = narr[a]["start"] >= self.max_vlen  # toolkit: chunks starting at >= max_vlen (``beyond_max_vlen``)
            for text, reason in parsed.dropped:
                dropped.append({"step_index": None, "chunk_index": ci, "text": text, "stage": self.name,
                                "reason": reason, "score": None})
                out.count(f"step_{reason}")
            for j, text in enumerate(parsed.steps):
                ts = parsed.timestamps[j] if parsed.timestamps else None
                step = {"step_index": -1, "chunk_index": ci, "text": text, "llm_time": ts}
                if beyond:
                    dropped.append({"step_index": None, "chunk_index": ci, "text": text, "stage": self.name,
                                    "reason": "beyond_max_vlen", "score": None})
                    out.count("step_beyond_max_vlen")
                else:
                    steps.append(step)
            chunks.append({"chunk_index": ci, "first_narration": a, "last_narration": b, "prompt_id": self.prompt.id,
                           "raw_output": res.text, "parse_mode": parsed.parse_mode, "num_steps": len(parsed.steps)})
        for i, s in enumerate(steps):
            s["step_index"] = i
        status, detail = "ok", ""
        if errors:
            status, detail = "llm_error", f"{len(errors)} of {len(ranges)} chunks failed: {errors[0]}"
        elif not steps:
            status, detail = "llm_unparsable", f"no parsable step in {len(ranges)} chunks"
        return {**r, "chunks": chunks, "steps": steps, "dropped_steps": dropped, "num_raw_steps": len(steps),
                "llm_status": status, "llm_detail": detail, "llm_model": self.backend.model_id,
                "llm_runtime": self.backend.runtime}


@dataclass(eq=False)
class RequireSteps(Step):
    """Drop the videos whose LLM output gave no step (``llm_unparsable``) or whose request failed (``llm_error``)."""

    name = "require_steps"
    id_field = "video_id"
    reads = {"video_id": str, "llm_status": str, "llm_detail": str}
    writes = {}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            if r["llm_status"] == "ok":
                out.keep(r)
            else:
                out.drop(r["video_id"], r["llm_status"], r["llm_detail"])
