"""The two errors of NaSVA's inputs (docs/evaluation.md): input that leaves nothing to do, and one unusable feature
file (a named skip)."""

from __future__ import annotations


class NasvaInputError(ValueError):
    """Input that leaves nothing to do (unreadable labels file, no usable sample, a dimension clash)."""


class FeatureError(Exception):
    """A feature file that cannot be used; ``reason`` is the named skip reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
