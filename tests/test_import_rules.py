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
