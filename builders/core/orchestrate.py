"""Run pipelines stage by stage with exact per-shard caching, global stages, resume and statistics.

Work layout (``work_dir``)::

    <pipeline>/00_<source>-<fp12>/part-00000.{parquet,drops.parquet,stats.json}   + _complete.json
    <pipeline>/01_<step>-<fp12>/part-00000.{...}
    <pipeline>/02_<global step>-<fp12>/_fit/{state.json, artefacts/, _complete.json}   + its shards
    cache/                               fingerprint memo, embedding and request caches

A stage's fingerprint chains the previous stage's fingerprint with the step's name, version and config, the content
fingerprints of the files it declares (``input_paths``) and those of the pipelines it reads (``side_inputs``); a
source's fingerprint hashes its input files. Each shard records the digest of the input shard it was computed from, so
a rerun skips exactly the shards whose input is unchanged and a killed build resumes at the first missing shard
(docs/architecture.md, "Caching and resume"). A global stage's ``fit`` runs once per (fingerprint, input digests), writes its artefacts
to its own stage folder and hands later steps a small JSON state that names them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__ as TOOLKIT_VERSION
from .errors import BuildIncomplete, ErrorRateExceeded
from .fingerprint import FingerprintMemo, file_fingerprint, hash_obj
from .records import Count, Drop
from .repair import naming_owners
from .runners import STEP_ERROR, ExecPolicy, StageTask
from .shards import StageData, read_stats, write_json_file, write_shard
from .step import FitInputs, Pipeline, Source, Step

ARTEFACTS_KEY = "_artefacts"


@dataclass
class StepStats:
    pipeline: str
    rows_in: int = 0
    kept: int = 0
    added: int = 0                # rows added by a fan-out step (rows in + added = kept + dropped)
    dropped: Counter = field(default_factory=Counter)
    counters: Counter = field(default_factory=Counter)
    seconds: float = 0.0          # compute time recorded in the shards (including earlier runs)
    wall_seconds: float = 0.0     # time spent in this run
    shards: int = 0
    cached_shards: int = 0
    fit: str = ""                 # global stage: "ran" or "cached"
    #: counters of the shards computed in this run only (``counters`` also holds those replayed from cached shards)
    counters_this_build: Counter = field(default_factory=Counter)
    #: rows of the shards computed in this run that were reused from the shard's previous computation (row-wise steps)
    rows_reused: int = 0

    @property
    def computed_shards(self) -> int:
        return self.shards - self.cached_shards

    def add(self, s: dict[str, Any]) -> None:
        self.rows_in += int(s["rows_in"])
        self.kept += int(s["kept"])
        self.added += int(s.get("added", 0))
        self.dropped.update(s.get("dropped", {}))
        self.counters.update(s.get("counters", {}))
        self.seconds += float(s.get("seconds", 0.0))

    def as_dict(self) -> dict[str, Any]:
        d = {"pipeline": self.pipeline, "rows_in": self.rows_in, "kept": self.kept,
             "dropped": dict(sorted(self.dropped.items())), "counters": dict(sorted(self.counters.items())),
             "seconds": round(self.seconds, 3), "wall_seconds": round(self.wall_seconds, 3),
             "shards": self.shards, "cached_shards": self.cached_shards,
             "computed_shards": self.computed_shards,
             "counters_this_build": dict(sorted(self.counters_this_build.items()))}
        if self.rows_reused:
            d["rows_reused"] = self.rows_reused
        if self.added:
            d["added"] = self.added
        if self.fit:
            d["fit"] = self.fit
        return d


@dataclass
class FitRecord:
    """What a global stage left: its JSON state and its artefact folder (the release reads artefacts from here)."""

    state: Any
    artefact_dir: Path


@dataclass
class BuildResult:
    outputs: dict[str, StageData]
    stage_dirs: list[tuple[str, StageData]]
    steps: dict[str, StepStats]
    input_fingerprints: dict[str, Any]
    fits: dict[str, FitRecord] = field(default_factory=dict)
    #: damaged cache files this build found and recomputed (relative to the work directory; ``builders.core.repair``)
    repaired: list[str] = field(default_factory=list)

    def stage(self, name: str) -> StageData:
        for stage, data in self.stage_dirs:
            if stage == name:
                return data
        raise KeyError(f"no stage named {name!r}")

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

    def this_build(self) -> dict[str, Any]:
        """The work this run did, apart from what it reused: shards computed and reused, rows of computed shards
        reused (row-wise steps), global stages fitted and reused, and the counters of the rows computed now only
        (``llm_requests`` here means requests sent now), and the damaged cache files it recomputed."""
        counters: Counter = Counter()
        for s in self.steps.values():
            counters.update(s.counters_this_build)
        return {"shards_computed": sum(s.computed_shards for s in self.steps.values()),
                "shards_reused": sum(s.cached_shards for s in self.steps.values()),
                "rows_reused": sum(s.rows_reused for s in self.steps.values()),
                "fits_ran": sorted(k for k, s in self.steps.items() if s.fit == "ran"),
                "fits_reused": sorted(k for k, s in self.steps.items() if s.fit == "cached"),
                "damaged_caches_recomputed": len(self.repaired), "damaged_cache_files": list(self.repaired),
                "counters": dict(sorted(counters.items()))}


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="shard", disable=not enabled, leave=True, file=sys.stderr,
                dynamic_ncols=True)


def _run_source(pipeline: Pipeline, stage_dir: Path, stats: StepStats, progress: bool, content_key: str) -> int:
    """List the source into shards of ``pipeline.shard_size`` items; returns the shard count.

    ``content_key`` (the source's input files and side inputs) is recorded in ``_complete.json``. A source whose
    rows carry their content (``Source.rows_carry_content``) has a stage folder keyed by its config alone: when its
    inputs change it is listed again *into the same folder*, a shard whose items are unchanged gets the same bytes
    and digest, and later stages redo only the shards whose items changed. Other sources key the folder by content
    too, so a change lists them into a new folder."""
    marker = stage_dir / "_complete.json"
    if marker.exists():
        done = json.loads(marker.read_text())
        if done.get("content_key", "") == content_key:
            n = done["shards"]
            for i in range(n):
                stats.add(read_stats(stage_dir, i))
            stats.shards = stats.cached_shards = n
            return n
        marker.unlink()  # listed again below; a kill meanwhile leaves no marker, so the next run lists again
    stage_dir.mkdir(parents=True, exist_ok=True)
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
        stats.add(write_shard(stage_dir, n, rows, drops, shard_stats))
        stats.counters_this_build.update(counters)
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
            if source.ends_shard(rec, len(rows) + len(drops), pipeline.shard_size):
                flush()
        if records_in or counters or n == 0:
            flush()
    _remove_shards_from(stage_dir, n)
    write_json_file(marker, {"shards": n, "content_key": content_key})
    stats.shards = n
    return n


def _remove_shards_from(stage_dir: Path, n: int) -> None:
    """Delete the shard files of index >= ``n`` (left by an earlier, longer listing of the same folder)."""
    for p in stage_dir.glob("part-*"):
        try:
            i = int(p.name[5:10])
        except ValueError:
            continue
        if i >= n:
            p.unlink()


def data_digest(data: StageData) -> str:
    """The content digest of a complete stage: the digests of its shards, in order."""
    return hash_obj([read_stats(data.dir, i).get("digest", "") for i in range(data.n)])


def _run_fit(step: Step, data: StageData, side: dict[str, StageData], out_dir: Path, work_dir: Path, runner,
             st: StepStats, item_inputs: list[str] | None = None) -> FitRecord:
    """A global stage's ``fit``: cached in ``<stage>/_fit`` under the digests of its inputs (and the content of its
    per-item input files, which do not key the stage folder), artefacts by path. A refit starts from an empty
    folder, except for a step that declares ``fit_updates_artefacts`` (it updates the previous fit's artefacts in
    place; the marker goes first, so a refit cut short is never taken for a finished one)."""
    fit_dir = out_dir / "_fit"
    artefacts = fit_dir / "artefacts"
    key = hash_obj(data_digest(data), {s: data_digest(d) for s, d in sorted(side.items())})
    if item_inputs:
        key = hash_obj(key, item_inputs)
    marker = fit_dir / "_complete.json"
    if marker.exists() and json.loads(marker.read_text(encoding="utf-8")).get("key") == key:
        st.fit = "cached"
    else:
        if step.fit_updates_artefacts and artefacts.is_dir():
            marker.unlink(missing_ok=True)
            (fit_dir / "state.json").unlink(missing_ok=True)
        elif fit_dir.exists():
            shutil.rmtree(fit_dir)
        artefacts.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        text = state_json(step, runner.run_fit(step, FitInputs(data, side, artefacts, work_dir / "cache")))
        (fit_dir / "state.json").write_text(text, encoding="utf-8")
        write_json_file(marker, {"key": key, "seconds": round(time.perf_counter() - t0, 4)})
        st.fit = "ran"
        st.wall_seconds += time.perf_counter() - t0
    state = with_artefacts(json.loads((fit_dir / "state.json").read_text(encoding="utf-8")), artefacts)
    st.seconds += float(json.loads(marker.read_text(encoding="utf-8")).get("seconds", 0.0))
    return FitRecord(state, artefacts)


def state_json(step: Step, state: Any) -> str:
    """A fitted state as JSON: it must be small and plain (models and tables go to the artefact folder)."""
    try:
        return json.dumps(state, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{type(step).__name__}.fit must return a JSON-serialisable state (write models and "
                        f"tables under inputs.artefact_dir and return their names): {e}") from e


def with_artefacts(state: Any, artefacts: Path) -> Any:
    """The state as workers see it: a dict state also names its artefact folder (``_artefacts``)."""
    return {**state, ARTEFACTS_KEY: str(artefacts)} if isinstance(state, dict) else state


def fit_locally(step: Step, inputs: FitInputs) -> Any:
    """Run a global stage's ``fit`` in this process and return its state exactly as workers receive it (a JSON round
    trip plus the artefact folder): for tests and tools that drive one step by hand."""
    artefacts = Path(inputs.artefact_dir if inputs.artefact_dir is not None else inputs.cache_dir)
    artefacts.mkdir(parents=True, exist_ok=True)
    inputs.artefact_dir = artefacts
    return with_artefacts(json.loads(state_json(step, step.fit(inputs))), artefacts)


def _segments(steps: list[Step]) -> list[list[int]]:
    """Step indices grouped into runs that can stream shard by shard: a global stage starts a new run."""
    out: list[list[int]] = []
    for k, step in enumerate(steps):
        if not out or step.is_global:
            out.append([k])
        else:
            out[-1].append(k)
    return out


def _check_error_rate(step: Step, st: StepStats, data: StageData, rate: float | None) -> None:
    n_err = st.dropped.get(STEP_ERROR, 0)
    if rate is None or not n_err or n_err <= rate * max(st.rows_in, 1):
        return
    examples = [d for d in data.drops() if d["reason"] == STEP_ERROR][:3]
    detail = "; ".join(f"{d['item_id']}: {d['detail']}" for d in examples)
    raise ErrorRateExceeded(
        f"step {step.name!r}: {n_err} of {st.rows_in} rows ({n_err / max(st.rows_in, 1):.1%}) failed with an error "
        f"(step_error), above --max-error-rate {rate:g}; e.g. {detail}. Fix the cause and rerun with --retry-errors "
        "(or raise --max-error-rate to accept the drops)")


def run_pipelines(pipelines: list[Pipeline], work_dir: Path, runner, *, progress: bool = True, log=print,
                  policy: ExecPolicy | None = None, max_error_rate: float | None = None,
                  keep_generations: int = 2) -> BuildResult:
    """Run ``pipelines`` in order (a source or step may read the final output of an earlier pipeline).

    Afterwards the stage folders this build did not use are garbage-collected down to ``keep_generations - 1``
    earlier generations per stage (see :func:`collect_garbage`)."""
    policy = policy or ExecPolicy()
    work_dir = Path(work_dir)
    (work_dir / "cache").mkdir(parents=True, exist_ok=True)
    memo = FingerprintMemo(work_dir / "cache" / "fingerprints.sqlite")
    outputs: dict[str, StageData] = {}
    output_fps: dict[str, str] = {}
    stage_dirs: list[tuple[str, StageData]] = []
    used: list[Path] = []
    all_stats: dict[str, StepStats] = {}
    input_fps: dict[str, Any] = {}
    fits: dict[str, FitRecord] = {}
    made: list[tuple[Step, StageData]] = []   # complete step stages (a damaged cache file's owners are among them)

    def side_key(names: tuple[str, ...], who: str) -> dict[str, str]:
        missing = [s for s in names if s not in outputs]
        if missing:
            raise ValueError(f"{who} needs pipeline(s) {missing} to run before it")
        return {s: hash_obj(output_fps[s], data_digest(outputs[s])) for s in names}

    def inputs_of(stage: str, obj: Source | Step) -> tuple[list[str], list[str]]:
        """(shas of the inputs that key the whole stage, shas of the per-item inputs); all go to the manifest."""
        paths = obj.input_paths()
        fps = [file_fingerprint(p, memo=memo) for p in paths]
        if fps:
            input_fps[stage] = fps
        whole = set(obj.stage_input_paths()) if isinstance(obj, Step) else set(paths)
        return ([f["sha256"] for p, f in zip(paths, fps) if p in whole],
                [f["sha256"] for p, f in zip(paths, fps) if p not in whole])

    for pipe in pipelines:
        src: Source = pipe.source
        sides = side_key(src.side_inputs, f"source {src.name!r} of {pipe.name!r}")
        src.side = {s: outputs[s] for s in src.side_inputs}
        src.cache_dir = work_dir / "cache"
        # the folder is keyed by the source's config; its input contents and side inputs are listed again into it
        fp = hash_obj("source", src.name, src.version, src.cache_config(), pipe.shard_size, TOOLKIT_VERSION)
        content_key = hash_obj(inputs_of(src.name, src)[0], sides)
        if not src.rows_carry_content:  # rows that only point into the inputs: new inputs, new folder
            fp = hash_obj(fp, content_key)
        stage_dir = work_dir / pipe.name / f"00_{src.name}-{fp[:12]}"
        used.append(stage_dir)
        st = all_stats.setdefault(src.name, StepStats(pipe.name))
        t0 = time.perf_counter()
        n = _run_source(pipe, stage_dir, st, progress, content_key)
        st.wall_seconds = time.perf_counter() - t0
        data = StageData(stage_dir, n)
        stage_dirs.append((src.name, data))
        for seg in _segments(pipe.steps):
            tasks: list[StageTask] = []
            stats_of: list[StepStats] = []
            datas: list[StageData] = []
            for k in seg:
                step = pipe.steps[k]
                if step.name in all_stats:
                    raise ValueError(f"duplicate stage name {step.name!r}")
                sides = side_key(step.side_inputs, f"step {step.name!r} of {pipe.name!r}")
                whole, per_item = inputs_of(step.name, step)
                fp = hash_obj("step", fp, step.name, step.version, step.cache_config(),
                              "per-item" if step.side_inputs_per_item else sides, whole, TOOLKIT_VERSION)
                out_dir = work_dir / pipe.name / f"{k + 1:02d}_{step.name}-{fp[:12]}"
                out_dir.mkdir(parents=True, exist_ok=True)
                used.append(out_dir)
                st = all_stats.setdefault(step.name, StepStats(pipe.name, shards=n))
                state, state_key = None, ""
                if step.is_global:
                    with naming_owners(made, work_dir):
                        rec = _run_fit(step, data, {s: outputs[s] for s in step.side_inputs}, out_dir, work_dir,
                                       runner, st, per_item)
                    fits[step.name] = rec
                    state, state_key = rec.state, hash_obj(rec.state)
                tasks.append(StageTask(step, state, data.dir, out_dir, policy, state_key=state_key,
                                       memo_path=str(memo.path) if step.has_item_inputs else ""))
                stats_of.append(st)
                data = StageData(out_dir, n)
                datas.append(data)
                stage_dirs.append((step.name, data))
            failures: list[tuple[str, int, str]] = []
            names = "+".join(pipe.steps[k].name for k in seg)
            with _progress(n * len(seg), f"{pipe.name}: {names}", progress) as bar:
                def done(k: int, i: int, s: dict[str, Any], cached: bool, _bar=bar) -> None:
                    stats_of[k].add(s)
                    stats_of[k].cached_shards += int(cached)
                    if not cached:
                        stats_of[k].wall_seconds += float(s.get("seconds", 0.0))
                        # a redone row-wise shard replays its reused rows' counters: count only the rows computed
                        stats_of[k].counters_this_build.update(s.get("counters_computed", s.get("counters", {})))
                        stats_of[k].rows_reused += int(s.get("rows_reused", 0))
                    _bar.update(1)

                def fail(k: int, i: int, why: str) -> None:
                    failures.append((tasks[k].step.name, i, why))

                with naming_owners([*made, *((pipe.steps[k], d) for k, d in zip(seg, datas))], work_dir):
                    runner.run_segment(tasks, n, done, fail)
            if failures:
                lines = "; ".join(f"{name} shard {i}: {why}" for name, i, why in failures[:10])
                raise BuildIncomplete(f"{len(failures)} shard(s) left unfinished after retries (transient failures; "
                                      f"nothing was cached for them, rerun to retry): {lines}")
            for k, st, d in zip(seg, stats_of, datas):
                _check_error_rate(pipe.steps[k], st, d, max_error_rate)
                made.append((pipe.steps[k], d))
        outputs[pipe.name] = data
        output_fps[pipe.name] = fp
    memo.close()
    collect_garbage(work_dir, used, keep_generations, log)
    return BuildResult(outputs, stage_dirs, all_stats, input_fps, fits)


USED_MARKER = "_used"
_STAGE_DIR = re.compile(r"^(?P<stage>\d{2}_.+)-[0-9a-f]{12}\Z")


def collect_garbage(work_dir: Path, used: list[Path], keep_generations: int = 2, log=print) -> list[Path]:
    """Delete superseded stage folders: per pipeline and stage position (``NN_<step>``), the folders this build used
    stay, and of the others only the ``keep_generations - 1`` used most recently (an earlier config one may switch
    back to). Edits of per-item inputs rewrite shards in place, so only config changes make new generations; this
    bounds the work directory whatever the number of builds. Returns the folders deleted."""
    if keep_generations < 1:
        raise ValueError(f"keep_generations must be >= 1, got {keep_generations}")
    now = time.time()
    for d in used:
        marker = d / USED_MARKER
        marker.touch()
        os.utime(marker, (now, now))
    used_set = {d.resolve() for d in used}
    removed: list[Path] = []
    for pipe_dir in {d.parent for d in used}:
        groups: dict[str, list[tuple[float, Path]]] = {}
        for d in pipe_dir.iterdir():
            m = _STAGE_DIR.match(d.name)
            if not m or not d.is_dir() or d.is_symlink() or d.resolve() in used_set:
                continue
            marker = d / USED_MARKER
            t = marker.stat().st_mtime if marker.exists() else d.stat().st_mtime
            groups.setdefault(m["stage"], []).append((t, d))
        for stage, items in groups.items():
            for _, d in sorted(items, reverse=True)[keep_generations - 1:]:
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
    if removed:
        log(f"work directory: removed {len(removed)} superseded stage folder(s) "
            f"(keeping {keep_generations - 1} earlier generation(s) a stage)")
    return removed
