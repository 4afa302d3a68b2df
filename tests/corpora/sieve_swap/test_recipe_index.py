"""The sieves' recipe index (builders/corpora/sieve_swap/recipe_index.py; issue 36 items 1 and 4): the arrays are
those of ``TitleIndex`` / ``BodyMatrix`` built from the same lemmas (same candidates, same scores), memory-mapped,
checked when opened and rebuilt when damaged; the per-lemma digests change exactly for the title lemmas of an edited
recipe."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from builders.core.errors import DamagedCache
from builders.core.fingerprint import hash_obj
from builders.core.shards import StageData, write_shard
from builders.corpora.sieve_swap import recipe_index
from builders.ops.sieve import BodyMatrix, LemmaVocab, TitleIndex

# recipe id -> (title lemmas, body lemmas); shards out of id order, as a pipeline may leave them
RECIPES = {
    12: (["chocolate", "cake"], ["bake", "chocolate", "flour", "sugar"]),
    10: (["chip", "chocolate", "cookie"], ["bake", "butter", "chip", "flour"]),
    11: (["banana", "bread"], ["banana", "bake", "flour", "mash"]),
    14: (["banana", "pancake"], ["banana", "flip", "milk"]),
    13: (["cookie"], ["butter", "sugar"]),
    15: ([], ["stir"]),
}


def _recipes(root: Path, recipes: dict[int, tuple[list[str], list[str]]], per_shard: int = 4) -> StageData:
    rows = [{"recipe_id": rid, "title_lemmas": t, "body_lemmas": b} for rid, (t, b) in recipes.items()]
    shards = [rows[i:i + per_shard] for i in range(0, len(rows), per_shard)]
    for i, part in enumerate(shards):
        write_shard(root, i, part, [], {"rows_in": len(part), "kept": len(part)})
    return StageData(root, len(shards))


def _mapped(a: np.ndarray) -> bool:
    """``a`` is a view of a memory map (read from the file as touched, never copied into memory)."""
    import mmap

    while a is not None:
        if isinstance(a, (np.memmap, mmap.mmap)):
            return True
        a = getattr(a, "base", None)
    return False


def _reference(recipes):
    """The index as the sieves built it before (``LemmaVocab`` in insertion order, rows in pipeline order)."""
    vocab = LemmaVocab()
    ids = np.asarray(list(recipes), dtype=np.int64)
    titles = [vocab.encode(t) for t, _ in recipes.values()]
    bodies = [vocab.encode(b) for _, b in recipes.values()]
    return vocab, TitleIndex(ids, titles, len(vocab)), BodyMatrix(bodies, len(vocab)), ids


@pytest.mark.parametrize("mode", ["any", "recipe_subset"])
@pytest.mark.parametrize("cap", [None, 2])
def test_candidates_and_scores_equal_the_in_memory_index(tmp_path, mode, cap):
    folder, built = recipe_index.ensure(_recipes(tmp_path / "r", RECIPES), tmp_path / "cache")
    assert built
    index = recipe_index.RecipeIndex.open(folder)
    assert _mapped(index.bodies.indices) and _mapped(index.titles.postings) and _mapped(index.bodies.indptr)
    assert index.recipe_ids.tolist() == [10, 11, 12, 13, 14, 15]   # sorted by id
    vocab, titles, bodies, ids = _reference(RECIPES)
    transcript = {"bake", "chocolate", "flour", "butter", "oven"}
    for video in (["chocolate", "cookie"], ["banana"], ["cookie", "chip", "chocolate", "extra"], ["none"]):
        rows, counts, trunc = index.title_candidates(video, mode, 1, cap)
        ref_rows, ref_counts, ref_trunc = titles.candidates(vocab.encode(video, add=False), mode, 1, cap)
        assert index.recipe_ids[rows].tolist() == ids[ref_rows].tolist()
        assert counts.tolist() == ref_counts.tolist() and trunc == ref_trunc
        iou, rec = index.bodies.scores(rows, index.encode(transcript), video_size=len(transcript))
        ref_iou, ref_rec = bodies.scores(ref_rows, vocab.encode(transcript, add=False), video_size=len(transcript))
        assert iou.tolist() == ref_iou.tolist() and rec.tolist() == ref_rec.tolist()
    # by hand: the transcript against recipe 10 (bake butter chip flour): ∩ = 3, ∪ = 5 + 4 - 3 = 6
    rows, _, _ = index.title_candidates(["cookie"], "any", 1, None)
    assert index.recipe_ids[rows].tolist() == [10, 13]
    iou, rec = index.bodies.scores(rows[:1], index.encode(transcript), video_size=5)
    assert iou.tolist() == [0.5] and rec.tolist() == [0.75]


def test_built_once_per_recipes_content_and_shared(tmp_path):
    data = _recipes(tmp_path / "r", RECIPES)
    key = recipe_index.index_key(data)
    before = recipe_index.BUILDS.get(key, 0)
    a, built_a = recipe_index.ensure(data, tmp_path / "cache")
    b, built_b = recipe_index.ensure(data, tmp_path / "cache")   # the second sieve: found, checked, not built
    assert a == b and (built_a, built_b) == (True, False)
    assert recipe_index.BUILDS[key] == before + 1


def test_a_damaged_index_is_rebuilt(tmp_path):
    data = _recipes(tmp_path / "r", RECIPES)
    folder, _ = recipe_index.ensure(data, tmp_path / "cache")
    path = folder / "body_indices.npy"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(DamagedCache, match="body_indices.npy"):
        recipe_index.RecipeIndex.open(folder)
    again, built = recipe_index.ensure(data, tmp_path / "cache")
    assert again == folder and built
    assert recipe_index.RecipeIndex.open(folder).bodies.row(0).tolist() == \
        sorted(recipe_index.RecipeIndex.open(folder).encode(RECIPES[10][1]).tolist())
    (folder / "manifest.json").write_text('{"sha256": "0"')   # cut short
    with pytest.raises(DamagedCache):
        recipe_index.RecipeIndex.open(folder)
    assert recipe_index.ensure(data, tmp_path / "cache")[1]


def _digests(folder: Path, videos: dict[str, list[str]]) -> dict[str, str]:
    return {v: recipe_index.title_digests(folder, [{"video_id": v, "title_lemmas": t}], False)
            for v, t in videos.items()}


def test_an_edited_recipe_changes_the_digests_of_its_title_lemmas_only(tmp_path):
    videos = {"choc": ["chocolate"], "cookie": ["cookie"], "banana": ["banana"], "bread": ["bread"],
              "newword": ["waffle"]}
    old, _ = recipe_index.ensure(_recipes(tmp_path / "r1", RECIPES), tmp_path / "cache")
    edited = {**RECIPES, 11: (["banana", "bread"], ["banana", "bake", "flour", "mash", "walnut"])}  # one step word
    new, _ = recipe_index.ensure(_recipes(tmp_path / "r2", edited), tmp_path / "cache")
    assert old != new
    a, b = _digests(old, videos), _digests(new, videos)
    # recipe 11's title lemmas are banana and bread: those videos rerun, the others keep their digest
    assert {v for v in videos if a[v] != b[v]} == {"banana", "bread"}
    # a new recipe titled "waffle" gives the unknown lemma a digest: the video whose title holds it reruns
    added = {**edited, 16: (["waffle"], ["flour", "milk"])}
    third, _ = recipe_index.ensure(_recipes(tmp_path / "r3", added), tmp_path / "cache")
    c = _digests(third, videos)
    assert {v for v in videos if b[v] != c[v]} == {"newword"}
    # the digests do not depend on the vocabulary's ids (a new lemma shifts them): same lemma, same recipes, same digest
    assert c["choc"] == a["choc"]


def test_old_index_folders_are_removed(tmp_path):
    folders = []
    for k in range(4):
        edited = {**RECIPES, 13: (["cookie"], ["butter", "sugar", f"w{k}"])}
        folders.append(recipe_index.ensure(_recipes(tmp_path / f"r{k}", edited), tmp_path / "cache")[0])
    left = sorted(p.name for p in (tmp_path / "cache" / "recipe_index").iterdir())
    assert len(left) == recipe_index.KEEP and folders[-1].name in left


def test_title_digests_hash_the_lemma_digests(tmp_path):
    folder, _ = recipe_index.ensure(_recipes(tmp_path / "r", RECIPES), tmp_path / "cache")
    index = recipe_index.RecipeIndex.open(folder)
    i = index.lemma_ids["cookie"]
    want = hash_obj([["v", [["cookie", int(index.lemma_digest[i])], ["zzz", None]]]], None)
    assert recipe_index.title_digests(folder, [{"video_id": "v", "title_lemmas": ["cookie", "zzz"]}], False) == want


def test_a_sieve_reports_a_damaged_index_as_its_fit_damage(tmp_path):
    """The content sieve's per-item digest (computed before any worker) and a worker's setup find the index damaged:
    the index is removed and the damage named as the stage's fit record, which the build forgets, so the stage refits
    and builds the index again (builders/core/repair.py)."""
    from builders.core.orchestrate import ARTEFACTS_KEY
    from builders.corpora.sieve_swap.sieve import ContentSieve

    folder, _ = recipe_index.ensure(_recipes(tmp_path / "r", RECIPES), tmp_path / "cache")
    artefacts = tmp_path / "stage" / "_fit" / "artefacts"
    artefacts.mkdir(parents=True)
    recipe_index.write_pointer(artefacts, folder)
    step = ContentSieve(spacy_model="en_core_web_sm", title_match="any", title_min_shared=1,
                        max_title_candidates=None, iou_threshold=0.1, recall_threshold=0.3, val_iou_threshold=0.2)
    state = {"index": "index.json", ARTEFACTS_KEY: str(artefacts)}
    rows = [{"video_id": "v", "title_lemmas": ["cookie"]}]
    assert step.item_digest(rows, state, None) == recipe_index.title_digests(folder, rows, False)
    path = folder / "lemma_digest.npy"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))
    recipe_index._DIGESTS.clear()   # a fresh driver process
    with pytest.raises(DamagedCache) as err:
        step.item_digest(rows, state, None)
    assert err.value.path == str(tmp_path / "stage" / "_fit" / "_complete.json") and not folder.exists()
    with pytest.raises(DamagedCache, match="missing"):   # a worker finding it gone: the same report
        step._with_index(state, recipe_index.RecipeIndex.open)
