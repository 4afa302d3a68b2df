"""builders.corpora.howtostep.prompts: packaged prompt texts (spec ``howtostep.md`` §3.4, §4), rendering, templates."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from builders.corpora.howtostep.prompts import (
    DEFAULT_PROMPT_ID,
    PROMPTS,
    Prompt,
    input_words,
    load_prompt,
    messages_for,
    render_chunk,
    text_version,
    transcript_text,
)

V3 = (
    "I will give you an automatically recognized speech from a video segment that is cut from a long video. The"
    " speaker in the video is teaching the audience to do something. Your task is to summarize the key steps in"
    " order. Each step should be short and concise phrase. Do not output colloquial sentences in the speech."
    " Describe only one action per sentence. Output the numbered key steps. Here is this automatically recognized"
    " speech:"
)
V1 = (
    "I will give you an automatically recognized speech with timestamps from a video segment that is cut from a long"
    " video. Write a summary for this video segment. Write only short sentences. Describe only one action per"
    " sentence. Keep only actions that happen in the present time. Begin each sentence with an estimated timestamp."
    " Here is this automatically recognized speech:"
)
V2 = (
    "I will give you an automatically recognized speech with timestamps from a video segment that is cut from a long"
    " video. The speaker in the video is teaching the audience to do something. Your task is to summarize the key"
    " steps in order. Each step should be short and concise phrase. Do not output colloquial sentences in the"
    " speech. Output only the numbered key steps without timestamps. Here is this automatically recognized speech:"
)
MPTVA = (
    "I will give you the text narrations extracted from an instruction video. Your task is to summarize the"
    " procedure steps that are relevant to the task of the video from the inputs. Please filter colloquial"
    " sentences in the speech."
)
CHUNK = [("Today we make tea.", 0.5, 2.25), ("  First, boil the water. ", 2.25, 5.0)]


@pytest.mark.parametrize(
    "pid, text, flags",
    [
        ("howtostep_v3", V3, (True, False, False)),
        ("howtostep_v1_ts", V1, (False, True, True)),
        ("howtostep_v2_ts", V2, (True, True, False)),
        ("mptva", MPTVA, (False, False, False)),
    ],
)
def test_packaged_prompts_verbatim(pid, text, flags):
    p = PROMPTS[pid]
    assert p.id == pid
    assert p.text == text
    assert (p.numbered, p.timestamped_input, p.timestamped_output) == flags
    raw = (resources.files("builders.corpora.howtostep") / "prompts" / f"{pid}.txt").read_bytes()
    assert raw == text.encode("utf-8")  # no trailing newline: the file hash is the text hash
    assert p.version == hashlib.sha256(raw).hexdigest()[:12]


def test_prompt_set_and_default():
    assert set(PROMPTS) == {"howtostep_v3", "howtostep_v1_ts", "howtostep_v2_ts", "mptva"}
    assert DEFAULT_PROMPT_ID == "howtostep_v3"
    assert load_prompt() is PROMPTS["howtostep_v3"]


def test_version_stability():
    # pinned: a change of a packaged text changes its version (and so the LLM request-cache key) on purpose
    assert PROMPTS["howtostep_v3"].version == "ce59e2afa5e0"
    assert PROMPTS["howtostep_v1_ts"].version == "fe85dfa4b82b"
    assert PROMPTS["howtostep_v2_ts"].version == "9e7ec3830fb7"
    assert PROMPTS["mptva"].version == "6e15cec80182"
    assert text_version(V3) == PROMPTS["howtostep_v3"].version
    assert len({p.version for p in PROMPTS.values()}) == 4


def test_render_v3_exact():
    expected = V3 + "\nToday we make tea. First, boil the water."
    assert render_chunk(PROMPTS["howtostep_v3"], CHUNK) == expected
    assert messages_for(PROMPTS["howtostep_v3"], CHUNK) == [{"role": "user", "content": expected}]


def test_render_v1_ts_exact():
    expected = V1 + "\n0.50 -> 2.25: Today we make tea.\n2.25 -> 5.00: First, boil the water."
    assert render_chunk(PROMPTS["howtostep_v1_ts"], CHUNK) == expected


def test_render_mptva_and_v2():
    assert render_chunk(PROMPTS["mptva"], CHUNK) == MPTVA + "\nToday we make tea. First, boil the water."
    assert transcript_text(PROMPTS["howtostep_v2_ts"], CHUNK[:1]) == "0.50 -> 2.25: Today we make tea."


def test_input_words():
    assert input_words(CHUNK) == 8


def test_template_substitution(tmp_path):
    path = tmp_path / "my_prompt.txt"
    path.write_text("List the steps, numbered:\n", encoding="utf-8")
    p = load_prompt("howtostep_v1_ts", str(path))
    assert p == Prompt(
        id="howtostep_v1_ts+file:my_prompt.txt", text="List the steps, numbered:", numbered=False,
        timestamped_input=True, timestamped_output=True,
        version=hashlib.sha256(b"List the steps, numbered:").hexdigest()[:12],
    )
    assert render_chunk(p, CHUNK[:1]) == "List the steps, numbered:\n0.50 -> 2.25: Today we make tea."
    assert PROMPTS["howtostep_v1_ts"].text == V1  # the packaged prompt is untouched


def test_template_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown prompt_id"):
        load_prompt("howtostep_v4")
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        load_prompt("howtostep_v3", empty)
    with pytest.raises(ValueError, match="cannot be read"):
        load_prompt("howtostep_v3", tmp_path / "missing.txt")
