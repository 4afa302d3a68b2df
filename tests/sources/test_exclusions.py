"""Tests of the exclusion-id reader (spec sieve_swap.md §2.5; paper supp. E.1: YouCook2 videos are removed)."""

from __future__ import annotations

import logging

import pytest

from builders.sources.exclusions import read_exclusion_ids


def test_youcook2_annotations_give_1790_ids(shared_data):
    ids = read_exclusion_ids([shared_data / "youcook2" / "youcookii_annotations_trainval.json"])
    assert len(ids) == 1790  # 1,333 train + 457 val videos
    assert {"GLd3aX16zBg", "xHr8X2Wpmno", "V53XmPeyjIU"} <= ids  # the first keys of "database"


def test_youcook2_test_list_lines_give_video_ids(shared_data):
    ids = read_exclusion_ids([shared_data / "youcook2" / "test_list.txt"])
    assert len(ids) == 210
    assert "QFb95r3q3tQ" in ids  # first line: 405/QFb95r3q3tQ
    assert "opY0SreshVA" in ids  # last line, no trailing newline: 422/opY0SreshVA
    assert "405" not in ids and not any("/" in i for i in ids)


def test_paper_exclusion_set_is_the_union(shared_data):
    yc2 = shared_data / "youcook2"
    ids = read_exclusion_ids([yc2 / "youcookii_annotations_trainval.json", str(yc2 / "test_list.txt")])
    assert len(ids) == 2000  # 1,790 train/val + 210 test, disjoint


def test_plain_id_list_and_duration_csv(shared_data):
    holdout = read_exclusion_ids([shared_data / "howto100m" / "htm_holdout_vid.txt"])
    assert len(holdout) == 1000 and "---0tKA3iYI" in holdout  # ids may start with '-'
    durations = read_exclusion_ids([shared_data / "youcook2" / "val_duration_totalframe.csv"])  # vid_id column
    assert len(durations) == 457 and "TMpt-41UTOk" in durations


def test_text_comments_blanks_and_invalid_entries(tmp_path, caplog):
    path = tmp_path / "extra.txt"
    path.write_text(
        "# videos to leave out\n"
        "\n"
        "gkjnR3-ZVts\n"
        "  nVbIUDjzWY4  # trailing comment\n"
        "101/Kpk5Qq9ZWbo\r\n"
        "has space\n"
        + "x" * 65 + "\n",
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING):
        ids = read_exclusion_ids(path)  # a single path is accepted too
    assert ids == {"gkjnR3-ZVts", "nVbIUDjzWY4", "Kpk5Qq9ZWbo"}
    assert any("skipped 2 entries" in r.getMessage() for r in caplog.records)


def test_csv_and_json_variants(tmp_path):
    csv_path = tmp_path / "ids.csv"
    csv_path.write_text('title,video_id\n"Smoothie, easy",gkjnR3-ZVts\nTurnovers,nVbIUDjzWY4\n', encoding="utf-8")
    list_path = tmp_path / "ids.json"
    list_path.write_text('["Kpk5Qq9ZWbo", "oL9mGxhBpvU"]', encoding="utf-8")
    assert read_exclusion_ids([csv_path, list_path]) == {"gkjnR3-ZVts", "nVbIUDjzWY4", "Kpk5Qq9ZWbo", "oL9mGxhBpvU"}
    assert read_exclusion_ids([]) == set()


def test_config_errors(tmp_path, shared_data):
    real = shared_data / "youcook2" / "test_list.txt"
    with pytest.raises(FileNotFoundError):
        read_exclusion_ids([real, tmp_path / "absent.txt"])
    odd_json = tmp_path / "odd.json"
    odd_json.write_text('{"videos": ["a"]}', encoding="utf-8")
    with pytest.raises(ValueError, match="database"):
        read_exclusion_ids([odd_json])
    no_column = tmp_path / "no_column.csv"
    no_column.write_text("id,title\nA,B\n", encoding="utf-8")
    with pytest.raises(ValueError, match="video_id"):
        read_exclusion_ids([no_column])
