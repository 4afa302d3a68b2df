"""The release reads declared fields of the pipelines' output rows (issue 21, "the final step's fields match the
release Features"): each corpus's ``RELEASE_READS`` holds against its pipelines' row contracts under its default and
sample configs (the driver checks the same before any work), and the configs whose rows copy pipeline fields one to
one declare those fields with the type of their release Features."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from builders.core import step as step_module
from builders.core.step import _optional, check_release_reads
from builders.corpora import CORPORA

#: (corpus, release config, pipeline, fields of the config not copied from that pipeline): configs whose rows are
#: ``{k: row[k] for k in FEATURES[config]}`` of the pipeline's output rows
DIRECT = [
    ("sieve_swap", "default", "videos", set()),
    ("sieve_swap", "recipes", "recipes", {"num_segments_top1"}),   # counted by the release
    ("marc", "recipes", "text", set()),
    ("marc", "recipes", "videos", set()),
    ("marc", "pairwise", "pairs", set()),
    ("marc", "joint", "dishes", set()),
]


#: configs that build other final stages (the release's optional fields are absent from some of them)
VARIANTS = {
    "howtostep": ({"labeler": "mptva"}, {"labeler": "llm_timestamps"}, {"rounds": 0}, {"rounds": 2}),
    "showhowto": ({"with_images": True}, {"with_images": False}),
}


@pytest.fixture(autouse=True)
def _requirements_not_checked(monkeypatch):
    """Assembling the pipelines of a config that names a GPU backend must not need its package here."""
    monkeypatch.setattr(step_module, "check_requirements", lambda stages, where: None)


def _python_type(feature: Any) -> Any:
    """The type a row holds for a release feature: a ClassLabel is written from its name."""
    kind = type(feature).__name__
    if kind == "ClassLabel":
        return str
    if kind == "Value":
        dtype = feature.dtype
        return str if dtype in ("string", "large_string") else bool if dtype == "bool" else \
            int if dtype.startswith(("int", "uint")) else float if dtype.startswith("float") else Any
    if kind in ("List", "Sequence", "LargeList") or isinstance(feature, list):
        return list
    if isinstance(feature, dict):
        return dict
    return Any


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_release_reads_hold_against_the_pipelines_of_the_default_and_sample_configs(name):
    corpus = importlib.import_module(CORPORA[name])
    reads = corpus.RELEASE_READS
    assert reads, f"{name} declares no release reads"
    default = corpus.Config()
    sample, is_sample = corpus.resolve_inputs(default)
    assert is_sample
    for cfg in (default, sample, *(dataclasses.replace(sample, **kw) for kw in VARIANTS.get(name, ()))):
        pipes = corpus.pipelines(cfg, corpus.DEFAULT_SHARD_SIZE)
        assert all(p.output_fields() is not None for p in pipes), "every stage declares its row contract"
        check_release_reads(pipes, reads)


@pytest.mark.parametrize("name, config, pipeline, extra", DIRECT)
def test_configs_copied_from_a_pipeline_declare_its_fields_with_their_feature_types(name, config, pipeline, extra):
    corpus = importlib.import_module(CORPORA[name])
    features = importlib.import_module(f"loading_scripts.{name}").FEATURES[config]
    declared = corpus.RELEASE_READS[pipeline]
    assert set(features) - extra <= set(declared), sorted(set(features) - extra - set(declared))
    wrong = {k: (declared[k], _python_type(features[k])) for k in set(features) - extra
             if declared[k] is not Any and _python_type(features[k]) not in (Any, _optional(declared[k])[1])}
    assert not wrong, wrong
