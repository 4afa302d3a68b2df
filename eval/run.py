"""``python eval/run.py PROTOCOL --gt PATH --pred PATH [--variant KEY=VALUE ...] [--out FILE] [--json]``.

One CLI for every evaluation protocol of the toolkit (docs/evaluation.md). ``--json`` prints one
JSON object ``{"protocol", "variant", "metrics", "counts"}`` on stdout; without it a readable table. Warnings (counted,
named) go to stderr. ``--out FILE`` also writes the JSON object to FILE. Exit status: 0 on success, 2 on a bad
command line or bad input file.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # ``python eval/run.py`` puts eval/ itself first on sys.path, where its sub-packages (metrics/, benchmarks/)
    # would shadow top-level modules; the repository root goes there instead.
    _root = str(Path(__file__).resolve().parent.parent)
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path[0] = _root
    elif _root not in sys.path:
        sys.path.insert(0, _root)

import argparse
import json
import math
from typing import Any

from eval.registry import EvalError, EvalInputs, Protocol, Warnings, all_protocols, get


def _build_parser(protocols: dict[str, Protocol]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python eval/run.py",
        description="Score predictions on a benchmark with the protocol's reference rules.",
        epilog="'python eval/run.py PROTOCOL --help' lists its variants (docs/evaluation.md).",
    )
    sub = parser.add_subparsers(dest="protocol", metavar="PROTOCOL", required=True)
    for name, p in protocols.items():
        variant_lines = []
        for v in p.variants:
            choices = f" ({'|'.join(str(c) for c in v.choices)})" if v.choices else ""
            variant_lines.append(f"  {v.name}={v.default}{choices}: {v.help}")
        if p.unavailable is not None:  # its module failed to import: listed, and main() explains before parsing
            sub.add_parser(name, help=p.summary, description=p.unavailable)
            continue
        sp = sub.add_parser(
            name,
            help=p.summary,
            description=p.summary,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog=("variants (KEY=DEFAULT):\n" + "\n".join(variant_lines)) if variant_lines else None,
        )
        sp.add_argument("--gt", type=Path, action="append", required=True, metavar="PATH",
                        help="ground truth" + (" (repeat for several reference files)" if p.multi_gt else ""))
        sp.add_argument("--pred", type=Path, required=p.needs_pred, metavar="PATH", help="predictions")
        sp.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE",
                        help="a protocol setting (repeatable); defaults reproduce the reference implementation")
        if "video_list" in p.options:
            sp.add_argument("--video-list", type=Path, metavar="FILE",
                            help="restrict the ground truth to these videos (one id per line; reported)")
        if "subset" in p.options:
            sp.add_argument("--subset", default=None,
                            help="split of a ground-truth file that holds several (e.g. YouCook2's 'validation')")
        sp.add_argument("--out", type=Path, metavar="FILE", help="also write the JSON result to FILE")
        sp.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of a table")
    return parser


def _jsonable(value: Any) -> Any:
    """Plain JSON values; NaN/inf become null (a metric that is undefined is reported as null, never as NaN)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def evaluate(protocol: Protocol, inputs: EvalInputs) -> dict[str, Any]:
    """Run one protocol and assemble the output object described in docs/evaluation.md."""
    result = protocol.evaluate(inputs)
    variant = dict(inputs.variant)
    variant.update(result.resolved)
    counts: dict[str, Any] = {
        "items": result.items,
        "skipped": result.skipped,
        "warnings": inputs.warnings.total,
    }
    for key, value in result.extra_counts.items():
        if key in counts:
            raise ValueError(f"protocol {protocol.name!r} reports a count {key!r} that the CLI already sets")
        counts[key] = value
    if result.skip_reasons:
        counts["skip_reasons"] = dict(sorted(result.skip_reasons.items()))
    if inputs.warnings.counts:
        counts["warning_reasons"] = dict(sorted(inputs.warnings.counts.items()))
    return _jsonable({"protocol": protocol.name, "variant": variant, "metrics": result.metrics, "counts": counts})


def format_table(output: dict[str, Any], protocol: Protocol) -> str:
    """A readable table: scalar metrics ×100 as papers print them, nested groups one row each."""
    metrics = output["metrics"]
    lines = [f"protocol: {output['protocol']}"]
    lines.append("variant:  " + ", ".join(f"{k}={v}" for k, v in output["variant"].items()))
    lines.append("counts:   " + ", ".join(f"{k}={v}" for k, v in output["counts"].items()))
    lines.append("")

    def fmt(v: Any) -> str:
        return "n/a" if v is None else (f"{100 * v:8.2f}" if isinstance(v, (int, float)) else str(v))

    keys = list(protocol.table_keys) or [k for k, v in metrics.items() if not isinstance(v, dict)]
    scalars = [(k, metrics[k]) for k in keys if k in metrics and not isinstance(metrics[k], dict)]
    if scalars:
        width = max(12, *(len(k) + 2 for k, _ in scalars))
        lines.append("metric (x100)".ljust(16) + "".join(k.rjust(width) for k, _ in scalars))
        lines.append("".ljust(16) + "".join(fmt(v).rjust(width) for _, v in scalars))
    groups = {k: v for k, v in metrics.items() if isinstance(v, dict)}
    flat = {k: v for k, v in groups.items() if not any(isinstance(x, dict) for x in v.values())}
    if len(flat) > 1:  # e.g. {method: {precision, recall, f1}}: one table, one row per key
        cols = list(dict.fromkeys(c for row in flat.values() for c in row))
        width = max(12, *(len(c) + 2 for c in cols))
        name_w = max(16, *(len(k) + 2 for k in flat))
        lines.append("")
        lines.append("(x100)".ljust(name_w) + "".join(c.rjust(width) for c in cols))
        for name, row in flat.items():
            lines.append(str(name).ljust(name_w) + "".join(fmt(row.get(c)).rjust(width) for c in cols))
        groups = {k: v for k, v in groups.items() if k not in flat}
    for key, rows in groups.items():
        lines.append("")
        first = next(iter(rows.values()), None)
        if isinstance(first, dict):  # e.g. per_tiou: {"0.3": {...}}
            cols = list(dict.fromkeys(c for row in rows.values() if isinstance(row, dict) for c in row))
            width = max(12, *(len(c) + 2 for c in cols))
            lines.append(key.ljust(16) + "".join(c.rjust(width) for c in cols))
            for name, row in rows.items():
                if isinstance(row, dict):
                    lines.append(str(name).ljust(16) + "".join(fmt(row.get(c)).rjust(width) for c in cols))
        else:
            width = max(12, *(len(str(c)) + 2 for c in rows))
            lines.append(key.ljust(16) + "".join(str(c).rjust(width) for c in rows))
            lines.append("".ljust(16) + "".join(fmt(v).rjust(width) for v in rows.values()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    try:
        protocols = all_protocols()
    except ImportError as exc:  # a protocol module whose dependencies are missing
        print(f"error: cannot load the evaluation protocols: {exc}", file=sys.stderr)
        return 2
    parser = _build_parser(protocols)
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((w for w in words if not w.startswith("-")), None)
    if chosen in protocols and protocols[chosen].unavailable is not None:  # whatever its other arguments
        print(f"error: {protocols[chosen].unavailable}", file=sys.stderr)
        return 2
    args = parser.parse_args(words)
    protocol = get(args.protocol)
    warnings = Warnings()
    try:
        if len(args.gt) > 1 and not protocol.multi_gt:
            raise EvalError(f"protocol {protocol.name!r} takes one --gt")
        inputs = EvalInputs(
            gt=args.gt,
            pred=args.pred,
            variant=protocol.resolve_variant(args.variant),
            video_list=getattr(args, "video_list", None),
            subset=getattr(args, "subset", None),
            warnings=warnings,
        )
        output = evaluate(protocol, inputs)
    except EvalError as exc:
        for line in warnings.report_lines():
            print(line, file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in warnings.report_lines():
        print(line, file=sys.stderr)
    text = json.dumps(output, indent=None if args.json else 2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")
    print(text if args.json else format_table(output, protocol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
