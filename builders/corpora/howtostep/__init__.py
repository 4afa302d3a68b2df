"""The HowToStep corpus (Li et al., ECCV 2024; MPTVA option: Chen et
al., ECCV 2024; docs/corpora/howtostep.md): ASR narrations -> LLM steps
-> Stage-1 (step -> narration -> time) and Stage-2 (NaSVA self-training) timestamps.

The package is the corpus interface of ``python -m builders.build howtostep``: ``config`` (paper defaults, presets),
``flags`` (inputs, the bundled sample), ``pipeline`` (the config mapped onto the stages) with its stages in
``narrate``, ``features``, ``grounding`` and ``labeler`` and the shared ones of ``builders/steps`` (the HowTo100M
metadata, ``asr.Transcribe``), ``prompts`` (versioned prompt texts) and ``release``.
"""

from __future__ import annotations

from .config import HowToStepConfig
from .flags import add_arguments, check_config, overrides_from_args, resolve_inputs
from .pipeline import pipelines
from .release import NAME, RELEASE_READS, release

Config = HowToStepConfig
#: videos per work shard for real inputs (fewer, larger files at HowTo100M scale; an edit reruns one shard of 64)
DEFAULT_SHARD_SIZE = 64
#: the bundled sample's 14 videos in several shards, so that its kill-and-resume tests have shards to resume
SAMPLE_SHARD_SIZE = 8

__all__ = ["NAME", "Config", "DEFAULT_SHARD_SIZE", "SAMPLE_SHARD_SIZE", "add_arguments", "check_config", "overrides_from_args", "resolve_inputs",
           "pipelines", "release", "RELEASE_READS"]
