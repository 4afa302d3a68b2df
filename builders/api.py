"""The Python API: build a corpus from a script or a notebook, with the options of ``python -m builders.build``.

    from builders import build_corpus

    r = build_corpus("marc", out="releases")                      # the bundled sample, as the CLI with no input
    r.release, r.rows                                             # Path("releases/marc"), {"recipes": {...}, ...}
    build_corpus("sieve_swap", out="/data/releases", config={"sim_threshold": 0.8}, workers=4,
                 inputs={"videos": "HowTo100M_v1.csv", "transcripts": "raw_caption.json",
                         "recipes": "full_dataset.csv", "exclude": ["test_list.txt"]})

``build_corpus`` raises the exceptions the CLI turns into its exit codes (``builders.build.failure``): a
``ConfigError`` for an unknown corpus, config key, input or value (exit 2), ``FileNotFoundError`` for a missing
input, ``BuildEmpty`` (3), ``BuildIncomplete`` (4), ``ErrorRateExceeded`` (5), ``PublishError``. The CLI is a layer
over :func:`build_from_options` (docs/python-api.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .core.config import ConfigError
from .core.corpus import Corpus
from .core.driver import BuildOptions, BuildOutcome

__all__ = ["BuildOptions", "BuildOutcome", "ConfigError", "Corpus", "build_corpus", "build_from_options",
           "corpus_names", "load_corpus"]

#: the parameters of build_corpus that are not BuildOptions fields given by name
_OWN = ("out", "work_dir", "config", "inputs")
#: BuildOptions fields build_corpus takes as keyword arguments (``sets``: through ``config``)
SETTINGS = tuple(f.name for f in dataclasses.fields(BuildOptions) if f.name not in (*_OWN, "sets"))

ConfigSpec = str | os.PathLike | Mapping[str, Any] | Sequence[str | os.PathLike | Mapping[str, Any]]


def corpus_names() -> list[str]:
    """The corpora that can be built (``builders.corpora.CORPORA``)."""
    from .corpora import CORPORA

    return [name for name, module in CORPORA.items() if module]


def load_corpus(name: str) -> Corpus:
    """The module of corpus ``name`` (``UnknownCorpus``, a ``ConfigError``, for a name not in :func:`corpus_names`)."""
    from .corpora import load

    return load(name)


def _split_config(config: ConfigSpec | None) -> tuple[str | os.PathLike | None, dict[str, Any]]:
    """``config`` -> (the YAML file, the mapping of ``--set`` keys)."""
    if config is None:
        return None, {}
    items = [config] if isinstance(config, (str, os.PathLike, Mapping)) else list(config)
    file: str | os.PathLike | None = None
    sets: dict[str, Any] = {}
    for item in items:
        if isinstance(item, Mapping):
            for key, value in item.items():
                if not isinstance(key, str):
                    raise ConfigError(f"config keys are strings, got {key!r}")
                sets[key] = _plain(value)
        elif isinstance(item, (str, os.PathLike)):
            if file is not None:
                raise TypeError("config: one YAML file at most (as --config), and mappings")
            file = item
        else:
            raise TypeError(f"config: a YAML file path, a mapping of config keys or a list of them, got {item!r}")
    return file, sets


def _plain(value: Any) -> Any:
    """A config value with its paths as strings (``Path("a.txt")`` -> ``"a.txt"``, in lists too), as ``--set``
    gives them."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def build_corpus(corpus: str | Corpus, *, out: str | os.PathLike | None = None,
                 work_dir: str | os.PathLike | None = None, config: ConfigSpec | None = None,
                 inputs: Mapping[str, Any] | None = None, options: BuildOptions | None = None,
                 **settings: Any) -> BuildOutcome:
    """Build ``corpus`` into ``out/<corpus>`` as ``python -m builders.build <corpus>`` does, and return what it made.

    - ``corpus``: a name (``"marc"``) or a corpus module (:class:`~builders.core.corpus.Corpus`).
    - ``out``: the folder the release goes to (``--out``); required unless ``options`` is given.
    - ``work_dir``: caches and work shards (``--work-dir``; default ``out/.work/<corpus>``).
    - ``config``: a YAML file (``--config``), a mapping of config keys (``--set``: ``{"sim_threshold": 0.8}``,
      values as Python values), or a list of one file and mappings; the mappings rank above the inputs, as ``--set``.
    - ``inputs``: the corpus's flags by name without dashes, ``{"videos": "v.csv", "video_ids": ...}`` (dest or
      option name; a repeatable flag takes a list, a switch True). None or ``{}``: the bundled sample.
    - ``options``: a :class:`BuildOptions` to start from; ``settings`` replace its fields by name:
      ``model_outputs``, ``engine``, ``workers``, ``ray_address``, ``gpus``, ``shard_size``, ``limit``, ``retries``,
      ``retry_errors``, ``max_error_rate``, ``keep_generations``, ``fresh``, ``wait``, ``progress``, ``quiet``,
      ``debug``, ``push``, ``version``, ``private``, ``push_timeout``, ``push_deadline`` (defaults and meaning:
      :class:`BuildOptions`).

    Prints the summary table unless ``quiet=True`` (and progress bars unless ``progress=False``), as the CLI does.
    Returns a :class:`BuildOutcome`: ``release`` (the folder), ``rows`` (per config and split), ``stats`` (its
    ``stats.json``), ``summary`` (the table). Raises the CLI's errors (module docstring) instead of exiting.
    """
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"build_corpus() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                        f"the options are {', '.join(SETTINGS)}")
    if options is None and out is None:
        raise TypeError("build_corpus() needs out= (the folder the release goes to) or options=")
    base = options if options is not None else BuildOptions()
    file, sets = _split_config(config)
    changes: dict[str, Any] = dict(settings)
    if out is not None:
        changes["out"] = out
    if work_dir is not None:
        changes["work_dir"] = work_dir
    if file is not None:
        changes["config"] = file
    if sets:
        changes["sets"] = {**base.sets, **sets}
    if inputs:
        changes["inputs"] = {**base.inputs, **inputs}
    return build_from_options(corpus, dataclasses.replace(base, **changes))


def build_from_options(corpus: str | Corpus, options: BuildOptions, *, hard_exit: bool = False) -> BuildOutcome:
    """Build ``corpus`` with ``options``, print the summary unless ``options.quiet``, publish when
    ``options.push`` (the CLI's ``_main``). ``hard_exit``: let the publish watchdog end the process when a stuck
    request outlives the deadline (the CLIs only; ``builders.publish.publish``)."""
    module = load_corpus(corpus) if isinstance(corpus, str) else corpus
    if options.push or options.version or options.private:   # checked before any work
        from .publish import PublishError, check_limits, check_repo_id, parse_version

        if not (options.push and options.version):
            raise PublishError("--push ORG/NAME and --version vX.Y.Z go together")
        parse_version(options.version)
        check_repo_id(options.push)
        check_limits(*_push_limits(options))
    from .core import driver

    outcome = driver.run_build(module, options)
    if not options.quiet:
        print(outcome.summary, flush=True)
    if options.push:
        from .publish import publish

        timeout, deadline = _push_limits(options)
        publish(os.path.join(os.fspath(options.out), module.NAME), options.push, options.version,
                private=options.private, timeout=timeout, deadline=deadline, hard_exit=hard_exit)
    return outcome


def _push_limits(options: BuildOptions) -> tuple[float, float]:
    """``push_timeout`` and ``push_deadline``, None meaning ``builders.publish``'s defaults."""
    from .publish import DEFAULT_DEADLINE, DEFAULT_TIMEOUT

    return (DEFAULT_TIMEOUT if options.push_timeout is None else options.push_timeout,
            DEFAULT_DEADLINE if options.push_deadline is None else options.push_deadline)
