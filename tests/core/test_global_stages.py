"""Global stages (fit cached under the stage, artefacts by path), exact input caching, fan-out accounting, model
teardown and GPU placement on the local runner."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from builders.core.artefacts import artefact_dir, load_arrays, save_arrays
from builders.core.orchestrate import run_pipelines
from builders.core.runners import LocalRunner
from builders.core.step import FitInputs, Pipeline, Resources, Step, input_path

from .toy import Numbers, ToyConfig, numbers, toy_pipelines


@dataclass(eq=False)
class Histogram(Step):
    """A global stage: counts of ``value % 5`` written as an artefact, read back by path in ``setup``."""

    name = "histogram"
    fits = 0

    def fit(self, inputs: FitInputs):
        type(self).fits += 1
        values = np.asarray([r["value"] for r in inputs.data.rows(["value"])])
        save_arrays(inputs.artefact_dir, "hist", {"counts": np.bincount(values % 5, minlength=5)})
        return {"rows": int(len(values))}

    def setup(self, state):
        self.rows = state["rows"]
        self.hist = load_arrays(artefact_dir(state), "hist")["counts"]

    def process(self, rows, out):
        for r in rows:
            out.keep({**r, "same_bucket": int(self.hist[r["value"] % 5]), "of": self.rows})


def _pipes(cfg=ToyConfig()):
    return [Pipeline("numbers", numbers(cfg), [Histogram()], shard_size=8)]


def test_a_global_stage_is_fitted_once_and_its_artefacts_travel_by_path(tmp_path):
    Histogram.fits = 0
    res = run_pipelines(_pipes(), tmp_path, LocalRunner(2), progress=False)
    assert Histogram.fits == 1 and res.steps["histogram"].fit == "ran"
    values = [r["value"] for r in res.outputs["numbers"].rows()]
    expected = np.bincount(np.asarray(values) % 5, minlength=5)
    assert [r["same_bucket"] for r in res.outputs["numbers"].rows()] == [int(expected[v % 5]) for v in values]
    rec = res.fits["histogram"]
    assert rec.artefact_dir.is_dir() and rec.artefact_dir.is_relative_to(tmp_path / "numbers")
    assert (rec.artefact_dir / "hist.npz").is_file() and rec.state["rows"] == 45
    # a resumed build (one shard lost) re-reads the fitted state instead of fitting again
    stage = res.stage("histogram").dir
    (stage / "part-00002.stats.json").unlink()
    again = run_pipelines(_pipes(), tmp_path, LocalRunner(), progress=False)
    assert Histogram.fits == 1 and again.steps["histogram"].fit == "cached"
    assert again.steps["histogram"].cached_shards == again.steps["histogram"].shards - 1
    assert list(again.outputs["numbers"].rows()) == list(res.outputs["numbers"].rows())


def test_fit_must_return_json(tmp_path):
    class Bad(Histogram):
        name = "bad"

        def fit(self, inputs):
            return {"model": object()}

    with pytest.raises(TypeError, match="JSON-serialisable state"):
        run_pipelines([Pipeline("numbers", Numbers(), [Bad()])], tmp_path, LocalRunner(),
                      progress=False)


@dataclass(eq=False)
class ReadsFile(Step):
    """Adds the first line of a declared input file (a step, not a source, reads it)."""

    name = "reads_file"
    input_file: Path | None = input_path()

    def setup(self, state):
        self.text = self.input_file.read_text().splitlines()[0] if self.input_file.is_file() \
            else sorted(p.name for p in self.input_file.iterdir())[0]

    def process(self, rows, out):
        for r in rows:
            out.keep({**r, "text": self.text})


@dataclass(eq=False)
class Tail(Step):
    name = "tail"

    def process(self, rows, out):
        for r in rows:
            out.keep(r)


@dataclass(eq=False)
class Before(Tail):
    name = "before"


@pytest.mark.parametrize("as_dir", [False, True])
def test_editing_a_steps_input_in_place_invalidates_exactly_that_step_and_below(tmp_path, as_dir):
    if as_dir:
        inp = tmp_path / "inputs"
        inp.mkdir()
        (inp / "a.txt").write_text("one")
        edit = inp / "a.txt"
    else:
        inp = edit = tmp_path / "input.txt"
        inp.write_text("one\n")

    def pipes():
        return [Pipeline("numbers", Numbers(), [Before(), ReadsFile(input_file=inp), Tail()], shard_size=8)]

    run_pipelines(pipes(), tmp_path / "w", LocalRunner(), progress=False)
    edit.write_text("two\n" if not as_dir else "two")  # in place (a directory: a file inside it)
    if as_dir:
        (inp / "0.txt").write_text("new first file")
    res = run_pipelines(pipes(), tmp_path / "w", LocalRunner(), progress=False)
    assert res.steps["read_numbers"].cached_shards == res.steps["read_numbers"].shards
    assert res.steps["before"].cached_shards == res.steps["before"].shards
    assert res.steps["reads_file"].cached_shards == 0 and res.steps["tail"].cached_shards == 0
    assert {r["text"] for r in res.outputs["numbers"].rows()} == ({"0.txt"} if as_dir else {"two"})
    assert "reads_file" in res.input_fingerprints


@dataclass(eq=False)
class Explode(Step):
    """A fan-out step: value v becomes v % 3 + 1 rows (parent id kept), multiples of 4 are dropped."""

    name = "explode"
    fan_out = True
    parent_field = "parent"
    lose = False

    def process(self, rows, out):
        for r in rows:
            if r["value"] % 4 == 0:
                out.drop(r["id"], "multiple_of_4")
            elif not (self.lose and r["value"] == 5):
                for k in range(r["value"] % 3 + 1):
                    out.keep({"id": f"{r['id']}.{k}", "parent": r["id"], "value": r["value"]})


def test_fan_out_accounting(tmp_path):
    res = run_pipelines([Pipeline("numbers", Numbers(), [Explode()], shard_size=8)],
                        tmp_path, LocalRunner(), progress=False)
    st = res.steps["explode"]
    values = [i for i in range(50) if i % 10 != 9]
    kept = sum(v % 3 + 1 for v in values if v % 4)
    assert (st.rows_in, st.kept, dict(st.dropped)) == (45, kept, {"multiple_of_4": 13})
    assert st.rows_in + st.added == st.kept + sum(st.dropped.values())
    Explode.lose = True  # a row that comes out neither kept nor dropped breaks the build
    try:
        with pytest.raises(RuntimeError, match="lost 1 input row"):
            run_pipelines([Pipeline("numbers", Numbers(), [Explode()], shard_size=8)],
                          tmp_path / "lose", LocalRunner(), progress=False)
    finally:
        Explode.lose = False


LIVE: list[str] = []  # models this process holds


@dataclass(eq=False)
class ModelStep(Step):
    """Loads a (fake) model in setup and frees it in teardown; checks that no other model is still held."""

    name = "model_a"

    def setup(self, state):
        assert LIVE == [], f"{self.name}: models still held: {LIVE}"
        LIVE.append(self.name)

    def process(self, rows, out):
        assert LIVE == [self.name]
        for r in rows:
            out.keep(r)

    def teardown(self):
        if self.name in LIVE:
            LIVE.remove(self.name)


def test_model_steps_free_their_model_before_the_next_loads(tmp_path):
    second = type("ModelB", (ModelStep,), {"name": "model_b"})
    pipes = [Pipeline("numbers", Numbers(), [ModelStep(), second()], shard_size=8)]
    run_pipelines(pipes, tmp_path, LocalRunner(), progress=False)
    assert LIVE == []


@dataclass(eq=False)
class GpuStep(Step):
    """Records the GPU each worker was given (CUDA_VISIBLE_DEVICES) and its process id."""

    name = "gpu_step"
    def resources(self) -> Resources:
        return Resources(gpus=1.0)

    def process(self, rows, out):
        for r in rows:
            out.keep({**r, "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "pid": os.getpid()})


def test_a_gpu_step_gets_one_worker_per_gpu_whatever_workers_says(tmp_path):
    pipes = [Pipeline("numbers", Numbers(), [GpuStep()], shard_size=4)]
    res = run_pipelines(pipes, tmp_path, LocalRunner(workers=1, gpus=2), progress=False)
    rows = list(res.outputs["numbers"].rows())
    assert {r["gpu"] for r in rows} == {"0", "1"}  # two workers, each pinned to its own GPU
    assert len({r["pid"] for r in rows}) == 2 and os.getpid() not in {r["pid"] for r in rows}
    by_pid = {}
    for r in rows:
        by_pid.setdefault(r["pid"], set()).add(r["gpu"])
    assert all(len(g) == 1 for g in by_pid.values())


def test_a_gpu_step_without_a_gpu_is_a_clear_error(tmp_path):
    pipes = [Pipeline("numbers", Numbers(), [GpuStep()], shard_size=4)]
    with pytest.raises(RuntimeError, match="needs 1 GPU.*0 are visible.*device=cpu"):
        run_pipelines(pipes, tmp_path, LocalRunner(workers=4, gpus=0), progress=False)


def test_shards_record_the_digest_of_their_input(tmp_path):
    res = run_pipelines(toy_pipelines(ToyConfig()), tmp_path, LocalRunner(), progress=False)
    src, first = res.stage_dirs[0][1], res.stage_dirs[1][1]
    for i in range(src.n):
        a = json.loads((src.dir / f"part-{i:05d}.stats.json").read_text())
        b = json.loads((first.dir / f"part-{i:05d}.stats.json").read_text())
        assert b["input_digest"] == a["digest"] and len(a["digest"]) == 64


def test_model_steps_ask_for_a_gpu_only_on_a_cuda_device():
    from builders.core.step import gpus_for_device
    from builders.corpora.marc.config import MarcConfig
    from builders.corpora.marc.pipeline import ChatFilter
    from builders.corpora.marc.pipeline import pipelines as marc_pipelines
    from builders.corpora.sieve_swap.config import SieveSwapConfig
    from builders.corpora.sieve_swap.pipeline import Swap, pipelines

    def swap(cfg):
        return next(s for p in pipelines(cfg) for s in p.steps if isinstance(s, Swap))

    assert [gpus_for_device(d) for d in ("cpu", "cuda", "cuda:1", "mps")] == [0.0, 1.0, 1.0, 0.0]
    assert swap(SieveSwapConfig()).gpus() == 0.0 and swap(SieveSwapConfig(device="cuda")).gpus() == 1.0
    assert swap(SieveSwapConfig(device="cuda")).resources().gpus == 1.0

    def chat_filter(cfg):
        return next(s for p in marc_pipelines(cfg) for s in p.steps if isinstance(s, ChatFilter))

    assert chat_filter(MarcConfig()).gpus() == 0.0 and chat_filter(MarcConfig(device="cuda:0")).gpus() == 1.0
