"""Readers of MARC alignment ground truth and predictions (docs/evaluation.md; docs/corpora/marc.md).

Files are JSONL, one recipe pair per line: ``{"pair_id": str, "gold": [int, ...]}`` in the ground truth and
``{"pair_id": str, "pred": [int, ...]}`` in the predictions (a line may hold both keys, so one file can serve as both).
Labels are target instruction indices (0-based); NONE = -1. Pairs are matched by ``pair_id``.

Counted skips (never silent): ``missing_prediction`` (a ground-truth pair without a prediction), ``length_mismatch``
(gold and pred differ in length), ``empty_pair`` (no source instruction). Prediction lines for unknown pairs are a
warning (``unknown_pair``). A malformed file (bad JSON, missing key, non-integer or < -1 labels, duplicate pair ids)
is an :class:`eval.registry.EvalError` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.benchmarks.common import parse_json_text, read_text_capped
from eval.registry import EvalError, Warnings

__all__ = ["AlignmentPairs", "match_pairs", "read_jsonl_labels", "write_jsonl"]

NONE = -1


def _labels(value: Any, where: str, key: str) -> list[int]:
    if not isinstance(value, list):
        raise EvalError(f"{where}: '{key}' must be a list of integers")
    out = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int):
            if isinstance(x, float) and x.is_integer():
                x = int(x)
            else:
                raise EvalError(f"{where}: '{key}' holds {x!r}, not an integer label")
        if x < NONE:
            raise EvalError(f"{where}: '{key}' holds {x}, below NONE = -1")
        out.append(int(x))
    return out


def read_jsonl_labels(path: Path, key: str, what: str) -> dict[str, list[int]]:
    """``{pair_id: labels}`` from the ``key`` field of every line of a JSONL file (blank lines skipped)."""
    path = Path(path)
    out: dict[str, list[int]] = {}
    lines = read_text_capped(path, what).split("\n")  # not splitlines(): U+2028 may sit inside a JSON string
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{what} file {path}, line {line_no}"
        obj = parse_json_text(line, where)
        if not isinstance(obj, dict) or "pair_id" not in obj or key not in obj:
            raise EvalError(f"{where}: expected an object with 'pair_id' and '{key}'")
        pair_id = obj["pair_id"]
        if not isinstance(pair_id, str) or not pair_id:
            raise EvalError(f"{where}: 'pair_id' must be a non-empty string")
        if pair_id in out:
            raise EvalError(f"{where}: pair_id {pair_id!r} appears twice")
        out[pair_id] = _labels(obj[key], where, key)
    if not out:
        raise EvalError(f"{what} file {path} holds no pair")
    return out


@dataclass
class AlignmentPairs:
    """Matched (gold, pred) label lists in ground-truth order, and the counted skips."""

    pair_ids: list[str] = field(default_factory=list)
    gold: list[list[int]] = field(default_factory=list)
    pred: list[list[int]] = field(default_factory=list)
    skip_reasons: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1


def match_pairs(gold: Mapping[str, Sequence[int]], pred: Mapping[str, Sequence[int]],
                warnings: Warnings | None = None) -> AlignmentPairs:
    """Pair ground truth with predictions by ``pair_id``; unequal lengths and empty pairs are counted skips."""
    out = AlignmentPairs()
    for pair_id, g in gold.items():
        if pair_id not in pred:
            out.skip("missing_prediction")
            continue
        p = pred[pair_id]
        if len(g) != len(p):
            out.skip("length_mismatch")
            if warnings is not None:
                warnings.add("length_mismatch", f"{pair_id}: {len(g)} gold labels, {len(p)} predicted")
            continue
        if not g:
            out.skip("empty_pair")
            continue
        out.pair_ids.append(pair_id)
        out.gold.append(list(g))
        out.pred.append(list(p))
    unknown = [pid for pid in pred if pid not in gold]
    if unknown and warnings is not None:
        warnings.add("unknown_pair", f"{len(unknown)} predicted pairs have no ground truth, e.g. {unknown[0]!r}",
                     n=len(unknown))
    return out


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line (UTF-8), e.g. ``{"pair_id", "gold", "pred"}`` rows (docs/evaluation.md)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
