"""The model settings of a corpus config, checked before any work (docs/architecture.md, "Failures"): encoder names
this machine has without a download and a readable LLM replay source. Each corpus's ``check_config`` calls
:func:`check_model_config`; the driver calls the corpus's hook, so ``builders.core`` never imports the models."""

from __future__ import annotations

from typing import Any

from ..core.config import ConfigError
from .llm import check_replay_source
from .text_encoder import check_encoder_name

#: config keys naming a text encoder, and whether NaSVA's ``hash:<dim>`` bag of words is allowed there
ENCODER_KEYS = (("text_encoder", True), ("nasva_text_encoder", True), ("embedding_model", False))


def check_model_config(cfg: Any) -> None:
    """``ConfigError`` (naming the key) for an encoder this machine cannot load offline or a malformed replay source;
    keys a config does not have are skipped."""
    for key, allow_hash in ENCODER_KEYS:
        name = getattr(cfg, key, None)
        if isinstance(name, str):
            try:
                check_encoder_name(name, allow_hash=allow_hash)
            except ValueError as e:
                raise ConfigError(f"{key}: {e}") from None
    if getattr(cfg, "llm", None) == "replay" and getattr(cfg, "llm_replay", None):
        try:
            check_replay_source(cfg.llm_replay)
        except ValueError as e:
            raise ConfigError(f"llm_replay: {e}") from None
