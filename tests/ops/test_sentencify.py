"""builders.ops.sentencify: TAN cleaning (spec howtostep.md §3.2 (b)-(f)) and sentencification, by hand-computed
examples and on the real timed ASR transcripts of ../shared/data/showhowto (entries 0-2, ids showhowto_0..2)."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import pytest

from builders.ops.sentencify import (
    MIN_MERGED_CAPTIONS,
    drop_bad_timestamps,
    ends_sentence,
    is_punctuated,
    narrations_from_transcript,
    sentencify_no_punct,
    sentencify_punctuated,
    tan_clean_raw_captions,
    tan_length_ok,
    word_stream,
)

NAN = float("nan")


def _clean(caps):
    return tan_clean_raw_captions([t for t, _, _ in caps], [s for _, s, _ in caps], [e for _, _, e in caps])


def _words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


@pytest.fixture(scope="module")
def real_segments(shared_data):
    """Entries 0-2 of showhowto_asr_examples.json as ``(text, start, end)`` segments."""
    items = json.loads((shared_data / "showhowto" / "showhowto_asr_examples.json").read_text(encoding="utf-8"))
    return [[(s["text"], s["start"], s["end"]) for s in item["transcript"]] for item in items[:3]]


# --------------------------------------------------------------------------------------------- (b) and (c)


def test_length_filter_b():
    six = "one two three four five six"
    assert tan_length_ok([six] * 11)
    assert not tan_length_ok([six] * 10)  # not more than 10 captions
    assert not tan_length_ok(["one two three four five"] * 11)  # mean 5 is not > 5
    assert tan_length_ok(["one two three four five"] * 10 + ["one two three four five six seven eight"])  # 5.27


def test_clean_c_duration_empty_and_tags():
    caps = [
        ("keep me", 0.0, 1.0),
        ("exactly point two", 1.0, 1.2 + 0.0),  # 0.19999... <= 0.2
        ("boundary", 0.0, 0.2),  # 0.2 - 0.0 == 0.2 exactly: dropped (<= 0.2)
        ("quarter", 2.0, 2.25),  # 0.25 > 0.2: kept
        ("", 3.0, 4.0),
        ("  \n ", 4.0, 5.0),
        ("[Music]", 5.0, 6.0),
        ("a [b only", 6.0, 7.0),  # '[' without ']': kept
        ("nan time", NAN, 8.0),
    ]
    out, counts = _clean(caps)
    assert out == [("keep me", 0.0, 1.0), ("quarter", 2.0, 2.25), ("a [b only", 6.0, 7.0)]
    assert counts == Counter(caption_too_short=2, caption_empty=2, caption_tag=1, bad_timestamp=1)


# --------------------------------------------------------------------------------------------- (d) and (e)


def test_clean_d_rolling_linebreak_duplicates_then_e_overlaps():
    caps = [
        ("how to make\npancakes today", 0.0, 3.0),
        ("pancakes today\nfirst take the flour", 2.0, 5.0),
        ("first take the flour\nand the eggs", 4.0, 7.0),
        ("and the eggs\nin a bowl", 6.0, 9.0),  # last caption: no next, lines joined
    ]
    out, counts = _clean(caps)
    # (d): each repeated last line dropped; (e): starts 2, 4, 6 < ends 3, 5, 7 -> both set to 2.5, 4.5, 6.5
    assert out == [("how to make", 0.0, 2.5), ("pancakes today", 2.5, 4.5), ("first take the flour", 4.5, 6.5),
                   ("and the eggs in a bowl", 6.5, 9.0)]
    assert counts == Counter(linebreak_duplicate=3, overlap_averaged=3)


def test_clean_d_linebreak_without_repeat_is_joined():
    out, counts = _clean([("x\n\ny", 0.0, 1.0), ("z", 1.0, 2.0)])
    assert out == [("x y", 0.0, 1.0), ("z", 1.0, 2.0)]
    assert counts == Counter()


def test_clean_d_prefix_runs_merge():
    caps = [("add the", 0.0, 1.0), ("add the salt", 1.0, 2.0), ("add the salt and pepper", 2.0, 3.0),
            ("stir well", 3.0, 4.0), ("stir", 4.0, 5.0), ("stir", 5.0, 6.0)]
    out, counts = _clean(caps)
    # run 0-2 -> first start 0, last end 3, last text; "stir" is not a prefix-extension of "stir well";
    # "stir" + "stir" (equal) merge
    assert out == [("add the salt and pepper", 0.0, 3.0), ("stir well", 3.0, 4.0), ("stir", 4.0, 6.0)]
    assert counts == Counter(prefix_merged=3)


def test_clean_d_linebreak_then_prefix_merge_on_youtube_rolling_captions():
    caps = [("so today", 0.0, 1.0), ("so today we make\nbread", 0.5, 2.0), ("bread\nwith yeast", 1.5, 3.0)]
    out, counts = _clean(caps)
    # linebreak: "bread" repeats -> "so today we make"; "so today" is a prefix -> merged run [0, 2];
    # overlap: 1.5 < 2.0 -> 1.75
    assert out == [("so today we make", 0.0, 1.75), ("bread with yeast", 1.75, 3.0)]
    assert counts == Counter(linebreak_duplicate=1, prefix_merged=1, overlap_averaged=1)


def test_clean_e_overlap_uses_original_values():
    out, counts = _clean([("a", 0.0, 5.0), ("b", 1.0, 3.0), ("c", 2.0, 6.0)])
    # pair 0/1: (5 + 1) / 2 = 3; pair 1/2: (3 + 2) / 2 = 2.5 (original end 3): as TAN, "b" ends before it starts
    assert out == [("a", 0.0, 3.0), ("b", 3.0, 2.5), ("c", 2.5, 6.0)]
    assert counts["overlap_averaged"] == 2
    assert drop_bad_timestamps(out) == ([("a", 0.0, 3.0), ("c", 2.5, 6.0)], 1)


def test_clean_rejects_unequal_lists():
    with pytest.raises(ValueError):
        tan_clean_raw_captions(["a"], [0.0, 1.0], [1.0])


# --------------------------------------------------------------------------------------------- word streams


def test_is_punctuated():
    assert is_punctuated(["a, b", "c", "d.", "e"])  # 2 of 4 = 50 %
    assert not is_punctuated(["a,", "b", "c"])
    assert not is_punctuated(["what?", "yes!"])  # only ',' and '.' count
    assert not is_punctuated([])


def test_word_stream_linear_slots_and_whisperx_words():
    segs = [("one two three four", 0.0, 4.0), ("It costs $5 today.", 10.0, 14.0), ("$5 now", 20.0, 23.0),
            ("a b c", 30.0, 34.0)]
    words = [
        None,  # no words: equal slots of 1 s
        [("It", 10.0, 10.5), ("costs", 10.6, 11.0), ("$5", None, None), ("today.", 12.0, 13.0)],
        [(" $5", None, None), ("now", 21.0, 22.0)],  # leading untimed: [segment start, next timed start]
        [("a", 30.0, 31.0), ("b", 31.5, None), ("c", NAN, None)],  # half-timed words count as untimed
    ]
    assert word_stream(segs, words) == [
        ("one", 0.0, 1.0), ("two", 1.0, 2.0), ("three", 2.0, 3.0), ("four", 3.0, 4.0),
        ("It", 10.0, 10.5), ("costs", 10.6, 11.0), ("$5", 11.0, 12.0), ("today.", 12.0, 13.0),
        ("$5", 20.0, 21.0), ("now", 21.0, 22.0),
        ("a", 30.0, 31.0), ("b", 31.0, 32.5), ("c", 32.5, 34.0),  # trailing untimed: [31, segment end 34]
    ]


def test_word_stream_empty_word_list_falls_back_to_text():
    assert word_stream([("x y", 0.0, 2.0)], [[]]) == [("x", 0.0, 1.0), ("y", 1.0, 2.0)]
    assert word_stream([("x y", 0.0, 2.0)], [[("  ", 0.0, 1.0)]]) == [("x", 0.0, 1.0), ("y", 1.0, 2.0)]


def test_sentencify_punctuated_cuts_on_word_endings_only():
    text = 'Add 1.5 cups of flour. Mix well! Is it done? "Yes." (really.) ok'
    out = sentencify_punctuated(word_stream([(text, 0.0, 13.0)]))  # 13 words, 1 s each
    assert out == [("Add 1.5 cups of flour.", 0.0, 5.0), ("Mix well!", 5.0, 7.0), ("Is it done?", 7.0, 10.0),
                   ('"Yes."', 10.0, 11.0), ("(really.)", 11.0, 12.0), ("ok", 12.0, 13.0)]
    assert not ends_sentence("1.5") and not ends_sentence("detailking.com,") and ends_sentence("done?”")


def test_sentencify_punctuated_across_segments():
    words = word_stream([("Put the pan", 0.0, 3.0), ("on the stove. Heat it", 3.0, 8.0), ("up.", 8.0, 9.0)])
    assert sentencify_punctuated(words) == [("Put the pan on the stove.", 0.0, 6.0), ("Heat it up.", 6.0, 9.0)]


# --------------------------------------------------------------------------------------------- no_punct_fallback


def test_no_punct_gap_cut():
    assert sentencify_no_punct([("a b c", 0.0, 3.0), ("d e", 4.5, 6.5)]) == [("a b c", 0.0, 3.0), ("d e", 4.5, 6.5)]
    # a gap of exactly 1.0 s is not > 1.0
    assert sentencify_no_punct([("a b", 0.0, 2.0), ("c", 3.0, 4.0)]) == [("a b c", 0.0, 4.0)]


def test_no_punct_caption_boundary_cut_at_20_words():
    caps = [(_words(12, "a"), 0.0, 12.0), (_words(8, "b"), 12.0, 20.0), ("x y", 20.0, 22.0)]
    assert sentencify_no_punct(caps) == [(_words(12, "a") + " " + _words(8, "b"), 0.0, 20.0), ("x y", 20.0, 22.0)]
    caps = [(_words(19, "a"), 0.0, 19.0), ("x y", 19.0, 21.0)]  # 19 buffered: no cut
    assert sentencify_no_punct(caps) == [(_words(19, "a") + " x y", 0.0, 21.0)]


def test_no_punct_hard_cut_at_40_words():
    out = sentencify_no_punct([(_words(50), 0.0, 50.0)])
    assert out == [(_words(40), 0.0, 40.0), (" ".join(f"w{i}" for i in range(40, 50)), 40.0, 50.0)]
    # 15 words buffered at the boundary (< 20): caption 2 fills the buffer to 40 at its 25th word
    out = sentencify_no_punct([(_words(15, "a"), 0.0, 15.0), (_words(30, "b"), 15.0, 45.0)])
    assert [(len(t.split()), s, e) for t, s, e in out] == [(40, 0.0, 40.0), (5, 40.0, 45.0)]


def test_no_punct_on_real_unpunctuated_transcript(real_segments):
    table = str.maketrans("", "", ",.?!")
    caps = [(t.translate(table).lower(), s, e) for t, s, e in real_segments[1]]
    out = sentencify_no_punct(caps)
    # by hand: segments 0+1 (18 + 21 words) then the 5.85 s gap; segments 2+3 (18 + 10) reach >= 20 at a boundary
    assert (len(out[0][0].split()), out[0][1], out[0][2]) == (39, 0.17, 11.84)
    assert out[0][0].startswith("cleaning your tires properly requires")
    assert (len(out[1][0].split()), out[1][1], out[1][2]) == (28, 17.69, 25.17)
    assert all(len(t.split()) <= 40 for t, _, _ in out)
    assert sum(len(t.split()) for t, _, _ in out) == sum(len(t.split()) for t, _, _ in caps)
    assert all(b[1] >= a[2] for a, b in itertools.pairwise(out))


# --------------------------------------------------------------------------------------------- timestamps


def test_drop_bad_timestamps():
    sents = [(" ok ", 0, 1), ("nan", NAN, 1.0), ("neg", -1.0, 2.0), ("rev", 3.0, 2.0), ("  ", 0.0, 1.0),
             ("inf", 0.0, math.inf), ("zero", 2.0, 2.0), ("none", None, 1.0)]
    assert drop_bad_timestamps(sents) == ([("ok", 0.0, 1.0), ("zero", 2.0, 2.0)], 5)


# --------------------------------------------------------------------------------------------- real transcripts


@pytest.mark.parametrize("index, count, first, last", [
    (0, 33, ("Hey little muffins, today we will make together a super easy, quick and delicious apple turnovers.",
             0.87, 7.79), ("Bye guys!", 215.49, 216.03)),
    (1, 24, ("Cleaning your tires properly requires more than just using car wash soap and then rinsing it down.",
             0.17, 5.42), ("We'll see you guys next time.", 222.94, 223.84)),
    (2, 47, ("Hi, it's Matthew in his pressure cooker again.", 0.504, 2.605), ("Bye.", 134.697, 135.037)),
])
def test_real_whisper_segments(real_segments, index, count, first, last):
    """showhowto_<index>: every Whisper segment there ends one sentence (read from the file), so N = segments."""
    result = narrations_from_transcript("segments", real_segments[index])
    assert result.reason is None and result.sentencify_mode == "punctuated"
    sents = result.sentences
    assert len(sents) == count == result.counters["narrations"]
    assert sents[0] == pytest.approx(first) and sents[0][0] == first[0]
    assert sents[-1][0] == last[0] and sents[-1][1:] == pytest.approx(last[1:])
    assert all(ends_sentence(t) for t, _, _ in sents)
    assert all(s <= e for _, s, e in sents) and all(b[1] >= a[2] for a, b in itertools.pairwise(sents))
    if index == 0:
        assert sents[21][0] == "We will bake the apple turnovers at 180°C in about 18-20 minutes until golden."


def test_real_segments_joined_are_cut_by_word_slots(real_segments):
    (t1, s1, _), (t2, _, e2) = real_segments[0][1], real_segments[0][2]
    # "40 minutes for all the process." (6 words) + "Seriously, can someone deny them?" (5 words) over [7.79, 11.95]
    out = sentencify_punctuated(word_stream([(f"{t1} {t2}", s1, e2)]))
    assert [t for t, _, _ in out] == [t1, t2]
    assert out[0][1:] == pytest.approx((7.79, 7.79 + 6 * (11.95 - 7.79) / 11))
    assert out[1][1:] == pytest.approx((7.79 + 6 * (11.95 - 7.79) / 11, 11.95))


# --------------------------------------------------------------------------------------------- whole flow


def _htm_raw_captions() -> list[tuple[str, float, float]]:
    """12 unpunctuated 6-word captions in pairs (caption i at 2i + 2(i // 2)): pairs are 2 s apart, plus a tag,
    a 0.1 s glitch and a rolling duplicate inside the first pair."""
    caps = [(_words(6, f"c{i}_"), 2.0 * i + 2.0 * (i // 2), 2.0 * i + 2.0 * (i // 2) + 2.0) for i in range(12)]
    caps.insert(1, ("[Music]", 1.0, 2.0))
    caps.insert(2, ("glitch", 2.0, 2.1))
    caps[0] = (caps[0][0] + "\n" + "c1_0 c1_1", 0.0, 2.0)  # its last line repeats as the next kept caption's start
    caps[3] = ("c1_0 c1_1\n" + caps[3][0].split(" ", 2)[2], 2.0, 4.0)
    return caps


def test_htm_raw_flow_no_punct_fallback():
    checked = []
    result = narrations_from_transcript("htm_raw", _htm_raw_captions(),
                                        english_check=lambda texts: checked.append(len(texts)) or (True, 1.0))
    assert checked == [14]  # (a) on the 14 raw captions
    assert result.reason is None and result.sentencify_mode == "no_punct_fallback"
    # the pairs (12 words each) are cut by the 2 s gaps; caption 0 lost its duplicated line "c1_0 c1_1" and
    # caption 1 kept only its first line "c1_0 c1_1" + the rest of its 6 words
    assert [(len(t.split()), s, e) for t, s, e in result.sentences] == [
        (12, 0.0, 4.0), (12, 6.0, 10.0), (12, 12.0, 16.0), (12, 18.0, 22.0), (12, 24.0, 28.0), (12, 30.0, 34.0)]
    assert result.sentences[0][0] == _words(6, "c0_") + " " + _words(6, "c1_")
    assert result.counters == Counter(caption_tag=1, caption_too_short=1, linebreak_duplicate=1, narrations=6)
    sentences, counters, mode, reason = result  # unpacks as the plan's 4-tuple
    assert (sentences, counters, mode, reason) == (result.sentences, result.counters, result.mode, None)


def test_htm_raw_flow_reasons():
    caps = _htm_raw_captions()
    result = narrations_from_transcript("htm_raw", caps, english_check=lambda texts: (False, 0.2))
    assert (result.reason, result.detail) == ("not_english", "(a) on the raw captions: langdetect mean P(en) 0.200")
    assert result.sentences == [] and result.counters == Counter()  # (a) runs before any cleaning
    result = narrations_from_transcript("htm_raw", caps[:10])
    assert (result.reason, result.detail) == ("too_few_narrations", "(b) 10 captions, 5.2 words each")  # (8+1+1+7*6)/10
    tags = [("[Music] la la la la la", float(i), i + 1.0) for i in range(11)]
    assert narrations_from_transcript("htm_raw", tags).reason == "no_speech"  # all removed by (c)
    rolling = [(_words(3 + i), float(i), i + 1.0) for i in range(11)]  # each a prefix of the next: 1 caption
    result = narrations_from_transcript("htm_raw", rolling)
    assert result.reason == "too_few_narrations" and result.counters["prefix_merged"] == 10
    assert result.detail == "(f) 1 captions after cleaning <= 5"
    four = [(_words(6, f"c{i}_"), 4.0 * i, 4.0 * i + 2.0) for i in range(MIN_MERGED_CAPTIONS + 6)]
    result = narrations_from_transcript("htm_raw", four)  # 11 captions 2 s apart: 11 sentences
    assert result.reason is None and len(result.sentences) == 11
    assert narrations_from_transcript("htm_raw", [("", 0.0, 1.0)] * 12).reason == "no_speech"


def test_htm_raw_punctuated_captions_use_word_cuts():
    caps = [(f"step {i} is right here. and then some more", 9.0 * i, 9.0 * i + 9.0) for i in range(11)]
    result = narrations_from_transcript("htm_raw", caps)  # 9 words in 9 s: 1 s slots
    assert result.sentencify_mode == "punctuated" and result.reason is None
    assert result.sentences[0] == ("step 0 is right here.", 0.0, 5.0)
    assert result.sentences[1] == ("and then some more step 1 is right here.", 5.0, 14.0)
    assert len(result.sentences) == 12 and result.sentences[-1] == ("and then some more", 95.0, 99.0)


def test_whisperx_words_flow_and_language():
    segs = [(f"Step {i} now. Then wait.", 10.0 * i, 10.0 * i + 6.0) for i in range(3)]
    words = [[("Step", 10.0 * i, 10.0 * i + 1), (f"{i}", None, None), ("now.", 10.0 * i + 2, 10.0 * i + 3),
              ("Then", 10.0 * i + 4, 10.0 * i + 5), ("wait.", 10.0 * i + 5, 10.0 * i + 5.5)] for i in range(3)]
    result = narrations_from_transcript("whisperx", segs, words, language="en")
    assert result.sentencify_mode == "whisperx_words" and result.reason is None
    assert result.sentences[:2] == [("Step 0 now.", 0.0, 3.0), ("Then wait.", 4.0, 5.5)]
    assert len(result.sentences) == 6
    result = narrations_from_transcript("whisperx", segs, words, language="de")
    assert (result.reason, result.detail) == ("not_english", "WhisperX language 'de'")
    assert narrations_from_transcript("whisperx", segs, words, language="en_US").reason is None
    seen = []
    result = narrations_from_transcript("whisperx", segs, words, english_check=lambda t: seen.append(t) or False)
    assert result.reason == "not_english" and seen == [[t for t, _, _ in narrations_from_transcript(
        "whisperx", segs, words).sentences]]  # language absent: (a) on the sentences
    called = []
    narrations_from_transcript("whisperx", segs, words, language="en", english_check=lambda t: called.append(1))
    assert called == []  # the language field decides


def test_segments_bad_times_sentencified_and_no_speech(real_segments):
    segs = list(real_segments[2])
    segs[3] = (segs[3][0], NAN, segs[3][2])
    segs[4] = (segs[4][0], 20.0, 10.0)
    result = narrations_from_transcript("segments", segs)
    assert result.counters["bad_timestamp"] == 2 and len(result.sentences) == 45
    result = narrations_from_transcript("sentencified", [("  a  ", 0.0, 1.0)] * 5 + [("b", 2.0, NAN)])
    assert result.sentencify_mode == "sentencified" and result.sentences == [("a", 0.0, 1.0)] * 5
    assert result.counters["bad_timestamp"] == 1
    result = narrations_from_transcript("sentencified", [("a.", 0.0, 1.0)] * 4)
    assert (result.reason, result.detail) == ("too_few_narrations", "4 sentences < 5")
    assert narrations_from_transcript("sentencified", [("a.", 0.0, 1.0)] * 4, min_narrations=4).reason is None
    assert narrations_from_transcript("asr", [(" ", 0.0, 1.0)]).reason == "no_speech"
    assert narrations_from_transcript("segments", []).reason == "no_speech"
    with pytest.raises(ValueError):
        narrations_from_transcript("srt", segs)
