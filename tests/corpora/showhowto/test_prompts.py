"""The two ShowHowTo prompts (spec showhowto.md §5) rendered with the real fixture transcripts
(``../shared/data/showhowto/showhowto_asr_examples.json``): layout, the filter's 1503-character transcript cut, the
four filter examples, the key-step block ending in the opened fence, versions and user templates."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from builders.corpora.showhowto.prompts import (
    FILTER_PROMPT_ID,
    KEYSTEPS_PROMPT_ID,
    filter_message,
    keysteps_message,
    load_prompt,
    text_version,
)
from builders.ops.keystep_parsing import parse_keysteps


@pytest.fixture(scope="module")
def fixture(shared_data: Path) -> list[dict]:
    return json.loads((shared_data / "showhowto" / "showhowto_asr_examples.json").read_text())


def segments(rec: dict) -> list[dict]:
    t = rec["transcript"]
    return t if isinstance(t, list) else ast.literal_eval(t)


def test_filter_prompt_quotes_the_cut_transcript(fixture):
    prompt = load_prompt(FILTER_PROMPT_ID)
    for rec in [r for r in fixture if "transcript" in r]:
        [msg] = filter_message(prompt, rec["title"], segments(rec))
        text = msg["content"]
        m = re.search(r'Now the video to judge\.\nTitle: "(.*)"\nVideo Transcript: "(.*)"\nQuestion: (.*)\nAnswer:$',
                      text, re.DOTALL)
        assert m and m.group(1) == rec["title"]
        assert len(m.group(2)) == 1503 and m.group(2).endswith("...")  # spec §5 fixture check
        assert m.group(3) == "Is this video actively demonstrating or teaching how to perform a specific task?"
        assert msg["role"] == "user"


def test_the_four_filter_examples_render(fixture):
    """The fixture's four upstream filter examples (title + transcript text) go through the same query block."""
    prompt = load_prompt(FILTER_PROMPT_ID)
    examples = [r for r in fixture if r["source"] == "filter_fewshot"]
    assert len(examples) == 4
    for rec in examples:
        seg = [{"start": 0.0, "end": 10.0, "text": rec["transcript_text"]}]
        [msg] = filter_message(prompt, rec["title"], seg)
        assert msg["content"].count(rec["title"]) == 1 and rec["transcript_text"][:200] in msg["content"]
    # the packaged prompt's own examples: 3 + 3 titles, 4 worked examples with Yes/No and an explanation each
    assert len(re.findall(r"^Answer: (Yes|No)$", prompt.text, re.MULTILINE)) == 4
    assert len(re.findall(r"^Explanation: ", prompt.text, re.MULTILINE)) == 4


def test_keysteps_prompt_block_and_fence(fixture):
    prompt = load_prompt(KEYSTEPS_PROMPT_ID)
    rec = fixture[2]
    segs = segments(rec)
    [msg] = keysteps_message(prompt, rec["title"], segs)
    text = msg["content"]
    assert text.endswith("Extracted Steps:\n```json")
    query = text.split("Now, extract the steps from the following transcript:\n", 1)[1]
    assert query.startswith(f"Title: {rec['title']}\n[start of transcript]\n")
    first = segs[0]
    assert f'{first["start"]:.2f} - {first["end"]:.2f}: "{first["text"]}"' in query
    assert query.count("\n") == len(segs) + 4  # title, start, one line per segment, end, Extracted Steps:, fence


def test_packaged_examples_parse_with_the_real_parser():
    """The key-step prompt's own two worked answers are what the parser accepts (6 steps each)."""
    text = load_prompt(KEYSTEPS_PROMPT_ID).text
    answers = re.findall(r"```json\n(.*?)\n```", text, re.DOTALL)
    assert [len(parse_keysteps(a).steps) for a in answers] == [6, 6]


def test_versions_and_user_templates(tmp_path):
    p = load_prompt(KEYSTEPS_PROMPT_ID)
    assert p.version == text_version(p.text) and len(p.version) == 12
    user = tmp_path / "authors.txt"
    user.write_text("Partial Video Transcript Segment:\n{transcript}\nTitle: {title}\n")
    q = load_prompt(KEYSTEPS_PROMPT_ID, user)
    assert q.id == "keysteps_v1+file:authors.txt" and q.version != p.version
    [msg] = keysteps_message(q, "T", [{"start": 0.0, "end": 1.0, "text": " x"}])
    assert msg["content"] == ('Partial Video Transcript Segment:\n[start of transcript]\n0.00 - 1.00: " x"\n'
                              "[end of transcript]\nTitle: T")


def test_constrained_shape_accepts_the_reference_lists(fixture):
    """The regex of SmolLM2's guided decoding and the vLLM schema bound the steps; the fixture's two reference step
    lists (11 and 8 steps, as JSON) match the regex with the paper's 26-step bound, not with a 4-step one."""
    import regex

    from builders.corpora.showhowto.prompts import keysteps_regex, keysteps_schema

    refs = [r["llm_steps_reference"] for r in fixture if r.get("llm_steps_reference") not in (None, "None")]
    refs = [json.dumps(r if not isinstance(r, str) else ast.literal_eval(r)) for r in refs]
    assert len(refs) == 2
    assert all(regex.fullmatch(keysteps_regex(26), r) for r in refs)
    assert not any(regex.fullmatch(keysteps_regex(4), r) for r in refs)
    assert all(regex.fullmatch(keysteps_regex(4), r[:60], partial=True) for r in refs)
    assert keysteps_schema(4)["prefixItems"][1]["properties"]["steps"]["maxItems"] == 4
