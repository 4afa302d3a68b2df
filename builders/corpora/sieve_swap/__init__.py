"""The Sieve & Swap corpus (Batra et al., ECCV 2024; docs/corpora/sieve_swap.md): HowTo100M cooking transcripts x RecipeNLG.

The package is the corpus interface of ``python -m builders.build sieve_swap``: ``config`` (paper defaults),
``flags`` (inputs and the bundled sample), ``pipeline`` (the steps), ``release`` (configs, card, quantities) and
``calibrate`` (the MiniLM threshold of docs/corpora/sieve_swap.md, CPU versus paper configuration).
"""

from __future__ import annotations

from .config import SieveSwapConfig
from .flags import add_arguments, check_config, overrides_from_args, resolve_inputs
from .pipeline import pipelines
from .release import NAME, RELEASE_READS, release

Config = SieveSwapConfig
DEFAULT_SHARD_SIZE = 8

__all__ = ["NAME", "Config", "DEFAULT_SHARD_SIZE", "add_arguments", "check_config", "overrides_from_args", "resolve_inputs",
           "pipelines", "release", "RELEASE_READS"]
