"""Lazy release schemas (issue 19, the cached rerun): the CLI and the four corpora import without ``datasets`` (half a
second), a release whose features are a callable is keyed by the files that define them, and rows of a config that
has no features are an error, not a silent omission."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from builders.release.flow import ReleaseSpec, code_key, release_key, schema_files, write_release

from .test_flow import FEATURES, INFO, SPLITS, ToyConfig, toy_result, toy_spec

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_and_the_corpora_import_without_datasets():
    code = ("import sys, builders.build, builders.api\n"
            "from builders.corpora import CORPORA, load\n"
            "[load(name) for name in CORPORA]\n"
            "print(sorted(m for m in sys.modules if m == 'datasets' or m.startswith('datasets.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_schema_files_are_the_loading_script_and_its_package_without_importing_it():
    before = set(sys.modules)
    files = schema_files("loading_scripts.sieve_swap")
    assert ROOT / "loading_scripts" / "sieve_swap.py" in files and ROOT / "loading_scripts" / "hub.py" in files
    assert all(p.suffix == ".py" for p in files)
    assert "loading_scripts.sieve_swap" in before or "loading_scripts.sieve_swap" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="no loading script"):
        schema_files("loading_scripts.no_such_corpus")


def test_lazy_features_need_key_files(tmp_path):
    with pytest.raises(ValueError, match="lazy features need key_files"):
        ReleaseSpec(corpus="toy", features=lambda: {"items": FEATURES}, card_template=tmp_path / "card.md", rows={})


def test_lazy_features_are_keyed_by_their_source_and_written_like_eager_ones(tmp_path):
    result = toy_result(tmp_path / "work")
    eager = toy_spec(result, tmp_path / "card.md")
    source = tmp_path / "schema.py"
    source.write_text("FEATURES = ...  # v1\n", encoding="utf-8")
    calls = []

    def features():
        calls.append(1)
        return {"items": FEATURES}

    lazy = dataclasses.replace(eager, features=features, key_files=(source,))
    key = release_key(result, ToyConfig(), INFO, lazy)
    assert calls == [] and "schema.py" in {name for name, _ in code_key(lazy)}
    source.write_text("FEATURES = ...  # v2\n", encoding="utf-8")
    assert release_key(result, ToyConfig(), INFO, lazy) != key   # an edit of the schema file rewrites the release
    got = write_release(result, ToyConfig(), tmp_path / "lazy" / "toy", dict(INFO), lazy)
    assert calls == [1] and sum(got["items"].values()) == 12 and set(got["items"]) <= set(SPLITS)
    assert release_key(result, ToyConfig(), INFO, lazy) == got.key   # needing the features did not change the key
    again = write_release(result, ToyConfig(), tmp_path / "lazy" / "toy", dict(INFO),
                          dataclasses.replace(eager, features=features, key_files=(source,)))
    assert again.up_to_date and calls == [1]   # up to date: the features were never needed


def test_rows_of_a_config_without_features_are_an_error(tmp_path):
    result = toy_result(tmp_path / "work")
    spec = toy_spec(result, tmp_path / "card.md")
    spec.rows = {**spec.rows, "other": {"train": lambda: iter(())}}
    with pytest.raises(ValueError, match=r"config\(s\) \['other'\] that have no features"):
        write_release(result, ToyConfig(), tmp_path / "out" / "toy", dict(INFO), spec)


def test_features_given_as_dtype_names_are_datasets_values_and_a_bad_name_is_named(tmp_path):
    from datasets import Features, Value

    spec = ReleaseSpec(corpus="toy", features={"items": {"id": "int64", "text": "string"}}, rows={})
    assert spec.feature_map() == {"items": Features({"id": Value("int64"), "text": Value("string")})}
    assert spec.card_template.name == "default.md" and spec.card_template.is_file()
    bad = ReleaseSpec(corpus="toy", features={"items": {"id": "int64", "text": "strng"}}, rows={})
    with pytest.raises(ValueError, match=r"config 'items', field 'text': 'strng' is not a dtype name"):
        bad.feature_map()
