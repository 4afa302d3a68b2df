"""Run ``python eval/run.py`` as a user does (a subprocess from the repository root) in the CLI tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str | Path, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``python eval/run.py ARGS``; with ``check`` a non-zero exit fails the test with the CLI's stderr."""
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def run_json(*args: str | Path) -> dict:
    """``run_cli(ARGS, "--json")`` parsed, with the output shape of evaluation.md §0 checked."""
    out = json.loads(run_cli(*args, "--json").stdout)
    assert set(out) == {"protocol", "variant", "metrics", "counts"}
    assert {"items", "skipped", "warnings"} <= set(out["counts"])
    return out
