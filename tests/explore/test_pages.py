"""``explore.html`` of the four bundled samples, opened from ``file://`` in a real headless Chromium: no console error,
no network request, the rendered timelines / thumbnails / links counted against the release's rows (read here with
pyarrow, independently of the explorer), a click on a step shows its detail, and a screenshot of each page goes to
``/tmp/explore-screens/`` for the reviewer. Slow: the samples are built once per session (minutes for howtostep)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from builders.explore import write_explorer

pytestmark = pytest.mark.slow


def _rows(release: Path, config: str) -> list[dict[str, Any]]:
    return pq.read_table(release / config).to_pylist() if (release / config).is_dir() else []


def _explore(release: Path, **kw: Any) -> Path:
    (release / "explore.html").unlink(missing_ok=True)  # the build wrote one: write it again here
    before = {p for p in release.rglob("*")}
    path = write_explorer(release, **kw)
    assert path == release / "explore.html"
    assert {p for p in release.rglob("*")} - before == {path}, "write_explorer writes explore.html and nothing else"
    assert path.stat().st_size < 5_000_000
    return path


def _common(page: Any, main_rows: int) -> list[str]:
    """The list holds every item of a small sample, the report link points to report.html; returns the ids."""
    ids = page.page.locator("#items button.pick").evaluate_all("bs => bs.map(b => b.getAttribute('data-id'))")
    assert len(ids) == min(main_rows, 200)
    assert page.page.locator("#report-link").get_attribute("href") == "report.html"
    assert page.page.locator("#card-link").get_attribute("href") == "README.md"
    return ids


def _clean(page: Any) -> None:
    assert page.errors == [], page.errors
    assert page.dialogs == []
    assert all(u.startswith(("file:", "data:", "about:")) for u in page.requests), page.requests


def _finite(x: Any) -> bool:
    return x is not None and math.isfinite(x)


def test_howtostep_sample(sample_release, open_page, screens):
    release = sample_release("howtostep")
    page = open_page(_explore(release))
    steps = {r["video_id"]: r for r in _rows(release, "steps")}
    narr = {r["video_id"]: r["narrations"] for r in _rows(release, "narrations")}
    dropped: dict[str, int] = {}
    for r in _rows(release, "dropped_steps"):
        dropped[r["video_id"]] = dropped.get(r["video_id"], 0) + 1
    ids = _common(page, len(steps))
    assert set(ids) <= set(steps)
    clicked = False
    for vid in ids:
        page.pick(vid)
        row = steps[vid]
        assert page.count('.timeline[data-kind="timeline"]') == 1
        assert page.count('.blk[data-kind="narration"]') == len(narr.get(vid, []))
        assert page.count('.blk[data-kind="step"]') == sum(_finite(s["start"]) for s in row["steps"])
        assert page.count('.blk[data-kind="stage1"]') == sum(_finite(s["stage1_start"]) for s in row["steps"])
        assert page.count('[data-kind="dropped"]') == dropped.get(vid, 0)
        paths = max((len(s["pathway_scores"] or []) for s in row["steps"]), default=0)
        assert page.count('.lane[data-lane="pathway"]') == paths
        blocks = page.page.locator('.blk[data-kind="step"]')
        if not clicked and blocks.count():
            blocks.first.click()
            text = page.detail()
            first = next(s for s in row["steps"] if _finite(s["start"]))
            assert first["text"] in text and "matched narration" in text and "Stage-1 window" in text
            page.shot(screens, "howtostep")
            clicked = True
    assert clicked, "no video of the sample has a grounded step"
    _clean(page)


def test_sieve_swap_sample(sample_release, open_page, screens):
    release = sample_release("sieve_swap")
    page = open_page(_explore(release))
    rows = {r["video_id"]: r for r in _rows(release, "default")}
    raw = {r["video_id"]: r["segments"] for r in _rows(release, "raw_asr")}
    ids = _common(page, len(rows))
    for vid in ids:
        page.pick(vid)
        kept = rows[vid]["segments"]
        assert page.count('tr[data-kind="kept"]') == len(kept)
        assert page.count('tr[data-kind="discarded"]') == len(raw[vid]) - sum(k["num_merged"] for k in kept)
        assert page.count('[data-kind="recipe"] ol li') > 0
    page.pick(ids[0])
    page.page.locator('tr[data-kind="kept"]').first.click()
    first = rows[ids[0]]["segments"][0]
    text = page.detail()
    assert first["text"] in text and f"{first['similarity']:.3f}" in text
    page.shot(screens, "sieve_swap")
    _clean(page)


def test_showhowto_sample(sample_release, open_page, screens):
    release = sample_release("showhowto")
    page = open_page(_explore(release))
    rows = {r["sequence_id"]: r for r in _rows(release, "sequences")}
    ids = _common(page, len(rows))
    thumbs = 0
    for sid in ids:
        page.pick(sid)
        n = len(rows[sid]["steps"])
        assert page.count('figure[data-kind="frame"]') == n
        got = page.count('img[data-kind="thumb"]')
        assert got + page.count('[data-kind="placeholder"]') == n
        thumbs += got
        assert rows[sid]["task"] in page.page.locator("#view h2").inner_text()
        assert "LLM filter" in page.page.locator('[data-kind="filter"]').inner_text()
    # the sample's videos are on this machine (builders/samples/showhowto): frames are cut from them
    assert thumbs > 0
    page.pick(ids[0])
    page.page.locator('figure[data-kind="frame"]').first.click()
    assert rows[ids[0]]["steps"][0]["instruction"] in page.detail()
    page.shot(screens, "showhowto")
    _clean(page)


def test_marc_sample(sample_release, open_page, screens):
    release = sample_release("marc")
    page = open_page(_explore(release))
    rows = {}
    for cfg in ("pairwise_text_text", "pairwise_text_video", "pairwise_video_video"):
        rows.update({r["pair_id"]: r for r in _rows(release, cfg)})
    ids = _common(page, len(rows))
    for pid in ids[:: max(1, len(ids) // 12)]:
        page.pick(pid)
        r = rows[pid]
        na, nb = len(r["a_instructions"]), len(r["b_instructions"])
        assert page.count('.pstep[data-side="a"]') == na and page.count('.pstep[data-side="b"]') == nb
        valid_ab = sum(1 for e in r["a_to_b"] if e["target_index"] is not None and 0 <= e["target_index"] < nb)
        valid_ba = sum(1 for e in r["b_to_a"] if e["target_index"] is not None and 0 <= e["target_index"] < na)
        assert page.count('path[data-kind="link"][data-dir="a_to_b"]') == valid_ab
        assert page.count('path[data-kind="link"][data-dir="b_to_a"]') == valid_ba
    pid = next(p for p in ids if rows[p]["pair_type"] == 1) if any(rows[p]["pair_type"] == 1 for p in ids) else ids[0]
    page.pick(pid)
    page.page.locator('.pstep[data-side="a"]').first.click()
    r = rows[pid]
    text = page.detail()
    assert r["a_instructions"][0] in text and "aligned to" in text
    t = r["a_to_b"][0]["target_index"]
    if t is not None and 0 <= t < len(r["b_instructions"]):
        assert r["b_instructions"][t] in text
    page.page.locator('input[data-dir="b_to_a"]').uncheck()
    assert page.count('path[data-kind="link"][data-dir="b_to_a"]') == 0
    page.page.locator('input[data-dir="b_to_a"]').check()
    page.shot(screens, "marc")
    _clean(page)


@pytest.mark.parametrize("corpus", ["sieve_swap", "marc", "showhowto", "howtostep"])
def test_the_build_writes_explore_html(sample_release, corpus):
    """Every release the build writes has its explorer (``write_explorer`` called by the release flow), and its
    build report links to it (the explorer links back: checked above)."""
    release = sample_release(corpus)
    assert sample_release.had_explorer[corpus], f"python -m builders.build {corpus} wrote no explore.html"
    assert 'href="explore.html"' in (release / "report.html").read_text(encoding="utf-8")
