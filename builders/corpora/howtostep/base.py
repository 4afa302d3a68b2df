"""What the HowToStep steps share: the build's per-request cache (docs/architecture.md, "Caching and resume": ASR and
LLM results are cached one by one,
keyed by input hash, model id, decoding parameters, prompt id and code version). The step lives in ``core.step`` so
that every corpus with model requests (ShowHowTo too) uses the same one."""

from __future__ import annotations

from ...core.step import REQUEST_CACHE_FILE as CACHE_FILE
from ...core.step import CacheDirStep

__all__ = ["CACHE_FILE", "CacheDirStep"]
