"""The corpus registry: name -> module implementing it (None = not built yet).

A corpus module provides the members of :class:`Corpus` (``builders/core/corpus.py``, documented member by member):
``NAME``, ``Config`` (dataclass of paper defaults), ``DEFAULT_SHARD_SIZE``, ``add_arguments(parser)``,
``overrides_from_args(args)``, ``resolve_inputs(cfg)``, ``pipelines(cfg, shard_size)`` and
``release(result, cfg, out_dir, info)``, optionally ``SAMPLE_SHARD_SIZE``. Registering a corpus is one line here.
"""

from __future__ import annotations

import importlib
from typing import cast

from ..core.config import ConfigError
from ..core.corpus import Corpus

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


class UnknownCorpus(ConfigError, KeyError):
    """A corpus name that is not in :data:`CORPORA`: a ``ConfigError`` (exit 2, as the CLI refuses an unknown
    corpus) and, as before, a ``KeyError``."""

    __str__ = BaseException.__str__   # the message as written, not quoted as a KeyError's key


def load(name: str) -> Corpus:
    """The module of corpus ``name`` (``UnknownCorpus``, ``CorpusNotBuilt``)."""
    if name not in CORPORA:
        raise UnknownCorpus(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}")
    module = CORPORA[name]
    if module is None:
        raise CorpusNotBuilt(f"the {name} builder is not implemented yet in this version of the toolkit; "
                             f"only {', '.join(k for k, v in CORPORA.items() if v)} can be built")
    return cast(Corpus, importlib.import_module(module))
