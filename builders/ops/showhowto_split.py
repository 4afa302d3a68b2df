"""The ShowHowTo test split (docs/corpora/showhowto.md "Split").

Paper: Souček et al., CVPR 2025 Sec. 5.1 "Dataset": "3,964 sequences from 200 tasks covering the
distribution over task categories in the full dataset ... we prioritize samples with high DFN-CLIP alignment scores"
[paper]. The algorithm below is [toolkit] (the authors' is not released); pure stdlib, deterministic for a seed.

Stable under edits [toolkit]: where the toolkit draws (the tasks of a category, step 3) it takes them in a seeded hash
order of their ids (:func:`_hash_order`) instead of ``random.Random(seed).sample``, so a task's place depends on its
own id only. What a change of one video can still move is said in :func:`choose_test_split` and in
docs/corpora/showhowto.md "Test split".

Records are mappings with ``sequence_id``, ``task_id``, ``category_1``, ``num_steps`` and ``mean_score`` (``None`` or
NaN = null, e.g. every row of the ``middle`` aligner). A missing/empty ``category_1`` counts as the category ``""``.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MIN_TASK_SEQS", "TEST_SIZE", "TEST_TASKS", "SplitPlan", "allocate_slots", "choose_test_split",
           "plan_test_split"]

#: the records of the split: a collection, or a zero-arg callable returning a fresh iterable of them
Records = Iterable[Mapping[str, Any]] | Callable[[], Iterable[Mapping[str, Any]]]

TEST_TASKS = 200  # Souček et al., CVPR 2025, Sec. 5.1
TEST_SIZE = 3964  # Souček et al., CVPR 2025, Sec. 5.1
MIN_TASK_SEQS = 20  # [toolkit] --min-task-seqs


@dataclass
class SplitPlan:
    """What :func:`plan_test_split` decided: slots per category (step 2), chosen task ids per category in hash order
    (step 3), the test sequence ids in take order (step 4) and how many tasks they come from."""

    allocation: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, list[str]] = field(default_factory=dict)
    test_ids: list[str] = field(default_factory=list)
    candidates: int = 0
    eligible: int = 0
    test_task_count: int = 0


def _score(record: Mapping[str, Any]) -> float | None:
    value = record.get("mean_score")
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _rank_key(record: Mapping[str, Any]) -> tuple:
    """mean_score descending, nulls last, then sequence_id (step 4 of the split); the task id rides along last."""
    score = _score(record)
    return (score is None, -score if score is not None else 0.0, str(record["sequence_id"]), str(record["task_id"]))


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


def _hash_order(seed: int, key: str) -> tuple[str, str]:
    """The place of ``key`` in the seeded hash order that stands for a random draw (step 3): the sha256 of the seed
    and the key, then the key itself. It depends on nothing but these two, so adding or removing one candidate never
    moves another [toolkit]."""
    return hashlib.sha256(f"{int(seed)}\0{key}".encode()).hexdigest(), key


def _eligible(r: Mapping[str, Any]) -> bool:
    return r.get("task_id") not in (None, "") and int(r.get("num_steps") or 0) >= 2


def _reiterable(records: Records) -> Callable[[], Iterable[Mapping[str, Any]]]:
    """``records`` as a zero-arg callable returning a fresh iterable (a one-shot iterator is read into a list)."""
    if callable(records):
        return records
    if iter(records) is records:  # type: ignore[arg-type]
        records = list(records)
    return lambda: records  # type: ignore[return-value]


def plan_test_split(records: Records, test_tasks: int = TEST_TASKS, min_task_seqs: int = MIN_TASK_SEQS,
                    test_size: int = TEST_SIZE, seed: int = 0) -> SplitPlan:
    """Steps 1-4 of the split (docs/corpora/showhowto.md), with the decisions kept (see :func:`choose_test_split`).

    ``records``: a collection, or a zero-arg callable returning a fresh iterable of them; it is read twice, each
    time one record at a time: first for the tasks (eligible sequences and categories per task), then for the
    sequences of the chosen tasks only. What is held is per task and per category, and the chosen tasks'
    sequences: not the records."""
    source = _reiterable(records)
    per_task: dict[str, int] = Counter()
    task_cats: dict[str, Counter] = defaultdict(Counter)
    seq_per_category: Counter = Counter()
    for r in source():  # pass 1: the tasks
        if _eligible(r):
            task, cat = str(r["task_id"]), str(r.get("category_1") or "")
            per_task[task] += 1
            task_cats[task][cat] += 1
            seq_per_category[cat] += 1
    # a task's category: the most frequent category_1 among its eligible sequences (ties by name) [toolkit]
    task_category = {t: min(cats, key=lambda c: (-cats[c], c)) for t, cats in task_cats.items()}
    candidates = sorted(t for t, n in per_task.items() if n >= min_task_seqs)
    plan = SplitPlan(candidates=len(candidates), eligible=sum(per_task.values()))
    by_category: dict[str, list[str]] = defaultdict(list)
    for t in candidates:  # sorted by task_id
        by_category[task_category[t]].append(t)
    if len(candidates) <= test_tasks:  # step 1: all candidates are taken
        plan.allocation = {c: len(ts) for c, ts in sorted(by_category.items())}
        plan.tasks = {c: list(ts) for c, ts in sorted(by_category.items())}
    else:  # steps 2-3
        capacity = {c: len(by_category.get(c, [])) for c in seq_per_category}
        plan.allocation = allocate_slots(dict(sorted(seq_per_category.items())), test_tasks, capacity)
        for c in sorted(plan.allocation):
            n = plan.allocation[c]
            if n > 0:
                plan.tasks[c] = sorted(by_category[c], key=lambda t: _hash_order(seed, t))[:n]
    chosen = {t for ts in plan.tasks.values() for t in ts}
    by_task: dict[str, list[tuple]] = defaultdict(list)
    for r in source():  # pass 2: the sequences of the chosen tasks
        if _eligible(r) and str(r["task_id"]) in chosen:
            by_task[str(r["task_id"])].append(_rank_key(r))
    # step 4: rank inside each task, then round-robin over the tasks
    ranked = [sorted(by_task[t]) for ts in plan.tasks.values() for t in ts]
    depth = max((len(r) for r in ranked), default=0)
    taken: set[str] = set()
    for rank in range(depth):
        layer = sorted(r[rank] for r in ranked if rank < len(r))
        for key in layer:
            if len(plan.test_ids) >= test_size:
                plan.test_task_count = len(taken)
                return plan
            plan.test_ids.append(key[2])
            taken.add(key[3])
    plan.test_task_count = len(taken)
    return plan


def choose_test_split(records: Iterable[Mapping[str, Any]], test_tasks: int = TEST_TASKS,
                      min_task_seqs: int = MIN_TASK_SEQS, test_size: int = TEST_SIZE, seed: int = 0) -> set[str]:
    """The test ``sequence_id``s by steps 1-4 of the toolkit's split (everything else is train, step 5).

    1. eligible = a task and ≥ 2 steps; candidate tasks have ≥ ``min_task_seqs`` eligible sequences; when there are
       at most ``test_tasks`` candidates, all are taken;
    2. else ``test_tasks`` slots go to ``category_1`` values in proportion to their share of eligible sequences
       (largest remainder, ties by category name; a category's slots are capped at its candidate tasks and the rest
       re-apportioned [toolkit]); a task belongs to its sequences' most frequent category;
    3. per category its first candidates in the seeded hash order of their ids (``sha256(f"{seed}\\0{task_id}")``,
       :func:`_hash_order`), as many as its slots: a draw without replacement that no other task's presence moves;
    4. per chosen task rank by ``mean_score`` desc (null last, then ``sequence_id``); take rank 1 of every task, then
       rank 2, ... (inside a round by the same key) until ``test_size``.
    """
    return set(plan_test_split(records, test_tasks, min_task_seqs, test_size, seed).test_ids)
