"""Bad input on the marc video and alignment steps: every problem is a named drop, nothing crashes (marc.md §6)."""

from __future__ import annotations

import json

import numpy as np

from builders.core.records import Out
from builders.core.orchestrate import fit_locally
from builders.core.step import FitInputs
from builders.corpora.marc.config import MarcConfig
from builders.corpora.marc.pipeline import ChatFilter, TranscriptSentences, pipelines


class _Data:
    def __init__(self, rows):
        self._rows = rows

    def rows(self, columns=None):
        return [{k: r[k] for k in (columns or r) if k in r} for r in self._rows]


def _sentences(n):
    return [{"text": f"sentence {i}", "start": float(i), "end": float(i) + 1.0} for i in range(n)]


class _FixedScores:
    """Stands in for the trained classifier: P(content) per sentence from a table keyed by the sentence text."""

    def __init__(self, scores):
        self.scores = scores

    def predict_proba(self, texts, starts, ends, duration, encoder):
        return np.asarray([self.scores[t] for t in texts])


def _stage(cfg, name):
    """The stage ``name`` as the corpus's pipeline function makes it from ``cfg``."""
    return next(s for p in pipelines(cfg) for s in [p.source, *p.steps] if s.name == name)


def test_chat_filter_named_drops():
    step = ChatFilter(classifier="logreg", embedding_model="minilm", chat_threshold=0.5, max_video_sentences=3,
                      min_video_sentences=2)
    step.state = {"name": "logreg-minilm@test", "model": "unused"}
    scores = {f"sentence {i}": p for i, p in enumerate([0.1, 0.9, 0.5, 0.49, 0.7, 0.8])}
    step.model, step.encoder = _FixedScores(scores), None
    rows = [
        {"_key": "d:all_chat", "sentences": [_sentences(6)[i] for i in (0, 3)], "duration": 9.0},
        {"_key": "d:too_many", "sentences": _sentences(6), "duration": 9.0},  # 0.9, 0.5, 0.7, 0.8 >= 0.5: 4 > 3
        {"_key": "d:too_few", "sentences": _sentences(2), "duration": 9.0},  # only 0.9 is content
        {"_key": "d:ok", "sentences": _sentences(3), "duration": 9.0},  # 0.9 and 0.5 (threshold inclusive)
    ]
    out = Out("chat_filter")
    step.process(rows, out)
    assert {d.item_id: d.reason for d in out.drops} == {
        "d:all_chat": "all_chat", "d:too_many": "too_many_sentences", "d:too_few": "too_few_sentences"}
    (kept,) = out.rows
    assert [s["text"] for s in kept["content"]] == ["sentence 1", "sentence 2"]
    assert kept["num_chat_removed"] == 1 and kept["chat_classifier"] == "logreg-minilm@test"
    assert out.counters["chat_sentences_removed"] == 2 + 2 + 1 + 1


def test_load_transcript_named_drops(tmp_path):
    captions = {
        "enVideo0001": {"text": ["first mash the bananas in a bowl", "then stir in the melted butter and sugar"],
                        "start": [0.0, 4.0], "end": [4.0, 8.0]},
        "deVideo0001": {"text": ["zuerst die bananen in einer schüssel zerdrücken und dann die butter schmelzen",
                                 "danach den zucker und die eier unterrühren bis der teig glatt ist"],
                        "start": [0.0, 4.0], "end": [4.0, 8.0]},
        "emptyVideo1": {"text": ["", "  "], "start": [0.0, 1.0], "end": [1.0, 2.0]},
        "badVideo001": {"text": "not a list", "start": 3, "end": None},
    }
    path = tmp_path / "raw_caption.json"
    path.write_text(json.dumps(captions), encoding="utf-8")
    rows = [{"_key": f"d:{v}", "video_id": v} for v in [*captions, "missingVid1"]]
    step = TranscriptSentences(transcripts=str(path), require_english=True)
    step.setup(fit_locally(step, FitInputs(_Data(rows), {}, tmp_path / "work")))
    out = Out("load_transcript")
    step.process(rows, out)
    assert {d.item_id: d.reason for d in out.drops} == {
        "d:deVideo0001": "non_english_transcript", "d:emptyVideo1": "empty_transcript",
        "d:badVideo001": "malformed_transcript", "d:missingVid1": "no_transcript"}
    (kept,) = out.rows
    assert [s["text"] for s in kept["sentences"]] == [c for c in captions["enVideo0001"]["text"]]
    assert kept["duration"] == 8.0 and kept["asr_source"]


def _pair(pid, split, pair_type, a, b):
    return {"pair_id": pid, "split": split, "pair_type": pair_type, "a_instructions": a, "b_instructions": b}


def test_alignment_without_a_trained_model_or_with_nan_posteriors(tmp_path):
    a = ["mash the ripe bananas", "stir in the melted butter", "bake for an hour"]
    b = ["mash bananas with a fork", "add melted butter", "bake one hour until golden"]
    rows = [_pair("d:t1|t2", "train", "text_text", a, b), _pair("d:t1|v1", "test", "text_video", a, b),
            _pair("d:t3|t4", "test", "text_text", b, a)]
    text = _Data([{"split": "train", "instructions": a}, {"split": "train", "instructions": b}])
    step = _stage(MarcConfig(), "hmm_ibm1")
    state = fit_locally(step, FitInputs(_Data(rows), {"text": text, "videos": _Data([])}, tmp_path))
    assert set(state["names"]) == {"text_text"}  # no train-split text-video pair: no text-video models
    step.setup(state)  # the models are read back from the stage's artefact folder
    out = Out("hmm_ibm1")
    step.process(rows, out)
    assert {d.item_id: d.reason for d in out.drops} == {"d:t1|v1": "no_alignment_model"}
    assert [r["pair_id"] for r in out.rows] == ["d:t1|t2", "d:t3|t4"]
    assert [x["target_index"] for x in out.rows[0]["a_to_b"]] == [0, 1, 2]
    # a model whose posteriors are not finite: the pair is dropped, not released
    model = step.state["models"]["text_text"]
    model.t = np.full_like(model.t, np.nan)
    out = Out("hmm_ibm1")
    step.process(rows[:1], out)
    assert [(d.item_id, d.reason) for d in out.drops] == [("d:t1|t2", "alignment_numerical_error")]
