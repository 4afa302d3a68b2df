"""The corpus registry: name -> module implementing it (None = not built yet).

A corpus module provides ``Config`` (dataclass of paper defaults), ``add_arguments(parser)``,
``overrides_from_args(args)``, ``resolve_inputs(cfg)``, ``pipelines(cfg, shard_size)`` and
``release(result, cfg, out_dir, info)``. Registering a corpus is one line here.
"""

from __future__ import annotations

import importlib
from types import ModuleType

CORPORA: dict[str, str | None] = {
    "howtostep": "builders.corpora.howtostep",
    "showhowto": "builders.corpora.showhowto",
    "sieve_swap": "builders.corpora.sieve_swap",
    "marc": "builders.corpora.marc",
}

DESCRIPTIONS = {
    "howtostep": "HowToStep: ASR narrations -> LLM steps -> Stage-1/Stage-2 (NaSVA self-training) timestamps "
                 "(Li et al., ECCV 2024; MPTVA option)",
    "showhowto": "ShowHowTo: LLM filter + key steps + CLIP keyframe alignment (Souček et al., CVPR 2025)",
    "sieve_swap": "Sieve & Swap: HowTo100M cooking transcripts x RecipeNLG (Batra et al., ECCV 2024)",
    "marc": "MARC-style aligned recipes: web recipes + transcripts, HMM+IBM1 and joint alignment (Lin et al., 2020)",
}


class CorpusNotBuilt(RuntimeError):
    pass


def load(name: str) -> ModuleType:
    if name not in CORPORA:
        raise KeyError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}")
    module = CORPORA[name]
    if module is None:
        raise CorpusNotBuilt(f"the {name} builder is not implemented yet in this version of the toolkit; "
                             f"only {', '.join(k for k, v in CORPORA.items() if v)} can be built")
    return importlib.import_module(module)
