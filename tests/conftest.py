"""Shared test fixtures: the real data fixtures named in ``tests/fixtures.json`` (never copied into the repository).

They are looked up in ``$PROCVID_TEST_DATA``, ``.test-data/`` (what ``make test-data`` fetches) and ``shared/data``
above the clone (the project's CI). A test that needs them is skipped when none holds them (it fails under ``CI``),
and the end of the run says how many were skipped and which command fetches the fixtures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixture_data import FETCH_COMMAND, fixtures_dir, missing_message

MISSING_MARK = "real data fixtures not found"
_REPO = Path(__file__).resolve().parents[1]


def _repo_root() -> Path:
    """The repository root: the nearest folder above this file holding ``pyproject.toml`` (works from any conftest)."""
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").is_file())


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data fixture folder; a missing one fails the test under CI (env ``CI`` set) and skips it elsewhere,
    naming the command that fetches it."""
    path = fixtures_dir()
    if path is None:
        message = missing_message()
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Count the tests skipped for missing fixtures and name the command that fetches them."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if MISSING_MARK in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} tests skipped: the real data fixtures are missing. "
                                    f"Run `{FETCH_COMMAND}` (or set PROCVID_TEST_DATA=<dir>) to run them.",
                                    yellow=True, bold=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A fixture file missing from an incomplete copy (a derived file ``make test-data`` cannot fetch) skips the test
    that reads it, naming the file, instead of failing it; under ``CI`` it still fails."""
    outcome = yield
    excinfo = outcome.excinfo
    if excinfo is None or not issubclass(excinfo[0], FileNotFoundError) or os.environ.get("CI"):
        return
    base = fixtures_dir()
    name = getattr(excinfo[1], "filename", None) or str(excinfo[1])
    if "shared_data" in getattr(item, "fixturenames", ()) and base and str(base) in str(name):
        outcome.force_exception(pytest.skip.Exception(
            f"{MISSING_MARK}: {name}: the file is not in this copy (tests/fixtures.json marks derived files, which "
            f"`{FETCH_COMMAND}` cannot fetch); set PROCVID_TEST_DATA=<dir> to a complete copy"))


# ------------------------------------------------------------------------------------------ the headless browser

CHROMIUM = os.environ.get("EXPLORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _browser_missing(message: str) -> None:
    """Fail under CI (``make test`` installs the browser), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def chromium_browser():
    """One headless Chromium (Debian's, driven by Playwright; never a downloaded browser) for the whole session:
    Playwright's sync API cannot be started twice in one process, so every browser test shares this one."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _browser_missing("playwright is not installed (pip install -e '.[test]')")
    if not Path(CHROMIUM).is_file():
        _browser_missing(f"no Chromium at {CHROMIUM} (make browser: apt-get install chromium chromium-driver)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def sample_release(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``sample_release(corpus)``: the bundled sample of ``corpus`` as ``make sample`` builds it (``python -m
    builders.build <corpus>``), built once per session on first use. ``EXPLORE_SAMPLE_RELEASES=DIR`` (a folder of
    ``<corpus>/`` releases already built, e.g. where ``make sample`` ran) copies those instead of building; without it,
    the releases ``make sample`` wrote into the repository root are copied when they carry an ``explore.html`` (built
    by this toolkit version's release flow)."""
    out = tmp_path_factory.mktemp("explore-samples")
    given = os.environ.get("EXPLORE_SAMPLE_RELEASES")
    if not given and all((_REPO / c / "explore.html").is_file() for c in ("howtostep", "showhowto", "sieve_swap",
                                                                           "marc")):
        given = str(_REPO)
    built: dict[str, Path] = {}

    def get(corpus: str) -> Path:
        if corpus in built:
            return built[corpus]
        if given and (Path(given) / corpus / "manifest.json").is_file():
            shutil.copytree(Path(given) / corpus, out / corpus)
        else:
            cmd = [sys.executable, "-m", "builders.build", corpus, "--out", str(out), "--work-dir",
                   str(out / ".work" / corpus), "--no-progress", "-q"]
            proc = subprocess.run(cmd, cwd=_REPO, capture_output=True, text=True, timeout=1800)
            assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        built[corpus] = out / corpus
        get.had_explorer[corpus] = (out / corpus / "explore.html").is_file()  # type: ignore[attr-defined]
        return built[corpus]

    get.had_explorer = {}  # type: ignore[attr-defined]  # corpus -> the release came with explore.html
    return get
