"""``manifest.json`` and ``stats.json``: the JSON writer of the release's records (``write_json_atomic``), the
toolkit's ``git_commit``, the up-to-date check (``up_to_date_release``): a release in place whose manifest
carries a build's ``release_key`` and whose files are all there is left as it is (docs/architecture.md, "The
release step"), and where the build's inputs lie seen from the release (``input_paths``, ``inputs_root``).
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..core.atomic import atomic_write_json
from ..core.fingerprint import relative_paths
from .writer import SHARD_RE

__all__ = [
    "INPUTS_ROOT_FIELD",
    "RELEASE_FILES_FIELD",
    "RELEASE_KEY_FIELD",
    "RELEASE_ROWS_FIELD",
    "git_commit",
    "input_paths",
    "inputs_root",
    "release_listing",
    "up_to_date_release",
    "write_json_atomic",
]


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON (sorted keys, indent 2) via a hidden temp file and ``os.replace`` (docs/publishing.md;
    ``builders.core.atomic.atomic_write_json``).

    Used for ``stats.json`` and ``manifest.json``. Numpy scalars/arrays, sets and paths are converted.
    """
    return atomic_write_json(path, obj, sort_keys=True, indent=2, ensure_ascii=False, default=_json_default)


def git_commit() -> str | None:
    """The toolkit's git commit (``None`` outside a checkout), recorded in manifests and cards."""
    import subprocess

    try:
        root = Path(__file__).resolve().parents[2]
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


RELEASE_KEY_FIELD = "release_key"
RELEASE_FILES_FIELD = "release_files"
RELEASE_ROWS_FIELD = "release_rows"
#: manifest.json: the folder the recorded input paths (``config``, ``inputs``) are relative to, as a path relative
#: to the release folder (``inputs_root``); ``null`` when it would reveal more than relative names
INPUTS_ROOT_FIELD = "inputs_root"


def input_paths(conf: Mapping[str, Any], path_keys: Iterable[str]) -> dict[str, list[str]]:
    """Config key -> the absolute paths of the inputs a build was given (the ``path_keys`` of its config ``conf``,
    resolved against the build's current directory). Held in memory while the release is written (the explorer
    reads the build's media through them); never written into a release."""
    out: dict[str, list[str]] = {}
    for k in path_keys:
        v = conf.get(k)
        values = [v] if isinstance(v, (str, os.PathLike)) else list(v or []) if isinstance(v, (list, tuple)) else []
        paths = [os.path.abspath(os.fspath(x)) for x in values if x]
        if paths:
            out[k] = paths
    return out


def _common_root(paths: list[str]) -> Path | None:
    """The folder ``relative_paths`` makes ``paths`` relative to (``None`` when they have none in common)."""
    roots: set[Path | None] = set()
    for p, r in relative_paths(paths).items():
        a, depth = Path(os.path.abspath(p)), len(Path(r).parts)
        roots.add(a.parents[depth - 1] if 0 < depth <= len(a.parents) else None)
    return roots.pop() if len(roots) == 1 else None


def inputs_root(release_dir: str | os.PathLike, paths: Iterable[str]) -> str | None:
    """The common folder of a build's input ``paths`` (the one ``manifest.json`` records them relative to), as a
    ``/``-separated path relative to ``release_dir`` (e.g. ``../../inputs``): the explorer finds the media through it
    from any current directory, as long as the release and the inputs stay where they are.

    ``None`` (nothing recorded) when the path would say more than the names below the two folders' common ancestor:
    when that ancestor is the filesystem root or lies above the home folder (the path would climb to ``/`` and name
    every folder down, or pass through a user's home), or when a folder on the way down is named like the user.
    """
    paths = [os.fspath(p) for p in paths]
    root = _common_root(paths) if paths else None
    if root is None:
        return None
    root_s, release = os.path.realpath(root), os.path.realpath(release_dir)
    try:
        common = os.path.commonpath([root_s, release])
    except ValueError:  # different drives (Windows)
        return None
    if os.path.dirname(common) == common:
        return None
    names: set[str] = set()
    try:
        home = os.path.realpath(Path.home())
        names.add(Path(home).name)
        if os.path.commonpath([home, common]) == common and home != common:
            return None
    except (RuntimeError, KeyError, ValueError, OSError):  # no home folder known: only the user name is checked
        pass
    try:
        names.add(getpass.getuser())
    except (KeyError, OSError, ImportError):
        pass
    if names & set(Path(os.path.relpath(root_s, common)).parts):
        return None
    return Path(os.path.relpath(root_s, release)).as_posix()


def release_listing(root: str | os.PathLike) -> dict[str, int | None]:
    """What ``up_to_date_release`` checks later: ``README.md`` and every Parquet shard of a config folder with their
    sizes in bytes, plus every other top-level entry by name (size ``None``; ``manifest.json`` left out)."""
    root = Path(root)
    out: dict[str, int | None] = {}
    for p in sorted(root.iterdir()):
        if p.name.startswith(".") or p.name == "manifest.json":
            continue
        if p.name == "README.md":
            out[p.name] = p.stat().st_size
        elif p.is_dir() and any(SHARD_RE.match(q.name) for q in p.iterdir()):
            for q in sorted(p.iterdir()):
                if SHARD_RE.match(q.name):
                    out[f"{p.name}/{q.name}"] = q.stat().st_size
        else:
            out[p.name] = None
    return out


def up_to_date_release(out_dir: str | os.PathLike, key: str) -> dict[str, dict[str, int]] | None:
    """``{config: {split: rows}}`` of the release at ``out_dir`` when its ``manifest.json`` carries ``release_key ==
    key`` and every file it lists is present (shards and ``README.md`` with their recorded sizes); else ``None``.

    Reads the manifest and the Parquet footers only: seconds at any size.
    """
    out_dir = Path(out_dir)
    try:
        man = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    listing = man.get(RELEASE_FILES_FIELD) if isinstance(man, dict) else None
    if man.get(RELEASE_KEY_FIELD) != key or not isinstance(listing, dict) or "README.md" not in listing:
        return None
    counts: dict[str, dict[str, int]] = {}
    for rel, size in listing.items():
        p = out_dir / rel
        if not p.exists() or (size is not None and (not p.is_file() or p.stat().st_size != size)):
            return None
        cfg, _, name = rel.partition("/")
        m = SHARD_RE.match(name) if name else None
        if m:
            try:
                rows = pq.ParquetFile(p).metadata.num_rows
            except Exception:  # noqa: BLE001 - an unreadable shard means the release must be rewritten
                return None
            counts.setdefault(cfg, {})
            counts[cfg][m["split"]] = counts[cfg].get(m["split"], 0) + rows
    recorded = man.get(RELEASE_ROWS_FIELD)
    if recorded != counts:  # dict equality: the same configs, splits and row counts (the order is the manifest's)
        return None
    return {c: dict(sp) for c, sp in recorded.items()}
