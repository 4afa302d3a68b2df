"""Per-item invalidation of ``marc`` (issue 19 item 2): an edit of one web page (a file of ``--pages``, or one record
of a WARC file) or of one video's transcript redoes only the shards holding it in the ``text`` / ``videos``
pipelines, plus the global stages whose input changed, and the release equals a fresh build from the edited inputs.

The ``pairs`` and ``dishes`` pipelines are global by nature (HMM+IBM1 is trained by EM over every train pair)."""

from __future__ import annotations

import importlib.util
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
from builders.corpora.marc import chat_content
from builders.corpora.marc.flags import SAMPLE_DIR, SAMPLE_INPUTS

from .test_build import _nan_free

pytestmark = pytest.mark.slow

PAGE = "cookies_step_names.html"          # a Chocolate Chip Cookies recipe of the release, in the WARC's last shard
VIDEO = "Bn4rT8eLq2A"                     # a picked banana-bread video
TEXT_STAGES = ("read_recipe_pages", "select_text_recipes", "ingredient_terms")
VIDEO_STAGES = ("dish_videos", "load_transcript", "chat_filter", "pick_videos", "video_terms", "video_recipe")


def _backdate(*paths: Path) -> None:
    old = time.time() - 60  # older than the fingerprint memo's racy window, as inputs not just written are
    for p in paths:
        for q in [p, *p.rglob("*")] if p.is_dir() else [p]:
            os.utime(q, (old, old))


def _args(out: Path, inputs: list[str]) -> list[str]:
    return ["marc", "--out", str(out), "--no-progress", "-q", "--shard-size", "2", *inputs]


def _build(out: Path, inputs: list[str]) -> dict:
    assert main(_args(out, inputs)) == 0
    return json.loads((out / "marc" / "stats.json").read_text())


def _computed(stats: dict, names) -> dict[str, int]:
    return {k: stats["steps"][k]["computed_shards"] for k in names}


def _release(out: Path) -> dict[str, list[dict]]:
    """Every Parquet file of a release (the drops too) as python rows."""
    root = out / "marc"
    files = [*sorted(root.glob("*/*.parquet")), root / "drops.parquet"]
    return {str(p.relative_to(root)): _nan_free(pq.read_table(p).to_pylist()) for p in files}


def _edit_page(pages: Path) -> None:
    p = pages / PAGE
    text = p.read_text()
    assert "for 11 minutes" in text
    p.write_text(text.replace("for 11 minutes", "for 12 minutes"))


def test_editing_one_page_or_one_transcript_redoes_only_their_shards(tmp_path, monkeypatch):
    pages = tmp_path / "pages"
    shutil.copytree(SAMPLE_DIR / "pages", pages)
    captions = tmp_path / "raw_caption.json"
    shutil.copy(SAMPLE_INPUTS["transcripts"], captions)
    _backdate(pages, captions)
    inputs = [f"--pages={pages}", f"--videos={SAMPLE_INPUTS['videos']}", f"--transcripts={captions}",
              f"--youcook2={SAMPLE_INPUTS['youcook2']}",
              f"--youcook2-transcripts={SAMPLE_INPUTS['youcook2_transcripts']}"]
    first = _build(tmp_path / "out", inputs)
    n_text = first["steps"]["read_recipe_pages"]["shards"]
    n_videos = first["steps"]["load_transcript"]["shards"]
    assert n_text >= 3 and n_videos >= 5
    before = _release(tmp_path / "out")

    # one web page: its shard is parsed again; the videos are not processed again (the dish table is the same),
    # only video_recipe intersects again with the dish vocabulary
    _edit_page(pages)
    st = _build(tmp_path / "out", inputs)
    assert st["steps"]["list_recipe_pages"]["computed_shards"] == n_text     # listed again, into the same folder
    assert st["steps"]["read_recipe_pages"]["computed_shards"] == 1
    assert st["steps"]["select_text_recipes"]["fit"] == "ran"
    assert st["steps"]["ingredient_terms"]["computed_shards"] == 1
    assert _computed(st, VIDEO_STAGES[:-1]) == {k: 0 for k in VIDEO_STAGES[:-1]}
    assert st["steps"]["video_recipe"]["computed_shards"] == n_videos
    after_page = _release(tmp_path / "out")
    assert after_page != before

    # one video's transcript: its shard in every videos stage; the classifier is not trained again
    trained = []
    train = chat_content.train_chat_classifier
    monkeypatch.setattr(chat_content, "train_chat_classifier", lambda *a: trained.append(a) or train(*a))
    data = json.loads(captions.read_text())
    data[VIDEO]["end"][6] -= 0.5                 # "then pour in the melted butter ...": a content sentence
    captions.write_text(json.dumps(data))
    st = _build(tmp_path / "out", inputs)
    assert _computed(st, TEXT_STAGES) == {k: 0 for k in TEXT_STAGES}
    assert _computed(st, VIDEO_STAGES) == {"dish_videos": 0, **{k: 1 for k in VIDEO_STAGES[1:]}}
    assert st["steps"]["load_transcript"]["fit"] == st["steps"]["chat_filter"]["fit"] == "ran"
    assert trained == []
    after = _release(tmp_path / "out")
    assert after != after_page

    monkeypatch.undo()
    _build(tmp_path / "fresh", inputs)
    assert after == _release(tmp_path / "fresh")


def _make_warc(pages: Path, out: Path) -> None:
    """The sample's WARC (``builders/samples/marc/make_warc.py``) written from ``pages``."""
    spec = importlib.util.spec_from_file_location("marc_make_warc", SAMPLE_DIR / "make_warc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.PAGES = pages
    module.make_warc(out)


def test_editing_one_warc_record_redoes_only_its_shard(tmp_path):
    pages = tmp_path / "pages"
    shutil.copytree(SAMPLE_DIR / "pages", pages)
    warc = tmp_path / "crawl" / "recipes.warc.gz"
    _make_warc(pages, warc)
    assert warc.read_bytes() == SAMPLE_INPUTS["warc"][0].read_bytes()
    _backdate(warc)
    inputs = [f"--warc={warc.parent}"]                                # text only: pages, pairs, dishes
    first = _build(tmp_path / "out", inputs)
    n = first["steps"]["read_recipe_pages"]["shards"]
    assert n >= 3
    before = _release(tmp_path / "out")

    corpus = load_corpus("marc")
    cfg, _ = corpus.resolve_inputs(resolve_config(corpus, make_parser().parse_args(_args(tmp_path / "out", inputs))))
    again = run_pipelines(corpus.pipelines(cfg, 2), tmp_path / "out" / ".work" / "marc", LocalRunner(),
                          progress=False, log=lambda *_: None).this_build()
    assert again["shards_computed"] == 0 and again["fits_ran"] == []     # nothing changed: nothing is done

    # the record is one of the last ones: the records before it keep their bytes and offsets
    _edit_page(pages)
    _make_warc(pages, warc)
    st = _build(tmp_path / "out", inputs)
    assert st["steps"]["list_recipe_pages"]["computed_shards"] == n
    # the selection is fitted again, and only the shard whose recipes' outcome changed is redone (a dish's shards
    # when its members change; here the edited recipe's own)
    assert _computed(st, TEXT_STAGES) == {"read_recipe_pages": 1, "select_text_recipes": 1, "ingredient_terms": 1}
    assert st["steps"]["recipe_instructions"]["computed_shards"] == 1
    assert st["steps"]["select_text_recipes"]["fit"] == "ran"
    after = _release(tmp_path / "out")
    assert after != before
    _build(tmp_path / "fresh", inputs)
    assert after == _release(tmp_path / "fresh")
