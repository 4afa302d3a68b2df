"""builders.ops.step_parser: spec ``howtostep.md`` §3.3 (chunks) and §3.6 (parsing), hand-written expectations.

The ``SMOL_*`` outputs are real greedy SmolLM2-135M-Instruct (Q4_1 GGUF, transformers runtime, 256 new tokens)
answers to the packaged prompts on chunks of ``../shared/data/showhowto/showhowto_asr_examples.json`` entry 0 (apple
turnovers), copied verbatim (truncation mid-word included).
"""

from __future__ import annotations

import pytest

from builders.ops.step_parser import (
    ParsedChunk,
    chunk_ranges,
    clean_step,
    halve_ranges,
    parse_steps,
    split_to_budget,
    timestamp_seconds,
)

SPOON = "Now, spoon about 2 teaspoons cinnamon into the center of one round."

# howtostep_v3 on sentences 0-9: "Step N:" lines after a paraphrased preamble, a runaway repeat, cut at max_tokens.
SMOL_V3_STEP_LINES = (
    "Hey, little muffins, today we will make a super easy, quick, and delicious apple turnovers. 40 minutes for all"
    " the process.\n\n"
    "Step 1: Combine apple cubes, cinnamon, and sugar in a bowl.\n"
    "Step 2: Mix, mix, mix.\n"
    "Step 3: Spoon about 2 teaspoons apple mixture into the center of one round.\n"
    "Step 4: Now, using a round cutter or glass, cut 15 rounds from the pastry sheet.\n"
    "Step 5: Now, spoon about 2 teaspoons apple mixture into the center of one round.\n"
    "Step 6: Now, spoon about 2 teaspoons cinnamon into the center of one round.\n"
    "Step 7: Now, spoon about 2 teaspoons sugar into the center of one round.\n"
    "Step 8: Now, spoon about 2 teaspoons cinnamon into the center of one round.\n"
    "Step 9: Now, spoon about 2 teaspoons cinnamon into the center of one round.\n"
    "Step 10: Now, spoon about 2 teaspoons cinnamon into the center of one round.\n"
    "Step 11: Now, spoon about 2 teaspoons cinnamon into the center of one round.\n"
    "Step 12: Now, spoon"
)
# howtostep_v3 on sentences 10-19: a paraphrase paragraph, no list at all.
SMOL_V3_PARAPHRASE = (
    "Using your fingers, gently fold the pastry over to enclose filling, then use a fork and press around the edges"
    " to seal and make your apple turnovers look more beautiful. This is how it looks like. I will show you one more"
    " time to make sure that you understand the technique. And if you still find my apple turnovers too ugly, I'm"
    " really sorry. Anyways, just have fun making them with your family and friends. Then it doesn't matter if they"
    " are beautiful or not. At least they are tasty. I finally finished my 15 turnovers. Now we will lightly beat one"
    " egg in a small bowl and then egg wash our apple turnovers."
)
# howtostep_v3 on sentences 20-29: paragraphs separated by blank lines (a loop), no list.
SMOL_V3_PARAGRAPHS = (
    "The egg wash will give them a gorgeous light brown color after baking in the oven.\n\n"
    "The apple turnovers will take a long time to bake.\n\n"
    + "The oven will take a long time to bake the apple turnovers.\n\n" * 3
)
# mptva on sentences 10-19: speaker tags, a preamble ending in ":", then a numbered runaway list.
FOLD = "Using a fork and press to seal and make your apple turnovers look more beautiful"
SMOL_MPTVA_NUMBERED = (
    "SmolLM:\n\nSmolLM:\n\nThe procedure steps that are relevant to the task of the video from the inputs are:\n\n"
    "1. Filtering colloquial sentences in the speech\n"
    "2. Using your fingers to gently fold the pastry over to enclose filling\n"
    + "".join(f"{i}. {FOLD}\n" for i in range(3, 13))
    + "13. Using a"
)
# mptva on sentences 0-9: one paraphrase line (no list): one 44-word line-mode item -> step_too_long.
SMOL_MPTVA_LINE = (
    "Hey, little muffins, today we will make a super easy, quick, and delicious apple turnovers. 40 minutes for all"
    " the process. First, combine the apple cubes, cinnamon, and sugar in a bowl. Spoon about 2 teaspoons apple"
    " mixture into the center of one round."
)
# howtostep_v1_ts on sentences 0-9: a numbered item made of digits only.
SMOL_V1_DIGITS = "1. 2018-01-01: 1:10:10:11:11:11:11:11:11:11:11:11:11:11:11:11:11:11:11:11:11:11"

LONG_STEP = " ".join(["word"] * 41)

# (id, raw output, parse_steps kwargs, kept steps, dropped (text, reason), parse_mode)
CASES = [
    ("numbered_lines", "1. Boil water.\n2. Add tea leaves.\n3. Steep for 3 minutes.", {},
     ["Boil water.", "Add tea leaves.", "Steep for 3 minutes."], [], "numbered"),
    ("inline_list", "1. Boil water. 2. Add tea. 3. Stir.", {}, ["Boil water.", "Add tea.", "Stir."], [], "numbered"),
    ("inline_after_preamble", "Here are the steps: 1. Boil water 2. Add tea", {},
     ["Boil water", "Add tea"], [], "numbered"),
    ("step_n_lines", "Step 1: Boil water\nStep 2: Add tea\nstep 3: Stir", {},
     ["Boil water", "Add tea", "Stir"], [], "numbered"),
    ("paren_markers", "1) Boil water\n2) Add tea", {}, ["Boil water", "Add tea"], [], "numbered"),
    ("colon_markers", "1: Boil water\n2: Add tea", {}, ["Boil water", "Add tea"], [], "numbered"),
    ("list_starting_at_4", "4. Boil water\n5. Add tea", {}, ["Boil water", "Add tea"], [], "numbered"),
    ("markdown_bold", "**1. Boil water**\n2. **Add tea**: loose leaves\n3. Use `hot` water", {},
     ["Boil water", "Add tea: loose leaves", "Use hot water"], [], "numbered"),
    ("markdown_headers", "## Key steps\n### 1. Boil water\n### 2. Add tea", {}, ["Boil water", "Add tea"], [],
     "numbered"),
    ("bold_step_headers", "**Step 1:** Boil water\n**Step 2:** Add tea", {}, ["Boil water", "Add tea"], [],
     "numbered"),
    ("crlf_newlines", "1. Boil water\r\n2. Add tea\r\n\r\nEnjoy!", {}, ["Boil water", "Add tea"], [], "numbered"),
    ("timestamps_in_items",
     "1. [00:12] Boil water (0:35)\n2. 00:12 - 00:20 Add tea at 1:23.\n3. Stir [10s-17s]\n4. Pour (at 2:05) milk",
     {}, ["Boil water", "Add tea.", "Stir", "Pour milk"], [], "numbered"),
    ("non_timestamps_kept", "1. Add eggs (2-3) at 350 degrees\n2. Bake 10 minutes\n3. Mix 1:1 with water", {},
     ["Add eggs (2-3) at 350 degrees", "Bake 10 minutes", "Mix 1:1 with water"], [], "numbered"),
    ("preamble_and_trailing_chatter",
     "Sure! Here are the key steps:\n\n1. Boil water.\n2. Add tea.\n\nI hope this helps! 3. Enjoy.", {},
     ["Boil water.", "Add tea."], [], "numbered"),
    ("blank_lines_between_items", "1. Boil water\n\n2. Add tea\n\n\n3. Stir\n\nEnjoy your tea!", {},
     ["Boil water", "Add tea", "Stir"], [], "numbered"),
    ("second_list_after_blank_line", "1. Flour\n2. Sugar\n\nSteps:\n1. Mix\n2. Bake", {}, ["Flour", "Sugar"], [],
     "numbered"),
    ("wrapped_item", "1. Boil water\n   in a kettle\n2. Add tea", {}, ["Boil water in a kettle", "Add tea"], [],
     "numbered"),
    ("decimal_inside_item", "1. Add 1.5 cups of flour.\n2. Mix 2.5 cups of milk.", {},
     ["Add 1.5 cups of flour.", "Mix 2.5 cups of milk."], [], "numbered"),
    ("step_of_inside_item", "1. Repeat step 3 of 2 times\n2. Serve", {}, ["Repeat step 3 of 2 times", "Serve"], [],
     "numbered"),
    ("non_consecutive_numbers", "1. Boil water\n3. Add tea\n2. Stir", {}, ["Boil water 3. Add tea", "Stir"], [],
     "numbered"),
    ("inline_number_not_next", "1. Cook for 5. Then stir. 2. Serve", {}, ["Cook for 5. Then stir.", "Serve"], [],
     "numbered"),
    ("wrapping_quotes", '1. "Boil water."\n2. \u201cAdd tea\u201d\n3. "Stir" well', {},
     ["Boil water.", "Add tea", '"Stir" well'], [], "numbered"),
    ("step_prefix_inside_item", "1. Step 1: Boil water\n2. Step 2 - Add tea", {}, ["Boil water", "Add tea"], [],
     "numbered"),
    ("empty_items", "1. Boil water\n2.\n3. ...\n4. Add tea", {}, ["Boil water", "Add tea"],
     [("", "empty_step"), ("...", "empty_step")], "numbered"),
    ("overlong_step", f"1. {LONG_STEP}\n2. Add tea", {}, ["Add tea"], [(LONG_STEP, "step_too_long")], "numbered"),
    ("forty_words_kept", "1. " + " ".join(["w"] * 40), {}, [" ".join(["w"] * 40)], [], "numbered"),
    ("duplicates_case_folded", "1. Boil water\n2. boil WATER\n3. Add tea\n4. Boil water", {},
     ["Boil water", "Add tea"], [("boil WATER", "duplicate_in_chunk"), ("Boil water", "duplicate_in_chunk")],
     "numbered"),
    ("word_cap_2x_input", "1. a b c\n2. d e f\n3. g\n4. h", {"input_words": 3}, ["a b c", "d e f"],
     [("g", "overgeneration_cap"), ("h", "overgeneration_cap")], "numbered"),
    ("word_cap_exact_fit", "1. a b\n2. c d", {"input_words": 2}, ["a b", "c d"], [], "numbered"),
    ("bullets", "Here you go:\n- Boil water\n* Add tea\n\u2022 Stir\nThanks", {}, ["Boil water", "Add tea", "Stir"],
     [], "bullets"),
    ("bullets_bold", "* **Boil** water\n* __Add__ tea", {}, ["Boil water", "Add tea"], [], "bullets"),
    ("numbered_beats_bullets", "- Ingredients\n1. Boil water\n2. Add tea", {}, ["Boil water", "Add tea"], [],
     "numbered"),
    ("empty_output", "", {}, [], [], "none"),
    ("whitespace_output", "  \n\n \t", {}, [], [], "none"),
    ("paragraph_not_numbered", "The speaker shows how to make tea. First boil water, then add the tea.", {}, [], [],
     "none"),
    ("lines_only_without_numbers", "Boil water\nAdd tea", {}, [], [], "none"),
    ("mptva_lines", "The procedure steps are:\nBoil water.\n\nAdd tea leaves.\nSteps:\n  Stir  ", {"numbered": False},
     ["Boil water.", "Add tea leaves.", "Stir"], [], "lines"),
    ("mptva_lines_duplicates", "Boil water\nboil water\nStep three: Add tea", {"numbered": False},
     ["Boil water", "Step three: Add tea"], [("boil water", "duplicate_in_chunk")], "lines"),
    ("mptva_prefers_numbers", "Intro line\n1. Boil water\n2. Add tea", {"numbered": False}, ["Boil water", "Add tea"],
     [], "numbered"),
    ("smol_v3_step_lines", SMOL_V3_STEP_LINES, {"input_words": 120},
     ["Combine apple cubes, cinnamon, and sugar in a bowl.", "Mix, mix, mix.",
      "Spoon about 2 teaspoons apple mixture into the center of one round.",
      "Now, using a round cutter or glass, cut 15 rounds from the pastry sheet.",
      "Now, spoon about 2 teaspoons apple mixture into the center of one round.", SPOON,
      "Now, spoon about 2 teaspoons sugar into the center of one round.", "Now, spoon"],
     [(SPOON, "duplicate_in_chunk")] * 4, "numbered"),
    ("smol_v3_paraphrase", SMOL_V3_PARAPHRASE, {"input_words": 150}, [], [], "none"),
    ("smol_v3_paragraphs", SMOL_V3_PARAGRAPHS, {"input_words": 150}, [], [], "none"),
    ("smol_mptva_numbered", SMOL_MPTVA_NUMBERED, {"numbered": False, "input_words": 150},
     ["Filtering colloquial sentences in the speech",
      "Using your fingers to gently fold the pastry over to enclose filling", FOLD, "Using a"],
     [(FOLD, "duplicate_in_chunk")] * 9, "numbered"),
    ("smol_mptva_numbered_word_cap", SMOL_MPTVA_NUMBERED, {"numbered": False, "input_words": 5},
     ["Filtering colloquial sentences in the speech"],
     [("Using your fingers to gently fold the pastry over to enclose filling", "overgeneration_cap")]
     + [(FOLD, "overgeneration_cap")] * 10 + [("Using a", "overgeneration_cap")], "numbered"),
    ("smol_mptva_line_too_long", SMOL_MPTVA_LINE, {"numbered": False}, [], [(SMOL_MPTVA_LINE, "step_too_long")],
     "lines"),
    ("smol_v1_digits_only", SMOL_V1_DIGITS, {"numbered": False, "with_timestamps": True}, [],
     [(SMOL_V1_DIGITS[3:], "empty_step")], "numbered"),
]


@pytest.mark.parametrize("raw, kwargs, steps, dropped, mode", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_steps_table(raw, kwargs, steps, dropped, mode):
    got = parse_steps(raw, **kwargs)
    assert got.steps == steps
    assert got.dropped == dropped
    assert got.parse_mode == mode
    assert got.timestamps == ([None] * len(steps) if kwargs.get("with_timestamps") else [])


def test_runaway_list_capped_at_20():
    raw = "\n".join(f"{i}. Stir the pot number {i}" for i in range(1, 26))
    got = parse_steps(raw)
    assert got.steps == [f"Stir the pot number {i}" for i in range(1, 21)]
    assert got.dropped == [(f"Stir the pot number {i}", "overgeneration_cap") for i in range(21, 26)]


def test_cap_is_sticky_and_counts_kept_steps():
    # 22 items, item 2 a duplicate: 20 kept steps are reached at item 21, item 22 is capped (empty or not)
    raw = "1. a0\n2. A0\n" + "".join(f"{i}. a{i}\n" for i in range(3, 22)) + "22. a22"
    got = parse_steps(raw, max_steps_per_chunk=20)
    assert got.steps == ["a0"] + [f"a{i}" for i in range(3, 22)]
    assert got.dropped == [("A0", "duplicate_in_chunk"), ("a22", "overgeneration_cap")]


def test_max_step_words_parameter():
    assert parse_steps("1. a b c\n2. d e", max_step_words=2).dropped == [("a b c", "step_too_long")]


V1_CASES = [
    ("lines_clock_bracket_decimal", "0:12 Boil water.\n[00:20] Add tea.\n12.3 - Stir.\nEnjoy the tea",
     ["Boil water.", "Add tea.", "Stir.", "Enjoy the tea"], [12.0, 20.0, 12.3, None], "lines"),
    ("numbered_ranges", "1. 12.3 -> 15.0: Boil water\n2. 00:01:05 Add tea\n3. 5 - Stir\n4. [10s-17s] Pour",
     ["Boil water", "Add tea", "Stir", "Pour"], [12.3, 65.0, 5.0, 10.0], "numbered"),
    ("input_format_echo", "0.00 -> 5.20: Boil water\n5.20 -> 9.75: Add tea",
     ["Boil water", "Add tea"], [0.0, 5.2], "lines"),
    ("bare_integer_is_text", "3 eggs are beaten\n(2 cups) flour", ["3 eggs are beaten", "(2 cups) flour"],
     [None, None], "lines"),
]


@pytest.mark.parametrize("raw, steps, times, mode", [c[1:] for c in V1_CASES], ids=[c[0] for c in V1_CASES])
def test_v1_timestamps(raw, steps, times, mode):
    got = parse_steps(raw, numbered=False, with_timestamps=True)
    assert (got.steps, got.timestamps, got.parse_mode) == (steps, times, mode)


# howtostep_v1_ts on sentences 20-29: the input's "start -> end:" line format echoed back (the first without an end).
SMOL_V1_LINES = (
    "204.46: The egg wash will give them a gorgeous light brown color after baking in the oven.\n"
    "204.46 -> 205.92: We will bake the apple turnovers at 180\u00b0C in about 18-20 minutes until golden.\n"
    "205.92 -> 206.28: Okay, taking photos like this is like a torture.\n"
    "206.28 -> 207.55: I just can't resist grabbing one of them and enjoying immediately.\n"
    "207.55 -> 208.93: So finally I can try my apple turnovers.\n"
    "208.93 -> 209.37: Oh my god!\n"
    "209.37 -> 210.54: I'm really really excited.\n"
    "210.54 -> 211.87: I'm really really good.\n"
    "211.87 -> 212.33: I'm really really good.\n"
    "212.33 -> 213.56: I'm really really good."
)


def test_v1_smollm_timestamped_lines():
    got = parse_steps(SMOL_V1_LINES, numbered=False, with_timestamps=True, input_words=120)
    assert got.parse_mode == "lines"
    assert got.steps == [
        "The egg wash will give them a gorgeous light brown color after baking in the oven.",
        "We will bake the apple turnovers at 180\u00b0C in about 18-20 minutes until golden.",
        "Okay, taking photos like this is like a torture.",
        "I just can't resist grabbing one of them and enjoying immediately.",
        "So finally I can try my apple turnovers.",
        "Oh my god!",
        "I'm really really excited.",
        "I'm really really good.",
    ]
    assert got.timestamps == [204.46, 204.46, 205.92, 206.28, 207.55, 208.93, 209.37, 210.54]
    assert got.dropped == [("I'm really really good.", "duplicate_in_chunk")] * 2


def test_v1_timestamps_follow_kept_steps_only():
    got = parse_steps("1. 0:05 Boil water\n2. 0:09 boil water\n3. 0:12 Add tea", numbered=False, with_timestamps=True)
    assert got.steps == ["Boil water", "Add tea"]
    assert got.timestamps == [5.0, 12.0]
    assert got.dropped == [("boil water", "duplicate_in_chunk")]


def test_leading_timestamp_stripped_without_timestamp_mode():
    # v2/v3 outputs sometimes echo the input's time ranges: stripped, but not parsed (timestamps stays [])
    got = parse_steps("1. 0.00 -> 5.20: Boil water\n2. 0:12 Add tea\n3. 12.5 cups of flour")
    assert got.steps == ["Boil water", "Add tea", "12.5 cups of flour"]
    assert got.timestamps == []


@pytest.mark.parametrize(
    "token, seconds", [("12.3", 12.3), ("0:12", 12.0), ("1:23", 83.0), ("00:01:05", 65.0), ("1:00:00.5", 3600.5)]
)
def test_timestamp_seconds(token, seconds):
    assert timestamp_seconds(token) == pytest.approx(seconds)


def test_clean_step_direct():
    assert clean_step("  Step 3:   'Add   tea' ") == ("Add tea", None)
    assert clean_step("[0:10 - 0:20] Add tea", with_timestamps=True) == ("Add tea", 10.0)
    assert clean_step("from 0:10 to 0:20 add tea") == ("add tea", None)


def test_parsed_chunk_defaults():
    assert ParsedChunk() == ParsedChunk(steps=[], dropped=[], parse_mode="none", timestamps=[])


@pytest.mark.parametrize(
    "k, size, expected",
    [
        (0, 10, []),
        (1, 10, [(0, 0)]),
        (10, 10, [(0, 9)]),
        (11, 10, [(0, 9), (10, 10)]),
        (23, 10, [(0, 9), (10, 19), (20, 22)]),
        (7, 3, [(0, 2), (3, 5), (6, 6)]),
    ],
)
def test_chunk_ranges(k, size, expected):
    assert chunk_ranges(k, size) == expected


def test_chunk_ranges_default_and_bad_size():
    assert chunk_ranges(25) == [(0, 9), (10, 19), (20, 24)]
    with pytest.raises(ValueError):
        chunk_ranges(5, 0)


@pytest.mark.parametrize(
    "first, last, expected",
    [(0, 9, [(0, 4), (5, 9)]), (10, 12, [(10, 11), (12, 12)]), (3, 4, [(3, 3), (4, 4)]), (5, 5, [(5, 5)])],
)
def test_halve_ranges(first, last, expected):
    assert halve_ranges(first, last) == expected


def test_halve_ranges_empty():
    with pytest.raises(ValueError):
        halve_ranges(4, 3)


def test_split_to_budget_recursive():
    # "fits" when at most 3 sentences: [0, 9] -> [0,4] [5,9] -> [0,2] [3,4] [5,7] [8,9]
    assert split_to_budget(0, 9, lambda a, b: b - a + 1 <= 3) == [(0, 2), (3, 4), (5, 7), (8, 9)]
    assert split_to_budget(0, 9, lambda a, b: True) == [(0, 9)]
    assert split_to_budget(0, 2, lambda a, b: False) == [(0, 0), (1, 1), (2, 2)]
