"""End-to-end builds of the bundled marc sample: load, the spec's row invariants, statistics and drops, chat removal,
determinism, resume, and the paper aligner preset (marc.md §3-§6)."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from builders.build import main
from loading_scripts import marc as schema

pytestmark = pytest.mark.slow

SPLITS = ("train", "validation", "test")


def build(out: Path, *extra: str) -> Path:
    assert main(["marc", "--out", str(out), "--no-progress", "-q", *extra]) == 0
    return out / "marc"


def _nan_free(x):
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    if isinstance(x, dict):
        return {k: _nan_free(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan_free(v) for v in x]
    return x


def tables(root: Path) -> dict[str, dict[str, list[dict]]]:
    """Every config of a release as python rows per split (content, not bytes; NaN as a string so rows compare)."""
    out: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for p in sorted(root.glob("*/*.parquet")):
        out[p.parent.name][p.name.split("-")[0]].extend(_nan_free(pq.read_table(p).to_pylist()))
    return out


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("marc_sample"))


@pytest.fixture(scope="module")
def rows(sample) -> dict[str, dict[str, list[dict]]]:
    return tables(sample)


def test_every_config_loads_with_its_features(sample, monkeypatch):
    monkeypatch.chdir(sample.parent)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    stats = json.loads((sample / "stats.json").read_text())
    # the sample has text and video recipes, so every config of spec §4 is released
    assert set(stats["release"]) == set(schema.CONFIG_FEATURES)
    for config, splits in stats["release"].items():
        ds = datasets.load_dataset("marc", config)
        assert set(ds) == set(splits)
        for split, d in ds.items():
            assert d.features == schema.features(config)
            assert d.num_rows == splits[split] > 0  # only non-empty splits are released
    default = datasets.load_dataset("marc", split="train")
    assert default.features == schema.features("recipes")


def test_recipes_follow_the_spec(rows):
    recipes = [r for s in SPLITS for r in rows["recipes"][s]]
    text = [r for r in recipes if r["modality"] == 0]
    video = [r for r in recipes if r["modality"] == 1]
    assert text and video
    per_dish = Counter(r["dish_id"] for r in text)
    assert min(per_dish.values()) >= 3  # §3.4 dishes with >= 3 text recipes
    for r in text:
        assert r["recipe_id"].startswith("t:") and r["start"] == [] and r["end"] == []
        assert len(r["instructions"]) >= 2 and len(r["title"].split()) <= 5
        assert r["dish_id"] == "_".join(r["title"].casefold().split())
        assert len(r["step_index"]) == len(r["section"]) == len(r["instructions"])
        assert r["step_index"] == sorted(r["step_index"])
        assert r["source"]["warc_filename"] == "recipes.warc.gz" and r["source"]["warc_record_offset"] >= 0
    for r in video:
        vid = r["recipe_id"][2:]
        assert r["recipe_id"].startswith("v:") and r["url"] == f"https://www.youtube.com/watch?v={vid}"
        assert len(r["start"]) == len(r["end"]) == len(r["instructions"]) >= 2
        assert all(s <= e for s, e in zip(r["start"], r["end"])) and r["start"] == sorted(r["start"])
        assert r["source"]["extraction"] == 3 and r["source"]["chat_classifier"].startswith("logreg-minilm@")
        assert set(r["ingredient_terms"]) <= {t for x in text if x["dish_id"] == r["dish_id"]
                                               for t in x["ingredient_terms"]}
    # dishes never straddle splits
    split_of = {}
    for s in SPLITS:
        for r in rows["recipes"][s]:
            assert split_of.setdefault(r["dish_id"], s) == s


def test_chat_sentences_are_removed(rows):
    video = [r for s in SPLITS for r in rows["recipes"][s] if r["modality"] == 1]
    assert sum(r["num_chat_removed"] for r in video) >= 80  # the sample's transcripts open and close with chat
    kept = [x.casefold() for r in video for x in r["instructions"]]
    # a real classifier: one sponsor-style line ("before we start make sure you're subscribed") is kept on the sample
    assert sum(any(c in x for c in ("subscribe", "welcome back", "like button", "see you")) for x in kept) <= 1
    assert sum(any(c in x for c in ("bake", "oven", "stir", "mix", "add")) for x in kept) >= 45  # 51 on the sample


def _check_align(align, n_source, n_target):
    assert len(align) == n_source
    for a in align:
        assert 0 <= a["target_index"] < n_target and 0.0 <= a["probability"] <= 1.0 + 1e-6
        assert a["top_indices"][0] == a["target_index"]
        assert a["top_probabilities"] == sorted(a["top_probabilities"], reverse=True)
        assert len(a["top_indices"]) == min(3, n_target)


def test_pairs_follow_the_spec(rows):
    recipes = {r["recipe_id"]: r for s in SPLITS for r in rows["recipes"][s]}
    seen_types = set()
    for t in schema.PAIR_TYPES:
        for s in SPLITS:
            for p in rows[f"pairwise_{t}"][s]:
                seen_types.add(t)
                a, b = recipes[p["recipe_a"]], recipes[p["recipe_b"]]
                assert p["pair_id"] == f"{p['dish_id']}:{p['recipe_a']}|{p['recipe_b']}"
                assert a["dish_id"] == b["dish_id"] == p["dish_id"]
                assert p["a_instructions"] == a["instructions"] and p["b_instructions"] == b["instructions"]
                _check_align(p["a_to_b"], len(a["instructions"]), len(b["instructions"]))
                _check_align(p["b_to_a"], len(b["instructions"]), len(a["instructions"]))
                threshold = 0.9 if t == "video_video" else 0.7
                assert p["ingredient_match"] >= threshold - 1e-6
                if t == "text_video":
                    assert a["modality"] == 0 and b["modality"] == 1
                    assert p["model_a_to_b"].startswith("hmm_ibm1/text_to_video@")
                    assert p["model_b_to_a"].startswith("hmm_ibm1/video_to_text@")
                else:
                    assert p["recipe_a"] < p["recipe_b"] and p["model_a_to_b"] == p["model_b_to_a"]
                if t == "text_text":
                    n, m = sorted((len(a["instructions"]), len(b["instructions"])))
                    assert m <= 2 * n
    assert {"text_text", "text_video"} <= seen_types


def test_joint_alignment_sets_have_one_instruction_per_recipe(rows):
    for s in SPLITS:
        for j in rows["joint"][s]:
            nodes = j["nodes"]
            assert [n["node_id"] for n in nodes] == list(range(len(nodes)))
            assert [(n["recipe_id"], n["instruction_index"]) for n in nodes] == \
                sorted((n["recipe_id"], n["instruction_index"]) for n in nodes)
            for n in nodes:
                assert (n["modality"] == 0) == (n["start"] == "NaN")
            assert len(j["forest_edges"]) < max(1, len(nodes))
            assert all(e["weight"] > j["edge_threshold"] for e in j["forest_edges"])
            weights = [e["weight"] for e in j["forest_edges"]]
            assert weights == sorted(weights, reverse=True)
            for a in j["aligned_sets"]:
                recs = [nodes[i]["recipe_id"] for i in a["node_ids"]]
                assert len(recs) == len(set(recs)) >= 2
                assert a["num_text"] + a["num_video"] == len(recs)
                assert a["min_weight"] > j["edge_threshold"]


def test_paraphrases_and_breakdowns_use_the_thresholds(rows):
    paras = [r for s in SPLITS for r in rows["paraphrases"][s]]
    assert paras and all(r["probability"] > 0.5 and r["threshold"] == 0.5 for r in paras)
    kinds = {r["kind"] for r in paras}
    assert kinds <= {0, 1}  # video-video paraphrases are behind a flag
    for r in paras:
        assert (r["kind"] == 1) == (r["b_start"] != "NaN") and r["a_start"] == "NaN"
    for r in (r for s in SPLITS for r in rows["multi_step_breakdown"][s]):
        assert len(r["multi_indices"]) >= 2 and all(p > 0.9 for p in r["probabilities"])
        assert r["multi_indices"] == sorted(r["multi_indices"])
        assert r["contiguous"] == (r["multi_indices"] == list(range(r["multi_indices"][0],
                                                                     r["multi_indices"][-1] + 1)))


def test_chat_content_config_and_classifier_scores(sample, rows):
    labelled = [r for s in SPLITS for r in rows["chat_content"][s]]
    assert {r["label"] for r in labelled} == {0, 1}
    types = {s: {r["recipe_type"] for r in rows["chat_content"][s]} for s in SPLITS}
    assert not (types["train"] & types["test"]) and not (types["train"] & types["validation"])
    model = json.loads((sample / "models" / "chat_classifier.json").read_text())
    scores = json.loads((sample / "models" / "chat_classifier_scores.json").read_text())
    assert model["embedding_model"].endswith("all-MiniLM-L6-v2")
    test = scores["scores"]["test"]
    assert test["f1"] > scores["scores"]["baseline_all_content_f1"]["test"]  # better than keeping every sentence
    assert 0.0 <= test["precision"] <= 1.0 and 0.0 <= test["recall"] <= 1.0


def test_statistics_drops_card_and_report(sample):
    stats = json.loads((sample / "stats.json").read_text())
    drops = pq.read_table(sample / "drops.parquet").to_pylist()
    assert len(drops) == sum(stats["drops"].values())
    assert Counter(d["reason"] for d in drops) == Counter(stats["drops"])
    for st in stats["steps"].values():
        assert st["rows_in"] == st["kept"] + sum(st["dropped"].values())
    assert stats["aligner"]["preset"] == "best" and stats["aligner"]["min_counts"] == {"text": 1, "video": 1}
    card = (sample / "README.md").read_text()
    assert "$" not in card.split("---", 2)[2].replace("$$", "")  # every placeholder filled
    assert "Which aligner" in card and "hmm_ibm1/text_text@" in card
    html = (sample / "report.html").read_text()
    assert "<script>alert" not in html and "MARC build report" in html


def test_rebuild_is_identical_and_resumes_a_lost_shard_without_em_or_training(sample, rows, tmp_path,
                                                                               monkeypatch):
    from builders.models import chat_classifier
    from builders.ops.hmm_ibm1 import HmmIbm1

    out = tmp_path / "again"
    work = tmp_path / "work"
    first = build(out, "--work-dir", str(work))
    assert tables(first) == rows
    # a build killed in the alignment step: its finished-shard markers are gone; the rerun redoes those shards
    # only, reading the trained aligners and classifier from their stage folders: no EM, no training
    for stage in (next(work.glob("pairs/01_hmm_ibm1-*")), next(work.glob("videos/03_chat_filter-*"))):
        (stage / "part-00000.stats.json").unlink()

    def no(*a, **k):
        raise AssertionError("a resumed build must not retrain")

    monkeypatch.setattr(HmmIbm1, "fit", no)
    monkeypatch.setattr(HmmIbm1, "fit_streamed", no)
    monkeypatch.setattr(chat_classifier, "train_logreg", no)
    # into a fresh --out: the same --out would be found up to date (same final shards) and not rewritten
    again = build(tmp_path / "resumed", "--work-dir", str(work))
    assert tables(again) == rows
    stats = json.loads((again / "stats.json").read_text())
    assert stats["steps"]["hmm_ibm1"]["cached_shards"] == stats["steps"]["hmm_ibm1"]["shards"] - 1
    assert stats["steps"]["select_text_recipes"]["cached_shards"] == stats["steps"]["select_text_recipes"]["shards"]
    assert stats["steps"]["hmm_ibm1"]["fit"] == "cached" and stats["steps"]["chat_filter"]["fit"] == "cached"


def test_paper_aligner_is_selectable(sample, tmp_path):
    paper = build(tmp_path, "--set", "aligner=paper")
    stats = json.loads((paper / "stats.json").read_text())
    assert stats["aligner"]["preset"] == "paper" and stats["aligner"]["min_counts"] == {"text": 5, "video": 15}
    best = json.loads((sample / "stats.json").read_text())["aligner"]["models"]
    assert set(stats["aligner"]["models"]) == set(best)
    assert stats["aligner"]["models"]["hmm_ibm1/text_text"] != best["hmm_ibm1/text_text"]


def test_process_pool_gives_identical_rows(rows, tmp_path):
    # fitted states (HMM+IBM1 tables, the classifier path) travel to worker processes
    assert tables(build(tmp_path, "--workers", "2", "--shard-size", "4")) == rows


def test_bad_chat_model_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "model.json"
    bad.write_text('{"embedding_model": "x"}', encoding="utf-8")
    assert main(["marc", "--out", str(tmp_path), "--no-progress", "-q", "--chat-model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "chat/content classifier" in err and "Traceback" not in err
    assert not (tmp_path / "marc").exists()


def test_a_killed_build_resumes_inside_the_web_pages(tmp_path, monkeypatch):
    """Pages are listed cheaply (WARC offsets) and parsed in a step, shard by shard: a kill while parsing keeps the
    finished shards."""
    from builders.core.orchestrate import run_pipelines
    from builders.core.runners import LocalRunner
    from builders.corpora.marc import Config, pipelines, resolve_inputs
    from builders.corpora.marc.pipeline import ParseRecipePages

    cfg, _ = resolve_inputs(Config())
    text = pipelines(cfg)[0]
    text.shard_size = 4
    real = ParseRecipePages.process
    calls = []

    def killed_at_third_shard(self, rows, out):
        calls.append(len(rows))
        if len(calls) == 3:
            raise KeyboardInterrupt  # a kill: not a row error
        return real(self, rows, out)

    monkeypatch.setattr(ParseRecipePages, "process", killed_at_third_shard)
    with pytest.raises(KeyboardInterrupt):
        run_pipelines([text], tmp_path, LocalRunner(), progress=False)
    monkeypatch.setattr(ParseRecipePages, "process", real)
    res = run_pipelines([text], tmp_path, LocalRunner(), progress=False)
    st = res.steps["read_recipe_pages"]
    assert st.cached_shards == 2 and st.shards > 3
    assert st.rows_in + st.added == st.kept + sum(st.dropped.values())
    fresh = run_pipelines([pipelines(cfg)[0]], tmp_path / "fresh", LocalRunner(), progress=False)
    assert sorted(r["recipe_id"] for r in res.outputs["text"].rows()) == \
        sorted(r["recipe_id"] for r in fresh.outputs["text"].rows())
