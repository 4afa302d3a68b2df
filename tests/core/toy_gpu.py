"""Steps that record where they ran: a CPU step and a one-GPU step (for placement tests on fake GPUs)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from builders.core.step import Resources, Step


def _gpu_ids() -> str:
    try:
        import ray

        if ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE:
            return ",".join(str(g) for g in ray.get_gpu_ids())
    except Exception:  # noqa: BLE001 - not inside Ray
        pass
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


@dataclass(eq=False)
class CpuTag(Step):
    name = "cpu_tag"

    def process(self, rows, out) -> None:
        for r in rows:
            out.keep({**r, "cpu_pid": os.getpid()})


@dataclass(eq=False)
class GpuTag(Step):
    name = "gpu_tag"

    def resources(self) -> Resources:
        return Resources(gpus=1.0)

    def process(self, rows, out) -> None:
        time.sleep(0.3)  # a shard takes a while, as on a real GPU: the pool's second actor gets work too
        for r in rows:
            out.keep({**r, "gpu": _gpu_ids(), "gpu_pid": os.getpid()})


@dataclass(eq=False)
class NodeTag(Step):
    """Records the Ray node each shard ran on (a slow shard, so that a pool's second actor gets work too). With
    ``meet_dir``, a shard also waits (at most ``meet_timeout_s``) until shards have run on ``meet_nodes`` nodes: the
    pool's first actor stays busy until its second one, on the other node, has started and taken a shard, however
    long that start takes on a loaded machine."""

    name = "node_tag"
    meet_dir: str = ""
    meet_nodes: int = 2
    meet_timeout_s: float = 120.0

    def process(self, rows, out) -> None:
        import ray

        time.sleep(0.5)
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
        if self.meet_dir:
            os.makedirs(self.meet_dir, exist_ok=True)
            open(os.path.join(self.meet_dir, node or "local"), "w").close()
            deadline = time.monotonic() + self.meet_timeout_s
            while len(os.listdir(self.meet_dir)) < self.meet_nodes and time.monotonic() < deadline:
                time.sleep(0.1)
        for r in rows:
            out.keep({**r, "node": node})
