"""ARA CoNLL-U reader, the §8.4 instruction rule and the sentence-level gold (marc.md §2.5, §8.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.benchmarks.ara_conllu import (
    NONE,
    AlignmentRow,
    AraFormatError,
    AraRecipe,
    corpus_summary,
    pair_gold,
    parse_alignments,
    parse_conllu,
    read_corpus,
    split_instructions,
    to_text_recipe,
)


def _split(text: str) -> list[str]:
    forms = text.split()
    groups, token_map = split_instructions(forms)
    assert token_map.tolist() == [i for i, g in enumerate(groups) for _ in g]
    return [" ".join(forms[k] for k in g) for g in groups]


def _conllu(forms: list[str], actions: set[int] = frozenset()) -> str:
    lines = [f"{i}\t{f}\t_\t_\t{'B-A' if i in actions else 'O'}\t_\t0\troot\t_\t_"
             for i, f in enumerate(forms, start=1)]
    return "\r\n".join(lines) + "\r\n"


# ------------------------------------------------------------------------------------------ the split rule


def test_terminators_split():
    assert _split("Mix well . Bake ! Serve ? Eat ... Done") == ["Mix well .", "Bake !", "Serve ?", "Eat ...",
                                                                  "Done"]


def test_dotted_token_before_uppercase_splits():
    assert _split("Preheat to 350 F. Cooked ziti goes in .") == ["Preheat to 350 F.", "Cooked ziti goes in ."]
    assert _split("Heat to 350F. Bring water .") == ["Heat to 350F.", "Bring water ."]


def test_dotted_tokens_that_do_not_split():
    assert _split("Use pasta , i. e. rigatoni .") == ["Use pasta , i. e. rigatoni ."]
    assert _split("Boil until firm . Drain.3 ) In a bowl mix .") == ["Boil until firm .", "Drain.3 ) In a bowl mix ."]
    assert _split("Heat to F. now .") == ["Heat to F. now ."]  # next token is not uppercase


def test_closers_join_the_ended_instruction():
    assert _split("Stir ( gently . ) Add salt .") == ["Stir ( gently . )", "Add salt ."]
    assert _split('Say " done ! " Then rest .') == ['Say " done ! "', "Then rest ."]
    assert _split("Serve . ) ]") == ["Serve . ) ]"]


def test_no_terminator_recipe_splits_before_capitals():
    assert _split("Preheat oven to 350 ° In a bowl whisk flour Add eggs Using a mixer beat it") == [
        "Preheat oven to 350 °", "In a bowl whisk flour", "Add eggs", "Using a mixer beat it"]
    # a capital after a capital does not split
    assert _split("Add SPLENDA Sweetener now Stir") == ["Add SPLENDA Sweetener now", "Stir"]


def test_instruction_without_alphanumerics_joins_previous_but_a_first_one_stays():
    assert _split("Mix well . * * If dry add water . * *") == ["Mix well .", "* * If dry add water . * *"]
    assert _split("Mix . . Bake .") == ["Mix . .", "Bake ."]
    assert _split(". Place the yeast .") == [".", "Place the yeast ."]  # homemade_pizza_dough_9 starts so
    assert _split("2 . Mix .") == ["2 .", "Mix ."]  # digits are alphanumeric
    assert split_instructions([])[0] == []


# ------------------------------------------------------------------------------------------ parsing


def test_parse_conllu_crlf_and_fields():
    tokens = parse_conllu(_conllu(["Preheat", "oven", "."], {1}))
    assert [(t.index, t.form, t.tag) for t in tokens] == [(1, "Preheat", "B-A"), (2, "oven", "O"), (3, ".", "O")]
    assert parse_conllu("\ufeff" + _conllu(["a"]))[0].form == "a"  # a BOM is tolerated


@pytest.mark.parametrize("text,match", [
    ("1\tA\t_\t_\tO\t_\t0\troot\t_\r\n", "9 columns"),
    ("2\tA\t_\t_\tO\t_\t0\troot\t_\t_\r\n", "expected 1"),
    ("x\tA\t_\t_\tO\t_\t0\troot\t_\t_\r\n", "not an integer"),
    ("1\tA\t_\t_\tB-X\t_\t0\troot\t_\t_\r\n", "action tag"),
    ("1\t \t_\t_\tO\t_\t0\troot\t_\t_\r\n", "empty token"),
    ("1\tA\t_\t_\tO\t_\tz\troot\t_\t_\r\n", "head"),
    ("", "no tokens"),
])
def test_parse_conllu_bad_input(text, match):
    with pytest.raises(AraFormatError, match=match):
        parse_conllu(text, "bad.conllu")


def test_parse_alignments_and_bad_input():
    rows = parse_alignments("file1\ttoken1\tfile2\ttoken2\r\nx_1\t3\tx_0\t0\r\nx_1\t7\tx_0\t2\r\n")
    assert rows == [AlignmentRow("x_1", 3, "x_0", 0, 2), AlignmentRow("x_1", 7, "x_0", 2, 3)]
    with pytest.raises(AraFormatError, match="header"):
        parse_alignments("a\tb\tc\td\r\n")
    with pytest.raises(AraFormatError, match="columns"):
        parse_alignments("file1\ttoken1\tfile2\ttoken2\r\nx\t1\ty\r\n")
    with pytest.raises(AraFormatError, match="integers"):
        parse_alignments("file1\ttoken1\tfile2\ttoken2\r\nx\tone\ty\t2\r\n")
    with pytest.raises(AraFormatError, match="bad row"):
        parse_alignments("file1\ttoken1\tfile2\ttoken2\r\nx\t0\ty\t2\r\n")


def test_read_corpus_missing_folder(tmp_path: Path):
    with pytest.raises(AraFormatError):
        read_corpus(tmp_path / "absent")
    with pytest.raises(AraFormatError, match="no <dish>"):
        read_corpus(tmp_path)


# ------------------------------------------------------------------------------------------ gold


def _recipe(name: str, text: str, actions: set[int]) -> AraRecipe:
    forms = text.split()
    groups, token_map = split_instructions(forms)
    tokens = parse_conllu(_conllu(forms, actions))
    return AraRecipe(name, "d", tokens, groups, token_map)


def test_pair_gold_majority_ties_and_none():
    # source: 3 instructions (tokens 1-4 | 5-8 | 9-10), target: 3 instructions (1-2 | 3-4 | 5-6)
    src = _recipe("d_1", "Mix a b . Add c d . Serve .", {1, 2, 5, 6, 9})
    tgt = _recipe("d_0", "Stir . Add . Eat .", {1, 3, 5})
    rows = [AlignmentRow("d_1", 1, "d_0", 5), AlignmentRow("d_1", 2, "d_0", 3), AlignmentRow("d_1", 3, "d_0", 3),
            AlignmentRow("d_1", 6, "d_0", 1), AlignmentRow("d_1", 5, "d_0", 3),
            AlignmentRow("d_1", 9, "d_0", 0)]
    g = pair_gold(src, tgt, rows)
    # instr 0: targets {2, 1, 1} -> majority 1; instr 1: tie {0, 1} -> the target of the earliest action (token 5)
    assert g.gold == [1, 1, NONE]
    assert g.hits == [[1, 2], [0, 1], []]
    assert g.multi_target == 2 and g.pair_id == "d_1|d_0"
    with pytest.raises(AraFormatError):
        pair_gold(src, tgt, [AlignmentRow("d_1", 99, "d_0", 1)])
    with pytest.raises(AraFormatError):
        pair_gold(src, tgt, [AlignmentRow("d_2", 1, "d_0", 1)])


# ------------------------------------------------------------------------------------------ the fixture


@pytest.fixture(scope="module")
def corpus(shared_data):
    return read_corpus(shared_data / "marc_ara")


def test_fixture_counts_exactly_as_marc_md_8_4(corpus):
    s = corpus_summary(corpus)
    assert s["recipes"] == 66
    assert s["instructions"] == 631
    assert round(s["instructions_mean"], 2) == 9.56
    assert (s["instructions_min"], s["instructions_max"]) == (3, 16)
    assert s["pairs"] == 60
    assert s["source_instructions"] == 597
    assert s["labelled"] == 463
    assert s["none"] == 134
    assert s["multi_target"] == 96
    assert sum(len(rows) for rows in corpus.alignments.values()) == 1050
    assert sum(r.token2 == 0 for rows in corpus.alignments.values() for r in rows) == 349


def test_fixture_named_split_cases(corpus):
    ziti7 = corpus.recipes["baked_ziti_7"].instruction_texts
    assert ziti7[0].endswith("350 F.") and ziti7[1].startswith("Cooked")
    ziti6 = corpus.recipes["baked_ziti_6"].instruction_texts
    assert any("i. e. rigatoni" in x for x in ziti6)
    ziti8 = corpus.recipes["baked_ziti_8"].instruction_texts
    assert any("Drain.3 ) In" in x for x in ziti8)
    cookies9 = corpus.recipes["chewy_chocolate_chip_cookies_9"].instruction_texts
    assert len(cookies9) == 11 and cookies9[1].startswith("In a medium bowl")
    assert corpus.recipes["homemade_pizza_dough_9"].instruction_texts[0] == "."


def test_to_text_recipe_row(corpus):
    row = to_text_recipe(corpus.recipes["baked_ziti_0"])
    assert row["dish_id"] == "baked_ziti" and row["modality"] == "text" and row["ingredients"] == []
    assert row["source"]["extraction"] == "conllu"
    assert row["instructions"] == corpus.recipes["baked_ziti_0"].instruction_texts
