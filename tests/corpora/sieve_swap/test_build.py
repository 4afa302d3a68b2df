"""End-to-end builds of the bundled sample: load, statistics, Ray equivalence, determinism, resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from builders.build import main
from loading_scripts import sieve_swap as schema

pytestmark = pytest.mark.slow

#: spec §6: every named reason the sample must exercise under the default config
SPEC_DROP_REASONS = {
    "malformed_metadata_row", "not_cooking", "excluded_id", "duplicate_video_row", "too_long", "small_task",
    "no_transcript", "malformed_transcript", "empty_transcript", "no_title_content_words", "no_title_match",
    "content_sieve_failed", "no_swapped_segments", "malformed_csv_row", "malformed_recipe_json", "no_directions",
    "no_title", "duplicate_recipe",
}
SPEC_COUNTERS = {"unknown_task_id", "caption_length_mismatch", "bad_segment"}
CONFIGS = ("default", "raw_asr", "recipes")


def build(out: Path, *extra: str) -> Path:
    assert main(["sieve_swap", "--out", str(out), "--no-progress", "-q", *extra]) == 0
    return out / "sieve_swap"


def differences(a, b, path: str = "", float_tol: float = 0.0) -> list[str]:
    """The first leaf paths where two nested values differ (floats within ``float_tol``, everything else exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: missing on one side" for k in a.keys() ^ b.keys()]
        for k in a.keys() & b.keys():
            out += differences(a[k], b[k], f"{path}/{k}", float_tol)
        return out[:10]
    if isinstance(a, list) and isinstance(b, list):
        out = [f"{path}: {len(a)} vs {len(b)} items"] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]", float_tol)
        return out[:10]
    if isinstance(a, float) and isinstance(b, float):
        return [] if abs(a - b) <= float_tol else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def release_tables(root: Path) -> dict[str, list[dict]]:
    """Every parquet shard of a release, as python rows (content, not bytes)."""
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in sorted(root.glob("*/*.parquet"))}


@pytest.fixture(scope="session")
def sample(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("sample"))


def test_load_dataset_by_bare_name_from_the_output_directory(sample, monkeypatch):
    monkeypatch.chdir(sample.parent)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    stats = json.loads((sample / "stats.json").read_text())
    for cfg in CONFIGS:
        ds = datasets.load_dataset("sieve_swap", None if cfg == "default" else cfg)
        assert set(ds) == set(stats["release"][cfg])
        for split, d in ds.items():
            assert d.features == schema.FEATURES[cfg]
            assert d.num_rows == stats["release"][cfg][split]
    train = datasets.load_dataset("sieve_swap", split="train")
    assert train.num_rows > 0 and {"train", "validation"} == set(stats["release"]["default"])


def test_rows_follow_the_spec(sample):
    rows = release_tables(sample)
    videos = rows["default/train-00000-of-00001.parquet"] + rows["default/validation-00000-of-00001.parquet"]
    recipes = {r["recipe_id"]: r for r in rows["recipes/train-00000-of-00001.parquet"]}
    for v in rows["default/validation-00000-of-00001.parquet"]:
        assert v["max_token_iou"] >= 0.2 - 1e-6
    for v in rows["default/train-00000-of-00001.parquet"]:
        assert 0.1 - 1e-6 <= v["max_token_iou"] < 0.2
    for v in videos:
        assert v["duration"] <= 600 and v["segments"]
        assert v["recipe_token_iou"] == sorted(v["recipe_token_iou"], reverse=True)
        assert all(i >= 0.1 - 1e-6 for i in v["recipe_token_iou"]) and all(r >= 0.3 - 1e-6 for r in v["recipe_token_recall"])
        assert v["provenance"]["sim_threshold"] == 0.75 and v["provenance"]["top_k"] == 2
        starts = [s["start"] for s in v["segments"]]
        assert starts == sorted(starts)
        for s in v["segments"]:
            assert s["similarity"] >= 0.75 - 1e-6 and s["end"] > s["start"]
            assert len(s["candidates"]) == 2 and s["candidates"][0]["similarity"] >= s["candidates"][1]["similarity"]
            top = s["candidates"][0]
            assert (top["recipe_id"], top["step_index"], top["text"]) == (s["recipe_id"], s["step_index"], s["text"])
            assert recipes[s["recipe_id"]]["directions"][s["step_index"]] == s["text"]
            assert s["num_merged"] >= 1
    assert any(s["num_merged"] > 1 for v in videos for s in v["segments"]), "the sample exercises merging"
    used = {s["recipe_id"] for v in videos for s in v["segments"]}
    assert used <= set(recipes)
    assert sum(r["num_segments_top1"] for r in recipes.values()) == sum(len(v["segments"]) for v in videos)


def test_statistics_drops_and_report(sample):
    stats = json.loads((sample / "stats.json").read_text())
    assert SPEC_DROP_REASONS <= set(stats["drops"]), SPEC_DROP_REASONS - set(stats["drops"])
    assert SPEC_COUNTERS <= set(stats["counters"])
    for name, st in stats["steps"].items():
        assert st["rows_in"] == st["kept"] + sum(st["dropped"].values()), name
    drops = pq.read_table(sample / "drops.parquet").to_pylist()
    assert len(drops) == sum(stats["drops"].values())
    assert set(drops[0]) == {"item_id", "stage", "reason", "detail"}
    q = stats["quantities"]
    assert q["videos_train"]["value"] == stats["release"]["default"]["train"] and q["videos_train"]["paper"] == 48_000
    assert "sample build" in q["videos_train"]["flag"]
    html = (sample / "report.html").read_text()
    assert html.count("<svg") >= 4 and "no_swapped_segments" in html
    manifest = json.loads((sample / "manifest.json").read_text())
    assert manifest["config"]["sim_threshold"] == 0.75 and manifest["sample"] is True
    assert manifest["models"]["sentence_encoder"]["model_id"] == "sentence-transformers/all-mpnet-base-v2"
    assert all(f["sha256"] for fps in manifest["inputs"].values() for f in fps)
    card = (sample / "README.md").read_text()
    assert "| videos_train |" in card and "hand-written sample" in card and "$" + "stats_table" not in card
    yc2 = json.loads(next((sample / "yc2format").glob("sieve_swap_train_*_yc2format_clean.json")).read_text())
    v = next(iter(yc2.values()))
    assert len(v["timestamps"]) == len(v["sentences"]) and all(len(c) == 2 for c in v["sentences"])
    assert all(c == c.lower() for pair in v["sentences"] for c in pair)


def test_second_build_is_identical(sample, tmp_path):
    again = build(tmp_path)
    assert release_tables(again) == release_tables(sample)
    for p in sorted(sample.glob("*/*.parquet")):
        assert (again / p.relative_to(sample)).read_bytes() == p.read_bytes()


@pytest.mark.ray
def test_ray_engine_gives_identical_rows(sample, tmp_path):
    pytest.importorskip("ray")
    ray_release = build(tmp_path, "--engine", "ray", "--workers", "2")
    assert not differences(release_tables(ray_release), release_tables(sample))  # bit-identical values


def test_require_english_drops_the_spanish_video(sample, tmp_path):
    # reuses the sample build's caches: only the steps from clean_transcript on are recomputed
    out = build(tmp_path, "--work-dir", str(sample.parent / ".work" / "sieve_swap"), "--set", "require_english=true")
    stats = json.loads((out / "stats.json").read_text())
    assert stats["drops"]["non_english_transcript"] >= 1
    assert stats["steps"]["read_metadata"]["cached_shards"] == stats["steps"]["read_metadata"]["shards"]


def _swap_dir(work: Path) -> Path | None:
    found = sorted(work.glob("videos/*_swap-*"))
    return found[0] if found else None


def test_resume_after_sigkill_in_the_swap_step(sample, tmp_path):
    out = tmp_path / "killed"
    work = out / ".work" / "sieve_swap"
    cmd = [sys.executable, "-m", "builders.build", "sieve_swap", "--out", str(out), "--no-progress", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done: list[Path] = []
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        d = _swap_dir(work)
        done = sorted(d.glob("*.stats.json")) if d else []
        if done:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the build finished before it could be killed: " + proc.stderr.read().decode()[-500:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    swap = _swap_dir(work)
    finished = {p.name: p.stat().st_mtime_ns for p in swap.glob("*.stats.json")}
    n_shards = len(list((sample.parent / ".work" / "sieve_swap").glob("videos/*_swap-*/*.stats.json")))
    assert 1 <= len(finished) < n_shards, (finished, n_shards)
    assert not (out / "sieve_swap").exists()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert {p.name: p.stat().st_mtime_ns for p in swap.glob("*.stats.json") if p.name in finished} == finished
    assert release_tables(out / "sieve_swap") == release_tables(sample)
    stats = json.loads((out / "sieve_swap" / "stats.json").read_text())
    assert stats["steps"]["swap"]["cached_shards"] == len(finished)
    assert stats["drops"] == json.loads((sample / "stats.json").read_text())["drops"]


def test_kill_while_writing_the_release_leaves_the_old_release_or_none(sample, tmp_path):
    """A SIGKILL during the release phase never leaves a half-written release folder: it is built hidden."""
    out = tmp_path / "rel"
    work = sample.parent / ".work" / "sieve_swap"  # all pipeline shards cached: the run goes straight to release
    cmd = [sys.executable, "-m", "builders.build", "sieve_swap", "--out", str(out), "--work-dir", str(work),
           "--no-progress", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hidden = out / ".sieve_swap.incomplete"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not hidden.exists():
        time.sleep(0.02)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (out / "sieve_swap").exists() or release_tables(out / "sieve_swap") == release_tables(sample)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert release_tables(out / "sieve_swap") == release_tables(sample)
    assert not hidden.exists()


#: the per-video outcomes documented in builders/samples/sieve_swap/README.md (MPNet, sim_threshold 0.75)
SAMPLE_VALIDATION = {"bN4tQ7xWk2E", "Ua2dX7hPq5w", "P3xLk9Tq-Ew", "tK9wE3zRb6P", "Fs8kC2xVn4B", "rJ8mB3tYk6N",
                     "uH1rL6pQz9D", "Mc5tY0wJe3S"}
SAMPLE_TRAIN = {"Lr8_vHq3ZcM", "0pYeK5mTs9A", "c7JvR2nHw5Y", "Ym2hU7qNc0F", "Zm4qT8pLx_0", "Vx1cQ9sLf4A", "j4LsA8vXp2T",
                "Qe7pM4kDv1X"}
SAMPLE_VIDEO_DROPS = {
    "Hq7mZ2cLp0U": "no_swapped_segments", "yF5nW8rGd1s": "content_sieve_failed", "iP7vD4nKq8G": "content_sieve_failed",
    "oW3qT5yHg7L": "content_sieve_failed", "e9RkV4sJm2Q": "no_title_content_words", "Xg2bR9sFt5H": "no_title_match",
    "Gt6wN1bYr3K": "no_transcript", "Rb6zN1mKw9C": "malformed_transcript", "nB5gH2wZt8R": "empty_transcript",
    "Wd2FhR7uJxo": "too_long", "kT3s-9VbQe4": "excluded_id", "dN6yK3pWm1V": "small_task", "Kv0qS7hLb2J": "small_task",
    "Ap9xT4cZr7M": "not_cooking", "wE3nJ8bQs5Y": "not_cooking", "Ls6mG1vRk0D": "not_cooking",
}


def test_sample_outcomes_match_its_readme(sample):
    rows = release_tables(sample)
    assert {r["video_id"] for r in rows["default/validation-00000-of-00001.parquet"]} == SAMPLE_VALIDATION
    assert {r["video_id"] for r in rows["default/train-00000-of-00001.parquet"]} == SAMPLE_TRAIN
    drops = pq.read_table(sample / "drops.parquet").to_pylist()
    by_id = {d["item_id"]: d["reason"] for d in drops if d["stage"] not in ("read_recipes", "recipe_clean",
                                                                           "recipe_dedup")}
    for vid, reason in SAMPLE_VIDEO_DROPS.items():
        assert by_id.get(vid) == reason, vid
    stats = json.loads((sample / "stats.json").read_text())
    assert stats["drops"]["malformed_metadata_row"] == 2 and stats["drops"]["duplicate_video_row"] == 1
    assert stats["counters"]["unknown_task_id"] == 5 and stats["counters"]["caption_length_mismatch"] == 1
    assert stats["counters"]["bad_segment"] == 17
    for reason in ("malformed_csv_row",):
        assert stats["drops"][reason] == 2
    for reason in ("malformed_recipe_json", "no_directions", "no_title", "duplicate_recipe"):
        assert stats["drops"][reason] == 1
    assert stats["release"]["recipes"]["train"] == 46
    assert sum(len(r["segments"]) for r in rows["default/validation-00000-of-00001.parquet"]) == 59
    assert sum(len(r["segments"]) for r in rows["default/train-00000-of-00001.parquet"]) == 50


def test_calibrate_minilm_threshold_on_the_sample(sample, capsys, tmp_path):
    from builders.corpora.sieve_swap.calibrate import main as calibrate

    assert calibrate(["--work-dir", str(tmp_path)]) == 2
    assert "run the build first" in capsys.readouterr().err
    assert calibrate(["--work-dir", str(sample.parent / ".work" / "sieve_swap"), "--sample", "300"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["segments"] == 300 and out["pool"] > 100
    assert out["reference"].endswith("all-mpnet-base-v2") and out["target"].endswith("all-MiniLM-L6-v2")
    assert 0.0 < out["keep_rate"] < 1.0
    # MiniLM keeps the same share at its threshold (up to rounding to whole segments and ties)
    assert abs(out["target_keep_rate"] - out["keep_rate"]) <= 2 / 300
    assert 0.5 < out["threshold"] < 0.9


# ------------------------------------------------------------------------------------------- core v2 findings
def _copy_sample_inputs(dst: Path) -> list[str]:
    """The bundled sample's input files copied to ``dst``, as build flags."""
    import shutil

    from builders.corpora.sieve_swap.flags import SAMPLE_EXCLUDE, SAMPLE_INPUTS

    dst.mkdir(parents=True)
    args = []
    for key, path in SAMPLE_INPUTS.items():
        shutil.copyfile(path, dst / path.name)
        args += [f"--{key}", str(dst / path.name)]
    shutil.copyfile(SAMPLE_EXCLUDE, dst / SAMPLE_EXCLUDE.name)
    return [*args, "--exclude", str(dst / SAMPLE_EXCLUDE.name)]


def test_editing_transcripts_or_exclusions_in_place_reruns_exactly_the_shards_below(sample, tmp_path):
    # the sample's shard size (SAMPLE_SHARD_SIZE): the same shards as the sample build, so the same encoder batches
    # (a similarity's last bits depend on the batch its segment is encoded in) and several shards to rerun or not
    from builders.corpora.sieve_swap import SAMPLE_SHARD_SIZE

    args = [*_copy_sample_inputs(tmp_path / "inputs"), "--shard-size", str(SAMPLE_SHARD_SIZE)]
    out = build(tmp_path / "out", *args)
    assert release_tables(out) == release_tables(sample)
    captions = tmp_path / "inputs" / "raw_caption.json"
    data = json.loads(captions.read_text(encoding="utf-8"))
    vid = "Qe7pM4kDv1X"  # a train video of the sample
    data[vid]["text"] = ["[Music]"] * len(data[vid]["text"])  # its speech is gone: empty_transcript
    captions.write_text(json.dumps(data), encoding="utf-8")  # edited in place, same path
    out = build(tmp_path / "out", *args)
    stats = json.loads((out / "stats.json").read_text())
    steps = stats["steps"]
    for cached in ("read_metadata", "cooking_filter", "exclusion_filter", "read_recipes", "recipe_lemmas"):
        assert steps[cached]["cached_shards"] == steps[cached]["shards"], cached
    # per-item invalidation (issue 19): only the shard holding the edited video is redone below the transcript
    for redone in ("load_transcript", "clean_transcript"):
        assert steps[redone]["computed_shards"] == 1, redone
    for redone in ("swap", "merge"):
        assert steps[redone]["computed_shards"] == 1 < steps[redone]["shards"], redone
    # (the row-wise swap reusing the other rows of a redone shard: test_invalidation.py)
    ids = {r["video_id"] for rows in release_tables(out).values() for r in rows if "video_id" in r}
    assert vid not in ids
    assert stats["drops"]["empty_transcript"] == json.loads((sample / "stats.json").read_text())["drops"][
        "empty_transcript"] + 1
    # the exclusion list is an input too: excluding a validation video re-runs from exclusion_filter on
    (tmp_path / "inputs" / "exclude_ids.txt").write_text("kT3s-9VbQe4\nbN4tQ7xWk2E\n", encoding="utf-8")
    out = build(tmp_path / "out", *args)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["steps"]["cooking_filter"]["cached_shards"] == stats["steps"]["cooking_filter"]["shards"]
    assert stats["steps"]["exclusion_filter"]["cached_shards"] == 0 and stats["drops"]["excluded_id"] == 2
    assert "bN4tQ7xWk2E" not in {r["video_id"] for r in release_tables(out)["default/validation-00000-of-00001.parquet"]}


def test_a_rebuilt_folder_loads_its_new_rows_through_a_warm_datasets_cache(sample, tmp_path, monkeypatch):
    work = ["--work-dir", str(sample.parent / ".work" / "sieve_swap")]  # cached: only swap and merge rerun
    out = build(tmp_path, *work)
    cache = tmp_path / "hf_cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    first = datasets.load_dataset(str(out), split="train", cache_dir=str(cache))
    assert {r["sim_threshold"] for r in first["provenance"]} == {0.75}
    build(tmp_path, *work, "--set", "sim_threshold=0.7500001")
    again = datasets.load_dataset(str(out), split="train", cache_dir=str(cache))
    # float32 in the Features: 0.7500001 is stored as 0.75000012; the old cache would still say 0.75
    (value,) = {r["sim_threshold"] for r in again["provenance"]}
    assert abs(value - 0.7500001) < 1e-7


def test_an_empty_build_never_replaces_the_last_release(sample, tmp_path, capsys):
    work = ["--work-dir", str(sample.parent / ".work" / "sieve_swap")]
    out = build(tmp_path, *work)
    before = release_tables(out)
    assert main(["sieve_swap", "--out", str(tmp_path), "--no-progress", "-q", *work, "--limit", "1"]) == 3
    err = capsys.readouterr().err
    assert "sieve_swap.empty-build" in err and "untouched" in err
    assert release_tables(out) == before  # the last good release is still there, whole
    assert json.loads((tmp_path / "sieve_swap.empty-build" / "stats.json").read_text())["release"] == {}
    assert not (tmp_path / "sieve_swap.empty-build" / "default").exists()
    build(tmp_path, *work)  # the next good build removes the empty build's statistics
    assert not (tmp_path / "sieve_swap.empty-build").exists()


def test_fresh_never_deletes_a_folder_it_did_not_make(tmp_path, monkeypatch, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    assert main(["sieve_swap", "--no-progress", "-q", "--fresh", "--work-dir", "."]) == 2
    assert "refusing to delete" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_release_manifest_holds_no_absolute_path_or_user_name(sample):
    import getpass

    repo = str(Path(__file__).resolve().parents[3])
    for name in ("manifest.json", "build_config.yaml", "stats.json", "README.md"):
        text = (sample / name).read_text(encoding="utf-8")
        assert repo not in text and str(sample.parent) not in text, name
        assert f"/{getpass.getuser()}/" not in text and "/home/" not in text, name
    man = json.loads((sample / "manifest.json").read_text())
    assert man["config"]["recipes"] == "recipes.csv" and man["config"]["exclude"] == ["exclude_ids.txt"]
    assert {f["path"] for fps in man["inputs"].values() for f in fps} >= {"recipes.csv", "raw_caption.json"}
    assert all(len(f["sha256"]) == 64 for fps in man["inputs"].values() for f in fps)
