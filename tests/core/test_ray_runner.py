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
