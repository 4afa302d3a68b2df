"""The ShowHowTo test split (spec showhowto.md §8 "Split") on a small synthetic corpus with hand-computed choices."""

from __future__ import annotations

import random

import pytest

from builders.ops.showhowto_split import (
    MIN_TASK_SEQS,
    TEST_SIZE,
    TEST_TASKS,
    allocate_slots,
    choose_test_split,
    plan_test_split,
)


def _rec(sid: str, task: str | None, cat: str | None, steps: int = 5, score: float | None = 0.5) -> dict:
    return {"sequence_id": sid, "task_id": task, "category_1": cat, "num_steps": steps, "mean_score": score}


def corpus() -> list[dict]:
    """Eligible: Food 14 (f1 5, f2 4, f3 3, f4 2), Cars 7 (c1 4, c2 3), Arts 3 (a1), no category 3 (n1) = 27.
    Not eligible: a1's 1-step sequence, 5 sequences without a task. Candidates at min 3: f1 f2 f3 c1 c2 a1 n1."""
    rows = []
    for task, cat, n in [("f1", "Food", 5), ("f2", "Food", 4), ("f3", "Food", 3), ("f4", "Food", 2),
                         ("c1", "Cars", 4), ("c2", "Cars", 3), ("a1", "Arts", 3), ("n1", None, 3)]:
        rows += [_rec(f"{task}-{i}", task, cat, score=round(0.1 * (i + 1), 1)) for i in range(n)]
    rows.append(_rec("a1-short", "a1", "Arts", steps=1, score=0.99))
    rows += [_rec(f"none-{i}", None, "Food", score=0.99) for i in range(4)] + [_rec("empty-0", "", "Food")]
    return rows


def test_defaults_are_the_papers():
    assert (TEST_TASKS, TEST_SIZE, MIN_TASK_SEQS) == (200, 3964, 20)


def test_largest_remainder_allocation_by_hand():
    # 4 slots over 27 sequences: Food 56/27 = 2 r2, Cars 28/27 = 1 r1, Arts 12/27 = 0 r12, "" 12/27 = 0 r12;
    # one slot left: remainders tie at 12 between "" and "Arts" -> by name, "" first
    counts = {"": 3, "Arts": 3, "Cars": 7, "Food": 14}
    assert allocate_slots(counts, 4) == {"": 1, "Arts": 0, "Cars": 1, "Food": 2}
    # 10 slots: Food 140/27 = 5 r5, Cars 70/27 = 2 r16, Arts 30/27 = 1 r3, "" 1 r3 -> one left: Cars
    assert allocate_slots(counts, 10) == {"": 1, "Arts": 1, "Cars": 3, "Food": 5}
    assert sum(allocate_slots({"a": 1, "b": 1, "c": 1}, 2).values()) == 2
    assert allocate_slots({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}  # equal remainders: by name


def test_allocation_capped_by_candidates_and_reapportioned():
    # Food would get 5 of 10 but has only 3 candidate tasks: its 2 spare slots go to the others by the same rule
    counts = {"": 3, "Arts": 3, "Cars": 7, "Food": 14}
    capacity = {"": 2, "Arts": 2, "Cars": 9, "Food": 3}
    # round 1: "" 1, Arts 1, Cars 3, Food 5 -> capped 3 (2 left); round 2 over "", Arts, Cars (13 sequences):
    # "" 6/13 = 0 r6, Arts 0 r6, Cars 14/13 = 1 r1 -> one left: "" (tie with Arts at 6, by name)
    assert allocate_slots(counts, 10, capacity) == {"": 2, "Arts": 1, "Cars": 4, "Food": 3}


def test_plan_on_the_synthetic_corpus():
    plan = plan_test_split(corpus(), test_tasks=4, min_task_seqs=3, test_size=100, seed=0)
    assert plan.eligible == 27 and plan.candidates == 7
    assert plan.allocation == {"": 1, "Arts": 0, "Cars": 1, "Food": 2}
    # step 3: per category the first candidates in the order of sha256("0\0<task_id>") (hand-computed):
    # n1 0cf93a28; c2 b0711b7a < c1 e9b5527e; f3 30ee723b < f1 6a52128a < f2 8b543a52; Arts (0 slots) takes nothing
    assert plan.tasks == {"": ["n1"], "Cars": ["c2"], "Food": ["f3", "f1"]}
    chosen = {t for ts in plan.tasks.values() for t in ts}
    assert "f4" not in chosen and "a1" not in chosen
    # every eligible sequence of the chosen tasks is in test (test_size not reached), nothing else
    ids = set(plan.test_ids)
    assert ids == {r["sequence_id"] for r in corpus() if r["task_id"] in chosen}
    assert plan.test_task_count == 4
    assert choose_test_split(corpus(), test_tasks=4, min_task_seqs=3, test_size=100, seed=0) == ids


def test_fewer_candidates_than_slots_takes_all():
    plan = plan_test_split(corpus(), test_tasks=10, min_task_seqs=3, test_size=10_000)
    assert sorted(t for ts in plan.tasks.values() for t in ts) == ["a1", "c1", "c2", "f1", "f2", "f3", "n1"]
    assert plan.tasks[""] == ["n1"]  # a task without a category is a candidate like any other
    ids = set(plan.test_ids)
    assert len(ids) == 5 + 4 + 3 + 4 + 3 + 3 + 3
    assert "a1-short" not in ids and not any(i.startswith(("none-", "empty-", "f4-")) for i in ids)
    # exactly as many candidates as slots: all taken too
    assert len(choose_test_split(corpus(), test_tasks=7, min_task_seqs=3, test_size=10_000)) == 25


def test_one_step_sequences_are_not_eligible():
    rows = [_rec(f"t-{i}", "t", "Food") for i in range(2)] + [_rec("t-one", "t", "Food", steps=1)]
    assert choose_test_split(rows, test_tasks=1, min_task_seqs=3, test_size=10) == set()  # only 2 eligible
    rows.append(_rec("t-2", "t", "Food", steps=2))
    assert choose_test_split(rows, test_tasks=1, min_task_seqs=3, test_size=10) == {"t-0", "t-1", "t-2"}


def test_round_robin_order_by_hand():
    rows = [_rec("a1", "A", "X", score=.9), _rec("a2", "A", "X", score=.5), _rec("a3", "A", "X", score=None),
            _rec("b3", "B", "X", score=.6), _rec("b1", "B", "X", score=.7), _rec("b2", "B", "X", score=.6)]
    # ranks: A = a1 .9, a2 .5, a3 null; B = b1 .7, b2 .6, b3 .6 (tie by id)
    # round 1: a1 .9, b1 .7; round 2: b2 .6, a2 .5; round 3: b3 .6, a3 null
    plan = plan_test_split(rows, test_tasks=2, min_task_seqs=1, test_size=5)
    assert plan.test_ids == ["a1", "b1", "b2", "a2", "b3"]
    plan = plan_test_split(rows, test_tasks=2, min_task_seqs=1, test_size=3)
    assert plan.test_ids == ["a1", "b1", "b2"]


def test_null_scores_rank_by_sequence_id():
    rows = [_rec(sid, "A", "X", score=None) for sid in ["a-c", "a-a", "a-b"]]
    rows += [_rec(sid, "B", "X", score=float("nan")) for sid in ["b-b", "b-a"]]
    plan = plan_test_split(rows, test_tasks=2, min_task_seqs=1, test_size=4)
    assert plan.test_ids == ["a-a", "b-a", "a-b", "b-b"]
    # a scored sequence outranks every null one
    rows.append(_rec("b-z", "B", "X", score=0.0))
    assert plan_test_split(rows, test_tasks=2, min_task_seqs=1, test_size=2).test_ids == ["b-z", "a-a"]


def test_deterministic_and_order_independent():
    rows = corpus()
    first = plan_test_split(rows, test_tasks=4, min_task_seqs=3, test_size=12, seed=0)
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    again = plan_test_split(shuffled, test_tasks=4, min_task_seqs=3, test_size=12, seed=0)
    assert first == again and len(first.test_ids) == 12
    draws = {tuple(sorted(choose_test_split(rows, test_tasks=4, min_task_seqs=3, test_size=100, seed=s)))
             for s in range(12)}
    assert len(draws) > 1  # the seed matters


def test_empty_and_no_candidates():
    assert choose_test_split([]) == set()
    assert choose_test_split(corpus()) == set()  # no task reaches 20 eligible sequences


@pytest.mark.parametrize("n_tasks", [250])
def test_many_tasks_draw_exactly_test_tasks(n_tasks):
    cats = ["Food", "Cars", "Arts", "Home"]
    rows = [_rec(f"t{t:03d}-{i}", f"t{t:03d}", cats[t % 7 % 4], score=(t * 7 + i) % 10 / 10)
            for t in range(n_tasks) for i in range(20 + t % 3)]
    plan = plan_test_split(rows, seed=0)
    assert sum(len(ts) for ts in plan.tasks.values()) == TEST_TASKS == sum(plan.allocation.values())
    assert len(plan.test_ids) == len(set(plan.test_ids)) == TEST_SIZE
    assert plan.test_ids == plan_test_split(rows, seed=0).test_ids


# ------------------------------------------------------------------------------ stability under edits (hash order)
def _ab() -> list[dict]:
    return [_rec("a1", "A", "X", score=.9), _rec("a2", "A", "X", score=.5), _rec("a3", "A", "X", score=None),
            _rec("b3", "B", "X", score=.6), _rec("b1", "B", "X", score=.7), _rec("b2", "B", "X", score=.6)]


def _edited(rows: list[dict], sid: str, **change) -> list[dict]:
    return [{**r, **change} if r["sequence_id"] == sid else r for r in rows]


def test_an_edit_that_keeps_its_video_on_its_side_changes_nothing_else_by_hand():
    # test_size 3: a1 .9, b1 .7 (round 1), b2 .6 (round 2, before a2 .5)
    base = choose_test_split(_ab(), test_tasks=2, min_task_seqs=1, test_size=3)
    assert base == {"a1", "b1", "b2"}
    # a2 .5 -> .55 and 3 more steps: still below b2 in round 2; a1 .9 -> .8: still first of A
    assert choose_test_split(_edited(_ab(), "a2", mean_score=.55, num_steps=8), test_tasks=2, min_task_seqs=1,
                             test_size=3) == base
    assert choose_test_split(_edited(_ab(), "a1", mean_score=.8), test_tasks=2, min_task_seqs=1, test_size=3) == base
    # one added sequence of A that ranks last, and one of a task with too few sequences to be a candidate
    more = [*_ab(), _rec("a4", "A", "X", score=.1), _rec("c1", "C", "X", score=.99)]
    assert choose_test_split(more, test_tasks=3, min_task_seqs=2, test_size=3) == base


def test_an_edit_that_moves_its_video_in_displaces_exactly_one_by_hand():
    # a3 null -> .8: A ranks a1 .9, a3 .8, a2 .5; round 2 is a3 .8 then b2 .6, so with 3 places b2 leaves
    got = choose_test_split(_edited(_ab(), "a3", mean_score=.8), test_tasks=2, min_task_seqs=1, test_size=3)
    assert got == {"a1", "b1", "a3"}
    # an added sequence of B with .95 takes B's rank 1: round 1 is b-new .95, a1 .9 and round 2 starts with b1 .7
    got = choose_test_split([*_ab(), _rec("b-new", "B", "X", score=.95)], test_tasks=2, min_task_seqs=1, test_size=3)
    assert got == {"b-new", "a1", "b1"}  # b2 displaced, nothing else moved


def test_a_new_candidate_task_outside_the_slots_changes_nothing():
    """The hash order of step 3 keys each task by its own id: a task that becomes a candidate and does not rank within
    its category's slots leaves the chosen tasks as they were, where ``random.Random(seed).sample`` of the longer
    candidate list draws others."""
    rows = corpus()
    plan = plan_test_split(rows, test_tasks=4, min_task_seqs=3, test_size=100, seed=0)
    # f5: a fourth Food candidate, sha256("0\0f5") = c8a98aa5 after f3 30ee..., f1 6a52... (Food has 2 slots)
    more = rows + [_rec(f"f5-{i}", "f5", "Food", score=0.3) for i in range(3)]
    plan2 = plan_test_split(more, test_tasks=4, min_task_seqs=3, test_size=100, seed=0)
    assert plan2.candidates == 8 and plan2.allocation == {"": 1, "Arts": 0, "Cars": 1, "Food": 2}
    assert plan2.tasks == plan.tasks and plan2.test_ids == plan.test_ids
    # the draw this replaces: random.sample over the sorted candidates moves when one is added
    assert random.Random(0).sample(["f1", "f2", "f3"], 2) != random.Random(0).sample(["f1", "f2", "f3", "f5"], 2)


def _random_corpus(rng: random.Random) -> tuple[list[dict], dict]:
    rows = []
    for t in range(rng.randint(2, 9)):
        for i in range(rng.randint(1, 8)):
            rows.append(_rec(f"t{t}-{i}", f"t{t}", rng.choice("ABC"), steps=rng.choice([1, 2, 3, 5]),
                             score=rng.choice([None, round(rng.random(), 2)])))
    kw = {"test_tasks": rng.randint(1, 4), "min_task_seqs": rng.randint(1, 4), "test_size": rng.randint(1, 20),
          "seed": rng.randint(0, 3)}
    return rows, kw


@pytest.mark.parametrize("seed", range(4))
def test_one_edited_or_added_video_moves_at_most_itself_and_the_one_it_displaces(seed):
    """Over random small corpora: with the chosen tasks unchanged, an edited or added sequence changes the split of
    no other sequence unless it moves into or out of test itself, and then of exactly one other at most (the test set
    keeps its size)."""
    rng = random.Random(seed)
    checked = {"same side": 0, "moved": 0}
    for _ in range(300):
        rows, kw = _random_corpus(rng)
        before = plan_test_split(rows, **kw)
        j = rng.randrange(len(rows) + 1)
        v = _rec("new", f"t{rng.randrange(10)}", rng.choice("ABC"), steps=rng.choice([1, 2, 5]),
                 score=rng.choice([None, round(rng.random(), 2)]))
        if j < len(rows):  # an edit: new steps and score of one sequence
            v = {**rows[j], "num_steps": v["num_steps"], "mean_score": v["mean_score"]}
            after_rows = [*rows[:j], v, *rows[j + 1:]]
        else:  # an added sequence
            after_rows = [*rows, v]
        after = plan_test_split(after_rows, **kw)
        if after.tasks != before.tasks:  # a task crossed min_task_seqs, or a category's slots moved: not this test
            continue
        a, b = set(before.test_ids), set(after.test_ids)
        others = (a ^ b) - {v["sequence_id"]}
        if (v["sequence_id"] in a) == (v["sequence_id"] in b):
            assert not others, (kw, v)
            checked["same side"] += 1
        else:
            assert len(others) <= 1, (kw, v, others)
            checked["moved"] += 1
    assert checked["same side"] > 100 and checked["moved"] > 10


def test_paper_sized_edits_keep_every_other_sequence():
    """250 tasks, the paper's 200 test tasks and 3,964 sequences: rescoring 40 sequences one at a time within their
    side (test or train) leaves the other 5,000-odd sequences' split as it was."""
    cats = ["Food", "Cars", "Arts", "Home"]
    rows = [_rec(f"t{t:03d}-{i}", f"t{t:03d}", cats[t % 7 % 4], score=round(((t * 7 + i * 13) % 97) / 97, 4))
            for t in range(250) for i in range(20 + t % 5)]
    base = choose_test_split(rows)
    assert len(base) == TEST_SIZE
    rng = random.Random(3)
    for r in rng.sample(rows, 40):
        inside = r["sequence_id"] in base
        # a test sequence that scores higher, a train sequence that scores lower: neither crosses
        new = min(1.0, r["mean_score"] + 0.3) if inside else max(0.0, r["mean_score"] - 0.3)
        got = choose_test_split(_edited(rows, r["sequence_id"], mean_score=new, num_steps=9))
        assert got == base, r["sequence_id"]
