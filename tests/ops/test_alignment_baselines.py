"""Alignment baselines (marc.md §8.2): random, uniform, exact word match, TF-IDF, BM25, embedding cosine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from builders.ops.alignment_baselines import (
    argmax_alignment,
    bm25_scores,
    embedding_scores,
    exact_match_scores,
    fit_idf,
    random_alignment,
    tfidf_scores,
    uniform_alignment,
)

SRC = [["chop", "onion"], ["fry", "onion", "oil", "oil"], ["add", "salt"], []]
TGT = [["heat", "oil", "pan"], ["chop", "onions", "onion"], ["season", "salt"]]


def test_uniform_floor_rule():
    # the paper's example: S1, S2 -> T1; S3, S4 -> T2
    assert uniform_alignment(4, 2).tolist() == [0, 0, 1, 1]
    assert uniform_alignment(3, 5).tolist() == [0, 1, 3]  # floor(i * 5 / 3)
    assert uniform_alignment(2, 0).tolist() == [-1, -1]


def test_random_alignment_seeded():
    a = random_alignment(50, 4, np.random.default_rng(0))
    b = random_alignment(50, 4, np.random.default_rng(0))
    assert a.tolist() == b.tolist() and a.min() >= 0 and a.max() <= 3 and len(set(a.tolist())) == 4


def test_exact_match_over_longer_instruction():
    s = exact_match_scores(SRC, TGT)
    assert s.shape == (4, 3)
    assert s[0, 1] == pytest.approx(2 / 3)  # {chop, onion} vs {chop, onions, onion}: 2 / 3 types
    assert s[1, 0] == pytest.approx(1 / 3)  # {fry, onion, oil} vs {heat, oil, pan}
    assert s[2, 2] == pytest.approx(1 / 2)
    assert s[3].tolist() == [0, 0, 0]
    assert argmax_alignment(s).tolist() == [1, 0, 2, 0]  # the empty row ties -> lowest index


def test_tfidf_matches_sklearn_weighting():
    sk = pytest.importorskip("sklearn.feature_extraction.text")
    docs = [" ".join(x) for x in SRC + TGT]
    idf, unseen = fit_idf(SRC + TGT)
    ours = tfidf_scores(SRC, TGT, idf, unseen)
    vec = sk.TfidfVectorizer(analyzer=str.split, lowercase=False, smooth_idf=True, norm="l2").fit(docs)
    a = vec.transform([" ".join(x) for x in SRC]).toarray()
    b = vec.transform([" ".join(x) for x in TGT]).toarray()
    np.testing.assert_allclose(ours, a @ b.T, atol=1e-12)
    assert unseen == pytest.approx(math.log(1 + len(docs)) + 1)


def test_bm25_formula_by_hand():
    scores = bm25_scores(SRC, TGT)
    N, k1, b = 3, 1.5, 0.75
    avgdl = (3 + 3 + 2) / 3

    def term(df: int, tf: int, dl: int) -> float:
        idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
        return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    # source 1 "fry onion oil oil" vs target 0 "heat oil pan": oil (df 1) twice in the query
    assert scores[1, 0] == pytest.approx(2 * term(1, 1, 3))
    # source 0 "chop onion" vs target 1 "chop onions onion"
    assert scores[0, 1] == pytest.approx(term(1, 1, 3) + term(1, 1, 3))
    assert scores[3].tolist() == [0.0, 0.0, 0.0]
    # idf stays positive when a word is in every target instruction (unlike rank_bm25's Okapi idf)
    everywhere = bm25_scores([["salt"]], [["salt", "a"], ["salt"], ["salt", "b"]])
    assert np.all(everywhere > 0)
    assert bm25_scores([["a"]], []).shape == (1, 0)


def test_embedding_cosine():
    src = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    tgt = np.array([[0.0, 1.0], [3.0, 0.1]])
    s = embedding_scores(src, tgt)
    assert argmax_alignment(s).tolist() == [1, 0, 0]
    assert s[2].tolist() == [0.0, 0.0]
    assert s[1, 0] == pytest.approx(1.0)


def test_argmax_ties_and_shapes():
    assert argmax_alignment(np.array([[0.5, 0.5, 0.2]])).tolist() == [0]
    assert argmax_alignment(np.zeros((2, 0))).tolist() == [-1, -1]
    with pytest.raises(ValueError):
        argmax_alignment(np.zeros(3))
