"""Fingerprints that key the caches: inputs (file contents), step name + version + config, and the chain.

Releases.md §6: datasets' own fingerprints ignore file contents, so every cache key here includes a hash of the
input files. Files up to ``FULL_HASH_LIMIT`` bytes are hashed whole; larger ones by size, mtime and their first
and last MiB (specs/sieve_swap.md §3.7 allows sizes + mtimes).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

FULL_HASH_LIMIT = 256 * 1024 * 1024
_EDGE = 1024 * 1024


def stable_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def hash_obj(*parts: Any) -> str:
    return hashlib.sha256(stable_json(parts).encode("utf-8")).hexdigest()


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """Content fingerprint of a file or of a directory (every regular file below it, sorted)."""
    p = Path(path)
    if p.is_dir():
        h = hashlib.sha256()
        n = 0
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(files):
                f = Path(root) / name
                h.update(str(f.relative_to(p)).encode())
                h.update(file_fingerprint(f)["sha256"].encode())
                n += 1
        return {"path": str(p), "kind": "dir", "files": n, "sha256": h.hexdigest()}
    st = p.stat()
    h = hashlib.sha256()
    with open(p, "rb") as f:
        if st.st_size <= FULL_HASH_LIMIT:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            mode = "content"
        else:
            h.update(f.read(_EDGE))
            f.seek(-_EDGE, os.SEEK_END)
            h.update(f.read(_EDGE))
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
            mode = "size+mtime+edges"
    return {"path": str(p), "kind": "file", "bytes": st.st_size, "mode": mode, "sha256": h.hexdigest()}
