"""What the HowToStep steps share: the build's per-request cache (spec §3: ASR and LLM results are cached one by one,
keyed by input hash, model id, decoding parameters, prompt id and code version)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.step import FitInputs, Step

CACHE_FILE = "requests.sqlite"


class CacheDirStep(Step):
    """A step that needs the build's request cache: its (trivial) ``fit`` names the cache folder."""

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        return {"cache_dir": str(inputs.cache_dir)}

    def request_cache(self):
        from ...models.request_cache import RequestCache

        return RequestCache(Path(self.state["cache_dir"]) / CACHE_FILE)
