"""Per-second visual feature files of the HowToStep builder (docs/corpora/howtostep.md "Inputs", docs/reason-codes.md).

Row ``t`` of a ``[T, C]`` file summarises video seconds ``[t, t+1)`` (one row a second, as the features NaSVA is
trained on: Li et al., ECCV 2024, supp. §6.1, "one visual feature (768-d) per second"). Files are looked up as
``<features_dir>/**/<vid><ext>`` (``ext`` in the order of :data:`builders.sources.feature_files.FEATURE_EXTS`: ``.pth.tar``,
``.pth``, ``.pt``, ``.npy``, ``.mp4.npy``, ``.npz``) or through a ``{vid: subfolder-or-path}`` json index. The
decoding is the NaSVA reader's (:func:`builders.sources.feature_files.load_feature_file`: ``torch.load(...,
weights_only=True)``, ``np.load(..., allow_pickle=False)``), so the builder and the labeler accept exactly the same
files. On top of it this module applies the rules of docs/reason-codes.md (every threshold a config key of
docs/configuration.md, ``howtostep``):

- ``C`` must equal the configured ``visual_dim``; ``T = 0``; a file over ``max_bytes``; an unreadable, corrupt or
  pickle-only file: ``bad_features``;
- *bad rows*: rows holding NaN/Inf, a value beyond ``feature_max_abs`` (default the fp16 maximum 65,504 of the
  feature store: a larger value overflows the first product it enters) or all zeros. More than
  ``feature_max_bad_share`` (default 5%) of ``T`` → ``bad_features``; otherwise each bad row is replaced by the
  nearest valid row before it (forward fill), leading bad rows by the first valid row (backward fill), counted as
  ``features_repaired``;
- ``T`` against the video's duration (:func:`check_feature_duration`): off by more than
  ``max(feature_duration_tolerance_s, feature_duration_tolerance_frac x duration)`` → ``feature_duration_mismatch``
  (a 100,000-row file for a 151 s video no longer makes it a 100,000 s video). Without a video file only a file far
  longer than the narrations (or with no row) is refused: a shorter one is the video, as in TAN's pipeline that
  HowToStep follows (Li et al., ECCV 2024, supp. §6.1), and the caller drops the narrations that start after it;
- no file for a video: ``missing_features``.

Computed features (``visual_features=compute``) are stored as fp16 ``[T, C]`` ``.npy``: by
:func:`write_feature_npy` one file a video, or by :func:`write_store_block` one file a work shard, each video then a
:class:`~builders.sources.feature_files.FeatureRef` (rows of that file), which :func:`read_visual_features` reads like a file.
The NaSVA module (which imports torch) is imported lazily.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from builders.core.errors import InputError
from builders.core.fingerprint import kind_of
from builders.sources.transcripts import is_valid_video_id

MISSING_FEATURES = "missing_features"
BAD_FEATURES = "bad_features"
FEATURE_DURATION_MISMATCH = "feature_duration_mismatch"
REASONS = (MISSING_FEATURES, BAD_FEATURES, FEATURE_DURATION_MISMATCH)
#: more than this share of bad rows (NaN/Inf, beyond :data:`MAX_ABS_VALUE`, all zeros) makes the file
#: ``bad_features``; up to it they are repaired (config ``feature_max_bad_share``; docs/reason-codes.md)
MAX_BAD_SHARE = 0.05
#: a feature value beyond this magnitude makes its row bad: the largest fp16 number, what the feature store holds
#: (config ``feature_max_abs``; a float32 1e30 is finite but turns the first dot product into Inf)
MAX_ABS_VALUE = 65504.0
#: ``T`` (seconds) may differ from the container duration by max(2 s, 10 %) (config ``feature_duration_tolerance_s``
#: / ``_frac``; the 2 s is the length tolerance of HowToStep's feature counter ``feature_length_mismatch``)
DURATION_TOLERANCE_S = 2.0
DURATION_TOLERANCE_FRAC = 0.10
#: with no container duration, ``T`` may reach this multiple of the last narration end plus the tolerance (a video
#: often ends in a silent outro; config ``feature_transcript_span_ratio``)
TRANSCRIPT_SPAN_RATIO = 2.0
#: the counter of a length within the tolerance but more than 2 s off (the build proceeds with ``T``)
LENGTH_COUNTER_S = 2.0
#: a feature file larger than this is ``bad_features`` without being read (toolkit choice: a CLIP ViT-L/14 file of a
#: 3-hour video in fp32 is 33 MB; 4 GiB only guards memory against a wrong or hostile file)
DEFAULT_MAX_BYTES = 4 << 30


class FeatureFileError(Exception):
    """A video whose feature file cannot be used; ``reason`` is one of :data:`REASONS` (docs/reason-codes.md)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown feature error reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def _feature_exts() -> tuple[str, ...]:
    from builders.sources.feature_files import FEATURE_EXTS

    return tuple(FEATURE_EXTS)


class FeatureIndex:
    """Where each video's feature file is (docs/corpora/howtostep.md "Inputs").

    Without ``index_json`` the ``root`` directory is scanned once, recursively
    (:func:`builders.sources.feature_files.index_feature_files`: the extension earlier in ``FEATURE_EXTS`` wins, then the first
    path in sorted order). With ``index_json`` (``{vid: subfolder-or-path}``) nothing is scanned: a value is a file,
    a folder holding ``<vid><ext>``, or a path stem to which the extensions are appended; relative values are taken
    from ``root`` (or from the json's folder when ``root`` is None). A missing root folder, an unreadable json or a
    json that is not an object of strings raises at construction (a configuration error, not a per-video drop).
    """

    def __init__(self, root: str | Path | None, index_json: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else None
        self.index_json = Path(index_json) if index_json is not None else None
        self._files: dict[str, Path] | None = None
        self._entries: dict[str, str] | None = None
        if self.index_json is None:
            if self.root is None or not self.root.is_dir():
                raise FileNotFoundError(f"features directory not found: {self.root}")
            from builders.sources.feature_files import index_feature_files

            self._files = index_feature_files(self.root)
        else:
            self._entries = self._read_index(self.index_json)
            if self.root is None:
                self.root = self.index_json.parent
            elif not self.root.is_dir():
                raise FileNotFoundError(f"features directory not found: {self.root}")

    @staticmethod
    def _read_index(path: Path) -> dict[str, str]:
        if not path.is_file():
            raise FileNotFoundError(f"feature index json not found: {path}")
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError, RecursionError) as err:
            raise InputError(f"{path}: unreadable feature index json ({type(err).__name__}: {err})") from err
        if not isinstance(data, Mapping) or not all(isinstance(v, str) and v for v in data.values()):
            raise InputError(f"{path}: a feature index must be a json object {{video_id: subfolder-or-path}}")
        return dict(data)

    def __len__(self) -> int:
        return len(self._files if self._files is not None else self._entries or {})

    def ids(self) -> set[str]:
        """The video ids the index names (for the json index: its keys, whether or not their files exist)."""
        return set(self._files if self._files is not None else self._entries or {})

    def lookup(self, vid: str) -> Path | None:
        """The feature file of ``vid``, or None when there is none (the caller drops it as ``missing_features``)."""
        if self._files is not None:
            return self._files.get(vid)
        value = (self._entries or {}).get(vid)
        if value is None or not is_valid_video_id(vid):
            return None
        target = self.root / value  # an absolute value replaces the root
        if target.is_file():
            return target
        exts = _feature_exts()
        if target.is_dir():
            candidates = [target / f"{vid}{ext}" for ext in exts]
        else:
            candidates = [target.with_name(target.name + ext) for ext in exts]
        return next((c for c in candidates if c.is_file()), None)


def _decode(path: Path | Any, cache: bool = False) -> np.ndarray:
    """float32 ``[T, C]`` through the NaSVA reader (a file, or a ``FeatureRef`` into a store file), its skip reasons
    folded into ``missing_features`` / ``bad_features``. A damaged store file (``DamagedCache``) is raised as it is
    when it is the build's own (``cache``), else (a store a user gave as input) it is ``bad_features``.

    NaN/Inf rows must reach :func:`repair_feature_rows`, so the reader keeps them (``allow_nonfinite``).
    """
    from builders.core.errors import DamagedCache
    from builders.sources import feature_files

    try:
        with np.errstate(over="ignore"):  # a float64 value beyond float32 becomes Inf: a bad row, repaired or dropped
            return feature_files.load_feature_file(path, allow_nonfinite=True)
    except DamagedCache as err:
        if cache:
            raise
        raise FeatureFileError(BAD_FEATURES, f"unreadable_features: {err}") from err
    except feature_files.FeatureError as err:
        reason = MISSING_FEATURES if err.reason == MISSING_FEATURES else BAD_FEATURES
        raise FeatureFileError(reason, f"{err.reason}: {err}") from err


def bad_row_mask(x: np.ndarray, max_abs: float = MAX_ABS_VALUE) -> np.ndarray:
    """Rows holding any NaN/Inf or a value beyond ``max_abs`` in magnitude, or only zeros, as a bool ``[T]`` mask."""
    bounded = (np.abs(x) <= max_abs).all(axis=1)  # False for NaN and Inf too
    return ~bounded | ~np.any(x != 0, axis=1)


def _check_share(share: float, max_abs: float) -> None:
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"max_bad_share must lie in [0, 1], got {share!r}")
    if not 0.0 < max_abs <= MAX_ABS_VALUE:
        raise ValueError(f"max_abs must lie in (0, {MAX_ABS_VALUE:g}], got {max_abs!r}")


def repair_feature_rows(x: np.ndarray, max_bad_share: float = MAX_BAD_SHARE,
                        max_abs: float = MAX_ABS_VALUE) -> tuple[np.ndarray, int]:
    """Replace the bad rows of ``x [T, C]`` (:func:`bad_row_mask`) by the previous valid row, leading ones by the
    first valid row.

    More than ``max_bad_share`` of the rows bad (or none valid, or ``T = 0``) → ``bad_features``
    (docs/reason-codes.md). Returns ``(float32 copy, number of rows replaced)``; ``x`` itself is not changed.
    """
    _check_share(max_bad_share, max_abs)
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] == 0:
        raise FeatureFileError(BAD_FEATURES, f"expected [T, C] features with T > 0, got shape {tuple(x.shape)}")
    bad = bad_row_mask(x, max_abs)
    n_bad, n_rows = int(bad.sum()), int(x.shape[0])
    if n_bad == n_rows or n_bad / n_rows > max_bad_share:
        raise FeatureFileError(BAD_FEATURES, f"{n_bad} of {n_rows} rows hold NaN/Inf, a value beyond "
                                             f"{max_abs:g} or only zeros (more than {max_bad_share:.0%})")
    out = np.array(x, dtype=np.float32, copy=True)
    if n_bad:
        rows = np.arange(n_rows)
        source = np.maximum.accumulate(np.where(bad, -1, rows))  # forward fill: last valid row at or before t
        source[source < 0] = int(np.argmin(bad))  # backward fill of the leading rows: the first valid row
        out = out[source]
    return out, n_bad


def read_visual_features(path: str | Path | Any, visual_dim: int, max_bad_share: float = MAX_BAD_SHARE,
                         max_bytes: int = DEFAULT_MAX_BYTES,
                         max_abs: float = MAX_ABS_VALUE, cache: bool = False) -> tuple[np.ndarray, dict[str, int]]:
    """One video's features as float32 ``[T, visual_dim]`` and the counters ``{"features_repaired": n}``.

    ``cache``: ``path`` is the build's own store (rows of a work shard name it): a damaged store file raises
    :class:`builders.core.errors.DamagedCache` (the shard that wrote it is recomputed) instead of a per-video
    ``bad_features``.

    ``path``: a feature file, or a :class:`builders.sources.feature_files.FeatureRef` (the video's rows of a store file).
    Raises :class:`FeatureFileError`: ``missing_features`` (no file), ``bad_features`` (file over ``max_bytes``,
    unreadable or pickle-only, not ``[T, C]``, ``C != visual_dim``, ``T = 0``, more than ``max_bad_share`` rows
    bad: NaN/Inf, beyond ``max_abs``, all zeros; docs/reason-codes.md).
    """
    from builders.sources.feature_files import FeatureRef

    if isinstance(path, FeatureRef):
        x = _decode(path, cache)
    else:
        p = Path(path)
        try:
            st = p.stat()
        except FileNotFoundError as err:
            if p.is_symlink():  # the entry is there, and broken: a named drop, not a missing file
                raise FeatureFileError(BAD_FEATURES, f"{p}: dangling symbolic link") from err
            raise FeatureFileError(MISSING_FEATURES, f"{p}: no such file") from err
        except OSError as err:
            raise FeatureFileError(BAD_FEATURES, f"{p}: {type(err).__name__}: {err}") from err
        if not stat.S_ISREG(st.st_mode):  # a directory, a FIFO or a device: never opened (a FIFO would block)
            raise FeatureFileError(BAD_FEATURES, f"{p}: {kind_of(st.st_mode)}, not a regular file")
        size = st.st_size
        if size > max_bytes:
            raise FeatureFileError(BAD_FEATURES, f"{p}: {size} bytes, over the {max_bytes}-byte limit")
        x = _decode(p)
    if x.shape[1] != visual_dim:
        raise FeatureFileError(BAD_FEATURES, f"dimension {x.shape[1]} != visual_dim {visual_dim}")
    x, n_repaired = repair_feature_rows(x, max_bad_share, max_abs)
    return x, {"features_repaired": n_repaired}


def has_container_duration(duration: float | None) -> bool:
    """Whether ``duration`` is a usable container duration (finite and positive, from a video file); otherwise the
    narrations bound the video's length (:func:`check_feature_duration`)."""
    return duration is not None and math.isfinite(duration) and duration > 0


def check_feature_duration(rows: int, duration: float | None, narrated_end: float | None,
                           tolerance_s: float = DURATION_TOLERANCE_S, tolerance_frac: float = DURATION_TOLERANCE_FRAC,
                           span_ratio: float = TRANSCRIPT_SPAN_RATIO) -> float:
    """Check a feature file's ``rows`` (one a second) against the video's length; return ``|rows - duration|``
    (0 when only the narrations bound it), or raise ``FeatureFileError("feature_duration_mismatch")``.

    ``duration``: the container's (seconds, from the video file), when known and positive: ``rows`` must lie within
    ``max(tolerance_s, tolerance_frac x duration)`` of it. Otherwise (no video file) the features are the video and
    ``narrated_end`` (the last narration's end) only bounds them from above: ``rows`` must stay under ``span_ratio x
    narrated_end + tol`` (``tol`` the same tolerance of ``narrated_end``) and hold at least one row. Fewer rows than
    the narrations need are accepted here: the caller drops the narrations that start after the last row, as TAN's
    pipeline does (Li et al., ECCV 2024, supp. §6.1; ``builders.corpora.howtostep.features``). Without a duration or
    narrations only the empty file is refused. Thresholds: config ``feature_duration_tolerance_s`` / ``_frac`` /
    ``feature_transcript_span_ratio`` (docs/configuration.md; docs/reason-codes.md).
    """
    if has_container_duration(duration):
        tol = max(tolerance_s, tolerance_frac * duration)
        if abs(rows - duration) > tol:
            raise FeatureFileError(FEATURE_DURATION_MISMATCH,
                                   f"{rows} feature rows (1 a second) for a {duration:.1f} s video (container "
                                   f"duration): more than {tol:.1f} s apart (feature_duration_tolerance_s="
                                   f"{tolerance_s:g}, feature_duration_tolerance_frac={tolerance_frac:g})")
        return abs(rows - duration)
    if rows < 1:
        raise FeatureFileError(FEATURE_DURATION_MISMATCH, f"{rows} feature rows: no second of video")
    if narrated_end is None or not math.isfinite(narrated_end) or narrated_end <= 0:
        return 0.0
    tol = max(tolerance_s, tolerance_frac * narrated_end)
    hi = span_ratio * narrated_end + tol
    if rows > hi:
        raise FeatureFileError(FEATURE_DURATION_MISMATCH,
                               f"{rows} feature rows (1 a second) for a video whose narrations end at "
                               f"{narrated_end:.1f} s (no video file): more than {hi:.1f} "
                               f"(feature_transcript_span_ratio={span_ratio:g} x the end plus "
                               f"max(feature_duration_tolerance_s={tolerance_s:g}, feature_duration_tolerance_frac="
                               f"{tolerance_frac:g} x the end))")
    return 0.0


def fp16_features(x: np.ndarray) -> np.ndarray:
    """``x [T, C]`` as fp16 (docs/corpora/howtostep.md); ``ValueError`` for a non-2-D array or values that fp16
    cannot hold (they would turn into Inf)."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"features must be [T, C], got shape {tuple(x.shape)}")
    with np.errstate(over="ignore"):
        half = x.astype(np.float16)
    if not np.isfinite(half).all() and np.isfinite(x).all():
        raise ValueError("feature values exceed the fp16 range")
    return np.ascontiguousarray(half)


def _save_npy_atomic(p: Path, x: np.ndarray) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.save(f, x, allow_pickle=False)
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)


def write_store_block(folder: str | Path, block: np.ndarray, suffix: str) -> Path:
    """Write one work shard's block of feature rows (``[N, W]``, any dtype) as ``folder/<sha256[:16]><suffix>``.

    The name is the digest of the block (dtype, shape, bytes): a shard recomputed from other inputs writes another
    file and never changes one that rows of an earlier result still name; an identical block is not written again.
    Written atomically (temporary file + rename)."""
    from builders.core.errors import DamagedCache
    from builders.sources.feature_files import check_store_block, store_block_digest

    block = np.ascontiguousarray(block)
    path = Path(folder) / f"{store_block_digest(block)}{suffix}"
    if path.is_file():
        try:  # an identical block is kept only while it is what was written (a shard recomputed after its damage)
            check_store_block(path)
            return path
        except DamagedCache:
            pass
    _save_npy_atomic(path, block)
    return path


def write_feature_npy(path: str | Path, x: np.ndarray) -> None:
    """Store computed features as fp16 ``[T, C]`` ``.npy``, atomically (temporary file + rename).

    ``ValueError`` for a non-2-D array or values that fp16 cannot hold (they would turn into Inf).
    """
    _save_npy_atomic(Path(path), fp16_features(x))
