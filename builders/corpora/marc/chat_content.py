"""Transcripts cut into sentences, and the chat/content classifier that removes chat (Lin et al., ACL 2020, §2, A.1.3;
docs/corpora/marc.md, Pipeline step 5): stages ``load_transcript`` (:class:`TranscriptSentences`) and ``chat_filter``
(:class:`ChatFilter`) of the ``videos`` pipeline.

The paper's classifier is an LSTM with attention over GloVe; the toolkit trains a logistic regression over MiniLM
sentence embeddings and position features on YouCook2 (:func:`train_chat_classifier`), kept in the build's cache
(:func:`cached_chat_classifier`), or reads a trained one (``chat_model``).
"""

from __future__ import annotations

import math
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ... import __version__ as toolkit_version
from ...core.artefacts import artefact_dir
from ...core.config import ConfigError
from ...core.fingerprint import file_fingerprint, hash_obj, shared_memo
from ...core.records import Drop, Out, Row
from ...core.step import FitInputs, Requirement, Resources, Step, execution_setting, gpus_for_device, input_path
# the module, not its names: a test replaces ``chat_classifier.train_logreg`` to prove a resumed build does not train
from ...models import chat_classifier
from ...models.chat_classifier import ChatClassifier, labelled_sentences, read_transcript, transcript_sentences
from ...models.text_encoder import get_encoder, release_encoder
from ...release import write_json_atomic
from ...sources.schema_org import detect_language
from ...sources.transcripts import TranscriptError, open_transcripts
from ...sources.youcook2 import read_youcook2_annotations
from ...steps.transcripts import TranscriptStep

SENTENCE_ENCODER = Requirement("sentence_transformers", "embed")
LOGREG = Requirement("sklearn", "embed")


@dataclass(eq=False)
class TranscriptSentences(TranscriptStep):
    """Transcript sentences (docs/corpora/marc.md): WhisperX words joined and punkt-split, or raw caption lines
    (punkt-split when >= 30% of lines end a sentence, else one line = one sentence); ``no_transcript``,
    ``malformed_transcript``, ``empty_transcript``, ``non_english_transcript`` (py3langid; docs/reason-codes.md).

    The transcripts are read as by the shared loader (:class:`~builders.steps.transcripts.TranscriptStep`: the split
    of ``raw_caption.json``, per-video cache keys); unlike Sieve & Swap's :class:`LoadTranscript`, which keeps the raw
    segments and records errors for later filters, a MARC candidate gets its sentences (WhisperX words included) and
    an unusable transcript is dropped here."""

    name = "load_transcript"
    version = "3"
    id_field = "_key"
    reads = {"_key": str, "video_id": str}
    writes = {"asr_source": str, "duration": float, "sentences": list}

    require_english: bool = field(kw_only=True)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            try:
                t, words = read_transcript(self.store, r["video_id"])
            except TranscriptError as e:
                out.drop(r["_key"], e.reason, e.detail)
                continue
            sents = [(x, s, e) for x, s, e in transcript_sentences(t, words)
                     if math.isfinite(s) and math.isfinite(e) and any(ch.isalnum() for ch in x)]
            if not sents:
                out.drop(r["_key"], "empty_transcript", f"{len(t.segments)} segments, no sentence")
                continue
            if self.require_english:
                lang = t.language or detect_language(" ".join(x for x, _, _ in sents), "en")
                if lang and lang != "en":
                    out.drop(r["_key"], "non_english_transcript", f"language {lang}")
                    continue
            out.keep({**r, "asr_source": t.source, "duration": max(e for _, _, e in sents),
                      "sentences": [{"text": x, "start": s, "end": e} for x, s, e in sents]})


@dataclass(eq=False)
class ChatFilter(Step):
    """Lin et al., ACL 2020, A.1.3: remove chat sentences with the chat/content classifier (threshold 0.5), then drop
    videos with no content (``all_chat``), more than ``max_video_sentences`` (``too_many_sentences``) or fewer than
    ``min_video_sentences`` (``too_few_sentences``) sentences left.

    Global stage: ``fit`` trains the ``logreg`` classifier on YouCook2 labels (or loads ``chat_model``) once and
    writes it to its artefact folder with its labelled sentences (the ``chat_content`` config) and scores:
    ``model.json``, ``sentences.parquet``, ``scores.json``. The training files and the model file key its cache.
    """

    name = "chat_filter"
    version = "2"
    id_field = "_key"
    reads = {"_key": str, "sentences": list, "duration": float}
    writes = {"content": list, "num_chat_removed": int, "chat_classifier": str}
    removes = ("sentences",)
    requires = (SENTENCE_ENCODER, LOGREG)

    classifier: str
    embedding_model: str
    chat_threshold: float
    max_video_sentences: int
    min_video_sentences: int
    #: a trained model, else the YouCook2 annotations and their transcripts it is trained on
    chat_model: Path | None = input_path()
    youcook2: Path | None = input_path()
    youcook2_transcripts: Path | None = input_path()
    #: the sentence encoder's torch device and batch size: how it runs, not what it outputs (the classifier's own
    #: cache, :func:`cached_chat_classifier`, is keyed by them)
    device: str = execution_setting("cpu")
    encode_batch_size: int = execution_setting(64)

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.device))

    def missing_requirements(self) -> list[Requirement]:
        """No model without ``classifier: logreg`` or without videos (no trained model and no YouCook2 data: the
        inputs check asks for one of them with ``--videos``); no training (scikit-learn) with a ``chat_model``."""
        if self.classifier == "none" or not (self.chat_model or self.youcook2):
            return []
        needed = (SENTENCE_ENCODER,) if self.chat_model else (SENTENCE_ENCODER, LOGREG)
        return [r for r in needed if r.missing()]

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        if self.classifier == "none" or not any(True for _ in inputs.data.rows(["_key"])):
            return {"name": "none", "model": None}
        try:
            if self.chat_model:
                model = ChatClassifier.load(self.chat_model)
                model.save(inputs.artefact_dir / "model.json")
                return {"name": model.name, "model": "model.json", "trained": False}
            model_path = cached_chat_classifier(self, inputs.artefact_dir, inputs.cache_dir)
            return {"name": ChatClassifier.load(model_path).name, "model": "model.json", "trained": True}
        except ValueError as e:  # a bad model file, or training data without both labels / a validation split
            raise ConfigError(f"chat/content classifier: {e}") from e

    def setup(self, state: Any) -> None:
        self.state = state
        self.model = None
        if state["model"]:
            self.model = ChatClassifier.load(artefact_dir(state) / state["model"])
            self.encoder = get_encoder(self.embedding_model, self.device, self.encode_batch_size)

    def teardown(self) -> None:
        release_encoder(self.embedding_model, self.device, self.encode_batch_size)
        self.model = self.encoder = None

    def process(self, rows: list[Row], out: Out) -> None:
        """The shard's sentences go through the encoder and the classifier in one call (full encoder batches, as a
        GPU wants them), each with its own video's duration; each video is then decided on its own."""
        proba = None
        if self.model is not None:
            flat = [(s, r["duration"]) for r in rows for s in r["sentences"]]
            proba = iter(self.model.predict_proba([s["text"] for s, _ in flat], [s["start"] for s, _ in flat],
                                                  [s["end"] for s, _ in flat], [d for _, d in flat], self.encoder))
        for r in rows:
            sents = r["sentences"]
            if proba is not None:
                content = [s for s in sents if next(proba) >= self.chat_threshold]
            else:
                content = list(sents)
            removed = len(sents) - len(content)
            out.count("chat_sentences_removed", removed)
            if not content:
                out.drop(r["_key"], "all_chat", f"{len(sents)} sentences, all chat")
            elif len(content) > self.max_video_sentences:
                out.drop(r["_key"], "too_many_sentences", f"{len(content)} content sentences")
            elif len(content) < self.min_video_sentences:
                out.drop(r["_key"], "too_few_sentences", f"{len(content)} content sentences")
            else:
                row = {k: v for k, v in r.items() if k != "sentences"}
                out.keep({**row, "content": content, "num_chat_removed": removed,
                          "chat_classifier": self.state["name"]})


#: bump when the training of the chat/content classifier changes (its cache key)
CHAT_TRAINING_VERSION = "1"
CLASSIFIER_FILES = ("model.json", "sentences.parquet", "scores.json")


def cached_chat_classifier(step: ChatFilter, folder: Path, cache_dir: Path | None) -> Path:
    """:func:`train_chat_classifier` into ``folder`` through the build's cache: the model and its files are kept in
    ``<cache_dir>/chat_classifier/<key>/``, keyed by the contents of the training inputs (YouCook2 annotations and
    transcripts) and the settings that change the model, so ``chat_filter``, fitted again whenever a video's
    transcript changes its input, does not train again. Returns the model path in ``folder``."""
    if cache_dir is None:
        return train_chat_classifier(step, folder)
    memo = shared_memo(Path(cache_dir) / "fingerprints.sqlite")
    key = hash_obj("chat_classifier", CHAT_TRAINING_VERSION, ChatFilter.version, toolkit_version,
                   [file_fingerprint(p, memo)["sha256"] for p in (step.youcook2, step.youcook2_transcripts)],
                   step.embedding_model, step.device, step.encode_batch_size, step.chat_threshold)
    kept = Path(cache_dir) / "chat_classifier" / key[:32]
    if not (kept / "model.json").exists():  # written last by the training: its presence marks it complete
        train_chat_classifier(step, kept)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in CLASSIFIER_FILES:
        shutil.copyfile(kept / name, folder / name)
    return folder / "model.json"


def train_chat_classifier(step: ChatFilter, folder: Path) -> Path:
    """Train the ``logreg`` chat/content classifier on YouCook2 (Lin et al., ACL 2020, A.1.3) into ``folder`` with the
    settings of ``step`` (its training files, encoder and threshold): ``model.json``, ``sentences.parquet`` (the
    labelled sentences) and ``scores.json``. Returns the model path.
    """
    folder = Path(folder)
    model_path = folder / "model.json"
    folder.mkdir(parents=True, exist_ok=True)
    videos, bad = read_youcook2_annotations(step.youcook2)
    store = open_transcripts(step.youcook2_transcripts, folder, set(videos))
    rows, drops, counts = labelled_sentences(videos, store)
    encoder = get_encoder(step.embedding_model, step.device, step.encode_batch_size)
    model = chat_classifier.train_logreg(rows, encoder, threshold=step.chat_threshold)
    table = pa.Table.from_pylist([{k: r[k] for k in ("video_id", "recipe_type", "sentence", "start", "end", "label",
                                                      "split")} for r in rows])
    pq.write_table(table, folder / "sentences.parquet")
    write_json_atomic(folder / "scores.json", {
        "scores": model.scores, "name": model.name, "C": model.C,
        "dropped_videos": dict(sorted(_reason_counts(list(bad) + list(drops)).items())),
        "counts": {str(k): v for k, v in dict(counts).items()}})
    model.save(model_path)  # written last: its presence marks the training complete
    return model_path


def _reason_counts(drops: list[Drop]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for d in drops:
        out[d.reason] += 1
    return dict(out)
