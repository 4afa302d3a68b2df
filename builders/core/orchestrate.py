"""Run pipelines stage by stage with per-shard caching, resume and statistics.

Work layout (``work_dir``)::

    <pipeline>/00_<source>-<fp12>/part-00000.{parquet,drops.parquet,stats.json}   + _complete.json
    <pipeline>/01_<step>-<fp12>/part-00000.{...}

A stage's fingerprint chains the previous stage's fingerprint with the step's name, version and config (and the
fingerprints of its side inputs); a source's fingerprint hashes its input files. A rerun skips every shard whose
``stats.json`` exists, so a killed build resumes at the first missing shard (specs/sieve_swap.md §3.7).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__ as TOOLKIT_VERSION
from .fingerprint import file_fingerprint, hash_obj
from .records import Count, Drop
from .shards import StageData, shard_done, read_stats, write_json_file, write_shard
from .step import FitInputs, Pipeline, Source


@dataclass
class StepStats:
    pipeline: str
    rows_in: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    counters: Counter = field(default_factory=Counter)
    seconds: float = 0.0          # compute time recorded in the shards (including earlier runs)
    wall_seconds: float = 0.0     # time spent in this run
    shards: int = 0
    cached_shards: int = 0

    def add(self, s: dict[str, Any]) -> None:
        self.rows_in += int(s["rows_in"])
        self.kept += int(s["kept"])
        self.dropped.update(s.get("dropped", {}))
        self.counters.update(s.get("counters", {}))
        self.seconds += float(s.get("seconds", 0.0))

    def as_dict(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "rows_in": self.rows_in, "kept": self.kept,
                "dropped": dict(sorted(self.dropped.items())), "counters": dict(sorted(self.counters.items())),
                "seconds": round(self.seconds, 3), "wall_seconds": round(self.wall_seconds, 3),
                "shards": self.shards, "cached_shards": self.cached_shards}


@dataclass
class BuildResult:
    outputs: dict[str, StageData]
    stage_dirs: list[tuple[str, StageData]]
    steps: dict[str, StepStats]
    input_fingerprints: dict[str, Any]

    def drops(self):
        for _, data in self.stage_dirs:
            yield from data.drops()

    def drop_counts(self) -> Counter:
        c: Counter = Counter()
        for s in self.steps.values():
            c.update(s.dropped)
        return c

    def counters(self) -> Counter:
        c: Counter = Counter()
        for s in self.steps.values():
            c.update(s.counters)
        return c


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="shard", disable=not enabled, leave=True, file=sys.stderr,
                dynamic_ncols=True)


def _run_source(pipeline: Pipeline, stage_dir: Path, stats: StepStats, progress: bool) -> int:
    """Read the source into shards of ``pipeline.shard_size`` rows; returns the shard count."""
    marker = stage_dir / "_complete.json"
    if marker.exists():
        n = json.loads(marker.read_text())["shards"]
        for i in range(n):
            stats.add(read_stats(stage_dir, i))
        stats.shards = stats.cached_shards = n
        return n
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    stage_dir.mkdir(parents=True)
    source = pipeline.source
    t0 = time.perf_counter()
    n = 0
    rows: list[dict] = []
    drops: list[Drop] = []
    counters: Counter = Counter()
    records_in = 0

    def flush() -> None:
        nonlocal n, rows, drops, counters, records_in, t0
        shard_stats = {"rows_in": records_in, "kept": len(rows), "dropped": dict(Counter(d.reason for d in drops)),
                       "counters": dict(counters), "seconds": round(time.perf_counter() - t0, 4)}
        write_shard(stage_dir, n, rows, drops, shard_stats)
        stats.add(shard_stats)
        n += 1
        rows, drops, counters, records_in = [], [], Counter(), 0
        t0 = time.perf_counter()
        bar.update(1)

    with _progress(0, f"{pipeline.name}: {source.name}", progress) as bar:
        for rec in source.read():
            if isinstance(rec, Count):
                counters[rec.name] += rec.n
                continue
            records_in += 1
            if isinstance(rec, Drop):
                drops.append(rec)
            else:
                rows.append(rec)
            if len(rows) + len(drops) >= pipeline.shard_size:
                flush()
        if records_in or counters or n == 0:
            flush()
    write_json_file(marker, {"shards": n})
    stats.shards = n
    return n


def run_pipelines(pipelines: list[Pipeline], work_dir: Path, runner, *, progress: bool = True,
                  log=print) -> BuildResult:
    """Run ``pipelines`` in order (a step may read the final output of an earlier pipeline)."""
    work_dir = Path(work_dir)
    outputs: dict[str, StageData] = {}
    output_fps: dict[str, str] = {}
    stage_dirs: list[tuple[str, StageData]] = []
    all_stats: dict[str, StepStats] = {}
    input_fps: dict[str, Any] = {}
    for pipe in pipelines:
        src: Source = pipe.source
        missing = [s for s in src.side_inputs if s not in outputs]
        if missing:
            raise ValueError(f"source {src.name!r} needs pipeline(s) {missing} to run before {pipe.name!r}")
        src.side = {s: outputs[s] for s in src.side_inputs}
        fps = [file_fingerprint(p) for p in src.input_paths()]
        input_fps[src.name] = fps
        fp = hash_obj("source", src.name, src.version, src.cache_config(), [f["sha256"] for f in fps],
                      pipe.shard_size, TOOLKIT_VERSION, {s: output_fps[s] for s in src.side_inputs})
        stage_dir = work_dir / pipe.name / f"00_{src.name}-{fp[:12]}"
        st = all_stats.setdefault(src.name, StepStats(pipe.name))
        t0 = time.perf_counter()
        n = _run_source(pipe, stage_dir, st, progress)
        st.wall_seconds = time.perf_counter() - t0
        data = StageData(stage_dir, n)
        stage_dirs.append((src.name, data))
        for k, step in enumerate(pipe.steps, start=1):
            if step.name in all_stats:
                raise ValueError(f"duplicate stage name {step.name!r}")
            missing = [s for s in step.side_inputs if s not in outputs]
            if missing:
                raise ValueError(f"step {step.name!r} needs pipeline(s) {missing} to run before {pipe.name!r}")
            fp = hash_obj("step", fp, step.name, step.version, step.cache_config(),
                          {s: output_fps[s] for s in step.side_inputs}, TOOLKIT_VERSION)
            out_dir = work_dir / pipe.name / f"{k:02d}_{step.name}-{fp[:12]}"
            st = all_stats.setdefault(step.name, StepStats(pipe.name))
            st.shards = n
            t0 = time.perf_counter()
            todo = [i for i in range(n) if not shard_done(out_dir, i)]
            for i in range(n):
                if i not in todo:
                    st.add(read_stats(out_dir, i))
            st.cached_shards = n - len(todo)
            if todo:
                out_dir.mkdir(parents=True, exist_ok=True)
                fit_t0 = time.perf_counter()
                state = step.fit(FitInputs(data, {s: outputs[s] for s in step.side_inputs}, work_dir))
                st.seconds += time.perf_counter() - fit_t0
                with _progress(n, f"{pipe.name}: {step.name}", progress) as bar:
                    bar.update(n - len(todo))

                    def done(i: int, s: dict[str, Any], _st=st, _bar=bar) -> None:
                        _st.add(s)
                        _bar.update(1)

                    runner.map_shards(step, state, data.dir, out_dir, todo, done)
            st.wall_seconds = time.perf_counter() - t0
            data = StageData(out_dir, n)
            stage_dirs.append((step.name, data))
        outputs[pipe.name] = data
        output_fps[pipe.name] = fp
    return BuildResult(outputs, stage_dirs, all_stats, input_fps)
