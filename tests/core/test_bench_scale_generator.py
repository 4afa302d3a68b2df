"""The input generators of the scale benchmark (``tests/perf/bench_scale.py``, issue 19) write inputs the readers
accept: a few HowTo100M-shaped videos and a few marc recipe pages, and the edit-one helpers change one word of one
item only. The benchmark itself (whole builds at 1,000+ videos) runs with ``make bench``, not here."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[1] / "perf"


def _load(name: str):
    path = PERF / f"{name}.py"
    if not path.exists():
        pytest.skip(f"{path} not present")
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load("bench_scale")


def test_howtostep_inputs_are_valid(tmp_path, bench):
    from builders.sources import transcripts

    got = bench.make_howtostep(tmp_path / "in", 4, seed=1)
    args = got["args"]
    for flag in ("--videos", "--tasks", "--transcripts", "--transcript-format"):
        assert flag in args
    videos = Path(bench._arg_value(args, "--videos"))
    with open(videos, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert set(rows[0]) >= {"video_id", "category_1", "category_2", "rank", "task_id"}
    ids = {r["video_id"] for r in rows}
    task_ids = {line.split("\t")[0] for line in Path(bench._arg_value(args, "--tasks")).read_text().splitlines()}
    assert {r["task_id"] for r in rows} <= task_ids
    captions = got["raw_caption"]
    transcripts.check_raw_caption_file(str(captions))  # the build's own whole-file check
    data = json.loads(captions.read_text())
    assert set(data) == ids
    for caps in data.values():
        assert len(caps["text"]) == len(caps["start"]) == len(caps["end"]) >= 10
        assert all(s < e for s, e in zip(caps["start"], caps["end"]))
    replay = Path(next(a.split("=", 1)[1] for a in args if a.startswith("llm_replay=")))
    answers = [json.loads(line) for line in replay.read_text().splitlines()]
    assert {a["video_id"] for a in answers} == ids
    assert all("1." in a["raw_output"] for a in answers)


def test_edit_one_caption_changes_one_video_only(tmp_path, bench):
    got = bench.make_howtostep(tmp_path / "in", 5, seed=2)
    path = got["raw_caption"]
    before_raw = path.read_bytes()
    before = json.loads(before_raw)
    what = bench.edit_one_caption(path, seed=2)
    after = json.loads(path.read_bytes())
    changed = [v for v in before if before[v] != after[v]]
    assert len(changed) == 1 and what.startswith(changed[0])
    vid = changed[0]
    diffs = [(a, b) for a, b in zip(before[vid]["text"], after[vid]["text"]) if a != b]
    assert len(diffs) == 1
    a, b = diffs[0]
    assert len(a.split()) == len(b.split()) and sum(x != y for x, y in zip(a.split(), b.split())) == 1
    assert before[vid]["start"] == after[vid]["start"]
    # edited in place: the bytes that differ lie inside one JSON string (every other video's bytes are unchanged)
    raw = path.read_bytes()
    p = next(i for i, (x, y) in enumerate(zip(before_raw, raw)) if x != y)
    q = next(i for i, (x, y) in enumerate(zip(before_raw[::-1], raw[::-1])) if x != y)
    assert b'"' not in before_raw[p:len(before_raw) - q] and b'"' not in raw[p:len(raw) - q]


def test_marc_pages_are_valid(tmp_path, bench):
    from builders.core.records import Count, Drop
    from builders.corpora.marc.text import select_text_recipes
    from builders.sources import html_pages, schema_org

    got = bench.make_marc_pages(tmp_path / "in", 60, seed=3)
    assert got["args"] == ["--pages", str(got["pages"])]
    assert len(html_pages.list_pages(got["pages"])) == 60
    recipes, drops = [], Counter()
    for item in schema_org.read_schema_recipes(html_pages.read_html_pages(got["pages"])):
        if isinstance(item, Drop):
            drops[item.reason] += 1
        elif not isinstance(item, Count):
            recipes.append(item)
    assert drops == Counter({"no_schema_recipe": 1})
    selected = select_text_recipes(recipes)
    assert selected.counts["kept"] >= 45 and selected.counts["dishes"] >= 3
    assert selected.counts["non_english"] == 1 and selected.counts["title_too_long"] == 1
    assert "rare_title_word" not in selected.counts  # the tail keeps the common-word cut at 1


def test_marc_edit_changes_one_page(tmp_path, bench):
    got = bench.make_marc_pages(tmp_path / "in", 30, seed=4)
    before = {p.name: p.read_text() for p in got["pages"].iterdir()}
    bench._apply_marc_edit(got["edit"])
    after = {p.name: p.read_text() for p in got["pages"].iterdir()}
    assert [k for k in before if before[k] != after[k]] == [Path(got["edit"]["file"]).name]


def test_marc_pages_are_deterministic(tmp_path, bench):
    a = bench.make_marc_pages(tmp_path / "a", 20, seed=5)["pages"]
    b = bench.make_marc_pages(tmp_path / "b", 20, seed=5)["pages"]
    assert {p.name: p.read_bytes() for p in a.iterdir()} == {p.name: p.read_bytes() for p in b.iterdir()}
