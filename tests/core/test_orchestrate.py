from __future__ import annotations

from dataclasses import dataclass

import pytest

from builders.core.orchestrate import run_pipelines
from builders.core.runners import LocalRunner

from .toy import Fragile, ToyConfig, counts, toy_pipelines


def test_counts_and_accounting(tmp_path):
    res = run_pipelines(toy_pipelines(ToyConfig()), tmp_path, LocalRunner(), progress=False)
    # 50 numbers; 5 end in 9 -> malformed; 45 read
    assert counts(res)["read_numbers"] == (50, 45, {"malformed_number": 5})
    # multiples of 3 among 0..49 without 9,19,29,39,49: 17 multiples in 0..49 minus 9 and 39 -> 15
    assert counts(res)["drop_multiples"] == (45, 30, {"multiple": 15})
    assert counts(res)["fragile"] == (30, 29, {"step_error": 1})
    rows = list(res.outputs["numbers"].rows())
    kept = [i for i in range(50) if i % 10 != 9 and i % 3 != 0 and i != 7]
    assert [r["value"] for r in rows] == kept
    total = sum(i for i in range(50) if i % 10 != 9 and i % 3 != 0)
    assert {r["total"] for r in rows} == {total}
    assert res.counters() == {"numbers_read": 50, "seen": 30}
    drops = list(res.drops())
    assert len(drops) == 5 + 15 + 1
    bad = [d for d in drops if d["reason"] == "step_error"]
    assert bad == [{"item_id": "n7", "stage": "fragile", "reason": "step_error",
                    "detail": "ValueError: seven is unlucky"}]
    for st in res.steps.values():
        assert st.rows_in == st.kept + sum(st.dropped.values())


def test_rerun_uses_cache_and_config_change_invalidates(tmp_path):
    run_pipelines(toy_pipelines(ToyConfig()), tmp_path, LocalRunner(), progress=False)
    again = run_pipelines(toy_pipelines(ToyConfig()), tmp_path, LocalRunner(), progress=False)
    assert all(s.cached_shards == s.shards for s in again.steps.values())
    changed = run_pipelines(toy_pipelines(ToyConfig(modulus=4)), tmp_path, LocalRunner(), progress=False)
    assert changed.steps["read_numbers"].cached_shards == changed.steps["read_numbers"].shards
    assert changed.steps["drop_multiples"].cached_shards == 0
    # multiples of 4 in 0..49: 0, 4, ..., 48 = 13 values, none ends in 9
    assert changed.steps["drop_multiples"].dropped["multiple"] == 13


def test_input_file_change_invalidates(tmp_path):
    f = tmp_path / "input.txt"
    f.write_text("a")
    cfg = ToyConfig(input_file=str(f))
    run_pipelines(toy_pipelines(cfg), tmp_path / "w", LocalRunner(), progress=False)
    f.write_text("b")
    res = run_pipelines(toy_pipelines(cfg), tmp_path / "w", LocalRunner(), progress=False)
    assert res.steps["read_numbers"].cached_shards == 0


class Boom(RuntimeError):
    pass


def test_resume_after_crash_redoes_only_unfinished_shards(tmp_path, monkeypatch):
    pipes = toy_pipelines(ToyConfig())
    real = Fragile.process

    def crash_from_shard_3(self, rows, out):
        # source shards hold 8 records each: values >= 24 are in shards 3.. ; every row fails alike there,
        # which the runner treats as systemic and raises (as a killed process would stop the build)
        if any(r["value"] >= 24 for r in rows):
            raise Boom("killed")
        return real(self, rows, out)

    monkeypatch.setattr(Fragile, "process", crash_from_shard_3)
    with pytest.raises(Boom):
        run_pipelines(pipes, tmp_path, LocalRunner(), progress=False)
    monkeypatch.setattr(Fragile, "process", real)
    done_dir = next(p for p in tmp_path.joinpath("numbers").iterdir() if p.name.startswith("03_fragile"))
    before = {p.name: p.stat().st_mtime_ns for p in done_dir.glob("*.stats.json")}
    assert len(before) == 3  # shards 0, 1 and 2 finished before the crash
    res = run_pipelines(toy_pipelines(ToyConfig()), tmp_path, LocalRunner(), progress=False)
    after = {p.name: p.stat().st_mtime_ns for p in done_dir.glob("*.stats.json")}
    assert all(after[k] == v for k, v in before.items())  # finished shards were not redone
    assert res.steps["fragile"].cached_shards == 3
    fresh = run_pipelines(toy_pipelines(ToyConfig()), tmp_path / "fresh", LocalRunner(), progress=False)
    assert list(res.outputs["numbers"].rows()) == list(fresh.outputs["numbers"].rows())
    assert counts(res) == counts(fresh)


def test_process_pool_gives_same_rows(tmp_path):
    one = run_pipelines(toy_pipelines(ToyConfig()), tmp_path / "a", LocalRunner(1), progress=False)
    two = run_pipelines(toy_pipelines(ToyConfig()), tmp_path / "b", LocalRunner(2), progress=False)
    assert list(one.outputs["numbers"].rows()) == list(two.outputs["numbers"].rows())
    assert counts(one) == counts(two)


def test_source_reads_an_earlier_pipeline_and_is_keyed_by_it(tmp_path):
    from builders.core.step import Pipeline, Source

    @dataclass(eq=False)
    class Pairs(Source):
        """Pairs of consecutive survivors of the ``numbers`` pipeline (the marc ``dish_pairs`` pattern)."""

        name = "pairs_of_numbers"
        side_inputs = ("numbers",)

        def read(self):
            values = [r["value"] for r in self.side["numbers"].rows(["value"])]
            for a, b in zip(values, values[1:]):
                yield {"id": f"{a}-{b}", "sum": a + b}

    def pipes(cfg):
        return [*toy_pipelines(cfg), Pipeline("pairs", Pairs(), [], shard_size=4)]

    res = run_pipelines(pipes(ToyConfig()), tmp_path, LocalRunner(), progress=False)
    kept = [r["value"] for r in res.outputs["numbers"].rows()]
    assert [r["sum"] for r in res.outputs["pairs"].rows()] == [a + b for a, b in zip(kept, kept[1:])]
    again = run_pipelines(pipes(ToyConfig()), tmp_path, LocalRunner(), progress=False)
    assert again.steps["pairs_of_numbers"].cached_shards == again.steps["pairs_of_numbers"].shards
    # a change upstream changes the side input: the source is read again
    changed = run_pipelines(pipes(ToyConfig(modulus=4)), tmp_path, LocalRunner(), progress=False)
    assert changed.steps["pairs_of_numbers"].cached_shards == 0
    kept = [r["value"] for r in changed.outputs["numbers"].rows()]
    assert changed.steps["pairs_of_numbers"].kept == len(kept) - 1
    with pytest.raises(ValueError, match="needs pipeline"):
        run_pipelines([Pipeline("pairs", Pairs(), [])], tmp_path / "x", LocalRunner(), progress=False)


@pytest.mark.parametrize("per_item", [False, True])
def test_side_inputs_per_item_key_the_fit_not_the_stage_folder(tmp_path, per_item):
    """``Step.side_inputs_per_item`` (issue 36): a changed side pipeline refits the step in its own folder (and the
    later steps keep theirs); by default the side pipeline keys the folder, as before."""
    from builders.core.step import FitInputs, Pipeline, Source, Step

    @dataclass(eq=False)
    class Letters(Source):
        name = "letters"

        def read(self):
            for c in "abcdef":
                yield {"id": c}

    @dataclass(eq=False)
    class CountSide(Step):
        name = "count_side"
        side_inputs = ("numbers",)
        side_inputs_per_item = per_item

        def fit(self, inputs: FitInputs):
            return {"n": sum(1 for _ in inputs.side["numbers"].rows(["value"]))}

        def process(self, rows, out):
            for r in rows:
                out.keep({**r, "n": self.state["n"]})

    @dataclass(eq=False)
    class After(Step):
        name = "after"

        def process(self, rows, out):
            for r in rows:
                out.keep(r)

    def pipes(cfg):
        return [*toy_pipelines(cfg), Pipeline("letters", Letters(), [CountSide(), After()], shard_size=2)]

    def folders():
        return sorted(p.name for p in (tmp_path / "letters").iterdir())

    first = run_pipelines(pipes(ToyConfig()), tmp_path, LocalRunner(), progress=False, keep_generations=3)
    before, n_first = folders(), {r["n"] for r in first.outputs["letters"].rows()}
    changed = run_pipelines(pipes(ToyConfig(modulus=4)), tmp_path, LocalRunner(), progress=False, keep_generations=3)
    assert changed.steps["count_side"].fit == "ran" and changed.steps["count_side"].cached_shards == 0
    assert {r["n"] for r in changed.outputs["letters"].rows()} != n_first
    assert (folders() == before) is per_item
