"""The fixture manifest and its fetcher (``make test-data``), against a local HTTP server standing in for upstream."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import fixture_data


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's signature
        pass


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local server laid out as ``<repo>/<commit>/<path>``, like raw.githubusercontent.com."""
    root = tmp_path / "upstream"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{{repo}}/{{commit}}/{{upstream_path}}", root
    finally:
        server.shutdown()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _put(root: Path, rel: str, data: bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _manifest(copy: bytes, page: bytes) -> dict:
    return {"url_template": "unused", "files": [
        {"path": "a/ann.json", "repo": "org/repo", "commit": "abc1234", "upstream_path": "data/ann.json",
         "licence": "MIT", "sha256": _sha(copy), "transform": "copy"},
        {"path": "pages/site__p.html.gz", "repo": "org/pages", "commit": "def5678",
         "upstream_path": "t/site/p.testhtml", "licence": "MIT", "sha256": _sha(gzip.compress(page, mtime=123)),
         "content_sha256": _sha(page),
         "transform": "gzip"},
        {"path": "a/derived.json", "repo": "org/repo", "commit": "abc1234", "upstream_path": None, "licence": "MIT",
         "sha256": _sha(b"{}"), "transform": "derived"}]}


def test_fetch_downloads_checks_hashes_and_keeps_verified_files(upstream: tuple[str, Path], tmp_path: Path) -> None:
    template, root = upstream
    copy, page = b'{"database": {}}\n', b"<html><body>recipe</body></html>"
    _put(root, "org/repo/abc1234/data/ann.json", copy)
    _put(root, "org/pages/def5678/t/site/p.testhtml", page)
    manifest = _manifest(copy, page)
    dest = tmp_path / "data"

    report = fixture_data.fetch(dest, manifest, url_template=template)
    assert report.fetched == ["a/ann.json", "pages/site__p.html.gz"]
    assert report.derived == ["a/derived.json"] and report.failed == []
    assert (dest / "a/ann.json").read_bytes() == copy
    assert gzip.decompress((dest / "pages/site__p.html.gz").read_bytes()) == page
    assert fixture_data.check(dest, manifest).failed == ["a/derived.json: missing"]

    again = fixture_data.fetch(dest, manifest, url_template=template)
    assert again.fetched == [] and again.present == ["a/ann.json", "pages/site__p.html.gz"]


def test_fetch_refuses_a_file_whose_hash_differs_and_reports_missing_ones(upstream: tuple[str, Path],
                                                                         tmp_path: Path) -> None:
    template, root = upstream
    copy, page = b"real\n", b"<html/>"
    _put(root, "org/repo/abc1234/data/ann.json", b"tampered\n")
    manifest = _manifest(copy, page)            # the page is not on the server: a 404
    dest = tmp_path / "data"

    report = fixture_data.fetch(dest, manifest, url_template=template)
    assert report.fetched == []
    assert len(report.failed) == 2
    assert "a/ann.json" in report.failed[0] and "sha256" in report.failed[0]
    assert "pages/site__p.html.gz" in report.failed[1] and "404" in report.failed[1]
    assert not (dest / "a/ann.json").exists() and not list(dest.rglob("*.part"))


def test_cli_exit_codes(upstream: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str]) -> None:
    template, root = upstream
    copy, page = b"x\n", b"<p/>"
    _put(root, "org/repo/abc1234/data/ann.json", copy)
    _put(root, "org/pages/def5678/t/site/p.testhtml", page)
    monkeypatch.setattr(fixture_data, "load_manifest", lambda path=None: _manifest(copy, page))
    dest = tmp_path / "data"
    assert fixture_data.main(["fetch", "--dest", str(dest), "--url-template", template]) == 0
    assert "2 fetched" in capsys.readouterr().out
    assert fixture_data.main(["check", "--dest", str(dest)]) == 1      # the derived file is not there


def test_the_manifest_names_every_file_with_its_source_and_hash() -> None:
    manifest = json.loads(fixture_data.MANIFEST.read_text(encoding="utf-8"))
    paths = [f["path"] for f in manifest["files"]]
    assert len(paths) == len(set(paths)) > 400
    for entry in manifest["files"]:
        assert {"path", "repo", "commit", "licence", "sha256", "transform"} <= set(entry), entry["path"]
        assert len(entry["sha256"]) == 64 and entry["transform"] in ("copy", "gzip", "derived")
        assert entry["transform"] == "derived" or entry["upstream_path"], entry["path"]
    assert {"showhowto/prompt_file.txt", "showhowto/img01.jpg",
            "youcook2/youcookii_annotations_trainval.json"} <= set(paths)


def test_the_manifest_matches_the_fixture_copy_in_use() -> None:
    path = fixture_data.fixtures_dir()
    if path is None:
        pytest.skip(fixture_data.missing_message())
    assert fixture_data.check(path).failed == []


def test_env_variable_points_the_tests_at_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fixture_data.ENV, str(tmp_path / "nowhere"))
    assert fixture_data.fixtures_dir() is None
    assert "make test-data" in fixture_data.missing_message() and str(tmp_path / "nowhere") in \
        fixture_data.missing_message()
    (tmp_path / "copy" / "youcook2").mkdir(parents=True)
    (tmp_path / "copy" / "youcook2" / "x.json").write_text("{}")
    monkeypatch.setenv(fixture_data.ENV, str(tmp_path / "copy"))
    assert fixture_data.fixtures_dir() == tmp_path / "copy"
