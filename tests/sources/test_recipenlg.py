"""Tests of the RecipeNLG reader (spec sieve_swap.md §2.4, §6) on the real first 49 rows and on broken files."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from builders.core.records import Drop
from builders.sources.recipenlg import STAGE, read_recipenlg

HEADER = ["", "title", "ingredients", "directions", "link", "source", "NER"]


def _split(items):
    items = list(items)
    rows = [x for x in items if not isinstance(x, Drop)]
    drops = [x for x in items if isinstance(x, Drop)]
    return rows, drops


def _write_csv(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([HEADER, *rows])
    return path


def _good(recipe_id: str, title: str = "Toast", source: str = "Gathered") -> list[str]:
    return [recipe_id, title, '["1 slice bread"]', '["Toast the bread."]', "www.example.com/t", source, '["bread"]']


# ------------------------------------------------------------------------------------------- the real file


@pytest.fixture(scope="module")
def first49(shared_data: Path) -> list:
    return list(read_recipenlg(shared_data / "recipenlg" / "RecipeNLG_first49.csv"))


def test_real_file_reads_49_recipes_without_drops(first49):
    rows, drops = _split(first49)
    assert drops == []
    assert [r["recipe_id"] for r in rows] == list(range(49))
    assert {r["source"] for r in rows} == {"Gathered"}
    assert set(rows[0]) == {"recipe_id", "title", "ingredients", "directions", "ner", "link", "source"}


def test_real_first_row_matches_the_file(first49):
    row = first49[0]
    assert row["title"] == "No-Bake Nut Cookies"
    assert row["ingredients"][0] == "1 c. firmly packed brown sugar"
    assert len(row["ingredients"]) == 6
    assert row["directions"] == [
        "In a heavy 2-quart saucepan, mix brown sugar, nuts, evaporated milk and butter or margarine.",
        "Stir over medium heat until mixture bubbles all over top.",
        "Boil and stir 5 minutes more. Take off heat.",
        "Stir in vanilla and cereal; mix well.",
        "Using 2 teaspoons, drop and shape into 30 clusters on wax paper.",
        "Let stand until firm, about 30 minutes.",
    ]
    assert row["ner"] == ["brown sugar", "milk", "vanilla", "nuts", "butter", "bite size shredded rice biscuits"]
    assert row["link"] == "www.cookbooks.com/Recipe-Details.aspx?id=44874"


def test_real_file_json_escapes_are_decoded_and_titles_left_untouched(first49):
    # row 1 holds "275\u00b0" in the file
    assert first49[1]["directions"][2] == "Mix soup and cream together; pour over chicken. Bake, uncovered, at 275° for 3 hours."
    assert first49[4]["title"] == "Reeses Cups(Candy)  "  # trailing spaces kept: cleaning is a later step
    assert first49[20]["title"] == "Grandma Hanrath'S Banana Breadfort Collins, Colorado  "


# ------------------------------------------------------------------------------------------- bad input


def test_malformed_rows_become_named_drops_and_reading_goes_on(tmp_path):
    degrees = json.dumps(["Bake at 350° for 1 hour."])  # ensure_ascii: the file holds the escape \u00b0
    assert "\\u00b0" in degrees
    rows = [
        _good("0", "Good One"),
        ["1", "Bad Json", '["1 egg"]', '["Beat the egg.', "l", "Gathered", '["egg"]'],
        ["2", "Too Few Columns", '["x"]', '["y"]', "l", "Gathered"],
        _good("x3", "Bad Id"),
        ["4", "Dict", '{"a": 1}', '["y"]', "l", "Recipes1M", '["z"]'],
        ["5", "Numbers", '["x"]', '["y"]', "l", "Gathered", "[1, 2]"],
        _good("6", "Other Source", source="Allrecipes"),
        ["7", "Degrees  ", '["1 c. flour"]', degrees, "www.cookbooks.com/x", "Recipes1M", '["flour"]'],
        ["8", "", "[]", "[]", "l", "Gathered", "[]"],
        _good("9", "Last"),
    ]
    items = list(read_recipenlg(_write_csv(tmp_path / "bad.csv", rows)))
    good, drops = _split(items)
    assert [r["recipe_id"] for r in good] == [0, 7, 8, 9]
    assert [(d.item_id, d.reason) for d in drops] == [
        ("1", "malformed_recipe_json"),
        ("2", "malformed_csv_row"),  # 6 columns: still named by its id, the first field
        ("row:3", "malformed_csv_row"),
        ("4", "malformed_recipe_json"),
        ("5", "malformed_recipe_json"),
        ("6", "malformed_csv_row"),
    ]
    assert {d.stage for d in drops} == {STAGE}
    assert "ner" in drops[4].detail and "line 7" in drops[4].detail  # header is line 1
    degrees_row = good[1]
    assert degrees_row["directions"] == ["Bake at 350° for 1 hour."]
    assert degrees_row["title"] == "Degrees  "
    assert degrees_row["source"] == "Recipes1M"
    # empty title and directions are not filtered here (the recipe-database step does it with its own reasons)
    assert good[2] == {"recipe_id": 8, "title": "", "ingredients": [], "directions": [], "ner": [], "link": "l",
                       "source": "Gathered"}


def test_big_fields_field_limit_and_one_mib_cap(tmp_path):
    big_ok = json.dumps(["b" * 200_000])  # above csv's default 131,072-char limit: must be read
    too_big = json.dumps(["a" * (1 << 20)])  # over 1 MiB: a drop, not a crash
    rows = [
        ["0", "Big", big_ok, '["Mix."]', "l", "Gathered", "[]"],
        ["1", "Huge", too_big, '["Mix."]', "l", "Gathered", "[]"],
        _good("2"),
    ]
    good, drops = _split(read_recipenlg(_write_csv(tmp_path / "big.csv", rows)))
    assert [r["recipe_id"] for r in good] == [0, 2]
    assert len(good[0]["ingredients"][0]) == 200_000
    assert [(d.item_id, d.reason) for d in drops] == [("row:1", "malformed_csv_row")]
    assert "field over" in drops[0].detail
    assert csv.field_size_limit() == min(sys.maxsize, 2**31 - 1)


def test_undecodable_bytes_drop_one_row(tmp_path):
    path = tmp_path / "latin1.csv"
    _write_csv(path, [_good("0"), _good("1", "Caf\u00e9"), _good("2")])
    path.write_bytes(path.read_bytes().replace("Café".encode("utf-8"), b"Caf\xe9"))
    good, drops = _split(read_recipenlg(path))
    assert [r["recipe_id"] for r in good] == [0, 2]
    assert [(d.item_id, d.reason) for d in drops] == [("row:1", "malformed_csv_row")]
    assert "UTF-8" in drops[0].detail


def test_missing_file_and_wrong_header_raise_at_call_time(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_recipenlg(tmp_path / "absent.csv")  # no iteration needed
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("id,title,ingredients\n0,Toast,[]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a RecipeNLG CSV"):
        read_recipenlg(wrong)
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        read_recipenlg(empty)


def test_row_cut_by_a_quote_is_named_by_its_first_field(tmp_path):
    """A quoted field left open costs its line only; the drop is named by the recipe id of the line's first field
    (a best-effort guess, said in the detail), or ``row:<n>`` when that is not an integer."""
    path = _write_csv(tmp_path / "cut.csv", [_good("0"), _good("1")])
    good = path.read_text(encoding="utf-8")
    path.write_text(good + '7,Toast,"[""bread""]","[""Toast.""]",x,Gathered,"[""b""]\n'
                    + '"x8,Toast,x\n' + "9,Toast,[],[],x,Gathered,[]\n", encoding="utf-8")
    rows, drops = _split(read_recipenlg(path))
    assert [r["recipe_id"] for r in rows] == [0, 1, 9]
    assert [(d.item_id, d.reason) for d in drops] == [("7", "malformed_csv_row"), ("row:3", "malformed_csv_row")]
    assert drops[0].detail.startswith("line 4: unterminated quoted field: the quote opened on line 4")
    assert drops[0].detail.endswith("; the id '7' is a best-effort guess: field 1 of the line, read before the quote "
                                    "left open")
    assert drops[1].detail.endswith("; field 1 of the line reads 'x8' (best effort: split at every delimiter, its "
                                    "quotes removed), not a valid id")
