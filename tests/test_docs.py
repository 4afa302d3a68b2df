"""The documentation: the generated configuration reference is current, the README is short, the site builds with
``mkdocs --strict``, and a headless browser can open and navigate it."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

from builders import docs_reference

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"


def test_configuration_reference_is_current() -> None:
    page = ROOT / "docs" / "configuration.md"
    assert page.read_text(encoding="utf-8") == docs_reference.render(), \
        "docs/configuration.md is out of date: run python -m builders.docs_reference"


def test_every_config_field_has_an_entry() -> None:
    assert docs_reference.missing_entries() == []
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for corpus, spec in docs_reference.CONFIG_CLASSES.items():
        for field in dataclasses.fields(docs_reference.load_class(spec)):
            assert f"| `{field.name}` |" in text, f"{corpus}.{field.name} has no row in docs/configuration.md"


@dataclasses.dataclass(frozen=True)
class _ToyConfig:
    # ---- thresholds (toy)
    documented: float = 0.5          # kept when the score reaches this
    #: a comment above the field
    above: int = 3
    continued: str = "x"             # first line
                                     # second line
    undocumented: int = 1


def test_field_entries_reads_comments_and_reports_missing_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = {e.name: e for e in docs_reference.field_entries(_ToyConfig)}
    assert entries["documented"].text == "kept when the score reaches this"
    assert entries["documented"].section == "thresholds (toy)"
    assert entries["above"].text == "a comment above the field"
    assert entries["continued"].text == "first line second line"
    assert entries["undocumented"].text == ""
    toy = {"toy": f"{__name__}:_ToyConfig"}
    assert docs_reference.missing_entries(toy) == ["toy.undocumented"]
    assert "| `undocumented` | `int` | `1` | **no entry** |" in docs_reference.render(toy)


def test_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text("# old\n", encoding="utf-8")
    assert docs_reference.main(["--check", "--out", str(stale)]) == 1
    assert docs_reference.main(["--out", str(stale)]) == 0
    assert docs_reference.main(["--check", "--out", str(stale)]) == 0


def test_readme_is_short_and_links_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) < 10_000
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).is_file(), f"README links to a missing page: {target}"
    for corpus in docs_reference.CONFIG_CLASSES:
        assert f"docs/corpora/{corpus}.md" in readme


def test_docs_cite_nothing_outside_the_repository() -> None:
    pattern = re.compile(r"\.\./shared|specs/|ARCHITECTURE\.md|[0-9]{3}_[0-9a-f]{16}")
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert hits == []


def _mkdocs_available() -> bool:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        return False
    return True


needs_mkdocs = pytest.mark.skipif(not _mkdocs_available(),
                                  reason="mkdocs-material is not installed: pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _mkdocs_available():
        pytest.skip("mkdocs-material is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**_env(), "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]
    return out


def _env() -> dict[str, str]:
    return dict(os.environ)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.hrefs.append(value)


@needs_mkdocs
def test_site_builds_strict_and_has_no_broken_internal_link(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert (site / "index.html").is_file() and (site / "corpora" / "sieve_swap" / "index.html").is_file()
    broken = []
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for href in parser.hrefs:
            url, _ = urldefrag(href)
            if not url or urlparse(url).scheme or url.startswith("//"):
                continue
            target = (site / url.lstrip("/") if url.startswith("/") else page.parent / url).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {href}")
    assert broken == []


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's signature
        pass


def _browser_ready() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).exists() or shutil.which("chromium") is not None


@needs_mkdocs
@pytest.mark.skipif(not _browser_ready(), reason="needs the playwright package and Debian's chromium "
                                                 "(apt-get install -y chromium)")
def test_site_renders_and_navigates_in_a_headless_browser(site: Path, chromium_browser) -> None:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    errors: list[str] = []
    try:
        page = chromium_browser.new_page()
        try:
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            response = page.goto(base)
            assert response is not None and response.ok
            assert page.locator("h1").first.inner_text().startswith("procvid-corpora")
            page.locator("article a[href*='corpora/sieve_swap']").first.click()
            page.wait_for_url("**/corpora/sieve_swap/")
            assert "Sieve & Swap" in page.locator("h1").first.inner_text()
            assert page.locator("nav").count() > 0
            assert page.locator("table").count() >= 3
            page.goto(base + "configuration/")
            assert page.locator("text=sim_threshold").count() > 0
        finally:
            page.close()
    finally:
        server.shutdown()
    assert errors == []
