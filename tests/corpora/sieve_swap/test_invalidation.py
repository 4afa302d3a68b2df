"""Per-item invalidation of ``sieve_swap`` (issue 19 item 2): an edit of one video's transcript (its slice of
``raw_caption.json``, or its WhisperX file) redoes only the shards that hold that video in the per-video stages, and
the release equals a fresh build from the edited inputs.

Global stages still refit when their input changed (``load_transcript`` splits ``raw_caption.json`` again,
``task_size_filter``, ``title_sieve`` / ``content_sieve`` and ``swap`` see a changed input), but their fitted state
is unchanged by such an edit, so they too redo only the edited video's shard."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import load_corpus, main, make_parser
from builders.core.driver import resolve_config
from builders.core.orchestrate import run_pipelines
from builders.core.runners import LocalRunner
from builders.corpora.sieve_swap.flags import SAMPLE_EXCLUDE, SAMPLE_INPUTS

pytestmark = pytest.mark.slow

#: the stages after ``load_transcript``, each of which holds the edited video in one shard (it survives to the end)
PER_VIDEO = ("load_transcript", "duration_filter", "task_size_filter", "clean_transcript", "title_sieve",
             "content_sieve", "swap", "merge")
#: stages before the transcripts and the recipe pipeline: untouched by a transcript edit
UNTOUCHED = ("read_metadata", "cooking_filter", "exclusion_filter", "read_recipes", "recipe_clean", "recipe_dedup",
             "recipe_lemmas")
EDITED = "bN4tQ7xWk2E"   # a banana-bread video kept in the release (builders/samples/sieve_swap/README.md)


def _inputs(tmp: Path, fmt: str) -> list[str]:
    """The sample's inputs as flags, with the transcripts copied (``raw``) or converted to WhisperX files."""
    raw = json.loads(SAMPLE_INPUTS["transcripts"].read_text())
    if fmt == "raw":
        transcripts = tmp / "raw_caption.json"
        transcripts.write_text(json.dumps(raw))
    else:
        transcripts = tmp / "whisperx"
        transcripts.mkdir()
        for vid, v in raw.items():
            segs = [{"start": s, "end": e, "text": t} for t, s, e in zip(v["text"], v["start"], v["end"])]
            (transcripts / f"{vid}.json").write_text(json.dumps({"segments": segs, "language": "en"}))
    old = time.time() - 60  # older than the fingerprint memo's racy window, as inputs not just written are
    for p in [transcripts, *transcripts.rglob("*")] if transcripts.is_dir() else [transcripts]:
        os.utime(p, (old, old))
    flags = [f"--{k}={v}" for k, v in SAMPLE_INPUTS.items() if k != "transcripts"]
    return [*flags, f"--transcripts={transcripts}", f"--exclude={SAMPLE_EXCLUDE}"]


def _edit(inputs: list[str], fmt: str) -> None:
    """Shorten the first caption line of ``EDITED`` by half a second (its text, and so the recipes it keeps, stay)."""
    path = Path(next(f for f in inputs if f.startswith("--transcripts=")).split("=", 1)[1])
    if fmt == "raw":
        data = json.loads(path.read_text())
        data[EDITED]["end"][0] -= 0.5
        path.write_text(json.dumps(data))
    else:
        f = path / f"{EDITED}.json"
        data = json.loads(f.read_text())
        data["segments"][0]["end"] -= 0.5
        f.write_text(json.dumps(data))


def _args(out: Path, inputs: list[str]) -> list[str]:
    return ["sieve_swap", "--out", str(out), "--no-progress", "-q", "--shard-size", "4",
            "--set", "embedding_model=minilm", *inputs]


def _build(out: Path, inputs: list[str]) -> dict:
    assert main(_args(out, inputs)) == 0
    return json.loads((out / "sieve_swap" / "stats.json").read_text())


def _rerun(out: Path, inputs: list[str]):
    """The pipelines again on the build's work directory (the BuildResult: an unchanged release is not rewritten)."""
    corpus = load_corpus("sieve_swap")
    cfg, _ = corpus.resolve_inputs(resolve_config(corpus, make_parser().parse_args(_args(out, inputs))))
    return run_pipelines(corpus.pipelines(cfg, 4), out / ".work" / "sieve_swap", LocalRunner(), progress=False,
                         log=lambda *_: None)


def _tables(out: Path) -> dict[str, list[dict]]:
    root = out / "sieve_swap"
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in sorted(root.glob("*/*.parquet"))}


@pytest.mark.parametrize("fmt", ["raw", "whisperx"])
def test_editing_one_transcript_redoes_only_its_shards(tmp_path, fmt):
    inputs = _inputs(tmp_path, fmt)
    first = _build(tmp_path / "out", inputs)
    n = first["steps"]["load_transcript"]["shards"]
    assert n >= 5
    assert any(r.get("video_id") == EDITED for rows in _tables(tmp_path / "out").values() for r in rows)
    before = _tables(tmp_path / "out")

    if fmt == "raw":  # nothing changed: nothing is computed, no global stage refits
        work = _rerun(tmp_path / "out", inputs).this_build()
        assert work["shards_computed"] == 0 and work["fits_ran"] == []

    _edit(inputs, fmt)
    edited = _build(tmp_path / "out", inputs)
    steps = edited["steps"]
    assert {k: steps[k]["computed_shards"] for k in PER_VIDEO} == {k: 1 for k in PER_VIDEO}
    assert {k: steps[k]["computed_shards"] for k in UNTOUCHED} == {k: 0 for k in UNTOUCHED}
    assert steps["load_transcript"]["shards"] == n
    after = _tables(tmp_path / "out")
    assert after != before

    fresh = tmp_path / "fresh"
    _build(fresh, inputs)
    assert after == _tables(fresh)
    shutil.rmtree(fresh)


def test_edits_that_change_a_global_stage_redo_its_shards(tmp_path):
    """One video's duration grows past 10 minutes: it is dropped as ``too_long``, its task falls under five videos,
    so ``task_size_filter``'s table changes and every one of its shards is redone (its state keys them); the other
    per-video stages redo only the shards whose rows changed. Then an exclusion list gains an id. The release equals
    a fresh build from the edited inputs."""
    durations, exclude = tmp_path / "video_durations.csv", tmp_path / "exclude_ids.txt"
    shutil.copy(SAMPLE_INPUTS["durations"], durations)
    shutil.copy(SAMPLE_EXCLUDE, exclude)
    inputs = [{"--durations": f"--durations={durations}", "--exclude": f"--exclude={exclude}"}.get(f.split("=")[0], f)
              for f in _inputs(tmp_path, "raw")]
    first = _build(tmp_path / "out", inputs)
    n = first["steps"]["task_size_filter"]["shards"]
    durations.write_text(durations.read_text().replace(f"{EDITED},152.77", f"{EDITED},9999"))
    steps = _build(tmp_path / "out", inputs)["steps"]
    assert steps["read_metadata"]["computed_shards"] == n               # listed again, into the same folder
    assert {k: steps[k]["computed_shards"] for k in ("cooking_filter", "load_transcript", "duration_filter")} == \
        {"cooking_filter": 1, "load_transcript": 1, "duration_filter": 1}
    was = first["steps"]
    assert steps["duration_filter"]["dropped"]["too_long"] == was["duration_filter"]["dropped"]["too_long"] + 1
    assert steps["task_size_filter"]["fit"] == "ran" and steps["task_size_filter"]["computed_shards"] == n
    assert steps["task_size_filter"]["dropped"]["small_task"] == was["task_size_filter"]["dropped"]["small_task"] + 4
    assert 1 <= steps["clean_transcript"]["computed_shards"] < n
    after = _tables(tmp_path / "out")
    assert not any(r.get("video_id") == EDITED for rows in after.values() for r in rows)

    # one more id in the exclusion list (edited in place: its path is config): the excluded set is exclusion_filter's
    # state, so its shards are redone (a look-up) and, after it, only the shard that lost the video
    exclude.write_text(exclude.read_text() + "\nZm4qT8pLx_0\n")
    steps = _build(tmp_path / "out", inputs)["steps"]
    assert steps["read_metadata"]["computed_shards"] == 0 and steps["cooking_filter"]["computed_shards"] == 0
    assert steps["exclusion_filter"]["fit"] == "ran" and steps["exclusion_filter"]["computed_shards"] == n
    assert steps["load_transcript"]["computed_shards"] == 1
    after = _tables(tmp_path / "out")
    assert not any(r.get("video_id") == "Zm4qT8pLx_0" for rows in after.values() for r in rows)

    _build(tmp_path / "fresh", inputs)
    assert after == _tables(tmp_path / "fresh")


def test_editing_one_recipe_reruns_only_the_videos_it_can_pair_with(tmp_path):
    """Issue 36 item 4: one word of one step of "Moist Banana Bread" (recipe 16477). The recipe index is built once
    per build (both sieves share it); the sieves keep their stage folders; the title sieve redoes its shards (its
    state names the index) with the same rows, and the content sieve reruns exactly the videos whose title holds one
    of the recipe's title lemmas (moist, banana, bread): their shards are redone, the other rows of those shards
    reused. The release equals a fresh build from the edited inputs."""
    from builders.core.shards import read_rows
    from builders.corpora.sieve_swap import recipe_index

    recipes = tmp_path / "recipes.csv"
    shutil.copy(SAMPLE_INPUTS["recipes"], recipes)
    inputs = [f"--recipes={recipes}" if f.startswith("--recipes=") else f for f in _inputs(tmp_path, "raw")]
    built = sum(recipe_index.BUILDS.values())
    _build(tmp_path / "out", inputs)
    assert sum(recipe_index.BUILDS.values()) == built + 1          # one index, both sieves
    work = tmp_path / "out" / ".work" / "sieve_swap" / "videos"
    # the stages up to the content sieve (the swap's own pool is keyed by the recipes it reads: issue 36 item 3)
    folders = sorted(p.name for p in work.iterdir() if p.name < "09")

    text = recipes.read_text(encoding="utf-8")
    old = "mash the ripe bananas with a fork"
    assert text.count(old) == 1
    recipes.write_text(text.replace(old, "mash the ripe yellow bananas with a fork"), encoding="utf-8")
    result = _rerun(tmp_path / "out", inputs)
    assert sum(recipe_index.BUILDS.values()) == built + 2          # the edited recipes: one new index
    assert sorted(p.name for p in work.iterdir() if p.name < "09") == folders   # no new folder for the sieves
    steps = result.steps
    title = result.stage("title_sieve")
    assert steps["title_sieve"].fit == "ran" and steps["title_sieve"].computed_shards == title.n
    assert steps["content_sieve"].fit == "ran"
    touched = {"moist", "banana", "bread"}
    shards = [read_rows(title.dir, i, ["video_id", "title_lemmas"]) for i in range(title.n)]
    rerun = [[r["video_id"] for r in rows if touched & set(r["title_lemmas"])] for rows in shards]
    assert 0 < sum(map(len, rerun)) < sum(map(len, shards))
    assert steps["content_sieve"].computed_shards == sum(1 for v in rerun if v) < title.n
    assert steps["content_sieve"].rows_reused == sum(len(rows) for rows, v in zip(shards, rerun) if v) - \
        sum(map(len, rerun))

    _build(tmp_path / "out", inputs)
    after = _tables(tmp_path / "out")
    _build(tmp_path / "fresh", inputs)
    assert after == _tables(tmp_path / "fresh")


def test_one_edited_caption_word_swaps_that_video_alone(tmp_path):
    """Issue 36 item 4, the swap: with every video in one shard, one word of one caption line of ``EDITED`` redoes the
    swap shard but swaps that video alone (the swap is row-wise: the other videos' rows are reused, and the encoder
    embeds that video's segments only); the release equals a fresh build from the edited inputs, row for row."""
    from builders.models import embedding_cache

    inputs = _inputs(tmp_path, "raw")
    args = ["--shard-size", "256"]
    out = tmp_path / "out"
    assert main([*_args(out, inputs), *args]) == 0
    stats = json.loads((out / "sieve_swap" / "stats.json").read_text())["steps"]["swap"]
    assert stats["shards"] == 1 and stats["kept"] >= 3                  # every video in the one shard

    path = Path(next(f for f in inputs if f.startswith("--transcripts=")).split("=", 1)[1])
    data = json.loads(path.read_text())
    first = data[EDITED]["text"][1]
    assert first.startswith("today im making")
    data[EDITED]["text"][1] = first.replace("today", "now")
    path.write_text(json.dumps(data))

    encoded: list[list[str]] = []
    real = embedding_cache.encode_set_cached

    def counting(encoder, texts, cache):
        encoded.append(list(texts))
        return real(encoder, texts, cache)

    embedding_cache.encode_set_cached = counting
    try:
        corpus = load_corpus("sieve_swap")
        cfg, _ = corpus.resolve_inputs(resolve_config(corpus, make_parser().parse_args([*_args(out, inputs), *args])))
        result = run_pipelines(corpus.pipelines(cfg, 256), out / ".work" / "sieve_swap", LocalRunner(),
                               progress=False, log=lambda *_: None)
    finally:
        embedding_cache.encode_set_cached = real
    swap = result.steps["swap"]
    assert swap.computed_shards == 1 and swap.rows_reused == stats["rows_in"] - 1
    assert len(encoded) == 1 and "now im making my favorite banana bread" in encoded[0]   # that video's segments
    assert len(encoded[0]) <= len(data[EDITED]["text"])

    assert main([*_args(out, inputs), *args]) == 0
    after = _tables(out)
    assert main([*_args(tmp_path / "fresh", inputs), *args]) == 0
    assert after == _tables(tmp_path / "fresh")
