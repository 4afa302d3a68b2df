"""``vllm`` (paper preset, docs/corpora/howtostep.md, docs/getting-started.md): ``vllm.LLM(dtype=bfloat16,
max_model_len=4096, enable_prefix_caching=True)`` and one ``LLM.chat`` call per batch, greedy, ``max_tokens=512``.
vllm is imported lazily (the [gpu] extra, in its own environment on a GPU host)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from .backend import LLMRequest, LLMResult, LLMSettings, _format_key, raw_prompt


class VLLMBackend:
    """vLLM offline engine (paper preset, docs/getting-started.md); the engine starts on first use."""

    name = "vllm"
    runtime = "vllm"
    keyed_by_location = False

    def __init__(self, settings: LLMSettings):
        if not settings.model_path:
            raise ValueError("llm=vllm needs a local model: set the config key llm_model_path (e.g. a local copy of "
                             "meta-llama/Llama-2-7b-chat-hf); nothing is downloaded")
        if "vllm" not in sys.modules and importlib.util.find_spec("vllm") is None:
            raise ValueError("llm=vllm needs the vllm package (the [gpu] extra, in its own environment on a GPU host)")
        self.settings = settings
        path = Path(settings.model_path)
        self.model_id = path.name if path.exists() else settings.model_path  # a dir, or a hub id read from the cache
        self._llm: Any = None
        self._overhead: int | None = None

    def engine_kwargs(self) -> dict:
        s = self.settings
        return {"model": s.model_path, "dtype": s.dtype, "max_model_len": s.max_model_len,
                "enable_prefix_caching": True, "seed": s.seed}

    def decoding(self) -> dict:
        s = self.settings
        return {"temperature": s.temperature, "max_tokens": s.max_tokens, "seed": s.seed, "dtype": s.dtype,
                "max_model_len": s.max_model_len, "runtime": self.runtime, **_format_key(s)}

    def info(self) -> dict:
        import vllm

        kwargs = {**self.engine_kwargs(), "model": self.model_id}  # no absolute paths in a manifest
        return {"backend": self.name, "model_id": self.model_id, "runtime": self.runtime,
                "vllm": getattr(vllm, "__version__", "unknown"), "engine_kwargs": kwargs, **self.decoding()}

    def _engine(self) -> Any:
        if self._llm is None:
            import vllm

            self._llm = vllm.LLM(**self.engine_kwargs())
        return self._llm

    def count_tokens(self, text: str) -> int:
        return len(self._engine().get_tokenizer().encode(text, add_special_tokens=False))

    def context_budget(self) -> int:
        """``max_model_len − max_tokens − chat-template overhead`` (docs/corpora/howtostep.md)."""
        if self._overhead is None:
            tok = self._engine().get_tokenizer()
            ids = tok.apply_chat_template([{"role": "user", "content": ""}], add_generation_prompt=True, tokenize=True)
            self._overhead = len(ids["input_ids"] if isinstance(ids, dict) else ids)
        return self.settings.max_model_len - self.settings.max_tokens - self._overhead

    def sampling_params(self, request: LLMRequest) -> Any:
        """Greedy decoding with the request's ``max_tokens``; a ``json_schema`` becomes vLLM's structured outputs
        (``StructuredOutputsParams(json=...)``, the API since vLLM 0.12; docs/corpora/showhowto.md ``constrained_json``)."""
        import vllm

        s = self.settings
        extra: dict[str, Any] = {}
        if request.json_schema:
            from vllm.sampling_params import StructuredOutputsParams

            extra["structured_outputs"] = StructuredOutputsParams(json=request.json_schema)
        if request.stop:
            extra["stop"] = list(request.stop)
        return vllm.SamplingParams(temperature=s.temperature, max_tokens=request.max_tokens or s.max_tokens,
                                   seed=s.seed, **extra)

    def generate(self, requests: list[LLMRequest]) -> list[LLMResult]:
        """One ``LLM.chat`` (``LLM.generate`` for raw prompts) call for the whole batch, one ``SamplingParams`` per
        request (vLLM schedules them); outputs come back in request order with vLLM's ``finish_reason``."""
        if not requests:
            return []
        params = [self.sampling_params(r) for r in requests]
        if self.settings.prompt_format == "raw":
            outs = self._engine().generate([raw_prompt(r.messages) for r in requests], params, use_tqdm=False)
        else:
            outs = self._engine().chat([list(r.messages) for r in requests], params, use_tqdm=False)
        if len(outs) != len(requests):
            raise RuntimeError(f"vllm returned {len(outs)} outputs for {len(requests)} requests")
        return [LLMResult(r.request_id, o.outputs[0].text, finish_reason=getattr(o.outputs[0], "finish_reason", None))
                for r, o in zip(requests, outs)]
