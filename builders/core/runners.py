"""Runners execute the stages of a pipeline over its shards: in-process / a local worker pool, or Ray Data.

Both call :func:`run_or_skip`, so the same step gives the same shard files whichever runner runs it
(docs/architecture.md, "Steps, pipelines and runners"). A runner only decides where ``fit``, ``setup``, ``process`` and ``teardown`` run:

* a GPU step (``step.gpus() > 0``) gets one worker per GPU locally (each pinned with ``CUDA_VISIBLE_DEVICES``) and
  actors sized by GPUs on Ray, whatever ``--workers`` says for CPU steps;
* on Ray, the steps of a *segment* (a run of stages with no global stage in between) are chained in one streaming
  Ray Data pipeline, so CPU and GPU steps overlap shard by shard;
* a transient failure is retried with backoff; if it persists the shard is reported unfinished (never cached).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import DamagedCache, ShardUnfinished, describe, is_transient
from .records import STEP_ERROR, Out
from .row_reuse import process_row_wise
from .shards import read_rows, read_stats, work_shard_name, write_shard
from .step import FitInputs, Step

__all__ = ["STEP_ERROR", "ExecPolicy", "LocalRunner", "RayRunner", "StageTask", "gpu_workers", "make_runner", "run_shard",
           "shard_is_done", "visible_gpus"]


@dataclass(frozen=True)
class ExecPolicy:
    """Retries of transient failures (``retries`` times, ``backoff_s`` doubling) and ``--retry-errors``."""

    retries: int = 3
    backoff_s: float = 1.0
    retry_errors: bool = False


@dataclass
class StageTask:
    """One stage to run: the step, its fitted state (JSON, from the stage folder) and its input/output folders."""

    step: Step
    state: Any
    in_dir: Path
    out_dir: Path
    policy: ExecPolicy = field(default_factory=ExecPolicy)
    #: a digest of the fitted state: a shard computed under another state (a refitted global stage) is redone
    state_key: str = ""
    #: the build's fingerprint memo (``item_digest`` of steps with per-item inputs)
    memo_path: str = ""

    def item_digest(self, rows: list[dict]) -> str:
        """The step's digest of the per-item inputs of ``rows`` ("" for a step without per-item inputs)."""
        if not self.step.has_item_inputs:
            return ""
        from .fingerprint import shared_memo

        memo = shared_memo(self.memo_path) if self.memo_path else None
        cols = self.step.item_columns()
        return self.step.item_digest([{c: r.get(c) for c in cols} for r in rows], self.state, memo)


# ---------------------------------------------------------------- one shard
def _free_accelerator() -> None:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _call(step: Step, rows: list[dict], policy: ExecPolicy, shard: int) -> Out:
    """``step.process`` on ``rows``, retrying transient failures; raises ``ShardUnfinished`` if they persist."""
    attempt = 0
    while True:
        out = Out(step.name)
        try:
            step.process(rows, out)
            return out
        except Exception as e:
            if not is_transient(e):
                raise
            attempt += 1
            if attempt > policy.retries:
                raise ShardUnfinished(step.name, shard, f"{describe(e)} (still failing after {policy.retries} "
                                                        "retries)") from e
            _free_accelerator()
            time.sleep(policy.backoff_s * 2 ** (attempt - 1))


def _merge(out: Out, part: Out) -> None:
    out.rows.extend(part.rows)
    out.drops.extend(part.drops)
    out.counters.update(part.counters)


def _process_isolated(step: Step, rows: list[dict], out: Out, policy: ExecPolicy, shard: int) -> None:
    """Run ``step.process`` on the batch; if it raises a data error, retry row by row and drop (``step_error``) only
    the rows that fail. If every row fails on its own with the same exception type the failure is systemic (a missing
    model, a bug), and it is raised instead of dropping the whole input. Transient failures are never drops."""
    try:
        _merge(out, _call(step, rows, policy, shard))
        return
    except (ShardUnfinished, DamagedCache):  # never a drop: the build recomputes the damaged cache
        raise
    except Exception:  # noqa: BLE001 - isolate the rows that fail
        pass
    failures: list[BaseException] = []
    for row in rows:
        try:
            one = _call(step, [row], policy, shard)
        except (ShardUnfinished, DamagedCache):  # never a drop: the build recomputes the damaged cache
            raise
        except Exception as e:  # noqa: BLE001 - recorded per row
            failures.append(e)
            out.drop(row.get(step.id_field, "?"), STEP_ERROR, describe(e))
            continue
        _merge(out, one)
    if rows and len(failures) == len(rows) and len({type(e) for e in failures}) == 1:
        raise failures[0]


def _check_accounting(step: Step, rows: list[dict], out: Out, shard: int) -> int:
    """Rows in = kept + dropped; a ``fan_out`` step may keep several rows per input (returns the rows added), but
    every input id must come out kept (through ``parent_field``) or dropped."""
    n_in, n_out = len(rows), len(out.rows) + len(out.drops)
    if not step.fan_out:
        if n_out != n_in:
            raise RuntimeError(f"step {step.name!r} broke the row accounting on shard {shard}: "
                               f"{n_in} in, {len(out.rows)} kept + {len(out.drops)} dropped")
        return 0
    parent = step.parent_field or step.id_field
    ids_in = {str(r.get(step.id_field)) for r in rows}
    ids_out = {str(r.get(parent)) for r in out.rows} | {step.parent_id(d.item_id) for d in out.drops}
    lost = ids_in - ids_out
    if lost or n_out < n_in:
        raise RuntimeError(f"step {step.name!r} lost {len(lost)} input row(s) on shard {shard} "
                           f"(e.g. {sorted(lost)[:3]}): a fan-out step must keep or drop every input row")
    return n_out - n_in


def run_shard(task: StageTask, i: int) -> dict[str, Any]:
    """Process shard ``i`` of ``task.in_dir`` with a set-up step and write shard ``i`` of ``task.out_dir``."""
    t0 = time.perf_counter()
    step = task.step
    input_digest = read_stats(task.in_dir, i).get("digest", "")
    rows = read_rows(task.in_dir, i)
    item_digest = task.item_digest(rows)
    extra: dict[str, Any] = {}
    if step.row_wise and not step.fan_out:  # rows whose content did not change are reused (core/row_reuse.py)
        out, extra = process_row_wise(task, rows, i, _call)
    else:
        out = Out(step.name)
        _process_isolated(step, rows, out, task.policy, i)
    added = _check_accounting(step, rows, out, i)
    stats = {"rows_in": len(rows), "kept": len(out.rows), "dropped": dict(Counter(d.reason for d in out.drops)),
             "counters": dict(out.counters), "seconds": round(time.perf_counter() - t0, 4), **extra}
    if added:
        stats["added"] = added
    if task.state_key:
        stats["state_key"] = task.state_key
    if item_digest:
        stats["item_digest"] = item_digest
    return write_shard(task.out_dir, i, out.rows, out.drops, stats, input_digest=input_digest)


def shard_is_done(task: StageTask, i: int) -> dict[str, Any] | None:
    """The stats of shard ``i`` if it is finished, computed from the current input shard, under the current fitted
    state and per-item inputs, and (under ``--retry-errors``) has no ``step_error`` drop; else None."""
    path = task.out_dir / f"{work_shard_name(i)}.stats.json"
    if not path.exists():
        return None
    stats = read_stats(task.out_dir, i)   # DamagedCache when damaged: the build forgets and recomputes the shard
    if stats.get("input_digest") != read_stats(task.in_dir, i).get("digest", ""):
        return None
    if stats.get("state_key", "") != task.state_key:
        return None
    if task.step.has_item_inputs and stats.get("item_digest", "") != task.item_digest(
            read_rows(task.in_dir, i, task.step.item_columns())):
        return None
    if task.policy.retry_errors and stats.get("dropped", {}).get(STEP_ERROR):
        return None
    return stats


# ---------------------------------------------------------------- GPUs
def visible_gpus(declared: int | None = None) -> list[str]:
    """GPU ids this process may use: ``declared`` (``--gpus N``: ids 0..N-1), else ``CUDA_VISIBLE_DEVICES``, else
    torch's device count (torch is imported only when a GPU step asks)."""
    if declared is not None:
        return [str(k) for k in range(int(declared))]
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [x.strip() for x in env.split(",") if x.strip() and x.strip() != "-1"]
    try:
        import torch

        return [str(k) for k in range(torch.cuda.device_count())]
    except ImportError:
        return []


def gpu_workers(step: Step, gpu_ids: list[str]) -> int:
    """Workers for a GPU step: one per ``ceil(step.gpus())`` visible GPUs; a clear error when there are none."""
    per = max(1, math.ceil(step.gpus()))
    n = len(gpu_ids) // per
    if n == 0:
        raise RuntimeError(f"step {step.name!r} needs {step.gpus():g} GPU(s) per worker but {len(gpu_ids)} "
                           "are visible: run on a GPU machine, or choose a CPU device in the config "
                           "(e.g. --set device=cpu)")
    return n


# ---------------------------------------------------------------- local runner
_WORKER_TASK: StageTask | None = None


def _init_worker(task: StageTask, gpu_queue: Any, per_worker: int) -> None:
    global _WORKER_TASK
    if gpu_queue is not None:  # pin this worker to its own GPU(s) before any CUDA library starts
        ids = [gpu_queue.get() for _ in range(per_worker)]
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
    task.step.setup(task.state)
    _WORKER_TASK = task


def _run_in_worker(i: int) -> tuple[int, dict[str, Any]]:
    assert _WORKER_TASK is not None
    return i, run_shard(_WORKER_TASK, i)


OnDone = Callable[[int, int, dict[str, Any], bool], None]     # (task index, shard, stats, cached)
OnFail = Callable[[int, int, str], None]                       # (task index, shard, why)


class LocalRunner:
    """In-process with ``workers=1`` (the default); a pool of ``workers`` spawned processes otherwise. A GPU step
    runs one worker per visible GPU (``gpus`` overrides the count, e.g. for tests)."""

    engine = "local"

    def __init__(self, workers: int = 1, gpus: int | None = None):
        self.workers = max(1, int(workers))
        self.gpus = gpus

    def run_fit(self, step: Step, inputs: FitInputs) -> Any:
        if step.gpus() > 0:
            gpu_workers(step, visible_gpus(self.gpus))
        return step.fit(inputs)

    def run_segment(self, tasks: list[StageTask], n: int, on_done: OnDone, on_fail: OnFail) -> None:
        """Run the stages one after the other; a stage with unfinished shards stops the segment."""
        for k, task in enumerate(tasks):
            todo = []
            for i in range(n):
                stats = shard_is_done(task, i)
                if stats is None:
                    todo.append(i)
                else:
                    on_done(k, i, stats, True)
            failed = self._map(task, todo, lambda i, s, _k=k: on_done(_k, i, s, False),
                               lambda i, why, _k=k: on_fail(_k, i, why))
            if failed:
                return

    def _map(self, task: StageTask, todo: list[int], done: Callable, fail: Callable) -> int:
        if not todo:
            task.step.teardown()
            return 0
        step = task.step
        workers, gpu_ids, per = self.workers, None, 1
        if step.gpus() > 0:
            gpu_ids = visible_gpus(self.gpus)
            workers = gpu_workers(step, gpu_ids)
            per = max(1, math.ceil(step.gpus()))
        workers = min(workers, len(todo))
        failed = 0
        if workers == 1:
            step.setup(task.state)
            try:
                for i in todo:
                    try:
                        done(i, run_shard(task, i))
                    except ShardUnfinished as e:
                        failed += 1
                        fail(i, e.cause)
            finally:
                step.teardown()
            return failed
        ctx = mp.get_context("spawn")
        queue = None
        if gpu_ids is not None:
            queue = ctx.Manager().Queue()
            for g in gpu_ids[:workers * per]:
                queue.put(g)
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                    initargs=(task, queue, per)) as pool:
            futures = {pool.submit(_run_in_worker, i): i for i in todo}
            for fut in cf.as_completed(futures):
                try:
                    i, stats = fut.result()
                except ShardUnfinished as e:
                    failed += 1
                    fail(futures[fut], e.cause)
                    continue
                done(i, stats)
        step.teardown()  # the driver's copy may hold what fit loaded
        return failed

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- Ray Data runner
#: how an actor's ``failed`` cell says that a cache file it read is damaged (followed by ``[path, why]`` in JSON)
_DAMAGED = "damaged cache:"

class _ShardActor:
    """Ray actor for stage ``k`` of a segment: ``setup`` once (models load here), then one shard per call. A shard
    that failed upstream passes through; a cached shard is read back, not recomputed."""

    def __init__(self, task: StageTask, k: int):
        task.step.setup(task.state)
        self.task, self.k = task, k

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import json

        out = {key: list(v) for key, v in batch.items()}
        col = []
        for j, i in enumerate(batch["shard"]):
            i = int(i)
            if out["failed"][j]:
                col.append("")
                continue
            try:
                stats = shard_is_done(self.task, i)
                cached = stats is not None
                if stats is None:
                    stats = run_shard(self.task, i)
            except ShardUnfinished as e:
                out["failed"][j] = f"{self.k}:{e.cause}"
                col.append("")
                continue
            except DamagedCache as e:  # said to the driver as data: Ray's task errors keep only its text
                out["failed"][j] = _DAMAGED + json.dumps([e.path, e.why])
                col.append("")
                continue
            col.append(json.dumps({"stats": stats, "cached": cached}))
        out[f"s{self.k}"] = col
        return out

    def __del__(self):  # the actor is going away: free its model
        try:
            self.task.step.teardown()
        except Exception:  # noqa: BLE001
            pass


def _torch_threads() -> int:
    try:
        import torch

        return torch.get_num_threads()
    except ImportError:
        return os.cpu_count() or 1


def _fit_task(step: Step, inputs: FitInputs) -> Any:
    try:
        return step.fit(inputs)
    finally:
        step.teardown()


class RayRunner:
    """Runs the same steps on Ray Data: one item per shard, the stages of a segment chained with ``map_batches`` over
    actor pools (streaming), global stages' ``fit`` as Ray tasks with the step's GPUs.

    Connects to ``ray_address`` (``"auto"`` on a cluster; the work directory must then be on shared storage) or
    starts a local Ray with ``workers`` CPUs (and ``gpus`` GPUs when given: fake GPU resources for tests).
    """

    engine = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, gpus: int | None = None):
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
                kwargs: dict[str, Any] = {}
                if gpus is not None:
                    kwargs["num_gpus"] = int(gpus)
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": threads}}, **kwargs)
            self._started = True
        import logging

        logging.getLogger("ray.data").setLevel(logging.WARNING)
        ctx = rd.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False

    def _cluster_gpus(self) -> list[str]:
        return [str(k) for k in range(int(self._ray.cluster_resources().get("GPU", 0)))]

    def run_fit(self, step: Step, inputs: FitInputs) -> Any:
        g = step.gpus()
        if g > 0:
            gpu_workers(step, self._cluster_gpus())
        remote = self._ray.remote(num_cpus=1, num_gpus=g)(_fit_task)
        try:
            return self._ray.get(remote.remote(step, inputs))
        except self._ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, DamagedCache):  # the driver's own type, for core/repair.py
                raise DamagedCache(cause.path, cause.why) from None
            raise

    def run_segment(self, tasks: list[StageTask], n: int, on_done: OnDone, on_fail: OnFail) -> None:
        import json

        if n == 0:
            return
        rd = self._rd
        ds = rd.from_items([{"shard": i, "failed": ""} for i in range(n)])
        for k, task in enumerate(tasks):
            kwargs: dict[str, Any] = {}
            g = task.step.gpus()
            if g > 0:  # one actor per GPU (or per ceil(g) GPUs), all started: the GPUs are the scarce resource.
                # It reserves its GPU but no CPU slot: the CPU steps' pools of the same streaming chain may hold every
                # CPU slot (``--workers``), and a GPU actor waiting for one would leave its GPU idle
                kwargs["num_gpus"] = g
                kwargs["num_cpus"] = 0
                size = min(gpu_workers(task.step, self._cluster_gpus()), n)
                compute = rd.ActorPoolStrategy(size=size)
            else:  # CPU pools start with one actor and grow to ``workers`` as shards queue up, so a chain of cheap
                # steps does not start (and set up) every actor of every stage at once
                compute = rd.ActorPoolStrategy(min_size=1, max_size=min(self.workers, n))
            ds = ds.map_batches(_ShardActor, fn_constructor_args=(task, k), batch_size=1, compute=compute, **kwargs)
        for batch in ds.iter_batches(batch_size=1, batch_format="default"):
            for j, i in enumerate(batch["shard"]):
                i = int(i)
                for k in range(len(tasks)):
                    cell = str(batch[f"s{k}"][j])
                    if cell:
                        d = json.loads(cell)
                        on_done(k, i, d["stats"], d["cached"])
                failed = str(batch["failed"][j])
                if failed.startswith(_DAMAGED):  # the build forgets the file and goes again (core/repair.py)
                    raise DamagedCache(*json.loads(failed[len(_DAMAGED):]))
                if failed:
                    k, _, why = failed.partition(":")
                    on_fail(int(k), i, why)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


def make_runner(engine: str, workers: int, ray_address: str | None = None,
                gpus: int | None = None) -> LocalRunner | RayRunner:
    if engine == "local":
        return LocalRunner(workers, gpus)
    if engine == "ray":
        return RayRunner(workers, ray_address, gpus)
    raise ValueError(f"unknown engine {engine!r} (local or ray)")
