"""Artefacts of global stages, stored BY PATH in the stage's own folder (docs/architecture.md, "Caching and resume"): arrays as
``.npz`` (read back with ``allow_pickle=False``), metadata and tables as JSON. Workers load them in ``setup``; nothing
is pickled to them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import atomic_path, atomic_write_text
from .orchestrate import ARTEFACTS_KEY


def artefact_dir(state: Mapping[str, Any]) -> Path:
    """The artefact folder of a fitted state (the orchestrator adds it under ``_artefacts``)."""
    return Path(state[ARTEFACTS_KEY])


def _safe(root: Path, name: str) -> Path:
    path = (Path(root) / name).resolve()
    if not path.is_relative_to(Path(root).resolve()):
        raise ValueError(f"artefact name {name!r} escapes its folder {root}")
    return path


def save_arrays(root: Path, name: str, arrays: Mapping[str, np.ndarray], meta: Any = None) -> str:
    """Write ``<name>.npz`` (and ``<name>.json`` for ``meta``) under ``root``; returns ``name``."""
    path = _safe(root, f"{name}.npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    for k, a in arrays.items():
        if np.asarray(a).dtype == object:
            raise TypeError(f"artefact {name}/{k}: object arrays are not allowed (they would need pickle)")
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **{k: np.asarray(a) for k, a in arrays.items()})
    if meta is not None:
        save_json(root, name, meta)
    return name


def load_arrays(root: Path, name: str, with_meta: bool = False) -> Any:
    """``{key: array}`` of ``<name>.npz`` (and its meta when ``with_meta``)."""
    with np.load(_safe(root, f"{name}.npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return (arrays, load_json(root, name)) if with_meta else arrays


def save_json(root: Path, name: str, obj: Any) -> str:
    path = _safe(root, f"{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(obj, sort_keys=True, ensure_ascii=False))
    return name


def load_json(root: Path, name: str) -> Any:
    return json.loads(_safe(root, f"{name}.json").read_text(encoding="utf-8"))
