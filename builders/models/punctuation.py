"""TAN's punctuation restorer for unpunctuated YouTube captions (docs/corpora/howtostep.md, GPU preset; GitHub
``TengdaHan/TemporalAlignNet`` ``sentencify_text/``): ``felflare/bert-restore-punctuation`` from a local folder.

Captions are lower-cased and stripped of ``,.!?``; each word gets a linear share of its caption's span and each BERT
word piece a linear share of its word's; pieces run through the model in windows of at most ``max_pieces`` (256);
softmax over the classes, ``no_punct_penalty`` (0.4) subtracted from the two no-punctuation classes (``OU``, ``OO``),
argmax; :func:`builders.ops.sentencify.cut_at_punctuation_labels` then cuts the sentences. Nothing is downloaded: the
folder must hold the model and its tokenizer (``local_files_only``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

Sentence = tuple[str, float, float]
NO_PUNCT_CLASSES = ("OU", "OO")
_STRIP = re.compile(r"[,.!?]")


class BertPunctuator:
    """``punctuator(captions) -> sentences`` (the ``punctuate`` hook of ``ops.sentencify.narrations_from_transcript``).
    """

    def __init__(self, path: str | Path | None, device: str = "cpu", max_pieces: int = 256,
                 no_punct_penalty: float = 0.4, model: Any = None, tokenizer: Any = None):
        if model is None or tokenizer is None:
            if not path or not (Path(path) / "config.json").is_file():
                raise ValueError("sentencify_mode=bert needs a local copy of felflare/bert-restore-punctuation: set "
                                 "`punctuation_model_path` (nothing is downloaded)")
            from transformers import AutoModelForTokenClassification, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModelForTokenClassification.from_pretrained(str(path), local_files_only=True)
        self.model, self.tokenizer = model.to(device).eval(), tokenizer
        self.device, self.max_pieces, self.penalty = device, int(max_pieces), float(no_punct_penalty)
        id2label = model.config.id2label
        self.labels = [str(id2label[i]) for i in range(len(id2label))]
        self.model_id = f"bert-restore-punctuation {Path(str(path)).name if path else 'in-memory'}"

    def pieces(self, captions: list[Sentence]) -> tuple[list[str], list[bool], np.ndarray, np.ndarray]:
        """Word pieces with ``continuation`` flags and linearly interpolated times (TAN, Han et al., CVPR 2022)."""
        pieces, cont, starts, ends = [], [], [], []
        for text, s, e in captions:
            words = [w for w in _STRIP.sub("", text.lower()).split() if w]
            for k, w in enumerate(words):
                ws = s + (e - s) * k / len(words)
                we = s + (e - s) * (k + 1) / len(words)
                toks = self.tokenizer.tokenize(w) or [self.tokenizer.unk_token]
                for j, t in enumerate(toks):
                    pieces.append(t)
                    cont.append(j > 0)
                    starts.append(ws + (we - ws) * j / len(toks))
                    ends.append(ws + (we - ws) * (j + 1) / len(toks))
        return pieces, cont, np.asarray(starts, np.float64), np.asarray(ends, np.float64)

    def piece_labels(self, pieces: list[str]) -> list[str]:
        import torch

        penalty = np.zeros(len(self.labels), np.float32)
        for name in NO_PUNCT_CLASSES:
            if name in self.labels:
                penalty[self.labels.index(name)] = self.penalty
        out: list[str] = []
        with torch.inference_mode():
            for a in range(0, len(pieces), self.max_pieces):
                ids = self.tokenizer.convert_tokens_to_ids(pieces[a:a + self.max_pieces])
                ids = [self.tokenizer.cls_token_id, *ids, self.tokenizer.sep_token_id]
                logits = self.model(input_ids=torch.tensor([ids], device=self.device)).logits[0, 1:-1]
                probs = torch.softmax(logits.float(), dim=-1).cpu().numpy() - penalty
                out += [self.labels[int(k)] for k in probs.argmax(axis=1)]
        return out

    def __call__(self, captions: list[Sentence]) -> list[Sentence]:
        from ..ops.sentencify import cut_at_punctuation_labels

        pieces, cont, starts, ends = self.pieces(captions)
        if not pieces:
            return []
        return cut_at_punctuation_labels(pieces, cont, starts, ends, self.piece_labels(pieces))
