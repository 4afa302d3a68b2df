"""The two errors of NaSVA's inputs (docs/evaluation.md): input that leaves nothing to do, and one unusable feature
file (a named skip). Defined with the feature files (``builders/sources/feature_files.py``), which the builders read
as well."""

from __future__ import annotations

from ..sources.feature_files import FeatureError, NasvaInputError

__all__ = ["FeatureError", "NasvaInputError"]
