"""What is uploaded (docs/publishing.md, "Publishing a version"): the release folder's layout read from its README
(``read_layout``), the files sent (``upload_files``: hidden files, ``*.lock`` and ``*.tmp`` left out), the hidden
upload stage holding them with the README's release notes (``staged``), the comparison with a published tag
(``compare``), and the local publish records in ``manifest.json`` (``record``, never uploaded).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import PublishError
from .notes import strip_notes
from .retry import STAGES

__all__ = ["IGNORE_PATTERNS", "Layout", "MANIFEST_KEY", "compare", "read_layout", "record", "staged", "upload_files"]

IGNORE_PATTERNS = ["*.lock", "*.tmp", "**/LICENSE", "**/dataset_info.json", ".*", "**/.*"]
MANIFEST_KEY = "hub"   # local publish records in manifest.json, never uploaded


@dataclass
class Layout:
    """What a release folder declares in its README."""

    features: dict[str, Any]              # config -> datasets.Features
    splits: dict[str, list[str]]          # config -> splits
    rows: dict[str, dict[str, int]]       # config -> split -> num_examples (README)
    default: str


def read_layout(folder: str | os.PathLike) -> Layout:
    """Configs, splits, Features, row counts and default config from ``<folder>/README.md``."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    folder = Path(folder)
    readme = folder / "README.md"
    if not folder.is_dir():
        raise PublishError(f"{folder} is not a directory")
    if not readme.is_file():
        raise PublishError(f"{folder} is not a release folder: it has no README.md (build it with "
                           "python -m builders.build <corpus>)")
    try:
        data = DatasetCard.load(readme).data
        configs = MetadataConfigs.from_dataset_card_data(data)
        infos = DatasetInfosDict.from_dataset_card_data(data)
    except Exception as e:  # noqa: BLE001
        raise PublishError(f"{folder} is not a release folder: README.md metadata does not parse: {e}") from e
    if not configs or not infos:
        raise PublishError(f"{folder} is not a release folder: README.md has no 'configs:' and 'dataset_info:'")
    features, splits, rows = {}, {}, {}
    for name, cfg in configs.items():
        info = infos.get(name)
        if info is None or info.features is None or not info.splits:
            raise PublishError(f"{folder}: config {name!r} has no dataset_info (features and splits) in README.md")
        files = cfg.get("data_files") or []
        splits[name] = [f["split"] for f in files] if isinstance(files, list) else list(files)
        features[name] = info.features
        rows[name] = {s: info.splits[s].num_examples for s in splits[name] if s in info.splits}
    defaults = [n for n, c in configs.items() if c.get("default")]
    default = defaults[0] if len(defaults) == 1 else (next(iter(configs)) if len(configs) == 1 else None)
    if default is None:
        raise PublishError(f"{folder}: README.md must mark exactly one config 'default: true'")
    return Layout(features, splits, rows, default)


def _ignored(rel: str) -> bool:
    return any(fnmatch.fnmatch(rel, p) for p in IGNORE_PATTERNS) or any(
        part.startswith(".") for part in rel.split("/"))


def upload_files(folder: str | os.PathLike) -> list[str]:
    """The files of a release folder that are uploaded (relative POSIX paths, sorted)."""
    folder = Path(folder)
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and not _ignored(rel):
            out.append(rel)
    return sorted(out)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _load_manifest(folder: Path) -> dict[str, Any] | None:
    p = folder / "manifest.json"
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        return None


def record(folder: Path, rec: dict[str, Any]) -> None:
    """Add or update the publish record ``rec`` (keyed by repo + version) in ``<folder>/manifest.json``."""
    from ..release.manifest import write_json_atomic

    man = _load_manifest(folder) or {}
    hub = man.setdefault(MANIFEST_KEY, {})
    recs = [r for r in hub.get("releases", []) if (r.get("repo"), r.get("version")) != (rec["repo"], rec["version"])]
    recs.append(rec)
    hub["releases"] = recs
    write_json_atomic(folder / "manifest.json", man)


@contextlib.contextmanager
def staged(folder: Path, files: list[str], readme: str) -> Iterator[Path]:
    """A hidden sibling folder holding the upload set (hard links where possible), removed afterwards."""
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{folder.name}.publish-", dir=folder.parent))
    except OSError:
        stage = Path(tempfile.mkdtemp(prefix=f".{folder.name}.publish-"))
    STAGES.add(stage)
    try:
        for rel in files:
            src, dst = folder / rel, stage / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if rel == "README.md":
                dst.write_text(readme, encoding="utf-8")
            elif rel == "manifest.json" and (man := _load_manifest(folder)) is not None and MANIFEST_KEY in man:
                from ..release.manifest import write_json_atomic

                man.pop(MANIFEST_KEY)
                write_json_atomic(dst, man)   # the serializer that wrote it: the same bytes as before any record
            else:
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copy2(src, dst)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        STAGES.discard(stage)


def compare(api: Any, repo: str, tag: str, stage: Path, files: list[str]) -> list[str]:
    """Differences between the files at ``tag`` and the upload set (``[]`` when identical)."""
    from huggingface_hub import hf_hub_download

    remote = {e.path: e for e in api.list_repo_tree(repo, repo_type="dataset", revision=tag, recursive=True)
              if hasattr(e, "blob_id") and e.path != ".gitattributes"}
    diffs = [f"{p}: only in {tag} on the Hub" for p in sorted(set(remote) - set(files))]
    diffs += [f"{p}: only in the local release" for p in sorted(set(files) - set(remote))]
    for rel in sorted(set(files) & set(remote)):
        e, local = remote[rel], stage / rel
        if e.lfs is not None:
            same = e.lfs.sha256 == _sha256(local)
        else:
            same = e.blob_id == _git_sha1(local.read_bytes())
        if not same and rel == "README.md":
            with tempfile.TemporaryDirectory() as d:
                got = Path(hf_hub_download(repo, "README.md", repo_type="dataset", revision=tag, local_dir=d))
                same = strip_notes(got.read_text(encoding="utf-8")) == strip_notes(local.read_text("utf-8"))
        if not same:
            diffs.append(f"{rel}: content differs")
    return diffs
