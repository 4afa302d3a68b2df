"""TAN's punctuation restorer (spec howtostep.md §3.2, GPU preset) on a tiny random-init BERT token classifier with a
hand-written word-piece vocabulary: piece times, the 0.4 penalty on the no-punctuation classes, the cut rule."""

from __future__ import annotations

import numpy as np
import pytest

from builders.ops.sentencify import cut_at_punctuation_labels, narrations_from_transcript

torch = pytest.importorskip("torch")
LABELS = ["OU", "OO", ".O", "!O", ",O", ".U", "!U", ",U", ":O", ";O", ":U", "'O", "-O", "?O", "?U"]
WORDS = ["boil", "the", "water", "then", "add", "tea", "leaves", "and", "wait", "##s"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast

    d = tmp_path_factory.mktemp("punct")
    (d / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tok = BertTokenizerFast(vocab=str(d / "vocab.txt"))  # transformers 5: `vocab`, not `vocab_file`
    cfg = BertConfig(vocab_size=len(WORDS) + 5, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, num_labels=len(LABELS),
                     id2label=dict(enumerate(LABELS)), label2id={k: i for i, k in enumerate(LABELS)})
    torch.manual_seed(0)
    model = BertForTokenClassification(cfg).eval()
    return model, tok, d


def _bias(model, probs: dict[str, float]) -> None:
    """Make every piece's class probabilities exactly ``probs`` (zero classifier weights, log-prob biases)."""
    with torch.no_grad():
        model.classifier.weight.zero_()
        p = np.full(len(LABELS), 1e-6)
        for k, v in probs.items():
            p[LABELS.index(k)] = v
        model.classifier.bias.copy_(torch.tensor(np.log(p / p.sum()), dtype=torch.float32))


def test_the_penalty_of_0_4_applies_to_probabilities_of_the_no_punctuation_classes(tiny):
    from builders.models.punctuation import BertPunctuator

    model, tok, _ = tiny
    punct = BertPunctuator(None, model=model, tokenizer=tok)
    _bias(model, {"OO": 0.5, ".O": 0.3, ",O": 0.2})  # 0.5 - 0.4 = 0.1 < 0.3: every piece ends a sentence
    assert punct.piece_labels(["boil", "the"]) == [".O", ".O"]
    _bias(model, {"OO": 0.75, ".O": 0.25})  # 0.75 - 0.4 = 0.35 > 0.25: no stop
    assert punct.piece_labels(["boil", "the"]) == ["OO", "OO"]
    # captions are lower-cased and stripped of ,.!? ; word and piece times are linear shares
    pieces, cont, s, e = punct.pieces([("Boil the water.", 0.0, 3.0), ("wait", 4.0, 5.0)])
    assert pieces == ["boil", "the", "water", "wait"] and cont == [False] * 4
    np.testing.assert_allclose(s, [0.0, 1.0, 2.0, 4.0])
    np.testing.assert_allclose(e, [1.0, 2.0, 3.0, 5.0])
    _bias(model, {"OO": 0.75, ".U": 0.25})
    assert punct([("boil the water", 0.0, 3.0), ("wait", 4.5, 5.0)]) == [  # the 1.5 s gap cuts
        ("boil the water", 0.0, 3.0), ("wait", 4.5, 5.0)]


def test_a_missing_model_folder_names_the_config_key(tmp_path):
    from builders.models.punctuation import BertPunctuator

    with pytest.raises(ValueError, match="punctuation_model_path"):
        BertPunctuator(tmp_path)


def test_the_cut_rule_short_and_long_buffers_word_pieces_and_gaps():
    t = list(range(30))
    # < 20 pieces buffered: only a full stop cuts (the comma does not); capitalised and punctuated as labelled
    got = cut_at_punctuation_labels(["boil", "water", "then", "add", "tea"], [False] * 5, t[:5], [x + 1 for x in t[:5]],
                                    ["OU", ",O", "OO", "OO", ".O"])
    assert got == [("Boil water, then add tea.", 0, 5)]
    # never inside a word: the label of the first piece of "wait ##s" does not cut
    got = cut_at_punctuation_labels(["wait", "##s", "now"], [False, True, False], [0, 1, 2], [1, 2, 3],
                                    [".O", ".O", "OO"])
    assert got == [("waits.", 0, 1 + 1), ("now", 2, 3)]
    # >= 20 pieces buffered: a comma cuts too
    labels = ["OO"] * 21 + [",O"] + ["OO"] * 3
    got = cut_at_punctuation_labels(["w"] * 25, [False] * 25, t[:25], [x + 1 for x in t[:25]], labels)
    assert [len(x[0].split()) for x in got] == [22, 3]
    # a gap over 1 s cuts without any label
    got = cut_at_punctuation_labels(["a", "b"], [False, False], [0.0, 2.5], [1.0, 3.0], ["OO", "OO"])
    assert got == [("a", 0.0, 1.0), ("b", 2.5, 3.0)]


def test_narrations_use_the_punctuator_for_unpunctuated_raw_captions():
    caps = [(f"step {k} stir the pot again", 2.0 * k, 2.0 * k + 1.8) for k in range(12)]
    calls = []

    def punctuate(c):
        calls.append(len(c))
        return [(t + ".", s, e) for t, s, e in c]

    res = narrations_from_transcript("htm_raw", caps, punctuate=punctuate)
    assert res.reason is None and res.mode == "bert" and calls == [12] and len(res.sentences) == 12
