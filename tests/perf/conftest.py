"""Benchmarks are named ``bench_*.py`` (so the default test run never picks them up): collect them here."""

from __future__ import annotations

import pytest


def pytest_collect_file(file_path, parent):
    # a file named on the command line is collected by pytest itself: collecting it here too would run it twice
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
