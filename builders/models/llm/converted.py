"""Model folders converted once from a packaged file and kept in the model cache (``$PROCVID_MODEL_CACHE`` or
``~/.cache/procvid-corpora/models``, :func:`builders.models.text_encoder.model_cache_dir`).

A folder is named ``<subdir>/<source stem>-<key digest>`` and keyed by what the conversion depends on (the source
file's sha256, library versions, the recipe's version). It is written under a hidden temp name and renamed into place,
with ``complete.json`` (the key and what the conversion returned) written last: a folder without it, with another key,
missing a required file or with a main file of another size is never used (it is moved aside and converted again).
Two processes converting at once both convert; the first rename wins, the other reuses it. Users: the CTranslate2
model of ``smollm2-ct2`` (:mod:`.ct2`) and the transformers folder of ``smollm2`` (:mod:`.smollm2`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["COMPLETE", "converted_folder", "file_sha256", "folder_is_complete", "key_digest"]

#: the marker written last into a converted folder; a folder without it is partial
COMPLETE = "complete.json"

_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised in-process by (path, size, mtime)."""
    st = path.stat()
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if memo not in _SHA_MEMO:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _SHA_MEMO[memo] = h.hexdigest()
    return _SHA_MEMO[memo]


def key_digest(key: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def folder_is_complete(folder: Path, key: dict[str, str], required: tuple[str, ...]) -> bool:
    """True when ``folder`` holds a finished conversion under ``key``: its ``complete.json`` says so, every
    ``required`` file is there and the first one has the recorded size."""
    try:
        meta = json.loads((folder / COMPLETE).read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("key") != key:
            return False
        if not all((folder / name).is_file() for name in required):
            return False
        return (folder / required[0]).stat().st_size == meta.get("model_bytes")
    except (OSError, ValueError):
        return False


def converted_folder(source: Path, root: Path, subdir: str, key: dict[str, str], required: tuple[str, ...],
                     convert: Callable[[Path], dict]) -> Path:
    """The converted folder of ``source`` under ``root/subdir`` (module docstring), made on first use by
    ``convert(out_dir) -> metadata`` (JSON-able; kept in ``complete.json``), which writes ``required`` into
    ``out_dir``."""
    target = root / subdir / f"{source.stem}-{key_digest(key)[:16]}"
    if folder_is_complete(target, key, required):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as e:
        raise OSError(e.errno, f"cannot write the model cache {target.parent} ({e.strerror}): set "
                               "PROCVID_MODEL_CACHE to a writable folder") from e
    try:
        t0 = time.perf_counter()
        model = tmp / "model"
        meta = convert(model)
        marker = {**meta, "key": key, "source": source.name, "model_bytes": (model / required[0]).stat().st_size,
                  "convert_seconds": round(time.perf_counter() - t0, 2)}
        (model / COMPLETE).write_text(json.dumps(marker, indent=1, sort_keys=True), encoding="utf-8")
        if target.exists() and not folder_is_complete(target, key, required):  # partial or foreign: set aside
            stale = target.parent / f".{target.name}.stale-{os.getpid()}-{time.time_ns()}"
            try:
                os.rename(target, stale)
            except FileNotFoundError:
                pass
            else:
                shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(model, target)
        except OSError:
            if not folder_is_complete(target, key, required):  # another process's rename did not win with a good one
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
