"""Tests of the HowTo100M metadata and side-file readers (spec sieve_swap.md §2.1–2.2, §6) and their helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders.core.records import Drop
from builders.sources.howto100m import (
    DURATIONS_STAGE,
    STAGE,
    TASKS_STAGE,
    TITLES_STAGE,
    iter_csv_records,
    iter_text_lines,
    parse_int,
    read_durations,
    read_metadata,
    read_task_ids,
    read_titles,
)


def _split(items):
    items = list(items)
    return [x for x in items if not isinstance(x, Drop)], [x for x in items if isinstance(x, Drop)]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


# ------------------------------------------------------------------------------------------- metadata

METADATA_CSV = """video_id,category_1,category_2,rank,task_id
gkjnR3-ZVts,Food and Entertaining,Drinks,6,25938
nVbIUDjzWY4,Food and Entertaining,Drinks,3,25938
Kpk5Qq9ZWbo,Food and Entertaining,Drinks,6
oL9mGxhBpvU,Food and Entertaining,Recipes,1,abc
c3Lh5P6Yw8g,Food and Entertaining,Recipes,2,
,Food and Entertaining,Recipes,1,25938

f4mT2zB0eQs,Cars & Other Vehicles,,,1234
Rr7bNn2Kk0s,Food and Entertaining,Recipes,x,25938
"Qh9aZ0mPp1k","Food and Entertaining","Recipes, Desserts",12,25938
gkjnR3-ZVts,Food and Entertaining,Drinks,6,25938
"""


def test_metadata_csv_rows_and_drops(tmp_path):
    rows, drops = _split(read_metadata(_write(tmp_path / "HowTo100M_v1.csv", METADATA_CSV)))
    food = "Food and Entertaining"
    assert rows == [
        {"video_id": "gkjnR3-ZVts", "category_1": food, "category_2": "Drinks", "rank": 6, "task_id": 25938, "_ord": 0},
        {"video_id": "nVbIUDjzWY4", "category_1": food, "category_2": "Drinks", "rank": 3, "task_id": 25938, "_ord": 1},
        {"video_id": "f4mT2zB0eQs", "category_1": "Cars & Other Vehicles", "category_2": "", "rank": None,
         "task_id": 1234, "_ord": 6},
        {"video_id": "Qh9aZ0mPp1k", "category_1": food, "category_2": "Recipes, Desserts", "rank": 12,
         "task_id": 25938, "_ord": 8},
        # the reader keeps duplicates; `_ord` lets the pipeline keep the first one
        {"video_id": "gkjnR3-ZVts", "category_1": food, "category_2": "Drinks", "rank": 6, "task_id": 25938, "_ord": 9},
    ]
    assert [(d.item_id, d.reason) for d in drops] == [
        ("Kpk5Qq9ZWbo", "malformed_metadata_row"),  # 4 columns
        ("oL9mGxhBpvU", "malformed_metadata_row"),  # task_id "abc"
        ("c3Lh5P6Yw8g", "malformed_metadata_row"),  # empty task_id
        ("row:5", "malformed_metadata_row"),  # empty video_id
        ("Rr7bNn2Kk0s", "malformed_metadata_row"),  # rank "x"
    ]
    assert {d.stage for d in drops} == {STAGE}
    assert drops[0].detail.startswith("line 4: 4 columns, expected 5")
    assert drops[3].detail.startswith("line 7:")


def test_metadata_undecodable_line_and_huge_field(tmp_path):
    path = tmp_path / "meta.csv"
    huge = "x" * ((1 << 20) + 1)
    path.write_bytes(
        b"video_id,category_1,category_2,rank,task_id\n"
        b"AAAAAAAAAAA,Food \xff,Drinks,1,2\n"
        + f"BBBBBBBBBBB,{huge},Drinks,1,2\n".encode()
        + b"CCCCCCCCCCC,Food and Entertaining,Drinks,1,2\n"
    )
    rows, drops = _split(read_metadata(path))
    assert [(r["video_id"], r["_ord"]) for r in rows] == [("CCCCCCCCCCC", 2)]
    assert [(d.item_id, d.reason) for d in drops] == [("row:0", "malformed_metadata_row"), ("row:1", "malformed_metadata_row")]
    assert "UTF-8" in drops[0].detail and "field over" in drops[1].detail


def test_metadata_jsonl_and_minimal_csv(tmp_path):
    lines = [
        '{"video_id": "gkjnR3-ZVts", "category_1": "Food and Entertaining", "category_2": "Drinks", "rank": 6, "task_id": 25938}',
        '{"video_id": "AAAAAAAAAAA"}',
        '{"video_id": "BBBBBBBBBBB", "task_id": "x"}',
        "not json",
        "[1, 2]",
        '{"video_id": ""}',
        '{"video_id": 5}',
        '{"video_id": "CCCCCCCCCCC", "task_id": true}',
        '{"video_id": "DDDDDDDDDDD", "category_1": 3}',
        '{"video_id": "EEEEEEEEEEE", "task_id": null}',
    ]
    rows, drops = _split(read_metadata(_write(tmp_path / "meta.jsonl", "\n".join(lines) + "\n")))
    assert rows == [
        {"video_id": "gkjnR3-ZVts", "category_1": "Food and Entertaining", "category_2": "Drinks", "rank": 6,
         "task_id": 25938, "_ord": 0},
        {"video_id": "AAAAAAAAAAA", "category_1": "", "category_2": "", "rank": None, "task_id": -1, "_ord": 1},
    ]
    assert [d.item_id for d in drops] == [
        "BBBBBBBBBBB", "row:3", "row:4", "row:5", "row:6", "CCCCCCCCCCC", "DDDDDDDDDDD", "EEEEEEEEEEE"]
    assert {d.reason for d in drops} == {"malformed_metadata_row"}

    # detected by content too, and a CSV with only a video_id column
    (rows_txt, _) = _split(read_metadata(_write(tmp_path / "meta.txt", lines[1] + "\n")))
    assert rows_txt == [{**rows[1], "_ord": 0}]
    rows_min, drops_min = _split(read_metadata(_write(tmp_path / "ids.csv", "video_id\nAAAAAAAAAAA\n")))
    assert rows_min == [{**rows[1], "_ord": 0}] and drops_min == []


def test_metadata_config_errors_raise_at_call_time(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_metadata(tmp_path / "absent.csv")
    with pytest.raises(ValueError, match="no video_id column"):
        read_metadata(_write(tmp_path / "x.csv", "vid,category_1\nA,B\n"))


# ------------------------------------------------------------------------------------------- task ids


def test_task_ids_with_and_without_header(tmp_path):
    with_header = _write(tmp_path / "a.csv", "task_id\ttask_name\n25938\tMake Bean Salad\r\n1234\tClean Car Tires\n")
    without = _write(tmp_path / "b.csv", "25938\tMake Bean Salad\n1234\tClean Car Tires")
    expected = {25938: "Make Bean Salad", 1234: "Clean Car Tires"}
    assert read_task_ids(with_header) == (expected, [])
    assert read_task_ids(without) == (expected, [])


def test_task_ids_malformed_lines(tmp_path):
    text = "25938\tMake Bean Salad\nabc\tNot An Id\n777\n778\t \n779\tA\tB\n25938\tOther Name\n\n1234\t  Clean Car Tires  \n"
    tasks, drops = read_task_ids(_write(tmp_path / "task_ids.csv", text))
    assert tasks == {25938: "Make Bean Salad", 1234: "Clean Car Tires"}
    assert [(d.item_id, d.reason) for d in drops] == [
        ("line:2", "malformed_task_row"),  # non-integer id after the first line
        ("777", "malformed_task_row"),  # one field
        ("778", "malformed_task_row"),  # empty name
        ("779", "malformed_task_row"),  # three fields
        ("25938", "malformed_task_row"),  # duplicate: the first name wins
    ]
    assert {d.stage for d in drops} == {TASKS_STAGE}
    with pytest.raises(FileNotFoundError):
        read_task_ids(tmp_path / "absent.csv")


# ------------------------------------------------------------------------------------------- titles


def test_titles_csv(tmp_path):
    text = (
        "video_id,title\n"
        'gkjnR3-ZVts,"How to Make a Strawberry Smoothie, Easy"\n'
        "nVbIUDjzWY4,  Apple Turnovers  \n"
        ",No Id\n"
        "Kpk5Qq9ZWbo,\n"
        "gkjnR3-ZVts,Dup\n"
        "a,b,c\n"
    )
    titles, drops = read_titles(_write(tmp_path / "titles.csv", text))
    assert titles == {"gkjnR3-ZVts": "How to Make a Strawberry Smoothie, Easy", "nVbIUDjzWY4": "Apple Turnovers"}
    assert [(d.item_id, d.reason) for d in drops] == [
        ("line:4", "malformed_title_row"),
        ("Kpk5Qq9ZWbo", "malformed_title_row"),
        ("gkjnR3-ZVts", "malformed_title_row"),
        ("line:7", "malformed_title_row"),
    ]
    assert {d.stage for d in drops} == {TITLES_STAGE}
    with pytest.raises(ValueError, match="title"):
        read_titles(_write(tmp_path / "bad.csv", "video_id,name\nA,B\n"))


def test_titles_jsonl(tmp_path):
    text = (
        '{"video_id": "gkjnR3-ZVts", "title": "Strawberry Smoothie"}\n'
        '{"video_id": "nVbIUDjzWY4", "title": 5}\n'
        '{"title": "no id"}\n'
        "garbage\n"
        '"just a string"\n'
    )
    titles, drops = read_titles(_write(tmp_path / "titles.jsonl", text))
    assert titles == {"gkjnR3-ZVts": "Strawberry Smoothie"}
    assert [(d.item_id, d.reason) for d in drops] == [
        ("nVbIUDjzWY4", "malformed_title_row"),
        ("line:3", "malformed_title_row"),
        ("line:4", "malformed_title_row"),
        ("line:5", "malformed_title_row"),
    ]
    assert "invalid JSON" in drops[2].detail and "not a JSON object" in drops[3].detail


# ------------------------------------------------------------------------------------------- durations


def test_durations_real_youcook2_file(shared_data):
    durations, drops = read_durations(shared_data / "youcook2" / "val_duration_totalframe.csv")
    assert drops == []
    assert len(durations) == 457
    assert durations["TMpt-41UTOk"] == 563.02  # first data line
    assert durations["xw9aAfqanDo"] == 355.0  # written as an integer
    assert durations["Mzn6Q4gUDBo"] == 268.96  # empty total_frame
    assert durations["_GTwKEPmB-U"] == 188.15  # last line, no trailing newline


def test_durations_malformed_rows(tmp_path):
    text = (
        "video_id,duration\n"
        "AAAAAAAAAAA,12.5\n"
        "BBBBBBBBBBB,abc\n"
        "CCCCCCCCCCC,nan\n"
        "DDDDDDDDDDD,-1\n"
        "EEEEEEEEEEE,\n"
        "FFFFFFFFFFF,inf\n"
        "GGGGGGGGGGG,300\n"
        "AAAAAAAAAAA,99\n"
        "HHHHHHHHHHH,1,2\n"
        ",5\n"
    )
    durations, drops = read_durations(_write(tmp_path / "durations.csv", text))
    assert durations == {"AAAAAAAAAAA": 12.5, "GGGGGGGGGGG": 300.0}
    assert [d.item_id for d in drops] == [
        "BBBBBBBBBBB", "CCCCCCCCCCC", "DDDDDDDDDDD", "EEEEEEEEEEE", "FFFFFFFFFFF", "AAAAAAAAAAA", "HHHHHHHHHHH",
        "line:11"]
    assert {(d.reason, d.stage) for d in drops} == {("malformed_duration_row", DURATIONS_STAGE)}
    assert "duplicate" in drops[5].detail and "columns" in drops[6].detail
    with pytest.raises(ValueError, match="duration"):
        read_durations(_write(tmp_path / "bad.csv", "video_id,length\nA,1\n"))


# ------------------------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("value, expected", [("25938", 25938), (" 6 ", 6), ("6.0", 6), (6.0, 6), (-3, -3), (str(2**63 - 1), 2**63 - 1)])
def test_parse_int_accepts(value, expected):
    assert parse_int(value) == expected


@pytest.mark.parametrize("value", ["6.5", "abc", "", "1e3", "1" * 400 + ".0", "9" * 5000, 2**63, str(-(2**63) - 1), 1e300, True, None, 6.5, [1]])
def test_parse_int_rejects(value):
    with pytest.raises(ValueError):
        parse_int(value)


def test_runaway_quote_costs_one_record_and_reading_resumes(tmp_path):
    # max_field_chars=10 -> a record may grow to 80 characters. Line 2 opens a quote that never closes:
    # 16 chars, then 11 per "xxxxxxxxxx\n" line; 16 + 6*11 = 82 > 80, so lines 2..8 are given up as one record.
    path = _write(tmp_path / "r.csv", 'a,b\n1,"unterminated\n' + "xxxxxxxxxx\n" * 20 + "2,ok\n")
    records = list(iter_csv_records(path, max_field_chars=10))
    assert records[0].value == ["a", "b"]
    assert (records[1].line_no, records[1].value) == (2, None) and "record over 80" in records[1].problem
    assert "unterminated quoted field" in records[1].problem
    # issue 14: only the line that opened the quote is given up; lines 3..22 are read again as they are
    assert [(r.line_no, r.value) for r in records[2:-1]] == [(n, ["xxxxxxxxxx"]) for n in range(3, 23)]
    assert (records[-1].line_no, records[-1].value, records[-1].problem) == (23, ["2", "ok"], "")


def test_over_long_single_line_is_skipped_whole(tmp_path):
    path = _write(tmp_path / "r.csv", "a,b\n" + "z" * 500 + "\n3,ok\n")
    records = list(iter_csv_records(path, max_field_chars=10))
    assert [(r.line_no, r.value) for r in records] == [(1, ["a", "b"]), (2, None), (3, ["3", "ok"])]
    lines = list(iter_text_lines(path, max_line_bytes=100))
    assert [(r.line_no, r.value) for r in lines] == [(1, "a,b"), (2, None), (3, "3,ok")]
    assert lines[1].problem == "line over 100 bytes"



GUESS = "is a best-effort guess: field 1 of the line,"
CUT_ROWS = [  # (the line, its drop's id, the end of its detail)
    ('"nVbIUDjzWY4,Food and Entertaining,Drinks,3,25938\n', "nVbIUDjzWY4",   # the quote opens inside the id
     f"the id 'nVbIUDjzWY4' {GUESS} split at every delimiter, its quotes removed"),
    ('"Qh9aZ0mPp1k","Food and Entertaining,Recipes,12,25938\n', "Qh9aZ0mPp1k",  # a quoted id, then an open quote
     f"the id 'Qh9aZ0mPp1k' {GUESS} read before the quote left open"),
    ('Kpk5Qq9ZWbo,Food and Entertaining,"Drinks,6,25938\n', "Kpk5Qq9ZWbo",
     f"the id 'Kpk5Qq9ZWbo' {GUESS} read before the quote left open"),
    ('"a b c,Food and Entertaining,Drinks,6,25938\n', "row:1",
     "field 1 of the line reads 'a b c' (best effort: split at every delimiter, its quotes removed), not a valid id"),
]


@pytest.mark.parametrize("line,item_id,note", CUT_ROWS, ids=[c[1] for c in CUT_ROWS])
def test_metadata_row_cut_by_a_quote_is_named_by_its_first_field(tmp_path, line, item_id, note):
    """A row whose quote is left open loses its line only, and is named by its first field, the video id, as read
    from the raw line: sure when the field ends before the open quote, else a guess (the line split at commas, its
    quotes removed); the detail says it is a best-effort guess. A first field that is no valid id: ``row:<n>``."""
    text = ("video_id,category_1,category_2,rank,task_id\n"
            "gkjnR3-ZVts,Food and Entertaining,Drinks,6,25938\n"
            f"{line}"
            "f4mT2zB0eQs,Cars & Other Vehicles,Cars,1,1234\n")
    rows, drops = _split(read_metadata(_write(tmp_path / "HowTo100M_v1.csv", text)))
    assert [(r["video_id"], r["_ord"]) for r in rows] == [("gkjnR3-ZVts", 0), ("f4mT2zB0eQs", 2)]
    assert [(d.item_id, d.reason) for d in drops] == [(item_id, "malformed_metadata_row")]
    assert drops[0].detail == ("line 3: unterminated quoted field: the quote opened on line 3 runs to line 4 (end of "
                               f"file); this line is dropped, reading resumes at line 4; {note}")
