"""The ShowHowTo corpus (Souček et al., CVPR 2025; docs/corpora/showhowto.md): narrated videos -> LLM filter -> LLM key
steps with timestamps -> one keyframe per
step by the order-preserving alignment -> sequences (ids + timestamps; images opt-in).

The package is the corpus interface of ``python -m builders.build showhowto``: ``config`` (paper defaults, presets),
``flags`` (inputs, the bundled sample), ``pipeline`` (source and step list) with its stages in ``transcribe``,
``llm_stages`` and ``align``, ``prompts`` (versioned prompt texts) and ``release``.
"""

from __future__ import annotations

from .config import ShowHowToConfig
from .flags import add_arguments, check_config, overrides_from_args, resolve_inputs
from .pipeline import DEFAULT_SHARD_SIZE, SAMPLE_SHARD_SIZE, pipelines
from .release import NAME, RELEASE_READS, release

Config = ShowHowToConfig

__all__ = [
           "DEFAULT_SHARD_SIZE",
           "SAMPLE_SHARD_SIZE",
           "NAME",
           "Config",
           "add_arguments",
           "check_config",
           "overrides_from_args",
           "pipelines",
           "release",
           "RELEASE_READS",
           "resolve_inputs",
]
