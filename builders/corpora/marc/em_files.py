"""Files of the ``hmm_ibm1`` stage (docs/corpora/marc.md, "EM in bounded memory"): the train pairs EM reads shard by
shard (:class:`DiskPairShards`), and the fitted tables that workers memory-map (:func:`save_tables`,
:func:`load_tables`).

The pair shards are working files of one fit: written in the fit's artefact folder, read back five times (one pass
per EM iteration) and removed when the fit ends; a fit cut short leaves them to the refit, which starts from an
empty folder. The tables are a cache of the fit: each array is one ``.npy`` file (``np.load(mmap_mode="r")`` maps
it, so the workers of one machine share its pages instead of holding copies) whose sha256, dtype and shape are
recorded in a checked JSON file beside it (builders/core/checked.py). A reader checks every file before mapping it;
a table found damaged or missing raises :class:`DamagedCache`, and the build fits the stage again
(builders/core/repair.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...core.atomic import atomic_path, atomic_write_text
from ...core.errors import DamagedCache
from ...ops.pair_shards import EncodedPairs

__all__ = ["DiskPairShards", "load_tables", "save_tables"]


def _save_folder(folder: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """One ``.npy`` file per array (read back without the zip CRC pass of ``.npz``, mapped instead of copied)."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, a in arrays.items():
        np.save(folder / f"{k}.npy", np.asarray(a), allow_pickle=False)
    (folder / "_complete").touch()


def _load_folder(folder: Path) -> dict[str, np.ndarray]:
    if not (folder / "_complete").exists():
        raise FileNotFoundError(f"{folder}: not written completely")
    return {p.name[:-4]: np.load(p, mmap_mode="r", allow_pickle=False) for p in sorted(folder.glob("*.npy"))}


class DiskPairShards:
    """The train pairs of one model as folders ``pairs-<i>`` of ``.npy`` files in ``root``
    (:class:`~builders.ops.pair_shards.PairShards`), with the packed chunks of each in ``packed-<i>``.

    It counts the pairs of the shards it has handed out that are still alive (a shard lives as long as the packed
    pairs laid out from it): ``max_resident_pairs`` is the most there were at once, which the tests hold to one
    shard's pairs.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.n = 0
        self.pairs = 0
        self.max_shard_pairs = 0
        self.resident_pairs = 0
        self.max_resident_pairs = 0

    def _path(self, kind: str, i: int) -> Path:
        return self.root / f"{kind}-{i:05d}"

    def append(self, shard: EncodedPairs) -> None:
        _save_folder(self._path("pairs", self.n), shard.arrays())
        self.n += 1
        self.pairs += shard.pairs
        self.max_shard_pairs = max(self.max_shard_pairs, shard.pairs)

    def __len__(self) -> int:
        return self.n

    def load(self, i: int) -> EncodedPairs:
        shard = EncodedPairs.from_arrays(_load_folder(self._path("pairs", i)))
        self.resident_pairs += shard.pairs
        self.max_resident_pairs = max(self.max_resident_pairs, self.resident_pairs)
        weakref.finalize(shard, self._released, shard.pairs)
        return shard

    def _released(self, pairs: int) -> None:
        self.resident_pairs -= pairs

    def save_packed(self, i: int, arrays: Mapping[str, np.ndarray]) -> None:
        _save_folder(self._path("packed", i), arrays)

    def load_packed(self, i: int) -> Mapping[str, np.ndarray]:
        return _load_folder(self._path("packed", i))


def _table_dir(root: Path, name: str) -> Path:
    return Path(root) / name


def _record_path(root: Path, name: str) -> Path:
    return Path(root) / f"{name}.json"


def save_tables(root: Path, name: str, arrays: Mapping[str, np.ndarray], meta: Any) -> None:
    """Write each array as ``<root>/<name>/<key>.npy`` and ``<root>/<name>.json``: ``meta`` and, per array, the
    sha256, dtype and shape of its file (a checked JSON file, written last)."""
    from ...core.checked import checked_json, sha256_file   # pyarrow: imported when a fit runs, not at import

    folder = _table_dir(root, name)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for key, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype == object:
            raise TypeError(f"table {name}/{key}: object arrays are not allowed (they would need pickle)")
        path = folder / f"{key}.npy"
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, a, allow_pickle=False)
        files[key] = {"sha256": sha256_file(path), "dtype": a.dtype.str, "shape": list(a.shape)}
    atomic_write_text(_record_path(root, name), checked_json({"meta": meta, "files": files}))


def load_tables(root: Path, name: str) -> tuple[dict[str, np.ndarray], Any]:
    """The arrays written by :func:`save_tables`, memory-mapped read-only, and their ``meta``, after checking every
    file against its record; :class:`DamagedCache` names the first file that is missing or not what was written."""
    from ...core.checked import read_checked_json, sha256_file

    record_path = _record_path(root, name)
    try:
        record = read_checked_json(record_path)
    except FileNotFoundError:
        raise DamagedCache(record_path, "missing: the fitted tables are incomplete") from None
    arrays = {}
    for key, want in record["files"].items():
        path = _table_dir(root, name) / f"{key}.npy"
        try:
            got = sha256_file(path)
        except FileNotFoundError:
            raise DamagedCache(path, "missing: the fitted tables are incomplete") from None
        except OSError as err:
            raise DamagedCache(path, f"unreadable ({err.strerror or err})") from err
        if got != want["sha256"]:
            raise DamagedCache(path, f"sha256 {got[:12]}... differs from the {want['sha256'][:12]}... recorded when "
                                     "it was written")
        try:
            a = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as err:  # the digest matched: not the disk's doing, but not usable either
            raise DamagedCache(path, f"not a .npy file ({err})") from err
        if a.dtype.str != want["dtype"] or list(a.shape) != want["shape"]:
            raise DamagedCache(path, f"{a.dtype.str} {list(a.shape)} instead of {want['dtype']} {want['shape']}")
        arrays[key] = a
    return arrays, record["meta"]
