"""The failure policy of the core (issue: transient failures must never become cached drops)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest

from builders.core.errors import BuildIncomplete, ErrorRateExceeded, TransientError, is_transient
from builders.core.orchestrate import run_pipelines
from builders.core.runners import ExecPolicy, LocalRunner
from builders.core.step import Pipeline, Step

from .toy import ToyConfig, counts, numbers, toy_pipelines

FAST = ExecPolicy(retries=2, backoff_s=0.0)


@dataclass(eq=False)
class Flaky(Step):
    """Fails on value 11 with a transient error the first ``fails`` calls of this process, then works."""

    name = "flaky"
    calls = 0
    fails = 0
    error: type[BaseException] = TimeoutError

    def process(self, rows, out) -> None:
        for r in rows:
            if r["value"] == 11:
                type(self).calls += 1
                if type(self).calls <= type(self).fails or os.environ.get("FLAKY_FOREVER"):
                    raise type(self).error("server busy")
            out.keep(r)


def _pipes(cfg=ToyConfig()):
    return [Pipeline("numbers", numbers(cfg), [Flaky()], shard_size=8)]


@pytest.fixture(autouse=True)
def _reset():
    Flaky.calls, Flaky.fails, Flaky.error = 0, 0, TimeoutError
    yield


def test_classification():
    class OutOfMemoryError(RuntimeError):  # the name torch.cuda uses
        pass

    assert is_transient(TimeoutError()) and is_transient(ConnectionResetError()) and is_transient(TransientError())
    assert is_transient(OutOfMemoryError()) and is_transient(RuntimeError("CUDA out of memory. Tried to allocate"))
    assert not is_transient(ValueError("bad row")) and not is_transient(KeyError("x"))


def test_a_transient_failure_is_retried_and_leaves_no_drop(tmp_path):
    Flaky.fails = 2  # the batch fails twice, the second retry succeeds
    res = run_pipelines(_pipes(), tmp_path, LocalRunner(), progress=False, policy=FAST)
    assert counts(res)["flaky"] == (45, 45, {})
    assert Flaky.calls == 3


@pytest.mark.parametrize("error", [TimeoutError, ConnectionError, TransientError])
def test_a_persistent_transient_failure_leaves_the_shard_unfinished_and_a_rerun_retries_it(tmp_path, error):
    Flaky.fails, Flaky.error = 10**6, error
    with pytest.raises(BuildIncomplete, match=r"flaky shard 1: .*server busy"):
        run_pipelines(_pipes(), tmp_path, LocalRunner(), progress=False, policy=FAST)
    stage = next(p for p in (tmp_path / "numbers").iterdir() if p.name.startswith("01_flaky"))
    done = sorted(p.name for p in stage.glob("*.stats.json"))
    assert "part-00001.stats.json" not in done and len(done) == 6  # every other shard finished and cached
    assert all(json.loads((stage / d).read_text())["dropped"] == {} for d in done)  # never a drop
    Flaky.fails = 0  # the server is back: the rerun redoes shard 1 only
    res = run_pipelines(_pipes(), tmp_path, LocalRunner(), progress=False, policy=FAST)
    assert res.steps["flaky"].cached_shards == 6 and counts(res)["flaky"] == (45, 45, {})


def test_persistent_transient_failure_in_a_process_pool(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAKY_FOREVER", "1")  # seen by the spawned workers too
    with pytest.raises(BuildIncomplete, match="flaky shard 1"):
        run_pipelines(_pipes(), tmp_path, LocalRunner(2), progress=False, policy=FAST)


def test_max_error_rate_fails_the_step(tmp_path):
    # the toy's ``fragile`` step drops 1 of 30 rows as step_error: 3.3%
    with pytest.raises(ErrorRateExceeded, match=r"'fragile': 1 of 30 rows .*seven is unlucky"):
        run_pipelines(toy_pipelines(ToyConfig()), tmp_path, LocalRunner(), progress=False, max_error_rate=0.01)
    res = run_pipelines(toy_pipelines(ToyConfig()), tmp_path, LocalRunner(), progress=False, max_error_rate=0.05)
    assert res.steps["fragile"].dropped == {"step_error": 1}


def test_retry_errors_reruns_the_failed_rows_and_exactly_the_shards_downstream(tmp_path, monkeypatch):
    from .toy import Fragile

    @dataclass(eq=False)
    class After(Step):
        name = "after"

        def process(self, rows, out) -> None:
            for r in rows:
                out.keep({**r, "after": True})

    def pipes():
        cfg = ToyConfig()
        p = toy_pipelines(cfg)[0]
        return [Pipeline(p.name, p.source, [*p.steps, After()], shard_size=8)]

    first = run_pipelines(pipes(), tmp_path, LocalRunner(), progress=False)
    assert first.steps["fragile"].dropped == {"step_error": 1}
    real = Fragile.process

    def fixed(self, rows, out):  # the bug is fixed (same step version): 7 now passes
        for r in rows:
            out.keep(r)

    monkeypatch.setattr(Fragile, "process", fixed)
    plain = run_pipelines(pipes(), tmp_path, LocalRunner(), progress=False)
    assert plain.steps["fragile"].dropped == {"step_error": 1}  # a plain rerun keeps the cached result
    res = run_pipelines(pipes(), tmp_path, LocalRunner(), progress=False, policy=ExecPolicy(retry_errors=True))
    assert res.steps["fragile"].dropped == {} and res.steps["fragile"].kept == 30
    n = res.steps["fragile"].shards
    # only the shard that held value 7 (source shard 0) was redone, here and downstream
    assert res.steps["fragile"].cached_shards == n - 1 and res.steps["after"].cached_shards == n - 1
    assert 7 in [r["value"] for r in res.outputs["numbers"].rows()]
    monkeypatch.setattr(Fragile, "process", real)
