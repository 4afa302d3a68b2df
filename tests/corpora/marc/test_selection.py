"""builders.corpora.marc.selection: the selection's global decisions over the on-disk store (marc.md §3.3-§3.4) take
the in-memory rule's decisions, the sequential duplicate rule included."""

from __future__ import annotations

from collections import Counter

from builders.corpora.marc.config import MarcConfig
from builders.corpora.marc.selection import Outcomes, Selection
from builders.corpora.marc.text import recipe_facts, recipe_id, recipe_instructions, select_text_recipes
from tests.corpora.marc.test_text import rec, variant


def test_a_duplicate_id_does_not_make_its_content_seen():
    # B has A's URL (the same recipe id) and new content: B is the duplicate, and C, with B's content under another
    # URL, is the first of that content to be kept (only kept recipes are "seen")
    records = [rec("Banana Bread", "https://a.example/0", variant(0)),
               rec("Banana Bread", "https://a.example/0", variant(1)),
               rec("Banana Bread", "https://a.example/5", variant(1)),
               rec("Banana Bread", "https://a.example/6", variant(2))]
    out = select_text_recipes(records)
    assert [(d.item_id, d.reason) for d in out.drops] == [(recipe_id("https://a.example/0", 0), "duplicate_recipe")]
    assert sorted(r["url"] for r in out.rows) == ["https://a.example/0", "https://a.example/5", "https://a.example/6"]
    assert out.outcome["1"].reason == "duplicate_recipe" and out.outcome["2"]["instructions"][-1].endswith(
        "51 minutes.")


def test_the_store_on_disk_takes_the_same_decisions(tmp_path):
    cfg = MarcConfig(max_recipes_per_dish=3)
    records = [rec("Banana Bread", f"https://a.example/{k}", variant(k)) for k in range(5)]
    records += [rec("Kale Chips", "https://f.example/kale", variant(7)),
                rec("Banana Bread", "https://a.example/9", variant(0))]        # the content of a.example/0
    expected = select_text_recipes(records, cfg)
    store = Selection(tmp_path / "selection.sqlite")
    for k, r in enumerate(records):
        store.add(recipe_facts({**r, **recipe_instructions(r, cfg.instruction_unit)}, str(k)), cfg)
    counts = store.decide(cfg)
    store.close()
    assert counts == expected.counts == Counter(kept=3, dishes=1, dish_capped=2, duplicate_recipe=1,
                                                rare_title_word=1)
    found = Outcomes(tmp_path / "selection.sqlite").lookup([str(k) for k in range(len(records))] + ["absent"])
    assert "absent" not in found
    for k, o in expected.outcome.items():
        if isinstance(o, dict):
            assert found[k] == ("keep", o["dish_id"], o["dish_name"], o["split"])
        else:
            assert found[k] == ("drop", o.item_id, o.reason, o.detail)
