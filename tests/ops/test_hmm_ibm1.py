"""HMM+IBM1 aligner (builders/ops/hmm_ibm1.py) against the formulas of marc.md §3.7 / paper 002 Eq. 1.

Brute force: on tiny pairs every alignment sequence a ∈ {0..N-1}^M is enumerated, so γ, the jump counts, the word
counts and the likelihood of the vectorised forward-backward are checked against their definitions. IBM1-only mode is
checked against ``nltk.translate.IBMModel1`` on real ARA recipe pairs (marc.md §9).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from builders.ops.hmm_ibm1 import (
    STOP_WORDS,
    HmmIbm1,
    HmmIbm1Config,
    build_vocabulary,
    tokenize,
    tokenize_recipe,
)

# ------------------------------------------------------------------------------------------------ helpers


def _random_model(pairs, cfg: HmmIbm1Config, seed: int = 0) -> HmmIbm1:
    """A model initialised on ``pairs`` (0 EM iterations) whose t, t(.|NULL) and p(d) are then randomised."""
    cfg = HmmIbm1Config(**{**cfg.to_dict(), "schedule": ((cfg.schedule[0][0], 0),)})
    model = HmmIbm1(cfg).fit(pairs)
    rng = np.random.default_rng(seed)
    model.t[:-1] = rng.uniform(0.05, 1.0, model.t.size - 1)
    model.t_null = rng.uniform(0.05, 1.0, model.t_null.size)
    w = cfg.schedule[0][0]
    p = rng.uniform(0.1, 1.0, 2 * w + 1)
    model.jump = {d: float(x) for d, x in zip(range(-w, w + 1), p / p.sum())}
    return model


def _t(model: HmmIbm1, f: str, e: str | None) -> float:
    table = model.translation_table()
    if e is None:
        return model.t_null[model.vocabulary[f]]
    return table.get((f, e), model.config.min_prob)


def _brute_emission(model: HmmIbm1, fm: list[str], en: list[str]) -> float:
    """Eq. 1 with the inner sum over I (marc.md §3.7), NULL word optional, the J = 0 and I = 0 rules."""
    cfg = model.config
    fm = [w for w in fm if w in model.vocabulary]
    en = [w for w in en if w in model.vocabulary]
    J, I = len(fm), len(en)
    if J == 0:
        return 1.0
    if I == 0 and not cfg.null_word:
        return cfg.empty_target_prob ** J
    denom = (I + (1 if cfg.null_word else 0)) ** J
    prod = 1.0
    for f in fm:
        s = sum(_t(model, f, e) for e in en) + (_t(model, f, None) if cfg.null_word else 0.0)
        prod *= s
    return prod / denom


def _brute_force(model: HmmIbm1, src, tgt):
    """γ, jump counts, word counts, NULL counts and log-likelihood by enumerating every alignment sequence."""
    M, N = len(src), len(tgt)
    E = np.array([[_brute_emission(model, src[m], tgt[n]) for n in range(N)] for m in range(M)])
    w = model.window
    p = model.jump

    def trans(a: int, b: int) -> float:
        d = b - a
        if abs(d) > w:
            return 0.0
        z = sum(p[k] for k in range(-w, w + 1) if 0 <= a + k < N)
        return p[d] / z

    total = 0.0
    gamma = np.zeros((M, N))
    jumps = {d: 0.0 for d in range(-w, w + 1)}
    probs = {}
    for a in itertools.product(range(N), repeat=M):
        pr = E[0, a[0]] / N
        for m in range(1, M):
            pr *= trans(a[m - 1], a[m]) * E[m, a[m]]
        probs[a] = pr
        total += pr
    for a, pr in probs.items():
        for m in range(M):
            gamma[m, a[m]] += pr / total
        if pr == 0.0:
            continue
        for m in range(1, M):
            jumps[a[m] - a[m - 1]] += pr / total
    words: dict[tuple[str, str], float] = {}
    nulls: dict[str, float] = {}
    voc = model.vocabulary
    for m in range(M):
        fm = [x for x in src[m] if x in voc]
        for n in range(N):
            en = [x for x in tgt[n] if x in voc]
            for f in fm:
                s = sum(_t(model, f, e) for e in en) + (_t(model, f, None) if model.config.null_word else 0.0)
                if not en and not model.config.null_word:
                    continue
                for e in en:
                    words[(f, e)] = words.get((f, e), 0.0) + gamma[m, n] * _t(model, f, e) / s
                if model.config.null_word:
                    nulls[f] = nulls.get(f, 0.0) + gamma[m, n] * _t(model, f, None) / s
    return gamma, jumps, words, nulls, math.log(total), E


TINY = [
    ([["chop", "onion"], ["fry", "onion", "oil"], ["add", "salt"]],
     [["heat", "oil"], ["chop", "onions", "onion"], ["season", "salt", "pepper"]]),
    ([["boil", "pasta", "water"], ["drain", "pasta"], [], ["bake", "oven", "cheese"]],
     [["cook", "pasta"], ["drain"], ["top", "cheese", "bake"], ["serve"]]),
    ([["mix", "flour", "sugar"], ["add", "egg", "egg"]],
     [["mix", "flour"], [], ["egg", "sugar", "mix"]]),
]


# ------------------------------------------------------------------------------------------------ tokens


def test_tokenize_nfkc_casefold_stop_words():
    assert len(STOP_WORDS) == 326
    assert tokenize("Preheat the OVEN to 350°F!") == ["preheat", "oven", "350", "f"]
    assert tokenize("Ｍｉｘ ﬂour") == ["mix", "flour"]  # NFKC: full-width letters and the fl ligature
    assert tokenize("Straße") == ["strasse"]  # casefold, not lower
    assert tokenize("") == []
    assert tokenize_recipe(["Add salt.", "and then"]) == [["add", "salt"], []]


def test_build_vocabulary_min_count_and_sorted_ids():
    recipes = [[["b", "a"], ["a"]], [["c", "a", "b"]]]
    assert build_vocabulary(recipes, 1) == {"a": 0, "b": 1, "c": 2}
    assert build_vocabulary(recipes, 2) == {"a": 0, "b": 1}
    assert build_vocabulary(recipes, 4) == {}


def test_config_presets():
    paper = HmmIbm1Config.paper()
    assert paper.schedule == ((1, 3), (2, 2)) and paper.min_count == 5 and paper.identity_prior == 0
    assert not paper.null_word and paper.hmm and paper.iterations == 5
    best = HmmIbm1Config.best()
    assert best.hmm and best.iterations == 5 and best.identity_prior > 0
    assert HmmIbm1Config.best(min_count=3).min_count == 3
    ibm1 = HmmIbm1Config.ibm1()
    assert not ibm1.hmm and ibm1.null_word
    with pytest.raises(ValueError):
        HmmIbm1Config(schedule=())
    with pytest.raises(ValueError):
        HmmIbm1Config(min_count=0)


# ------------------------------------------------------------------------------------------------ Eq. 1


@pytest.mark.parametrize("null_word", [False, True])
def test_emissions_match_eq1(null_word):
    cfg = HmmIbm1Config(schedule=((1, 0),), min_count=1, null_word=null_word)
    model = _random_model(TINY, cfg, seed=3)
    logs = model.log_emissions(TINY)
    for (src, tgt), logE in zip(TINY, logs):
        want = np.array([[_brute_emission(model, f, e) for e in tgt] for f in src])
        np.testing.assert_allclose(np.exp(logE), want, rtol=1e-12, atol=0)


def test_emission_rules_empty_source_and_target():
    cfg = HmmIbm1Config(schedule=((1, 0),), min_count=1)
    pairs = [([["a", "b"], []], [["a"], [], ["b", "c"]])]
    model = HmmIbm1(cfg).fit(pairs)
    logE = model.log_emissions(pairs)[0]
    assert np.all(logE[1] == 0.0)  # J = 0 -> 1 for every n
    assert logE[0, 1] == pytest.approx(2 * math.log(1e-12))  # I = 0 < J -> (1e-12)^J
    V = model.source_vocabulary_size
    assert V == 2  # a, b appear on the source side
    assert logE[0, 0] == pytest.approx(2 * math.log(1 / V))  # uniform t: (1/I · I/V)^J
    assert logE[0, 2] == pytest.approx(2 * math.log((2 / V) / 2))


def test_identity_prior_initial_table():
    pairs = [([["a", "b"]], [["a", "c"]])]
    model = HmmIbm1(HmmIbm1Config(schedule=((1, 0),), min_count=1, identity_prior=10.0)).fit(pairs)
    table = model.translation_table()
    # source vocabulary {a, b}: t(a|a) = 11 / (2 + 10), t(b|a) = 1 / 12; c is not a source word: uniform 1/2
    assert table[("a", "a")] == pytest.approx(11 / 12)
    assert table[("b", "a")] == pytest.approx(1 / 12)
    assert table[("a", "c")] == pytest.approx(1 / 2)
    assert table[("b", "c")] == pytest.approx(1 / 2)


# ------------------------------------------------------------------------------------------------ forward-backward


@pytest.mark.parametrize("window,null_word", [(1, False), (2, False), (1, True), (3, True)])
def test_posteriors_and_counts_match_brute_force(window, null_word):
    cfg = HmmIbm1Config(schedule=((window, 0),), min_count=1, null_word=null_word)
    model = _random_model(TINY, cfg, seed=window)
    out = model.e_step(TINY)
    total_jumps = {d: 0.0 for d in range(-window, window + 1)}
    total_words: dict = {}
    total_nulls: dict = {}
    for p, (src, tgt) in enumerate(TINY):
        gamma, jumps, words, nulls, loglik, _ = _brute_force(model, src, tgt)
        np.testing.assert_allclose(out["gamma"][p], gamma, rtol=1e-10, atol=1e-13)
        assert out["log_likelihood"][p] == pytest.approx(loglik, rel=1e-12)
        for d, c in jumps.items():
            total_jumps[d] += c
        for k, c in words.items():
            total_words[k] = total_words.get(k, 0.0) + c
        for k, c in nulls.items():
            total_nulls[k] = total_nulls.get(k, 0.0) + c
    for d, c in total_jumps.items():
        assert out["jump_counts"][d] == pytest.approx(c, rel=1e-10, abs=1e-12)
    for k, c in total_words.items():
        assert out["word_counts"][k] == pytest.approx(c, rel=1e-10, abs=1e-12)
    assert sum(out["word_counts"].values()) == pytest.approx(sum(total_words.values()), rel=1e-12)
    if null_word:
        for k, c in total_nulls.items():
            assert out["null_counts"][k] == pytest.approx(c, rel=1e-10)
    # γ rows are distributions; ξ sums to M - 1 per pair
    for g in out["gamma"]:
        np.testing.assert_allclose(g.sum(1), 1.0, rtol=1e-12)
    assert sum(out["jump_counts"].values()) == pytest.approx(sum(len(s) - 1 for s, _ in TINY))


def test_m_step_normalises_counts():
    cfg = HmmIbm1Config(schedule=((1, 1),), min_count=1)
    model0 = HmmIbm1(HmmIbm1Config(schedule=((1, 0),), min_count=1)).fit(TINY)
    counts = model0.e_step(TINY)
    model1 = HmmIbm1(cfg).fit(TINY)
    table = model1.translation_table()
    by_e: dict = {}
    for (f, e), c in counts["word_counts"].items():
        by_e[e] = by_e.get(e, 0.0) + c
    for (f, e), c in counts["word_counts"].items():
        assert table[(f, e)] == pytest.approx(max(c / by_e[e], cfg.min_prob), rel=1e-12)
    total = sum(counts["jump_counts"].values())
    for d, c in counts["jump_counts"].items():
        assert model1.jump[d] == pytest.approx(c / total, rel=1e-9)


def test_window_widening_starts_new_offsets_at_smallest_p():
    model = HmmIbm1(HmmIbm1Config(schedule=((1, 0),), min_count=1)).fit(TINY)
    model.jump = {-1: 0.1, 0: 0.6, 1: 0.3}
    model._set_window(2, first=False)
    z = 0.1 + 0.6 + 0.3 + 0.1 + 0.1
    assert model.jump == pytest.approx({-2: 0.1 / z, -1: 0.1 / z, 0: 0.6 / z, 1: 0.3 / z, 2: 0.1 / z})


def test_em_increases_likelihood_and_schedule():
    model = HmmIbm1(HmmIbm1Config(min_count=1)).fit(TINY * 3)
    ll = [h["log_likelihood"] for h in model.history]
    assert len(ll) == 5 and [h["window"] for h in model.history] == [1, 1, 1, 2, 2]
    assert ll[0] <= ll[1] + 1e-9 and ll[1] <= ll[2] + 1e-9  # EM is monotone within a window
    assert ll[4] >= ll[3] - 1e-9
    assert set(model.jump) == {-2, -1, 0, 1, 2}


def test_align_decisions_ties_and_top_k():
    model = HmmIbm1(HmmIbm1Config(schedule=((1, 0),), min_count=1)).fit(TINY)
    # uniform start: equal emissions for the J = 0 instruction; ties go to the lowest index
    al = model.align([([[]], [["a"], ["b"], ["c"], ["d"]])])[0]
    assert al.gamma.shape == (1, 4)
    assert al.target_index.tolist() == [0]
    assert al.top_indices.tolist() == [[0, 1, 2]]
    np.testing.assert_allclose(al.top_probabilities, [[0.25, 0.25, 0.25]])
    rows = al.rows()
    assert rows[0]["target_index"] == 0 and rows[0]["probability"] == pytest.approx(0.25)
    empty = model.align([([["a"]], [])])[0]
    assert empty.target_index.tolist() == [-1]


def test_determinism_and_chunking_invariance():
    pairs = TINY * 4
    cfg = HmmIbm1Config.best()
    a = HmmIbm1(cfg).fit(pairs)
    b = HmmIbm1(cfg).fit(pairs)
    assert np.array_equal(a.t, b.t) and a.jump == b.jump
    small = HmmIbm1(HmmIbm1Config.best(chunk_entries=7, bucket_cells=20)).fit(pairs)
    np.testing.assert_allclose(small.t, a.t, rtol=1e-10, atol=1e-15)
    for x, y in zip(small.posteriors(pairs), a.posteriors(pairs)):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


def test_unseen_pairs_and_words_at_alignment_time():
    model = HmmIbm1(HmmIbm1Config(min_count=1, identity_prior=10.0)).fit(TINY)
    out = model.align([([["onion", "zzz"], ["qqq"]], [["salt"], ["onion"]])])[0]
    assert out.gamma.shape == (2, 2) and np.all(np.isfinite(out.gamma))
    np.testing.assert_allclose(out.gamma.sum(1), 1.0)
    assert out.target_index[0] == 1


# ------------------------------------------------------------------------------------------------ NLTK IBM1


def _ara_pairs(shared_data, n_pairs: int):
    from eval.benchmarks.ara_conllu import read_corpus

    corpus = read_corpus(shared_data / "marc_ara")
    recipes = corpus.dish_recipes("baked_ziti") + corpus.dish_recipes("orange_chicken")
    toks = [tokenize_recipe(r.instruction_texts) for r in recipes]
    pairs = [(toks[i], toks[j]) for i in range(len(toks)) for j in range(len(toks)) if i != j]
    return pairs[:: max(1, len(pairs) // n_pairs)][:n_pairs]


def test_ibm1_mode_matches_nltk_ibm_model1(shared_data):
    nltk_translate = pytest.importorskip("nltk.translate")
    pairs = _ara_pairs(shared_data, 30)
    bitext = [nltk_translate.AlignedSent([w for ins in s for w in ins], [w for ins in t for w in ins])
              for s, t in pairs]
    reference = nltk_translate.IBMModel1(bitext, 5)
    model = HmmIbm1(HmmIbm1Config.ibm1(5, nltk_compat=True)).fit(pairs)
    table = model.translation_table()
    assert len(table) > 10_000
    worst = max(abs(reference.translation_table[f][e] - v) for (f, e), v in table.items())
    assert worst < 1e-6
    # every co-occurring pair NLTK updated is in our table
    n_ref = sum(1 for f in reference.translation_table for e in reference.translation_table[f]
                if reference.translation_table[f][e] != 1 / len(reference.trg_vocab))
    assert n_ref <= len(table)


def test_ibm1_mode_nltk_docstring_example():
    pytest.importorskip("nltk")
    pairs = [(["klein", "ist", "das", "haus"], ["the", "house", "is", "small"]),
             (["das", "haus", "ist", "ja", "groß"], ["the", "house", "is", "big"]),
             (["das", "buch", "ist", "ja", "klein"], ["the", "book", "is", "small"]),
             (["das", "haus"], ["the", "house"]), (["das", "buch"], ["the", "book"]), (["ein", "buch"], ["a", "book"])]
    model = HmmIbm1(HmmIbm1Config.ibm1(5)).fit([([s], [t]) for s, t in pairs])
    table = model.translation_table()
    # the values printed in nltk.translate.ibm1's docstring
    assert round(table[("buch", "book")], 3) == 0.889
    assert round(table[("das", "book")], 3) == 0.062
    assert round(table[("buch", None)], 3) == 0.113
    assert round(table[("ja", None)], 3) == 0.073


def test_nltk_compat_only_matters_for_repeated_words():
    pairs = [([["a", "b"]], [["a", "c"]]), ([["b", "c"]], [["c"]])]
    x = HmmIbm1(HmmIbm1Config.ibm1(3)).fit(pairs)
    y = HmmIbm1(HmmIbm1Config.ibm1(3, nltk_compat=True)).fit(pairs)
    np.testing.assert_allclose(x.t, y.t)
    rep = [([["a", "a", "b"]], [["a", "c"]]), ([["b", "c"]], [["c"]])]
    x = HmmIbm1(HmmIbm1Config.ibm1(3)).fit(rep)
    y = HmmIbm1(HmmIbm1Config.ibm1(3, nltk_compat=True)).fit(rep)
    assert not np.allclose(x.t, y.t)


def test_fixture_training_is_fast(shared_data):
    import time

    from eval.benchmarks.ara_conllu import read_corpus

    corpus = read_corpus(shared_data / "marc_ara")
    toks = {n: tokenize_recipe(r.instruction_texts) for n, r in corpus.recipes.items()}
    pairs = []
    for dish in corpus.dishes:
        names = [r.name for r in corpus.dish_recipes(dish)]
        pairs += [(toks[a], toks[b]) for a in names for b in names if a != b]
    assert len(pairs) == 660
    start = time.perf_counter()
    model = HmmIbm1(HmmIbm1Config.paper()).fit(pairs)
    elapsed = time.perf_counter() - start
    assert len(model.history) == 5
    assert elapsed < 6.0  # marc.md §9: < 2 s on the CI machine; generous here for a loaded 2-core box


# ------------------------------------------------------------------------------------------------ state round trip


def _save_load(model: HmmIbm1, tmp_path, name: str) -> HmmIbm1:
    """to_state -> npz + json files -> np.load(allow_pickle=False) + json.load -> from_state."""
    import json

    arrays, meta = model.to_state()
    assert all(a.dtype != object for a in arrays.values())
    np.savez(tmp_path / f"{name}.npz", **arrays)
    (tmp_path / f"{name}.json").write_text(json.dumps(meta, allow_nan=False), encoding="utf-8")
    with np.load(tmp_path / f"{name}.npz", allow_pickle=False) as z:
        loaded = {k: z[k] for k in z.files}
    return HmmIbm1.from_state(loaded, json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8")))


def _assert_same_model(a: HmmIbm1, b: HmmIbm1, pairs) -> None:
    assert b.config == a.config and b.vocabulary == a.vocabulary and b.window == a.window
    assert list(b.jump.items()) == list(a.jump.items())
    assert np.array_equal(b.keys, a.keys) and np.array_equal(b.t, a.t) and np.array_equal(b.t_null, a.t_null)
    assert np.array_equal(b._key_e, a._key_e) and b._key_e.dtype == a._key_e.dtype
    assert np.array_equal(b._key_same, a._key_same) and np.array_equal(b._source_present, a._source_present)
    assert b.history == a.history and b.timings == a.timings
    assert b.source_vocabulary_size == a.source_vocabulary_size
    assert b.word_pairs_per_iteration == a.word_pairs_per_iteration
    for x, y in zip(a.align(pairs), b.align(pairs), strict=True):
        assert np.array_equal(x.gamma, y.gamma)
        assert np.array_equal(x.target_index, y.target_index) and np.array_equal(x.top_indices, y.top_indices)
        assert np.array_equal(x.top_probabilities, y.top_probabilities)
        assert x.log_likelihood == y.log_likelihood or (math.isnan(x.log_likelihood) and math.isnan(y.log_likelihood))
    for x, y in zip(a.posteriors(pairs), b.posteriors(pairs), strict=True):
        assert np.array_equal(x, y)
    assert a.translation_table() == b.translation_table()


UNSEEN = [([["onion", "zzz"], ["qqq"], []], [["salt"], ["onion", "oil"]]), ([["a"]], []), ([], [["b"]])]


@pytest.mark.parametrize("cfg", [HmmIbm1Config(min_count=1), HmmIbm1Config(min_count=1, null_word=True),
                                 HmmIbm1Config.ibm1(3), HmmIbm1Config.best()], ids=["small", "null", "ibm1", "best"])
def test_state_round_trip_small_models(cfg, tmp_path):
    model = HmmIbm1(cfg).fit(TINY * 2)
    pairs = TINY + UNSEEN
    direct = HmmIbm1.from_state(*model.to_state())
    _assert_same_model(model, direct, pairs)
    loaded = _save_load(model, tmp_path, "model")
    _assert_same_model(model, loaded, pairs)
    e1, e2 = model.e_step(TINY), loaded.e_step(TINY)
    assert e1["word_counts"] == e2["word_counts"] and e1["jump_counts"] == e2["jump_counts"]
    # the state of a loaded model is the state it was loaded from
    a1, m1 = model.to_state()
    a2, m2 = loaded.to_state()
    assert m1 == m2 and a1.keys() == a2.keys()
    assert all(np.array_equal(a1[k], a2[k]) and a1[k].dtype == a2[k].dtype for k in a1)


@pytest.mark.parametrize("preset", ["best", "paper"])
def test_state_round_trip_presets_on_ara(preset, shared_data, tmp_path):
    pairs = _ara_pairs(shared_data, 60)
    cfg = HmmIbm1Config.best() if preset == "best" else HmmIbm1Config.paper()
    model = HmmIbm1(cfg).fit(pairs)
    assert len(model.vocabulary) > 50 and model.keys.size > 1000
    loaded = _save_load(model, tmp_path, preset)
    _assert_same_model(model, loaded, pairs[:20] + UNSEEN)


def test_state_of_unfitted_model_and_bad_states():
    import json

    empty = HmmIbm1(HmmIbm1Config.paper())
    arrays, meta = empty.to_state()
    json.dumps(meta)
    again = HmmIbm1.from_state(arrays, meta)
    assert again.vocabulary == {} and again.config == empty.config
    model = HmmIbm1(HmmIbm1Config(min_count=1)).fit(TINY)
    arrays, meta = model.to_state()
    with pytest.raises(ValueError, match="format"):
        HmmIbm1.from_state(arrays, {**meta, "format": "other"})
    with pytest.raises(ValueError, match="inconsistent"):
        HmmIbm1.from_state({**arrays, "t": arrays["t"][:-1]}, meta)
    with pytest.raises(ValueError, match="repeats"):
        HmmIbm1.from_state(arrays, {**meta, "vocabulary": ["a"] * len(meta["vocabulary"])})


# ---------------------------------------------------------------------------------------- streamed EM (issue 37)


def _streamed(cfg: HmmIbm1Config, pairs, vocabulary, **writer_args):
    """``fit_streamed`` on ``pairs`` written through :class:`PairShardWriter` into a :class:`MemoryPairShards`."""
    from builders.ops.pair_shards import MemoryPairShards, PairShardWriter

    store = MemoryPairShards()
    writer = PairShardWriter(vocabulary, store.append, cfg.chunk_entries, flatten=not cfg.hmm, **writer_args)
    for src, tgt in pairs:
        writer.add(src, tgt)
    writer.close()
    assert writer.pairs == len(pairs) and writer.shards == len(store)
    return HmmIbm1(cfg).fit_streamed(store, vocabulary), store


def _vocabulary(pairs, cfg: HmmIbm1Config) -> dict[str, int]:
    seen = {tuple(tuple(i) for i in r): r for p in pairs for r in p}
    return build_vocabulary(seen.values(), cfg.min_count)


STREAM_CONFIGS = [HmmIbm1Config(min_count=1), HmmIbm1Config(min_count=1, null_word=True), HmmIbm1Config.ibm1(3),
                  HmmIbm1Config.best(), HmmIbm1Config.paper(min_count=2)]
STREAM_IDS = ["small", "null", "ibm1", "best", "paper"]


@pytest.mark.parametrize("cfg", STREAM_CONFIGS, ids=STREAM_IDS)
def test_streamed_em_on_one_shard_is_in_memory_em_bit_for_bit(cfg):
    pairs = TINY * 3 + UNSEEN
    vocab = _vocabulary(pairs, cfg)
    memory = HmmIbm1(cfg).fit(pairs, vocabulary=vocab)
    streamed, store = _streamed(cfg, pairs, vocab)
    assert len(store) == 1
    assert np.array_equal(streamed.keys, memory.keys) and np.array_equal(streamed.t, memory.t)
    assert np.array_equal(streamed.t_null, memory.t_null) and list(streamed.jump.items()) == list(memory.jump.items())
    assert np.array_equal(streamed._source_present, memory._source_present)
    assert streamed.source_vocabulary_size == memory.source_vocabulary_size
    assert streamed.word_pairs_per_iteration == memory.word_pairs_per_iteration
    assert [h["log_likelihood"] for h in streamed.history] == [h["log_likelihood"] for h in memory.history]
    for a, b in zip(memory.align(pairs), streamed.align(pairs), strict=True):
        assert np.array_equal(a.gamma, b.gamma) and np.array_equal(a.top_indices, b.top_indices)


def _assert_same_parameters(streamed: HmmIbm1, memory: HmmIbm1, exact: bool) -> None:
    assert np.array_equal(streamed.keys, memory.keys)
    if exact:
        assert np.array_equal(streamed.t, memory.t) and np.array_equal(streamed.t_null, memory.t_null)
        assert list(streamed.jump.items()) == list(memory.jump.items())
    np.testing.assert_allclose(streamed.t, memory.t, rtol=1e-9, atol=0)
    np.testing.assert_allclose(streamed.t_null, memory.t_null, rtol=1e-9, atol=0)
    assert streamed.jump.keys() == memory.jump.keys()
    np.testing.assert_allclose(list(streamed.jump.values()), list(memory.jump.values()), rtol=1e-9, atol=0)


@pytest.mark.parametrize("cfg", STREAM_CONFIGS, ids=STREAM_IDS)
def test_streamed_em_over_many_shards_is_in_memory_em(cfg):
    """Shards of at most 40 packed entries, cut where the in-memory aligner cuts its chunks: the counts are added
    in the same order, so the parameters are the same bit for bit; with a NULL word and an empty target instruction
    the NULL counts are added per shard instead of once (equal to 1e-9)."""
    cfg = replace(cfg, chunk_entries=40)
    pairs = TINY * 3 + UNSEEN
    vocab = _vocabulary(pairs, cfg)
    memory = HmmIbm1(cfg).fit(pairs, vocabulary=vocab)
    streamed, store = _streamed(cfg, pairs, vocab)
    assert len(store) > 5
    packed = HmmIbm1(cfg)
    packed.vocabulary = vocab
    chunks = packed._pack(packed._prepare(pairs), len(vocab), train=True).ranges
    starts = np.cumsum([0] + [s.pairs for s in store.shards])
    assert {lo for lo, _ in chunks} <= set(starts.tolist())  # every chunk starts a shard
    exact = not cfg.null_word  # these pairs have empty target instructions: with NULL they emit through it alone
    _assert_same_parameters(streamed, memory, exact=exact)
    for a, b in zip(memory.align(pairs), streamed.align(pairs), strict=True):
        assert np.array_equal(a.target_index, b.target_index) and np.array_equal(a.top_indices, b.top_indices)
        if exact:
            assert np.array_equal(a.gamma, b.gamma)
        np.testing.assert_allclose(b.gamma, a.gamma, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("preset", ["best", "paper"])
def test_streamed_em_on_the_ara_fixture(preset, shared_data):
    """The real recipes of the ARA fixture (the evaluation's held-out case): one shard or shards of 20,000 entries
    (about 15 pairs each), the parameters and alignments of in-memory EM bit for bit."""
    pairs = _ara_pairs(shared_data, 200)
    base = HmmIbm1Config.best() if preset == "best" else HmmIbm1Config.paper(min_count=2)
    for cfg, shards in ((base, 1), (replace(base, chunk_entries=20_000), 10)):
        vocab = _vocabulary(pairs, cfg)
        memory = HmmIbm1(cfg).fit(pairs, vocabulary=vocab)
        streamed, store = _streamed(cfg, pairs, vocab)
        assert (len(store) == 1) if shards == 1 else (len(store) >= shards)
        _assert_same_parameters(streamed, memory, exact=True)
        for a, b in zip(memory.align(pairs), streamed.align(pairs), strict=True):
            assert np.array_equal(a.gamma, b.gamma) and np.array_equal(a.top_indices, b.top_indices)


def test_writer_cuts_shards_by_the_chunk_rule():
    from builders.ops.pair_shards import EncodedPairs, MemoryPairShards, PairShardWriter

    vocab = {w: i for i, w in enumerate("abcdefgh")}
    # packed entries of a pair: (distinct words per source instruction, summed) x (the same for the target)
    pairs = [([["a", "b"]], [["a"], ["b"]]),            # 2 x 2 = 4
             ([["a", "b", "a"]], [["c", "d", "e"]]),     # 2 x 3 = 6  -> 10, still <= 10
             ([["a"], ["b", "c"]], [["a"]]),             # 3 x 1 = 3  -> 13 > 10: a new shard
             ([["a", "b", "c", "d"]], [["e", "f", "g"]]),  # 12 (over the bound alone: a shard of its own)
             ([["zzz"]], [["a"]]),                       # 0 (no word in the vocabulary): 12 + 0 > 10
             ([], [["a"]])]                              # 0 (no instruction)
    store = MemoryPairShards()
    writer = PairShardWriter(vocab, store.append, chunk_entries=10)
    for s, t in pairs:
        writer.add(s, t)
    assert len(store) == 3  # the last shard is handed on when the writer closes
    writer.close()
    assert [s.pairs for s in store.shards] == [2, 1, 1, 2]
    first = store.shards[0]
    # distinct recipes once each; out-of-vocabulary words removed, instructions kept
    assert first.n_instr.tolist() == [1, 2, 1, 1] and first.src.tolist() == [0, 2] and first.tgt.tolist() == [1, 3]
    assert first.instr_len.tolist() == [2, 1, 1, 3, 3] and first.tok.tolist() == [0, 1, 0, 1, 0, 1, 0, 2, 3, 4]
    last = store.shards[3]
    assert last.n_instr.tolist() == [1, 1, 0] and last.instr_len.tolist() == [0, 1]
    again = EncodedPairs.from_arrays(last.arrays())
    assert all(np.array_equal(getattr(again, k), getattr(last, k)) for k in EncodedPairs.FIELDS)
    with pytest.raises(ValueError, match="inconsistent"):
        EncodedPairs.from_arrays({**last.arrays(), "src": np.array([0, 7], dtype=np.int32)})
    # the same cuts as the in-memory chunks (a range without entries makes no chunk but still ends one)
    model = HmmIbm1(HmmIbm1Config(min_count=1, chunk_entries=10))
    model.vocabulary = vocab
    assert model._pack(pairs, len(vocab), train=True).ranges == [(0, 2), (2, 3), (3, 4)]
    # a cap on pairs per shard; the IBM1-only mode flattens every recipe into one instruction
    capped = MemoryPairShards()
    writer = PairShardWriter(vocab, capped.append, chunk_entries=10**9, flatten=True, max_pairs=4)
    for s, t in pairs:
        writer.add(s, t)
    writer.close()
    assert [s.pairs for s in capped.shards] == [4, 2] and set(capped.shards[0].n_instr.tolist()) == {1}
    with pytest.raises(ValueError):
        PairShardWriter(vocab, capped.append, chunk_entries=0)


def test_streamed_em_without_pairs():
    from builders.ops.pair_shards import MemoryPairShards

    model = HmmIbm1(HmmIbm1Config.best()).fit_streamed(MemoryPairShards(), {"a": 0})
    assert model.keys.size == 0 and model.t.tolist() == [model.config.min_prob] and len(model.history) == 5
    assert model.align([([["a"]], [["a"]])])[0].target_index.tolist() == [0]


def test_a_model_from_mapped_tables_aligns_without_copying_them(tmp_path):
    model = HmmIbm1(HmmIbm1Config.best()).fit(TINY * 2)
    arrays, meta = model.to_state()
    mapped = {}
    for k, a in arrays.items():
        np.save(tmp_path / f"{k}.npy", a)
        mapped[k] = np.load(tmp_path / f"{k}.npy", mmap_mode="r")
    loaded = HmmIbm1.from_state(mapped, meta)
    assert isinstance(loaded.t.base, np.memmap) or isinstance(loaded.t, np.memmap)
    assert not loaded.t.flags.writeable and not loaded.keys.flags.writeable
    for a, b in zip(model.align(TINY + UNSEEN), loaded.align(TINY + UNSEEN), strict=True):
        assert np.array_equal(a.gamma, b.gamma)
    assert loaded._key_cache is None  # aligning derives nothing of the tables' size
