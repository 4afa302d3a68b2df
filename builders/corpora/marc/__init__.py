"""The MARC-style aligned recipe corpus (Lin et al., ACL 2020;
docs/corpora/marc.md): Common Crawl recipe pages + video transcripts, HMM+IBM1 pairwise alignment and
joint alignment.

The package is the corpus interface of ``python -m builders.build marc``: ``config`` (paper defaults), ``flags``
(inputs and the bundled sample), ``text`` (the text-recipe filters, Lin et al., ACL 2020, A.1.1), ``pipeline`` (the
steps) and ``release`` (configs, card, quantities).
"""

from __future__ import annotations

from .config import MarcConfig
from .flags import add_arguments, overrides_from_args, resolve_inputs
from .pipeline import pipelines
from .release import NAME, release

Config = MarcConfig
DEFAULT_SHARD_SIZE = 64

__all__ = ["NAME", "Config", "DEFAULT_SHARD_SIZE", "add_arguments", "overrides_from_args", "resolve_inputs",
           "pipelines", "release"]
