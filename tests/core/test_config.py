from __future__ import annotations

import pytest

from builders.core.config import ConfigError, apply_overrides, parse_sets, read_config_file
from builders.corpora.sieve_swap.config import EXTENDED_GENERIC_WORDS, SieveSwapConfig


def test_paper_defaults():
    cfg = SieveSwapConfig()
    assert (cfg.max_duration_s, cfg.min_videos_per_task) == (600.0, 5)
    assert (cfg.iou_threshold, cfg.recall_threshold, cfg.val_iou_threshold) == (0.1, 0.3, 0.2)
    assert (cfg.sim_threshold, cfg.top_k, cfg.retrieval_pool, cfg.embedding_model) == (0.75, 2, "global", "mpnet")
    assert (cfg.merge_max_dur_s, cfg.merge_max_gap_s) == (8.0, 4.0)
    assert cfg.title_match == "any" and cfg.cooking_categories == ["Food and Entertaining"]
    assert {"make", "prepare", "bake"} <= cfg.generic_word_set()
    assert apply_overrides(cfg, {"generic_words": "paper"}).generic_word_set() == {"make", "prepare", "bake"}
    assert len(EXTENDED_GENERIC_WORDS) == 25


def test_sets_are_typed():
    cfg = apply_overrides(SieveSwapConfig(), parse_sets(["sim_threshold=0.8", "top_k=3", "require_english=true",
                                                         "cooking_categories=[A, B]", "max_title_candidates=null"]))
    assert cfg.sim_threshold == 0.8 and cfg.top_k == 3 and cfg.require_english is True
    assert cfg.cooking_categories == ["A", "B"] and cfg.max_title_candidates is None
    assert apply_overrides(SieveSwapConfig(), {"max_duration_s": 300}).max_duration_s == 300.0


@pytest.mark.parametrize("sets, message", [
    (["nope=1"], "unknown config key"),
    (["top_k=two"], "expected an integer"),
    (["require_english=maybe"], "true/false"),
    (["title_match=some"], "title_match"),
    (["sim_threshold=1.5"], "cosine"),
    (["novalue"], "key=value"),
])
def test_bad_overrides_fail_before_work(sets, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(SieveSwapConfig(), parse_sets(sets))


def test_config_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("sim_threshold: 0.7\ntitle_match: recipe_subset\n")
    assert read_config_file(f) == {"sim_threshold": 0.7, "title_match": "recipe_subset"}
    (tmp_path / "bad.yaml").write_text("a: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_config_file(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        read_config_file(tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match="not found"):
        read_config_file(tmp_path / "missing.yaml")


def test_float_values_in_exponent_notation_and_dotted_keys():
    """YAML 1.1 reads ``1e-3`` as a string: a float key still takes it; ``a.b`` names the flat key ``a_b``."""
    from dataclasses import dataclass

    from builders.core.config import ConfigError, apply_overrides, parse_sets

    @dataclass(frozen=True)
    class C:
        labeler_lr: float = 1e-4
        mptva_gamma: float = 0.65

    c = apply_overrides(C(), parse_sets(["labeler_lr=1e-3", "mptva.gamma=0.6"]))
    assert c.labeler_lr == 1e-3 and c.mptva_gamma == 0.6
    with pytest.raises(ConfigError, match="expected a number"):
        apply_overrides(C(), {"labeler_lr": "fast"})


def _float_keys(cfg_cls) -> list[str]:
    import dataclasses
    import typing

    hints = typing.get_type_hints(cfg_cls)
    return [f.name for f in dataclasses.fields(cfg_cls)
            if hints[f.name] is float or float in typing.get_args(hints[f.name])]


@pytest.mark.parametrize("corpus", ["sieve_swap", "marc", "howtostep", "showhowto"])
@pytest.mark.parametrize("raw", [".nan", ".inf", "-.inf", "nan", "inf", "-inf", "1e999"])
def test_every_float_key_refuses_nan_and_infinities(corpus, raw):
    """Issue 20: ``--set max_duration=.nan`` used to switch the 10-minute filter off; every float key refuses
    non-finite values, from YAML (``.nan``) and from strings (``nan``, ``1e999``) alike."""
    import importlib

    cfg_cls = importlib.import_module(f"builders.corpora.{corpus}").Config
    keys = _float_keys(cfg_cls)
    assert keys, f"{corpus} has float keys"
    for key in keys:
        with pytest.raises(ConfigError, match=f"{key}: expected a finite number"):
            apply_overrides(cfg_cls(), parse_sets([f"{key}={raw}"]))
