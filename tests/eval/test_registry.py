"""eval.registry and eval.run: variants, output assembly and the readable table (evaluation.md §0)."""

from __future__ import annotations

import math

import pytest

from eval.registry import (
    EvalError,
    EvalInputs,
    EvalResult,
    Protocol,
    Variant,
    Warnings,
    all_protocols,
)
from eval.run import evaluate, format_table


def _toy_evaluate(inputs: EvalInputs) -> EvalResult:
    inputs.warnings.add("clamped", "a time was clamped", n=2)
    return EvalResult(metrics={"r1": 0.5, "auc": math.nan, "per": {"a": {"p": 0.25, "long_column_name": 1.0},
                                                                    "b": {"p": 0.75, "long_column_name": 0.0}}},
                      items=4, skipped=1, skip_reasons={"unknown_video": 1}, resolved={"gt_format": "toy"},
                      extra_counts={"pairs": 3})


TOY = Protocol(name="toy", summary="a toy protocol", evaluate=_toy_evaluate,
               variants=(Variant("rule", "tan", "window rule", choices=("tan", "nsva")),
                         Variant("strict", False, "a flag"), Variant("k", 3, "an int"), Variant("thr", 0.5, "a float")))


def test_resolve_variant_defaults_types_and_errors():
    assert TOY.resolve_variant([]) == {"rule": "tan", "strict": False, "k": 3, "thr": 0.5}
    assert TOY.resolve_variant(["rule=nsva", "strict=yes", "k=7", "thr=0.25"]) == {
        "rule": "nsva", "strict": True, "k": 7, "thr": 0.25}
    for bad, message in (["rule=x"], "tan|nsva"), (["nokey=1"], "unknown"), (["k=a"], "k=a"), (["rule"], "KEY=VALUE"), \
            (["thr=nan"], "finite"), (["strict=maybe"], "true/false"):
        with pytest.raises(EvalError, match=message):
            TOY.resolve_variant(bad)


def test_output_object_and_table():
    warnings = Warnings()
    out = evaluate(TOY, EvalInputs(gt=[], pred=None, variant=TOY.defaults(), warnings=warnings))
    assert set(out) == {"protocol", "variant", "metrics", "counts"}
    assert out["variant"] == {"rule": "tan", "strict": False, "k": 3, "thr": 0.5, "gt_format": "toy"}
    assert out["metrics"]["auc"] is None  # NaN is reported as null
    assert out["counts"] == {"items": 4, "skipped": 1, "warnings": 2, "pairs": 3,
                             "skip_reasons": {"unknown_video": 1}, "warning_reasons": {"clamped": 2}}
    table = format_table(out, TOY)
    assert "50.00" in table and "n/a" in table and "long_column_name" in table and "75.00" in table
    assert warnings.report_lines() == ["warning: clamped x2: a time was clamped"]


def test_registry_discovers_every_protocol_module():
    names = set(all_protocols())
    assert {"densevid", "soda", "htm_align", "htstep_r1", "htstep_map", "crosstask", "marc", "marc_ara",
            "recipe_pages"} <= names
