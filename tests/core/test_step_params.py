"""Steps as dataclasses of their parameters (``builders/core/step.py``, issue 21): the cache key is derived from the
fields, input files are fingerprinted from path fields, execution settings do not key the cache, the row contract
is checked when a pipeline is assembled, and a missing optional package names its extra."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from builders.core.records import Out, Row
from builders.core.step import (
    Pipeline,
    PipelineError,
    Requirement,
    Resources,
    Source,
    Step,
    execution_setting,
    input_path,
)


@dataclass(eq=False)
class Lines(Source):
    name = "lines"
    writes = {"id": str, "text": str, "n": int}
    path: Path | None = input_path()

    def read(self) -> Iterator[Row]:
        yield {"id": "a", "text": "x", "n": 1}


@dataclass(eq=False)
class Upper(Step):
    name = "upper"
    reads = {"text": str}
    writes = {"upper": str}
    min_chars: int = 1
    words: Path | None = input_path(per_item=True)
    device: str = execution_setting("cpu")

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            out.keep({**r, "upper": r["text"].upper()})


@dataclass(eq=False)
class Reads(Step):
    name = "reads"
    reads = None
    writes = {}

    def process(self, rows: list[Row], out: Out) -> None:  # pragma: no cover - never run
        pass


def reader(name: str, fields: dict[str, Any]) -> Step:
    cls = type(name.title(), (Reads,), {"name": name, "reads": fields})
    return dataclass(eq=False)(cls)()


def test_the_cache_key_is_the_fields_less_execution_settings():
    a, b = Upper(min_chars=2, device="cpu"), Upper(min_chars=2, device="cuda")
    assert a.params() == {"min_chars": 2, "words": None, "device": "cpu"}
    assert a.cache_config() == b.cache_config() == {"min_chars": 2, "words": None}
    assert Upper(min_chars=3).cache_config() != a.cache_config()


def test_path_fields_are_inputs_and_per_item_ones_do_not_key_the_stage(tmp_path):
    step = Upper(words=tmp_path / "w.txt")
    assert step.input_paths() == [tmp_path / "w.txt"] and step.stage_input_paths() == []
    assert step.has_item_inputs and Upper().input_paths() == []  # no file given: nothing to fingerprint
    assert Lines(path=tmp_path / "l.txt").stage_input_paths() == [tmp_path / "l.txt"]


def test_a_field_nothing_upstream_writes_fails_at_assembly_with_the_names():
    t0 = time.perf_counter()
    with pytest.raises(PipelineError, match=r"step 'counts' reads field\(s\) \['txet'\]"):
        Pipeline("p", Lines(), [Upper(), reader("counts", {"txet": str})])
    assert time.perf_counter() - t0 < 0.5  # before any work
    Pipeline("p", Lines(), [Upper(), reader("counts", {"upper": str, "n": int})])  # written upstream: fine


def test_a_field_of_another_type_and_removed_or_replaced_fields():
    with pytest.raises(PipelineError, match=r"n \(<class 'str'> here, <class 'int'> from source 'lines'\)"):
        Pipeline("p", Lines(), [reader("typed", {"n": str})])
    gone = dataclass(eq=False)(type("Gone", (Reads,), {"name": "gone", "reads": {}, "removes": ("text",)}))()
    with pytest.raises(PipelineError, match=r"'after' reads field\(s\) \['text'\]"):
        Pipeline("p", Lines(), [gone, reader("after", {"text": str})])
    new = dataclass(eq=False)(type("New", (Reads,), {"name": "new", "reads": {}, "replaces": True,
                                                      "writes": {"pair": str}}))()
    with pytest.raises(PipelineError, match=r"'after' reads field\(s\) \['id'\]"):
        Pipeline("p", Lines(), [new, reader("after", {"id": str})])


def test_an_undeclared_stage_ends_the_check():
    loose = dataclass(eq=False)(type("Loose", (Step,), {"name": "loose", "process": lambda self, rows, out: None}))()
    Pipeline("p", Lines(), [loose, reader("after", {"anything": str})])


def test_a_stage_that_is_not_a_dataclass_is_refused():
    plain = type("Plain", (Step,), {"name": "plain", "process": lambda self, rows, out: None})()
    with pytest.raises(PipelineError, match=r"Plain \('plain'\) are not dataclasses"):
        Pipeline("p", Lines(), [plain])


def test_a_missing_optional_package_names_its_extra():
    needy = dataclass(eq=False)(type("Needy", (Reads,), {"name": "needy", "reads": {},
                                                          "requires": (Requirement("no_such_pkg_x", "gpu"),)}))()
    with pytest.raises(PipelineError, match=r"no_such_pkg_x \(stage 'needy'\): pip install -e '\.\[gpu\]'"):
        Pipeline("p", Lines(), [needy])
    assert not Requirement("json", "cpu").missing()


def test_resources_default_and_gpus():
    assert Upper().resources() == Resources() and Upper().gpus() == 0.0


def test_the_output_fields_and_the_release_reads_are_checked_at_assembly():
    from builders.core.step import check_release_reads

    pipe = Pipeline("p", Lines(), [Upper()])
    assert pipe.output_fields() == {"id": str, "text": str, "n": int, "upper": str}
    check_release_reads([pipe], {"p": {"id": str, "upper": str, "n": Any}})  # written, same or loose type: fine
    check_release_reads([pipe], None)
    with pytest.raises(PipelineError, match=r"reads field\(s\) \['uper'\] of pipeline 'p', which its stages do not"):
        check_release_reads([pipe], {"p": {"uper": str}})
    with pytest.raises(PipelineError, match=r"pipeline 'p' as another type: n \(<class 'str'> read, <class 'int'>"):
        check_release_reads([pipe], {"p": {"n": str}})
    check_release_reads([pipe], {"p": {"absent": str | None, "upper": str | None}})  # optional: read where written
    with pytest.raises(PipelineError, match=r"another type: text \(int \| None read, <class 'str'> written\)"):
        check_release_reads([pipe], {"p": {"n": int | None, "text": int | None}})
    with pytest.raises(PipelineError, match=r"reads pipeline 'q', which this build does not have \(it has \['p'\]\)"):
        check_release_reads([pipe], {"q": {"id": str}})
    loose = dataclass(eq=False)(type("Loose2", (Step,), {"name": "loose", "process": lambda self, rows, out: None}))()
    check_release_reads([Pipeline("p", Lines(), [loose])], {"p": {"anything": str}})  # no contract: not checked


def test_a_reader_reads_only_the_columns_it_declared(tmp_path):
    from builders.core.shards import StageData, write_shard

    write_shard(tmp_path / "s", 0, [{"id": "a", "text": "x", "n": 1}], [], {})
    data = StageData(tmp_path / "s", 1, columns=["id", "n"])
    assert list(data.rows()) == [{"id": "a", "n": 1}] and data.shard_rows(0, ["n"]) == [{"n": 1}]
    with pytest.raises(KeyError, match=r"\['text'\] of .* are not among the fields its reader declared"):
        list(data.rows(["id", "text"]))
    assert list(StageData(tmp_path / "s", 1).rows()) == [{"id": "a", "text": "x", "n": 1}]
