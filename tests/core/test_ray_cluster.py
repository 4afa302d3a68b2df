"""Ray across processes that are really separate (issue 19 item 7): a two-node Ray cluster on this machine (two
raylets with their own worker processes, as two ``ray start`` make them), a driver in a separate process that joins it
by address, and a work directory both nodes see. Shards run on both nodes and the rows equal the local runner's.
(``tests/perf/bench_ray_cluster.py`` does the same with the real ``sieve_swap`` build CLI.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]

DRIVER = """
import json, sys
from pathlib import Path
from builders.core.orchestrate import run_pipelines
from builders.core.runners import LocalRunner, make_runner
from builders.core.step import Pipeline
from tests.core.toy import Numbers
from tests.core.toy_gpu import NodeTag

def pipes(meet_dir=""):
    return [Pipeline("numbers", Numbers(n=40), [NodeTag(meet_dir=meet_dir)], shard_size=4)]

runner = make_runner("ray", 2, sys.argv[1])
try:  # each shard waits until both nodes have run one (the second actor's start is slow on a loaded machine)
    res = run_pipelines(pipes(str(Path(sys.argv[2]) / "nodes")), Path(sys.argv[2]) / "ray", runner, progress=False)
finally:
    runner.close()
local = run_pipelines(pipes(), Path(sys.argv[2]) / "local", LocalRunner(), progress=False)
print(json.dumps({"ray": list(res.outputs["numbers"].rows()), "local": list(local.outputs["numbers"].rows())}))
"""


def test_a_driver_process_runs_shards_on_two_nodes(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the nodes' workers import the test steps
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        res = subprocess.run([sys.executable, "-c", DRIVER, cluster.address, str(tmp_path)], cwd=REPO,
                             capture_output=True, text=True, timeout=600)
    finally:
        cluster.shutdown()
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert len({r["node"] for r in out["ray"]}) == 2          # both nodes processed shards
    assert [{k: v for k, v in r.items() if k != "node"} for r in out["ray"]] == \
        [{k: v for k, v in r.items() if k != "node"} for r in out["local"]]
