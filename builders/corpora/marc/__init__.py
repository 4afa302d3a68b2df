"""The MARC-style aligned recipe corpus (Lin et al., ACL 2020;
docs/corpora/marc.md): Common Crawl recipe pages + video transcripts, HMM+IBM1 pairwise alignment and
joint alignment.

The package is the corpus interface of ``python -m builders.build marc``: ``config`` (paper defaults), ``flags``
(inputs and the bundled sample), ``pipeline`` (the config mapped onto the steps) and ``release`` (configs, card,
quantities). The steps, one module per pipeline or concern (Lin et al., ACL 2020): ``extraction`` (§2.1), ``text``
(the recipe filters, dishes and splits, A.1.1; ingredient terms, §2.3), ``videos`` (videos per dish, §2),
``chat_content`` (transcript sentences and the chat/content classifier, A.1.3), ``pairs`` (pairs and pruning, §2.3;
HMM+IBM1, §3.1) and ``joint_alignment`` (§3.2).
"""

from __future__ import annotations

from .config import MarcConfig
from .flags import add_arguments, check_config, overrides_from_args, resolve_inputs
from .pipeline import pipelines
from .release import NAME, RELEASE_READS, release

Config = MarcConfig
DEFAULT_SHARD_SIZE = 64

__all__ = ["NAME", "Config", "DEFAULT_SHARD_SIZE", "add_arguments", "check_config", "overrides_from_args", "resolve_inputs",
           "pipelines", "release", "RELEASE_READS"]
