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

To add a stage: write a ``@dataclass(eq=False)`` subclass of Step whose fields are its parameters (each with the
paper's default and citation; files it reads are :func:`input_path` fields), set ``name`` / ``version`` and the row
contract (``reads`` / ``writes``), implement ``process`` (and ``fit`` when it needs the whole input), and construct it
in the corpus's pipeline function from the corpus config. Its cache key is its fields (no hand-kept key list), its
input files are fingerprinted by content, its :meth:`Step.resources` say what a worker needs and ``requires`` names
the optional packages it imports (checked when the pipeline is assembled, with the extra that installs them).

Every stage is a dataclass: a :class:`Pipeline` refuses one that is not (its cache key would silently miss whatever
it keeps outside its fields).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Union, get_args, get_origin

from .config import ConfigError
from .records import Count, Drop, Out, Row
from .shards import StageData


class PipelineError(ConfigError):
    """A pipeline that cannot run, found when it is assembled, before any work: a field a step reads that nothing
    upstream writes, a missing optional dependency."""


@dataclass(frozen=True)
class Resources:
    """What one worker of a step needs (the shape of NeMo Curator's ``Resources``): CPU cores, GPUs (a fraction
    shares one), memory in GiB (0: not declared). Runners start one worker per GPU for a GPU step."""

    cpus: float = 1.0
    gpus: float = 0.0
    memory_gb: float = 0.0


@dataclass(frozen=True)
class Requirement:
    """An optional package a step imports (``module``) and the pyproject extra that installs it."""

    module: str
    extra: str

    def missing(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is None
        except (ImportError, ValueError):
            return True


#: the field metadata key of a path parameter: "stage" (its content keys the whole stage) or "item" (its content
#: feeds rows one by one and keys each shard through ``item_digest``)
INPUT = "procvid_input"


def input_path(*, per_item: bool = False, default: Any = None) -> Any:
    """A dataclass field holding a file or folder (or a sequence of them) that the step reads: fingerprinted by
    content; ``per_item``: it feeds rows one by one (a video's slice of ``raw_caption.json``, its WhisperX file), so
    :meth:`Step.item_digest` keys each shard instead of the whole stage."""
    kind = "item" if per_item else "stage"
    if isinstance(default, (list, tuple, set, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={INPUT: kind})
    return field(default=default, metadata={INPUT: kind})


#: the field metadata key of an execution setting: how the step runs (device, batch size, search block), not what it
#: outputs; it does not key the cache
EXECUTION = "procvid_execution"


def execution_setting(default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field that says how the step runs, not what it outputs (a torch device, a batch size): it is not
    part of the cache key, so moving a build to a GPU or another batch size reuses the cached shards."""
    return field(default=default, metadata={EXECUTION: True})


def _param_value(v: Any) -> Any:
    """A parameter as JSON for the cache key: sets sorted, tuples as lists, paths as strings."""
    if isinstance(v, (set, frozenset)):
        return sorted(_param_value(x) for x in v)
    if isinstance(v, (list, tuple)):
        return [_param_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _param_value(x) for k, x in v.items()}
    if isinstance(v, Path):
        return str(v)
    return v


def _fields_of(obj: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(obj) if f.init] if dataclasses.is_dataclass(obj) else []


@dataclass
class FitInputs:
    """What ``Step.fit`` may read: the step's complete input, the final outputs of other pipelines, its own artefact
    folder (everything it writes goes there) and the build's shared cache folder (request / embedding caches)."""

    data: StageData
    side: Mapping[str, StageData] = field(default_factory=dict)
    artefact_dir: Path | None = None
    cache_dir: Path | None = None


def gpus_for_device(device: str) -> float:
    """GPUs a model step needs per worker for its ``device`` config: one for ``cuda`` / ``cuda:N``, none else."""
    return 1.0 if str(device).startswith("cuda") else 0.0


def _paths(values: Any) -> list[Path]:
    out: list[Path] = []
    for v in ([values] if isinstance(values, (str, Path)) else list(values or [])):
        if v:
            out.append(Path(v))
    return out


class _Parametrised:
    """What steps and sources share: parameters (their dataclass fields), the cache key derived from them, the input
    files among them, the optional packages they need."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    #: optional packages imported by ``setup`` / ``process`` / ``fit`` (checked at assembly)
    requires: ClassVar[tuple[Requirement, ...]] = ()

    def params(self) -> dict[str, Any]:
        """The parameters (every dataclass field), as JSON-able values."""
        return {f.name: _param_value(getattr(self, f.name)) for f in _fields_of(self)}

    def cache_config(self) -> dict[str, Any]:
        """The cache key's config part: every parameter but the execution settings (:func:`execution_setting`)."""
        keep = {f.name for f in _fields_of(self) if not f.metadata.get(EXECUTION)}
        return {k: v for k, v in self.params().items() if k in keep}

    def _path_fields(self, kinds: tuple[str, ...]) -> list[Path]:
        return [p for f in _fields_of(self) if f.metadata.get(INPUT) in kinds for p in _paths(getattr(self, f.name))]

    def input_paths(self) -> list[Path]:
        """Files and directories whose contents this step's output depends on (fingerprinted, memoised)."""
        return self._path_fields(("stage", "item"))

    def stage_input_paths(self) -> list[Path]:
        """The input paths that key the whole stage (``input_paths`` less the per-item ones)."""
        return self._path_fields(("stage",))

    def missing_requirements(self) -> list[Requirement]:
        return [r for r in self.requires if r.missing()]


class Step(_Parametrised):
    #: the input columns :meth:`item_digest` reads (default: the id field)
    item_fields: ClassVar[tuple[str, ...] | None] = None
    #: names of other pipelines whose final output ``fit`` reads
    side_inputs: ClassVar[tuple[str, ...]] = ()
    #: the side inputs key ``fit`` only, not the stage folder (as per-item input files do): an edited side pipeline
    #: refits the stage in its own folder, and the shards its fitted state and :meth:`item_digest` say changed are
    #: redone, instead of a new folder for this stage and every later one. For a step whose fit reduces the side
    #: pipeline to a state and per-item digests that together cover all its rows depend on (the Sieve & Swap sieves)
    side_inputs_per_item: ClassVar[bool] = False
    #: the step may keep several rows for one input row (accounting: rows in + added = kept + dropped)
    fan_out: ClassVar[bool] = False
    #: a fan-out step's kept rows name their input row in this field (default: ``id_field``)
    parent_field: ClassVar[str | None] = None
    id_field: ClassVar[str] = "id"
    #: each input row's kept rows, drops and counters depend on that row alone (its content, its per-item inputs),
    #: the parameters and the fitted state, and ``process`` treats its rows one by one: a redone shard then reuses
    #: the outputs of its unchanged rows (builders/core/row_reuse.py). Declare it on steps whose rows are costly
    #: (language detection, sentencification); not for fan-out steps. A step that batches rows (through a model, into
    #: one store file) also declares ``row_wise_batch``
    row_wise: ClassVar[bool] = False
    #: with ``row_wise``: ``process`` attributes every counter to the row it is working on (it sets ``out.item`` to
    #: the row's id before that row's work, builders/core/records.py), so the changed rows of a redone shard are
    #: processed as ONE batch and a fresh shard in one call, as without ``row_wise`` (visual features, Stage 1).
    #: Counters left unattributed are a bug of the step: the runner raises (docs/architecture.md, "Caching")
    row_wise_batch: ClassVar[bool] = False
    #: ``fit`` brings its artefact folder up to date itself (a split of ``raw_caption.json`` that re-splits an edit
    #: in part, builders/sources/transcripts/raw_caption_resplit.py): a refit keeps the folder of the previous fit
    #: instead of starting from an empty one (builders/core/orchestrate.py ``_run_fit``)
    fit_updates_artefacts: ClassVar[bool] = False
    #: folders under ``<work_dir>/cache`` holding files this step writes and its kept rows name (the HowToStep
    #: feature store): when a reader finds one of them damaged, the shards :meth:`shards_naming` it are recomputed
    owns_cache: ClassVar[tuple[str, ...]] = ()
    #: the row contract: fields read from the input rows and fields the kept rows gain (name -> type; ``Any`` when
    #: loose); None = not declared (the check is skipped from there on)
    reads: ClassVar[Mapping[str, Any] | None] = None
    writes: ClassVar[Mapping[str, Any] | None] = None
    #: the kept rows are new rows holding only ``writes`` (not the input row with fields added)
    replaces: ClassVar[bool] = False
    #: fields of the input row the kept rows no longer hold
    removes: ClassVar[tuple[str, ...]] = ()
    state: Any = None
    #: the build's model-output cache folder (``--model-outputs``), set by the build on every step (None outside one):
    #: where a step keeps model outputs that builds of other corpora reuse (ASR). Not a parameter: where the cache
    #: lives never changes a row, so it keys nothing
    model_outputs: str | None = None

    def shards_naming(self, data: StageData, path: Path) -> list[int]:
        """The shards of this step's complete output ``data`` whose rows name the cache file ``path`` (of one of
        the folders in ``owns_cache``); none unless the step owns such files."""
        return []

    def resources(self) -> Resources:
        """What one worker needs (``fit`` and ``process``); a step may make it depend on a parameter (``device``)."""
        return Resources()

    def gpus(self) -> float:
        """GPUs per worker: one worker per GPU locally, actors sized by GPUs on Ray (``resources().gpus``)."""
        return self.resources().gpus

    @property
    def has_item_inputs(self) -> bool:
        """The runner computes :meth:`item_digest` for each shard (per-item inputs, or an overriding method)."""
        per_item = any(f.metadata.get(INPUT) == "item" for f in _fields_of(self))
        return per_item or type(self).item_digest is not Step.item_digest

    def item_columns(self) -> list[str]:
        return list(self.item_fields) if self.item_fields is not None else [self.id_field]

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        """A digest of the per-item inputs that ``rows`` (only :meth:`item_columns`) read, computed before ``setup``
        from the config and the fitted ``state``: cheap (a ``stat`` and a memo look-up a file, no model). A shard
        whose digest changed is redone. ``memo`` is a :class:`~builders.core.fingerprint.FingerprintMemo` (see
        :func:`~builders.core.fingerprint.item_file_sha`). Default: no per-item inputs (``""``)."""
        return ""

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


class Source(_Parametrised):
    """Lists raw inputs in a fixed order as cheap work items (a file, a WARC record offset, a CSV row), with
    :class:`Drop` records and :class:`Count` events; parsing belongs in steps, so a killed build resumes inside a long
    input."""

    #: the fields of the rows it lists (name -> type); None = not declared
    writes: ClassVar[Mapping[str, Any] | None] = None
    #: names of earlier pipelines whose final output ``read`` uses (as ``self.side[name]``); part of the cache key
    side_inputs: ClassVar[tuple[str, ...]] = ()
    #: every row holds all that its item's input contributes (the values, or a content hash of the item's slice, not
    #: only a path or an offset into a file): the source is then listed again *into the same stage folder* when its
    #: inputs change, and later stages redo only the shards whose rows changed. False: an input change makes a new
    #: stage folder, and every later stage runs again
    rows_carry_content: ClassVar[bool] = False

    side: Mapping[str, StageData] = {}
    #: the build's cache folder (``<work_dir>/cache``), set before ``read``: a source may keep what it learnt of an
    #: unchanged input there (a WARC file's listing) and check it when read; None when run by hand
    cache_dir: Path | None = None

    def read(self) -> Iterator[Row | Drop | Count]:
        raise NotImplementedError(f"{type(self).__name__}.read")

    def ends_shard(self, record: Row | Drop, size: int, shard_size: int) -> bool:
        """Whether the shard being listed ends after ``record``, its ``size``-th record. Default: every
        ``shard_size`` records (shards cut by position). A source may cut where its items say instead (a boundary
        chosen by the item's id), so that inserting or removing one item changes the one shard that holds it."""
        return size >= shard_size


@dataclass
class Pipeline:
    """A named source and a plain list of steps. Adding a stage means adding a step to ``steps``.

    Assembling one checks, before any work (:class:`PipelineError`): every stage is a dataclass of its parameters;
    every field a step reads is written by its source or an earlier step, with the same type where both declare one;
    every optional package a stage needs is installed."""

    name: str
    source: Source
    steps: list[Step]
    shard_size: int = 256

    def __post_init__(self) -> None:
        check_dataclasses([self.source, *self.steps], self.name)
        check_contracts(self)
        check_requirements([self.source, *self.steps], self.name)

    def output_fields(self) -> dict[str, Any] | None:
        """The fields (name -> type) of the rows this pipeline outputs, from its stages' row contracts; None where a
        stage declares none."""
        return check_contracts(self)


def check_dataclasses(stages: list[Any], where: str) -> None:
    """Every stage is an instance of a dataclass (its fields are its parameters and key its cache), else
    :class:`PipelineError`: a stage keeping a parameter outside its fields would reuse a stale cache."""
    bad = [f"{type(s).__name__} ({s.name!r})" for s in stages if not dataclasses.is_dataclass(s)]
    if bad:
        raise PipelineError(f"pipeline {where!r}: stage(s) {', '.join(bad)} are not dataclasses; declare each with "
                            "@dataclass(eq=False) and its parameters as fields (docs/new-corpus.md)")


def _same_type(a: Any, b: Any) -> bool:
    return a is Any or b is Any or a == b


def check_contracts(pipe: Pipeline) -> dict[str, Any] | None:
    """The row contract of ``pipe`` (see :class:`Pipeline`); returns the fields (name -> type) of the pipeline's
    output rows, or None where a stage declares no contract (that ends the check)."""
    fields = dict(pipe.source.writes) if pipe.source.writes is not None else None
    writer = {k: f"source {pipe.source.name!r}" for k in fields or {}}
    for step in pipe.steps:
        if fields is None:
            return None
        if step.reads is not None:
            missing = [k for k in step.reads if k not in fields]
            if missing:
                raise PipelineError(
                    f"pipeline {pipe.name!r}: step {step.name!r} reads field(s) {missing} that nothing before it "
                    f"writes (the rows it gets hold {sorted(fields)})")
            clash = [f"{k} ({step.reads[k]} here, {fields[k]} from {writer[k]})" for k in step.reads
                     if not _same_type(step.reads[k], fields[k])]
            if clash:
                raise PipelineError(f"pipeline {pipe.name!r}: step {step.name!r} reads field(s) of another type: "
                                    + "; ".join(clash))
        if step.writes is None:
            return None
        if step.replaces:
            fields, writer = {}, {}
        for k in step.removes:
            fields.pop(k, None)
        fields.update(step.writes)
        writer.update({k: f"step {step.name!r}" for k in step.writes})
    return fields


def _optional(t: Any) -> tuple[bool, Any]:
    """``(True, T)`` for ``T | None`` (``Optional[T]``), else ``(False, t)``."""
    if get_origin(t) in (Union, types.UnionType) and type(None) in get_args(t):
        rest = [a for a in get_args(t) if a is not type(None)]
        return True, rest[0] if len(rest) == 1 else Any
    return False, t


def check_release_reads(pipes: list[Pipeline], reads: Mapping[str, Mapping[str, Any]] | None) -> None:
    """The fields a release reads from each pipeline's output rows (a corpus's ``RELEASE_READS``: pipeline name ->
    field -> type; ``T | None``: read where the rows have it) are written by that pipeline's stages, with the same
    type where both declare one; else :class:`PipelineError` before any work, naming the pipeline and the fields."""
    by_name = {p.name: p for p in pipes}
    for name, fields in (reads or {}).items():
        pipe = by_name.get(name)
        if pipe is None:
            raise PipelineError(f"the release reads pipeline {name!r}, which this build does not have "
                                f"(it has {sorted(by_name)})")
        out = pipe.output_fields()
        if out is None:
            continue
        missing = [k for k in fields if k not in out and not _optional(fields[k])[0]]
        if missing:
            raise PipelineError(f"the release reads field(s) {missing} of pipeline {name!r}, which its stages do not "
                                f"write (its rows hold {sorted(out)})")
        clash = [f"{k} ({fields[k]} read, {out[k]} written)" for k in fields
                 if k in out and not _same_type(_optional(fields[k])[1], out[k])]
        if clash:
            raise PipelineError(f"the release reads field(s) of pipeline {name!r} as another type: " + "; ".join(clash))


def check_requirements(stages: list[Any], where: str) -> None:
    """Every optional package the ``stages`` need is installed, else :class:`PipelineError` naming the extra."""
    missing = [(s.name, r) for s in stages for r in s.missing_requirements()]
    if missing:
        extras = sorted({r.extra for _, r in missing})
        raise PipelineError(
            f"pipeline {where!r} needs " + ", ".join(f"{r.module} (stage {n!r})" for n, r in missing)
            + f": pip install -e '.[{','.join(extras)}]'")

