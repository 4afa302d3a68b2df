"""Benchmark (not in the suite): Ray across processes that are really separate (issue 19 item 7), with the real
build: a two-node Ray cluster on this machine (two
raylets, each its own processes, as ``ray start`` makes them), the build CLI as a separate driver process with
``--engine ray --ray-address <addr>``, and a work directory every node sees. The release equals the local one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _tables(root: Path) -> dict[str, list[dict]]:
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in sorted(root.glob("*/*.parquet"))}


def _build(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "builders.build", "sieve_swap", "--out", str(out), "--no-progress",
                           "--shard-size", "4", *extra], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)


def test_two_node_cluster_builds_the_same_release(tmp_path):
    from ray.cluster_utils import Cluster

    local = _build(tmp_path / "local")
    assert local.returncode == 0, local.stderr[-3000:]

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        import ray

        ray.init(address=cluster.address, log_to_driver=False)
        try:
            nodes = [n for n in ray.nodes() if n["Alive"]]
            assert len(nodes) == 2 and len({n["NodeManagerPort"] for n in nodes}) == 2
            assert len({n["NodeID"] for n in nodes}) == 2
        finally:
            ray.shutdown()
        # a separate driver process connects to the running cluster: 2 actors of 1 CPU each need both nodes
        res = _build(tmp_path / "ray", "--engine", "ray", "--workers", "2", "--ray-address", cluster.address)
        assert res.returncode == 0, res.stderr[-3000:]
    finally:
        cluster.shutdown()
    got, want = _tables(tmp_path / "ray" / "sieve_swap"), _tables(tmp_path / "local" / "sieve_swap")
    assert got.keys() == want.keys() and got == want
