"""``python -m builders.build <corpus> [options]``: build a corpus release (bundled sample when no input is given).

A thin layer over the Python API (``builders.api``, docs/python-api.md): the flags fill a ``BuildOptions`` (whose
fields hold the defaults) and ``builders.api.build_from_options`` builds; this module maps exceptions to exit codes.

Exit codes: 0 built; 2 bad config, input or work directory (locked by another build, not ours to ``--fresh``);
3 nothing survived (statistics written beside the last release, which is kept); 4 shards left unfinished by
persistent transient failures (rerun to retry them); 5 a step's error drops exceed ``--max-error-rate``.
With ``--push ORG/NAME --version vX.Y.Z [--private]`` the built release is then published (``builders.publish``;
exit 2 when publishing is refused or fails, the local release stays in place).

One error policy (docs/architecture.md, "Failures"): whatever stops a build ends as exactly one ``error: ...`` line
on stderr and its exit code; an ``OSError`` (a full disk or quota, a permission error, a symlink loop, a read-only
file system) is exit 2 like any bad input or output; an unexpected exception is exit 1 with its one-line summary.
A Python traceback is printed only with ``--debug``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from .core.allocator import tune_arrow_allocator
from .core.config import ConfigError
from .core.driver import ENGINES, BuildOptions
from .corpora import CORPORA, DESCRIPTIONS, CorpusNotBuilt
from .corpora import load as load_corpus


def _common(p: argparse.ArgumentParser) -> None:
    """The build options: one flag per ``BuildOptions`` field (``dest`` = field name), its default read from there."""
    d = BuildOptions()
    g = p.add_argument_group("build options")
    g.add_argument("--out", default=d.out, help="release goes to OUT/<corpus>/ (default: current directory)")
    g.add_argument("--work-dir", default=d.work_dir, help="caches and shards (default: OUT/.work/<corpus>)")
    g.add_argument("--model-outputs", dest="model_outputs", default=d.model_outputs, metavar="DIR",
                   help="model outputs (ASR transcripts) the builds of every corpus share "
                        "(default: OUT/.work/model-outputs)")
    g.add_argument("--config", default=d.config, help="YAML file of config overrides")
    g.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key (repeatable), e.g. --set sim_threshold=0.8")
    g.add_argument("--engine", choices=ENGINES, default=d.engine, help="runner (default: %(default)s)")
    g.add_argument("--workers", type=int, default=d.workers,
                   help="worker processes / Ray actors (default: %(default)s)")
    g.add_argument("--ray-address", default=d.ray_address, help="Ray cluster address (default: start a local Ray)")
    g.add_argument("--limit", type=int, default=d.limit, help="only the first N videos (trial builds)")
    g.add_argument("--fresh", action="store_true", default=d.fresh,
                   help="delete this corpus's caches first (only in a work directory the toolkit made)")
    g.add_argument("--wait", action="store_true", default=d.wait,
                   help="if another build holds the work directory, wait for it instead of exiting")
    g.add_argument("--gpus", type=int, default=d.gpus,
                   help="GPUs to use for GPU steps (default: CUDA_VISIBLE_DEVICES / all visible)")
    g.add_argument("--max-error-rate", dest="max_error_rate", type=float, default=d.max_error_rate,
                   help="fail a step whose rows failing with an error (step_error) exceed this share "
                        "(default %(default)s)")
    g.add_argument("--retry-errors", dest="retry_errors", action="store_true", default=d.retry_errors,
                   help="re-run the shards whose rows were dropped as step_error in an earlier build")
    g.add_argument("--retries", type=int, default=d.retries,
                   help="retries of a transient failure (timeout, connection, CUDA OOM) before a shard is left "
                        "unfinished (default %(default)s)")
    g.add_argument("--shard-size", type=int, default=d.shard_size, help="rows per work shard")
    g.add_argument("--keep-generations", dest="keep_generations", type=int, default=d.keep_generations,
                   metavar="N",
                   help="stage folders kept per stage in the work directory: this build's and the N-1 used most "
                        "recently before it (older ones are deleted; default %(default)s)")
    g.add_argument("--no-progress", dest="progress", action="store_false", default=d.progress,
                   help="no progress bars")
    g.add_argument("-q", "--quiet", action="store_true", default=d.quiet, help="no summary table")
    g.add_argument("--debug", action="store_true", default=d.debug,
                   help="on failure, print the Python traceback before the one-line error")
    h = p.add_argument_group("publish options (build, then python -m builders.publish OUT/<corpus>)")
    h.add_argument("--push", default=d.push, metavar="ORG/NAME", help="publish the release to this Hub dataset repo")
    h.add_argument("--version", default=d.version, metavar="vX.Y.Z", help="the release tag (with --push)")
    h.add_argument("--private", action="store_true", default=d.private,
                   help="create the Hub repo private (with --push)")
    from .publish import add_limit_arguments

    add_limit_arguments(h, prefix="push-")   # --push-timeout, --push-deadline: builders.publish's defaults


def make_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. ``only``: the corpus being built; the other corpora's modules are then not imported (their
    sub-commands keep only the build options), which saves a rebuild about 0.2 s of imports."""
    parser = argparse.ArgumentParser(
        prog="python -m builders.build",
        description="Build a corpus release from raw inputs (the bundled sample when no input is given).",
        epilog="'python -m builders.build CORPUS --help' lists its inputs and options (docs/architecture.md).")
    sub = parser.add_subparsers(dest="corpus", metavar="corpus", required=True)
    for name in CORPORA:
        p = sub.add_parser(name, help=DESCRIPTIONS[name], description=DESCRIPTIONS[name])
        _common(p)
        if CORPORA[name] is not None and only in (None, name):
            load_corpus(name).add_arguments(p)
    return parser


def failure(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one-line message of an exception that stopped a build (docs/architecture.md,
    "Failures"): 2 bad config, input, output or work directory (any ``OSError`` included: full disk, permissions,
    symlink loops); 3 nothing survived; 4 unfinished shards; 5 too many ``step_error`` drops; 130 interrupted;
    1 anything unexpected (a bug: ``--debug`` shows where)."""
    from .core.errors import BuildIncomplete, ErrorRateExceeded, describe_os_error, os_error_in
    from .core.workdir import WorkDirError
    from .publish import PublishError, one_line
    from .release.flow import BuildEmpty
    from .release.gate import ReleaseGateError
    from .release.swap import ReleaseLocked

    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted; rerun the same command to resume (finished shards are kept)"
    if isinstance(exc, BuildEmpty):
        return 3, str(exc)
    if isinstance(exc, BuildIncomplete):
        return 4, f"build incomplete: {exc}"
    if isinstance(exc, ErrorRateExceeded):
        return 5, str(exc)
    if isinstance(exc, PublishError):
        return 2, one_line(str(exc))
    if isinstance(exc, (ConfigError, CorpusNotBuilt, WorkDirError, ReleaseLocked, ReleaseGateError)):
        return 2, str(exc)
    os_error = os_error_in(exc)
    if isinstance(exc, FileNotFoundError) and os_error is exc and exc.errno is None:
        return 2, str(exc)                       # the corpora's "--videos: X does not exist" messages
    if os_error is not None:
        return 2, describe_os_error(os_error)
    return 1, f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"


def main(argv: list[str] | None = None) -> int:
    tune_arrow_allocator()  # before anything imports pyarrow (builders/core/allocator.py)
    words = sys.argv[1:] if argv is None else argv
    args = make_parser(only=words[0] if words and words[0] in CORPORA else None).parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _main(args)
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - the one top-level error policy
        code, message = failure(e)
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"error: {' '.join(message.split())}", file=sys.stderr, flush=True)
        return code


def _main(args: argparse.Namespace) -> int:
    corpus = load_corpus(args.corpus)   # CorpusNotBuilt is a ConfigError-like refusal: exit 2 below
    from .api import build_from_options

    build_from_options(corpus, BuildOptions.from_args(args), hard_exit=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from .publish import exit_now

    exit_now(main(), skip_teardown=True)
