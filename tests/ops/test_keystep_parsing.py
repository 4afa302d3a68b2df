"""ShowHowTo LLM text (spec showhowto.md §5, §10): transcript renderings on the real fixture, the Yes/No parser table,
robust key-step JSON parsing, and validation."""

from __future__ import annotations

import json
import pickle

import pytest

from builders.ops.keystep_parsing import (
    Failure,
    KeyStep,
    ParsedSteps,
    parse_filter_answer,
    parse_keysteps,
    render_transcript_block,
    render_transcript_text,
    validate_keysteps,
)


@pytest.fixture(scope="module")
def examples(request) -> list[dict]:
    path = request.getfixturevalue("shared_data") / "showhowto" / "showhowto_asr_examples.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _step(i: str, s, e) -> dict:
    return {"instruction": i, "start_timestamp": s, "end_timestamp": e}


def _canonical(steps: list[dict], title: str = "How to Test") -> str:
    return json.dumps([{"WikiHow Title": title}, {"steps": steps}])


TWO = [_step("Cut the apples.", 1.0, 2.0), _step("Bake them.", 3.0, 4.5)]


# ------------------------------------------------------------------------------------------- fixture checks


def test_fixture_transcripts_render_to_1503_characters(examples):
    keyed = [r for r in examples if "transcript" in r]
    assert [r["source"] for r in keyed] == ["keystep_fewshot", "keystep_fewshot", "__main__example"]
    joined = [len(" ".join(s["text"] for s in r["transcript"])) for r in keyed]
    assert joined == [1710, 2895, 2148]
    # the spec rounds to 2 decimals (135.037 in the file); all end at or before 400 s: no long bonus
    assert [r["transcript"][-1]["end"] for r in keyed] == pytest.approx([216.03, 223.84, 135.04], abs=0.005)
    for r in keyed:
        text = render_transcript_text(r["transcript"])
        assert len(text) == 1503 and text.endswith("...")
        assert text[:1500] == " ".join(s["text"] for s in r["transcript"])[:1500]


def test_fixture_reference_steps_parse_and_validate(examples):
    refs = [r for r in examples if r.get("llm_steps_reference")]
    assert len(refs) == 2
    counts = []
    for r in refs:
        parsed = parse_keysteps(json.dumps(r["llm_steps_reference"]))
        assert isinstance(parsed, ParsedSteps) and not parsed.parse_repaired
        assert parsed.wikihow_title == r["llm_steps_reference"][0]["WikiHow Title"]
        last = r["transcript"][-1]["end"]
        assert validate_keysteps(parsed.steps, None, None, last_segment_end=last) is None
        counts.append(len(parsed.steps))
    assert counts == [11, 8]
    # upstream example 2 skips step 5: numbers are ignored, the 8 steps are kept in list order (renumbered 0..7)
    numbers = [s["step"] for s in refs[1]["llm_steps_reference"][1]["steps"]]
    assert 5 not in numbers and len(numbers) == 8
    parsed = parse_keysteps(json.dumps(refs[1]["llm_steps_reference"]))
    assert [s.instruction for s in parsed.steps] == [
        s["instruction"].strip() for s in refs[1]["llm_steps_reference"][1]["steps"]]


def test_fixture_reference_steps_inside_a_completion(examples):
    """As the model writes them after the prompt's opened ```json fence: JSON, closing fence, trailing chatter."""
    ref = next(r for r in examples if r.get("llm_steps_reference"))
    completion = "\n" + json.dumps(ref["llm_steps_reference"], indent=4) + "\n```\nI hope this helps! [1]"
    parsed = parse_keysteps(completion)
    assert isinstance(parsed, ParsedSteps) and len(parsed.steps) == 11 and not parsed.parse_repaired


def test_fixture_filter_examples_render(examples):
    fewshot = [r for r in examples if r["source"] == "filter_fewshot"]
    assert len(fewshot) == 4 and sorted(r["instructional"] for r in fewshot) == [False, False, True, True]
    for r in fewshot:
        text = render_transcript_text([{"start": 0.0, "end": 10.0, "text": r["transcript_text"]}])
        assert text == r["transcript_text"] and len(text) <= 1500


def test_transcript_block_layout(examples):
    tyres = examples[1]["transcript"]
    block = render_transcript_block(tyres[:2]).split("\n")
    assert block[0] == "[start of transcript]" and block[-1] == "[end of transcript]"
    assert block[1] == ('0.17 - 5.42: " Cleaning your tires properly requires more than just using car wash soap and '
                        'then rinsing it down."')  # leading space kept verbatim
    assert len(render_transcript_block(tyres).split("\n")) == len(tyres) + 2
    assert render_transcript_block([{"start": 1, "end": 2.005, "text": "x"}]).split("\n")[1] == '1.00 - 2.00: "x"'
    assert render_transcript_block([]) == "[start of transcript]\n[end of transcript]"


# ------------------------------------------------------------------------------------------- transcript text


def test_render_transcript_text_limits():
    def seg(text: str, end: float) -> dict:
        return {"start": 0.0, "end": end, "text": text}

    assert render_transcript_text([seg("a" * 1500, 10.0)]) == "a" * 1500  # at the limit: no cut
    assert render_transcript_text([seg("a" * 1501, 10.0)]) == "a" * 1500 + "..."
    long = [seg("b" * 3000, 100.0), seg("c" * 1000, 400.01)]  # last ends after 400 s: limit 3500
    out = render_transcript_text(long)
    assert len(out) == 3503 and out.endswith("c" * 499 + "...")
    assert len(render_transcript_text([seg("b" * 3000, 500.0), seg("c" * 1000, 400.0)])) == 1503  # strict >, last
    assert render_transcript_text([seg(" Hi", 1.0), seg(" there ", 2.0)]) == " Hi  there "  # no stripping
    assert render_transcript_text([]) == ""
    assert len(render_transcript_text([seg("x" * 900, 1.0)], base_limit=100, long_bonus=0)) == 103


# ------------------------------------------------------------------------------------------- Yes/No parser


@pytest.mark.parametrize("text, answer", [
    ("Yes", "yes"),
    ("no.", "no"),
    ("**Yes** - the host shows…", "yes"),
    ("Answer: No", "no"),
    ("It is not clear", "ambiguous"),
    ("Yes or no? No", "ambiguous"),
    # beyond the spec's table
    ("  > 'YES', the video demonstrates it", "yes"),
    ("# No\nExplanation: a product review", "no"),
    ("Nope", "ambiguous"),                                   # "no" followed by a letter
    ("Yesterday I cooked", "ambiguous"),
    ("The answer is yes.\nExplanation: no tools are needed, but yes", "yes"),  # tokens after Explanation: ignored
    ("\u201cNo\u201d", "no"),
    ("", "ambiguous"),
    ("Explanation: yes", "ambiguous"),                       # nothing before the marker
])
def test_filter_parser_table(text, answer):
    assert parse_filter_answer(text)[0] == answer


def test_filter_explanation():
    assert parse_filter_answer("Yes\nExplanation: The host bakes bread.\nMore text") == (
        "yes", "The host bakes bread.")
    assert parse_filter_answer("No.\n**Explanation:**\n\n  It is a vlog.  \n") == ("no", "It is a vlog.")
    assert parse_filter_answer("Yes") == ("yes", "")


# ------------------------------------------------------------------------------------------- key-step parser


def test_canonical_dict_and_bare_shapes():
    p = parse_keysteps(_canonical(TWO))
    assert p == ParsedSteps("How to Test", [KeyStep("Cut the apples.", 1.0, 2.0), KeyStep("Bake them.", 3.0, 4.5)],
                            False)
    p = parse_keysteps(json.dumps({"WikiHow Title": "T", "steps": TWO}))
    assert p.wikihow_title == "T" and len(p.steps) == 2
    p = parse_keysteps(json.dumps({"steps": TWO}))
    assert p.wikihow_title is None and len(p.steps) == 2
    p = parse_keysteps(json.dumps(TWO))
    assert p.wikihow_title is None and [s.instruction for s in p.steps] == ["Cut the apples.", "Bake them."]


@pytest.mark.parametrize("completion", [
    "```json\n" + _canonical(TWO) + "\n```",                  # reopened fence
    "```\n" + _canonical(TWO) + "\n```\nDone.",
    "Sure! Here are the steps:\n```json\n" + _canonical(TWO) + "\n```",
    _canonical(TWO) + "\n```\n```json\n[{\"other\": 1}]\n```",  # a second block after the first fence is ignored
    "Extracted Steps:\n" + _canonical(TWO) + " trailing words } ]",
])
def test_fences_and_surrounding_text(completion):
    p = parse_keysteps(completion)
    assert isinstance(p, ParsedSteps) and len(p.steps) == 2 and not p.parse_repaired, p


def test_brackets_and_escapes_inside_strings():
    steps = [_step('Write "[x]" and {y} on the lid \\ then ] close it.', 0.0, 1.0), _step("Done }", 1.0, 2.0)]
    p = parse_keysteps(_canonical(steps) + "\n``` extra ]")
    assert isinstance(p, ParsedSteps) and not p.parse_repaired
    assert p.steps[0].instruction == 'Write "[x]" and {y} on the lid \\ then ] close it.'
    assert p.steps[1].instruction == "Done }"


_TRAILING_COMMAS = ('[{"WikiHow Title": "T"}, {"steps": [{"step": 1, "instruction": "Cut.", "start_timestamp": 1, '
                    '"end_timestamp": 2,}, {"instruction": "Bake.", "start_timestamp": 3, "end_timestamp": 4},]}]')
_SINGLE_QUOTES = ("[{'WikiHow Title': 'T'}, {'steps': [{'instruction': 'Cut.', 'start_timestamp': 1, 'end_timestamp': "
                  "2}, {'instruction': 'Bake.', 'start_timestamp': 3, 'end_timestamp': 4}]}]")
_CUT_SHORT = ('[{"WikiHow Title": "T"}, {"steps": [{"instruction": "Cut.", "start_timestamp": 1, "end_timestamp": 2}, '
              '{"instruction": "Bake.", "start_timestamp": 3, "end_timestamp": 4}')


@pytest.mark.parametrize("completion", [_TRAILING_COMMAS, _SINGLE_QUOTES, _CUT_SHORT])
def test_repaired_json(completion):
    p = parse_keysteps(completion)
    assert isinstance(p, ParsedSteps), p
    assert p.parse_repaired and [s.instruction for s in p.steps] == ["Cut.", "Bake."]
    assert p.steps[1] == KeyStep("Bake.", 3.0, 4.0)


@pytest.mark.parametrize("completion, reason", [
    ("", "llm_no_json"),
    ("I cannot extract steps from this transcript.", "llm_no_json"),
    ("```json\n```", "llm_no_json"),
    ('"just a string"', "llm_no_json"),
    ("[1, 2, 3]", "llm_malformed"),
    ('{"title": "T"}', "llm_malformed"),
    ('[{"WikiHow Title": "T"}, {"steps": "none"}]', "llm_malformed"),
    ('[{"WikiHow Title": 3}, {"steps": []}]', "llm_malformed"),
    ('{"steps": [1, 2]}', "llm_malformed"),
    ('[{"WikiHow Title": "T"}]', "llm_malformed"),            # a bare list whose item is no step
    ("42", "llm_no_json"),
])
def test_wrong_shapes(completion, reason):
    f = parse_keysteps(completion)
    assert isinstance(f, Failure) and f == reason and f.reason == reason and f.detail, f


@pytest.mark.parametrize("start, end, ok", [
    (1, 2, True),
    ("1.5", " 2.25 ", True),                  # numeric strings float() accepts
    ("NaN", 2, False),
    (1, "inf", False),
    (float("nan"), 2, False),                 # json.dumps writes NaN, json.loads reads it
    (1, float("inf"), False),
    ("1:30", 2, False),
    (None, 2, False),
    (True, 2, False),
    ([1], 2, False),
])
def test_timestamps(start, end, ok):
    p = parse_keysteps(_canonical([_step("Cut.", start, end), _step("Bake.", 3, 4)]))
    if ok:
        assert isinstance(p, ParsedSteps) and p.steps[0].start == float(start) and p.steps[0].end == float(end)
    else:
        assert isinstance(p, Failure) and p == "llm_malformed", p


def test_missing_timestamp_and_empty_instruction():
    assert parse_keysteps(_canonical([{"instruction": "Cut.", "start_timestamp": 1}])) == "llm_malformed"
    for bad in ("", "   \n", None, 7):
        f = parse_keysteps(_canonical([_step("Cut.", 1, 2), {"instruction": bad, "start_timestamp": 3,
                                                               "end_timestamp": 4}]))
        assert f == "llm_malformed" and "instruction" in f.detail
    p = parse_keysteps(_canonical([_step("  Cut the bread.  ", 1, 2)]))
    assert p.steps[0].instruction == "Cut the bread."


def test_empty_step_list_parses_then_fails_validation():
    p = parse_keysteps(_canonical([]))
    assert isinstance(p, ParsedSteps) and p.steps == []
    assert validate_keysteps(p.steps, 60.0, 59.8) == "too_few_steps"


def test_failure_is_its_reason_string():
    f = Failure("llm_malformed", "step 2: empty instruction")
    assert f == "llm_malformed" and isinstance(f, str) and str(f) == "llm_malformed"
    assert f.detail == "step 2: empty instruction" and "step 2" in repr(f)
    g = pickle.loads(pickle.dumps(f))
    assert g == f and g.detail == f.detail and isinstance(g, Failure)


def test_parser_never_raises_on_junk():
    for text in ["[" * 5000, "{" + '"a":' * 300, "]]][[[", "```json", "\\", '["\\', "[{\"x\": 1e999}]",
                 "{\"steps\": [{\"instruction\": \"a\", \"start_timestamp\": 1e400, \"end_timestamp\": 2}]}"]:
        out = parse_keysteps(text)
        assert isinstance(out, (Failure, ParsedSteps))
        if isinstance(out, ParsedSteps):  # a (repaired) list of objects without steps would have failed
            assert out.steps == []


# ------------------------------------------------------------------------------------------- validation


def _steps(*pairs) -> list[KeyStep]:
    return [KeyStep(f"step {i}", float(s), float(e)) for i, (s, e) in enumerate(pairs)]


@pytest.mark.parametrize("pairs, duration, t_last, reason", [
    (((0, 5), (5, 10)), 60.0, 59.8, None),
    (((0, 5), (5, 60.8)), 60.0, 59.8, None),              # end within min(duration, t_last) + 1 s
    (((0, 5), (5, 60.81)), 60.0, 59.8, "steps_out_of_range"),
    (((0, 5), (59.8, 59.9)), 60.0, 59.8, "steps_out_of_range"),  # start must be < t_last
    (((0, 5), (5, 35.0)), 60.0, 33.0, "steps_out_of_range"),   # truncated video: t_last bounds the ends
    (((-1, 5), (5, 10)), 60.0, 59.8, "llm_malformed"),
    (((6, 5), (5, 10)), 60.0, 59.8, "llm_malformed"),
    (((0, 5), (float("nan"), 10)), 60.0, 59.8, "llm_malformed"),
    (((0, 5), (-1, 100)), 60.0, 59.8, "llm_malformed"),    # malformed is checked before range
    (((0, 5), (4, 10)), 60.0, 59.8, None),                 # overlapping steps are fine
    (((3, 5), (2, 10)), 60.0, 59.8, "steps_not_ordered"),
    (((0, 10), (2, 9)), 60.0, 59.8, "steps_not_ordered"),  # ends must be non-decreasing too
    (((0, 10), (2, 9)), 60.0, 5.0, "steps_out_of_range"),  # range is checked before order
    (((10, 20), (10, 20)), 60.0, 59.8, None),              # equal intervals: non-decreasing
    (((0, 5),), 60.0, 59.8, "too_few_steps"),
])
def test_validate(pairs, duration, t_last, reason):
    out = validate_keysteps(_steps(*pairs), duration, t_last)
    assert out == reason
    if reason is not None:
        assert isinstance(out, Failure) and out.detail


def test_validate_options_and_stand_ins():
    one = _steps((0, 5))
    assert validate_keysteps(one, 60.0, 59.8, min_steps=1) is None  # the paper kept 1-step sequences
    two = _steps((0, 5), (5, 30.5))
    assert validate_keysteps(two, None, None, last_segment_end=30.0) is None  # transcript only: +1 s tolerance
    assert validate_keysteps(two, None, None, last_segment_end=29.0) == "steps_out_of_range"
    assert validate_keysteps(_steps((0, 5), (30, 30)), None, None, last_segment_end=30.0) == "steps_out_of_range"
    assert validate_keysteps(two, None, None, tolerance=0.0, last_segment_end=30.0) == "steps_out_of_range"
    assert validate_keysteps(two, 29.6, None) is None                # one bound known: it stands in for both
    with pytest.raises(ValueError):
        validate_keysteps(two, None, None)
    assert validate_keysteps([("a", 0, 1), ("b", 1, 2)], 10.0, 9.8) is None  # plain tuples work too
