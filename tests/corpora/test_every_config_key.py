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

from builders.core.config import ConfigError
from builders.core.step import EXECUTION


def _sieve_swap():
    from builders.corpora.sieve_swap.config import SieveSwapConfig
    from builders.corpora.sieve_swap.pipeline import pipelines

    return SieveSwapConfig(), pipelines


#: corpora whose stages are all dataclasses of their parameters -> (default config, pipeline function)
CONVERTED = {"sieve_swap": _sieve_swap}
#: keys read by the release step only (card, provenance), per corpus
RELEASE_ONLY: dict[str, set[str]] = {"sieve_swap": set()}

_STRINGS = ("paper", "extended", "recipe_subset", "paired", "minilm", "cuda", "other")


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
        return [Path("/tmp/changed-input.csv"), 7, "changed"]
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


@pytest.mark.parametrize("corpus", sorted(CONVERTED))
def test_every_stage_is_a_dataclass_of_its_parameters(corpus):
    cfg, pipelines = CONVERTED[corpus]()
    for name, stage in _stages(pipelines(cfg)).items():
        assert dataclasses.is_dataclass(stage), f"{name} is not a dataclass step"
        assert getattr(stage, "cfg", None) is None, f"{name} holds the corpus config"
        assert not type(stage).config_keys and not type(stage).input_keys, f"{name} keeps a hand-kept key list"


def _keys(corpus: str) -> list[tuple[str, str]]:
    cfg, _ = CONVERTED[corpus]()
    return [(corpus, f.name) for f in dataclasses.fields(cfg)]


@pytest.mark.parametrize("corpus, key", [k for c in sorted(CONVERTED) for k in _keys(c)])
def test_a_key_changes_the_cache_key_of_the_steps_it_reaches(corpus, key):
    cfg, pipelines = CONVERTED[corpus]()
    base = _stages(pipelines(cfg))
    new = _stages(pipelines(_changed(cfg, key)))
    reached = [n for n in base if base[n].params() != new[n].params()]
    if key in RELEASE_ONLY[corpus]:
        assert not reached, f"{key} is listed as release-only but reaches {reached}"
        return
    assert reached, f"config key {key!r} reaches no stage of {corpus}"
    for n in reached:
        keyed = _key_params(base[n]) != _key_params(new[n])
        assert (base[n].cache_config() != new[n].cache_config()) == keyed, n
        assert keyed or base[n].cache_config() == new[n].cache_config(), n
