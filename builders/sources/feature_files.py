"""NaSVA's per-second visual features (docs/evaluation.md; docs/corpora/howtostep.md, Inputs): one file per video,
``<features_dir>/**/<vid><ext>``, ``ext`` tried in the order of :data:`FEATURE_EXTS` (``.pth.tar``, ``.pth``, ``.pt``:
a tensor ``[T, C]`` or a dict with key ``features``, loaded with ``torch.load(..., weights_only=True)``; ``.npy``,
``.mp4.npy``: ``[T, C]``; ``.npz``: key ``features``), or rows of a per-shard store named by
``<features_dir>/features.refs.json`` (:class:`FeatureRef`: the HowToStep builder keeps one file per work shard, not
one per video). Loaded as float32; NaN/Inf, a wrong rank, zero rows or a feature size other than the expected one make
the video a named skip (:class:`FeatureError`).

A per-shard store file is the build's own cache: its name is the digest of its content
(``<sha256[:16]>.f16.npy`` / ``.sim.npy``, ``builders.sources.visual_features.write_store_block``: sha256 of the
dtype, shape and bytes), recorded in every reference to it. The first time a process opens one (and again when the
file changed), its bytes are hashed against that name, once (:func:`check_store_block`); later reads of its rows are
memory-mapped, with no hashing. A store file that is missing, cut short or whose bytes differ raises
:class:`builders.core.errors.DamagedCache` naming it, never a per-video skip: the work shard that wrote it must be
recomputed. A user's feature files are inputs, never checked this way (their reader turns damage into a skip).

A source module, below NaSVA: the builders read these files too (``builders/sources/visual_features.py``), and NaSVA
(``builders/nasva/``) imports them from here, so the packages do not import each other.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from builders.core.errors import DamagedCache


class NasvaInputError(ValueError):
    """Input that leaves nothing to do (unreadable labels file, no usable sample, a dimension clash)."""


class FeatureError(Exception):
    """A feature file that cannot be used; ``reason`` is the named skip reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


#: feature file extensions in lookup order (docs/corpora/howtostep.md, Inputs)
FEATURE_EXTS = (".pth.tar", ".pth", ".pt", ".npy", ".mp4.npy", ".npz")
_TORCH_EXTS = (".pth.tar", ".pth", ".pt")


#: a features folder may name videos stored in per-shard files: ``{video_id: FeatureRef.as_dict()}``
FEATURE_REFS_FILE = "features.refs.json"
DENSE, SIMULATED = "dense", "simulated"


@dataclass(frozen=True)
class FeatureRef:
    """One video's features inside a per-shard store file (``.npy``, read memory-mapped): rows ``[start, stop)``.

    ``kind``: ``dense`` -- the rows are the ``[T, C]`` features (fp16); ``simulated`` -- the rows are the video's
    narrations ``[start_s, end_s, e_1..e_D]`` (float64) from which the simulated features (docs/corpora/howtostep.md) are
    regenerated bit for bit (:func:`builders.ops.simulated_features.simulated_features`, ``frames`` = T, ``dim`` = C,
    rounded to fp16 as a stored copy would be): a deterministic function stored as its arguments, a quarter of the
    bytes or less."""

    path: str
    start: int
    stop: int
    kind: str = DENSE
    frames: int = 0
    dim: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "start": self.start, "stop": self.stop, "kind": self.kind, "frames": self.frames,
                "dim": self.dim}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FeatureRef:
        kind = str(d.get("kind", DENSE))
        if kind not in (DENSE, SIMULATED):
            raise ValueError(f"unknown feature reference kind {kind!r}")
        return cls(str(d["path"]), int(d["start"]), int(d["stop"]), kind, int(d.get("frames", 0)),
                   int(d.get("dim", 0)))

    @property
    def name(self) -> str:
        return f"{Path(self.path).name}[{self.start}:{self.stop}]"


def _read_refs(path: Path) -> dict[str, FeatureRef]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(vid): FeatureRef.from_dict(d) for vid, d in data.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise NasvaInputError(f"{path}: unreadable feature references ({type(e).__name__}: {e})") from e


def index_feature_files(features_dir: str | Path) -> dict[str, Path | FeatureRef]:
    """Map video id -> feature file under ``features_dir`` (recursive). When several files name the same video, the
    extension earlier in :data:`FEATURE_EXTS` wins, then the first path in sorted order. The videos that
    ``features_dir/features.refs.json`` names map to their :class:`FeatureRef` instead. An entry so named that is no
    regular file (a dangling link, a loop of links, a FIFO, and a directory when no file names the video) is listed
    like a file: loading it is that video's named ``bad_features`` drop, never a silent skip."""
    root = Path(features_dir)
    if not root.is_dir():
        raise NasvaInputError(f"features directory not found: {root}")
    best: dict[str, tuple[int, str]] = {}
    n_ranks = len(FEATURE_EXTS)
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name, penalty in [(f, 0) for f in sorted(files)] + [(d, n_ranks) for d in dirs]:
            matches = [(len(ext), rank, ext) for rank, ext in enumerate(FEATURE_EXTS)
                       if name.endswith(ext) and len(name) > len(ext)]
            if not matches:
                continue
            _, rank, ext = max(matches)  # the longest extension names the video: x.mp4.npy -> x
            rank += penalty  # a directory named like a feature file: only when no file names the video
            vid = name[: -len(ext)]
            if vid not in best or rank < best[vid][0]:
                best[vid] = (rank, os.path.join(dirpath, name))
    out: dict[str, Path | FeatureRef] = {vid: Path(p) for vid, (_, p) in best.items()}
    if (root / FEATURE_REFS_FILE).is_file():
        out.update(_read_refs(root / FEATURE_REFS_FILE))
    return out


#: the name of a per-shard store file: the first 16 hex digits of the sha256 of its dtype, shape and bytes
STORE_BLOCK_NAME = re.compile(r"^(?P<digest>[0-9a-f]{16})\.(?:f16|sim)\.npy\Z")
#: store files checked in this process: path -> (size, mtime_ns, inode) when checked
_CHECKED_BLOCKS: dict[str, tuple[int, int, int]] = {}


def store_block_digest(block: np.ndarray) -> str:
    """The digest that names a store file holding ``block`` (sha256 of its dtype, shape and bytes; 16 hex digits)."""
    block = np.ascontiguousarray(block)
    h = hashlib.sha256(f"{block.dtype.str}{block.shape}".encode())
    h.update(memoryview(block).cast("B"))
    return h.hexdigest()[:16]


def check_store_block(path: str | os.PathLike) -> np.ndarray:
    """The store file ``path`` memory-mapped, its bytes checked once per process against the digest its name holds
    (``STORE_BLOCK_NAME``; a file named otherwise is not checked). :class:`DamagedCache` when it is missing, cut
    short, not ``.npy`` any more or its content differs."""
    path = str(path)
    m = STORE_BLOCK_NAME.match(os.path.basename(path))
    if m is None:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    try:
        st = os.stat(path)
        ident = (st.st_size, st.st_mtime_ns, st.st_ino)
        block = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError as err:
        raise DamagedCache(path, "missing (a feature store file the rows of a work shard name)") from err
    except (OSError, ValueError, EOFError) as err:  # cut short, or a header that no longer parses
        raise DamagedCache(path, f"not a readable store file ({type(err).__name__}: {err})") from err
    if _CHECKED_BLOCKS.get(path) == ident:
        return block
    got = store_block_digest(block)  # the one pass over the bytes, in this process
    if got != m["digest"]:
        raise DamagedCache(path, f"content digest {got} differs from the {m['digest']} its name records")
    if len(_CHECKED_BLOCKS) > 100_000:
        _CHECKED_BLOCKS.clear()
    _CHECKED_BLOCKS[path] = ident
    return block


def _load_feature_ref(ref: FeatureRef) -> np.ndarray:
    """The rows a :class:`FeatureRef` names, as a ``[T, C]`` array (simulated ones regenerated, fp16-rounded). The
    store file is checked the first time this process opens it (:func:`check_store_block`)."""
    if not 0 <= ref.start <= ref.stop:
        raise FeatureError("bad_features", f"{ref.name}: bad row range")
    block = check_store_block(ref.path)
    if block.ndim != 2 or ref.stop > block.shape[0]:
        raise FeatureError("bad_features", f"{ref.name}: rows outside the store file of shape {block.shape}")
    rows = np.array(block[ref.start:ref.stop])
    del block
    if ref.kind == DENSE:
        return rows
    from builders.ops.simulated_features import simulated_features

    if rows.shape[1] < 3 or ref.frames < 1 or ref.dim < 1:
        raise FeatureError("bad_features", f"{ref.name}: not simulated-feature factors")
    try:
        x = simulated_features(rows[:, 2:], rows[:, 0], rows[:, 1], ref.frames, dim=ref.dim, seed=0)
    except ValueError as e:
        raise FeatureError("bad_features", f"{ref.name}: {e}") from e
    return x.astype(np.float16)


def load_feature_file(path: str | Path | FeatureRef, allow_nonfinite: bool = False) -> np.ndarray:
    """Read one per-second feature file (or the rows a :class:`FeatureRef` names) as float32 ``[T, C]``; raise
    :class:`FeatureError` with a named reason."""
    p = Path(path.path) if isinstance(path, FeatureRef) else Path(path)
    name = p.name
    try:
        if isinstance(path, FeatureRef):
            p = Path(path.name)
            arr = _load_feature_ref(path)
        elif name.endswith(_TORCH_EXTS):
            import torch
            from torch import Tensor

            obj = torch.load(p, map_location="cpu", weights_only=True)
            if isinstance(obj, Mapping):
                if "features" not in obj:
                    raise FeatureError("bad_features", f"{p}: dict without a 'features' entry "
                                                       f"(keys: {sorted(map(str, obj))[:5]})")
                obj = obj["features"]
            if isinstance(obj, Tensor):
                arr = obj.detach().to(torch.float32).numpy()
            elif isinstance(obj, np.ndarray):
                arr = obj
            else:
                raise FeatureError("bad_features", f"{p}: holds a {type(obj).__name__}, not a tensor")
        elif name.endswith(".npz"):
            with np.load(p, allow_pickle=False) as z:
                if "features" not in z.files:
                    raise FeatureError("bad_features", f"{p}: npz without a 'features' array")
                arr = z["features"]
        elif name.endswith(".npy"):
            arr = np.load(p, allow_pickle=False)
        else:
            raise FeatureError("bad_features", f"{p}: unknown feature file extension")
    except (FeatureError, DamagedCache):  # a damaged store file is the build's cache: not a skip
        raise
    except FileNotFoundError as e:
        raise FeatureError("missing_features", f"{p}: {e}") from e
    except Exception as e:  # corrupt file, pickled objects refused by weights_only, ...
        raise FeatureError("unreadable_features", f"{p}: {type(e).__name__}: {e}") from e
    arr = np.asarray(arr)
    if arr.ndim != 2:
        raise FeatureError("bad_features", f"{p}: expected [T, C] features, got shape {tuple(arr.shape)}")
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
        raise FeatureError("bad_features", f"{p}: non-numeric dtype {arr.dtype}")
    if arr.shape[0] == 0:
        raise FeatureError("empty_features", f"{p}: zero rows")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not allow_nonfinite and not np.isfinite(arr).all():  # HowToStep repairs <= 5% of such rows (docs/reason-codes.md)
        raise FeatureError("nan_features", f"{p}: {int((~np.isfinite(arr)).any(1).sum())} rows hold NaN/Inf")
    return arr


class FeatureStore:
    """Validated access to the feature files of a directory: each file is read and checked once by :meth:`probe`,
    and kept in memory while the total stays under ``preload_max_bytes`` (else read again on :meth:`get`)."""

    def __init__(self, features_dir: str | Path, expected_dim: int | None = None, max_rows: int | None = None,
                 preload_max_bytes: int = 2 << 30):
        self.root = Path(features_dir)
        self.index = index_feature_files(self.root)
        self.expected_dim = expected_dim
        self.max_rows = max_rows
        self.preload_max_bytes = int(preload_max_bytes)
        self._mem: dict[str, np.ndarray] = {}
        self._bytes = 0
        self.full_rows: dict[str, int] = {}

    def _read(self, vid: str) -> np.ndarray:
        path = self.index.get(vid)
        if path is None:
            raise FeatureError("missing_features", f"no feature file for video {vid!r} under {self.root}")
        arr = load_feature_file(path)
        if self.expected_dim is not None and arr.shape[1] != self.expected_dim:
            raise FeatureError("feature_dim_mismatch", f"{path}: feature size {arr.shape[1]}, expected "
                                                       f"{self.expected_dim}")
        self.full_rows[vid] = arr.shape[0]
        if self.max_rows is not None:
            arr = arr[: self.max_rows]
        return arr

    def probe(self, vid: str) -> int:
        """Read and validate the video's features; return its (truncated) number of rows. The first valid file
        fixes ``expected_dim`` when none was given."""
        if vid in self._mem:
            return int(self._mem[vid].shape[0])
        arr = self._read(vid)
        if self.expected_dim is None:
            self.expected_dim = int(arr.shape[1])
        if self._bytes + arr.nbytes <= self.preload_max_bytes:
            self._mem[vid] = arr
            self._bytes += arr.nbytes
        return int(arr.shape[0])

    def get(self, vid: str) -> np.ndarray:
        arr = self._mem.get(vid)
        return arr if arr is not None else self._read(vid)
