"""``manifest.json`` and ``stats.json``: the JSON writer of the release's records (``write_json_atomic``), the
toolkit's ``git_commit``, and the up-to-date check (``up_to_date_release``): a release in place whose manifest
carries a build's ``release_key`` and whose files are all there is left as it is (docs/architecture.md, "The
release step").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..core.atomic import atomic_write_json
from .writer import SHARD_RE

__all__ = [
    "RELEASE_FILES_FIELD",
    "RELEASE_KEY_FIELD",
    "RELEASE_ROWS_FIELD",
    "git_commit",
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
