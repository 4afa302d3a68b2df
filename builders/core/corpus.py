"""What a corpus provides to the build: the :class:`Corpus` protocol.

A corpus is a module (a package under ``builders/corpora/``, registered by one line in ``builders.corpora.CORPORA``)
whose top level holds the members below. ``builders.core.driver.run_build`` and the CLI ``builders/build.py`` use
nothing else of it, so any module with these members can be built, tests' toy corpora included. The protocol lives in
``builders.core`` because the driver is typed against it; ``builders.corpora`` and ``builders.api`` re-export it.

A module satisfies the protocol structurally (PEP 544: a module can implement a protocol; its functions take the
parameters below without ``self``). ``isinstance(module, Corpus)`` checks that every member is present;
``tests/test_api.py`` checks the four corpora member by member.

Optional members, read with a default (a protocol cannot declare an optional attribute):

- ``SAMPLE_SHARD_SIZE: int | None``: rows per work shard when the bundled sample is built (no input given and no
  ``--shard-size``); absent or None means ``DEFAULT_SHARD_SIZE``. HowToStep cuts its 14-video sample into shards of 8
  so that its kill-and-resume tests have shards to resume.
- ``RELEASE_READS: Mapping[str, Mapping[str, type]]``: the fields ``release`` reads from each pipeline's output rows
  (pipeline name -> field -> type, ``typing.Any`` when loose). The driver checks them against the pipelines' row
  contracts when they are assembled, before any work (``PipelineError`` naming the pipeline and field), and the
  release then reads those fields only: a field it reads without declaring it fails the build (``KeyError``).
- ``check_config(cfg)``: the corpus's own checks of its resolved config, before any work: raises ``ConfigError``
  (exit 2) for an encoder this machine cannot load offline, a malformed LLM replay source, an unknown prompt id or a
  missing template (the four corpora call ``builders.models.config_checks.check_model_config`` and their prompts).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .orchestrate import BuildResult
    from .step import Pipeline


@runtime_checkable
class Corpus(Protocol):
    """The members of a corpus module, in the order a build uses them (``builders/core/driver.py``)."""

    #: the corpus name: the CLI subcommand, the release folder ``<out>/<NAME>/`` and the work folder
    #: ``<out>/.work/<NAME>/`` (equal to its key in ``builders.corpora.CORPORA``)
    NAME: str

    #: the config class: a dataclass whose defaults are the paper's, one field per config key (``--config`` and
    #: ``--set`` name these fields; ``docs/configuration.md`` is generated from their comments). ``Config()`` must
    #: work without arguments; an optional ``validate()`` method raises ``ConfigError`` for a value out of range, and
    #: a ``limit: int | None`` field takes ``--limit``
    Config: type[Any]

    #: rows (videos, pages) per work shard for real inputs: the unit of caching, resume and per-item invalidation;
    #: ``--shard-size`` overrides it
    DEFAULT_SHARD_SIZE: int

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the corpus's own flags (its inputs, a few config switches) to its CLI subcommand, as a group of
        ``parser``. Each flag's ``dest`` is the name ``build_corpus(inputs={...})`` takes; no flag may reuse a
        ``BuildOptions`` field name. A flag's default is None (or False for a switch): "not given"."""

    def overrides_from_args(self, args: argparse.Namespace) -> dict[str, Any]:
        """The config overrides of the flags given in ``args`` (a namespace holding at least every ``dest`` of
        :meth:`add_arguments`, None where not given): ``{config key: value}``, only for the flags given. They rank
        above the ``--config`` file and below ``--set``."""

    def resolve_inputs(self, cfg: Any) -> tuple[Any, bool]:
        """``(cfg, sample)``: with no input in ``cfg``, the config of the bundled sample (its paths, and the settings
        that make it build in minutes on a CPU) and True; otherwise ``cfg`` (completed) and False. Whole-file
        problems are raised here, before any work: ``FileNotFoundError`` for a missing input, ``ConfigError`` or
        ``InputError`` for an unusable one (exit 2). Must not load a model."""

    def pipelines(self, cfg: Any, shard_size: int) -> list[Pipeline]:
        """The pipelines to run, in order (a later pipeline may read an earlier one's output), each a source and a
        list of steps cut into shards of ``shard_size`` rows."""

    def release(self, result: BuildResult, cfg: Any, out_dir: Path,
                info: dict[str, Any]) -> Mapping[str, Mapping[str, int]]:
        """Write the release folder ``out_dir`` (normally through the release writer, ``write_release``:
        Parquet configs, card, ``stats.json``, report) from the pipelines' ``result`` and return its row counts,
        ``{config: {split: rows}}``. ``info`` holds what the build did (``sample``, ``engine``, ``workers``,
        ``shard_size``, ``build_seconds``, ``work_dir``) for ``stats.json``. A ``ReleaseCounts`` with
        ``up_to_date=True`` says the release in place was current and was left untouched. Raises ``BuildEmpty`` when
        nothing survived (exit 3)."""


def sample_shard_size(corpus: Corpus) -> int | None:
    """The corpus's optional ``SAMPLE_SHARD_SIZE`` (None when it has none)."""
    return getattr(corpus, "SAMPLE_SHARD_SIZE", None)


def input_flags(*names: str) -> tuple[Callable[[argparse.ArgumentParser], None],
                                      Callable[[argparse.Namespace], dict[str, Any]]]:
    """``(add_arguments, overrides_from_args)`` of a corpus whose flags are its input paths, one ``--<name>`` a config
    key ``name`` (``--raw-caption`` for ``raw_caption``)."""

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("inputs")
        for name in names:
            group.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar="PATH")

    def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
        return {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}

    return add_arguments, overrides_from_args


def without_sample(cfg: Any) -> tuple[Any, bool]:
    """``resolve_inputs`` of a corpus that bundles no sample: the config as given."""
    return cfg, False
