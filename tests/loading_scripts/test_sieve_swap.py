from __future__ import annotations

from datasets import ClassLabel, List, Value

from loading_scripts import sieve_swap as schema


def test_features_follow_spec_section_4():
    d = schema.FEATURES["default"]
    assert list(d) == ["video_id", "title", "title_source", "task_id", "task_name", "category_1", "category_2",
                       "duration", "duration_source", "asr_source", "recipe_ids", "recipe_token_iou",
                       "recipe_token_recall", "max_token_iou", "num_asr_segments", "segments", "provenance"]
    assert d["title_source"] == ClassLabel(names=["youtube_title", "task_name"])
    assert d["duration_source"] == ClassLabel(names=["metadata", "asr_last_end"])
    assert d["asr_source"] == ClassLabel(names=["howto100m_raw_caption", "whisperx"])
    assert d["recipe_ids"] == List(Value("int64")) and d["duration"] == Value("float32")
    seg = d["segments"].feature
    assert list(seg) == ["start", "end", "text", "recipe_id", "step_index", "similarity", "candidates", "asr_text",
                         "num_merged"]
    assert list(seg["candidates"].feature) == ["text", "recipe_id", "step_index", "similarity"]
    assert d["provenance"]["top_k"] == Value("int32")
    assert list(schema.FEATURES["raw_asr"]) == ["video_id", "duration", "asr_source", "segments"]
    r = schema.FEATURES["recipes"]
    assert r["source"] == ClassLabel(names=["Gathered", "Recipes1M"]) and r["num_segments_top1"] == Value("int32")
    assert schema.SPLITS == {"default": ["train", "validation"], "raw_asr": ["train", "validation"],
                             "recipes": ["train"]}
    assert schema.DEFAULT_CONFIG == "default"


def test_to_yc2_format():
    row = {"video_id": "abc", "duration": 61.5, "segments": [
        {"start": 0.87, "end": 7.79, "text": "Preheat the oven to 350°F.", "asr_text": "so preheat your oven",
         "candidates": [{"text": "Preheat the oven to 350°F."}, {"text": "Don't burn it!"}]}]}
    assert schema.to_yc2_format([row]) == {"abc": {"duration": 61.5, "timestamps": [[0.87, 7.79]],
                                                   "sentences": [["preheat the oven to 350°f .", "do n't burn it !"]]}}
    assert schema.to_yc2_format([row], raw=True)["abc"]["sentences"] == ["so preheat your oven"]
