"""Tests of the Schema.org Recipe extraction (spec marc.md §2.2, §3.1, §3.2, §3.3 step 1, §6): JSON-LD shapes and
repairs, microdata, instruction flattening, merging, drops and counters, on hand-written pages and on the quirk pages
of the real recipe_pages fixture."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from builders.core.records import Count, Drop
from builders.sources.html_pages import read_html_pages, read_page
from builders.sources.schema_org import (
    STAGE,
    InstructionUnit,
    Step,
    detect_language,
    extract_recipes,
    flatten_instructions,
    instruction_units,
    parse_jsonld,
    read_schema_recipes,
    recipe_rows,
    split_instruction_string,
    split_numbered_steps,
)


def ld(*blocks: str, lang: str = "en", script_type: str = "application/ld+json") -> str:
    scripts = "".join(f'<script type="{script_type}">{b}</script>' for b in blocks)
    return f'<!DOCTYPE html><html lang="{lang}"><head>{scripts}</head><body><p>page</p></body></html>'


def recipe(name: str = "Toast", steps=("Toast the bread.", "Butter it."), **extra) -> dict:
    node = {"@context": "https://schema.org", "@type": "Recipe", "name": name,
            "recipeIngredient": ["1 slice bread", "butter"], "recipeInstructions": list(steps)}
    node.update(extra)
    return node


def one(html: str, url: str = "https://example.com/p"):
    result = extract_recipes(html, url)
    assert len(result.records) == 1, [(c.title, c.drop_reason) for c in result.candidates]
    return result.records[0]


# ------------------------------------------------------------------------------------------- JSON-LD shapes


@pytest.mark.parametrize("value", [
    recipe(),
    [{"@type": "WebSite", "name": "site"}, recipe()],
    {"@context": "https://schema.org", "@graph": [{"@type": "WebPage", "name": "p"}, recipe()]},
    {"@type": "WebPage", "mainEntity": recipe()},
    {"@graph": [{"@type": "Article", "hasPart": [{"@type": "ItemList", "x": [recipe()]}]}]},
    recipe(**{"@type": "recipe"}),
    recipe(**{"@type": ["Recipe", "NewsArticle"]}),
    recipe(**{"@type": "http://schema.org/Recipe"}),
    recipe(**{"@type": "schema:Recipe"}),
], ids=["object", "list", "graph", "mainEntity", "deep", "lowercase", "type-list", "iri", "compact-iri"])
def test_jsonld_shapes_find_the_recipe(value):
    rec = one(ld(json.dumps(value)))
    assert rec.title == "Toast" and rec.extraction == "json-ld"
    assert rec.steps == [Step("Toast the bread."), Step("Butter it.")]
    assert rec.ingredients == ["1 slice bread", "butter"]


@pytest.mark.parametrize("script_type", ["APPLICATION/LD+JSON", "application/ld+json; charset=utf-8",
                                         " Application/Ld+Json "])
def test_script_type_attribute_is_case_insensitive(script_type):
    assert one(ld(json.dumps(recipe()), script_type=script_type)).title == "Toast"


def test_non_recipe_types_and_other_scripts_are_ignored():
    html = ld(json.dumps({"@type": "HowTo", "name": "x", "step": ["a"]}), json.dumps({"@type": "Recipes"}))
    html += '<script type="application/json">' + json.dumps(recipe()) + "</script>"
    result = extract_recipes(html)
    assert result.no_schema_recipe and result.candidates == []


def test_fields_title_ingredients_url_language():
    node = recipe(name=["  Fish &amp;amp; <b>Chips</b>\n", "other"], url="/fish", inLanguage="en-GB",
                  recipeIngredient="2 fish\n 1 kg potatoes \n\n")
    rec = one(ld(json.dumps(node), lang="de"), url="https://example.com/recipes/p")
    assert rec.title == "Fish & Chips"  # first of a list, unescaped, tags stripped, whitespace collapsed
    assert rec.ingredients == ["2 fish", "1 kg potatoes"]  # a single string split on newlines
    assert rec.url == "https://example.com/fish"  # relative Recipe url resolved against the page
    assert rec.language == "en-GB"  # inLanguage before <html lang>
    rec = one(ld(json.dumps(recipe(inLanguage={"@type": "Language", "name": "English", "alternateName": "en"}))))
    assert rec.language == "en"
    rec = one(ld(json.dumps(recipe()), lang="nl-NL"), url="https://example.com/page")
    assert rec.language == "nl-NL" and rec.url == "https://example.com/page"  # <html lang>; the page URL


# ------------------------------------------------------------------------------------------- repair chain


def test_repair_chain_rules():
    assert parse_jsonld('{"a": "line\nbreak\ttab"}') == (True, {"a": "line\nbreak\ttab"})  # strict=False
    assert parse_jsonld('<!-- {"a": 1} -->') == (True, {"a": 1})
    assert parse_jsonld('//<![CDATA[\n{"a": 1};\n//]]>') == (True, {"a": 1})
    assert parse_jsonld('/*<![CDATA[*/ {"a": 1} /*]]>*/') == (True, {"a": 1})
    assert parse_jsonld('{"a": 1};') == (True, {"a": 1})
    assert parse_jsonld(r'{"a": "don\'t \d \u00e9 \" \\ \/"}') == (True, {"a": "don\\'t \\d é \" \\ /"})
    assert parse_jsonld('{"a": [1, 2, ], "b": {"c": 3,\n},}') == (True, {"a": [1, 2], "b": {"c": 3}})
    assert parse_jsonld('{"a": "x,]", "b": [1,]}') == (True, {"a": "x,]", "b": [1]})  # commas inside strings kept
    assert parse_jsonld('{"a": 1') == (False, None)
    assert parse_jsonld("[" * 100_000 + "]" * 100_000) == (False, None)  # RecursionError is a failure


def test_unrepairable_block_is_counted_and_other_blocks_used():
    html = ld('{"@type": "Recipe", "name": "Broken" "x"}', json.dumps(recipe()), "   ")
    result = extract_recipes(html)
    assert result.counters == Counter({"jsonld_unparseable": 1})  # the blank block is not counted
    assert [r.title for r in result.records] == ["Toast"]
    only_broken = extract_recipes(ld('{"@type": "Recipe", "name": '))
    assert only_broken.no_schema_recipe and only_broken.counters["jsonld_unparseable"] == 1


# ------------------------------------------------------------------------------------------- instructions


def test_string_instructions_split_after_unescaping_twice():
    text = ("Mix &amp;#39;em.<br>Bake&lt;br/&gt;Cool.\n\n<p>Serve <b>hot</b>.</p><p>Eat<img src=x>now</p>"
            "<ul><li>A</li><li>B</li></ul>")
    assert split_instruction_string(text) == ["Mix 'em.", "Bake", "Cool.", "Serve hot.", "Eat now", "A", "B"]
    assert split_instruction_string("3 < 4 and 5 > 2") == ["3 < 4 and 5 > 2"]  # not a tag
    assert split_instruction_string(" \n <br> ") == []


def test_howto_shapes_flatten_in_document_order():
    counters: Counter = Counter()
    value = [
        {"@type": "HowToStep", "name": "Prep", "text": "Wash the leeks."},
        {"@type": "HowToStep", "text": "Chop <i>them</i>.", "name": "Chop them."},
        {"@type": "HowToStep", "name": "Only a name"},
        {"@type": "HowToSection", "name": "Sauce", "itemListElement": [
            {"@type": "HowToStep", "text": "Melt butter."},
            {"@type": "HowToTip", "text": "Use unsalted."},
            "Whisk in flour.",
        ]},
        {"@type": "HowToSection", "name": "Finish", "itemListElement": {"@type": "HowToStep", "text": "Serve."}},
        {"@type": ["HowToStep"], "name": "Wrapper", "itemListElement": [{"@type": "HowToDirection", "text": "Rest."}]},
        {"@type": "HowToStep"},
    ]
    steps = flatten_instructions(value, counters)
    assert steps == [
        Step("Wash the leeks.", None, "Prep"),
        Step("Chop them.", None, "Chop them."),
        Step("Only a name", None, None),
        Step("Melt butter.", "Sauce", None),
        Step("Whisk in flour.", "Sauce", None),
        Step("Serve.", "Finish", None),
        Step("Rest.", None, "Wrapper"),
    ]
    assert counters == Counter({"howto_tip": 1})


def test_itemlist_and_single_section_object():
    item_list = {"@type": "ItemList", "itemListElement": [{"@type": "ListItem", "text": "One."}, "Two."]}
    assert flatten_instructions(item_list) == [Step("One."), Step("Two.")]
    section = {"@type": "HowToSection", "name": "All", "itemListElement": [{"@type": "HowToStep", "text": "Go."}]}
    rec = one(ld(json.dumps(recipe(steps=[], recipeInstructions=section))))
    assert rec.steps == [Step("Go.", "All", None)]
    assert flatten_instructions("Just one string.") == [Step("Just one string.")]
    assert flatten_instructions([["a"], 7, None, True]) == [Step("a"), Step("7")]


def test_list_string_items_are_one_step_each_as_recipe_scrapers_reads_them():
    """Issue 14: a string item of an instruction list is one step (raw newlines kept inside it); its HTML breaks
    still split it. A whole-recipe string is split at lines, HTML breaks and glued sentence ends."""
    value = ["For the sauce Mix well. Set aside.\nFor the pasta Boil it.", "Layer.<br>Bake.", "Serve."]
    assert [s.text for s in flatten_instructions(value)] == [
        "For the sauce Mix well. Set aside. For the pasta Boil it.", "Layer.", "Bake.", "Serve."]
    whole = "Preheat the oven (200C).Grease a tin.Put in the wedges.\nServe with 1 tsp.of salt and U.S.Style peas."
    assert [s.text for s in flatten_instructions(whole)] == [
        "Preheat the oven (200C).", "Grease a tin.", "Put in the wedges.", "Serve with 1 tsp.of salt and U.S.Style peas."]
    # a list item keeps its glued sentences (recipe-scrapers' one item per list element)
    assert [s.text for s in flatten_instructions(["Stir.Then rest."])] == ["Stir.Then rest."]


def test_numbered_steps_run_together_are_split():
    """Issue 14: one HowToStep holding "1. ... 2. ... 3. ..." is three steps (markers removed, its name dropped);
    a single number, decimals and numbers out of sequence never split."""
    step = {"@type": "HowToStep", "name": "1. To make the dressing.",
            "text": "1. To make the dressing. Combine all.2. Boil 1.5 l water. Drain. 3) Serve warm."}
    assert flatten_instructions([step]) == [Step("To make the dressing. Combine all."),
                                            Step("Boil 1.5 l water. Drain."), Step("Serve warm.")]
    assert split_numbered_steps("1. Mix the flour.") == ["1. Mix the flour."]
    assert split_numbered_steps("Bake 2. Then 3. Cool.") == ["Bake 2. Then 3. Cool."]
    assert split_numbered_steps("1. Mix 2 eggs. 3. Bake.") == ["1. Mix 2 eggs. 3. Bake."]  # 2 is not a marker here
    assert [s.text for s in flatten_instructions("1. Mix.\n2. Bake.")] == ["1. Mix.", "2. Bake."]  # one per line


# ------------------------------------------------------------------------------------------- records, merging, drops


def test_two_recipes_with_distinct_names_are_two_records():
    html = ld(json.dumps([recipe("Soup", ["Boil."]), recipe("Bread", ["Bake."])]))
    rows = list(recipe_rows({"page_id": "p1", "url": "https://e/p", "html": html, "warc_filename": "f.warc.gz",
                             "warc_record_offset": 7, "warc_record_id": "<urn:x>"}))
    assert rows[0] == Count("multi_recipe_page")
    records = rows[1:]
    assert [(r["title"], r["recipe_index_in_page"]) for r in records] == [("Soup", 0), ("Bread", 1)]
    assert set(records[0]) == {"page_id", "recipe_index_in_page", "title", "ingredients", "steps", "url", "page_url",
                               "language", "extraction", "warc_filename", "warc_record_offset", "warc_record_id",
                               "truncated"}
    assert records[0]["warc_record_offset"] == 7 and records[0]["warc_record_id"] == "<urn:x>"
    assert records[1]["steps"] == [("Bake.", None, None)]


def test_same_name_merges_longest_instructions_and_first_non_empty_fields():
    stub = {"@type": "Recipe", "name": "Pasta"}
    short = recipe("pasta ", ["Boil."], recipeIngredient=[])
    full = recipe("PASTA", ["Boil.", "Drain.", "Serve."], recipeIngredient=["pasta"])
    result = extract_recipes(ld(json.dumps(stub), json.dumps([short, full])))
    assert len(result.candidates) == 1 and not result.counters
    rec = result.records[0]
    assert rec.title == "Pasta" and [s.text for s in rec.steps] == ["Boil.", "Drain.", "Serve."]
    assert rec.ingredients == ["pasta"]


def test_name_only_stub_with_another_name_is_dropped_no_instructions():
    html = ld(json.dumps([{"@type": "Recipe", "name": "Teaser"}, recipe("Real")]))
    items = list(recipe_rows({"page_id": "p", "url": "u", "html": html}))
    drops = [i for i in items if isinstance(i, Drop)]
    rows = [i for i in items if isinstance(i, dict)]
    assert [(d.item_id, d.reason, d.stage) for d in drops] == [("p#0", "no_instructions", STAGE)]
    assert [(r["title"], r["recipe_index_in_page"]) for r in rows] == [("Real", 0)]
    assert Count("multi_recipe_page") in items


def test_no_title_and_no_instructions_and_no_recipe():
    items = list(recipe_rows({"page_id": "a", "url": "u",
                              "html": ld(json.dumps(recipe(name="  "))) + ld(json.dumps(recipe("X", [])))}))
    assert sorted(d.reason for d in items if isinstance(d, Drop)) == ["no_instructions", "no_title"]
    items = list(recipe_rows({"page_id": "b", "url": "https://b/", "html": "<html><body>Soup</body></html>"}))
    assert items == [Drop("b", STAGE, "no_schema_recipe", "https://b/")]
    assert list(recipe_rows({"page_id": "c", "url": "", "html": ""})) == [Drop("c", STAGE, "no_schema_recipe", "")]


def test_read_schema_recipes_passes_reader_drops_through():
    page = {"page_id": "p", "url": "u", "html": ld(json.dumps(recipe()))}
    reader_drop = Drop("x", "read_warc", "http_status", "404")
    out = list(read_schema_recipes([reader_drop, Count("warc_truncated"), page]))
    assert out[:2] == [reader_drop, Count("warc_truncated")] and out[2]["title"] == "Toast"


# ------------------------------------------------------------------------------------------- microdata


MICRODATA = """<html lang="en-US"><body>
<div itemscope itemtype="https://schema.org/Recipe">
  <h1 itemprop="name">Lemon  Cake</h1>
  <div itemprop="author" itemscope itemtype="https://schema.org/Person"><span itemprop="name">Ann</span></div>
  <meta itemprop="inLanguage" content="en-GB">
  <ul><li itemprop="recipeIngredient">2 <b>lemons</b></li><li itemprop="ingredients">1 cup sugar</li>
      <li itemprop="recipeIngredient" content="3 eggs">three eggs</li></ul>
  <div itemprop="recipeInstructions"><h3>Method</h3>
    <ol><li>Zest the lemons.</li><li>Beat <i>eggs</i>.<br>Add sugar.</li></ol></div>
  <div itemprop="recipeInstructions" itemscope itemtype="http://schema.org/HowToStep">
     <span itemprop="name">Bake</span><p itemprop="text">Bake 30 min.</p></div>
  <p itemprop="recipeInstructions">Cool &amp; slice.</p>
</div></body></html>"""


def test_microdata_recipe():
    rec = one(MICRODATA)
    assert rec.extraction == "microdata"
    assert rec.title == "Lemon Cake"  # not the nested Person's name
    assert rec.ingredients == ["2 lemons", "3 eggs"]  # recipeIngredient, else the legacy ingredients
    legacy = one(MICRODATA.replace('itemprop="recipeIngredient"', 'itemprop="x"'))
    assert legacy.ingredients == ["1 cup sugar"]
    assert rec.steps == [Step("Zest the lemons."), Step("Beat eggs."), Step("Add sugar."),
                         Step("Bake 30 min.", None, "Bake"), Step("Cool & slice.")]
    assert rec.language == "en-GB"


def test_microdata_one_element_per_step_keeps_the_whole_element():
    html = """<div itemscope itemtype="http://schema.org/Recipe"><span itemprop="name">Farro</span>
      <div itemprop="recipeInstructions"><div><span>1</span> <span>Cook the farro</span></div>
        <div class="txt"><p>Boil <strong>water</strong>.</p></div></div>
      <div itemprop="recipeInstructions"><span>2</span> <span>Drain</span><p>Drain it.</p></div></div>"""
    assert [s.text for s in one(html).steps] == ["1 Cook the farro Boil water.", "2 Drain Drain it."]


def test_microdata_container_of_paragraphs_and_unclosed_tags():
    html = """<div itemscope itemtype="http://schema.org/Recipe"><h2 itemprop="name">Buns</h2>
      <div itemprop="recipeInstructions"><h3>Step 1</h3><p>Preheat.<p>Grease.<div>x</div><p>Bake.</div></div>"""
    assert [s.text for s in one(html).steps] == ["Preheat.", "Grease.", "Bake."]


def test_jsonld_wins_over_microdata_with_the_same_name():
    micro = MICRODATA.replace("Lemon  Cake", "Toast")
    html = ld(json.dumps(recipe(recipeIngredient=[]))) + micro
    result = extract_recipes(html)
    assert len(result.candidates) == 1 and result.has_jsonld_recipe and result.has_microdata_recipe
    rec = result.records[0]
    assert rec.extraction == "json-ld" and [s.text for s in rec.steps] == ["Toast the bread.", "Butter it."]
    assert rec.ingredients == ["2 lemons", "3 eggs"]  # an empty JSON-LD field is filled
    other = extract_recipes(ld(json.dumps(recipe())) + MICRODATA)
    assert [(c.title, c.extraction) for c in other.records] == [("Toast", "json-ld"), ("Lemon Cake", "microdata")]
    assert other.counters["multi_recipe_page"] == 1


# ------------------------------------------------------------------------------------------- the real fixture


@pytest.fixture(scope="module")
def fixture_pages(shared_data: Path) -> dict:
    return {p["page_id"]: p for p in read_html_pages(shared_data / "recipe_pages")}


def _extract(pages: dict, key: str):
    page = pages[key]
    return extract_recipes(page["html"], page["url"])


def test_fixture_markup_counts(fixture_pages):
    """Spec §2.2: 153 pages with JSON-LD Recipes (after repairs), 10 only microdata, 12 none."""
    kinds = Counter()
    for key in fixture_pages:
        result = _extract(fixture_pages, key)
        kinds["jsonld" if result.has_jsonld_recipe else "microdata" if result.has_microdata_recipe else "none"] += 1
        assert result.counters["jsonld_unparseable"] == 0, key
    assert kinds == Counter({"jsonld": 153, "microdata": 10, "none": 12})


def test_fixture_invalid_escapes_page(fixture_pages):
    rec = _extract(fixture_pages, "bodybuilding.com__bodybuilding").records[0]
    assert rec.title == "Spicy Beans and Rice" and len(rec.steps) == 6
    assert rec.steps[0] == Step("Dice the celery, red onion, and mushrooms.")


@pytest.mark.parametrize("key,title", [
    ("kikkoman.eu__kikkoman_2", "Chicken-pepper stir-fry with pineapple & chilli"),
    ("rutgerbakt.nl__rutgerbakt_2", "Abrikozenvlaai"),
    ("realfood.tesco.com__realfoodtesco_1", "Roasted cauliflower tagine"),
])
def test_fixture_control_characters_and_lowercase_type(fixture_pages, key, title):
    result = _extract(fixture_pages, key)
    assert [r.title for r in result.records] == [title] and result.has_jsonld_recipe


def test_fixture_name_only_stub_merges(fixture_pages):
    result = _extract(fixture_pages, "pastificiosorrentino.com__pastificiosorrentino")
    assert len(result.candidates) == 1 and not result.counters
    rec = result.records[0]
    assert rec.title == "Pasta con pesce spada e melanzane" and len(rec.steps) == 3
    assert {s.section for s in rec.steps} == {"Preparazione"} and rec.language == "it-IT"


def test_fixture_mislabelled_norwegian_page(fixture_pages):
    rec = _extract(fixture_pages, "vegetarbloggen.no__vegetarbloggen").records[0]
    assert rec.language == "en-US"
    assert detect_language(" ".join(s.text for s in rec.steps), rec.language) == "no"


def test_fixture_page_without_recipe(fixture_pages):
    page = fixture_pages["lovefood.com__lovefood_2"]
    assert list(recipe_rows(page)) == [Drop("lovefood.com__lovefood_2", STAGE, "no_schema_recipe", page["url"])]


def test_fixture_page_via_read_page(shared_data: Path):
    folder = shared_data / "recipe_pages"
    page = read_page("realfood.tesco.com__realfoodtesco_1", folder / "realfood.tesco.com__realfoodtesco_1.html.gz")
    (row,) = [r for r in recipe_rows(page) if isinstance(r, dict)]
    assert row["url"] == "https://realfood.tesco.com/recipes/roasted-cauliflower-tagine.html"
    assert row["language"] == "en" and len(row["ingredients"]) == 13 and len(row["steps"]) == 3


# ------------------------------------------------------------------------------------------- §3.2, §3.3


def test_instruction_units_sentences_and_steps():
    steps = [Step("Preheat the oven to 350 F. Mix flour, sugar and salt. Then add 2 eggs.", "Cake", "Prep"),
             ("...", None, None),
             {"text": "Bake! Let it cool for 10 min.", "section": None}]
    assert instruction_units(steps) == [
        InstructionUnit("Preheat the oven to 350 F. Mix flour, sugar and salt.", 0, "Cake"),  # "F." is no boundary
        InstructionUnit("Then add 2 eggs.", 0, "Cake"),
        InstructionUnit("Bake!", 2, None),
        InstructionUnit("Let it cool for 10 min.", 2, None),
    ]
    assert instruction_units(["Mr. Smith stirs. He serves."]) == [InstructionUnit("Mr. Smith stirs.", 0, None),
                                                                  InstructionUnit("He serves.", 0, None)]
    assert instruction_units(steps, instruction_unit="step") == [
        InstructionUnit("Preheat the oven to 350 F. Mix flour, sugar and salt. Then add 2 eggs.", 0, "Cake"),
        InstructionUnit("Bake! Let it cool for 10 min.", 2, None)]
    with pytest.raises(ValueError):
        instruction_units(steps, instruction_unit="paragraph")


def test_detect_language():
    assert detect_language("Preheat the oven and mix the flour with the sugar and the butter.", "de") == "en"
    assert detect_language("Den Backofen vorheizen und das Mehl mit dem Zucker verrühren.", "en-US") == "de"
    assert detect_language("Bake it.", "en-US") == "en"  # < 20 characters: the declared language
    assert detect_language("  Mix   well   now  ", "nl_NL") == "nl"
    assert detect_language("", None) == ""
