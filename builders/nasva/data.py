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

The feature files are :mod:`builders.sources.feature_files`, the sentence features :mod:`builders.nasva.text_features`
and the two errors :mod:`builders.nasva.errors`; their names are importable from here too. This module holds the
skip bookkeeping, the labels, the samples and the batches.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import FeatureError, NasvaInputError
from ..sources.feature_files import (
    DENSE,
    FEATURE_EXTS,
    FEATURE_REFS_FILE,
    SIMULATED,
    FeatureRef,
    FeatureStore,
    index_feature_files,
    load_feature_file,
)
from .text_features import (
    HashTextEncoder,
    TextEncoderLike,
    default_text_cache,
    encode_texts,
    get_text_encoder,
    text_key,
)

if TYPE_CHECKING:  # torch is imported where a tensor is made: a build with simulated or file features and
    import torch   # rounds=0 never pays its import (about 2 s and 150 MB; docs/scale.md)
    from torch import Tensor

    from .loss import Rule


__all__ = [
    "DENSE", "FEATURE_EXTS", "FEATURE_REFS_FILE", "SIMULATED", "Batch", "FeatureError", "FeatureRef", "FeatureStore",
    "HashTextEncoder", "NasvaInputError", "Sample", "SkipCounts", "TextEncoderLike", "build_samples", "collate",
    "default_text_cache", "encode_texts", "get_text_encoder", "index_feature_files", "load_feature_file", "log",
    "pad_by_last", "parse_entry", "read_labels", "samples_fingerprint", "text_key",
]


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
