"""The labeler variants of HowToStep through whole builds (spec howtostep.md §3.7-§3.9, §4, §5.1-§5.2):
``rounds=0`` (Stage-1 windows are final), ``rounds=2`` (a second self-training round with Table 9's round-2
settings), ``labeler=mptva`` (three fused pathways, gamma and keep-ratio modes, missing pathway) and
``labeler=llm_timestamps`` (the v1 prompt's own timestamps).

Fast: replayed LLM answers, the hash text encoder, one training epoch, two short bundled transcripts (98 s, 120 s)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from .conftest import FAST, build_ok, make_inputs, manifest, run_build, stats, table

IDS = ["Mc8vN4dLs3F", "Gw7mR2cXh5D"]
#: a video that says "Keep stirring the pot." six times (no other narration shares a word with it, none shares a
#: second with another): the step "Keep stirring the pot" matches all six equally, so T_SN = 1/6 on each and its
#: Stage-1 score is 1/6 < epsilon1 = 0.20, an unspecific step (spec §3.7)
STIR = "stirpot0001"
STIR_SENTENCES = [(t, float(s), float(s + 2.5)) for s, t in zip(range(0, 48, 4), [
    "Pour milk into a small saucepan.", "Keep stirring the pot.", "Add oats and a pinch of salt.",
    "Keep stirring the pot.", "Add honey now.", "Keep stirring the pot.", "Sprinkle cinnamon on top.",
    "Keep stirring the pot.", "Turn off heat.", "Keep stirring the pot.", "Serve warm in bowls.",
    "Keep stirring the pot."])]
STIR_ANSWERS = ["Steps:\n1. Pour milk into a small saucepan\n2. Keep stirring the pot\n3. Add oats and a pinch of salt",
                "1. Serve warm in bowls"]


def _answer(vid: str, ci: int, chunk: str) -> str:
    """Three 8-word steps copied from the chunk (strong Stage-1 evidence); the stirring video's own list."""
    if vid == STIR:
        return STIR_ANSWERS[ci]
    w = chunk.split()
    steps = [" ".join(w[8 * k:8 * k + 8]) for k in range(min(3, len(w) // 8))]
    return "Here are the steps:\n" + "\n".join(f"{k + 1}. {s}" for k, s in enumerate(steps))


def _steps(root: Path) -> dict[str, dict]:
    return {r["video_id"]: r for r in table(root, "steps")}


def _t_eff(row: dict) -> int:
    return min(int(row["num_frames"]), 1200)


# ============================================================================ rounds = 0 (spec §3.9, Table 9 round 0)
@pytest.fixture(scope="module")
def round0(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hts_round0")
    inp = make_inputs(d, IDS, answer=_answer, custom={STIR: STIR_SENTENCES})
    return build_ok(d / "out", *inp.args, *FAST, "--set", "rounds=0")


def test_rounds0_final_steps_are_the_stage1_windows(round0):
    rows = _steps(round0)
    assert set(rows) == {*IDS, STIR}
    for r in rows.values():
        assert r["steps"]
        for s in r["steps"]:
            assert (s["start"], s["end"], s["score"]) == (s["stage1_start"], s["stage1_end"], s["stage1_score"])
            assert s["score"] >= 0.20 and 0 <= s["start"] <= s["end"] <= _t_eff(r) - 1
            assert s["pathway_scores"] == []
        p = r["provenance"]
        assert p["rounds"] == 0 and p["epsilon2"] is None and p["epsilon1"] == pytest.approx(0.2)
        assert p["labeler"] == "two_stage" and p["anchor"] == "stage1_window"
        assert p["labeler_checkpoint_sha256"] is None and p["nasva_text_encoder"] is None
    # hand-computed windows: a step equal to one narration takes its seconds, Y_NV rows floor(s)..ceil(e)-1
    stir = {s["text"]: (s["start"], s["end"], round(s["score"], 3)) for s in rows[STIR]["steps"]}
    assert stir == {"Pour milk into a small saucepan": (0.0, 2.0, 1.0), "Add oats and a pinch of salt": (8.0, 10.0, 1.0),
                    "Serve warm in bowls": (40.0, 42.0, 1.0)}
    assert rows[STIR]["num_frames"] == 46  # simulated features: floor(46.5 s), the last narration end


def test_rounds0_drops_steps_below_epsilon1_and_trains_nothing(round0):
    drops = table(round0, "dropped_steps")
    below = [d for d in drops if d["reason"] == "stage1_below_eps1"]
    assert [(d["video_id"], d["step_index"], d["chunk_index"], d["text"], d["stage"]) for d in below] == [
        (STIR, 1, 0, "Keep stirring the pot", "stage1")]
    assert below[0]["score"] == pytest.approx(1 / 6, abs=1e-3)
    assert {d["reason"] for d in drops} == {"stage1_below_eps1"}
    st = stats(round0)
    assert not [n for n in st["steps"] if n.startswith(("train_labeler", "stage2", "mptva"))]
    assert "stage1_labels" in st["steps"]
    c = st["steps"]["stage1"]["counters"]
    kept = sum(len(r["steps"]) for r in table(round0, "steps"))
    assert c["stage1_kept"] == kept and c["stage1_below_eps1"] == len(below)
    assert sum(r["num_raw_steps"] for r in table(round0, "steps")) == kept + len(below)
    assert not [k for k in manifest(round0)["models"] if k.startswith("train_labeler")]


# ============================================================================ rounds = 2 (spec §3.9, Table 9 round 2)
#: peak of the grounder's score row per step (by step index mod 3): kept by both rounds / round 2 only / neither
PEAKS = (0.9, 0.75, 0.5)


def _centre(k: int, T: int) -> int:
    return (7 * k + 3) % T


def _fake_matrix(L: int, T: int) -> np.ndarray:
    """A[k, t] = peak_k * max(0, 1 - |t - c_k| / 8): the zeta=0.7-grown window around c_k is exactly c_k -/+ 2."""
    t = np.arange(T)
    return np.stack([PEAKS[k % 3] * np.maximum(0.0, 1.0 - np.abs(t - _centre(k, T)) / 8.0) for k in range(L)]
                    ).astype(np.float32).reshape(L, T)


@pytest.fixture(scope="module")
def round2(tmp_path_factory) -> tuple[Path, list[str]]:
    """Two real labeler trainings (1 epoch each); Stage-2 inference answers from a known matrix instead of the
    checkpoint (``builders.nasva.infer.Grounder``, whose real inference test_bad_input.py and the MPTVA tests run),
    so every window and score is computed by hand. Calls record which round's training data the checkpoint had."""
    from builders.nasva.infer import Grounder

    d = tmp_path_factory.mktemp("hts_round2")
    inp = make_inputs(d, IDS[:1], answer=_answer)
    used: list[str] = []

    def init(self, ckpt, device="cpu", text_cache=None, text_encoder=None):
        self.config = json.loads((Path(ckpt) / "config.json").read_text())

    def matrices(self, videos, mode="step", max_rows=None, batch_size=8):
        assert mode == "step" and max_rows == 1200
        used.append(self.config["data"]["labels_sha256"])
        return [_fake_matrix(len(texts), min(len(feats), max_rows)) for feats, texts in videos]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Grounder, "__init__", init)
        mp.setattr(Grounder, "matrices", matrices)
        root = build_ok(d / "out", *inp.args, *FAST, "--set", "rounds=2")
    return root, used


def test_rounds2_trains_two_labelers_the_second_on_round1_output(round2):
    root, used = round2
    st, models = stats(root), manifest(root)["models"]
    assert st["steps"]["train_labeler"]["fit"] == "ran" and st["steps"]["train_labeler_round2"]["fit"] == "ran"
    # round 1 trains on the Stage-1 labels, round 2 on round 1's kept steps (peak 0.9 >= epsilon2 0.8)
    assert models["train_labeler"]["num_texts"] == st["steps"]["stage1"]["counters"]["stage1_kept"]
    n_raw = {r["video_id"]: r["num_raw_steps"] for r in table(root, "steps")}
    assert models["train_labeler_round2"]["num_texts"] == sum(len(range(0, n, 3)) for n in n_raw.values())
    assert st["steps"]["stage2"]["counters"]["stage2_below_eps2"] == sum(
        sum(PEAKS[k % 3] < 0.8 for k in range(n)) for n in n_raw.values())
    # each round grounds with its own labeler: two checkpoints, one per round, the final one in provenance
    assert len(used) == 2 and used[0] != used[1]  # one video: one call per round
    sha2 = models["train_labeler_round2"]["sha256"]
    assert sha2 != models["train_labeler"]["sha256"]
    assert {r["provenance"]["labeler_checkpoint_sha256"] for r in table(root, "steps")} == {sha2}


def test_rounds2_uses_the_round2_settings_grown_windows_and_eps_0_7(round2):
    from builders.ops.step_timestamps import round_settings

    root, _ = round2
    assert tuple(round_settings(2)) == (0.7, "grown", None)
    for r in table(root, "steps"):
        T = _t_eff(r)
        assert [s["step_index"] for s in sorted(r["steps"], key=lambda s: s["step_index"])] == [
            k for k in range(r["num_raw_steps"]) if PEAKS[k % 3] >= 0.7]
        for s in r["steps"]:
            c = _centre(s["step_index"], T)
            assert s["score"] == pytest.approx(PEAKS[s["step_index"] % 3]) and s["score"] >= 0.7
            assert (s["start"], s["end"]) == (max(0, c - 2), min(T - 1, c + 2))  # grown, not t* + 8
            assert s["end"] - s["start"] <= 4
        p = r["provenance"]
        assert p["rounds"] == 2 and p["anchor"] == "grown"


def test_rounds2_dropped_steps_are_the_final_rounds_only(round2):
    root, _ = round2
    drops = table(root, "dropped_steps")
    n_raw = {r["video_id"]: r["num_raw_steps"] for r in table(root, "steps")}
    assert {(d["stage"], d["reason"]) for d in drops} == {("stage2_round2", "stage2_below_eps2")}
    assert sorted((d["video_id"], d["step_index"]) for d in drops) == sorted(
        (v, k) for v, n in n_raw.items() for k in range(n) if PEAKS[k % 3] < 0.7)
    assert all(d["score"] == pytest.approx(0.5) for d in drops)


def test_a_round_with_nothing_to_train_on_names_the_threshold_that_emptied_it():
    """Round 1 trains on Stage-1 labels (epsilon1), round r >= 2 on round r-1's kept steps (spec §3.9)."""
    from builders.core.config import ConfigError
    from builders.core.step import FitInputs
    from builders.corpora.howtostep.config import HowToStepConfig
    from builders.corpora.howtostep.pipeline import labeler_steps

    class Rows:
        def rows(self):
            yield {"video_id": "v", "split": "train", "narrations": [], "grounded_steps": [],
                   "steps": [{"text": "Boil water", "stage1_start": None, "stage1_end": None}]}

    def training(cfg, name):
        return next(s for s in labeler_steps(cfg) if s.name == name)

    with pytest.raises(ConfigError, match="epsilon1"):
        training(HowToStepConfig(), "train_labeler").fit(FitInputs(Rows()))
    with pytest.raises(ConfigError, match=r"round-2 .*round 1 kept no step.*epsilon2.*rounds=1"):
        training(HowToStepConfig(rounds=2), "train_labeler_round2").fit(FitInputs(Rows()))


# ============================================================================ MPTVA (spec §4)
@pytest.fixture(scope="module")
def mptva_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hts_mptva")
    make_inputs(d, IDS, answer=_answer, prompt_id="mptva", features_dim=768)  # files: used by one test
    return d


def _mptva_args(d: Path, *extra: str) -> list[str]:
    return ["--videos", str(d / "videos.csv"), "--transcripts", str(d / "transcripts"), "--transcript-format",
            "whisperx", "--set", "llm=replay", "--set", f"llm_replay={d / 'replay.jsonl'}", *FAST,
            "--set", "labeler=mptva", "--work-dir", str(d / "work"), *extra]


@pytest.fixture(scope="module")
def mptva(mptva_dir) -> Path:
    return build_ok(mptva_dir / "out", *_mptva_args(mptva_dir, "--set", "visual_features=simulated"))


def _check_mptva_window(s: dict, T: int) -> None:
    """start/end = k* -/+ W (W = 2) clipped to [0, T-1]: a 5-frame window unless clipped at an edge."""
    assert 0 <= s["start"] <= s["end"] <= T - 1 and s["end"] - s["start"] <= 4
    if 0 < s["start"] and s["end"] < T - 1:
        assert s["end"] - s["start"] == 4


def test_mptva_trains_the_long_model_and_fuses_three_pathways(mptva):
    st = stats(mptva)
    assert st["steps"]["mptva_long_model"]["fit"] == "ran"
    assert not [n for n in st["steps"] if n.startswith(("stage1", "stage2", "train_labeler"))]
    long_model = manifest(mptva)["models"]["mptva_long_model"]
    assert long_model["trained"] is True and long_model["num_texts"] == sum(
        len(r["narrations"]) for r in table(mptva, "narrations"))
    rows = _steps(mptva)
    dropped_videos = {d["video_id"]: d["reason"] for d in table(mptva, "dropped_videos")}
    drops = table(mptva, "dropped_steps")
    assert {(d["stage"], d["reason"]) for d in drops} <= {("mptva_labels", "mptva_below_gamma")}
    assert all(d["score"] < 0.65 for d in drops)
    for vid in IDS:
        if vid not in rows:  # no step reached gamma: the video goes as all_steps_dropped
            assert dropped_videos[vid] == "all_steps_dropped"
            continue
        r = rows[vid]
        p = r["provenance"]
        assert p["labeler"] == "mptva" and p["gamma"] == pytest.approx(0.65) and p["window_w"] == 2
        assert p["tau"] == pytest.approx(0.07) and p["prompt_id"] == "mptva" and p["visual_features"] == "simulated"
        assert p["epsilon1"] is None and p["rounds"] is None and p["anchor"] == "mptva_window"
        assert p["labeler_checkpoint_sha256"] == manifest(mptva)["models"]["mptva_long_model"]["sha256"]
        for s in r["steps"]:
            ps = s["pathway_scores"]
            assert len(ps) == 3 and None not in ps
            assert s["score"] >= 0.65 and s["score"] == pytest.approx(sum(ps) / 3, abs=1e-5)
            assert 0.0 <= ps[0] <= 1.0  # A_SNV is a probability mass
            _check_mptva_window(s, _t_eff(r))
        n_drop = sum(d["video_id"] == vid for d in drops)
        assert len(r["steps"]) + n_drop == r["num_raw_steps"]
    assert rows, "no video kept a step above gamma"


def test_mptva_keep_ratio_keeps_the_top_15_percent_per_video(mptva, mptva_dir):
    root = build_ok(mptva_dir / "out_ratio", *_mptva_args(mptva_dir, "--set", "visual_features=simulated",
                                                             "--set", "mptva.gamma_mode=keep_ratio"))
    st = stats(root)
    assert st["steps"]["mptva_long_model"]["fit"] == "cached"  # the same long model, not retrained
    rows = _steps(root)
    assert set(rows) == set(IDS)
    absolute = {(s["video_id"], x["step_index"]): x["score"] for s in table(mptva, "steps") for x in s["steps"]}
    for r in rows.values():
        n = r["num_raw_steps"]
        assert len(r["steps"]) == math.ceil(0.15 * n)
        for s in r["steps"]:
            _check_mptva_window(s, _t_eff(r))
            if (r["video_id"], s["step_index"]) in absolute:
                assert s["score"] == pytest.approx(absolute[(r["video_id"], s["step_index"])])
        dropped = [d["score"] for d in table(root, "dropped_steps") if d["video_id"] == r["video_id"]]
        assert len(dropped) == n - len(r["steps"]) and max(dropped) <= min(s["score"] for s in r["steps"])


def test_mptva_without_a_short_pathway_fails_unless_allowed(mptva, mptva_dir):
    d = mptva_dir
    files = ["--features", str(d / "features"), "--set", "visual_features=file"]
    rc, err, _ = run_build(d / "out_file", *_mptva_args(d, *files))
    assert rc == 2 and "mptva_allow_missing" in err and "S-V-short" in err
    assert len(list((d / "work" / "cache" / "labeler").glob("mptva_long-*"))) == 1  # it failed before training
    # allowed: the long model of the first build (a given checkpoint), two pathways averaged, "short" null
    ckpt = next((d / "work").glob("**/_fit/artefacts/labeler"))
    root = build_ok(d / "out_file", *_mptva_args(d, *files, "--set", "mptva_allow_missing=true",
                                                 "--set", f"mptva.long_model={ckpt}", "--set", "mptva.gamma=-1"))
    st = stats(root)
    assert st["steps"]["mptva_long_model"]["fit"] == "ran"
    assert manifest(root)["models"]["mptva_long_model"]["trained"] is False
    rows = _steps(root)
    assert set(rows) == set(IDS)
    for r in rows.values():
        assert r["provenance"]["visual_features"] == "file"
        assert len(r["steps"]) == r["num_raw_steps"]  # gamma = -1 keeps every step
        for s in r["steps"]:
            snv, long_, short = s["pathway_scores"]
            assert short is None and snv is not None and long_ is not None
            assert s["score"] == pytest.approx((snv + long_) / 2, abs=1e-5)
            _check_mptva_window(s, _t_eff(r))


# ============================================================================ llm_timestamps (paper 000 Table 6 row 1)
V1_ANSWERS = {
    ("Mc8vN4dLs3F", 0): "Here is the summary:\n0:05 Grab the biggest mug you own\n[00:20] Add flour, sugar and cocoa\n"
                        "45.5 - Stir until there are no dry bits\nMicrowave it for about seventy seconds",
    ("Mc8vN4dLs3F", 1): "1:20 Let the cake cool for a minute\n1:35 Add a scoop of vanilla ice cream",
    ("Gw7mR2cXh5D", 0): "00:03 Pick ripe avocados\nMash the avocados with a fork",
    ("Gw7mR2cXh5D", 1): "Serve the guacamole with chips",
}


@pytest.fixture(scope="module")
def llm_ts(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hts_llm_ts")
    inp = make_inputs(d, IDS, answer=lambda v, c, _: V1_ANSWERS[(v, c)], prompt_id="howtostep_v1_ts")
    return build_ok(d / "out", *inp.args, *FAST, "--set", "labeler=llm_timestamps")


def test_llm_timestamps_start_at_the_llm_time_and_last_delta(llm_ts):
    rows = _steps(llm_ts)
    r = rows["Mc8vN4dLs3F"]
    T = _t_eff(r)
    assert T == 98  # simulated features: floor(98.4 s), the last narration end
    got = [(s["text"], s["start"], s["end"], s["score"]) for s in r["steps"]]
    assert got == [("Grab the biggest mug you own", 5.0, 13.0, None), ("Add flour, sugar and cocoa", 20.0, 28.0, None),
                   ("Stir until there are no dry bits", 45.5, 53.5, None),
                   ("Let the cake cool for a minute", 80.0, 88.0, None),
                   ("Add a scoop of vanilla ice cream", 95.0, 97.0, None)]  # end clipped to T_eff - 1 (spec §7)
    assert [(s["text"], s["start"], s["end"]) for s in rows["Gw7mR2cXh5D"]["steps"]] == [
        ("Pick ripe avocados", 3.0, 11.0)]
    for row in rows.values():
        p = row["provenance"]
        assert p["prompt_id"] == "howtostep_v1_ts" and p["labeler"] == "llm_timestamps"
        assert p["delta_sec"] == pytest.approx(8.0) and p["anchor"] == "llm_timestamp"
        assert p["epsilon1"] is None and p["epsilon2"] is None and p["rounds"] is None and p["gamma"] is None
        assert all(s["stage1_start"] is None for s in row["steps"])


def test_llm_timestamps_steps_without_a_time_are_dropped(llm_ts):
    drops = table(llm_ts, "dropped_steps")
    assert sorted((d["video_id"], d["text"]) for d in drops) == [
        ("Gw7mR2cXh5D", "Mash the avocados with a fork"), ("Gw7mR2cXh5D", "Serve the guacamole with chips"),
        ("Mc8vN4dLs3F", "Microwave it for about seventy seconds")]
    assert {(d["stage"], d["reason"], d["score"]) for d in drops} == {
        ("llm_timestamp_labels", "no_llm_timestamp", None)}
    st = stats(llm_ts)
    assert not [n for n in st["steps"] if n.startswith(("stage1", "stage2", "train_labeler", "mptva"))]
    chunks = [c for r in table(llm_ts, "llm_outputs") for c in r["chunks"]]
    assert {c["prompt_id"] for c in chunks} == {"howtostep_v1_ts"} and {c["parse_mode"] for c in chunks} == {"lines"}
    assert Counter(d["reason"] for d in drops) == Counter({"no_llm_timestamp": 3})
