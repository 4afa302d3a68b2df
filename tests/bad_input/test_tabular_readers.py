"""Malformed HowTo100M metadata, task ids, titles, durations, RecipeNLG and exclusion lists (specs/sieve_swap.md §2,
§6; issue 14): one stray quote never swallows the rows after it, ids that are not YouTube ids are metadata problems,
and a file unusable as a whole is an :class:`InputError` (exit 2 before any work), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders.core.config import ConfigError
from builders.core.errors import InputError
from builders.sources import exclusions, howto100m, recipenlg

from .conftest import check_conserved

HEADER = "video_id,category_1,category_2,rank,task_id\n"


def _rows(n: int) -> list[str]:
    return [f"vid{i:08d},Food and Entertaining,Recipes,{i},100\n" for i in range(n)]


def _with(lines: list[str], at: int, line: str) -> list[str]:
    out = list(lines)
    out[at] = line
    return out


# (case, data lines after the header, drops expected: reason -> n); 40 data rows each unless said
METADATA_CASES = [
    ("unterminated_quote_line_5", _with(_rows(40), 3, 'vid_q,"Food and Entertaining,Recipes,3,100\n'),
     {"malformed_metadata_row": 1}),
    ("unterminated_quote_last_line", _with(_rows(40), 39, 'vid_q,Food,"Recipes,3,100\n'), {"malformed_metadata_row": 1}),
    ("invalid_video_id_path", _with(_rows(40), 7, "../../etc/passwd,Food and Entertaining,Recipes,1,100\n"),
     {"malformed_metadata_row": 1}),
    ("invalid_video_id_space", _with(_rows(40), 7, "a b c,Food and Entertaining,Recipes,1,100\n"),
     {"malformed_metadata_row": 1}),
    ("invalid_video_id_too_long", _with(_rows(40), 7, "x" * 65 + ",Food and Entertaining,Recipes,1,100\n"),
     {"malformed_metadata_row": 1}),
    ("wrong_column_count", _with(_rows(40), 2, "vidX,Food,Recipes\n"), {"malformed_metadata_row": 1}),
    ("non_integer_task_id", _with(_rows(40), 2, "vidX,Food,Recipes,1,n/a\n"), {"malformed_metadata_row": 1}),
    ("empty_video_id", _with(_rows(40), 2, ",Food,Recipes,1,100\n"), {"malformed_metadata_row": 1}),
    ("non_utf8_bytes", _with(_rows(40), 2, "vidX,Food \udcff,Recipes,1,100\n"), {"malformed_metadata_row": 1}),
    ("task_id_over_int64", _with(_rows(40), 2, "vidX,Food,Recipes,1,99999999999999999999\n"),
     {"malformed_metadata_row": 1}),
]


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_bytes("".join(lines).encode("utf-8", "surrogateescape"))
    return path


@pytest.mark.parametrize("case,lines,reasons", METADATA_CASES, ids=[c[0] for c in METADATA_CASES])
def test_metadata_csv(tmp_path, case, lines, reasons):
    path = _write_lines(tmp_path / "HowTo100M_v1.csv", [HEADER, *lines])
    rows, _, _ = check_conserved(howto100m.read_metadata(path), len(lines), reasons)
    assert {r["video_id"] for r in rows} == {line.split(",")[0] for line in lines if line.startswith("vid0")}


def test_metadata_jsonl_bad_lines(tmp_path):
    lines = [json.dumps({"video_id": f"v{i}", "task_id": 1}) + "\n" for i in range(10)]
    lines[2], lines[5], lines[7] = "[1, 2]\n", '{"video_id": "v5", \n', json.dumps({"video_id": "bad id!"}) + "\n"
    path = _write_lines(tmp_path / "meta.jsonl", lines)
    check_conserved(howto100m.read_metadata(path), 10, {"malformed_metadata_row": 3}, kept=7)


WHOLE_FILE_METADATA = [
    ("empty_file", b"", "empty file"),
    ("blank_lines_only", b"\n\n  \n", "no video_id column"),
    ("undecodable_header", b"\xff\xfe\x00video_id,\x80\n", "unreadable header"),
    ("no_video_id_column", b"id,category_1\nx,y\n", "no video_id column"),
    ("unterminated_quote_in_header", b'"video_id,category_1\nx,y\n', "unreadable header"),
]


@pytest.mark.parametrize("case,data,message", WHOLE_FILE_METADATA, ids=[c[0] for c in WHOLE_FILE_METADATA])
def test_metadata_whole_file_is_an_input_error(tmp_path, case, data, message):
    path = tmp_path / "HowTo100M_v1.csv"
    path.write_bytes(data)
    with pytest.raises(InputError, match=message):
        howto100m.read_metadata(path)
    assert issubclass(InputError, ConfigError)  # python -m builders.build exits 2 on a ConfigError


TASK_CASES = [
    ("non_integer_id", "abc\tMake Toast\n"),
    ("three_fields", "7\tMake\tToast\n"),
    ("empty_name", "7\t  \n"),
    ("duplicate_id", "1\tAgain\n"),
    ("non_utf8", "7\tMake \udcff Toast\n"),
]


@pytest.mark.parametrize("case,bad", TASK_CASES, ids=[c[0] for c in TASK_CASES])
def test_task_ids(tmp_path, case, bad):
    lines = ["task_id\ttask_name\n", *[f"{i}\tTask {i}\n" for i in range(1, 11)], bad]
    tasks, drops = howto100m.read_task_ids(_write_lines(tmp_path / "task_ids.csv", lines))
    check_conserved([*({"id": k} for k in tasks), *drops], 11, {"malformed_task_row": 1}, kept=10)


TITLE_CASES = [
    ("unterminated_quote_line_5", 3, 'vid00000003,"The best toast\n'),
    ("duplicate_video_id", 3, "vid00000001,Again\n"),
    ("empty_title", 3, "vid00000003,   \n"),
    ("wrong_column_count", 3, "vid00000003,a,b\n"),
]


@pytest.mark.parametrize("case,at,bad", TITLE_CASES, ids=[c[0] for c in TITLE_CASES])
def test_titles_csv(tmp_path, case, at, bad):
    lines = [f"vid{i:08d},Title {i}\n" for i in range(22)]
    lines[at] = bad
    titles, drops = howto100m.read_titles(_write_lines(tmp_path / "titles.csv", ["video_id,title\n", *lines]))
    check_conserved([*({"id": k} for k in titles), *drops], 22, {"malformed_title_row": 1}, kept=21)
    assert titles["vid00000021"] == "Title 21"  # the rows after the bad one are all there


def test_titles_csv_without_title_column_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="video_id and title"):
        howto100m.read_titles(_write_lines(tmp_path / "titles.csv", ["video_id,name\n", "a,b\n"]))


DURATION_CASES = [
    ("nan_duration", "vid3,nan\n"),
    ("negative_duration", "vid3,-4\n"),
    ("non_numeric", "vid3,long\n"),
    ("unterminated_quote", 'vid3,"12\n'),
    ("duplicate_id", "vid1,5\n"),
]


@pytest.mark.parametrize("case,bad", DURATION_CASES, ids=[c[0] for c in DURATION_CASES])
def test_durations_csv(tmp_path, case, bad):
    lines = ["video_id,duration\n", *[f"vid{i},{i + 1}.5\n" for i in range(12)]]
    lines[4] = bad
    durations, drops = howto100m.read_durations(_write_lines(tmp_path / "d.csv", lines))
    check_conserved([*({"id": k} for k in durations), *drops], 12, {"malformed_duration_row": 1}, kept=11)
    assert durations["vid11"] == 12.5


# ---------------------------------------------------------------------------------------------------- RecipeNLG

RECIPE_HEADER = ",title,ingredients,directions,link,source,NER\n"


def _recipe(i: int) -> str:
    return f'{i},Toast {i},"[""bread""]","[""Toast the bread."", ""Eat it.""]",x.example/{i},Gathered,"[""bread""]"\n'


RECIPE_CASES = [
    ("unterminated_quote_mid_file", 5, '5,Toast,"[""bread""],"[""Toast.""]",x,Gathered,"[""b""]"\n',
     {"malformed_csv_row": 1}),
    ("unterminated_quote_in_last_column", 5, '5,Toast,"[""bread""]","[""Toast.""]",x,Gathered,"[""b""]\n',
     {"malformed_csv_row": 1}),
    ("bad_json_list", 5, '5,Toast,"[""bread""]","not json",x,Gathered,"[]"\n', {"malformed_recipe_json": 1}),
    ("wrong_column_count", 5, "5,Toast,x\n", {"malformed_csv_row": 1}),
    ("non_integer_id", 5, 'five,Toast,"[]","[""a""]",x,Gathered,"[]"\n', {"malformed_csv_row": 1}),
    ("unknown_source", 5, '5,Toast,"[]","[""a""]",x,Elsewhere,"[]"\n', {"malformed_csv_row": 1}),
]


@pytest.mark.parametrize("case,at,bad,reasons", RECIPE_CASES, ids=[c[0] for c in RECIPE_CASES])
def test_recipenlg_csv(tmp_path, case, at, bad, reasons):
    lines = [_recipe(i) for i in range(30)]
    lines[at] = bad
    path = _write_lines(tmp_path / "full_dataset.csv", [RECIPE_HEADER, *lines])
    rows, _, _ = check_conserved(recipenlg.read_recipenlg(path), 30, reasons, kept=29)
    assert rows[-1]["recipe_id"] == 29


@pytest.mark.parametrize("case,data,message", [
    ("missing_columns", "id,title\n1,Toast\n", "not a RecipeNLG CSV"),
    ("empty_file", "", "empty file"),
], ids=["missing_columns", "empty_file"])
def test_recipenlg_whole_file_is_an_input_error(tmp_path, case, data, message):
    path = tmp_path / "full_dataset.csv"
    path.write_text(data, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        recipenlg.read_recipenlg(path)


# ---------------------------------------------------------------------------------------------------- exclusions

EXCLUSION_ERRORS = [
    ("json_wrong_shape_object", "ex.json", '{"videos": ["a"]}', "exclusion list must be"),
    ("json_wrong_shape_number", "ex.json", "42", "exclusion list must be"),
    ("json_database_not_object", "ex.json", '{"database": ["a"]}', "exclusion list must be"),
    ("json_invalid", "ex.json", '{"database": {', "not valid JSON"),
    ("json_undecodable", "ex.json", b'["\xff"]', "not valid JSON"),
    ("csv_without_id_column", "ex.csv", "name\nabc\n", "no video_id"),
]


@pytest.mark.parametrize("case,name,data,message", EXCLUSION_ERRORS, ids=[c[0] for c in EXCLUSION_ERRORS])
def test_exclusion_list_whole_file_is_an_input_error(tmp_path, case, name, data, message):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(InputError, match=message):
        exclusions.read_exclusion_ids([path])


def test_exclusion_csv_stray_quote_loses_only_its_line(tmp_path):
    path = _write_lines(tmp_path / "ex.csv", ["video_id\n", "a1\n", '"b2\n', "c3\n", "d4\n"])
    assert exclusions.read_exclusion_ids([path]) == {"a1", "c3", "d4"}


def test_exclusion_text_skips_invalid_entries(tmp_path):
    path = _write_lines(tmp_path / "test_list.txt", ["101/abc\n", "# comment\n", "bad id!\n", "x" * 70 + "\n"])
    assert exclusions.read_exclusion_ids([path]) == {"abc"}
