"""The base of the steps that keep one answer a request in the build's request cache (ASR, LLM calls): a model
answer is costly, so a rerun, a resumed build or a neighbouring config reuses it (docs/architecture.md, "Caching and
resume")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.step import FitInputs, Step
from ..models.request_cache import RequestCache

#: the request cache's file in the build's shared cache folder
REQUEST_CACHE_FILE = "requests.sqlite"


class CacheDirStep(Step):
    """A step that needs the build's per-request cache: its trivial ``fit`` names the cache folder (keyed by its
    input's digest, so it costs nothing on a rerun); :meth:`request_cache` opens the cache in a worker."""

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        return {"cache_dir": str(inputs.cache_dir)}

    def request_cache(self) -> RequestCache:
        return RequestCache(Path(self.state["cache_dir"]) / REQUEST_CACHE_FILE)
