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


def _same_release(a: Path, b: Path) -> list[str]:
    """The Parquet shards of two releases that differ (names or Arrow contents), compared file by file."""
    fa = {str(p.relative_to(a)) for p in a.glob("*/*.parquet")}
    fb = {str(p.relative_to(b)) for p in b.glob("*/*.parquet")}
    diff = sorted(fa ^ fb)
    for rel in sorted(fa & fb):
        if not pq.read_table(a / rel).equals(pq.read_table(b / rel)):
            diff.append(rel)
    return diff


def main(argv: list[str] | None = None) -> int:
    """HowToStep at ``--videos`` (20,000 by default) on HowTo100M-shaped inputs (``scale_inputs.py``): a local build,
    then the same build as a separate driver on a two-node ``ray.cluster_utils.Cluster`` (two raylets, one CPU each)
    with ``--engine ray --workers 2 --ray-address``; prints both timings and whether the releases are equal."""
    import argparse
    import importlib.util
    import json
    import tempfile
    import time

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--videos", type=int, default=20_000)
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-ray-", dir=args.tmp))
    spec = importlib.util.spec_from_file_location("scale_inputs", Path(__file__).with_name("scale_inputs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t = time.time()
    inputs = mod.make_howtostep_inputs(root / "inputs", args.videos, seed=0)
    print(f"inputs: {args.videos} videos in {time.time() - t:.0f} s", flush=True)
    base = ["--transcript-format", "htm_raw", "--set", "llm=replay", "--set", f"llm_replay={inputs['llm_replay']}",
            "--set", "visual_features=simulated", "--set", "rounds=0", "--set", "text_encoder=hash:64",
            "--set", "nasva_text_encoder=hash:64", "--videos", str(inputs["videos"]), "--tasks", str(inputs["tasks"]),
            "--transcripts", str(inputs["transcripts"]), "--no-progress"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def build(name: str, *extra: str) -> float:
        t0 = time.time()
        cmd = [sys.executable, "-m", "builders.build", "howtostep", "--out", str(root / name),
               "--work-dir", str(root / f"work-{name}"), *base, *extra]
        res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=7200)
        if res.returncode:
            raise SystemExit(f"{name} build exited {res.returncode}:\n{res.stderr[-3000:]}")
        print(res.stderr.strip().splitlines()[-1], flush=True)
        return time.time() - t0

    local_s = build("local", "--workers", "1")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray_s = build("ray", "--engine", "ray", "--workers", "2", "--ray-address", cluster.address)
    finally:
        cluster.shutdown()
    diff = _same_release(root / "local" / "howtostep", root / "ray" / "howtostep")
    rows = json.loads((root / "ray" / "howtostep" / "manifest.json").read_text())["release_rows"]
    print(json.dumps({"videos": args.videos, "local_s": round(local_s, 1), "ray_two_nodes_s": round(ray_s, 1),
                      "release_rows": rows, "differing_files": diff, "load": os.getloadavg()}), flush=True)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
