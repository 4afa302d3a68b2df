"""Text from inputs cannot inject markup: hand-made releases whose transcripts, steps, titles and task names hold
``<script>alert(1)</script>``, a bare ``</script>``, ``<!--`` and an ``<img onerror>``; the page opened in Chromium
fires no dialog, runs no injected element, and shows every such text literally."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from builders.explore import write_explorer
from builders.explore.common import json_for_script

from .synthetic import write_howtostep, write_sieve_swap

EVIL = ["<script>alert(1)</script>", "</script><script>alert(2)</script>", "<!-- <script>alert(3)</script>",
        '<img src=x onerror="alert(4)">', "</SCRIPT ><b>bold?</b> & &amp; \u2028 end"]


def _evil(rng: random.Random, k: int) -> str:
    return f"step {k}: " + EVIL[k % len(EVIL)]


def test_json_for_script_is_inert_and_round_trips():
    payload = {"t": EVIL, "u": "\u2028\u2029", "n": [1, 2.5, None]}
    text = json_for_script(payload)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == payload


def _check_page(open_page, path: Path, selector: str, screens: Path, name: str) -> None:
    page = open_page(path)
    assert page.count("script") == 3, "only the explorer's own scripts (data, view, shell)"
    assert page.count("#view img, #detail img") == 0
    assert page.page.locator("b", has_text="bold?").count() == 0, "an injected <b> was parsed"
    shown = page.page.locator(selector).evaluate_all("es => es.map(e => e.textContent)")
    for evil in EVIL:
        assert any(evil in s for s in shown), f"{evil!r} is not shown literally"
    page.page.locator(selector).first.click()
    assert any(e in page.detail() for e in EVIL)
    page.shot(screens, name)
    assert page.dialogs == [], page.dialogs
    assert page.errors == [], page.errors


def test_howtostep_transcript_cannot_inject(tmp_path, open_page, screens):
    root = write_howtostep(tmp_path / "howtostep", 3, narrations=10, steps=5, text=_evil)
    html = write_explorer(root).read_text(encoding="utf-8")
    body = html.split('id="explorer-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in body, "the embedded JSON holds no '<'"
    assert len(re.findall(r"<script\b", html, re.I)) == 3
    _check_page(open_page, root / "explore.html", '.blk[data-kind="narration"]', screens, "injection-howtostep")


def test_sieve_swap_transcript_and_title_cannot_inject(tmp_path, open_page, screens):
    root = write_sieve_swap(tmp_path / "sieve_swap", 2, segments=12, text=_evil, title=EVIL[0] + EVIL[1])
    write_explorer(root)
    page_sel = 'tr[data-kind="kept"] td, tr[data-kind="discarded"] td'
    _check_page(open_page, root / "explore.html", page_sel, screens, "injection-sieve_swap")


@pytest.mark.parametrize("corpus_text", ["<b>x</b>", "{{ 7*7 }}", "{% raw %}"])
def test_template_syntax_in_data_is_not_evaluated(tmp_path, corpus_text):
    root = write_sieve_swap(tmp_path / "s", 1, segments=4, text=lambda rng, k: corpus_text, title=corpus_text)
    html = write_explorer(root).read_text(encoding="utf-8")
    data = json.loads(html.split('id="explorer-data">', 1)[1].split("</script>", 1)[0])
    assert data["items"][0]["title"] == corpus_text
    assert "49" not in json.dumps(data["items"][0]["title"])
