"""The backend factory and :func:`generate_cached`, the per-request cache (:class:`RequestCache`) in front of any
backend (docs/corpora/howtostep.md): only misses are sent, in one call; errors are never cached; transient failures
(:func:`builders.core.errors.is_transient`) propagate so the runner leaves the shard unfinished."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...core.errors import is_transient
from ..request_cache import RequestCache
from .backend import LLMBackend, LLMRequest, LLMResult, LLMSettings, _error
from .ct2 import SmolLM2CT2Backend
from .replay import ReplayBackend
from .smollm2 import SmolLM2Backend
from .vllm_engine import VLLMBackend


def make_llm(settings: LLMSettings) -> LLMBackend:
    """The backend named by ``settings.backend``; an unusable choice raises ValueError (no silent fallback,
    docs/corpora/howtostep.md)."""
    backends = {"smollm2": SmolLM2Backend, "vllm": VLLMBackend, "replay": ReplayBackend,
                "smollm2-ct2": SmolLM2CT2Backend}  # issue 24 part 2: the same model through CTranslate2 int8
    if settings.backend not in backends:
        raise ValueError(f"unknown llm backend {settings.backend!r}; choose one of {sorted(backends)}")
    return backends[settings.backend](settings)


def _generate_isolated(backend: LLMBackend, requests: list[LLMRequest]) -> list[LLMResult]:
    """One batched call; if it raises a non-transient error, each request alone (a failing one -> ``llm_error``).
    Transient errors (:func:`builders.core.errors.is_transient`) propagate: the runner retries the shard."""
    try:
        return _checked(backend.generate(requests), requests)
    except Exception as exc:
        if is_transient(exc):
            raise
        if len(requests) == 1:
            return [LLMResult(requests[0].request_id, None, _error(exc))]
    out = []
    for r in requests:
        try:
            out.extend(_checked(backend.generate([r]), [r]))
        except Exception as exc:
            if is_transient(exc):
                raise
            out.append(LLMResult(r.request_id, None, _error(exc)))
    return out


def _checked(results: list[LLMResult], requests: list[LLMRequest]) -> list[LLMResult]:
    if len(results) != len(requests) or any(a.request_id != r.request_id for a, r in zip(results, requests)):
        raise RuntimeError(f"backend returned {len(results)} results out of order for {len(requests)} requests")
    return results


def _request_key_extra(r: LLMRequest, located: bool) -> dict[str, Any]:
    """Request-level parts of the cache key: the per-request cap and schema when set, the replay location."""
    extra: dict[str, Any] = {}
    if located:
        extra.update({"video_id": r.video_id, "chunk_index": int(r.chunk_index)})
        if r.stage:
            extra["stage"] = r.stage
    if r.max_tokens is not None:
        extra["max_tokens"] = int(r.max_tokens)
    if r.json_schema:
        extra["json_schema"] = r.json_schema
    if r.stop:
        extra["stop"] = list(r.stop)
    if r.guided_regex:
        extra["guided_regex"] = r.guided_regex
    return extra


def generate_cached(backend: LLMBackend, requests: list[LLMRequest], cache: RequestCache | None,
                    code_version: str, batch_size: int | None = None) -> tuple[list[LLMResult], dict[str, int]]:
    """Results in request order, cached ones flagged ``cached=True``; counters ``{"llm_requests": n_sent,
    "llm_cache_hits": n_hit}``. The key: messages, model id, decoding, prompt id, code version (docs/corpora/howtostep.md).
    Misses (one per distinct key) go to ``backend.generate`` in one call, or with ``batch_size`` in calls of
    ``batch_size`` (the last one holds the rest; each call isolated on its own); successful texts are stored, errors
    never. A backend with ``keyed_by_location`` True (replay) also has video id and chunk index in its keys.
    """
    decoding = backend.decoding()
    located = bool(backend.keyed_by_location)  # replay: the answer depends on (video, chunk)
    keys = [RequestCache.key(messages=r.messages, model_id=backend.model_id, decoding=decoding, prompt_id=r.prompt_id,
                             code_version=code_version, **_request_key_extra(r, located)) for r in requests]
    found = cache.get_many(keys) if cache is not None and keys else {}
    results: list[LLMResult | None] = [None] * len(requests)
    first: dict[str, int] = {}  # key -> index of the request sent for it
    for i, (r, k) in enumerate(zip(requests, keys)):
        hit = found.get(k)
        if isinstance(hit, dict) and isinstance(hit.get("text"), str):
            results[i] = LLMResult(r.request_id, hit["text"], None, cached=True, finish_reason=hit.get("finish_reason"))
        else:
            first.setdefault(k, i)
    sent = [requests[i] for i in first.values()]
    step = max(1, batch_size) if batch_size else max(1, len(sent))
    fresh = [res for a in range(0, len(sent), step) for res in _generate_isolated(backend, sent[a:a + step])]
    by_key = dict(zip(first, fresh))
    for i, (r, k) in enumerate(zip(requests, keys)):
        if results[i] is None:
            results[i] = replace(by_key[k], request_id=r.request_id, cached=False)
    if cache is not None:
        store = {k: {"text": res.text, **({"finish_reason": res.finish_reason} if res.finish_reason else {})}
                 for k, res in by_key.items() if res.error is None and res.text is not None}
        cache.put_many(store)
    n_hit = sum(1 for res in results if res is not None and res.cached)
    return [res for res in results if res is not None], {"llm_requests": len(sent), "llm_cache_hits": n_hit}
