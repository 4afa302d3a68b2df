"""Runners execute one step over the shards of its input: in-process / a local worker pool, or Ray Data.

Both call :func:`run_shard`, so the same step gives the same shard files whichever runner runs it
(ARCHITECTURE.md "runners"). A runner only decides where ``setup`` and ``process`` run.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from .records import Out
from .shards import read_rows, write_shard
from .step import Step

STEP_ERROR = "step_error"


def _process_isolated(step: Step, rows: list[dict], out: Out) -> None:
    """Run ``step.process`` on the batch; if it raises, retry row by row and drop only the rows that fail.

    If every row fails on its own with the same exception type the failure is systemic (a missing model, a bug),
    and it is raised instead of dropping the whole input.
    """
    trial = Out(out.stage)
    try:
        step.process(rows, trial)
    except Exception:
        failures: list[BaseException] = []
        for row in rows:
            one = Out(out.stage)
            try:
                step.process([row], one)
            except Exception as e:  # noqa: BLE001 - recorded per row
                failures.append(e)
                out.drop(row.get(step.id_field, "?"), STEP_ERROR, f"{type(e).__name__}: {e}")
                continue
            out.rows.extend(one.rows)
            out.drops.extend(one.drops)
            out.counters.update(one.counters)
        if rows and len(failures) == len(rows) and len({type(e) for e in failures}) == 1:
            raise failures[0]
        return
    out.rows.extend(trial.rows)
    out.drops.extend(trial.drops)
    out.counters.update(trial.counters)


def run_shard(step: Step, in_dir: Path, i: int, out_dir: Path) -> dict[str, Any]:
    """Process shard ``i`` of ``in_dir`` with a set-up ``step`` and write shard ``i`` of ``out_dir``."""
    t0 = time.perf_counter()
    rows = read_rows(in_dir, i)
    out = Out(step.name)
    _process_isolated(step, rows, out)
    if len(out.rows) + len(out.drops) != len(rows):
        raise RuntimeError(f"step {step.name!r} broke the row accounting on shard {i}: "
                           f"{len(rows)} in, {len(out.rows)} kept + {len(out.drops)} dropped")
    stats = {
        "rows_in": len(rows),
        "kept": len(out.rows),
        "dropped": dict(Counter(d.reason for d in out.drops)),
        "counters": dict(out.counters),
        "seconds": round(time.perf_counter() - t0, 4),
    }
    write_shard(out_dir, i, out.rows, out.drops, stats)
    return stats


# ---------------------------------------------------------------- local runner
_WORKER_STEP: Step | None = None


def _init_worker(step: Step, state: Any) -> None:
    global _WORKER_STEP
    step.setup(state)
    _WORKER_STEP = step


def _run_in_worker(in_dir: Path, i: int, out_dir: Path) -> tuple[int, dict[str, Any]]:
    assert _WORKER_STEP is not None
    return i, run_shard(_WORKER_STEP, in_dir, i, out_dir)


class LocalRunner:
    """In-process with ``workers=1`` (the default); a pool of ``workers`` spawned processes otherwise."""

    engine = "local"

    def __init__(self, workers: int = 1):
        self.workers = max(1, int(workers))

    def map_shards(self, step: Step, state: Any, in_dir: Path, out_dir: Path, todo: list[int],
                   on_done: Callable[[int, dict[str, Any]], None]) -> None:
        if not todo:
            return
        if self.workers == 1 or len(todo) == 1:
            step.setup(state)
            for i in todo:
                on_done(i, run_shard(step, in_dir, i, out_dir))
            return
        ctx = mp.get_context("spawn")
        with cf.ProcessPoolExecutor(max_workers=min(self.workers, len(todo)), mp_context=ctx,
                                    initializer=_init_worker, initargs=(step, state)) as pool:
            futures = [pool.submit(_run_in_worker, in_dir, i, out_dir) for i in todo]
            for fut in cf.as_completed(futures):
                i, stats = fut.result()
                on_done(i, stats)

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- Ray Data runner
class _ShardActor:
    """Ray actor: ``setup`` once (models load here), then one shard per call."""

    def __init__(self, step: Step, state: Any, in_dir: str, out_dir: str):
        step.setup(state)
        self.step, self.in_dir, self.out_dir = step, Path(in_dir), Path(out_dir)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import json

        shards, stats = [], []
        for i in batch["shard"]:
            i = int(i)
            shards.append(i)
            stats.append(json.dumps(run_shard(self.step, self.in_dir, i, self.out_dir)))
        return {"shard": shards, "stats": stats}


def _torch_threads() -> int:
    try:
        import torch

        return torch.get_num_threads()
    except ImportError:
        return os.cpu_count() or 1


class RayRunner:
    """Runs the same steps on Ray Data: one item per shard, ``map_batches`` over an actor pool.

    Connects to ``ray_address`` (``"auto"`` on a cluster; the work directory must then be on shared storage) or
    starts a local Ray with ``workers`` CPUs. GPU steps ask for ``num_gpus`` per actor.
    """

    engine = "ray"

    def __init__(self, workers: int = 2, address: str | None = None):
        try:
            import ray
            import ray.data as rd
        except ImportError as e:
            raise RuntimeError("--engine ray needs Ray Data: pip install -e '.[ray]'") from e
        self.workers = max(1, int(workers))
        self._ray, self._rd = ray, rd
        self._started = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                # a local Ray: workers see the driver's import path (corpus or test modules outside site-packages)
                import sys

                path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
                # Ray gives each actor OMP_NUM_THREADS=1; keep the driver's BLAS/torch thread count instead, so that
                # float reductions (embeddings, cosines) are bit-identical to the local runner's
                threads = os.environ.get("OMP_NUM_THREADS") or str(_torch_threads())
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": threads}})
            self._started = True
        import logging

        logging.getLogger("ray.data").setLevel(logging.WARNING)
        ctx = rd.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False

    def map_shards(self, step: Step, state: Any, in_dir: Path, out_dir: Path, todo: list[int],
                   on_done: Callable[[int, dict[str, Any]], None]) -> None:
        import json

        if not todo:
            return
        rd = self._rd
        kwargs: dict[str, Any] = {}
        if step.num_gpus:
            kwargs["num_gpus"] = step.num_gpus
        ds = rd.from_items([{"shard": i} for i in todo]).map_batches(
            _ShardActor, fn_constructor_args=(step, state, str(in_dir), str(out_dir)), batch_size=1,
            compute=rd.ActorPoolStrategy(size=min(self.workers, len(todo))), **kwargs)
        for batch in ds.iter_batches(batch_size=1, batch_format="default"):
            for i, s in zip(batch["shard"], batch["stats"]):
                on_done(int(i), json.loads(str(s)))

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


def make_runner(engine: str, workers: int, ray_address: str | None = None) -> LocalRunner | RayRunner:
    if engine == "local":
        return LocalRunner(workers)
    if engine == "ray":
        return RayRunner(workers, ray_address)
    raise ValueError(f"unknown engine {engine!r} (local or ray)")

