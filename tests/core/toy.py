"""A toy pipeline for the core tests: integers as rows, a fitted step, a step that raises on one row."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from builders.core.records import Count, Drop, Out
from builders.core.step import FitInputs, Pipeline, Source, Step


@dataclass(frozen=True)
class ToyConfig:
    n: int = 50
    modulus: int = 3
    input_file: str = ""


class Numbers(Source):
    name = "read_numbers"
    config_keys = ("n", "input_file")

    def input_paths(self):
        return [Path(self.cfg.input_file)] if self.cfg.input_file else []

    def read(self) -> Iterator:
        for i in range(self.cfg.n):
            if i % 10 == 9:
                yield Drop(f"n{i}", self.name, "malformed_number", "ends in 9")
            else:
                yield {"id": f"n{i}", "value": i}
        yield Count("numbers_read", self.cfg.n)


class DropMultiples(Step):
    name = "drop_multiples"
    config_keys = ("modulus",)

    def process(self, rows, out: Out) -> None:
        for r in rows:
            if r["value"] % self.cfg.modulus == 0:
                out.drop(r["id"], "multiple", str(self.cfg.modulus))
            else:
                out.keep(r)


class AddTotal(Step):
    """Needs the whole input: adds the sum over all rows (a fitted statistic)."""

    name = "add_total"
    config_keys = ()

    def fit(self, inputs: FitInputs) -> int:
        return sum(r["value"] for r in inputs.data.rows(["value"]))

    def process(self, rows, out: Out) -> None:
        for r in rows:
            out.keep({**r, "total": self.state})
            out.count("seen")


class Fragile(Step):
    """Raises on value 7 (a bad row); the runner must drop only that row."""

    name = "fragile"
    config_keys = ()

    def process(self, rows, out: Out) -> None:
        for r in rows:
            if r["value"] == 7:
                raise ValueError("seven is unlucky")
            out.keep(r)


def toy_pipelines(cfg: ToyConfig, shard_size: int = 8) -> list[Pipeline]:
    return [Pipeline("numbers", Numbers(cfg), [DropMultiples(cfg), AddTotal(cfg), Fragile(cfg)],
                     shard_size=shard_size)]


def counts(result) -> dict:
    return {k: (v.rows_in, v.kept, dict(v.dropped)) for k, v in result.steps.items()}


__all__ = ["ToyConfig", "toy_pipelines", "counts", "Counter"]
