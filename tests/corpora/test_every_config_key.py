"""Every config key reaches the steps whose output it can change (issue 21, item 4).

A converted corpus builds its pipelines from its config in one function (``corpora/<corpus>/pipeline.py``) and every
stage is a dataclass of its own parameters: it cannot read a config key it was not given, and all its parameters but
its execution settings key its cache (``builders/core/step.py``). So the steps whose output a key can change are
exactly the stages whose parameters change with it; this test changes every key in turn and checks that:

* the key reaches at least one stage (a key no stage gets is dead or only read by the release: listed below);
* a stage whose parameters change gets a new cache key, unless only its execution settings changed (device, batch
  size), which then change no cache key at all.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from builders.core import step as step_module
from builders.core.config import ConfigError
from builders.core.step import EXECUTION


@pytest.fixture(autouse=True)
def _requirements_not_checked(monkeypatch):
    """A key may choose a GPU backend (``llm=vllm``, ``asr=whisperx``) whose package this machine lacks: the test is
    about cache keys, so assembling a pipeline does not check the optional packages here."""
    monkeypatch.setattr(step_module, "check_requirements", lambda stages, where: None)


def _sieve_swap():
    from builders.corpora.sieve_swap.config import SieveSwapConfig
    from builders.corpora.sieve_swap.pipeline import pipelines

    return SieveSwapConfig(), pipelines


def _marc():
    from builders.corpora.marc.config import MarcConfig
    from builders.corpora.marc.pipeline import pipelines

    return MarcConfig(), pipelines


def _showhowto():
    from builders.corpora.showhowto.config import ShowHowToConfig
    from builders.corpora.showhowto.pipeline import pipelines

    return ShowHowToConfig(with_images=True), pipelines  # images on: export_upstream (which needs them) can change


def _howtostep():
    from builders.corpora.howtostep.config import HowToStepConfig
    from builders.corpora.howtostep.pipeline import pipelines

    # one config per labeler: the MPTVA keys reach stages only under labeler=mptva (Chen et al., ECCV 2024)
    return (HowToStepConfig(), HowToStepConfig(labeler="mptva"), HowToStepConfig(labeler="llm_timestamps")), pipelines


#: corpora whose stages are all dataclasses of their parameters -> (default config, or a tuple of configs that each
#: build other stages, pipeline function)
CONVERTED = {"sieve_swap": _sieve_swap, "marc": _marc, "showhowto": _showhowto, "howtostep": _howtostep}
#: keys read by the release step only (card, provenance), per corpus
RELEASE_ONLY: dict[str, set[str]] = {
    "sieve_swap": set(),
    # marc.release: paraphrases (Lin et al., ACL 2020, §5.2) and multi-step breakdowns (§5.3) are computed from the
    # pairwise posteriors when the release is written (paraphrase_rows, breakdown_rows)
    "marc": {"paraphrase_threshold", "breakdown_threshold", "release_video_video_paraphrases"},
    # showhowto.release: the test split (test_ids: test_list, test_tasks, min_task_seqs, test_size) and the upstream
    # layout (export_upstream); preset is applied before the pipelines are built (flags.resolve_inputs ->
    # config.apply_preset sets the model keys, which reach the stages themselves) and recorded in build_config.yaml
    "showhowto": {"test_list", "test_tasks", "min_task_seqs", "test_size", "export_upstream", "preset"},
    # howtostep.release: export_format (the authors' per-video layout, written beside the Parquet configs); preset is
    # applied before the pipelines are built (flags.resolve_inputs -> config.apply_preset sets the model keys, which
    # reach the stages themselves) and recorded in build_config.yaml
    "howtostep": {"export_format", "preset"},
}

_STRINGS = ("paper", "extended", "recipe_subset", "paired", "minilm", "cuda", "other", "step", "none", "nouns",
            "whisperx", "vllm", "accept", "record", "open_clip", "middle", "mptva", "step_video", "centre",
            "steps+narrations", "bert", "keep_ratio", "llm_timestamps")


def _candidates(value: Any) -> list[Any]:
    """Values to try instead of ``value``, most natural first."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, max(0, value - 1)]
    if isinstance(value, float):
        return [round(value * 0.5 + 0.05, 6), value + 1.0, round(value * 0.9, 6), 0.5]
    if isinstance(value, str):
        return [s for s in _STRINGS if s != value] + [value + "x"]
    if isinstance(value, (list, tuple)):
        return [type(value)([*value, "extra"]), type(value)([*value, "/tmp/extra.txt"])]
    if value is None:
        return [Path("/tmp/changed-input.csv"), 7, "changed", "chat", 64, "htm_raw", "file", "howtostep_release",
                "simulated"]
    return []


def _changed(cfg: Any, key: str) -> Any:
    for value in _candidates(getattr(cfg, key)):
        if value == getattr(cfg, key):
            continue
        try:
            new = dataclasses.replace(cfg, **{key: value})
            new.validate()
        except (ConfigError, TypeError, ValueError):
            continue
        return new
    pytest.fail(f"no valid value to change {key!r} to (add one to _candidates)")


def _stages(pipes: list[Any]) -> dict[str, Any]:
    out = {}
    for p in pipes:
        for s in [p.source, *p.steps]:
            out[f"{p.name}/{s.name}"] = s
    return out


def _key_params(stage: Any) -> dict[str, Any]:
    execution = {f.name for f in dataclasses.fields(stage) if f.metadata.get(EXECUTION)}
    return {k: v for k, v in stage.params().items() if k not in execution}


def _bases(corpus: str) -> tuple[list[Any], Any]:
    cfg, pipelines = CONVERTED[corpus]()
    return (list(cfg) if isinstance(cfg, tuple) else [cfg]), pipelines


@pytest.mark.parametrize("corpus", sorted(CONVERTED))
def test_every_stage_is_a_dataclass_of_its_parameters(corpus):
    bases, pipelines = _bases(corpus)
    for cfg in bases:
        for name, stage in _stages(pipelines(cfg)).items():
            assert dataclasses.is_dataclass(stage), f"{name} is not a dataclass step"
            assert getattr(stage, "cfg", None) is None, f"{name} holds the corpus config"
            assert not any(hasattr(type(stage), k) for k in ("config_keys", "input_keys", "item_input_keys")), \
                f"{name} keeps a hand-kept key list"


def _keys(corpus: str) -> list[tuple[str, str]]:
    bases, _ = _bases(corpus)
    return [(corpus, f.name) for f in dataclasses.fields(bases[0])]


@pytest.mark.parametrize("corpus, key", [k for c in sorted(CONVERTED) for k in _keys(c)])
def test_a_key_changes_the_cache_key_of_the_steps_it_reaches(corpus, key):
    bases, pipelines = _bases(corpus)
    reaches = False
    for cfg in bases:
        base = _stages(pipelines(cfg))
        new = _stages(pipelines(_changed(cfg, key)))
        reached = [n for n in base if n in new and base[n].params() != new[n].params()]
        reordered = list(base) != list(new)  # the key changes which stages run or their order (new keys from there)
        if key in RELEASE_ONLY[corpus]:
            assert not reached and not reordered, f"{key} is listed as release-only but reaches {reached}"
            continue
        reaches = reaches or bool(reached or reordered)
        for n in reached:
            keyed = _key_params(base[n]) != _key_params(new[n])
            assert (base[n].cache_config() != new[n].cache_config()) == keyed, n
            assert keyed or base[n].cache_config() == new[n].cache_config(), n
    assert reaches or key in RELEASE_ONLY[corpus], f"config key {key!r} reaches no stage of {corpus}"
