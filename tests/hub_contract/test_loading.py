"""The loading helpers (``loading_scripts.<corpus>.load``, ``loading_scripts.hub``) and the built corpora against the
fake Hub: local folder first, then ``repo=``, then ``$PROCVID_HUB_ORG``, then the default repo."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from builders import publish
from builders.release import write_readme, write_split
from loading_scripts import hub, howtostep, marc, sieve_swap

ROOT = Path(__file__).resolve().parents[2]


def recipe(i: int, tag: str = "") -> dict:
    return {"recipe_id": i, "title": f"Cake {i}{tag}", "ingredients": ["1 c. flour"], "directions": ["Mix.", "Bake."],
            "ner": ["flour"], "link": "www.example.com/x", "source": "Gathered", "num_segments_top1": i % 3}


def sieve_swap_recipes(root: Path, n: int, tag: str = "") -> Path:
    """A sieve_swap release holding only its ``recipes`` config (enough to load through the corpus module)."""
    feats = {"recipes": sieve_swap.FEATURES["recipes"]}
    write_split(root, "recipes", "train", [recipe(i, tag) for i in range(n)], feats["recipes"], 2)
    write_readme(root, features_by_config=feats, splits_by_config={"recipes": ["train"]}, default_config="recipes",
                 card=sieve_swap.CARD, title="Sieve & Swap", body="test release")
    return root


def titles(ds) -> list[str]:
    return [r["title"] for r in ds]


def test_corpus_load_resolves_local_then_repo_then_env_then_default(fake_hub, tmp_path, monkeypatch):
    publish.publish(sieve_swap_recipes(tmp_path / "a" / "sieve_swap", 3, " hub"), "acme/sieve_swap", "v1.0.0")
    publish.publish(sieve_swap_recipes(tmp_path / "b" / "sieve_swap", 4, " env"), "envorg/sieve_swap", "v1.0.0")
    publish.publish(sieve_swap_recipes(tmp_path / "c" / "sieve_swap", 2, " default"),
                    f"{hub.DEFAULT_ORG}/sieve_swap", "v2.0.0")
    work = tmp_path / "work"
    sieve_swap_recipes(work / "sieve_swap", 5, " local")
    monkeypatch.chdir(work)
    monkeypatch.delenv(hub.ORG_ENV, raising=False)

    # 1. the local folder ./sieve_swap
    assert titles(sieve_swap.load("recipes", split="train")) == [f"Cake {i} local" for i in range(5)]
    # 2. repo= (and a version), map-style and streaming
    assert titles(sieve_swap.load("recipes", split="train", repo="acme/sieve_swap", revision="v1.0.0")) == \
        [f"Cake {i} hub" for i in range(3)]
    it = sieve_swap.load("recipes", split="train", repo="acme/sieve_swap", revision="v1.0.0", streaming=True)
    assert titles(it) == [f"Cake {i} hub" for i in range(3)]
    # 3. the environment's org, 4. the default org (no local folder in an empty directory)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.setenv(hub.ORG_ENV, "envorg")
    assert titles(sieve_swap.load("recipes", split="train", revision="v1.0.0")) == [f"Cake {i} env" for i in range(4)]
    monkeypatch.delenv(hub.ORG_ENV)
    assert titles(sieve_swap.load("recipes", split="train")) == [f"Cake {i} default" for i in range(2)]
    dd = sieve_swap.load("recipes")
    assert list(dd) == ["train"] and dd["train"].features == sieve_swap.FEATURES["recipes"]


def test_resolve_order_without_network(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(hub.ORG_ENV, raising=False)
    assert hub.resolve("marc") == f"{hub.DEFAULT_ORG}/marc"
    monkeypatch.setenv(hub.ORG_ENV, "acme")
    assert hub.resolve("marc") == "acme/marc"
    assert hub.resolve("marc", repo="other/marc_v2") == "other/marc_v2"
    (tmp_path / "marc").mkdir()
    assert hub.resolve("marc") == str(tmp_path / "marc")
    assert hub.resolve("marc", revision="v1.0.0") == "acme/marc"
    with pytest.raises(ValueError, match="namespaced"):
        hub.resolve("marc", repo="marc")


@pytest.mark.parametrize("module", [sieve_swap, marc, howtostep])
def test_an_unknown_config_is_refused_by_name(module):
    with pytest.raises(ValueError, match="unknown .* config 'nope'"):
        module.load("nope")


@pytest.mark.parametrize("corpus", ["sieve_swap", "marc", "howtostep"])
def test_a_built_corpus_publishes_and_loads_by_version(fake_hub, tmp_path, corpus):
    """The release folders ``make sample`` builds (CI builds them before the tests); no per-corpus code."""
    built = ROOT / corpus
    if not (built / "README.md").is_file():
        if os.environ.get("CI") and corpus in ("sieve_swap", "marc"):
            pytest.fail(f"{built} is not built: CI runs `make sample` before the tests")
        pytest.skip(f"{built} is not built (make sample)")
    folder = tmp_path / corpus
    shutil.copytree(built, folder, ignore=shutil.ignore_patterns(".*"))
    module = {"sieve_swap": sieve_swap, "marc": marc, "howtostep": howtostep}[corpus]
    layout = publish.read_layout(folder)
    got = publish.publish(folder, f"acme/{corpus}", "v1.0.0")
    assert got["status"] == "published"
    for cfg, splits in layout.splits.items():
        dd = module.load(cfg, repo=f"acme/{corpus}", revision="v1.0.0")
        assert {s: dd[s].num_rows for s in splits} == layout.rows[cfg]
