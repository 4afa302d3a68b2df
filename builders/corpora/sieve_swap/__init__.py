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
#: videos a work shard: HowTo100M_v1.csv lists all 1.24M videos before the cooking filter (about 4 % of them end in
#: the release), so a shard of 2,048 rows keeps the work directory under 0.5 files a released video at full scale
#: (docs/corpora/sieve_swap.md, "Work directory"); the sieves reuse a redone shard's unchanged rows
DEFAULT_SHARD_SIZE = 2048
#: the bundled sample (25 videos) keeps shards of 8, so that resume and per-shard invalidation have shards to show
SAMPLE_SHARD_SIZE = 8

__all__ = ["NAME", "Config", "DEFAULT_SHARD_SIZE", "SAMPLE_SHARD_SIZE", "add_arguments", "check_config", "overrides_from_args", "resolve_inputs",
           "pipelines", "release", "RELEASE_READS"]
