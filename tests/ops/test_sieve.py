"""builders.ops.sieve: token IoU/recall, the title index (Eq. 5) and the content sieve (paper 004 §4.2, spec §3.3-3.4).
All expected values are computed by hand in the comments."""

import math

import numpy as np
import pytest

from builders.ops.sieve import BodyMatrix, LemmaVocab, TitleIndex, content_sieve, split_for, token_iou_recall


# ----------------------------------------------------------------------------------------------- token_iou_recall
def test_token_iou_recall_example():
    a = {"add", "salt", "oil", "stir"}
    b = {"add", "salt", "pepper"}
    # A∩B = {add, salt} -> 2; |A∪B| = 4 + 3 - 2 = 5; iou = 2/5; recall = 2/|B| = 2/3
    iou, recall = token_iou_recall(a, b)
    assert iou == pytest.approx(2 / 5)
    assert recall == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (set(), set(), (0.0, 0.0)),  # both denominators 0
        (set(), {"x", "y", "z"}, (0.0, 0.0)),  # ∩ = 0, ∪ = 3, |B| = 3
        ({"x"}, set(), (0.0, 0.0)),  # ∩ = 0, ∪ = 1; |B| = 0 -> recall 0.0
        ({"x", "y"}, {"x", "y"}, (1.0, 1.0)),
        ({"x", "y", "z", "w"}, {"x"}, (0.25, 1.0)),  # ∩ = 1, ∪ = 4, |B| = 1
    ],
)
def test_token_iou_recall_edges(a, b, expected):
    assert token_iou_recall(a, b) == expected


# ---------------------------------------------------------------------------------------------------- LemmaVocab
def test_lemma_vocab_ids_in_first_insertion_order():
    vocab = LemmaVocab()
    # new lemmas of one call are inserted in sorted order: add=0, salt=1
    ids = vocab.encode(["salt", "add", "salt"])
    assert ids.dtype == np.int32 and ids.tolist() == [0, 1]
    # add exists (0), oil is new (2); result sorted unique
    assert vocab.encode({"oil", "add"}).tolist() == [0, 2]
    assert vocab.lemmas == ["add", "salt", "oil"] and len(vocab) == 3
    assert vocab["oil"] == 2 and vocab.get("pepper") == -1 and "salt" in vocab and "pepper" not in vocab
    assert vocab.decode([2, 0]) == ["oil", "add"] and vocab.lemma(1) == "salt"
    # add=False skips unknown lemmas and never inserts
    assert vocab.encode(["pepper", "oil"], add=False).tolist() == [2]
    assert len(vocab) == 3
    assert vocab.encode([]).tolist() == []


def test_lemma_vocab_deterministic_across_input_orders():
    words = ["stir", "onion", "garlic", "fry", "add"]
    a, b = LemmaVocab(), LemmaVocab()
    a.encode(set(words))
    b.encode(list(reversed(words)))
    assert a.lemmas == b.lemmas == sorted(words)
    assert LemmaVocab(["b", "a"]).lemmas == ["b", "a"]  # constructor: plain insertion order


# ---------------------------------------------------------------------------------------------------- TitleIndex
# vocab: 0 chocolate, 1 chip, 2 cookie, 3 banana, 4 bread, 5 cake, 6 pancake
TITLES = [
    [0, 1, 2],  # row 0, id 10: chocolate chip cookie
    [3, 4],  # row 1, id 11: banana bread
    [0, 5],  # row 2, id 12: chocolate cake
    [2],  # row 3, id 13: cookie
    [3, 6],  # row 4, id 14: banana pancake
    [],  # row 5, id 15: empty title
]
IDS = np.array([10, 11, 12, 13, 14, 15], dtype=np.int64)
LOG3, LOG6 = math.log(6 / 2), math.log(6 / 1)  # N = 6; df = 2 for chocolate, cookie, banana; 1 for the others


@pytest.fixture
def index():
    return TitleIndex(IDS, [np.array(t, dtype=np.int32) for t in TITLES])


def test_title_index_structure(index):
    assert len(index) == 6 and index.vocab_size == 7
    assert index.posting(0).tolist() == [0, 2]  # chocolate
    assert index.posting(2).tolist() == [0, 3]  # cookie
    assert index.posting(99).tolist() == []
    assert index.df.tolist() == [2, 1, 2, 2, 1, 1, 1]
    np.testing.assert_allclose(index.idf, [LOG3, LOG6, LOG3, LOG3, LOG6, LOG6, LOG6])
    assert index.title_sizes.tolist() == [3, 2, 2, 1, 2, 0]


def test_candidates_any(index):
    # video {chocolate, cookie}: chocolate -> rows {0, 2}, cookie -> rows {0, 3}; shared counts 0:2, 2:1, 3:1
    rows, counts, truncated = index.candidates(np.array([2, 0]))
    assert rows.tolist() == [0, 2, 3] and counts.tolist() == [2, 1, 1] and truncated is False
    assert index.recipe_ids[rows].tolist() == [10, 12, 13]


def test_candidates_min_shared_2(index):
    rows, counts, truncated = index.candidates(np.array([0, 2]), min_shared=2)
    assert rows.tolist() == [0] and counts.tolist() == [2] and not truncated


def test_candidates_recipe_subset(index):
    # row 0 {choc, chip, cookie} ⊄ video (chip missing); row 2 {choc, cake} ⊄ (cake); row 3 {cookie} ⊆ video
    rows, counts, _ = index.candidates(np.array([0, 2]), mode="recipe_subset")
    assert rows.tolist() == [3] and counts.tolist() == [1]
    # video {chocolate, chip, cookie, cake}: rows 0 (3 of 3), 2 (2 of 2), 3 (1 of 1) are subsets
    rows, counts, _ = index.candidates(np.array([0, 1, 2, 5]), mode="recipe_subset")
    assert rows.tolist() == [0, 2, 3] and counts.tolist() == [3, 2, 1]


def test_candidates_max_candidates_ties_by_recipe_id(index):
    # video {chocolate, cookie}: rank row 0 (2 shared) first; rows 2 and 3 share 1 lemma each with the same
    # idf (chocolate: log 3, cookie: log 3) -> recipe id asc: 12 before 13; keep 2 -> rows [0, 2]
    rows, counts, truncated = index.candidates(np.array([0, 2]), max_candidates=2)
    assert rows.tolist() == [0, 2] and counts.tolist() == [2, 1] and truncated is True


def test_candidates_max_candidates_idf_beats_recipe_id(index):
    # video {cookie, pancake}: rows 0 (cookie, idf log 3), 3 (cookie, log 3), 4 (pancake, log 6), all 1 shared.
    # rank: row 4 (Σidf 1.79) > row 0 (1.10, id 10) > row 3 (1.10, id 13); keep 2 -> [4, 0] in RANK order
    rows, counts, truncated = index.candidates(np.array([2, 6]), max_candidates=2)
    assert rows.tolist() == [4, 0] and counts.tolist() == [1, 1] and truncated is True
    # a cap that is not exceeded: no truncation, rows sorted by recipe id
    rows, counts, truncated = index.candidates(np.array([2, 6]), max_candidates=3)
    assert rows.tolist() == [0, 3, 4] and truncated is False
    rows, counts, truncated = index.candidates(np.array([2, 6]), max_candidates=0)
    assert rows.tolist() == [] and truncated is True


def test_candidates_count_beats_idf(index):
    # video {chocolate, chip, cookie, banana, pancake}: row 0 shares 3 (Σidf = log3 + log6 + log3),
    # row 4 shares 2 (banana log3 + pancake log6 = 2.89), row 1 shares 1 (banana), row 2 1, row 3 1
    rows, counts, truncated = index.candidates(np.array([0, 1, 2, 3, 6]), max_candidates=2)
    assert rows.tolist() == [0, 4] and counts.tolist() == [3, 2] and truncated


def test_candidates_empty_and_unknown(index):
    for video in (np.array([], dtype=np.int64), np.array([99, 7]), np.array([-1])):
        rows, counts, truncated = index.candidates(video)
        assert rows.size == 0 and counts.size == 0 and truncated is False
    with pytest.raises(ValueError):
        index.candidates(np.array([0]), mode="all")


def test_candidates_sorted_by_recipe_id_not_row():
    # rows are positions; recipe ids out of order: rows 0 (id 30), 1 (id 10), 2 (id 20) all have lemma 0
    idx = TitleIndex(np.array([30, 10, 20]), [np.array([0]), np.array([0, 1]), np.array([0])])
    rows, counts, _ = idx.candidates(np.array([0]))
    assert rows.tolist() == [1, 2, 0] and idx.recipe_ids[rows].tolist() == [10, 20, 30]
    # with a cap: equal counts and idf (lemma 0 only) -> recipe id asc -> rows 1 (10), 2 (20)
    rows, _, truncated = idx.candidates(np.array([0]), max_candidates=2)
    assert rows.tolist() == [1, 2] and truncated


def test_title_index_duplicate_lemmas_in_a_title():
    idx = TitleIndex(np.array([1, 2]), [np.array([3, 3, 1]), np.array([1])])
    assert idx.title_sizes.tolist() == [2, 1]
    rows, counts, _ = idx.candidates(np.array([1, 3, 3]))
    assert rows.tolist() == [0, 1] and counts.tolist() == [2, 1]


# ---------------------------------------------------------------------------------------------------- BodyMatrix
BODIES = [
    [0, 1, 2, 3],  # row 0
    [],  # row 1: empty body
    [2, 4],  # row 2
    [0, 0, 5],  # row 3: duplicate id -> {0, 5}
]


def test_body_matrix_scores_hand_computed():
    bm = BodyMatrix([np.array(b, dtype=np.int32) for b in BODIES])
    assert bm.shape == (4, 6) and bm.row_sizes.tolist() == [4, 0, 2, 2]
    video = np.array([7, 4, 0, 2, 2])  # A = {0, 2, 4, 7}, |A| = 4 (7 is in no body but counts)
    iou, recall = bm.scores(np.array([2, 1, 0, 3, 1]), video)
    # row 2: ∩ {2,4} = 2, |B| = 2, ∪ = 4+2-2 = 4 -> iou 0.5,  recall 2/2 = 1.0
    # row 1: ∩ 0,     |B| = 0, ∪ = 4          -> iou 0.0,  recall 0.0 (|B| = 0)
    # row 0: ∩ {0,2} = 2, |B| = 4, ∪ = 6      -> iou 1/3,  recall 2/4
    # row 3: ∩ {0} = 1,   |B| = 2, ∪ = 5      -> iou 1/5,  recall 1/2
    np.testing.assert_allclose(iou, [0.5, 0.0, 1 / 3, 0.2, 0.0])
    np.testing.assert_allclose(recall, [1.0, 0.0, 0.5, 0.5, 0.0])
    assert iou.dtype == np.float64


def test_body_matrix_empty_video_and_empty_rows():
    bm = BodyMatrix([np.array(b) for b in BODIES])
    iou, recall = bm.scores(np.array([0, 1, 2]), np.array([], dtype=np.int64))
    assert iou.tolist() == [0.0, 0.0, 0.0] and recall.tolist() == [0.0, 0.0, 0.0]  # row 1: ∪ = 0 -> 0.0
    iou, recall = bm.scores(np.array([], dtype=np.int64), np.array([0, 1]))
    assert iou.size == 0 and recall.size == 0
    only_empty = BodyMatrix([np.array([]), np.array([])])
    iou, recall = only_empty.scores(np.array([1, 0]), np.array([3]))
    assert iou.tolist() == [0.0, 0.0] and recall.tolist() == [0.0, 0.0]


def test_body_matrix_video_size_override():
    bm = BodyMatrix([np.array(b) for b in BODIES])
    # known ids {0, 2} but the transcript had 4 lemmas: row 0 ∩ 2, ∪ = 4 + 4 - 2 = 6 -> 1/3
    iou, recall = bm.scores(np.array([0]), np.array([0, 2]), video_size=4)
    assert iou[0] == pytest.approx(1 / 3) and recall[0] == pytest.approx(0.5)


def test_body_matrix_matches_set_reference():
    rng = np.random.default_rng(0)
    bodies = [rng.integers(0, 40, rng.integers(0, 15)) for _ in range(60)]
    bm = BodyMatrix(bodies, vocab_size=50)
    rows = rng.integers(0, 60, 100)
    for _ in range(5):
        video = rng.integers(0, 50, rng.integers(0, 30))
        iou, recall = bm.scores(rows, video)
        for r, i, c in zip(rows, iou, recall):
            ref_iou, ref_recall = token_iou_recall(set(video.tolist()), set(bodies[r].tolist()))
            assert i == pytest.approx(ref_iou) and c == pytest.approx(ref_recall)


def test_body_matrix_vocab_size_check():
    with pytest.raises(ValueError):
        BodyMatrix([np.array([5])], vocab_size=3)
    with pytest.raises(ValueError):
        BodyMatrix([np.array([-1])])


# ------------------------------------------------------------------------------------------ content sieve, split
def test_content_sieve_boundaries():
    iou = np.array([0.1, 0.0999, 0.5, 0.2, 3 / 30, 0.1])
    recall = np.array([0.3, 0.9, 0.2999, 0.3, 9 / 30, 0.3])
    # both bounds inclusive: (0.1, 0.3) kept; 0.0999 < 0.1 dropped; 0.2999 < 0.3 dropped; 3/30 == 0.1 exactly and
    # 9/30 == 0.3 exactly in float64 (correctly rounded division) -> kept
    assert content_sieve(iou, recall).tolist() == [True, False, False, True, True, True]
    assert content_sieve(np.float32(iou), np.float32(recall)).tolist() == [True, False, False, True, True, True]
    assert content_sieve(iou, recall, iou_threshold=0.15, recall_threshold=0.0).tolist() == [
        False, False, True, True, False, False]


def test_split_for():
    assert split_for(0.2) == "validation"  # exactly λ = 0.2 -> validation (≥)
    assert split_for(0.35) == "validation"
    assert split_for(0.1999) == "train"
    assert split_for(0.1) == "train"
    assert split_for(0.25, val_iou_threshold=0.3) == "train"


def test_from_csr_equals_list_constructors():
    titles = [np.array(t, dtype=np.int64) for t in TITLES]
    indptr = np.cumsum([0] + [len(t) for t in titles])
    flat = np.concatenate(titles)
    a = TitleIndex(IDS, titles)
    b = TitleIndex.from_csr(IDS, indptr, flat)
    for name in ("indptr", "postings", "title_sizes", "df", "idf"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    bodies = [np.array(x, dtype=np.int64) for x in BODIES]
    bptr = np.cumsum([0] + [len(x) for x in bodies])
    bm = BodyMatrix.from_csr(bptr, np.concatenate(bodies))
    np.testing.assert_array_equal(bm.indptr, BodyMatrix(bodies).indptr)
    np.testing.assert_array_equal(bm.indices, BodyMatrix(bodies).indices)
    assert bm.row(3).tolist() == [0, 5]  # duplicate removed
    with pytest.raises(ValueError):
        BodyMatrix.from_csr(np.array([0, 5]), np.array([1, 2]))  # indptr[-1] != len(indices)


def test_lemma_vocab_rejects_a_bare_string():
    with pytest.raises(TypeError):
        LemmaVocab().encode("salt")


def _reference_candidates(titles, ids, video, mode, min_shared, max_candidates):
    """Set-based reference of TitleIndex.candidates (spec §3.3), with idf = log(N / df)."""
    n = len(titles)
    df = {}
    for t in titles:
        for lemma in set(t):
            df[lemma] = df.get(lemma, 0) + 1
    v = set(video)
    cands = []
    for row, t in enumerate(titles):
        t = set(t)
        shared = t & v
        if not shared or len(shared) < min_shared or (mode == "recipe_subset" and not t <= v):
            continue
        cands.append((row, len(shared), round(sum(math.log(n / df[x]) for x in sorted(shared)), 9)))
    if max_candidates is not None and len(cands) > max_candidates:
        cands.sort(key=lambda c: (-c[1], -c[2], ids[c[0]]))
        return [c[0] for c in cands[:max_candidates]], True
    cands.sort(key=lambda c: ids[c[0]])
    return [c[0] for c in cands], False


@pytest.mark.parametrize("mode", ["any", "recipe_subset"])
@pytest.mark.parametrize("min_shared, max_candidates", [(1, None), (2, None), (1, 5), (1, 40)])
def test_candidates_match_set_reference(mode, min_shared, max_candidates):
    # 400 titles over 60 lemmas, lemma 0-2 common: small videos take the sorted (np.unique) path, videos with a
    # common lemma the dense (np.bincount) path; both must equal the set-based reference
    rng = np.random.default_rng(7)
    titles = [sorted(set(rng.integers(0, 60, rng.integers(0, 4)).tolist())
                     | ({int(rng.integers(0, 3))} if rng.random() < 0.3 else set())) for _ in range(400)]
    ids = rng.permutation(10_000)[:400]
    index = TitleIndex(ids, [np.array(t, dtype=np.int64) for t in titles])
    for video in ([55, 57], [41, 50], [10, 20, 30, 40], [0, 1, 5, 6, 7], [2, 3], list(range(60))):
        rows, counts, truncated = index.candidates(np.array(video), mode, min_shared, max_candidates)
        ref_rows, ref_truncated = _reference_candidates(titles, ids, video, mode, min_shared, max_candidates)
        assert rows.tolist() == ref_rows and truncated == ref_truncated, video
        assert counts.tolist() == [len(set(titles[r]) & set(video)) for r in ref_rows]


# ---------------------------------------------------------------------------------------------------- state round trip


def _save_load_trio(vocab, index, body, tmp_path):
    """The three states in one .npz + one .json (as a global stage writes its artefact folder), loaded back."""
    import json

    states = {"vocab": vocab.to_state(), "titles": index.to_state(), "body": body.to_state()}
    arrays = {}
    for _, (arr, _) in states.items():
        assert not set(arr) & set(arrays)  # array names never collide across the classes
        assert all(a.dtype != object for a in arr.values())
        arrays.update(arr)
    np.savez(tmp_path / "index.npz", **arrays)
    (tmp_path / "index.json").write_text(json.dumps({k: m for k, (_, m) in states.items()}, allow_nan=False),
                                         encoding="utf-8")
    meta = json.loads((tmp_path / "index.json").read_text(encoding="utf-8"))
    with np.load(tmp_path / "index.npz", allow_pickle=False) as z:
        loaded = {k: z[k] for k in z.files}
    return (LemmaVocab.from_state(loaded, meta["vocab"]), TitleIndex.from_state(loaded, meta["titles"]),
            BodyMatrix.from_state(loaded, meta["body"]))


def test_state_round_trip_of_the_lemma_index(tmp_path):
    rng = np.random.default_rng(3)
    vocab = LemmaVocab(["crème", "brûlée", "jalapeño", "a\x00b", "tab\t", "", "日本", "\U0001f355", "z"])
    for i in range(300):
        vocab.add(f"lemma{i}")
    V = len(vocab)
    titles = [sorted(set(rng.integers(0, V, rng.integers(0, 5)).tolist())
                     | ({int(rng.integers(0, 3))} if rng.random() < 0.3 else set())) for _ in range(500)]
    ids = rng.permutation(100_000)[:500]  # not ascending: candidates() re-sorts by recipe id
    index = TitleIndex(ids, [np.array(t, dtype=np.int64) for t in titles], vocab_size=V + 7)
    body = BodyMatrix([rng.integers(0, V, rng.integers(0, 30)) for _ in range(500)], vocab_size=V + 7)
    vocab2, index2, body2 = _save_load_trio(vocab, index, body, tmp_path)

    assert vocab2.lemmas == vocab.lemmas and all(vocab2[x] == vocab[x] for x in vocab.lemmas)
    assert vocab2.add("new lemma") == V
    assert vocab2.encode(["z", "crème"]).tolist() == vocab.encode(["z", "crème"]).tolist()
    for name in ("recipe_ids", "title_sizes", "postings", "indptr", "df", "idf"):
        a, b = getattr(index, name), getattr(index2, name)
        assert np.array_equal(a, b) and a.dtype == b.dtype, name
    assert index2.vocab_size == index.vocab_size and index2._ids_ascending == index._ids_ascending is False
    assert np.array_equal(body2.indices, body.indices) and body2.indices.dtype == body.indices.dtype
    assert body2.shape == body.shape and np.array_equal(body2.row_sizes, body.row_sizes)

    videos = [rng.integers(0, V + 20, rng.integers(0, 40)) for _ in range(40)] + [np.arange(V), np.zeros(0, int)]
    for video in videos:
        for mode in ("any", "recipe_subset"):
            for min_shared, max_candidates in ((1, None), (2, None), (1, 3), (1, 50)):
                a = index.candidates(video, mode, min_shared, max_candidates)
                b = index2.candidates(video, mode, min_shared, max_candidates)
                assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
        rows = rng.integers(0, 500, 60)
        for size in (None, 77):
            for x, y in zip(body.scores(rows, video, size), body2.scores(rows, video, size)):
                assert np.array_equal(x, y)


def test_state_of_paper_fixture_index_and_bad_states(index):
    index2 = TitleIndex.from_state(*index.to_state())
    for video in ([0], [0, 1, 2], [2, 3, 6], [99], []):
        a, b = index.candidates(np.array(video)), index2.candidates(np.array(video))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
    arrays, meta = index.to_state()
    with pytest.raises(ValueError, match="format"):
        TitleIndex.from_state(arrays, {**meta, "format": "procvid.sieve.BodyMatrix/1"})
    with pytest.raises(ValueError, match="inconsistent"):
        TitleIndex.from_state({**arrays, "title_idf": arrays["title_idf"][:-1]}, meta)
    body = BodyMatrix([np.array([1, 2]), np.array([], dtype=np.int64)])
    arrays, meta = body.to_state()
    with pytest.raises(ValueError, match="inconsistent"):
        BodyMatrix.from_state({**arrays, "body_indices": arrays["body_indices"][:1]}, meta)
    empty = LemmaVocab.from_state(*LemmaVocab().to_state())
    assert len(empty) == 0
    with pytest.raises(ValueError, match="repeats"):
        LemmaVocab.from_state({}, {"format": "procvid.sieve.LemmaVocab/1", "lemmas": ["a", "a"]})
