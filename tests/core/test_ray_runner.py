from __future__ import annotations

import pytest

from builders.core.orchestrate import run_pipelines
from builders.core.runners import LocalRunner, RayRunner

from .toy import ToyConfig, counts, toy_pipelines

pytest.importorskip("ray")


@pytest.mark.ray
def test_ray_runner_runs_the_same_pipeline_unchanged(tmp_path):
    local = run_pipelines(toy_pipelines(ToyConfig()), tmp_path / "local", LocalRunner(), progress=False)
    runner = RayRunner(workers=2)  # a local Ray with 2 CPUs
    try:
        ray_res = run_pipelines(toy_pipelines(ToyConfig()), tmp_path / "ray", runner, progress=False)
    finally:
        runner.close()
    assert list(ray_res.outputs["numbers"].rows()) == list(local.outputs["numbers"].rows())
    assert counts(ray_res) == counts(local)
    assert sorted(map(tuple, (d.values() for d in ray_res.drops()))) == \
        sorted(map(tuple, (d.values() for d in local.drops())))


@pytest.mark.ray
def test_ray_places_gpu_actors_by_gpu_count_and_streams_segments(tmp_path):
    """A local Ray with 2 fake GPUs: the GPU step runs on 2 actors (not ``workers``=3), each with its own GPU id,
    chained after a CPU step in one streaming segment; results equal the local runner's."""
    from builders.core.step import Pipeline

    from .toy import Numbers
    from .toy_gpu import CpuTag, GpuTag

    def pipes():
        return [Pipeline("numbers", Numbers(), [CpuTag(), GpuTag()], shard_size=4)]

    runner = RayRunner(workers=3, gpus=2)
    try:
        res = run_pipelines(pipes(), tmp_path / "ray", runner, progress=False)
    finally:
        runner.close()
    rows = list(res.outputs["numbers"].rows())
    assert {r["gpu"] for r in rows} == {"0", "1"}
    by_pid: dict[int, set[str]] = {}
    for r in rows:
        by_pid.setdefault(r["gpu_pid"], set()).add(r["gpu"])
    assert len(by_pid) == 2 and all(len(g) == 1 for g in by_pid.values())
    assert all(r["cpu_pid"] != r["gpu_pid"] for r in rows)
    local = run_pipelines(pipes(), tmp_path / "local", LocalRunner(gpus=2), progress=False)
    strip = ("gpu", "gpu_pid", "cpu_pid")
    assert [{k: v for k, v in r.items() if k not in strip} for r in rows] == \
        [{k: v for k, v in r.items() if k not in strip} for r in local.outputs["numbers"].rows()]
