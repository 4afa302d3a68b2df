"""The building blocks of a pipeline: a :class:`Source` that lists raw inputs as cheap work items, and a :class:`Step`
that maps a batch of rows to kept rows, drops and counters (docs/architecture.md, "Steps, pipelines and runners").

A step is pure given its input rows, its config, the files it declares (:meth:`Step.input_paths`, fingerprinted by
content) and its fitted artefact, so its output is cached per shard under (input fingerprint, step name, step version,
config, input files). Steps never know which runner executes them.

Lifecycle, on any runner::

    state = step.fit(inputs)          # a *global stage* (only when overridden): once, over the whole input, with the
                                      # step's resources; writes its artefacts under inputs.artefact_dir and returns a
                                      # small JSON-able state (paths, numbers), cached under the stage's fingerprint
    step.setup(state)                 # once per worker / Ray actor: load models and artefacts BY PATH from the state
    step.process(rows, out)           # per shard: out.keep(row) / out.drop(id, reason, detail) / out.count(name)
    step.teardown()                   # once per worker when the stage is done: free models (GPU memory)

To add a stage: subclass Step, set ``name``/``version``/``config_keys``, implement ``process`` (and ``fit`` when it
needs the whole input, ``input_paths`` when it reads files), and add an instance to the corpus's pipeline list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping

from .records import Count, Drop, Out, Row
from .shards import StageData


@dataclass
class FitInputs:
    """What ``Step.fit`` may read: the step's complete input, the final outputs of other pipelines, its own artefact
    folder (everything it writes goes there) and the build's shared cache folder (request / embedding caches)."""

    data: StageData
    side: Mapping[str, StageData] = field(default_factory=dict)
    artefact_dir: Path | None = None
    cache_dir: Path | None = None


def config_subset(cfg: Any, keys: tuple[str, ...] | None) -> dict[str, Any]:
    """The config fields that key a stage's cache (all of them when ``keys`` is None)."""
    from .config import to_dict

    full = to_dict(cfg)
    return {k: full[k] for k in (keys if keys is not None else tuple(full))}


def gpus_for_device(device: str) -> float:
    """GPUs a model step needs per worker for its ``device`` config: one for ``cuda`` / ``cuda:N``, none else."""
    return 1.0 if str(device).startswith("cuda") else 0.0


def _paths(values: Any) -> list[Path]:
    out: list[Path] = []
    for v in ([values] if isinstance(values, (str, Path)) else list(values or [])):
        if v:
            out.append(Path(v))
    return out


class Step:
    #: stage name in statistics, drops and cache paths (the papers' words: "title_sieve", "swap", ...)
    name: ClassVar[str] = ""
    #: bump when the step's output changes for the same input and config
    version: ClassVar[str] = "1"
    #: config fields that change this step's output (part of the cache key); None = the whole config
    config_keys: ClassVar[tuple[str, ...] | None] = None
    #: config fields holding paths of files or directories the step reads: their contents key its cache
    input_keys: ClassVar[tuple[str, ...]] = ()
    #: the subset of ``input_keys`` whose files feed rows one by one (a video's slice of ``raw_caption.json``, its
    #: WhisperX file, media or feature file): their whole-file fingerprints go to the manifest and key ``fit``, but
    #: not the stage folder; :meth:`item_digest` keys each shard instead, so an edit reruns only its shards
    item_input_keys: ClassVar[tuple[str, ...]] = ()
    #: the input columns :meth:`item_digest` reads (default: the id field)
    item_fields: ClassVar[tuple[str, ...] | None] = None
    #: names of other pipelines whose final output ``fit`` reads
    side_inputs: ClassVar[tuple[str, ...]] = ()
    #: the step loads a model in ``setup`` (Ray runs it on an actor pool; ``teardown`` frees it)
    uses_model: ClassVar[bool] = False
    #: GPUs per worker (``fit`` and ``process``): one worker per GPU locally, actors sized by GPUs on Ray
    num_gpus: ClassVar[float] = 0.0
    #: the step may keep several rows for one input row (accounting: rows in + added = kept + dropped)
    fan_out: ClassVar[bool] = False
    #: a fan-out step's kept rows name their input row in this field (default: ``id_field``)
    parent_field: ClassVar[str | None] = None
    id_field: ClassVar[str] = "id"

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.state: Any = None

    def cache_config(self) -> dict[str, Any]:
        return config_subset(self.cfg, self.config_keys)

    def input_paths(self) -> list[Path]:
        """Files and directories whose contents this step's output depends on (fingerprinted, memoised)."""
        return [p for k in self.input_keys for p in _paths(getattr(self.cfg, k))]

    def stage_input_paths(self) -> list[Path]:
        """The input paths that key the whole stage (``input_paths`` less those of ``item_input_keys``)."""
        item = {p for k in self.item_input_keys for p in _paths(getattr(self.cfg, k))}
        return [p for p in self.input_paths() if p not in item]

    @property
    def has_item_inputs(self) -> bool:
        """The runner computes :meth:`item_digest` for each shard (per-item input keys, or an overriding method)."""
        return bool(self.item_input_keys) or type(self).item_digest is not Step.item_digest

    def item_columns(self) -> list[str]:
        return list(self.item_fields) if self.item_fields is not None else [self.id_field]

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """A digest of the per-item inputs that ``rows`` (only :meth:`item_columns`) read, computed before ``setup``
        from the config and the fitted ``state``: cheap (a ``stat`` and a memo look-up a file, no model). A shard
        whose digest changed is redone. ``memo`` is a :class:`~builders.core.fingerprint.FingerprintMemo` (see
        :func:`~builders.core.fingerprint.item_file_sha`). Default: no per-item inputs (``""``)."""
        return ""

    def gpus(self) -> float:
        """GPUs this step needs per worker (a step may make it depend on its config, e.g. ``device``)."""
        return float(self.num_gpus)

    def parent_id(self, item_id: str) -> str:
        """The input row a fan-out step's drop of ``item_id`` belongs to (the accounting check of the runners)."""
        return item_id

    @property
    def is_global(self) -> bool:
        """A global stage: it overrides ``fit`` and so needs its whole input before any shard is processed."""
        return type(self).fit is not Step.fit

    def fit(self, inputs: FitInputs) -> Any:
        return None

    def setup(self, state: Any) -> None:
        self.state = state

    def process(self, rows: list[Row], out: Out) -> None:
        raise NotImplementedError(f"{type(self).__name__}.process")

    def teardown(self) -> None:
        """Free what ``setup`` (or ``fit``) loaded; called once per worker when the stage is done."""


class Source:
    """Lists raw inputs in a fixed order as cheap work items (a file, a WARC record offset, a CSV row), with
    :class:`Drop` records and :class:`Count` events; parsing belongs in steps, so a killed build resumes inside a long
    input."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    config_keys: ClassVar[tuple[str, ...] | None] = None
    #: config fields holding the paths the listing reads (fingerprinted)
    input_keys: ClassVar[tuple[str, ...]] = ()
    #: names of earlier pipelines whose final output ``read`` uses (as ``self.side[name]``); part of the cache key
    side_inputs: ClassVar[tuple[str, ...]] = ()
    #: every row holds all that its item's input contributes (the values, or a content hash of the item's slice, not
    #: only a path or an offset into a file): the source is then listed again *into the same stage folder* when its
    #: inputs change, and later stages redo only the shards whose rows changed. False: an input change makes a new
    #: stage folder, and every later stage runs again
    rows_carry_content: ClassVar[bool] = False

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.side: Mapping[str, StageData] = {}

    def input_paths(self) -> list[Path]:
        """Files whose contents the output depends on (fingerprinted)."""
        return [p for k in self.input_keys for p in _paths(getattr(self.cfg, k))]

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


REQUEST_CACHE_FILE = "requests.sqlite"


class CacheDirStep(Step):
    """A step that needs the build's per-request cache (ASR, LLM: docs/architecture.md, "Caching and resume"): its trivial
    ``fit`` names the cache folder (keyed by its input's digest, so it costs nothing on a rerun)."""

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        return {"cache_dir": str(inputs.cache_dir)}

    def request_cache(self):
        from ..models.request_cache import RequestCache

        return RequestCache(Path(self.state["cache_dir"]) / REQUEST_CACHE_FILE)
