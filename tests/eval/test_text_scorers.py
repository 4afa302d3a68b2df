"""pycocoevalcap-based scorers (``../shared/specs/evaluation.md`` §6(a), §7): context-free PTB tokenization,
pipelined METEOR 1.5 equal to pycocoevalcap's own wrapper, BLEU-4 / CIDEr-D wrappers."""

from __future__ import annotations

import pytest
from dvc_toy import requires_java

from eval.metrics.text_scorers import (
    CocoScorer,
    PlainTokenizer,
    bleu4,
    cider_d,
    remove_nonascii,
)


def test_remove_nonascii_and_plain_tokenizer():
    assert remove_nonascii("jalapeño 90º") == "jalape o 90 "
    assert PlainTokenizer().tokenize(["Crack eggs , then STIR ."]) == ["crack eggs then stir"]


def test_cider_of_exact_match_counts_ngrams_with_nonzero_idf():
    # one pair: every n-gram has df = 1 and log(1 pair) = 0 -> CIDEr 0; spec §6(a)
    assert cider_d([("slice the bread", "slice the bread")]) == 0.0
    # two pairs whose references share no n-gram: each exact match scores 10, the mean is 10
    assert cider_d([("a b c d", "a b c d"), ("e f g h", "e f g h")]) == pytest.approx(10.0)
    assert cider_d([]) == 0.0


def test_bleu4_is_corpus_level():
    assert bleu4([("a b c d", "a b c d")]) == pytest.approx(1.0)
    assert bleu4([("a b c", "x y z w")]) == pytest.approx(0.0, abs=1e-6)
    assert bleu4([]) == 0.0


@pytest.fixture(scope="module")
def coco():
    scorer = CocoScorer()
    yield scorer
    scorer.close()


@requires_java
def test_ptb_tokenizer_has_no_cross_line_context(coco):
    s = "Preheat the oven to 425 F/218 C."
    alone = coco.tokenize([s])
    before_upper = coco.tokenize([s, "Add the eggs."])
    before_lower = coco.tokenize([s, "add the eggs."])
    assert alone[0] == before_upper[0] == before_lower[0] == "preheat the oven to 425 f/218 c."
    assert coco.tokenize(["Crack eggs, then stir!", "", "abc123!@#"]) == ["crack eggs then stir", "", "abc123!@#"]


@requires_java
def test_video_blocks_keep_the_reference_context_within_a_video(coco):
    """Tasty's "Dice a jalape o." is followed by "Then ..." in its video: the reference (which batches a video's lines
    together) splits the period off; tokenized alone, the one-letter token keeps it (spec §6(c))."""
    video = ["Dice a jalape o. ", "Then add it in a medium bowl. "]
    assert coco.tokenize_blocks([video])[0] == ["dice a jalape o", "then add it in a medium bowl"]
    assert coco.tokenize([video[0]]) == ["dice a jalape o."]
    # the last line of a block sees the neutral line, whatever block comes next
    assert coco.tokenize_blocks([["Dice a jalape o."], ["Then stir."]])[0] == ["dice a jalape o."]


@requires_java
def test_meteor_single_pair_matches_spec(coco):
    # spec §7(e): METEOR(hyp "toast the bread", ref "slice the bread") = 0.2730 (METEOR 1.5)
    assert coco.meteor_single([("toast the bread", "slice the bread")])[0] == pytest.approx(0.2730, abs=5e-5)
    assert coco.meteor_single([("fry garlic", "fry garlic")])[0] == pytest.approx(1.0, abs=1e-9)


@requires_java
def test_meteor_equals_pycocoevalcap_wrapper(coco):
    from pycocoevalcap.meteor.meteor import Meteor

    pairs = [("crack eggs into bowl", "crack eggs into a bowl"), ("season with salt", "abc123!@#"),
             ("pour mixture onto pan", "pour the mixture onto the pan"), ("slice the bread", "toast the bread")]
    reference = Meteor()
    try:
        ref_agg, ref_seg = reference.compute_score({i: [r] for i, (_, r) in enumerate(pairs)},
                                                   {i: [h] for i, (h, _) in enumerate(pairs)})
    finally:
        del reference
    assert coco.meteor_aggregate([pairs, []]) == pytest.approx([ref_agg, 0.0], abs=1e-12)
    assert coco.meteor_single(pairs) == pytest.approx(ref_seg, abs=1e-12)
