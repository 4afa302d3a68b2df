"""A toy pipeline for the core tests: integers as rows, a fitted step, a step that raises on one row."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from builders.core.records import Count, Drop, Out
from builders.core.step import FitInputs, Pipeline, Source, Step, input_path


@dataclass(frozen=True)
class ToyConfig:
    n: int = 50
    modulus: int = 3
    input_file: str = ""


@dataclass(eq=False)
class Numbers(Source):
    name = "read_numbers"
    n: int = 50
    input_file: Path | None = input_path()

    def read(self) -> Iterator:
        for i in range(self.n):
            if i % 10 == 9:
                yield Drop(f"n{i}", self.name, "malformed_number", "ends in 9")
            else:
                yield {"id": f"n{i}", "value": i}
        yield Count("numbers_read", self.n)


@dataclass(eq=False)
class DropMultiples(Step):
    name = "drop_multiples"
    modulus: int = 3

    def process(self, rows, out: Out) -> None:
        for r in rows:
            if r["value"] % self.modulus == 0:
                out.drop(r["id"], "multiple", str(self.modulus))
            else:
                out.keep(r)


@dataclass(eq=False)
class AddTotal(Step):
    """Needs the whole input: adds the sum over all rows (a fitted statistic)."""

    name = "add_total"

    def fit(self, inputs: FitInputs) -> int:
        return sum(r["value"] for r in inputs.data.rows(["value"]))

    def process(self, rows, out: Out) -> None:
        for r in rows:
            out.keep({**r, "total": self.state})
            out.count("seen")


@dataclass(eq=False)
class Fragile(Step):
    """Raises on value 7 (a bad row); the runner must drop only that row."""

    name = "fragile"

    def process(self, rows, out: Out) -> None:
        for r in rows:
            if r["value"] == 7:
                raise ValueError("seven is unlucky")
            out.keep(r)


def numbers(cfg: ToyConfig) -> Numbers:
    return Numbers(n=cfg.n, input_file=Path(cfg.input_file) if cfg.input_file else None)


def toy_pipelines(cfg: ToyConfig, shard_size: int = 8) -> list[Pipeline]:
    """The toy config mapped onto step constructors, as a corpus's pipeline function does."""
    return [Pipeline("numbers", numbers(cfg), [DropMultiples(modulus=cfg.modulus), AddTotal(), Fragile()],
                     shard_size=shard_size)]


def counts(result) -> dict:
    return {k: (v.rows_in, v.kept, dict(v.dropped)) for k, v in result.steps.items()}


__all__ = ["ToyConfig", "numbers", "toy_pipelines", "counts", "Counter"]
