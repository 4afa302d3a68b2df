"""NaSVA data: per-second feature files, sentence features, labels, samples and batches (docs/evaluation.md).

- Visual features: one file per video, ``<features_dir>/**/<vid><ext>``, ``ext`` tried in this order (docs/corpora/howtostep.md)
  (``.pth.tar``, ``.pth``, ``.pt``: a tensor ``[T, C]`` or a dict with key ``features``, loaded with
  ``torch.load(..., weights_only=True)``; ``.npy``, ``.mp4.npy``: ``[T, C]``; ``.npz``: key ``features``), or rows of
  a per-shard store named by ``<features_dir>/features.refs.json`` (:class:`FeatureRef`: the HowToStep builder keeps
  one file per work shard, not one per video). Loaded as float32; NaN/Inf, a wrong rank, zero rows or a feature size
  other than the expected one make the video a named skip.
- Text features: the repo's sentence encoders (``builders.models.text_encoder.get_encoder``: ``minilm``, ``mpnet``),
  cached per (encoder id, sha1 of the sentence) in the repo's SQLite :class:`EmbeddingCache`, stored
  as the encoder returns them. ``hash[:DIM]`` is a model-free bag-of-words encoder for tests and smoke runs.
- Labels json: ``{video_id: [{"text", "start", "end"}, ...]}`` (float seconds); the HTM-Align rows
  ``[alignable, start, end, text]`` are accepted too.

Bad input never stops a run midway: every dropped video or text is counted under a named reason
(:class:`SkipCounts`) and printed; only input that leaves nothing to do is an error.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:  # torch is imported where a tensor is made: a build with simulated or file features and
    import torch   # rounds=0 never pays its import (about 2 s and 150 MB; docs/scale.md)
    from torch import Tensor

    from .loss import Rule

#: feature file extensions in lookup order (docs/corpora/howtostep.md, Inputs)
FEATURE_EXTS = (".pth.tar", ".pth", ".pt", ".npy", ".mp4.npy", ".npz")
_TORCH_EXTS = (".pth.tar", ".pth", ".pt")


class NasvaInputError(ValueError):
    """Input that leaves nothing to do (unreadable labels file, no usable sample, a dimension clash)."""


class FeatureError(Exception):
    """A feature file that cannot be used; ``reason`` is the named skip reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


# ---------------------------------------------------------------------------------------------- skip bookkeeping
@dataclass
class SkipCounts:
    """Named counts of dropped videos and texts (and notes that are not drops), with a few example ids each."""

    videos: Counter = field(default_factory=Counter)
    texts: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def video(self, reason: str, vid: str, detail: str = "") -> None:
        self.videos[reason] += 1
        self._example(reason, vid, detail)

    def text(self, reason: str, vid: str, n: int = 1, detail: str = "") -> None:
        self.texts[reason] += n
        self._example(reason, vid, detail)

    def note(self, reason: str, vid: str, n: int = 1) -> None:
        self.notes[reason] += n
        self._example(reason, vid, "")

    def _example(self, reason: str, vid: str, detail: str) -> None:
        if len(self.examples[reason]) < 3:
            self.examples[reason].append(f"{vid}: {detail}" if detail else vid)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {"videos": dict(self.videos), "texts": dict(self.texts), "notes": dict(self.notes)}

    def summary(self, label: str) -> str:
        """One human-readable block, e.g. ``[nasva] train: skipped videos: missing_features=2 (a, b)``."""
        lines = []
        for kind, counter in (("skipped videos", self.videos), ("skipped texts", self.texts),
                              ("notes", self.notes)):
            if counter:
                parts = [f"{r}={n} (e.g. {'; '.join(self.examples[r])})" for r, n in sorted(counter.items())]
                lines.append(f"[nasva] {label}: {kind}: " + ", ".join(parts))
        return "\n".join(lines) if lines else f"[nasva] {label}: nothing skipped"


# ---------------------------------------------------------------------------------------------- feature files
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
    ``features_dir/features.refs.json`` names map to their :class:`FeatureRef` instead."""
    root = Path(features_dir)
    if not root.is_dir():
        raise NasvaInputError(f"features directory not found: {root}")
    best: dict[str, tuple[int, str]] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            matches = [(len(ext), rank, ext) for rank, ext in enumerate(FEATURE_EXTS)
                       if name.endswith(ext) and len(name) > len(ext)]
            if not matches:
                continue
            _, rank, ext = max(matches)  # the longest extension names the video: x.mp4.npy -> x
            vid = name[: -len(ext)]
            if vid not in best or rank < best[vid][0]:
                best[vid] = (rank, os.path.join(dirpath, name))
    out: dict[str, Path | FeatureRef] = {vid: Path(p) for vid, (_, p) in best.items()}
    if (root / FEATURE_REFS_FILE).is_file():
        out.update(_read_refs(root / FEATURE_REFS_FILE))
    return out


def _load_feature_ref(ref: FeatureRef) -> np.ndarray:
    """The rows a :class:`FeatureRef` names, as a ``[T, C]`` array (simulated ones regenerated, fp16-rounded)."""
    if not 0 <= ref.start <= ref.stop:
        raise FeatureError("bad_features", f"{ref.name}: bad row range")
    block = np.load(ref.path, mmap_mode="r", allow_pickle=False)
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
    except FeatureError:
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


# ---------------------------------------------------------------------------------------------- text encoders
class TextEncoderLike(Protocol):
    model_id: str

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class HashTextEncoder:
    """Deterministic bag-of-words vectors without a model (sum of per-word Gaussian vectors seeded by sha1 of the
    word, L2-normalised). For tests and smoke runs only: it knows no semantics.

    Word vectors are drawn once per encoder into a table (up to :attr:`CACHE_BYTES`, then the table starts again) and
    a batch is summed with one ``np.add.at`` in word order, so the vectors are bit-identical to adding them word by
    word (issue 19: drawing a NumPy generator per word occurrence made this "model-free" encoder 97 % of Stage 1)."""

    CACHE_BYTES = 64 << 20
    _WORD_RE = re.compile(r"[a-z0-9']+")

    def __init__(self, dim: int = 64):
        self._dim = int(dim)
        self.model_id = f"hash-bow-{self._dim}"
        self.name = f"hash:{self._dim}"
        self._row: dict[str, int] = {}
        self._table = np.zeros((0, self._dim), dtype=np.float64)

    @property
    def dim(self) -> int:
        return self._dim

    def _draw(self, w: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha1(w.encode("utf-8")).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self._dim)

    def _rows(self, words: list[str]) -> list[int]:
        """Table rows of ``words``, drawing the vectors of new words."""
        row = self._row
        new = [w for w in dict.fromkeys(words) if w not in row]
        if new:
            for w in new:
                row[w] = len(row)
            grown = np.empty((len(row), self._dim), dtype=np.float64)
            grown[:len(self._table)] = self._table
            grown[len(self._table):] = [self._draw(w) for w in new]
            self._table = grown
        return [row[w] for w in words]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._table.nbytes >= self.CACHE_BYTES:
            self._row, self._table = {}, np.zeros((0, self._dim), dtype=np.float64)
        out = np.zeros((len(texts), self._dim), dtype=np.float64)
        owners: list[int] = []
        words: list[str] = []
        for i, t in enumerate(texts):
            ws = self._WORD_RE.findall(t.lower()) or [""]
            words += ws
            owners += [i] * len(ws)
        if words:  # in order: the same sums as adding word by word
            rows = self._rows(words)  # (may grow the table)
            np.add.at(out, np.asarray(owners, dtype=np.intp), self._table[rows])
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)


def get_text_encoder(name: str, device: str = "cpu") -> TextEncoderLike:
    """``minilm`` / ``mpnet`` / a local model folder (the repo's :func:`get_encoder`), or ``hash[:DIM]``."""
    if name == "hash" or name.startswith("hash:"):
        return HashTextEncoder(int(name.split(":", 1)[1]) if ":" in name else 64)
    from builders.models.text_encoder import get_encoder

    enc = get_encoder(name, device=device)
    if not hasattr(enc, "name"):
        enc.name = name
    return enc


def default_text_cache() -> Path:
    """``$PROCVID_NASVA_TEXT_CACHE`` or ``~/.cache/procvid-corpora/nasva-text-features.sqlite``."""
    env = os.environ.get("PROCVID_NASVA_TEXT_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "procvid-corpora" / "nasva-text-features.sqlite"


def text_key(sentence: str) -> str:
    return "sha1:" + hashlib.sha1(sentence.encode("utf-8")).hexdigest()


def encode_texts(encoder: TextEncoderLike, texts: Iterable[str], cache_path: str | Path | None
                 ) -> tuple[np.ndarray, dict[str, int]]:
    """Embed the distinct ``texts`` once, per (encoder id, sha1(sentence)) through the SQLite cache.

    Returns (table ``[U, C_t]`` float32, text -> row). Missing sentences are encoded in sorted order.
    """
    unique = sorted(set(texts))
    row = {t: i for i, t in enumerate(unique)}
    if not unique:
        return np.zeros((0, encoder.dim), dtype=np.float32), row
    cache = None
    if cache_path is not None:
        from builders.models.embedding_cache import EmbeddingCache

        cache = EmbeddingCache(cache_path)
    try:
        keys = [text_key(t) for t in unique]
        found = cache.get(encoder.model_id, keys) if cache is not None else {}
        missing = [t for t, k in zip(unique, keys) if k not in found]
        if missing:
            vecs = np.asarray(encoder.encode(missing), dtype=np.float32)
            if cache is not None:
                cache.put(encoder.model_id, [text_key(t) for t in missing], vecs)
            found.update({text_key(t): v for t, v in zip(missing, vecs)})
        dims = {found[k].shape[0] for k in keys}
        if len(dims) != 1:
            raise NasvaInputError(f"text feature cache {cache_path} holds vectors of several sizes {sorted(dims)} for "
                                  f"{encoder.model_id}: delete it")
        table = np.stack([found[k] for k in keys]).astype(np.float32)
    finally:
        if cache is not None:
            cache.close()
    return table, row


# ---------------------------------------------------------------------------------------------- labels
def read_labels(path: str | Path) -> dict[str, list[Any]]:
    """Read a labels json ``{video_id: [entries]}``; a file that is not such a mapping is a :class:`NasvaInputError`."""
    p = Path(path)
    try:
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as e:
        raise NasvaInputError(f"labels file not found: {p}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NasvaInputError(f"labels file {p} is not valid json: {e}") from e
    if not isinstance(data, dict):
        raise NasvaInputError(f"labels file {p} must hold a json object {{video_id: [{{text, start, end}}, ...]}}, "
                              f"got a {type(data).__name__}")
    return data


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def parse_entry(entry: Any, need_times: bool = True) -> tuple[str, float, float] | str:
    """One label entry -> (text, start, end), or the name of what is wrong with it.

    Accepted: ``{"text", "start", "end"}`` or an HTM-Align row ``[alignable, start, end, text]``."""
    if isinstance(entry, Mapping):
        text, start, end = entry.get("text"), entry.get("start"), entry.get("end")
    elif isinstance(entry, (list, tuple)) and len(entry) == 4:
        _, start, end, text = entry
    else:
        return "bad_label"
    if not isinstance(text, str) or not text.strip():
        return "bad_label"
    if not need_times:
        return text, float("nan"), float("nan")
    s, e = _num(start), _num(end)
    if s is None or e is None or s < 0 or e < s:
        return "bad_label"
    return text, s, e


# ---------------------------------------------------------------------------------------------- samples
@dataclass
class Sample:
    """One (video, text source) pair: texts in stored order with float-second windows."""

    video_id: str
    source: str  # "steps" | "narrations" | "val"
    texts: list[str]
    start: np.ndarray  # [K] float64
    end: np.ndarray  # [K] float64
    n_frames: int  # rows used (after truncation)

    def fingerprint_row(self) -> list[Any]:
        return [self.video_id, self.source, self.texts, self.start.tolist(), self.end.tolist(), self.n_frames]


def build_samples(labels: Mapping[str, Any], source: str, store: FeatureStore, skips: SkipCounts,
                  max_vlen: int | None, max_texts: int | None = None) -> list[Sample]:
    """Turn a labels mapping into validated samples (the authors' loader rules), in sorted video-id order.

    Per text: malformed entries -> ``bad_label``; ``end >= max_vlen`` -> ``beyond_max_vlen`` (official, strict: not
    clipped); ``start`` after the last frame -> ``label_outside_video``; an end past the last frame is kept (note
    ``label_end_beyond_video``) and a window holding no integer second is kept with no positive (note
    ``no_positive_frame``). Per video: features missing/unreadable/NaN/wrong size -> the reason of
    :class:`FeatureError`; no entries -> ``no_texts``; nothing left -> ``no_texts_left``. More than ``max_texts`` texts
    are cut to the first ``max_texts`` (note ``texts_beyond_text_pe``).
    """
    out: list[Sample] = []
    for vid in sorted(labels):
        entries = labels[vid]
        if not isinstance(entries, list):
            skips.video("bad_labels", vid, f"expected a list, got {type(entries).__name__}")
            continue
        if not entries:
            skips.video("no_texts", vid)
            continue
        try:
            T = store.probe(vid)
        except FeatureError as e:
            skips.video(e.reason, vid, str(e))
            continue
        texts, starts, ends = [], [], []
        for entry in entries:
            parsed = parse_entry(entry)
            if isinstance(parsed, str):
                skips.text(parsed, vid, detail=repr(entry)[:80])
                continue
            text, s, e = parsed
            if max_vlen is not None and e >= max_vlen:
                skips.text("beyond_max_vlen", vid)
                continue
            if s > T - 1:
                skips.text("label_outside_video", vid, detail=f"start {s} >= {T} frames")
                continue
            if e > T:
                skips.note("label_end_beyond_video", vid)
            if math.floor(e) < math.ceil(s):
                skips.note("no_positive_frame", vid)
            texts.append(text)
            starts.append(s)
            ends.append(e)
        if not texts:
            skips.video("no_texts_left", vid)
            continue
        if max_texts is not None and len(texts) > max_texts:
            skips.note("texts_beyond_text_pe", vid, len(texts) - max_texts)
            texts, starts, ends = texts[:max_texts], starts[:max_texts], ends[:max_texts]
        out.append(Sample(vid, source, texts, np.asarray(starts, dtype=np.float64),
                          np.asarray(ends, dtype=np.float64), T))
    return out


def samples_fingerprint(samples: Sequence[Sample], extra: Any = None) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([s.fingerprint_row() for s in samples], sort_keys=True).encode("utf-8"))
    h.update(json.dumps(extra, sort_keys=True, default=str).encode("utf-8"))
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------- batches
@dataclass
class Batch:
    """A padded batch (as the authors' code pads): frames padded by repeating the last frame, texts by repeating the last text."""

    visual: Tensor  # [B, T, C_v]
    visual_padding_mask: Tensor  # [B, T] True on pads
    text: Tensor  # [B, K, C_t]
    text_padding_mask: Tensor  # [B, K]
    time_mask: Tensor  # [B, K, T] (False on pads)
    narration: bool
    video_ids: list[str]
    texts: list[list[str]]  # raw strings in batch order
    orders: list[np.ndarray]  # per sample: stored index of each batch text row

    def to(self, device: str | torch.device) -> Batch:
        for name in ("visual", "visual_padding_mask", "text", "text_padding_mask", "time_mask"):
            setattr(self, name, getattr(self, name).to(device))
        return self


def pad_by_last(arrays: Sequence[np.ndarray]) -> tuple[Tensor, Tensor]:
    """Stack ``[n_i, C]`` arrays into ``[B, max n, C]`` repeating each one's last row; mask True on the copies."""
    n_max = max(a.shape[0] for a in arrays)
    pos = np.arange(n_max)
    idx = [np.minimum(pos, a.shape[0] - 1) for a in arrays]
    import torch

    out = torch.from_numpy(np.stack([a[i] for a, i in zip(arrays, idx)]))
    mask = torch.from_numpy(np.stack([pos >= a.shape[0] for a in arrays]))
    return out, mask


def collate(visuals: Sequence[np.ndarray], text_feats: Sequence[np.ndarray], starts: Sequence[np.ndarray],
            ends: Sequence[np.ndarray], texts: Sequence[list[str]], video_ids: Sequence[str], narration: bool,
            shuffle_rng: random.Random | None = None, rule: Rule = "nasva") -> Batch:
    """Build a :class:`Batch`. In ``<step>`` mode (``narration=False``) with ``shuffle_rng``, each sample's texts
    (features, windows and raw strings together) are permuted at random, as the released collate does."""
    orders = []
    for k_texts in texts:
        order = list(range(len(k_texts)))
        if not narration and shuffle_rng is not None:
            shuffle_rng.shuffle(order)
        orders.append(np.asarray(order, dtype=np.int64))
    visual, vpad = pad_by_last(visuals)
    text, tpad = pad_by_last([tf[o] for tf, o in zip(text_feats, orders)])
    import torch

    from .loss import time_mask

    B, T = vpad.shape
    K = tpad.shape[1]
    tm = torch.zeros(B, K, T, dtype=torch.bool)
    for b, (s, e, o) in enumerate(zip(starts, ends, orders)):
        tm[b, : len(o), : visuals[b].shape[0]] = time_mask(torch.from_numpy(s[o]), torch.from_numpy(e[o]),
                                                           visuals[b].shape[0], rule)
    return Batch(visual, vpad, text, tpad, tm, bool(narration), list(video_ids),
                 [[t[i] for i in o] for t, o in zip(texts, orders)], orders)


def log(msg: str) -> None:
    """Status lines go to stderr (stdout stays free for results)."""
    print(msg, file=sys.stderr, flush=True)
