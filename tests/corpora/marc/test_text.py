"""builders.corpora.marc.text: instructions, the five recipe filters, dishes and splits (marc.md §3.2-§3.4)."""

from __future__ import annotations

from collections import Counter

from builders.corpora.marc.config import MarcConfig
from builders.corpora.marc.text import recipe_id, select_text_recipes
from builders.ops.dishes import sha1_hex
from builders.sources.html_pages import read_html_pages
from builders.sources.schema_org import read_schema_recipes

STEPS = ["Preheat the oven to 350 degrees. Grease a loaf pan with butter.",
         "Mash the bananas in a large bowl and stir in the melted butter.",
         "Mix in the baking soda, salt, sugar, egg and vanilla, then the flour.",
         "Pour the batter into the pan and bake for one hour."]


def rec(title: str, url: str, steps=STEPS, language="en", index=0, **kw):
    return {"title": title, "url": url, "steps": [(s, None, None) for s in steps], "language": language,
            "recipe_index_in_page": index, "ingredients": ["3 bananas", "1 cup flour"], "extraction": "json-ld", **kw}


def variant(k: int) -> list[str]:
    return [s.replace("one hour", f"{50 + k} minutes") for s in STEPS]


def test_filters_in_order_with_named_drops():
    records = [rec("Banana Bread", f"https://a.example/{k}", variant(k)) for k in range(3)]
    records += [
        rec("Banana Bread", "https://a.example/0", variant(0)),                       # same URL: duplicate
        rec("Banana Bread", "https://b.example/copy", variant(1)),                    # same content: duplicate
        rec("Pain à la banane", "https://c.example/fr",
            ["Préchauffer le four à 180 degrés et beurrer un moule à cake.",
             "Écraser les bananes dans un grand saladier avec le beurre fondu."], language="fr"),
        rec("The Very Best Easy Moist Banana Bread", "https://d.example/long"),       # six words
        rec("Banana Bread", "https://e.example/short", ["Mix everything and bake it for an hour please."]),
        rec("Kale Chips", "https://f.example/kale", variant(7)),                      # rare title words
    ]
    out = select_text_recipes(records)
    reasons = Counter(d.reason for d in out.drops)
    assert reasons == {"duplicate_recipe": 2, "non_english": 1, "title_too_long": 1, "too_few_steps": 1,
                       "rare_title_word": 1}
    assert len(out.rows) == 3 and {r["dish_id"] for r in out.rows} == {"banana_bread"}
    row = out.rows[0]
    assert row["modality"] == "text" and row["instructions"][:2] == [
        "Preheat the oven to 350 degrees.", "Grease a loaf pan with butter."]
    assert row["step_index"][:3] == [0, 0, 1] and row["start"] == [] and row["split"] in {"train", "validation", "test"}
    assert out.counts["kept"] == 3 and out.counts["dishes"] == 1


def test_dish_size_cap_and_ids():
    records = [rec("Banana Bread", f"https://a.example/{k}", variant(k)) for k in range(5)]
    # same (common) words, another dish id: a dish of two recipes
    records += [rec("Bread Banana", f"https://c.example/{k}", variant(10 + k)) for k in range(2)]
    out = select_text_recipes(records, MarcConfig(max_recipes_per_dish=4))
    reasons = Counter(d.reason for d in out.drops)
    assert reasons == {"dish_capped": 1, "dish_too_small": 2}
    kept = sorted(r["recipe_id"] for r in out.rows)
    all_ids = [recipe_id(f"https://a.example/{k}", 0) for k in range(5)]
    assert kept == sorted(sorted(all_ids, key=sha1_hex)[:4])
    assert recipe_id("https://x", 2).endswith(":2") and recipe_id("https://x", 0).count(":") == 1


def test_real_recipe_pages_flow(shared_data):
    """The fixture pages flow through extraction and the filters; nothing is lost without a reason."""
    records = [r for r in read_schema_recipes(read_html_pages(shared_data / "recipe_pages")) if isinstance(r, dict)]
    out = select_text_recipes(records)
    assert len(out.rows) + len(out.drops) == len(records)
    reasons = Counter(d.reason for d in out.drops)
    assert reasons["non_english"] >= 15  # the fixture holds 25 non-English pages
    # 175 pages of different dishes: no dish reaches three recipes
    assert out.rows == [] and reasons["dish_too_small"] > 0
