"""Recomputing what a damaged cache file held (docs/architecture.md, "Caching and resume").

A read that finds a cache file of the work directory damaged raises :class:`DamagedCache`. The build then forgets
the entry that owns the file, so the next pass of the pipelines recomputes it from its input and, after it, whatever
read it:

* a work shard's file (``part-00003.parquet``, ``.drops.parquet`` or ``.stats.json``): the shard's ``stats.json`` is
  removed, so the shard is not done; for a source's stage (``00_<source>-<key>``) its ``_complete.json`` too, as a
  source is listed whole;
* a file that work shards' rows name (a block of the HowToStep feature store, in a folder of ``<work_dir>/cache`` a
  step declares in ``Step.owns_cache``): the file and those shards' ``stats.json`` are removed (:func:`owners_of`),
  so the shards are recomputed whole and write the file again;
* an artefact of a global stage's fit (a file under ``<stage>/_fit/``, read by the stage's workers): the file and the
  fit's marker ``_fit/_complete.json`` are removed, so the stage fits again;
* any other cache file (a release part, a cached model output): the file itself is removed, and the reader that owns
  it recomputes it when it finds it missing.

A file outside the work directory is never removed: its damage is raised as it came. The same file found damaged
twice in one build (it was recomputed and is damaged again: a failing disk) is an error, as are more than
``MAX_REPAIRS`` damaged files (the work directory is broken: ``--fresh`` starts it again).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import DamagedCache, error_in

if TYPE_CHECKING:
    from .shards import StageData
    from .step import Step

__all__ = ["MAX_REPAIRS", "Repairs", "damaged_in", "naming_owners", "owners_of"]

#: damaged cache files one build recomputes before it gives up on the work directory
MAX_REPAIRS = 64

_SHARD_FILE = re.compile(r"^(?P<base>part-\d{5})\.(?:parquet|drops\.parquet|stats\.json)\Z")
_SOURCE_STAGE = re.compile(r"^00_.+-[0-9a-f]{12}\Z")


def damaged_in(exc: BaseException) -> DamagedCache | None:
    """The :class:`DamagedCache` that ``exc`` is or was caused by (``builders.core.errors.error_in``), or None."""
    return error_in(exc, DamagedCache)


def owners_of(damaged: DamagedCache, made: list[tuple[Step, StageData]], work_dir: Path) -> list[str]:
    """The ``stats.json`` of the shards, among the stages ``made``, whose rows name ``damaged.path``: a file under
    ``<work_dir>/cache/<folder>`` for a ``folder`` in their step's ``owns_cache``. A stage the runner has not finished
    (a streaming runner) is passed over."""
    path = Path(os.path.abspath(damaged.path))
    try:
        rel = path.relative_to(Path(os.path.abspath(work_dir)) / "cache")
    except ValueError:
        return []
    from .shards import work_shard_name   # pyarrow: the CLI imports this module before it tunes Arrow's allocator

    out: list[str] = []
    for step, data in made:
        if rel.parts and rel.parts[0] in step.owns_cache:
            try:
                shards = step.shards_naming(data, path)
            except (FileNotFoundError, DamagedCache):
                continue
            out += [str(data.dir / f"{work_shard_name(i)}.stats.json") for i in shards]
    return out


@contextlib.contextmanager
def naming_owners(made: list[tuple[Step, StageData]], work_dir: Path) -> Iterator[None]:
    """Within the block, a :class:`DamagedCache` (or an error caused by one) learns its owners (:func:`owners_of`)."""
    try:
        yield
    except Exception as err:
        damaged = damaged_in(err)
        if damaged is not None and not damaged.owners:
            damaged.owners = owners_of(damaged, made, work_dir)
        raise


class Repairs:
    """The damaged cache files one build has forgotten, as paths relative to its work directory."""

    def __init__(self, work_dir: Path, max_repairs: int = MAX_REPAIRS):
        self.work_dir = Path(os.path.abspath(work_dir))
        self.max_repairs = max_repairs
        self.files: list[str] = []

    def forget(self, damaged: DamagedCache, original: BaseException) -> str:
        """Remove what makes the damaged file's entry look done; returns its name relative to the work directory.
        Raises ``original`` when the file is not the build's own, was already recomputed once, or one too many."""
        path = Path(os.path.abspath(damaged.path))
        try:
            name = path.relative_to(self.work_dir).as_posix()
        except ValueError:
            raise original from None
        if name in self.files:
            raise RuntimeError(f"{damaged}; it was recomputed in this build and is damaged again: check the disk "
                               f"of the work directory {self.work_dir.name!r}") from original
        if len(self.files) >= self.max_repairs:
            raise RuntimeError(f"more than {self.max_repairs} damaged cache files in the work directory (the last: "
                               f"{name}); rerun with --fresh to start it again") from original
        m = _SHARD_FILE.match(path.name)
        stats = [path.with_name(f"{m['base']}.stats.json")] if m else []
        for owner in [*stats, *map(Path, damaged.owners)]:
            if not Path(os.path.abspath(owner)).is_relative_to(self.work_dir):
                raise original
            owner.unlink(missing_ok=True)   # the shard is not done; without it no row of it is reused either
            if _SOURCE_STAGE.match(owner.parent.name):
                (owner.parent / "_complete.json").unlink(missing_ok=True)
        fit = next((q for q in path.parents if q.name == "_fit"), None)
        if fit is not None and fit.is_relative_to(self.work_dir):
            (fit / "_complete.json").unlink(missing_ok=True)   # the stage fits again (its artefacts anew)
        path.unlink(missing_ok=True)
        self.files.append(name)
        print(f"warning: damaged cache file {name} ({damaged.why}): recomputing it", file=sys.stderr, flush=True)
        return name
