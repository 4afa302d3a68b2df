"""CrossTask primary-task ground truth (docs/evaluation.md).

Two layouts:

- the record list ``[{video_uid, video_duration, task_id, task_name, task_steps[K], clips[].annotations[]
  .language_queries[{clip_start_sec, clip_end_sec, query, step (0-based)}]}]`` (the fixture
  ``crosstask/crosstask_video_annotations.json`` of tests/fixtures.json);
- the original release folder: ``tasks_primary.txt`` (blocks of task id, name, url, number of steps, comma-separated
  steps, blank line), ``videos.csv`` (``task_id,video_id,url``; ``videos_val.csv`` too when present) and
  ``annotations/<task>_<vid>.csv`` with lines ``step,start,end`` (step 1-based). The release has no video durations:
  ``duration`` is ``None`` (T comes from the score matrix; see the protocol).

Videos keep the file order (it decides the random sets). Errors name the file and the video.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from eval.benchmarks.common import csv_field_cap, finite_number, load_json
from eval.benchmarks.step_grounding import StepVideo, iter_language_queries, iter_video_records
from eval.registry import EvalError

__all__ = ["read_crosstask_ground_truth", "read_crosstask_records", "read_crosstask_release"]


def read_crosstask_records(path: Path) -> list[StepVideo]:
    """The fixture's record list (docs/evaluation.md, ``crosstask``); a segment's column is its 0-based ``step``."""
    path = Path(path)
    data = load_json(path, "ground-truth")
    if not isinstance(data, list):
        raise EvalError(
            f"ground-truth file {path}: expected the CrossTask record list [{{video_uid, video_duration, task_id, "
            f"task_steps, clips}}, ...], got {type(data).__name__}"
        )
    videos: list[StepVideo] = []
    for rec, vid, where, duration in iter_video_records(data, path):
        steps = rec.get("task_steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
            raise EvalError(f"{where}: 'task_steps' must be a non-empty list of strings")
        task = rec.get("task_id")
        if task is None or isinstance(task, (list, dict)):
            raise EvalError(f"{where}: no 'task_id'")
        cols, starts, ends = [], [], []
        for q in iter_language_queries(rec, where):
            step = q.get("step")
            if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(steps):
                raise EvalError(f"{where}: step {step!r} is not a 0-based index into its {len(steps)} task_steps")
            cols.append(step)
            starts.append(finite_number(q.get("clip_start_sec"), f"{where}, clip_start_sec"))
            ends.append(finite_number(q.get("clip_end_sec"), f"{where}, clip_end_sec"))
        col_arr = np.asarray(cols, dtype=np.int64)
        videos.append(
            StepVideo(
                video_id=vid,
                group=str(task),
                duration=duration,
                steps=tuple(steps),
                cols=col_arr,
                step_ids=col_arr,
                starts=np.asarray(starts, dtype=np.float64),
                ends=np.asarray(ends, dtype=np.float64),
            )
        )
    if not videos:
        raise EvalError(f"ground-truth file {path} holds no video")
    return videos


def _read_tasks_primary(path: Path) -> dict[str, tuple[str, ...]]:
    """``tasks_primary.txt``: task id -> its ordered steps."""
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    tasks: dict[str, tuple[str, ...]] = {}
    i = 0
    while i < len(lines):
        if not lines[i]:
            i += 1
            continue
        block = lines[i : i + 5]
        if len(block) < 5:
            raise EvalError(f"task file {path}, line {i + 1}: incomplete task block (id, name, url, n, steps)")
        task_id, _name, _url, n_text, steps_text = block
        steps = tuple(s.strip() for s in steps_text.split(","))
        try:
            n = int(n_text)
        except ValueError:
            raise EvalError(f"task file {path}, line {i + 4}: number of steps {n_text!r} is not an integer") from None
        if n != len(steps):
            raise EvalError(f"task file {path}, task {task_id}: {n} steps announced, {len(steps)} listed")
        tasks[task_id] = steps
        i += 5
    if not tasks:
        raise EvalError(f"task file {path} lists no task")
    return tasks


def read_crosstask_release(folder: Path) -> list[StepVideo]:
    """The original release folder (see :func:`_read_release`); an undecodable or malformed file of it is an
    :class:`EvalError` naming the folder (issue 14: never a traceback)."""
    try:
        return _read_release(folder)
    except UnicodeDecodeError as exc:
        raise EvalError(f"ground-truth folder {folder}: a file is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        raise EvalError(f"ground-truth folder {folder}: a file is not valid CSV: {exc}") from None


def _read_release(folder: Path) -> list[StepVideo]:
    """The original release folder: primary-task videos that have an annotation file, in ``videos.csv``
    order (then ``videos_val.csv``), steps made 0-based; ``duration=None`` (the release has none)."""
    folder = Path(folder)
    tasks_file = folder / "tasks_primary.txt"
    if not tasks_file.is_file():
        raise EvalError(f"ground-truth folder {folder}: no tasks_primary.txt (expected the CrossTask release layout)")
    tasks = _read_tasks_primary(tasks_file)
    ann_dir = folder / "annotations"
    if not ann_dir.is_dir():
        raise EvalError(f"ground-truth folder {folder}: no annotations/ folder")
    order: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for name in ("videos.csv", "videos_val.csv"):
        vfile = folder / name
        if not vfile.is_file():
            continue
        with csv_field_cap(), vfile.open("r", encoding="utf-8", newline="") as f:
            for row in csv.reader(f):
                if len(row) < 2 or row[0].strip() not in tasks:
                    continue
                key = (row[0].strip(), row[1].strip())
                if key not in seen:
                    seen.add(key)
                    order.append(key)
    if not order:  # no video list: every annotation file of a primary task, sorted by name
        for p in sorted(ann_dir.glob("*.csv")):
            task, _, vid = p.stem.partition("_")
            if task in tasks and vid:
                order.append((task, vid))
    videos: list[StepVideo] = []
    for task, vid in order:
        afile = ann_dir / f"{task}_{vid}.csv"
        if not afile.is_file():
            continue
        steps = tasks[task]
        cols, starts, ends = [], [], []
        with csv_field_cap(), afile.open("r", encoding="utf-8", newline="") as f:
            for line, row in enumerate(csv.reader(f), start=1):
                if not row or not "".join(row).strip():
                    continue
                where = f"annotation file {afile}, line {line}"
                try:
                    step, s, e = int(row[0]), float(row[1]), float(row[2])
                except (ValueError, IndexError):
                    raise EvalError(f"{where}: expected 'step,start,end', got {','.join(row)!r}") from None
                if not 1 <= step <= len(steps):
                    raise EvalError(f"{where}: step {step} outside 1..{len(steps)} (1-based)")
                if not (math.isfinite(s) and math.isfinite(e)):
                    raise EvalError(f"{where}: non-finite time")
                cols.append(step - 1)
                starts.append(s)
                ends.append(e)
        col_arr = np.asarray(cols, dtype=np.int64)
        videos.append(
            StepVideo(
                video_id=vid,
                group=task,
                duration=None,
                steps=steps,
                cols=col_arr,
                step_ids=col_arr,
                starts=np.asarray(starts, dtype=np.float64),
                ends=np.asarray(ends, dtype=np.float64),
            )
        )
    if not videos:
        raise EvalError(f"ground-truth folder {folder}: no annotated primary-task video")
    return videos


def read_crosstask_ground_truth(path: Path) -> tuple[list[StepVideo], str]:
    """Either layout; returns the videos and the detected format (``"records"`` or ``"release"``)."""
    path = Path(path)
    if path.is_dir():
        return read_crosstask_release(path), "release"
    if path.name == "tasks_primary.txt":
        return read_crosstask_release(path.parent), "release"
    return read_crosstask_records(path), "records"
