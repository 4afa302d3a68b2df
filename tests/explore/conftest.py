"""Fixtures of the explorer tests: a headless Chromium from the system packages driven by Playwright (never a
downloaded browser: ``playwright install`` is not used), the four bundled samples built once per session, and a
folder for the screenshots the reviewer looks at (also copied to ``/tmp/explore-screens``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SCREENS = Path("/tmp/explore-screens")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def browser(chromium_browser: Any) -> Any:
    """The session's headless Chromium (``tests/conftest.py``)."""
    return chromium_browser


class Page:
    """A page opened from ``file://`` that records console errors, page errors, dialogs and requests."""

    def __init__(self, browser: Any, path: Path, width: int = 1400, height: int = 1000) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"{m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("dialog", self._dialog)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector('body[data-ready="1"]', timeout=15000)

    def _dialog(self, d: Any) -> None:
        self.dialogs.append(d.message)
        d.dismiss()

    def count(self, selector: str) -> int:
        return self.page.locator(selector).count()

    def pick(self, item_id: str) -> None:
        """Choose an item in the list by its id (CSS-escaped by Playwright's attribute selector)."""
        self.page.locator("#items button.pick").filter(has=self.page.get_by_text(item_id, exact=True)).first.click()
        self.page.wait_for_timeout(30)

    def detail(self) -> str:
        return self.page.locator("#detail").inner_text()

    def shot(self, folder: Path, name: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        SCREENS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENS / path.name)
        print(f"\nscreenshot: {SCREENS / path.name}")
        return path

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    pages: list[Page] = []

    def opener(path: Path, **kw: Any) -> Page:
        pages.append(Page(browser, path, **kw))
        return pages[-1]

    yield opener
    for p in pages:
        p.close()


@pytest.fixture(scope="session")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("explore-screens")
