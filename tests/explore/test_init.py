"""``write_explorer`` / ``render_explorer`` / ``detect_corpus`` and the CLI on hand-made releases (no build), and
each corpus view in Chromium on them: thumbnails from the ``images`` config, placeholders without it, links."""

from __future__ import annotations

import json

import pytest

from builders.explore import DATA_BUDGET, detect_corpus, render_explorer, write_explorer
from builders.explore.__main__ import main

from .synthetic import WRITERS, write_howtostep, write_marc, write_showhowto, write_sieve_swap


def _data(html: str) -> dict:
    return json.loads(html.split('id="explorer-data">', 1)[1].split("</script>", 1)[0])


@pytest.mark.parametrize("corpus", sorted(WRITERS))
def test_writes_only_explore_html_and_detects_the_corpus(tmp_path, corpus):
    root = WRITERS[corpus](tmp_path / corpus, 30)
    before = sorted(p.name for p in root.rglob("*"))
    path = write_explorer(root, videos=10, seed=3)
    assert path == root / "explore.html"
    assert sorted(p.name for p in root.rglob("*")) == sorted(before + ["explore.html"])
    assert detect_corpus(root) == corpus
    html = path.read_text(encoding="utf-8")
    data = _data(html)
    assert data["corpus"] == corpus and data["total"] == 30 and data["seed"] == 3 and len(data["items"]) == 10
    assert 'href="report.html"' in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html.split('id="explorer-data">')[0]
    # the same release, size and seed: the same page, byte for byte
    assert render_explorer(root, videos=10, seed=3) == html
    # no manifest or stats (a bare Hub snapshot): the configs name the corpus
    (root / "manifest.json").unlink()
    (root / "stats.json").unlink()
    assert detect_corpus(root) == corpus


def test_manifest_given_before_the_release_flow_writes_it(tmp_path):
    root = write_showhowto(tmp_path / "showhowto", 3, images=False)
    (root / "manifest.json").unlink()
    html = write_explorer(root, manifest={"corpus": "showhowto", "config": {"filter_mode": "record"}}).read_text()
    assert "filter_mode=record" in _data(html)["filter"]["text"]
    assert not (root / "manifest.json").exists()


def test_not_a_release(tmp_path):
    with pytest.raises(ValueError, match="not a release"):
        detect_corpus(tmp_path)
    with pytest.raises(FileNotFoundError):
        write_explorer(tmp_path / "absent")


def test_out_elsewhere_links_back_relative(tmp_path):
    root = write_sieve_swap(tmp_path / "rel" / "sieve_swap", 3)
    path = write_explorer(root, out=tmp_path / "pages" / "ss.html")
    html = path.read_text(encoding="utf-8")
    assert 'href="../rel/sieve_swap/report.html"' in html
    assert not (root / "explore.html").exists()


def test_page_budget_leaves_items_out(tmp_path, monkeypatch):
    import builders.explore as ex

    root = write_howtostep(tmp_path / "h", 40, narrations=50)
    monkeypatch.setattr(ex, "DATA_BUDGET", 60_000)
    data = _data(render_explorer(root, videos=40))
    assert 0 < len(data["items"]) < 40 and data["over_budget"] == 40 - len(data["items"])
    assert DATA_BUDGET < 5_000_000


def test_cli(tmp_path, capsys):
    root = write_marc(tmp_path / "marc", 12)
    assert main([str(root), "--videos", "5", "--seed", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert len(_data((root / "explore.html").read_text(encoding="utf-8"))["items"]) == 5
    assert main([str(tmp_path / "nothing-here")]) == 2
    assert main([str(root), "--videos", "-1"]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty)]) == 2


def test_cli_hub_id_downloads_a_snapshot(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    snap = write_marc(tmp_path / "cache" / "snapshot", 4)
    calls = []

    def fake(repo_id, **kw):
        calls.append((repo_id, kw))
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.chdir(tmp_path)
    assert main(["org/marc", "--revision", "v1.0.0"]) == 0
    assert calls[0][0] == "org/marc" and calls[0][1]["revision"] == "v1.0.0" and calls[0][1]["repo_type"] == "dataset"
    page = (tmp_path / "marc-explore.html").read_text(encoding="utf-8")
    assert 'href="cache/snapshot/report.html"' in page and not (snap / "explore.html").exists()

    def offline(repo_id, **kw):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    assert main(["org/marc"]) == 2
    assert "could not download" in capsys.readouterr().err


def test_empty_release_renders(tmp_path, open_page):
    root = write_sieve_swap(tmp_path / "s", 0)
    page = open_page(write_explorer(root))
    assert page.count("#items li") == 0
    assert "no video" in page.page.locator("#view").inner_text()
    assert page.errors == []


def test_showhowto_thumbnails_from_images_config(tmp_path, open_page, screens):
    root = write_showhowto(tmp_path / "showhowto", 20, steps=5)
    page = open_page(write_explorer(root))
    ids = page.page.locator("#items button.pick").evaluate_all("bs => bs.map(b => b.getAttribute('data-id'))")
    assert len(ids) == 20
    for sid in ids[:5]:
        page.pick(sid)
        assert page.count('img[data-kind="thumb"]') == 5 and page.count('[data-kind="placeholder"]') == 0
        assert page.page.locator('[data-kind="thumb"]').first.evaluate("i => i.naturalWidth") > 0
    page.page.locator("#search").fill(ids[3])
    assert page.count("#items li:not([hidden])") == 1
    page.page.locator("#search").fill("Task 1")
    assert 0 < page.count("#items li:not([hidden])") < 20
    page.shot(screens, "synthetic-showhowto-images")
    assert page.errors == []


def test_showhowto_placeholder_without_images(tmp_path, open_page):
    root = write_showhowto(tmp_path / "showhowto", 4, steps=3, images=False)
    page = open_page(write_explorer(root))
    assert page.count('[data-kind="placeholder"]') == 3 and page.count('img[data-kind="thumb"]') == 0
    assert "without --with-images" in page.page.locator('[data-kind="no-images"]').inner_text()


def test_hash_selects_an_item(tmp_path, browser):
    root = write_howtostep(tmp_path / "h", 6, narrations=4, steps=3)
    write_explorer(root)
    page = browser.new_page()
    page.goto((root / "explore.html").as_uri() + "#v0000000004")
    page.wait_for_selector('body[data-ready="1"]')
    assert page.locator("#view h2").inner_text() == "v0000000004"
    page.close()
