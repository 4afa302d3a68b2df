"""docs/new-corpus.md: the example corpus made of shared steps builds from the page as written, registered by one
line, and its misspelt field fails at assembly."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

from builders.core.step import PipelineError

DOC = Path(__file__).resolve().parents[1] / "docs" / "new-corpus.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    return max(blocks, key=len)


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    from builders import corpora

    pkg = tmp_path / "pkgs" / "cooking_asr"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(_example(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.setitem(corpora.CORPORA, "cooking_asr", "cooking_asr")  # the one registry line
    yield importlib.import_module("cooking_asr")
    sys.modules.pop("cooking_asr", None)


def _inputs(root: Path) -> dict[str, str]:
    root.mkdir()
    (root / "HowTo100M_v1.csv").write_text(
        "video_id,category_1,category_2,rank,task_id\n"
        "vidAAAAAAA1,Food and Entertaining,Recipes,1,101\n"
        "vidBBBBBBB2,Cars & Other Vehicles,Repair,2,202\n"
        "vidCCCCCCC3,Food and Entertaining,Recipes,3,101\n", encoding="utf-8")
    (root / "task_ids.csv").write_text("101\tMake Pancakes\n202\tChange a Tire\n", encoding="utf-8")
    caps = {"vidAAAAAAA1": {"start": [0.0, 2.0], "end": [2.0, 4.0], "text": ["mix the flour", "add milk"]},
            "vidBBBBBBB2": {"start": [0.0], "end": [1.0], "text": ["loosen the nuts"]},
            "vidCCCCCCC3": {"start": [1.0], "end": [3.0], "text": ["flip the pancake"]}}
    (root / "raw_caption.json").write_text(json.dumps(caps), encoding="utf-8")
    return {"videos": str(root / "HowTo100M_v1.csv"), "tasks": str(root / "task_ids.csv"),
            "transcripts": str(root / "raw_caption.json")}


def test_the_example_corpus_builds_from_the_page(corpus, tmp_path):
    from builders import build_corpus

    lines = [ln for ln in _example().strip().splitlines() if ln.strip()]
    assert len(lines) <= 30, len(lines)   # the "30-line example" (blank lines not counted)
    r = build_corpus("cooking_asr", out=tmp_path / "out", inputs=_inputs(tmp_path / "in"), quiet=True)
    assert r.release == tmp_path / "out" / "cooking_asr"
    assert r.rows == {"default": {"train": 2}}
    import pyarrow.parquet as pq

    rows = pq.read_table(r.release / "default" / "train-00000-of-00001.parquet").to_pylist()
    assert rows == [{"video_id": "vidAAAAAAA1", "task": "Make Pancakes", "segments": 2},
                    {"video_id": "vidCCCCCCC3", "task": "Make Pancakes", "segments": 1}]
    assert r.stats["steps"]["keep_category"]["dropped"] == {"other_category": 1}
    # the default card (cards/default.md): its tables filled from stats.json, no placeholder left
    readme = (r.release / "README.md").read_text(encoding="utf-8")
    assert "| default | train | 2 |" in readme and "| other_category | 1 |" in readme
    assert "$" not in readme.split("---", 2)[2]
    assert "license: cc-by-4.0" in readme


def test_a_misspelt_field_fails_at_assembly(corpus):
    bad = corpus.KeepCategory(category="x")
    bad.reads = {"categroy_1": str}
    with pytest.raises(PipelineError, match=r"step 'keep_category' reads field\(s\) \['categroy_1'\]"):
        corpus.Pipeline("videos", corpus.HowTo100MSource(), [bad])
