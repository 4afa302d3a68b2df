"""The text of a release card: the template rendered with its context, the statistics and paper-comparison
tables in Markdown. Plain text only (no datasets import), so a corpus release module imports it at no cost."""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def render_card(template_path: str | os.PathLike, context: Mapping[str, Any]) -> str:
    """Fill a card template's ``$placeholders`` with ``string.Template.safe_substitute`` (no Jinja, docs/publishing.md).

    Unknown placeholders are left as they are; ``$$`` is a literal dollar sign.
    """
    template = string.Template(Path(template_path).read_text(encoding="utf-8"))
    return template.safe_substitute({k: str(v) for k, v in context.items()})


def compare_with_paper(values: Mapping[str, Any], paper: Mapping[str, float | None], cause: str,
                       notes: Mapping[str, str] | None = None, tolerance: float = 0.2) -> dict[str, dict[str, Any]]:
    """Each quantity of a build next to the paper's: ``{name: {"value", "paper", "flag"}}``, flagged when it deviates
    by more than ``tolerance`` (relative) with the likely ``cause``; ``notes`` give fixed flags to named quantities."""
    out = {}
    for k, v in values.items():
        ref = paper[k]
        flag = (notes or {}).get(k, "")
        if not flag and v is not None and ref:
            dev = (v - ref) / ref
            if abs(dev) > tolerance:
                flag = f"{dev:+.0%} vs paper ({cause})"
        out[k] = {"value": v, "paper": ref, "flag": flag}
    return out


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (``|`` escaped, newlines flattened) for dataset cards."""

    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt_value(x: Any) -> str:
    """A card cell: thousands separators, two decimals for floats, an en dash for a missing value."""
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.2f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def stats_tables(stats: Mapping[str, Any]) -> dict[str, str]:
    """The card tables every corpus shows from ``stats.json``: paper quantities (where ``stats`` has them), drops,
    counters, release rows."""
    q = stats.get("quantities")
    return {
        **({"stats_table": md_table(["quantity", "this build", "paper", "flag"],
                                    [[k, fmt_value(v["value"]), fmt_value(v["paper"]), v["flag"] or ""]
                                     for k, v in q.items()])} if q is not None else {}),
        "drops_table": md_table(["reason", "items"], [[k, v] for k, v in sorted(stats["drops"].items())])
        if stats["drops"] else "No item was dropped.",
        "counters_table": md_table(["counter", "count"], [[k, v] for k, v in sorted(stats["counters"].items())])
        if stats["counters"] else "No counter fired.",
        "release_table": md_table(["config", "split", "rows"],
                                  [[c, s, n] for c, sp in stats.get("release", {}).items() for s, n in sp.items()]),
    }


#: drops per Parquet batch of ``write_drops``
