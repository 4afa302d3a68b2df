"""The protocol registry behind ``python eval/run.py`` (docs/evaluation.md).

A protocol is one benchmark's scoring rule: it reads ground truth and predictions, applies the settings of its
``--variant`` keys (defaults reproduce the paper-side reference implementation) and returns metrics in [0, 1] plus
counts. A protocol module in ``eval/protocols/`` registers itself with :func:`register`; the CLI discovers every module
of that package, so a new protocol never edits a dispatch chain.
"""

from __future__ import annotations

import ast
import importlib
import math
import pkgutil
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "EvalError",
    "EvalInputs",
    "EvalResult",
    "Protocol",
    "Variant",
    "Warnings",
    "all_protocols",
    "get",
    "register",
]


class EvalError(Exception):
    """A clear, user-facing error (bad file, wrong layout, unknown variant); the CLI prints it and exits 2."""


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in {"1", "true", "yes", "on"}:
        return True
    if low in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"expected true/false, got {text!r}")


def _parse_optional_int(text: str) -> int | None:
    return None if text.strip().lower() in {"none", "null", ""} else int(text)


@dataclass(frozen=True)
class Variant:
    """One ``--variant KEY=VALUE`` setting of a protocol.

    ``default`` is the paper-side reference behaviour; ``choices`` (when given) lists the accepted values;
    ``parse`` turns the command-line text into the value (inferred from the default's type when omitted).
    """

    name: str
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    parse: Callable[[str], Any] | None = None

    def convert(self, text: str) -> Any:
        parse = self.parse
        if parse is None:
            if isinstance(self.default, bool):
                parse = _parse_bool
            elif isinstance(self.default, int):
                parse = int
            elif isinstance(self.default, float):
                parse = float
            else:
                parse = str
        try:
            value = parse(text)
        except (TypeError, ValueError) as exc:
            raise EvalError(f"--variant {self.name}={text}: {exc}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise EvalError(f"--variant {self.name}={text}: not a finite number")
        if self.choices is not None and value not in self.choices:
            allowed = "|".join(str(c) for c in self.choices)
            raise EvalError(f"--variant {self.name}={text}: expected one of {allowed}")
        return value


class Warnings:
    """Counted, named warnings of one evaluation run (``counts.warnings`` in the output).

    ``add(reason, message)`` counts the reason and keeps the first few messages of each reason for the stderr report.
    """

    def __init__(self, keep: int = 3) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}
        self._keep = keep

    def add(self, reason: str, message: str, n: int = 1) -> None:
        self.counts[reason] += n
        examples = self.examples.setdefault(reason, [])
        if len(examples) < self._keep:
            examples.append(message)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def report_lines(self) -> list[str]:
        lines = []
        for reason, n in sorted(self.counts.items()):
            lines.append(f"warning: {reason} x{n}: " + "; ".join(self.examples.get(reason, [])))
        return lines


@dataclass
class EvalInputs:
    """What the CLI hands a protocol: file paths, the resolved variant settings and the shared options."""

    gt: list[Path]
    pred: Path | None
    variant: dict[str, Any]
    video_list: Path | None = None
    subset: str | None = None
    warnings: Warnings = field(default_factory=Warnings)
    #: injected sentence scorer for the text metrics (tests); ``None`` = the real pycocoevalcap scorers
    scorer: Any = None


@dataclass
class EvalResult:
    """Metrics (fractions in [0, 1]), counted items / skips, and settings the protocol resolved itself."""

    metrics: dict[str, Any]
    items: int
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    #: settings resolved while reading the inputs (e.g. the detected ground-truth format or the video list)
    resolved: dict[str, Any] = field(default_factory=dict)
    #: protocol-specific counts added to the output's ``counts`` (e.g. recipes, pairs, labelled instructions)
    extra_counts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Protocol:
    """One registered protocol: its name, a one-line summary, its variants and its ``evaluate`` function."""

    name: str
    summary: str
    evaluate: Callable[[EvalInputs], EvalResult]
    variants: tuple[Variant, ...] = ()
    #: which shared CLI options the protocol honours (``video_list``, ``subset``); others are rejected
    options: frozenset[str] = frozenset()
    needs_pred: bool = True
    #: several ``--gt`` files allowed (reference files of one benchmark, as the ActivityNet evaluator takes)
    multi_gt: bool = False
    #: the metric keys shown as the columns of the readable table, in order (default: every scalar metric)
    table_keys: tuple[str, ...] = ()
    #: set when the protocol's module could not be imported (a missing package): the reason shown to the user
    unavailable: str | None = None

    def defaults(self) -> dict[str, Any]:
        return {v.name: v.default for v in self.variants}

    def resolve_variant(self, pairs: list[str]) -> dict[str, Any]:
        """``["key=value", ...]`` -> every setting, defaults included; unknown keys are an :class:`EvalError`."""
        by_name = {v.name: v for v in self.variants}
        settings = self.defaults()
        for pair in pairs:
            key, sep, text = pair.partition("=")
            key = key.strip()
            if not sep:
                raise EvalError(f"--variant {pair!r}: expected KEY=VALUE")
            if key not in by_name:
                known = ", ".join(sorted(by_name)) or "none"
                raise EvalError(f"--variant {key}: unknown for protocol {self.name!r} (known: {known})")
            settings[key] = by_name[key].convert(text)
        return settings


_REGISTRY: dict[str, Protocol] = {}
_DISCOVERED = False


def register(protocol: Protocol) -> Protocol:
    """Add a protocol; a second protocol with the same name is a programming error."""
    if protocol.name in _REGISTRY and _REGISTRY[protocol.name] is not protocol:
        raise ValueError(f"protocol {protocol.name!r} registered twice")
    _REGISTRY[protocol.name] = protocol
    return protocol


def _declared_names(path: str | None) -> list[str]:
    """The ``name="..."`` of every ``Protocol(...)`` call in a module's source, read without importing it."""
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Protocol":
            for kw in node.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    names.append(kw.value.value)
    return names


def _unavailable_evaluate(reason: str) -> Callable[[EvalInputs], EvalResult]:
    def evaluate(inputs: EvalInputs) -> EvalResult:
        raise EvalError(reason)

    return evaluate


def _mark_unavailable(module: str, path: str | None, exc: ImportError, before: set[str]) -> None:
    """Register a stand-in for every protocol of a module that failed to import: it names the missing package and
    fails with an :class:`EvalError` (exit 2), while the other protocols keep working (issue 14)."""
    missing = getattr(exc, "name", None)
    what = f"package {missing!r} is not installed" if missing else "an import failed"
    names = list(dict.fromkeys(_declared_names(path) + [n for n in _REGISTRY if n not in before])) or [module]
    for name in names:
        reason = f"protocol {name!r} is unavailable: {what} ({type(exc).__name__}: {exc})"
        _REGISTRY[name] = Protocol(name=name, summary=f"UNAVAILABLE: {what}", evaluate=_unavailable_evaluate(reason),
                                   needs_pred=False, unavailable=reason)
    sys.modules.pop(module, None)


def _discover() -> None:
    """Import every module of ``eval/protocols`` (each registers its protocols); a module that raises
    :class:`ImportError` (a missing optional package) disables only its own protocols."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    import eval.protocols as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = f"{package.__name__}.{info.name}"
        before = set(_REGISTRY)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            spec = getattr(info.module_finder, "find_spec", lambda _name: None)(module)
            _mark_unavailable(module, getattr(spec, "origin", None), exc, before)
    _DISCOVERED = True


def all_protocols() -> dict[str, Protocol]:
    _discover()
    return dict(sorted(_REGISTRY.items()))


def get(name: str) -> Protocol:
    protocols = all_protocols()
    if name not in protocols:
        raise EvalError(f"unknown protocol {name!r}; available: {', '.join(protocols)}")
    return protocols[name]
