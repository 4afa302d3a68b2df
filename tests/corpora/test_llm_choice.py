"""The ``llm`` key of the two LLM corpora: ``smollm2-ct2`` (SmolLM2-135M through CTranslate2 int8, issue 24) is a
choice beside ``smollm2``, ``vllm`` and ``replay``, takes SmolLM2's prompts (raw completions in ShowHowTo) and its
guided decoding, and names the package it needs."""

from __future__ import annotations

import pytest

from builders.core.config import ConfigError, apply_overrides
from builders.core.records import Out
from builders.corpora.howtostep.config import HowToStepConfig
from builders.corpora.howtostep.narrate import LLM_BACKENDS as HOWTOSTEP_BACKENDS
from builders.corpora.showhowto import pipeline as showhowto_pipeline
from builders.corpora.showhowto.config import ShowHowToConfig
from builders.corpora.showhowto.llm_stages import LLM_BACKENDS as SHOWHOWTO_BACKENDS
from builders.corpora.showhowto.prompts import keysteps_regex
from builders.models.llm import LLM_BACKEND_NAMES, SMOLLM2_BACKENDS

CONFIGS = [HowToStepConfig, ShowHowToConfig]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("llm", LLM_BACKEND_NAMES)
def test_every_backend_is_a_choice(config, llm):
    extra = {"llm_replay": "answers.jsonl"} if llm == "replay" else {}
    assert apply_overrides(config(), {"llm": llm, **extra}).llm == llm


@pytest.mark.parametrize("config", CONFIGS)
def test_an_unknown_backend_names_the_choices(config):
    with pytest.raises(ConfigError, match="llm must be one of smollm2, smollm2-ct2, vllm, replay, got 'llama'"):
        apply_overrides(config(), {"llm": "llama"})


@pytest.mark.parametrize("backends", [HOWTOSTEP_BACKENDS, SHOWHOWTO_BACKENDS])
def test_each_backend_names_its_packages(backends):
    assert set(backends) == set(LLM_BACKEND_NAMES)
    assert [(r.module, r.extra) for r in backends["smollm2-ct2"]] == [
        ("transformers", "llm"), ("gguf", "llm"), ("ctranslate2", "llm")]
    assert backends["replay"] == ()


@pytest.mark.parametrize("llm,expected", [("smollm2", "raw"), ("smollm2-ct2", "raw"), ("vllm", "chat")])
def test_showhowto_sends_smollm2_raw_completions(llm, expected):
    cfg = apply_overrides(ShowHowToConfig(), {"llm": llm})
    assert cfg.prompt_format == expected
    assert apply_overrides(ShowHowToConfig(), {"llm": llm, "llm_prompt_format": "chat"}).prompt_format == "chat"


@pytest.mark.parametrize("llm", SMOLLM2_BACKENDS)
def test_constrained_key_steps_are_regex_guided_on_both_smollm2_runtimes(llm):
    cfg = apply_overrides(ShowHowToConfig(), {"llm": llm, "constrained_json": True, "constrained_max_steps": 7})
    stage = next(s for p in showhowto_pipeline.pipelines(cfg) for s in p.steps if s.name == "llm_keysteps")
    seen = {}

    def generate(rows, render, out, schema=None, regex=None):
        seen.update(schema=schema, regex=regex)
        return {}

    stage._generate = generate
    stage.process([], Out("llm_keysteps"))
    assert seen["regex"] == keysteps_regex(7)
    assert seen["schema"] is not None
