"""The never-rules of ARCHITECTURE.md ("Layout"), as import-linter contracts in pyproject.toml ``[tool.importlinter]``.

Runs ``lint-imports`` on the source tree (indirect and function-level imports count) and fails with its report.
Run it by hand with ``lint-imports`` from the repository root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (source, forbidden) of every contract that must be declared: the rules themselves are under test too
RULES = {
    ("builders.ops", "builders.models"), ("builders.ops", "builders.sources"), ("builders.ops", "builders.core"),
    ("builders.ops", "builders.corpora"),
    ("builders.core", "builders.corpora"), ("builders.core", "builders.nasva"),
    ("builders.sources", "builders.corpora"),
    ("eval", "builders.corpora"),
    ("loading_scripts", "builders"),
    ("builders.explore", "builders.corpora"), ("builders.explore", "builders.nasva"),
    ("builders.core", "builders.release"), ("builders.release", "builders.corpora"),
    ("builders.steps", "builders.corpora"),
    ("builders.sources", "builders.nasva"), ("builders.sources", "builders.models"),
    ("builders.core", "builders.models"), ("builders.core", "builders.sources"), ("builders.core", "builders.steps"),
}


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def test_contracts_declare_every_rule():
    cfg = _config()
    assert set(cfg["root_packages"]) == {"builders", "eval", "loading_scripts"}
    declared = set()
    for contract in cfg["contracts"]:
        assert contract["type"] == "forbidden", contract["name"]
        assert not contract.get("allow_indirect_imports"), contract["name"]
        assert not contract.get("ignore_imports"), contract["name"]  # no exceptions: the tree must obey
        declared |= {(s, f) for s in contract["source_modules"] for f in contract["forbidden_modules"]}
    assert RULES <= declared, sorted(RULES - declared)


def test_tree_keeps_the_import_contracts():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    lint = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c(prog_name='lint-imports'))"
    proc = subprocess.run(
        [sys.executable, "-c", lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"import contracts broken (lint-imports exit {proc.returncode}):\n{report}"
    n = len(_config()["contracts"])
    assert f"Contracts: {n} kept, 0 broken." in report, report


def _package_cycles(graph, packages: set[str]) -> list[list[str]]:
    """Strongly connected groups (more than one package) of the package-level import graph among ``packages``."""
    edges: dict[str, set[str]] = {p: set() for p in packages}
    for module in graph.modules:
        a = next((p for p in packages if module == p or module.startswith(p + ".")), None)
        for imported in graph.find_modules_directly_imported_by(module) if a else ():
            b = next((p for p in packages if imported == p or imported.startswith(p + ".")), None)
            if b and b != a:
                edges[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for p in sorted(packages):
        if p not in index:
            visit(p)
    return groups


def test_no_package_level_import_cycle_among_builders_subpackages():
    """No cycle between ``builders.*`` subpackages, direct and function-level imports counted (issue 21 removed
    models -> sources -> nasva -> models and core <-> models)."""
    import grimp

    graph = grimp.build_graph("builders", cache_dir=None)  # no cache: a stale one hides an edit
    packages = {".".join(m.split(".")[:2]) for m in graph.modules if m.count(".") >= 1}
    assert {"builders.core", "builders.models", "builders.sources", "builders.nasva", "builders.steps"} <= packages
    assert _package_cycles(graph, packages) == []


def test_the_cycle_check_finds_a_cycle():
    class Graph:  # two packages importing each other, one standing apart
        modules = {"x.a.m", "x.b.n", "x.c.o"}

        @staticmethod
        def find_modules_directly_imported_by(m):
            return {"x.a.m": {"x.b.n"}, "x.b.n": {"x.a.m"}, "x.c.o": {"x.a.m"}}[m]

    assert _package_cycles(Graph(), {"x.a", "x.b", "x.c"}) == [["x.a", "x.b"]]
