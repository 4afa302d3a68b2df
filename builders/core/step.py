"""The two building blocks of a pipeline: a :class:`Source` that reads raw inputs into rows, and a :class:`Step`
that maps a batch of rows to kept rows, drops and counters (ARCHITECTURE.md "How data flows").

A step is pure given its input rows, its config and its fitted state, so its output is cached per shard under
(input fingerprint, step name, step version, config). Steps never know which runner executes them.

Lifecycle, on any runner::

    state = step.fit(inputs)          # optional, once, on the driver: global statistics over the whole input
    step.setup(state)                 # once per worker / Ray actor: load models, keep the state
    step.process(rows, out)           # per shard: out.keep(row) / out.drop(id, reason, detail) / out.count(name)

To add a stage: subclass Step, set ``name``/``version``/``config_keys``, implement ``process`` (and ``fit`` when it
needs the whole input), and add an instance to the corpus's pipeline list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping

from .records import Count, Drop, Out, Row
from .shards import StageData


@dataclass
class FitInputs:
    """What ``Step.fit`` may read: the step's complete input and the final outputs of other pipelines."""

    data: StageData
    side: Mapping[str, StageData] = field(default_factory=dict)
    work_dir: Path | None = None


def config_subset(cfg: Any, keys: tuple[str, ...] | None) -> dict[str, Any]:
    """The config fields that key a stage's cache (all of them when ``keys`` is None)."""
    from .config import to_dict

    full = to_dict(cfg)
    return {k: full[k] for k in (keys if keys is not None else tuple(full))}


class Step:
    #: stage name in statistics, drops and cache paths (the papers' words: "title_sieve", "swap", ...)
    name: ClassVar[str] = ""
    #: bump when the step's output changes for the same input and config
    version: ClassVar[str] = "1"
    #: config fields that change this step's output (part of the cache key); None = the whole config
    config_keys: ClassVar[tuple[str, ...] | None] = None
    #: names of other pipelines whose final output ``fit`` reads
    side_inputs: ClassVar[tuple[str, ...]] = ()
    #: the step loads a model (Ray runs it on an actor pool; ``num_gpus`` applies)
    uses_model: ClassVar[bool] = False
    num_gpus: ClassVar[float] = 0.0
    id_field: ClassVar[str] = "id"

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def cache_config(self) -> dict[str, Any]:
        return config_subset(self.cfg, self.config_keys)

    def fit(self, inputs: FitInputs) -> Any:
        return None

    def setup(self, state: Any) -> None:
        self.state = state

    def process(self, rows: list[Row], out: Out) -> None:
        raise NotImplementedError(f"{type(self).__name__}.process")


class Source:
    """Reads raw inputs in a fixed order and yields rows, :class:`Drop` records and :class:`Count` events."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    config_keys: ClassVar[tuple[str, ...] | None] = None
    #: names of earlier pipelines whose final output ``read`` uses (as ``self.side[name]``); part of the cache key
    side_inputs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.side: Mapping[str, StageData] = {}

    def input_paths(self) -> list[Path]:
        """Files whose contents the output depends on (fingerprinted)."""
        return []

    def cache_config(self) -> dict[str, Any]:
        return config_subset(self.cfg, self.config_keys)

    def read(self) -> Iterator[Row | Drop | Count]:
        raise NotImplementedError(f"{type(self).__name__}.read")


@dataclass
class Pipeline:
    """A named source and a plain list of steps. Adding a stage means adding a step to ``steps``."""

    name: str
    source: Source
    steps: list[Step]
    shard_size: int = 256
