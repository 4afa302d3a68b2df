"""Where a corpus is loaded from, and which versions of it are published on the Hub (docs/publishing.md).

``resolve(corpus, repo=None, revision=None)`` picks, in order:

1. the local folder ``./<corpus>`` (what ``python -m builders.build <corpus>`` writes in the current directory),
   unless a ``repo`` or a ``revision`` is asked for (a local folder has no versions); a release whose swap a killed
   build left half done (``./.<corpus>.old`` and no ``./<corpus>``) is renamed back first;
2. the Hub repo ``repo=`` (``"org/name"``);
3. ``<PROCVID_HUB_ORG>/<corpus>`` when the environment variable ``PROCVID_HUB_ORG`` is set;
4. the corpus's default repo ``<DEFAULT_ORG>/<corpus>``.

Published versions are git tags ``vMAJOR.MINOR.PATCH`` on the dataset repo: ``versions(repo)`` lists them, and
``load_dataset(repo, config, revision="v1.0.0")`` loads one exactly as it was published.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

ORG_ENV = "PROCVID_HUB_ORG"
DEFAULT_ORG = "procvid-corpora"
_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)\Z")


def restore_interrupted_swap(folder: str | os.PathLike) -> bool:
    """Rename ``.<name>.old`` back to ``<name>`` when a build was killed between the two renames of its release swap
    (``builders.release.swap.swap_into_place``) and left no ``<name>``; returns whether it did.

    Done under the build's release lock (``.<name>.lock``, taken without waiting): while a build holds it, the swap
    is in progress and is left alone. Without ``fcntl`` or write access nothing is done.
    """
    folder = Path(folder)
    old = folder.with_name(f".{folder.name}.old")
    if folder.exists() or not old.is_dir():
        return False
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return False
    try:
        fd = os.open(folder.with_name(f".{folder.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if folder.exists() or not old.is_dir():
            return False
        os.replace(old, folder)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def resolve(corpus: str, repo: str | None = None, revision: str | None = None) -> str:
    """The path or Hub repo id to load ``corpus`` from (see the module docstring)."""
    local = Path.cwd() / corpus
    if repo is None and revision is None:
        restore_interrupted_swap(local)
    if repo is None and revision is None and local.is_dir():
        return str(local)   # absolute: forces the local folder (docs/publishing.md)
    if repo:
        if repo.count("/") != 1:
            raise ValueError(f"repo must be a namespaced Hub id 'org/name', got {repo!r}")
        return repo
    org = os.environ.get(ORG_ENV) or DEFAULT_ORG
    return f"{org}/{corpus}"


def load(corpus: str, configs: Any, default_config: str, config: str | None = None, split: str | None = None,
         revision: str | None = None, repo: str | None = None, **kw: Any):
    """``datasets.load_dataset`` of ``corpus`` from wherever :func:`resolve` points, for a known config."""
    from datasets import load_dataset

    config = config or default_config
    if config not in configs:
        raise ValueError(f"unknown {corpus} config {config!r}; expected one of {sorted(configs)}")
    return load_dataset(resolve(corpus, repo, revision), config, split=split, revision=revision, **kw)


def versions(repo: str, token: str | bool | None = None) -> list[dict[str, Any]]:
    """The published versions (tags) of a Hub dataset repo, oldest first by semantic version:
    ``[{"version": "v1.0.0", "commit": "<sha>", "date": datetime}, ...]`` (non-semantic tags last, by name)."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    out = []
    for t in api.list_repo_refs(repo, repo_type="dataset").tags:
        commits = api.list_repo_commits(repo, repo_type="dataset", revision=t.target_commit)
        out.append({"version": t.name, "commit": t.target_commit, "date": commits[0].created_at if commits else None})

    def key(v: dict[str, Any]) -> tuple:
        m = _SEMVER.match(v["version"])
        return (0, tuple(int(x) for x in m.groups()), "") if m else (1, (), v["version"])

    return sorted(out, key=key)
