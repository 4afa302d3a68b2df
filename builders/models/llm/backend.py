"""The contract of the LLM backends (docs/corpora/howtostep.md, docs/corpora/showhowto.md): a request, its result, the
settings, and the :class:`LLMBackend` Protocol naming everything the callers use, which every backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ...core.errors import describe

ERROR_LIMIT = 300  # characters of an exception message kept in LLMResult.error


@dataclass(frozen=True)
class LLMRequest:
    """One chat request: a chunk of one video's transcript rendered with one prompt (docs/corpora/howtostep.md), or one
    stage of a video (docs/corpora/showhowto.md: ``stage`` = ``"filter"`` | ``"keysteps"``, chunk_index 0).

    ``max_tokens`` overrides the backend's cap for this request (ShowHowTo's two prompts differ); ``json_schema``
    asks for constrained decoding under that JSON schema (vLLM structured outputs; docs/corpora/showhowto.md, toolkit addition).
    """
    request_id: str
    video_id: str
    chunk_index: int
    prompt_id: str
    messages: list[dict[str, str]]
    stage: str | None = None
    max_tokens: int | None = None
    json_schema: dict | None = None
    stop: tuple[str, ...] = ()        # stop strings: generation ends after the first one (finish_reason "stop")
    guided_regex: str | None = None   # SmolLM2: greedy decoding constrained to prefixes of this regex (toolkit)

    @property
    def location(self) -> str:
        """Where a recorded answer of this request is found in a replay source: the stage, else the chunk index."""
        return self.stage if self.stage else str(int(self.chunk_index))


@dataclass
class LLMResult:
    """The raw output ``text`` of a request, or ``error`` (``"llm_error: ..."``) when it failed. ``finish_reason``:
    ``"stop"`` (the model ended), ``"length"`` (it hit ``max_tokens``), or None when unknown (replay)."""
    request_id: str
    text: str | None
    error: str | None = None
    cached: bool = False
    finish_reason: str | None = None


#: SmolLM2-135M on CPU: through transformers (fp32) or CTranslate2 (int8); both take the same prompts
SMOLLM2_BACKENDS = ("smollm2", "smollm2-ct2")
#: the ``llm`` values of the corpus configs
LLM_BACKEND_NAMES = (*SMOLLM2_BACKENDS, "vllm", "replay")


@dataclass(frozen=True)
class LLMSettings:
    """Backend choice and decoding (defaults: docs/corpora/howtostep.md CPU preset; paper preset sets ``backend="vllm"``)."""
    backend: str = "smollm2"
    model_path: str | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int = 0
    n_ctx: int = 2048
    max_model_len: int = 4096
    dtype: str = "bfloat16"
    batch_size: int = 8
    replay_path: str | None = None
    device: str = "cpu"
    prompt_format: str = "chat"   # chat: one user turn through the chat template | raw: the text as a completion


@runtime_checkable
class LLMBackend(Protocol):
    """What the callers of a backend use (:func:`~builders.models.llm.generation.generate_cached`, the HowToStep chunk
    budget, the release manifests); every backend implements all of it (no ``getattr`` probes)."""

    name: str
    model_id: str
    runtime: str
    #: True when the answer depends on the request's (video_id, chunk_index or stage), not only on its messages
    #: (replay): generate_cached then keys (and de-duplicates) requests by that location too
    keyed_by_location: bool

    def decoding(self) -> dict:
        """The parameters that change the output: part of the request-cache key."""
        ...

    def info(self) -> dict:
        """Ids, versions and decoding for the release manifest (loads no model)."""
        ...

    def generate(self, requests: list[LLMRequest]) -> list[LLMResult]:
        """One result per request, in request order."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone (no special tokens); whitespace words for a backend without a tokenizer."""
        ...

    def context_budget(self) -> int | None:
        """Prompt tokens a user message may hold, or None when the backend has no budget (replay)."""
        ...


def _error(exc: BaseException) -> str:
    return f"llm_error: {describe(exc, ERROR_LIMIT)}"


def raw_prompt(messages: list[dict[str, str]]) -> str:
    """The completion text of a request under ``prompt_format="raw"``: its message contents joined by newlines."""
    return "\n".join(m["content"] for m in messages)


def _format_key(s: LLMSettings) -> dict:
    """The prompt format enters the decoding (and so the cache key) only when it is not the default chat."""
    if s.prompt_format not in ("chat", "raw"):
        raise ValueError(f"prompt_format must be chat or raw, got {s.prompt_format!r}")
    return {} if s.prompt_format == "chat" else {"prompt_format": s.prompt_format}
