"""builders.ops.dishes: the MARC recipe filters, dishes, splits and ingredient overlap (marc.md §3.3-§3.6)."""

from __future__ import annotations

import pytest

from builders.ops import dishes


def test_dish_id_and_title_words():
    assert dishes.dish_id("Chewy  Chocolate-Chip Cookies!") == "chewy_chocolate_chip_cookies"
    assert dishes.title_words("Crème Brûlée") == ["crème", "brûlée"]
    assert dishes.normalise_title("  Baked\u00a0Ziti \n") == "Baked Ziti"


def test_common_title_word_mask_keeps_ties_at_the_cut():
    titles = ["banana bread", "banana bread", "banana muffins", "zucchini bread", "kale chips"]
    # frequencies: banana 3, bread 3, muffins 1, zucchini 1, kale 1, chips 1 -> V = 6, rank ceil(3) -> f* = 1
    assert dishes.common_title_word_mask(titles) == [True] * 5
    titles = ["banana bread", "banana bread", "banana bread", "banana muffins", "kale"]
    # banana 4, bread 3, muffins 1, kale 1 -> V = 4, f* = frequency at rank 2 = 3
    assert dishes.common_title_word_mask(titles) == [True, True, True, False, False]
    assert dishes.common_title_word_mask(["!!!"]) == [False]


def test_splits_scale_the_paper_fractions():
    assert dishes.split_counts(4262) == (103, 94)
    assert dishes.split_counts(100) == (2, 2)
    assert dishes.split_counts(3) == (1, 1)
    split = dishes.dish_splits([f"d{i}" for i in range(10)])
    assert sorted(split.values()).count("test") == 1 and sorted(split.values()).count("validation") == 1
    ordered = sorted(split, key=dishes.sha1_hex)
    assert split[ordered[0]] == "test" and split[ordered[1]] == "validation"


def test_cap_and_videos_per_dish():
    ids = [f"t:{i}" for i in range(5)]
    kept = dishes.cap_recipes(ids, 3)
    assert kept == sorted(ids, key=dishes.sha1_hex)[:3]
    assert dishes.videos_per_dish(1) == 3 and dishes.videos_per_dish(10) == 16 and dishes.videos_per_dish(80) == 100


def test_ingredients_and_overlap():
    assert dishes.clean_ingredient_line("2 1/2 cups (300 g) Flour, sifted") == "cups flour"
    assert dishes.clean_ingredient_line("½ tsp salt") == "tsp salt"
    assert dishes.ingredient_terms(["cup", "flour", "Salt", "tsp"]) == {"flour", "salt"}
    # plurals the tagger leaves unlemmatised ("cups all-purpose flour": cups/PROPN) are units too; "peas" stays
    assert dishes.ingredient_terms(["cups", "pinches", "tablespoons", "flour", "peas"]) == {"flour", "peas"}
    assert dishes.ingredient_match({"flour", "salt", "egg"}, {"flour", "egg"}) == 1.0
    assert dishes.ingredient_match({"a", "b", "c"}, {"a", "d", "e", "f"}) == pytest.approx(1 / 3)
    assert dishes.ingredient_match(set(), {"a"}) == 0.0
    assert dishes.length_ok(4, 8) and not dishes.length_ok(4, 9) and not dishes.length_ok(0, 3)


def test_dish_pairs_pruning_and_orientation():
    recipes = [
        ("t:2", "text", 8, {"flour", "banana", "egg"}),
        ("t:1", "text", 6, {"flour", "banana", "egg", "walnut"}),
        ("t:3", "text", 20, {"flour", "banana", "egg"}),           # more than twice t:2's 8 and t:1's 6
        ("v:a", "video", 12, {"banana", "flour", "egg"}),
        ("v:b", "video", 9, {"banana", "egg", "sugar", "oil"}),    # 2/3 with t:2; 2/4 with v:a
        ("t:4", "text", 7, set()),
    ]
    kept, dropped = dishes.dish_pairs(recipes)
    got = {(p["recipe_a"], p["recipe_b"]): (p["pair_type"], round(float(p["ingredient_match"]), 4)) for p in kept}
    assert got == {
        ("t:1", "t:2"): ("text_text", 1.0),
        ("t:1", "v:a"): ("text_video", 1.0),
        ("t:2", "v:a"): ("text_video", 1.0),
        ("t:3", "v:a"): ("text_video", 1.0),
    }
    reasons = dict(dropped)
    assert reasons["t:1|t:3"] == "length_mismatch" and reasons["t:2|t:3"] == "length_mismatch"
    assert reasons["t:2|v:b"] == "ingredient_mismatch" and reasons["v:a|v:b"] == "ingredient_mismatch"
    assert reasons["t:1|t:4"] == "no_ingredients"
    assert len(kept) + len(dropped) == 15  # every unordered pair once
