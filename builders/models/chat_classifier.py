"""The MARC chat/content sentence classifier, offline default ``logreg`` (docs/corpora/marc.md
``chat_content``; Lin et al., ACL 2020, A.1.3).

Training data: the transcript sentences of YouCook2 videos, **content (1)** iff at least half of a sentence lies in
the video's annotated segments, else **chat (0)**, split by recipe type (:mod:`builders.ops.chat_content`).
Model: scikit-learn ``LogisticRegression(max_iter=1000)`` over [L2-normalised sentence embedding (MiniLM by
default); r, r², 1[r < 0.1], 1[r > 0.9], log(1 + words)], r = sentence midpoint / video duration, C chosen from
{0.01, 0.1, 1, 10} by validation F1 of ``content``; applied at threshold 0.5. The paper's LSTM + Luong attention
over frozen GloVe is **not implemented** here. The trained model is a small JSON file (no pickle) applied with
numpy alone; ``name`` (``logreg-minilm@<fingerprint>``) goes into the release's provenance.

Position features need the video duration: YouCook2 gives one; at build time, for a candidate video without a known
duration, the caller passes the end of its last transcript sentence (:func:`effective_duration`).

CLI: ``python -m builders.models.chat_classifier --annotations youcookii_annotations_trainval.json
--transcripts raw_caption.json|whisperx_dir --out model.json [--embedding-model minilm]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.records import Drop
from ..ops.chat_content import content_labels, position_features, recipe_type_split
from ..ops.transcript_sentences import Sentence, Splitter, sentences_from_lines, sentences_from_words
from ..sources.transcripts import (
    MALFORMED_TRANSCRIPT,
    NO_TRANSCRIPT,
    Transcript,
    TranscriptError,
    WhisperXStore,
    parse_whisperx,
)
from ..sources.transcripts.transcript import _checked_id, _load_json_file
from ..sources.youcook2 import YouCook2Video
from .text_encoder import TextEncoder

STAGE = "chat_content"
EMPTY_TRANSCRIPT = "empty_transcript"
FORMAT = "procvid-chat-classifier"
FORMAT_VERSION = 1
N_POSITION = 5  # position_features columns
C_GRID = (0.01, 0.1, 1, 10)
LABEL_NAMES = ("chat", "content")  # the release's ClassLabel order (docs/corpora/marc.md, Outputs)
SPLITS = ("train", "validation", "test")
PAPER_TEST = {"precision": 86.76, "recall": 84.26, "f1": 85.01}  # paper A.1.3, LSTM + attention
MAX_MODEL_BYTES = 16 << 20
_ALNUM = re.compile(r"\w")
_MODEL_KEYS = {"format", "version", "classifier", "embedding_model", "C", "coef", "intercept", "threshold", "scores"}

Word = tuple[str, float | None, float | None]


# --------------------------------------------------------------------------------------------- sentences


def _split(text: str) -> list[str]:
    # punkt, as for the text recipes (Lin et al., ACL 2020, Table 5)
    from ..sources.schema_org.sentences import split_sentences

    return split_sentences(text)


def _opt_time(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def whisperx_words(obj: Any) -> list[Word] | None:
    """The ``(word, start, end)`` of a parsed WhisperX output (``segments[*].words``, times None when absent), or
    None when any segment lacks a words list, a word entry is malformed, or no word is timed."""
    segments = obj.get("segments") if isinstance(obj, dict) else None
    if not isinstance(segments, list):
        return None
    words: list[Word] = []
    for seg in segments:
        entries = seg.get("words") if isinstance(seg, dict) else None
        if not isinstance(entries, list):
            return None
        for w in entries:
            if not isinstance(w, dict) or not isinstance(w.get("word"), str):
                return None
            words.append((w["word"], _opt_time(w.get("start")), _opt_time(w.get("end"))))
    timed = [w for w in words if w[0].strip()]
    if not timed or all(s is None for _, s, _ in timed) or all(e is None for _, _, e in timed):
        return None
    return words


def read_transcript(transcripts: Any, video_id: str) -> tuple[Transcript, list[Word] | None]:
    """A video's transcript and, for a :class:`WhisperXStore`, its timed words (docs/corpora/marc.md, Pipeline step 5).

    ``transcripts``: a store of :mod:`builders.sources.transcripts` (``.get`` raising :class:`TranscriptError`), a
    mapping ``{video_id: Transcript}`` or a callable. A missing video raises ``TranscriptError(no_transcript)``.
    """
    if isinstance(transcripts, WhisperXStore):  # parse_whisperx drops the words: read them from the same file
        obj = _load_json_file(transcripts.root / f"{_checked_id(video_id)}.json")
        return parse_whisperx(video_id, obj), whisperx_words(obj)
    if isinstance(transcripts, Mapping):
        transcript = transcripts.get(video_id)
        if transcript is None:
            raise TranscriptError(NO_TRANSCRIPT, f"no transcript for {video_id}")
    elif hasattr(transcripts, "get"):
        transcript = transcripts.get(video_id)
    else:
        transcript = transcripts(video_id)
    if not isinstance(transcript, Transcript):
        raise TranscriptError(MALFORMED_TRANSCRIPT, f"not a Transcript but {type(transcript).__name__}")
    return transcript, getattr(transcript, "words", None)


def _finite_lines(transcript: Transcript) -> tuple[list[tuple[str, float, float]], int]:
    lines, bad = [], 0
    for start, end, text in transcript.segments:
        if math.isfinite(start) and math.isfinite(end) and end >= start:
            lines.append((text, start, end))
        else:
            bad += 1
    return lines, bad


def transcript_sentences(transcript: Transcript, words: Sequence[Word] | None = None,
                         split: Splitter | None = None) -> list[Sentence]:
    """Timed sentences ``[(text, start, end)]`` of a transcript (docs/corpora/marc.md): WhisperX ``words`` (or a
    transcript attribute ``words``) -> :func:`sentences_from_words`; else the segments as caption lines ->
    :func:`sentences_from_lines` (punkt splitter). Segments with non-finite or reversed times are skipped and
    sentences without an alphanumeric character dropped."""
    split = split or _split
    words = words if words is not None else getattr(transcript, "words", None)
    sentences: list[Sentence] | None = None
    if words:
        try:
            sentences = sentences_from_words(words, split)
        except ValueError:  # no usable word time: fall back to the segments
            sentences = None
    if sentences is None:
        sentences = sentences_from_lines(_finite_lines(transcript)[0], split)
    return [(t, float(s), float(e)) for t, s, e in sentences if _ALNUM.search(t)]


def effective_duration(duration: float | None, ends: Sequence[float]) -> float:
    """The video duration for the position features: ``duration`` when known (finite, > 0), else the end of the
    last transcript sentence (docs/corpora/marc.md; candidate videos at build time carry no duration)."""
    if duration is not None and math.isfinite(duration) and duration > 0:
        return float(duration)
    finite = [float(e) for e in ends if math.isfinite(e)]
    return max(finite, default=0.0)


def labelled_sentences(videos: Mapping[str, YouCook2Video], transcripts: Any,
                       split: Splitter | None = None) -> tuple[list[dict[str, Any]], list[Drop], Counter]:
    """The classifier's data (Lin et al., ACL 2020, A.1.3; the release's ``chat_content`` rows plus ``split`` and
    ``duration``).

    One row per transcript sentence ``{"video_id", "recipe_type", "sentence", "start", "end", "label"
    (1 content / 0 chat, :func:`content_labels`), "split" (:func:`recipe_type_split` over sentence counts per
    recipe type), "duration"}``. Drops: ``no_transcript``, ``malformed_transcript``, ``empty_transcript``.
    Counters: ``videos_labelled``, ``sentences``, ``<split>_<chat|content>``, ``bad_segment``, ``length_mismatch``.
    """
    rows: list[dict[str, Any]] = []
    drops: list[Drop] = []
    counts: Counter = Counter()
    for video_id, video in videos.items():
        try:
            transcript, words = read_transcript(transcripts, video_id)
        except TranscriptError as err:
            drops.append(Drop(video_id, STAGE, err.reason, err.detail[:300]))
            continue
        counts["bad_segment"] += _finite_lines(transcript)[1]
        counts["length_mismatch"] += int(transcript.length_mismatch)
        sentences = transcript_sentences(transcript, words, split)
        if not sentences:
            drops.append(Drop(video_id, STAGE, EMPTY_TRANSCRIPT, f"{len(transcript.segments)} segments, no sentence"))
            continue
        labels = content_labels([(s, e) for _, s, e in sentences], video.segments)
        counts["videos_labelled"] += 1
        for (text, start, end), label in zip(sentences, labels):
            rows.append({"video_id": video_id, "recipe_type": video.recipe_type, "sentence": text,
                         "start": start, "end": end, "label": int(label), "duration": float(video.duration)})
    per_type = Counter(r["recipe_type"] for r in rows)
    splits = recipe_type_split(per_type) if per_type else {}
    for r in rows:
        r["split"] = splits[r["recipe_type"]]
        counts[f"{r['split']}_{LABEL_NAMES[r['label']]}"] += 1
    counts["sentences"] = len(rows)
    return rows, drops, +counts


# --------------------------------------------------------------------------------------------- features, metrics


def features(sentences: Sequence[str], starts: Sequence[float], ends: Sequence[float],
             duration: float | Sequence[float], encoder: TextEncoder) -> np.ndarray:
    """``[L2-normalised embedding ; position_features]`` float32 ``[n, d + 5]`` (docs/corpora/marc.md). ``duration``:
    one number for a single video or one per sentence."""
    n = len(sentences)
    if not (len(starts) == len(ends) == n):
        raise ValueError(f"{n} sentences but {len(starts)} starts and {len(ends)} ends")
    emb = np.asarray(encoder.encode(list(sentences)), dtype=np.float32).reshape(n, -1)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = emb / np.where(norms > 0, norms, 1.0)
    words = [len(s.split()) for s in sentences]
    if np.ndim(duration) == 0:
        pos = position_features(starts, ends, words, float(duration))
    else:
        durations = np.asarray(duration, dtype=np.float64).reshape(-1)
        durations = np.where(np.isfinite(durations), durations, 0.0)  # unknown -> r = 0, as position_features
        if durations.shape != (n,):
            raise ValueError(f"{n} sentences but {durations.size} durations")
        pos = np.zeros((n, N_POSITION), dtype=np.float32)
        st, en, wd = np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64), np.asarray(words)
        for d in np.unique(durations):
            idx = np.flatnonzero(durations == d)
            pos[idx] = position_features(st[idx], en[idx], wd[idx], float(d))
    return np.concatenate([emb, pos], axis=1).astype(np.float32)


def content_scores(gold: Sequence[int], predicted: Sequence[bool | int]) -> dict[str, float | int]:
    """Precision, recall and F1 of the ``content`` class (0 when undefined), with the counts behind them."""
    g = np.asarray(gold, dtype=bool)
    p = np.asarray(predicted, dtype=bool)
    tp = int(np.sum(g & p))
    precision = tp / int(p.sum()) if p.any() else 0.0
    recall = tp / int(g.sum()) if g.any() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "n": int(g.size), "n_content": int(g.sum()),
            "n_predicted_content": int(p.sum()), "true_positives": tp}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


# --------------------------------------------------------------------------------------------- model


def _short_model_name(model_id: str) -> str:
    from .text_encoder import MODEL_IDS

    for short, full in MODEL_IDS.items():
        if model_id == full:
            return short
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", model_id.rstrip("/").rsplit("/", 1)[-1]).strip("-")
    return tail or "encoder"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class ChatClassifier:
    """A trained ``logreg`` chat/content classifier; probabilities of ``content`` with numpy alone."""

    embedding_model: str
    C: float
    coef: np.ndarray
    intercept: float
    threshold: float = 0.5
    scores: dict[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        self.coef = np.asarray(self.coef, dtype=np.float64).reshape(-1)
        self.C, self.intercept, self.threshold = float(self.C), float(self.intercept), float(self.threshold)

    @property
    def name(self) -> str:
        """``logreg-<encoder>@<fingerprint>``, the provenance string of the release (``chat_classifier``)."""
        return f"logreg-{_short_model_name(self.embedding_model)}@{self.fingerprint()}"

    def predict_proba(self, sentences: Sequence[str], starts: Sequence[float], ends: Sequence[float],
                      duration: float | Sequence[float], encoder: TextEncoder) -> np.ndarray:
        """P(content) per sentence, float64 ``[n]``; ``encoder`` must be the training encoder."""
        model_id = encoder.model_id
        if model_id != self.embedding_model:
            raise ValueError(f"chat classifier {self.name} was trained on {self.embedding_model} embeddings, "
                             f"the encoder given is {model_id}")
        x = features(sentences, starts, ends, duration, encoder).astype(np.float64)
        if x.shape[1] != self.coef.size:
            raise ValueError(f"{x.shape[1]} features but the model has {self.coef.size} weights")
        return _sigmoid(x @ self.coef + self.intercept)

    def predict(self, sentences: Sequence[str], starts: Sequence[float], ends: Sequence[float],
                duration: float | Sequence[float], encoder: TextEncoder) -> np.ndarray:
        """Boolean mask: True = content (kept), False = chat (removed), at ``threshold`` (Lin et al., ACL 2020,
        A.1.3)."""
        return self.predict_proba(sentences, starts, ends, duration, encoder) >= self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": self.version, "classifier": "logreg",
                "embedding_model": self.embedding_model, "C": self.C, "coef": [float(v) for v in self.coef],
                "intercept": self.intercept, "threshold": self.threshold, "scores": self.scores}

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces, no NaN)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)

    def fingerprint(self) -> str:
        """sha1 of the canonical JSON, 12 hex characters."""
        return hashlib.sha1(self.to_json().encode("utf-8")).hexdigest()[:12]

    def save(self, path: str | Path) -> Path:
        """Write the canonical JSON atomically."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(self.to_json() + "\n", encoding="utf-8")
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
        return out

    @classmethod
    def from_dict(cls, obj: Any, where: str = "model") -> ChatClassifier:
        """Validate keys, types and shapes; ``ValueError`` naming the problem."""

        def bad(why: str) -> ValueError:
            return ValueError(f"{where}: not a valid chat classifier model: {why}")

        if not isinstance(obj, dict):
            raise bad("not a JSON object")
        if obj.get("format") != FORMAT:
            raise bad(f"format is {obj.get('format')!r}, expected {FORMAT!r}")
        if obj.keys() != _MODEL_KEYS:
            missing, extra = sorted(_MODEL_KEYS - obj.keys()), sorted(obj.keys() - _MODEL_KEYS)
            raise bad(f"missing keys {missing}, unexpected keys {extra}")
        if obj["version"] != FORMAT_VERSION or isinstance(obj["version"], bool):
            raise bad(f"version {obj['version']!r} is not {FORMAT_VERSION}")
        if obj["classifier"] != "logreg":
            raise bad(f"classifier {obj['classifier']!r} is not 'logreg'")
        if not isinstance(obj["embedding_model"], str) or not obj["embedding_model"]:
            raise bad("embedding_model is not a non-empty string")
        coef = obj["coef"]
        if not isinstance(coef, list) or len(coef) <= N_POSITION or not all(_finite(v) for v in coef):
            raise bad(f"coef is not a list of more than {N_POSITION} finite numbers")
        if not _finite(obj["C"]) or obj["C"] <= 0:
            raise bad("C is not a positive number")
        if not _finite(obj["intercept"]):
            raise bad("intercept is not a finite number")
        if not _finite(obj["threshold"]) or not 0 <= obj["threshold"] <= 1:
            raise bad("threshold is not a number in [0, 1]")
        if not isinstance(obj["scores"], dict):
            raise bad("scores is not an object")
        return cls(obj["embedding_model"], obj["C"], np.asarray(coef, dtype=np.float64), obj["intercept"],
                   obj["threshold"], obj["scores"], obj["version"])

    @classmethod
    def load(cls, path: str | Path) -> ChatClassifier:
        """Read a model written by :meth:`save` (plain JSON, safe to load); ``ValueError`` on a bad file."""
        src = Path(path)
        if not src.is_file():
            raise FileNotFoundError(f"chat classifier model not found: {src}")
        if src.stat().st_size > MAX_MODEL_BYTES:
            raise ValueError(f"{src}: larger than {MAX_MODEL_BYTES} bytes, not a chat classifier model")

        def no_constant(name: str) -> Any:
            raise ValueError(f"non-finite number {name}")

        try:
            obj = json.loads(src.read_bytes().decode("utf-8"), parse_constant=no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as err:
            raise ValueError(f"{src}: not a valid chat classifier model: invalid JSON: {err}") from None
        return cls.from_dict(obj, str(src))


# --------------------------------------------------------------------------------------------- training


def train_logreg(rows: Sequence[Mapping[str, Any]], encoder: TextEncoder, c_grid: Sequence[float] = C_GRID,
                 threshold: float = 0.5) -> ChatClassifier:
    """Fit ``LogisticRegression(max_iter=1000)`` on the train rows of :func:`labelled_sentences` for each C,
    keep the C with the best validation F1 of ``content`` (ties: the smaller C), and score validation and test at
    ``threshold`` (Lin et al., ACL 2020, A.1.3 reports test P 86.76 / R 84.26 / F1 85.01 for its LSTM).

    Raises ``ValueError`` without both labels in train or without validation rows. Deterministic (lbfgs).
    """
    from sklearn import __version__ as sklearn_version
    from sklearn.linear_model import LogisticRegression

    if not c_grid or any(not _finite(c) or c <= 0 for c in c_grid):
        raise ValueError(f"c_grid must be positive numbers, got {list(c_grid)}")
    by_split = {s: [i for i, r in enumerate(rows) if r["split"] == s] for s in SPLITS}
    unknown = {r["split"] for r in rows} - set(SPLITS)
    if unknown:
        raise ValueError(f"rows with unknown split(s) {sorted(unknown)}")
    y = np.asarray([int(r["label"]) for r in rows], dtype=np.int64)
    train_labels = set(y[by_split["train"]].tolist())
    if train_labels != {0, 1}:
        raise ValueError(f"chat classifier: the train split needs chat and content sentences, it has "
                         f"{len(by_split['train'])} sentences with labels {sorted(train_labels)}")
    if not by_split["validation"]:
        raise ValueError("chat classifier: the validation split is empty (too few recipe types with transcripts?)")
    x = features([r["sentence"] for r in rows], [r["start"] for r in rows], [r["end"] for r in rows],
                 [r["duration"] for r in rows], encoder).astype(np.float64)
    tr, va = by_split["train"], by_split["validation"]
    best: tuple[float, float, np.ndarray, float] | None = None
    grid = []
    for c in sorted(float(c) for c in c_grid):
        lr = LogisticRegression(C=c, max_iter=1000).fit(x[tr], y[tr])
        coef, intercept = lr.coef_.reshape(-1).astype(np.float64), float(lr.intercept_[0])
        f1 = content_scores(y[va], _sigmoid(x[va] @ coef + intercept) >= threshold)["f1"]
        grid.append({"C": c, "validation_f1": f1})
        if best is None or f1 > best[1]:
            best = (c, f1, coef, intercept)
    assert best is not None
    c, _, coef, intercept = best
    scores: dict[str, Any] = {"c_grid": grid, "threshold": float(threshold), "sklearn": sklearn_version,
                              "counts": {}, "baseline_all_content_f1": {}}
    prob = _sigmoid(x @ coef + intercept)
    for split, idx in by_split.items():
        scores["counts"][split] = {name: int(np.sum(y[idx] == k)) for k, name in enumerate(LABEL_NAMES)}
        if split != "train":
            scores[split] = content_scores(y[idx], prob[idx] >= threshold) if idx else None
            scores["baseline_all_content_f1"][split] = (content_scores(y[idx], np.ones(len(idx)))["f1"]
                                                        if idx else None)
    return ChatClassifier(str(encoder.model_id), c, coef, intercept, threshold, scores)


# --------------------------------------------------------------------------------------------- CLI


def _fmt(s: Mapping[str, Any] | None) -> str:
    if not s:
        return "   (empty split)"
    return f"{100 * s['precision']:6.2f} {100 * s['recall']:6.2f} {100 * s['f1']:6.2f}   n={s['n']}"


def main(argv: Sequence[str] | None = None, encoder_factory: Callable[..., Any] | None = None) -> int:
    """Train on YouCook2 annotations + transcripts, print the scores beside the paper's, write the JSON model."""
    ap = argparse.ArgumentParser(prog="python -m builders.models.chat_classifier", description=__doc__.split("\n")[0])
    ap.add_argument("--annotations", required=True, help="youcookii_annotations_trainval.json")
    ap.add_argument("--transcripts", required=True, help="HowTo100M-format raw_caption.json or a WhisperX folder")
    ap.add_argument("--out", required=True, help="model JSON to write")
    ap.add_argument("--embedding-model", default="minilm", help="minilm (default), mpnet or a local model folder")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--work-dir", help="where raw_caption.json is split per video (default: a temporary folder)")
    args = ap.parse_args(argv)

    from ..sources.transcripts import open_transcripts
    from ..sources.youcook2 import read_youcook2_annotations

    for label, path in (("annotations", args.annotations), ("transcripts", args.transcripts)):
        if not Path(path).exists():
            print(f"error: {label} not found: {path}", file=sys.stderr)
            return 2
    try:
        videos, ann_drops = read_youcook2_annotations(args.annotations)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="chat_classifier_") as tmp:
        store = open_transcripts(args.transcripts, args.work_dir or tmp, wanted_ids=set(videos))
        rows, drops, counts = labelled_sentences(videos, store)
    reasons = Counter(d.reason for d in ann_drops + drops)
    print(f"{len(videos)} YouCook2 videos; {counts.get('videos_labelled', 0)} with sentences; {len(rows)} labelled "
          f"sentences; drops: {dict(reasons) or 'none'}")
    if not rows:
        print(f"error: no labelled sentences: none of the {len(videos)} videos has a usable transcript in "
              f"{args.transcripts}", file=sys.stderr)
        return 1
    if encoder_factory is None:
        from .text_encoder import get_encoder as encoder_factory
    encoder = encoder_factory(args.embedding_model, args.device, args.batch_size)
    try:
        model = train_logreg(rows, encoder, threshold=args.threshold)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    sc = model.scores
    for split in SPLITS:
        c = sc["counts"][split]
        print(f"{split:<10} chat {c['chat']:>7}  content {c['content']:>7}")
    print(f"C = {model.C:g} (validation F1 per C: "
          + ", ".join(f"{g['C']:g}: {100 * g['validation_f1']:.2f}" for g in sc["c_grid"]) + ")")
    print(f"{'content':<10} {'P':>6} {'R':>6} {'F1':>6}")
    print(f"{'validation':<10} {_fmt(sc.get('validation'))}")
    print(f"{'test':<10} {_fmt(sc.get('test'))}")
    print(f"{'paper test':<10} {PAPER_TEST['precision']:6.2f} {PAPER_TEST['recall']:6.2f} {PAPER_TEST['f1']:6.2f}"
          "   (LSTM + attention over GloVe, Lin et al., ACL 2020, A.1.3)")
    out = model.save(args.out)
    print(f"wrote {out} ({model.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
