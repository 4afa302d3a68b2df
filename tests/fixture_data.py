"""The real data fixtures of the tests: where they are, and fetching them from upstream (``make test-data``).

``tests/fixtures.json`` names every file: its path under the fixture folder, the upstream repository and commit, the
path there, the licence and the sha256. ``transform`` says how the local file comes from the upstream one: ``copy``
(as is), ``gzip`` (gzip-compressed here; ``content_sha256`` is the upstream file's hash) or ``derived`` (made by the
project from upstream files: not fetchable as is, reported).

    python tests/fixture_data.py fetch --dest .test-data   # what `make test-data` runs
    python tests/fixture_data.py check --dest DIR          # verify an existing copy against the manifest

Where the tests look (:func:`fixtures_dir`): ``$PROCVID_TEST_DATA``, then ``.test-data/`` in the clone, then
``shared/data`` in the folder above the clone (the project's CI layout).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path(__file__).resolve().with_name("fixtures.json")
ENV = "PROCVID_TEST_DATA"
FETCH_COMMAND = "make test-data"


def candidates() -> list[Path]:
    """The folders searched for fixtures, in order (only ``$PROCVID_TEST_DATA`` when it is set)."""
    if os.environ.get(ENV):
        return [Path(os.environ[ENV]).expanduser()]
    return [ROOT / ".test-data", ROOT.parent / "shared" / "data"]


def fixtures_dir() -> Path | None:
    """The first folder of :func:`candidates` that holds a fixture copy, else None."""
    for path in candidates():
        if path.is_dir() and any(path.iterdir()):
            return path
    return None


def missing_message() -> str:
    """The skip message of a test whose fixtures are missing: where it looked and the command that fetches them."""
    looked = ", ".join(str(p) for p in candidates())
    return (f"real data fixtures not found (looked in {looked}): run `{FETCH_COMMAND}` "
            f"(or set {ENV}=<dir> to an existing copy)")


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _matches(entry: dict[str, Any], data: bytes) -> bool:
    return sha256(data) == entry["sha256"] or (
        entry.get("transform") == "gzip" and _gunzip_sha(data) == entry.get("content_sha256"))


def _gunzip_sha(data: bytes) -> str | None:
    try:
        return sha256(gzip.decompress(data))
    except (OSError, EOFError):
        return None


@dataclass
class Report:
    """What a fetch or a check did, file by file."""

    fetched: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.fetched)} fetched, {len(self.present)} already present and verified, "
                f"{len(self.derived)} derived (not fetchable as is), {len(self.failed)} failed")


def fetch(dest: Path, manifest: dict[str, Any] | None = None, url_template: str | None = None,
          timeout: float = 60.0) -> Report:
    """Fetch every ``copy``/``gzip`` file of the manifest into ``dest`` and check its hash; a file already there with
    the right hash is kept. A download that fails or does not match is not written and is listed in ``failed``."""
    manifest = manifest or load_manifest()
    template = url_template or manifest["url_template"]
    report = Report()
    for entry in manifest["files"]:
        target = dest / entry["path"]
        if target.is_file() and _matches(entry, target.read_bytes()):
            report.present.append(entry["path"])
            continue
        if entry.get("transform") == "derived" or not entry.get("upstream_path"):
            report.derived.append(entry["path"])
            continue
        url = template.format(repo=entry["repo"], commit=entry["commit"], upstream_path=entry["upstream_path"])
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - https or a test's localhost
                data = response.read()
        except (urllib.error.URLError, OSError) as e:
            report.failed.append(f"{entry['path']}: {url}: {e}")
            continue
        if entry.get("transform") == "gzip":
            if sha256(data) != entry.get("content_sha256"):
                report.failed.append(f"{entry['path']}: {url}: sha256 {sha256(data)} != {entry.get('content_sha256')}")
                continue
            data = gzip.compress(data, mtime=0)
        elif sha256(data) != entry["sha256"]:
            report.failed.append(f"{entry['path']}: {url}: sha256 {sha256(data)} != {entry['sha256']}")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(target)
        report.fetched.append(entry["path"])
    return report


def check(dest: Path, manifest: dict[str, Any] | None = None) -> Report:
    """Verify a fixture folder against the manifest (nothing is downloaded)."""
    manifest = manifest or load_manifest()
    report = Report()
    for entry in manifest["files"]:
        target = dest / entry["path"]
        if target.is_file() and _matches(entry, target.read_bytes()):
            report.present.append(entry["path"])
        else:
            report.failed.append(f"{entry['path']}: {'missing' if not target.is_file() else 'sha256 differs'}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/fixture_data.py",
                                     description="Fetch or check the real data fixtures named in tests/fixtures.json.")
    parser.add_argument("command", choices=("fetch", "check"))
    parser.add_argument("--dest", type=Path, default=ROOT / ".test-data",
                        help="the fixture folder (default .test-data)")
    parser.add_argument("--url-template", default=None,
                        help="override the download URL, with {repo}, {commit} and {upstream_path} (a mirror)")
    args = parser.parse_args(argv)
    report = fetch(args.dest, url_template=args.url_template) if args.command == "fetch" else check(args.dest)
    for line in report.failed:
        print(f"failed: {line}", file=sys.stderr)
    if report.derived:
        print(f"{len(report.derived)} derived files cannot be fetched as is (the tests that need them stay skipped), "
              f"e.g. {', '.join(report.derived[:3])}", file=sys.stderr)
    print(f"{args.dest}: {report.summary()}")
    if args.command == "fetch" and not report.failed:
        print(f"use it with: {ENV}={args.dest.resolve()} (or leave it at .test-data/ in the clone)")
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
