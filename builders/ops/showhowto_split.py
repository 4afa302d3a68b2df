"""The ShowHowTo test split (docs/corpora/showhowto.md "Split").

Paper: Souček et al., CVPR 2025 Sec. 5.1 "Dataset": "3,964 sequences from 200 tasks covering the
distribution over task categories in the full dataset ... we prioritize samples with high DFN-CLIP alignment scores"
[paper]. The algorithm below is [toolkit] (the authors' is not released); pure stdlib, deterministic for a seed.

Records are mappings with ``sequence_id``, ``task_id``, ``category_1``, ``num_steps`` and ``mean_score`` (``None`` or
NaN = null, e.g. every row of the ``middle`` aligner). A missing/empty ``category_1`` counts as the category ``""``.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MIN_TASK_SEQS", "TEST_SIZE", "TEST_TASKS", "SplitPlan", "allocate_slots", "choose_test_split",
           "plan_test_split"]

TEST_TASKS = 200  # Souček et al., CVPR 2025, Sec. 5.1
TEST_SIZE = 3964  # Souček et al., CVPR 2025, Sec. 5.1
MIN_TASK_SEQS = 20  # [toolkit] --min-task-seqs


@dataclass
class SplitPlan:
    """What :func:`plan_test_split` decided: slots per category (step 2), chosen task ids per category in draw order
    (step 3), and the test sequence ids in take order (step 4)."""

    allocation: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, list[str]] = field(default_factory=dict)
    test_ids: list[str] = field(default_factory=list)
    candidates: int = 0
    eligible: int = 0


def _score(record: Mapping[str, Any]) -> float | None:
    value = record.get("mean_score")
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _rank_key(record: Mapping[str, Any]) -> tuple:
    """mean_score descending, nulls last, then sequence_id (step 4 of the split)."""
    score = _score(record)
    return (score is None, -score if score is not None else 0.0, str(record["sequence_id"]))


def allocate_slots(counts: Mapping[str, int], slots: int, capacity: Mapping[str, int] | None = None) -> dict[str, int]:
    """Largest-remainder apportionment of ``slots`` to categories by ``counts`` (step 2): ``floor(slots·n_c/N)``
    each, then one more to the largest exact remainders, ties by category name. With ``capacity`` (candidate tasks
    per category) a category never gets more than its capacity; the slots it cannot use are apportioned again, by the
    same rule, among the categories with room left, until all slots are placed or no room is left [toolkit]
    (the first round runs over every category with a count, so without caps this is plain largest remainder)."""
    alloc = {c: 0 for c in counts}
    room = dict(capacity) if capacity is not None else {c: slots for c in counts}
    left = slots
    first = True
    while left > 0:
        # the first round apportions over every category (the toolkit's rule); later rounds only over those with room
        open_ = sorted(c for c in counts if counts[c] > 0 and (first or alloc[c] < room.get(c, 0)))
        first = False
        if not open_:
            break
        total = sum(counts[c] for c in open_)
        share = {c: left * counts[c] // total for c in open_}
        rem = {c: left * counts[c] % total for c in open_}  # exact integer remainders
        extra = left - sum(share.values())
        for c in sorted(open_, key=lambda c: (-rem[c], c))[:extra]:
            share[c] += 1
        placed = 0
        for c in open_:
            take = min(share[c], room.get(c, 0) - alloc[c])
            alloc[c] += take
            placed += take
        left -= placed
        if placed == 0 and all(alloc[c] >= room.get(c, 0) for c in open_):
            break
    return alloc


def plan_test_split(records: Iterable[Mapping[str, Any]], test_tasks: int = TEST_TASKS,
                    min_task_seqs: int = MIN_TASK_SEQS, test_size: int = TEST_SIZE, seed: int = 0) -> SplitPlan:
    """Steps 1-4 of the split (docs/corpora/showhowto.md), with the decisions kept (see :func:`choose_test_split`)."""
    eligible = [r for r in records
                if r.get("task_id") not in (None, "") and int(r.get("num_steps") or 0) >= 2]
    by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in eligible:
        by_task[str(r["task_id"])].append(r)
    seq_per_category = Counter(str(r.get("category_1") or "") for r in eligible)
    # a task's category: the most frequent category_1 among its eligible sequences (ties by name) [toolkit]
    task_category = {}
    for task, rows in by_task.items():
        cats = Counter(str(r.get("category_1") or "") for r in rows)
        task_category[task] = min(cats, key=lambda c: (-cats[c], c))
    candidates = sorted(t for t, rows in by_task.items() if len(rows) >= min_task_seqs)
    plan = SplitPlan(candidates=len(candidates), eligible=len(eligible))
    by_category: dict[str, list[str]] = defaultdict(list)
    for t in candidates:  # sorted by task_id
        by_category[task_category[t]].append(t)
    if len(candidates) <= test_tasks:  # step 1: all candidates are taken
        plan.allocation = {c: len(ts) for c, ts in sorted(by_category.items())}
        plan.tasks = {c: list(ts) for c, ts in sorted(by_category.items())}
    else:  # steps 2-3
        capacity = {c: len(by_category.get(c, [])) for c in seq_per_category}
        plan.allocation = allocate_slots(dict(sorted(seq_per_category.items())), test_tasks, capacity)
        rng = random.Random(seed)
        for c in sorted(plan.allocation):
            n = plan.allocation[c]
            if n > 0:
                plan.tasks[c] = rng.sample(by_category[c], n)
    # step 4: rank inside each task, then round-robin over the tasks
    ranked = [sorted(by_task[t], key=_rank_key) for ts in plan.tasks.values() for t in ts]
    depth = max((len(r) for r in ranked), default=0)
    for rank in range(depth):
        layer = sorted((r[rank] for r in ranked if rank < len(r)), key=_rank_key)
        for rec in layer:
            if len(plan.test_ids) >= test_size:
                return plan
            plan.test_ids.append(str(rec["sequence_id"]))
    return plan


def choose_test_split(records: Iterable[Mapping[str, Any]], test_tasks: int = TEST_TASKS,
                      min_task_seqs: int = MIN_TASK_SEQS, test_size: int = TEST_SIZE, seed: int = 0) -> set[str]:
    """The test ``sequence_id``s by steps 1-4 of the toolkit's split (everything else is train, step 5).

    1. eligible = a task and ≥ 2 steps; candidate tasks have ≥ ``min_task_seqs`` eligible sequences; when there are
       at most ``test_tasks`` candidates, all are taken;
    2. else ``test_tasks`` slots go to ``category_1`` values in proportion to their share of eligible sequences
       (largest remainder, ties by category name; a category's slots are capped at its candidate tasks and the rest
       re-apportioned [toolkit]); a task belongs to its sequences' most frequent category;
    3. per category (in name order, one ``random.Random(seed)`` for all) ``rng.sample`` of its candidates sorted by
       ``task_id``;
    4. per chosen task rank by ``mean_score`` desc (null last, then ``sequence_id``); take rank 1 of every task, then
       rank 2, ... (inside a round by the same key) until ``test_size``.
    """
    return set(plan_test_split(records, test_tasks, min_task_seqs, test_size, seed).test_ids)
