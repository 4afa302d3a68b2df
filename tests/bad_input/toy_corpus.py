"""A corpus module with the interface of ``builders.corpora.<name>`` and no model, for the concurrent-build test: its
one step waits until the file named by ``$TOY_GATE`` exists, so a second build can be started while it holds the
work directory; its release is one JSON file."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from builders.core.atomic import atomic_write_text
from builders.core.step import Pipeline, Source, Step

NAME = "toy"
DEFAULT_SHARD_SIZE = 4


@dataclass(frozen=True)
class Config:
    n: int = 6
    limit: int | None = None


@dataclass(eq=False)
class Numbers(Source):
    name = "read_numbers"
    n: int = 6

    def read(self):
        for i in range(self.n):
            yield {"id": f"n{i}", "value": i}


@dataclass(eq=False)
class WaitForGate(Step):
    name = "wait_for_gate"

    def process(self, rows, out) -> None:
        gate = Path(os.environ["TOY_GATE"])
        print("holding", flush=True)
        while not gate.exists():
            time.sleep(0.05)
        for r in rows:
            out.keep(r)


def add_arguments(p) -> None:
    pass


def overrides_from_args(args) -> dict:
    return {}


def resolve_inputs(cfg: Config) -> tuple[Config, bool]:
    return cfg, True


def pipelines(cfg: Config, shard_size: int) -> list[Pipeline]:
    return [Pipeline("numbers", Numbers(n=cfg.n), [WaitForGate()], shard_size)]


def release(result, cfg, out_dir: Path, info) -> dict:
    rows = list(result.outputs["numbers"].rows())
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "rows.json", json.dumps(rows))
    return {"default": {"train": len(rows)}}
