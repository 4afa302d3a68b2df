"""Generates ``docs/configuration.md``, the configuration reference, from the corpus config dataclasses.

Every field of a config class is one row: its key, type, default and the comment written beside it in the source
(``# ...`` on the same line and the comment lines continuing it, or ``#:`` lines above it). A field without a comment
has no entry, which is an error: ``python -m builders.docs_reference --check`` (and ``tests/test_docs.py``) fail then,
and when the checked-in page differs from what the classes generate.

    python -m builders.docs_reference            # rewrite docs/configuration.md
    python -m builders.docs_reference --check    # exit 1 when it is out of date or a field has no entry
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import sys
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: corpus -> "module:Class" of its config dataclass, in the order of the page
CONFIG_CLASSES: dict[str, str] = {
    "sieve_swap": "builders.corpora.sieve_swap.config:SieveSwapConfig",
    "marc": "builders.corpora.marc.config:MarcConfig",
    "howtostep": "builders.corpora.howtostep.config:HowToStepConfig",
    "showhowto": "builders.corpora.showhowto.config:ShowHowToConfig",
}
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
SECTION_MARK = "# ----"


@dataclass(frozen=True)
class FieldEntry:
    """One config key as the reference shows it."""

    name: str
    type: str
    default: Any
    section: str
    text: str


def _comments(source: str) -> dict[int, str]:
    """Line number (1-based) -> the comment on that line, without the leading ``#``."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def field_entries(cls: type) -> list[FieldEntry]:
    """The fields of config dataclass ``cls`` with their section and source comment (empty when there is none)."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments = _comments(source)
    lines = source.splitlines()
    tree = ast.parse(source)
    class_node = next(node for node in tree.body if isinstance(node, ast.ClassDef))
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    entries: list[FieldEntry] = []
    section_lines = sorted((n, c) for n, c in comments.items() if c.startswith(SECTION_MARK))
    for node in class_node.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name not in defaults:
            continue
        line_no = node.lineno
        section = next((c for n, c in reversed(section_lines) if n < line_no), "")
        parts: list[str] = []
        above = line_no - 1
        doc_lines: list[str] = []
        while above >= 1 and comments.get(above, "").startswith("#:"):
            doc_lines.insert(0, comments[above][2:].strip())
            above -= 1
        parts.extend(doc_lines)
        end = node.end_lineno or line_no
        inline = comments.get(end) if _is_code(lines[end - 1].split("#", 1)[0]) else None
        if inline and not inline.startswith(SECTION_MARK):
            parts.append(inline.lstrip("#").strip())
            nxt = end + 1
            while nxt <= len(lines) and not _is_code(lines[nxt - 1]) and nxt in comments \
                    and not comments[nxt].startswith(("#:", SECTION_MARK)):
                parts.append(comments[nxt].lstrip("#").strip())
                nxt += 1
        fld = defaults[name]
        if fld.default is not dataclasses.MISSING:
            default = fld.default
        elif fld.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = fld.default_factory()  # type: ignore[misc]
        else:
            default = dataclasses.MISSING
        entries.append(FieldEntry(name=name, type=ast.unparse(node.annotation), default=default,
                                  section=section[len(SECTION_MARK):].strip(), text=" ".join(p for p in parts if p)))
    return entries


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "(required)"
    if isinstance(value, float):
        return f"`{value:.6g}`"
    return f"`{value!r}`"


def load_class(spec: str) -> type:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def missing_entries(classes: dict[str, str] | None = None) -> list[str]:
    """``corpus.key`` for every config field that has no comment, hence no entry in the reference."""
    out = []
    for corpus, spec in (classes or CONFIG_CLASSES).items():
        out += [f"{corpus}.{e.name}" for e in field_entries(load_class(spec)) if not e.text]
    return out


def render(classes: dict[str, str] | None = None) -> str:
    """The Markdown of the configuration reference page."""
    out = ["# Configuration reference", "",
           "<!-- generated by `python -m builders.docs_reference` from the config classes: do not edit by hand -->", "",
           "Every key below is set with `--set key=value` or a YAML file given to `--config FILE.yaml` "
           "(`python -m builders.build <corpus> --set key=value`). Unknown keys, values of the wrong type, NaN or "
           "infinite numbers and values outside a key's range fail before any work (one line, exit 2). Defaults are the papers' unless the text says otherwise; the corpus pages explain the "
           "thresholds and cite the papers.", ""]
    for corpus, spec in (classes or CONFIG_CLASSES).items():
        cls = load_class(spec)
        module, _, name = spec.partition(":")
        out += [f"## {corpus}", "", f"`{module}.{name}` ([the corpus page](corpora/{corpus}.md)).", ""]
        current = None
        for entry in field_entries(cls):
            if entry.section != current:
                current = entry.section
                out += ["", f"### {corpus}: {current or 'general'}", "", "| key | type | default | meaning |",
                        "|---|---|---|---|"]
            out.append(f"| `{entry.name}` | `{_cell(entry.type)}` | {_cell(_default(entry.default))} | "
                       f"{_cell(entry.text) or '**no entry**'} |")
        out.append("")
    return "\n".join(out).replace("\n\n\n", "\n\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m builders.docs_reference",
                                     description="Generate docs/configuration.md from the corpus config classes.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the page to write or check")
    parser.add_argument("--check", action="store_true",
                        help="do not write: exit 1 when the page is out of date or a config field has no entry")
    args = parser.parse_args(argv)
    missing = missing_entries()
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        problems = [f"config field without an entry (add a comment beside it): {m}" for m in missing]
        if current != text:
            problems.append(f"{args.out} is out of date: run python -m builders.docs_reference")
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    for m in missing:
        print(f"warning: config field without an entry: {m}", file=sys.stderr)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
