"""loading_scripts.marc: the MARC release schemas (marc.md §4)."""

from __future__ import annotations

import pytest

from loading_scripts import marc


def test_configs_and_shared_pairwise_schema():
    assert set(marc.CONFIG_FEATURES) == {"recipes", "pairwise_text_text", "pairwise_text_video",
                                         "pairwise_video_video", "joint", "paraphrases", "multi_step_breakdown",
                                         "chat_content"}
    assert marc.features("pairwise_text_text") is marc.features("pairwise_video_video")
    assert all(marc.SPLITS[c] == ["train", "validation", "test"] for c in marc.CONFIG_FEATURES)
    assert marc.DEFAULT_CONFIG == "recipes"


def test_class_labels_and_alignment_entries():
    recipes = marc.features("recipes")
    assert recipes["modality"].names == ["text", "video"]
    assert recipes["source"]["extraction"].names == ["json-ld", "microdata", "conllu", "transcript"]
    align = marc.features("pairwise_text_video")["a_to_b"].feature
    assert set(align) == {"target_index", "probability", "top_indices", "top_probabilities"}
    assert marc.features("paraphrases")["directions"].names == ["a_to_b", "b_to_a", "both"]
    row = {"video_id": "v", "recipe_type": "101", "sentence": "crack eggs", "start": 1.0, "end": 2.0, "label": 1}
    assert marc.features("chat_content").encode_example(row)["label"] == 1


def test_unknown_config_is_an_error():
    with pytest.raises(ValueError, match="unknown marc config"):
        marc.features("pairwise")
