"""Evaluation protocols: every module here registers one or more :class:`eval.registry.Protocol` on import."""
